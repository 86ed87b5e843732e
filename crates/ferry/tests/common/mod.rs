//! What ferry's test files share: a watchdog that turns a hang (a lost
//! wakeup, a blocked processor, a thread that did not stop) into a failure
//! instead of a test run that never ends.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How long one watched piece of a test may take before the test fails.
#[allow(dead_code)] // not every test file uses it
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `f` on a kernel thread of its own and returns its value; passes a
/// panic of `f` on, and fails (panics, naming `what`) if `f` has not
/// returned within `limit`. A hung `f` is abandoned: the test binary exits
/// anyway.
#[allow(dead_code)] // not every test file uses it
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let k = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => {
            k.join().unwrap();
            value
        }
        Err(RecvTimeoutError::Disconnected) => match k.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the watched thread ended without sending"),
        },
        Err(RecvTimeoutError::Timeout) => panic!("hung for {limit:?}: {what}"),
    }
}
