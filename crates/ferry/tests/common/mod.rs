//! What ferry's test files share: a watchdog that turns a hang (a lost
//! wakeup, a blocked processor, a thread that did not stop) into a failure
//! instead of a test run that never ends.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The step each watched piece last reported ([`step`]), by its `what`.
static STEPS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// Records that the piece watched as `what` (the `what` given to
/// [`within`]) reached `step`: a hang then names the last step reached.
#[allow(dead_code)] // not every test file uses it
pub fn step(what: &str, step: impl Into<String>) {
    STEPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(what.to_owned(), step.into());
}

/// The last step `what` reported, if any.
fn last_step(what: &str) -> Option<String> {
    STEPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(what)
        .cloned()
}

/// How long one watched piece of a test may take before the test fails.
#[allow(dead_code)] // not every test file uses it
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `f` on a kernel thread of its own and returns its value; passes a
/// panic of `f` on, and fails (panics, naming `what`) if `f` has not
/// returned within `limit`, with the last [`step`] it reported. A hung `f`
/// is abandoned: the test binary exits anyway.
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
        Err(RecvTimeoutError::Timeout) => match last_step(what) {
            Some(step) => panic!("hung for {limit:?}: {what} (last step: {step})"),
            None => panic!("hung for {limit:?}: {what}"),
        },
    }
}

/// Runs this test binary again as a child process whose only test is the
/// one named `child`, with `role` in the environment variable `var`
/// (the child's test reads it and plays that role); stdin and stdout are
/// piped.
#[allow(dead_code)] // not every test file uses it
pub fn spawn_child(var: &str, role: &str) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(var, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for the child's first line that holds `word` (the test harness
/// may have printed the test's name before it on the same line), and
/// returns the line from `word` on.
#[allow(dead_code)] // not every test file uses it
pub fn wait_for(child: &mut std::process::Child, word: &str) -> String {
    use std::io::{BufRead, BufReader};
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("child ended before saying {word}");
        }
        if let Some(at) = line.find(word) {
            return line[at..].to_owned();
        }
    }
}
