//! Starting, timing and reaping the Gravity jobs of one case, and the
//! allocation daemon some systems run them under.
//!
//! This module owns the programs (built once with cargo: the `gravity`
//! example and the `ferry` binary, whose `allocd` subcommand is the
//! daemon) and the processes of a case. It must not leave a process
//! behind: a daemon is killed when its case ends, a job that outlives the
//! case's time limit is killed and the case fails.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::JobSize;
use crate::allocd::{self, Scratch};
use crate::report::Error;

/// How a case's jobs run (the module docs of [`super`] table them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// ferry threads, each job on all cores, no daemon.
    Oblivious,
    /// The plain-thread build.
    Pthreads,
    /// ferry threads under `ferry allocd --policy equipartition`.
    Equipartition,
    /// ferry threads under `ferry allocd --policy dynamic`.
    Dynamic,
}

impl System {
    /// Every system, in the tables' order.
    pub const ALL: [System; 4] = [
        System::Oblivious,
        System::Pthreads,
        System::Equipartition,
        System::Dynamic,
    ];

    /// The system's name in rows.
    pub fn label(self) -> &'static str {
        match self {
            System::Oblivious => "oblivious",
            System::Pthreads => "pthreads",
            System::Equipartition => "allocd equipartition",
            System::Dynamic => "allocd dynamic",
        }
    }

    /// The daemon's `--policy`, for the systems that run one.
    fn policy(self) -> Option<&'static str> {
        match self {
            System::Equipartition => Some("equipartition"),
            System::Dynamic => Some("dynamic"),
            System::Oblivious | System::Pthreads => None,
        }
    }
}

/// The longest a case may take before its jobs are killed.
const CASE_LIMIT: Duration = Duration::from_secs(600);

/// The built programs.
#[derive(Debug)]
pub struct Programs {
    gravity: PathBuf,
    ferry: PathBuf,
}

impl Programs {
    /// Builds `gravity` and `ferry` (release) with cargo.
    ///
    /// # Errors
    /// If cargo fails or a program is missing after it.
    pub fn build() -> Result<Programs, Error> {
        let target = allocd::build_release(&["gravity", "ferry-cli"], &["gravity", "ferry"])?;
        Ok(Programs {
            gravity: target.join("gravity"),
            ferry: target.join("ferry"),
        })
    }

    /// Runs `n` jobs at once under `system`, each wanting `cores` workers;
    /// returns the mean time from a job's spawn to its exit.
    ///
    /// # Errors
    /// What failed: the daemon, a job's exit status, the time limit.
    pub fn case(
        &self,
        system: System,
        n: usize,
        cores: usize,
        size: JobSize,
    ) -> Result<Duration, String> {
        let dir = Scratch::new("gravity")?;
        let _daemon = match system.policy() {
            Some(policy) => Some(allocd::daemon(&self.ferry, policy, dir.path())?),
            None => None,
        };
        let mut jobs = Vec::with_capacity(n);
        for _ in 0..n {
            let mut cmd = Command::new(&self.gravity);
            cmd.args(["--bodies", &size.bodies.to_string()])
                .args(["--steps", &size.steps.to_string()])
                .args(["--workers", &cores.to_string()])
                .arg("--json")
                .env("XDG_RUNTIME_DIR", dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            match system {
                System::Pthreads => {
                    cmd.args(["--threads", "std"]);
                }
                System::Oblivious => {
                    cmd.env("FERRY_ALLOCD", "off");
                }
                System::Equipartition | System::Dynamic => {}
            }
            let started = Instant::now();
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", self.gravity.display()))?;
            jobs.push(Job {
                child,
                started,
                took: None,
            });
        }
        let begun = Instant::now();
        while jobs.iter().any(|j| j.took.is_none()) {
            if begun.elapsed() > CASE_LIMIT {
                return Err(format!("jobs still running after {CASE_LIMIT:?}"));
            }
            for job in jobs.iter_mut().filter(|j| j.took.is_none()) {
                if let Some(status) = job.child.try_wait().map_err(|e| e.to_string())? {
                    let took = job.started.elapsed();
                    if !status.success() {
                        let mut err = String::new();
                        if let Some(mut e) = job.child.stderr.take() {
                            let _ = std::io::Read::read_to_string(&mut e, &mut err);
                        }
                        return Err(format!("a job ended with {status}: {}", err.trim()));
                    }
                    job.took = Some(took);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let total: Duration = jobs.iter().filter_map(|j| j.took).sum();
        Ok(total / n as u32)
    }
}

/// A running job.
struct Job {
    child: Child,
    started: Instant,
    took: Option<Duration>,
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.took.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
