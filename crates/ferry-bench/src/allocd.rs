//! A private processor allocation daemon for an experiment: the `ferry`
//! binary built with cargo (release), a fresh runtime directory for the
//! daemon and the processes that register with it, and the daemon itself,
//! killed when dropped.
//!
//! This module owns starting and reaping the daemon and the directory; it
//! must not measure anything (`gravity` and `upcalls` do, with it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::Error;

/// How long a daemon may take to put its socket in place.
const DAEMON_START: Duration = Duration::from_secs(10);

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the release binaries of `packages` with cargo and returns the
/// release directory.
///
/// # Errors
/// If cargo fails or a binary named in `binaries` is missing after it.
pub fn build_release(packages: &[&str], binaries: &[&str]) -> Result<PathBuf, Error> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec!["build", "--release"];
    for p in packages {
        args.extend(["-p", p]);
    }
    let out = Command::new(&cargo)
        .args(&args)
        .current_dir(workspace())
        .output()
        .map_err(|e| Error(format!("cannot run cargo: {e}")))?;
    if !out.status.success() {
        return Err(Error(format!(
            "cargo {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from)
        .join("release");
    for b in binaries {
        if !target.join(b).exists() {
            return Err(Error(format!("{} was not built", target.join(b).display())));
        }
    }
    Ok(target)
}

/// A child killed and reaped when dropped.
#[derive(Debug)]
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh directory (mode 0700), removed when dropped: a run's
/// `XDG_RUNTIME_DIR`.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Makes one, named after `what`, this process and a counter.
    ///
    /// # Errors
    /// If the directory cannot be made.
    pub fn new(what: &str) -> Result<Scratch, String> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "ferry-bench-{what}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Scratch(path))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `ferry allocd --policy policy` (the binary at `ferry`) with its
/// runtime directory under `dir`; returns once its socket is in place.
///
/// # Errors
/// If the daemon cannot start, ends, or makes no socket in time.
pub fn daemon(ferry: &Path, policy: &str, dir: &Path) -> Result<Reaped, String> {
    let child = Command::new(ferry)
        .args(["allocd", "--policy", policy])
        .env("XDG_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {} allocd: {e}", ferry.display()))?;
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
