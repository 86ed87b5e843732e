//! The peers of `scale`: Go (the standard-library program in
//! `crates/ferry-bench/go/scale/`, built once per invocation, run once per
//! timed run with `GOMAXPROCS` set; goroutines blocked on a channel that is
//! closed) and Tokio (tasks on a `tokio::sync::Notify` gate, a
//! multi-thread runtime of 2 workers).
//!
//! This module owns the peers' runs and the parsing of the Go program's
//! output; it prints nothing.

use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Sample;
use crate::peers::go::{self, Program};

/// Builds the Go program (offline).
pub fn build_go() -> Result<Program, String> {
    go::build_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("go/scale"),
        "scale",
    )
}

/// One run of `n` goroutines with `GOMAXPROCS=procs`.
pub fn run_go(program: &Program, n: usize, procs: usize) -> Result<Sample, String> {
    let out = super::go_child(program, procs, &["-n", &n.to_string()])?;
    parse_go(&out, n)
}

/// The Go program's `spawn_ns`, `join_ns` and `bytes` lines (each per
/// goroutine) as a sample of `n` goroutines.
pub fn parse_go(stdout: &str, n: usize) -> Result<Sample, String> {
    let (mut spawn, mut join, mut bytes) = (None, None, None);
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("unexpected line from the Go program: {line:?}"));
        };
        let x: f64 = value
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| format!("unexpected number from the Go program: {line:?}"))?;
        let slot = match name {
            "spawn_ns" => &mut spawn,
            "join_ns" => &mut join,
            "bytes" => &mut bytes,
            _ => return Err(format!("unexpected line from the Go program: {line:?}")),
        };
        if slot.replace(x).is_some() {
            return Err(format!("the Go program printed {name:?} twice"));
        }
    }
    let need = |v: Option<f64>, name: &str| {
        v.ok_or_else(|| format!("the Go program printed no {name:?} line"))
    };
    Ok(Sample {
        n,
        spawn_ns: need(spawn, "spawn_ns")?,
        join_ns: need(join, "join_ns")?,
        bytes: Some(need(bytes, "bytes")?),
    })
}

/// Tokio's workers.
pub const TOKIO_WORKERS: usize = 2;

/// One run of `n` Tokio tasks, each awaiting a `Notify` gate (registered
/// with `Notified::enable` before it counts itself blocked, so that
/// `notify_waiters` reaches it); the last to block wakes the driver
/// through a second `Notify`.
pub fn run_tokio(n: usize) -> Result<Sample, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(TOKIO_WORKERS)
        .build()
        .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
    let (spawn, join) = rt.block_on(async move {
        let gate = Arc::new(tokio::sync::Notify::new());
        let all_blocked = Arc::new(tokio::sync::Notify::new());
        let blocked = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (gate, all, blocked) = (gate.clone(), all_blocked.clone(), blocked.clone());
                tokio::spawn(async move {
                    let mut wait = pin!(gate.notified());
                    wait.as_mut().enable();
                    if blocked.fetch_add(1, Ordering::AcqRel) + 1 == n {
                        all.notify_one();
                    }
                    wait.await;
                })
            })
            .collect();
        all_blocked.notified().await;
        let spawn = start.elapsed();
        let start = Instant::now();
        gate.notify_waiters();
        for h in handles {
            h.await.map_err(|e| format!("a Tokio task failed: {e}"))?;
        }
        Ok::<(Duration, Duration), String>((spawn, start.elapsed()))
    })?;
    Ok(Sample::new(n, spawn, join, None))
}
