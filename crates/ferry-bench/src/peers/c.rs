//! The C program `crates/ferry-bench/c/threads.c` as the `threads`
//! experiment's `--lang c` systems: built twice, against ferry's C-Threads
//! (`libferry.a`, built first with `cargo build --release -p ferry-capi`)
//! and against pthreads, and run once per timed run.
//!
//! This module owns building and running the two programs; they print the
//! Go program's `name ns_per_op` lines ([`super::go::parse`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::thread_ops::FORK_BATCH;

/// The label of the C program on ferry's C-Threads.
pub const CTHREADS: &str = "C-Threads on ferry (C)";
/// The label of the C program on pthreads.
pub const PTHREADS: &str = "pthreads (C)";

/// The built programs; their temporary directory goes when dropped.
#[derive(Debug)]
pub struct Programs {
    dir: PathBuf,
    cthreads: PathBuf,
    pthreads: PathBuf,
}

impl Drop for Programs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `libferry.a` (release) and the two programs with the system
/// `cc`. `Err` says what failed.
pub fn build() -> Result<Programs, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(&cargo)
        .args(["build", "--release", "-p", "ferry-capi"])
        .current_dir(workspace())
        .output()
        .map_err(|e| format!("cannot run cargo to build libferry: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build --release -p ferry-capi failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from);
    let lib = target.join("release").join("libferry.a");
    if !lib.exists() {
        return Err(format!("{} was not built", lib.display()));
    }
    let dir = std::env::temp_dir().join(format!("ferry-bench-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let programs = Programs {
        cthreads: dir.join("threads-cthreads"),
        pthreads: dir.join("threads-pthreads"),
        dir,
    };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/threads.c");
    let include = workspace().join("crates/ferry-capi/include");
    let cc = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
        let out = Command::new("cc")
            .args(["-O2", "-std=c11", "-Wall", "-Werror"])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run cc: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "cc failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    cc(&[
        "-DUSE_CTHREADS".as_ref(),
        "-I".as_ref(),
        include.as_os_str(),
        source.as_os_str(),
        lib.as_os_str(),
        "-lgcc_s".as_ref(),
        "-lutil".as_ref(),
        "-lrt".as_ref(),
        "-lpthread".as_ref(),
        "-lm".as_ref(),
        "-ldl".as_ref(),
        "-lc".as_ref(),
        "-o".as_ref(),
        programs.cthreads.as_os_str(),
    ])?;
    cc(&[
        "-pthread".as_ref(),
        source.as_os_str(),
        "-o".as_ref(),
        programs.pthreads.as_os_str(),
    ])?;
    Ok(programs)
}

impl Programs {
    /// One timed run of case `name` with `n` operations: the program's
    /// `name ns_per_op` lines. The C-Threads one runs on one processor.
    pub fn run(&self, cthreads: bool, name: &str, n: u64) -> Result<String, String> {
        let bin = if cthreads {
            &self.cthreads
        } else {
            &self.pthreads
        };
        let out = Command::new(bin)
            .args([name, &n.to_string(), &FORK_BATCH.to_string()])
            .env("FERRY_PROCESSORS", "1")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed on {name}: {}",
                bin.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
