//! `table1 processors ordered by allocd`: the processor changes of
//! `table1 processors`, but ordered by a real `ferry allocd` (Dynamic
//! policy) in another process instead of made in process.
//!
//! A child process (`ferry-bench upcalls-ordered`, its `XDG_RUNTIME_DIR`
//! the daemon's scratch directory) runs a runtime of
//! `processors(1).max_processors(2)` that registers with the daemon. Each
//! change: two threads that yield in a loop make the runtime desire two
//! processors; the follower publishes that, the daemon orders two cores,
//! and the runtime adds a processor (`ProcessorAdded`); the threads end,
//! the desire falls to one, and the daemon takes the core back
//! (`ProcessorRemoved`). The runtime timestamps each change from the
//! daemon's order (`ordered_at` in the shared page), so its own
//! `processor_added`/`processor_removed` latencies here are order to
//! policy: the daemon's futex wake, the follower, the processor change and
//! the event's delivery. What precedes the order (the desire published
//! within a follower tick, the daemon's tick) is not counted.
//!
//! This module owns the scenario and its child; it must not start the
//! daemon by other means than [`crate::allocd`].

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use ferry::upcall::UpcallStats;

use super::Plan;
use super::collect::Collector;
use super::sys::{Delta, delta, ferry_wait_until, on_runtime};
use crate::allocd::{self, Scratch};

/// Arguments of the child process (`ferry-bench upcalls-ordered`).
#[derive(Debug, Clone, clap::Args)]
pub struct OnceArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: crate::common::Common,
    /// Add/remove pairs to make.
    #[arg(long)]
    pub changes: u32,
}

/// The child: `changes` daemon-ordered add/remove pairs; prints the
/// latencies as `added <count> <mean ns> <max ns>` and `removed ...`.
pub fn once_main(args: &OnceArgs) -> ExitCode {
    match changes(args.changes) {
        Ok((before, after)) => {
            for (name, d) in [
                (
                    "added",
                    delta(&before.processor_added, &after.processor_added),
                ),
                (
                    "removed",
                    delta(&before.processor_removed, &after.processor_removed),
                ),
            ] {
                println!("{name} {} {} {}", d.count, d.mean_ns, d.max_ns);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// In the child: the changes, and the snapshots around them.
fn changes(n: u32) -> Result<(UpcallStats, UpcallStats), String> {
    on_runtime(
        |b| {
            b.processors(1).max_processors(2).allocd(true);
        },
        move || {
            let h = ferry::Handle::current();
            let before = h.upcall_stats();
            for _ in 0..n {
                let s0 = h.upcall_stats();
                let stop = Arc::new(AtomicBool::new(false));
                let busy: Vec<_> = (0..2)
                    .map(|_| {
                        let stop = Arc::clone(&stop);
                        ferry::spawn(move || {
                            while !stop.load(Relaxed) {
                                ferry::yield_now();
                            }
                        })
                    })
                    .collect();
                ferry_wait_until("the daemon never ordered a second core", || {
                    h.processors() == 2
                        && h.upcall_stats().processor_added.count > s0.processor_added.count
                })?;
                stop.store(true, Relaxed);
                for t in busy {
                    t.join().map_err(|_| "a busy thread failed".to_owned())?;
                }
                ferry_wait_until("the daemon never took the second core back", || {
                    h.processors() == 1
                        && h.upcall_stats().processor_removed.count > s0.processor_removed.count
                })?;
            }
            Ok((before, h.upcall_stats()))
        },
    )?
}

/// Parses the child's line `name count mean max`.
fn parse(out: &str, name: &str) -> Option<Delta> {
    let line = out.lines().find(|l| l.starts_with(name))?;
    let mut f = line.split_whitespace().skip(1);
    Some(Delta {
        count: f.next()?.parse().ok()?,
        mean_ns: f.next()?.parse().ok()?,
        max_ns: f.next()?.parse().ok()?,
    })
}

/// The daemon and the child of one run.
fn run(plan: &Plan) -> Result<(Delta, Delta), String> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return Err("one core: the daemon has no second core to order".to_owned());
    }
    let target = allocd::build_release(&["ferry-cli"], &["ferry"]).map_err(|e| e.0)?;
    let dir = Scratch::new("upcalls")?;
    let _daemon = allocd::daemon(&target.join("ferry"), "dynamic", dir.path())?;
    let me = std::env::current_exe().map_err(|e| format!("cannot find ferry-bench: {e}"))?;
    let out = Command::new(me)
        .args(["upcalls-ordered", "--changes"])
        .arg(plan.ordered_changes.to_string())
        .env("XDG_RUNTIME_DIR", dir.path())
        .env_remove("FERRY_ALLOCD")
        .output()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the child ended with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    match (parse(&text, "added"), parse(&text, "removed")) {
        (Some(a), Some(r)) => Ok((a, r)),
        _ => Err(format!("the child printed no latencies: {text}")),
    }
}

/// One run, into `col` under `case`.
pub(super) fn table1_ordered(plan: &Plan, col: &mut Collector, case: &'static str) {
    match run(plan) {
        Ok((added, removed)) => {
            col.push_latency(case, "processor_added", &added, false);
            col.push_latency(case, "processor_removed", &removed, false);
        }
        Err(e) => col.fail(case, e),
    }
}
