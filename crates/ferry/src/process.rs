//! Waiting for child processes without stopping the runtime: [`wait`],
//! [`wait_with_output`], [`output`] and [`status`] run std's waits through
//! [`crate::blocking`], so the calling thread's processor keeps running
//! other ferry threads meanwhile. Spawning stays `std::process::Command`'s.
//!
//! This module owns thin functions over `std::process`; it must not hold a
//! ferry lock, park, or switch threads inside a blocking call, and keeps no
//! state (no child table, no `SIGCHLD` handler). Outside a ferry runtime
//! every call is just the std call.
//!
//! ```
//! use std::process::Command;
//!
//! ferry::run(|| {
//!     let out = ferry::process::output(Command::new("/bin/echo").arg("hi")).unwrap();
//!     assert!(out.status.success());
//!     assert_eq!(out.stdout, b"hi\n");
//! })
//! .unwrap();
//! ```
//!
//! [`wait`] is retried if interrupted by a signal
//! ([`io::ErrorKind::Interrupted`]; ferry may preempt with a signal, and
//! `SA_RESTART` does not restart every call). The others are run once: std
//! already retries interrupted `waitpid`s and pipe reads inside them, and
//! running [`output`] or [`status`] again would run the program again. Why
//! errno is read safely is told in [`crate::fs`].

use std::io;
use std::process::{Child, Command, ExitStatus, Output};

use crate::fs::{call, call_once};

/// Waits for `child` to exit, as [`Child::wait`] (closing its stdin first,
/// so a child reading it sees end of file); retried if interrupted. Once the
/// child has been waited for, later calls return the same status at once.
///
/// # Errors
/// As [`Child::wait`].
pub fn wait(child: &mut Child) -> io::Result<ExitStatus> {
    call(|| child.wait())
}

/// Waits for `child` to exit while collecting whatever it writes to its
/// piped stdout and stderr, as [`Child::wait_with_output`] (streams not
/// piped come back empty).
///
/// # Errors
/// As [`Child::wait_with_output`].
pub fn wait_with_output(child: Child) -> io::Result<Output> {
    call_once(move || child.wait_with_output())
}

/// Runs `cmd` to completion and collects its stdout and stderr, as
/// [`Command::output`] (stdin null and stdout and stderr piped unless `cmd`
/// says otherwise). Spawning runs inside the blocking call too.
///
/// # Errors
/// As [`Command::output`], e.g. [`io::ErrorKind::NotFound`] if the program
/// does not exist. A program that fails is not an error: see the returned
/// status.
pub fn output(cmd: &mut Command) -> io::Result<Output> {
    call_once(|| cmd.output())
}

/// Runs `cmd` to completion and returns its exit status, as
/// [`Command::status`] (stdin, stdout and stderr inherited unless `cmd`
/// says otherwise). Spawning runs inside the blocking call too.
///
/// # Errors
/// As [`Command::status`], e.g. [`io::ErrorKind::NotFound`] if the program
/// does not exist.
pub fn status(cmd: &mut Command) -> io::Result<ExitStatus> {
    call_once(|| cmd.status())
}
