//! A stop signal for a thread that looks at something every few milliseconds: it waits on
//! the signal between looks, so stopping it wakes it at once. A flag checked after a sleep
//! makes whoever joins the thread wait out the sleep (half an interval on average, at the end
//! of every step and every build).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// Held by whoever stops the thread: stopping is dropping it.
pub struct Stopper(#[allow(dead_code)] mpsc::Sender<()>);

/// Held by the looking thread.
pub struct StopSignal(mpsc::Receiver<()>);

pub fn stop_signal() -> (Stopper, StopSignal) {
    let (sender, receiver) = mpsc::channel();
    (Stopper(sender), StopSignal(receiver))
}

impl StopSignal {
    /// Waits up to `interval`; true once the [`Stopper`] is dropped.
    pub fn stopped_within(&self, interval: Duration) -> bool {
        !matches!(
            self.0.recv_timeout(interval),
            Err(RecvTimeoutError::Timeout)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn dropping_the_stopper_wakes_the_waiting_thread_at_once() {
        let (stopper, signal) = stop_signal();
        assert!(!signal.stopped_within(Duration::from_millis(1)));
        let waiter = std::thread::spawn(move || {
            let start = Instant::now();
            let stopped = signal.stopped_within(Duration::from_secs(60));
            (stopped, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(stopper);
        let (stopped, waited) = waiter.join().unwrap();
        assert!(stopped);
        // Woken by the drop, not by the 60 s timeout (a bound no loaded machine comes near).
        assert!(waited < Duration::from_secs(30), "waited {waited:?}");
    }
}
