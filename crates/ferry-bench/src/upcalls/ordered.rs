//! `table1 processors ordered by allocd`: the processor changes of
//! `table1 processors`, but ordered by a real `ferry allocd` (Equipartition
//! policy) in another process instead of made in process.
//!
//! A child process (`ferry-bench upcalls-ordered`, its `XDG_RUNTIME_DIR`
//! the daemon's scratch directory) runs a runtime of `max_processors(2)`
//! that registers with the daemon and, alone, owns both cores. Each
//! change: it starts a competitor (`ferry alloc-probe`, one computing
//! thread) that registers too, and the daemon orders the child down to
//! one core (`ProcessorRemoved`); it kills the competitor, the daemon
//! sees the death on its pidfd, and orders the core back
//! (`ProcessorAdded`). The runtime timestamps each change from the
//! daemon's order (`ordered_at` in the shared page), so its own
//! `processor_added`/`processor_removed` latencies here are order to
//! policy: the daemon's futex wake, the follower, the processor change and
//! the event's delivery. What precedes the order (the competitor's start,
//! the daemon's tick) is not counted, nor is the first pair (which waits
//! for the runtime's registration too). One more latency is timed from
//! outside the runtime's counters: from the `SIGKILL` of the competitor to
//! the child running both processors again (`killed_to_added`: the
//! daemon's pidfd wake, its reclaim of the dead process's core, its order
//! and the `ProcessorAdded`), the case of a registered process killed
//! with `kill -9`.
//!
//! This module owns the scenario and its child; it must not start the
//! daemon by other means than [`crate::allocd`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};

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
    /// Remove/add pairs to make.
    #[arg(long)]
    pub changes: u32,
    /// The `ferry` binary (for `ferry alloc-probe`).
    #[arg(long)]
    pub ferry: std::path::PathBuf,
}

/// The child: `changes` daemon-ordered remove/add pairs; prints the
/// latencies as `added <count> <mean ns> <max ns>`, `removed ...` and
/// `killed ...` (kill to both processors running).
pub fn once_main(args: &OnceArgs) -> ExitCode {
    match changes(args.changes, args.ferry.clone()) {
        Ok((before, after, killed)) => {
            println!(
                "killed {} {} {}",
                killed.count, killed.mean_ns, killed.max_ns
            );
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

/// In the child: the changes, the snapshots around them, and the times
/// from each kill to both processors running again.
fn changes(n: u32, ferry: PathBuf) -> Result<(UpcallStats, UpcallStats, Delta), String> {
    on_runtime(
        |b| {
            b.processors(2).max_processors(2).allocd(true);
        },
        move || {
            let h = ferry::Handle::current();
            // The first pair is not counted: it also waits for the
            // runtime's registration (a removal needs it).
            let mut before = None;
            let mut killed = Delta {
                count: 0,
                mean_ns: f64::NAN,
                max_ns: 0.0,
            };
            let mut killed_total = 0u64;
            for i in 0..=n {
                let s0 = h.upcall_stats();
                if i == 1 {
                    before = Some(s0);
                }
                let ferry = ferry.clone();
                let competitor = ferry::blocking(move || {
                    Command::new(ferry)
                        .args(["alloc-probe", "--threads", "1"])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                })
                .map_err(|e| format!("cannot start ferry alloc-probe: {e}"))?;
                let mut competitor = Competitor(competitor);
                ferry_wait_until("the daemon never took a core for the competitor", || {
                    h.processors() == 1
                        && h.upcall_stats().processor_removed.count > s0.processor_removed.count
                })?;
                let kill = std::time::Instant::now();
                ferry::blocking(|| {
                    let _ = competitor.0.kill();
                    competitor.0.wait()
                })
                .map_err(|e| format!("cannot reap the competitor: {e}"))?;
                ferry_wait_until("the daemon never gave the core back", || {
                    h.processors() == 2
                        && h.upcall_stats().processor_added.count > s0.processor_added.count
                })?;
                if i >= 1 {
                    let ns = u64::try_from(kill.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    killed.count += 1;
                    killed_total = killed_total.saturating_add(ns);
                    killed.max_ns = killed.max_ns.max(ns as f64);
                }
            }
            if killed.count > 0 {
                killed.mean_ns = killed_total as f64 / killed.count as f64;
            }
            let after = h.upcall_stats();
            Ok((before.unwrap_or(after), after, killed))
        },
    )?
}

/// A competitor process, killed and reaped if the run fails.
struct Competitor(Child);

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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

/// Builds the `ferry` binary (the daemon and `alloc-probe`) once, before
/// the rounds: its path, or why there is none.
pub(super) fn build() -> Result<PathBuf, String> {
    allocd::build_release(&["ferry-cli"], &["ferry"])
        .map(|target| target.join("ferry"))
        .map_err(|e| e.0)
}

/// The daemon and the child of one run, with the `ferry` binary built by
/// [`build`]: the added, removed and killed latencies.
fn run(plan: &Plan, ferry: Result<&Path, &String>) -> Result<(Delta, Delta, Delta), String> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return Err("one core: the daemon has no second core to order".to_owned());
    }
    let ferry = ferry.map_err(Clone::clone)?.to_path_buf();
    let dir = Scratch::new("upcalls")?;
    let _daemon = allocd::daemon(&ferry, "equipartition", dir.path())?;
    let me = std::env::current_exe().map_err(|e| format!("cannot find ferry-bench: {e}"))?;
    let out = Command::new(me)
        .args(["upcalls-ordered", "--changes"])
        .arg(plan.ordered_changes.to_string())
        .arg("--ferry")
        .arg(&ferry)
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
    match (
        parse(&text, "added"),
        parse(&text, "removed"),
        parse(&text, "killed"),
    ) {
        (Some(a), Some(r), Some(k)) => Ok((a, r, k)),
        _ => Err(format!("the child printed no latencies: {text}")),
    }
}

/// One run with the `ferry` binary [`build`] made, into `col` under
/// `case`.
pub(super) fn table1_ordered(
    plan: &Plan,
    ferry: Result<&Path, &String>,
    col: &mut Collector,
    case: &'static str,
) {
    match run(plan, ferry) {
        Ok((added, removed, killed)) => {
            col.push_latency(case, "processor_added", &added, false);
            col.push_latency(case, "processor_removed", &removed, false);
            col.push_latency(case, "killed_to_added", &killed, true);
        }
        Err(e) => col.fail(case, e),
    }
}
