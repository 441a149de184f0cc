//! SIGINT, SIGTERM and SIGHUP sent to pgo-build.
//!
//! Workloads run in process groups of their own, so Ctrl-C at the terminal reaches pgo-build
//! but not them. While a workload or a stage's cargo build runs, the handler only records the
//! signal; the loop waiting for the workload (or the build's watcher) sees it, stops its
//! processes (SIGTERM, grace period, SIGKILL) and returns [`Interrupted`], and pgo-build exits
//! with 128 + the signal number. At any other time the signal keeps its default action.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Set by a workload loop that acted on the signal (stopped its workload, returned
/// [`Interrupted`]).
static HANDLED: AtomicBool = AtomicBool::new(false);
/// Workloads running now (several when variants are counted side by side).
static WORKLOADS_RUNNING: AtomicUsize = AtomicUsize::new(0);

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(signal: libc::c_int) {
    if WORKLOADS_RUNNING.load(Ordering::SeqCst) > 0 {
        RECEIVED.store(signal, Ordering::SeqCst);
    } else {
        default_action(signal);
    }
}

fn default_action(signal: libc::c_int) {
    // SAFETY: signal(2) and raise(3) are async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Installs the handler (once, at start-up).
pub fn install() {
    for signal in SIGNALS {
        // SAFETY: the handler only touches atomics and calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Marks a workload as running until dropped: signals are recorded, not acted on.
pub struct WorkloadWindow(());

impl WorkloadWindow {
    pub fn open() -> WorkloadWindow {
        WORKLOADS_RUNNING.fetch_add(1, Ordering::SeqCst);
        WorkloadWindow(())
    }

    /// The signal received while a workload ran, if any. The caller stops its workload and
    /// returns [`Interrupted`]; every workload running at the time sees the same signal.
    pub fn take_signal(&self) -> Option<i32> {
        match RECEIVED.load(Ordering::SeqCst) {
            0 => None,
            signal => {
                HANDLED.store(true, Ordering::SeqCst);
                Some(signal)
            }
        }
    }
}

impl Drop for WorkloadWindow {
    fn drop(&mut self) {
        if WORKLOADS_RUNNING.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        // The last workload ended. A signal no workload loop acted on (it arrived after they
        // last looked) takes its default action now.
        let signal = RECEIVED.swap(0, Ordering::SeqCst);
        let handled = HANDLED.swap(false, Ordering::SeqCst);
        if signal != 0 && !handled {
            default_action(signal);
        }
    }
}

/// pgo-build was interrupted while a workload or a build ran; its processes were stopped.
#[derive(Debug)]
pub struct Interrupted {
    pub signal: i32,
    /// What ran: "workload `t0` ran against the instrumented binaries", "the cargo build of
    /// the baseline stage ran".
    pub during: String,
    /// "coordinator (pid 12, SIGTERM), …"
    pub stopped: String,
}

impl Interrupted {
    pub fn exit_code(&self) -> u8 {
        (128 + self.signal).clamp(0, 255) as u8
    }
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted by {} while {}; stopped its processes: {}. The interrupted step is not \
             recorded as complete and none of its outputs are used: run the same command again \
             (`pgo-build run` resumes at the first step that did not complete).",
            signal_name(self.signal),
            self.during,
            if self.stopped.is_empty() {
                "none were left"
            } else {
                &self.stopped
            }
        )
    }
}

impl std::error::Error for Interrupted {}
