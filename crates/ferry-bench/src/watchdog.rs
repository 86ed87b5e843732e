//! Kernel threads that watch a run from outside it: [`poll`] runs a check
//! every period until the check says stop, and [`hang`] ends the process
//! when a scenario overruns its deadline.
//!
//! This module owns the watching threads only. They are started outside
//! any ferry runtime, so they are not pinned with a processor, and they
//! never touch what a run measures beyond the flags their caller gives
//! them.

use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Spawns a kernel thread named `name` that calls `check` and then sleeps
/// `period`, until `check` returns `false`.
pub fn poll(
    name: &str,
    period: Duration,
    mut check: impl FnMut() -> bool + Send + 'static,
) -> JoinHandle<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            while check() {
                thread::sleep(period);
            }
        })
        .expect("cannot spawn a watchdog thread")
}

/// The last-resort guard against a scenario that hangs (a ferry thread
/// that is never run again cannot be timed out from inside): one kernel
/// thread that checks the deadline of the scenario under way and, past it,
/// says which scenario hung and ends the process with status 3.
pub mod hang {
    use std::sync::{Mutex, Once, PoisonError};
    use std::time::{Duration, Instant};

    /// The scenario under way and its deadline.
    static WATCHED: Mutex<Option<(String, Instant)>> = Mutex::new(None);

    /// Watches `what` until [`unwatch`]: if it is still under way after
    /// `limit`, the process prints so on stderr and exits with status 3.
    pub fn watch(what: &str, limit: Duration) {
        static START: Once = Once::new();
        START.call_once(|| {
            drop(super::poll("hang-watchdog", Duration::from_millis(100), || {
                let w = WATCHED.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((what, deadline)) = &*w
                    && Instant::now() > *deadline
                {
                    eprintln!(
                        "ferry-bench: HANG: {what} did not finish in time; giving up (exit status 3)"
                    );
                    std::process::exit(3);
                }
                true
            }));
        });
        *WATCHED.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((what.to_owned(), Instant::now() + limit));
    }

    /// The scenario under way finished.
    pub fn unwatch() {
        *WATCHED.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn poll_runs_until_the_check_says_stop() {
        let n = Arc::new(AtomicU32::new(0));
        let m = Arc::clone(&n);
        poll("test", Duration::from_millis(1), move || {
            m.fetch_add(1, Ordering::Relaxed) < 2
        })
        .join()
        .unwrap();
        assert_eq!(n.load(Ordering::Relaxed), 3);
    }
}
