//! Lets programs that are stopped by signals still write their PGO profile.
//!
//! An instrumented program writes its profile from an exit handler, so a process stopped by
//! SIGTERM's or SIGINT's default action (the way orchestrators stop servers and their workers)
//! leaves an empty profile, and its binary would be optimized from nothing. Call [`install`]
//! first thing in `main`:
//!
//! ```
//! pgo_build_rt::install();
//! ```
//!
//! In pgo-build's instrumented build (`--cfg pgo_build_instrument`) it installs SIGTERM and
//! SIGINT handlers that write the profile and then let the signal terminate the process as it
//! would have. In every other build it does nothing and costs nothing, with one exception:
//! builds that BOLT will post-process (`--cfg pgo_build_bolt_input`, set by pgo-build only when
//! BOLT is enabled) read one environment variable at `install()`. When pgo-build's BOLT training
//! sets it, SIGTERM/SIGINT end the process with `exit(128 + signal)`, which runs the exit path
//! where BOLT's instrumentation writes its profile. Signals that already have a handler (a
//! program with its own graceful shutdown) are left alone.
//!
//! Long-running servers can call [`flush`] to write the profile so far, e.g. from an admin
//! endpoint, so a later SIGKILL loses only what came after.
//!
//! A process writes one profile, whatever the order of signal, flush and exit: the signal
//! thread, [`flush`] and an exit handler of this crate (which runs before the runtime's own)
//! take one lock. A per-process file is emptied before each write, since the runtime appends
//! and llvm-profdata would read a second copy as more counts (or, when two writes overlap, as
//! a malformed file).
//!
//! The cfg is evaluated here, never in the caller: code behind a cfg changes the control-flow
//! hash of the function containing it, which would then get no profile data in the optimized
//! build. The functions below are `#[inline(never)]` for the same reason.

/// Whether this is an instrumented build (pgo-build's `--cfg pgo_build_instrument`).
pub const INSTRUMENTED: bool = cfg!(pgo_build_instrument);

/// Set by pgo-build while training BOLT-instrumented binaries.
pub const BOLT_TRAINING_ENV: &str = "PGO_BUILD_BOLT_TRAINING";

/// Installs the SIGTERM/SIGINT handlers in instrumented builds (and in BOLT training); does
/// nothing otherwise. Calling it again does nothing.
#[inline(never)]
pub fn install() {
    #[cfg(pgo_build_instrument)]
    if signal_thread::install(instrumented::write_and_reraise) {
        // SAFETY: registers a plain `extern "C" fn()`.
        unsafe { libc::atexit(instrumented::on_exit) };
    }
    #[cfg(all(pgo_build_bolt_input, not(pgo_build_instrument)))]
    if std::env::var_os(BOLT_TRAINING_ENV).is_some() {
        signal_thread::install(bolt_training::exit_normally);
    }
}

/// Writes the profile collected so far (instrumented builds; `Ok` otherwise).
///
/// With a profile file pattern that merges (`%m`), the counters are reset after writing, or
/// the next write would count everything twice. With a per-process file (`%p`, pgo-build's
/// default) the next write replaces this one, so the counters must keep running. In continuous
/// mode (`%c`) the counters already live in the file and nothing needs doing.
#[inline(never)]
pub fn flush() -> std::io::Result<()> {
    #[cfg(pgo_build_instrument)]
    return instrumented::flush();
    #[cfg(not(pgo_build_instrument))]
    Ok(())
}

/// What a flush must do for a given `LLVM_PROFILE_FILE` pattern (`None`: the pattern compiled
/// in with `-Cprofile-generate`, `default_%m.profraw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushAction {
    Nothing,
    Write,
    WriteAndReset,
}

pub fn flush_action(pattern: Option<&str>) -> FlushAction {
    let pattern = pattern.unwrap_or("default_%m.profraw");
    let specifiers: Vec<char> = pattern
        .split('%')
        .skip(1)
        .filter_map(|rest| rest.chars().find(|c| !c.is_ascii_digit()))
        .collect();
    if specifiers.contains(&'c') {
        FlushAction::Nothing
    } else if specifiers.contains(&'m') {
        FlushAction::WriteAndReset
    } else {
        FlushAction::Write
    }
}

#[cfg(pgo_build_instrument)]
mod instrumented {
    use std::ffi::{CStr, c_char, c_int, c_uint};
    use std::sync::Mutex;

    use super::{FlushAction, flush_action};

    // Provided by LLVM's profiler runtime, which rustc links into instrumented binaries only:
    // declaring them in any other build would fail to link.
    unsafe extern "C" {
        fn __llvm_profile_write_file() -> c_int;
        fn __llvm_profile_reset_counters();
        fn __llvm_profile_get_filename() -> *const c_char;
        /// Makes the runtime's own exit-time write a no-op (what `__llvm_profile_dump` sets,
        /// without its warning about clobbering).
        fn lprofSetProfileDumped(value: c_uint);
    }

    /// Where the process is with its profile. One profile write per process at a time, and
    /// none after the last: two writes into a per-process file append (llvm-profdata then
    /// reads the counts twice), and two at once interleave into a file it calls malformed.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        /// `flushed`: a flush wrote into the file, which the final write must replace.
        Running { flushed: bool },
        /// The process is exiting normally: the runtime's exit handler writes the profile.
        Exiting,
        /// Written for the last time (on a signal): the runtime's exit handler skips it.
        Written,
    }

    static STATE: Mutex<State> = Mutex::new(State::Running { flushed: false });

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registered by `install`, after the profiler runtime registered its own exit handler,
    /// so it runs first (exit handlers run in reverse order): from here on the runtime's
    /// handler writes, and a signal arriving now does not write beside it.
    pub extern "C" fn on_exit() {
        let mut state = state();
        if let State::Running { flushed } = *state {
            if flushed {
                empty_profile_file();
            }
            *state = State::Exiting;
        }
    }

    /// Empties the process's own profile file. The runtime appends to it, and it must hold
    /// one profile, the last.
    fn empty_profile_file() {
        // SAFETY: the runtime returns its current file name, or null.
        let name = unsafe { __llvm_profile_get_filename() };
        if name.is_null() {
            return;
        }
        // SAFETY: a NUL-terminated string owned by the runtime.
        let path = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path);
    }

    /// Writes the counters into the file. A per-process file is emptied first (see
    /// `empty_profile_file`); into a merging pool (`%m`) the runtime merges.
    fn write(action: FlushAction) -> c_int {
        if action == FlushAction::Write {
            empty_profile_file();
        }
        // SAFETY: runtime function without preconditions; this thread holds STATE.
        unsafe { __llvm_profile_write_file() }
    }

    pub fn flush() -> std::io::Result<()> {
        let pattern = std::env::var("LLVM_PROFILE_FILE").ok();
        let action = flush_action(pattern.as_deref());
        let mut state = state();
        let State::Running { .. } = *state else {
            return Ok(());
        };
        if action == FlushAction::Nothing {
            return Ok(());
        }
        *state = State::Running {
            flushed: action == FlushAction::Write,
        };
        if write(action) != 0 {
            return Err(std::io::Error::other(
                "the profiler runtime could not write the profile",
            ));
        }
        if action == FlushAction::WriteAndReset {
            // SAFETY: runtime function without preconditions.
            unsafe { __llvm_profile_reset_counters() };
        }
        Ok(())
    }

    /// Writes the whole profile so far, then terminates the way the signal would have; when
    /// the process is already exiting normally, lets the exit write it instead.
    pub fn write_and_reraise(signal: c_int) {
        {
            let mut state = state();
            match *state {
                State::Exiting => return,
                State::Written => {}
                State::Running { .. } => {
                    let pattern = std::env::var("LLVM_PROFILE_FILE").ok();
                    let action = flush_action(pattern.as_deref());
                    if action != FlushAction::Nothing {
                        write(action);
                    }
                    *state = State::Written;
                    // SAFETY: runtime function without preconditions.
                    unsafe { lprofSetProfileDumped(1) };
                }
            }
        }
        super::signal_thread::reraise(signal);
    }
}

#[cfg(all(pgo_build_bolt_input, not(pgo_build_instrument)))]
mod bolt_training {
    use std::ffi::c_int;

    /// BOLT's instrumentation writes its profile from the exit path, which a signal's default
    /// action skips: exit the way a shell reports a signal death instead.
    pub fn exit_normally(signal: c_int) {
        // SAFETY: exit(3) runs the exit handlers and ends the process.
        unsafe { libc::exit(128 + signal) };
    }
}

/// SIGTERM/SIGINT handling shared by both builds: the handler only writes the signal number to
/// a pipe (async-signal-safe); a thread reads it and does the real work outside signal context.
#[cfg(any(pgo_build_instrument, pgo_build_bolt_input))]
mod signal_thread {
    use std::ffi::c_int;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    static INSTALLED: AtomicBool = AtomicBool::new(false);
    static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

    /// One line on stderr. Not `eprintln!`, which panics on a closed stderr: this runs inside
    /// the user's program.
    fn say(line: &str) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    /// Starts the signal thread and installs the handlers; `true` the first time.
    pub fn install(action: fn(c_int)) -> bool {
        if INSTALLED.swap(true, Ordering::SeqCst) {
            return false;
        }
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            say(
                "pgo-build-rt: could not create a pipe; profiles of signalled processes will be lost",
            );
            return false;
        }
        SIGNAL_PIPE.store(fds[1], Ordering::SeqCst);
        let reader = fds[0];
        let spawned = std::thread::Builder::new()
            .name("pgo-build-rt".into())
            .spawn(move || {
                // The action ends the process, or returns when it is already ending.
                if let Some(signal) = wait_for_signal(reader) {
                    action(signal);
                }
            });
        if spawned.is_err() {
            say(
                "pgo-build-rt: could not start its thread; profiles of signalled processes will be lost",
            );
            return false;
        }
        for signal in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: sigaction with valid pointers; an all-zero sigaction is a valid value.
            unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut current);
                if current.sa_sigaction != libc::SIG_DFL {
                    continue; // The program handles it itself.
                }
                let mut handler: libc::sigaction = std::mem::zeroed();
                handler.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
                handler.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut handler.sa_mask);
                libc::sigaction(signal, &handler, std::ptr::null_mut());
            }
        }
        true
    }

    extern "C" fn on_signal(signal: c_int) {
        let fd = SIGNAL_PIPE.load(Ordering::SeqCst);
        let bytes = signal.to_ne_bytes();
        // SAFETY: write(2) is async-signal-safe; `bytes` outlives the call.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    }

    fn wait_for_signal(reader: c_int) -> Option<c_int> {
        let mut bytes = [0u8; 4];
        loop {
            // SAFETY: reading into a 4-byte buffer we own.
            let read = unsafe { libc::read(reader, bytes.as_mut_ptr().cast(), bytes.len()) };
            if read == 4 {
                return Some(c_int::from_ne_bytes(bytes));
            }
            if read < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            return None;
        }
    }

    /// Terminates the process with the signal's default action.
    #[cfg(pgo_build_instrument)]
    pub fn reraise(signal: c_int) {
        // SAFETY: plain libc calls on this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
        // Only reached if the signal is blocked everywhere; exit as a shell reports it.
        std::thread::sleep(std::time::Duration::from_secs(1));
        // SAFETY: ends the process without running exit handlers (the work is done).
        unsafe { libc::_exit(128 + signal) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_action_follows_the_pattern() {
        assert_eq!(
            flush_action(None),
            FlushAction::WriteAndReset,
            "rustc's default pattern merges"
        );
        assert_eq!(flush_action(Some("/p/%b_%p.profraw")), FlushAction::Write);
        assert_eq!(
            flush_action(Some("/p/%b_%4m.profraw")),
            FlushAction::WriteAndReset
        );
        assert_eq!(
            flush_action(Some("/p/%b_%p%c.profraw")),
            FlushAction::Nothing
        );
        assert_eq!(flush_action(Some("/p/plain.profraw")), FlushAction::Write);
    }

    #[test]
    fn does_nothing_outside_instrumented_builds() {
        const { assert!(!INSTRUMENTED) };
        install();
        flush().unwrap();
    }
}
