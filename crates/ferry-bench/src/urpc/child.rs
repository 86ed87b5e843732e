//! The server process of a `urpc` run: this very binary started again
//! with the hidden `urpc-serve` subcommand, holding the descriptors it
//! needs across `exec`, pinned to its own core, telling its parent it is
//! ready by writing one byte to its stdout.
//!
//! `net` starts its servers through [`ServerProcess::spawn_program`] too.
//!
//! This module owns the starting, the readiness handshake and the ending
//! of that process; what it serves is [`super::server`]'s. Cleanup: the
//! child asks for `SIGKILL` when the thread that started it ends
//! (`PR_SET_PDEATHSIG`, so a parent that dies or panics takes its server
//! with it), [`ServerProcess`] kills and reaps it on drop, and a normal
//! end closes its stdin and waits for it to exit by itself, with a time
//! limit.

use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::sys;
use crate::error::Error;

/// The hidden subcommand the server process runs.
pub const SUBCOMMAND: &str = "urpc-serve";

/// A running server process, killed and reaped on drop unless
/// [`ServerProcess::finish`] saw it exit.
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    stdout: ChildStdout,
    /// The server's stdin: closing it tells a server that waits on it to
    /// exit.
    stdin: Option<ChildStdin>,
}

impl ServerProcess {
    /// Starts this binary as `ferry-bench urpc-serve ARGS`, keeping the
    /// descriptors `keep` open across exec.
    pub fn spawn(args: &[String], keep: &[RawFd]) -> Result<ServerProcess, Error> {
        let exe = std::env::current_exe().map_err(|e| Error(format!("own executable: {e}")))?;
        let mut all = vec![SUBCOMMAND.to_owned()];
        all.extend_from_slice(args);
        ServerProcess::spawn_program(&exe, &all, keep)
    }

    /// Starts `program ARGS` as a server process (the general form of
    /// [`ServerProcess::spawn`]).
    pub fn spawn_program(
        program: &Path,
        args: &[String],
        keep: &[RawFd],
    ) -> Result<ServerProcess, Error> {
        let parent = sys::pid();
        let keep = keep.to_vec();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: the hook runs in the child between fork and exec and
        // only makes async-signal-safe calls (prctl, getppid, fcntl) over
        // memory allocated before the fork (`keep`).
        unsafe {
            cmd.pre_exec(move || {
                sys::die_with_parent(parent)?;
                for &fd in &keep {
                    sys::keep_across_exec(fd)?;
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Error(format!("starting {}: {e}", program.display())))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let stdin = child.stdin.take();
        Ok(ServerProcess {
            child: Some(child),
            stdout,
            stdin,
        })
    }

    /// The server's process id (`None` once reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the server ended, if it has (it stays reaped-on-drop).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits up to `limit` for the server's ready byte.
    ///
    /// # Errors
    /// The server exited (its stdout closed) or stayed silent.
    pub fn wait_ready(&mut self, limit: Duration) -> Result<(), Error> {
        let mut pfd = libc::pollfd {
            fd: self.stdout.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc == 0 {
            return Err(Error(format!("server not ready within {limit:?}")));
        }
        if rc < 0 {
            return Err(Error(format!(
                "waiting for the server: {}",
                std::io::Error::last_os_error()
            )));
        }
        let mut byte = [0u8; 1];
        match self.stdout.read(&mut byte) {
            Ok(1) => Ok(()),
            Ok(_) => Err(Error(format!(
                "server exited before ready ({})",
                self.reap()
            ))),
            Err(e) => Err(Error(format!("reading the server's ready byte: {e}"))),
        }
    }

    /// Closes the server's stdin and waits up to `limit` for it to exit
    /// by itself.
    ///
    /// # Errors
    /// It did not (it is killed), or it exited with a failure.
    pub fn finish(mut self, limit: Duration) -> Result<(), Error> {
        drop(self.stdin.take());
        let child = self.child.as_mut().expect("not yet reaped");
        let deadline = Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return if status.success() {
                        Ok(())
                    } else {
                        Err(Error(format!("server failed: {status}")))
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(None) => return Err(Error(format!("server still running after {limit:?}"))),
                Err(e) => return Err(Error(format!("waiting for the server: {e}"))),
            }
        }
    }

    /// Kills (if still running) and reaps the server; its exit status as
    /// text.
    fn reap(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "reaped".to_owned();
        };
        if let Ok(Some(status)) = child.try_wait() {
            return status.to_string();
        }
        // A short grace: a server that failed is exiting by itself.
        std::thread::sleep(Duration::from_millis(20));
        let _ = child.kill();
        child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn sh(script: &str, keep: &[RawFd]) -> ServerProcess {
        let args = ["-c".to_owned(), script.to_owned()];
        ServerProcess::spawn_program(Path::new("/bin/sh"), &args, keep).unwrap()
    }

    #[test]
    fn kept_descriptors_reach_the_server_and_it_says_ready() {
        let (r, w) = std::io::pipe().unwrap();
        let fd = w.as_raw_fd();
        let mut p = sh(&format!("test -e /proc/self/fd/{fd} && printf R"), &[fd]);
        p.wait_ready(Duration::from_secs(10)).unwrap();
        p.finish(Duration::from_secs(10)).unwrap();
        drop(r);
        // Without `keep`, the close-on-exec descriptor is gone.
        let mut p = sh(&format!("test -e /proc/self/fd/{fd} && printf R"), &[]);
        assert!(p.wait_ready(Duration::from_secs(10)).is_err());
    }

    #[test]
    fn silence_failure_and_overrun_are_errors() {
        let mut p = sh("exit 3", &[]);
        let err = p.wait_ready(Duration::from_secs(10)).unwrap_err();
        assert!(err.0.contains("before ready"), "{err}");
        let mut p = sh("sleep 30", &[]);
        assert!(p.wait_ready(Duration::from_millis(50)).is_err());
        assert!(p.finish(Duration::from_millis(50)).is_err());
        // A server that waits for its stdin to close is let go by finish.
        let p = sh("printf R; cat >/dev/null", &[]);
        p.finish(Duration::from_secs(10)).unwrap();
        let p = sh("printf R; exit 4", &[]);
        assert!(
            p.finish(Duration::from_secs(10))
                .unwrap_err()
                .0
                .contains("4")
        );
    }

    #[test]
    fn a_server_dies_with_the_thread_that_started_it() {
        let pid = std::thread::spawn(|| {
            let p = sh("printf R; exec sleep 30", &[]);
            let pid = p.id().unwrap();
            std::mem::forget(p);
            pid
        })
        .join()
        .unwrap();
        let mut status = 0;
        // SAFETY: waits for our own child `pid`, writing its status into a
        // valid int.
        let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        assert_eq!(rc, pid as libc::pid_t);
        assert!(libc::WIFSIGNALED(status), "status {status:#x}");
        assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    }

    #[test]
    fn drop_kills_a_running_server() {
        let p = sh("printf R; exec sleep 30", &[]);
        let pid = p.id().unwrap();
        drop(p);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
