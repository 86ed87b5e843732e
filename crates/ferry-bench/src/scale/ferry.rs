//! ferry's side of `scale`: `n` threads spawned with `ferry::spawn` on a
//! runtime of `P` processors, each blocked on one gate, a
//! `ferry::sync::Mutex<Gate>` with a `ferry::sync::Condvar`; the first
//! thread waits on a second condition variable of the same mutex until all
//! are blocked, opens the gate with `notify_all` and joins every handle.
//!
//! Each run is a fresh process, as each of Go's is: the benchmark starts
//! itself again (`scale-ferry`, hidden), which makes one runtime, runs
//! once and prints its per-thread times and memory in the Go program's
//! format. A run inside the benchmark's own process would find the stacks
//! of earlier runs resident in the stack cache, and count neither their
//! memory nor their first touch.
//!
//! This module owns ferry's run only; the parent prints nothing, the child
//! prints its sample.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use super::{Sample, resident_bytes};

/// The arguments of the hidden `scale-ferry` subcommand (one run, started
/// by `scale`, not by hand).
#[derive(Debug, Clone, clap::Args)]
pub struct OnceArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: crate::common::Common,
    /// Threads.
    #[arg(long)]
    pub n: usize,
    /// Processors.
    #[arg(long)]
    pub processors: usize,
    /// Set up the idle case instead (`super::idle`) and wait for ever.
    #[arg(long)]
    pub idle: bool,
    /// With `--idle`: idle connections, each with a blocked reader.
    #[arg(long, default_value_t = 0)]
    pub sockets: usize,
    /// Run the timers case instead (`super::sleepers`).
    #[arg(long)]
    pub sleepers: bool,
}

/// The child's side: one run, printed as `spawn_ns`, `join_ns` and `bytes`
/// lines (per thread), or the failure on stderr.
pub fn once_main(args: &OnceArgs) -> ExitCode {
    if args.idle {
        return super::idle::ferry_child(args.n, args.sockets, args.processors);
    }
    if args.sleepers {
        return super::sleepers::ferry_child(args.n, args.processors);
    }
    match run_here(args.n, args.processors) {
        Ok(s) => {
            println!("spawn_ns {}", s.spawn_ns);
            println!("join_ns {}", s.join_ns);
            if let Some(b) = s.bytes {
                println!("bytes {b}");
            }
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
    }
}

/// One run of `n` threads on `processors` processors, in a fresh process.
pub fn run(n: usize, processors: usize) -> Result<Sample, String> {
    let out = super::ferry_child(n, processors, &[])?;
    super::peers::parse_go(&out, n)
}

/// The gate's state, under the mutex.
#[derive(Debug, Default)]
struct Gate {
    /// Threads inside `Condvar::wait` (counted before they wait, under the
    /// lock the wait releases: whoever next holds the lock sees them
    /// blocked).
    blocked: usize,
    /// Whether the gate is open.
    open: bool,
}

/// The gate and its two condition variables: `opened` for the blocked
/// threads, `all_blocked` for the first thread.
struct Shared {
    gate: ferry::sync::Mutex<Gate>,
    opened: ferry::sync::Condvar,
    all_blocked: ferry::sync::Condvar,
}

/// One run of `n` threads on `processors` processors, in this process.
fn run_here(n: usize, processors: usize) -> Result<Sample, String> {
    ferry::Runtime::builder()
        .processors(processors)
        .run(move || block_all(n))
        .map_err(|e| format!("cannot start a ferry runtime: {e}"))?
}

/// Spawns `n` threads onto the gate, waits for all to block, opens it and
/// joins them, timing both halves and the resident growth in between.
fn block_all(n: usize) -> Result<Sample, String> {
    let shared = Arc::new(Shared {
        gate: ferry::sync::Mutex::new(Gate::default()),
        opened: ferry::sync::Condvar::new(),
        all_blocked: ferry::sync::Condvar::new(),
    });
    let mut handles = Vec::with_capacity(n);
    let before = resident_bytes()?;
    let start = Instant::now();
    let mut failed = None;
    for i in 0..n {
        let s = Arc::clone(&shared);
        let spawned = ferry::thread::Builder::new().spawn(move || {
            let mut g = s.gate.lock();
            g.blocked += 1;
            if g.blocked == n {
                s.all_blocked.notify_one();
            }
            while !g.open {
                g = s.opened.wait(g);
            }
        });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                failed = Some(format!("spawn of thread {} of {n} failed: {e}", i + 1));
                break;
            }
        }
    }
    if failed.is_none() {
        let mut g = shared.gate.lock();
        while g.blocked < n {
            g = shared.all_blocked.wait(g);
        }
    }
    let spawn = start.elapsed();
    let after = resident_bytes()?;
    let start = Instant::now();
    shared.gate.lock().open = true;
    shared.opened.notify_all();
    for h in handles {
        h.join()
            .map_err(|p| format!("a blocked thread panicked: {p}"))?;
    }
    let join = start.elapsed();
    if let Some(why) = failed {
        return Err(why);
    }
    Ok(Sample::new(n, spawn, join, Some((before, after))))
}
