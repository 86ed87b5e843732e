//! Starting, timing and reaping the Gravity jobs of one case, and the
//! allocation daemon some systems run them under.
//!
//! This module owns the programs (built once with cargo: the `gravity`
//! example and the `ferry` binary, whose `allocd` subcommand is the
//! daemon) and the processes of a case. It must not leave a process
//! behind: a daemon is killed when its case ends, a job that outlives the
//! case's time limit is killed and the case fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::JobSize;
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

/// How long a daemon may take to put its socket in place.
const DAEMON_START: Duration = Duration::from_secs(10);

/// The built programs.
#[derive(Debug)]
pub struct Programs {
    gravity: PathBuf,
    ferry: PathBuf,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Programs {
    /// Builds `gravity` and `ferry` (release) with cargo.
    ///
    /// # Errors
    /// If cargo fails or a program is missing after it.
    pub fn build() -> Result<Programs, Error> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let out = Command::new(&cargo)
            .args(["build", "--release", "-p", "gravity", "-p", "ferry-cli"])
            .current_dir(workspace())
            .output()
            .map_err(|e| Error(format!("cannot run cargo: {e}")))?;
        if !out.status.success() {
            return Err(Error(format!(
                "cargo build --release -p gravity -p ferry-cli failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace().join("target"), PathBuf::from)
            .join("release");
        let programs = Programs {
            gravity: target.join("gravity"),
            ferry: target.join("ferry"),
        };
        for p in [&programs.gravity, &programs.ferry] {
            if !p.exists() {
                return Err(Error(format!("{} was not built", p.display())));
            }
        }
        Ok(programs)
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
        let dir = Scratch::new()?;
        let _daemon = match system.policy() {
            Some(policy) => Some(self.daemon(policy, dir.path())?),
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

    /// Starts `ferry allocd --policy policy` with its runtime directory
    /// under `dir`; returns once its socket is in place.
    fn daemon(&self, policy: &str, dir: &Path) -> Result<Reaped, String> {
        let child = Command::new(&self.ferry)
            .args(["allocd", "--policy", policy])
            .env("XDG_RUNTIME_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {} allocd: {e}", self.ferry.display()))?;
        let mut daemon = Reaped(child);
        let socket = dir.join("ferry").join("allocd.sock");
        let begun = Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = daemon.0.try_wait() {
                return Err(format!(
                    "ferry allocd --policy {policy} ended with {status}"
                ));
            }
            if begun.elapsed() > DAEMON_START {
                return Err(format!("ferry allocd made no socket in {DAEMON_START:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(daemon)
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

/// A child killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh directory, removed when dropped: the case's `XDG_RUNTIME_DIR`.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "ferry-bench-gravity-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Scratch(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
