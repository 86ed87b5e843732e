//! The `upcalls` experiment: ferry's scheduler activations measured as the
//! scheduler-activations paper (Anderson et al., 1992, seed `004`) and
//! Synthesis (Massalin and Pu, 1989) framed them.
//!
//! This module owns the run schedule, the sizes ([`Plan`]), the names of
//! cases and quantities, and the targets; the scenarios are in
//! [`blocking`], [`events`], [`ordered`] and [`figure2`], their system-call wrappers in
//! [`sys`], the gathering of samples in [`collect`].
//!
//! # Table 1: event latencies
//!
//! Each ferry scenario runs on a fresh runtime; the latencies are the
//! runtime's own ([`ferry::Handle::upcall_stats`]), taken as the difference
//! of two snapshots around the scenario's loop (mean = difference of the
//! totals over the difference of the counts; `max` is the runtime's, which
//! the scenario alone fed, the runtime being fresh).
//!
//! | case | what runs | what is reported |
//! |------|-----------|------------------|
//! | `futex same-core` (baseline) | two kernel threads pinned to the **same** CPU ping-pong through two futex words (`FUTEX_WAIT`/`FUTEX_WAKE`) | ns per round trip, and per one wake+wait (round trip / 2): the kernel's price of handing a CPU from one blocked thread to another |
//! | `blocked` | 1 processor; a compute thread yields in a loop; a reader thread does `ferry::blocking(|| read 1 byte from a pipe)`; the first thread writes the byte about [`WRITE_DELAY`] after the reader went in; [`Plan::io_warmup`] calls first, not counted, then [`Plan::io_events`] | `blocked.mean/max`, `unblocked.mean`, and the stall seen from outside: from just before the call to the first moment the compute thread runs again (median over the calls); `blocked.warmup_mean`, the mean of the warm-up calls, while the runtime makes its kernel threads; `max` includes the warm-up |
//! | `unannounced` | the same with a raw `libc::read`, which ferry is not told about, (the takeover is on by default): the monitor must notice the sleeping kernel thread | the stall (median over the calls), `unannounced_blocks`, `blocked.mean` (here from the monitor's finding), `unblocked.mean` |
//! | `preempted` | 1 processor, `time_slice(1 ms)`; a spinner that never yields and a thread that yields [`Plan::preempt_yields`] times | `preempted.mean/max` (signal handler entry to the policy), how many, and wall time per preemption (the slice as enforced) |
//! | `processors` | `processors(1).max_processors(2)`; [`Plan::processor_changes`] times: `set_processors(2)`, wait for the `ProcessorAdded` event, `set_processors(1)`, wait for `ProcessorRemoved` | `processor_added.mean`, `processor_removed.mean` |
//! | `processors ordered by allocd` | the same changes ([`Plan::ordered_changes`] pairs), ordered by a `ferry allocd --policy equipartition` in another process as a competing process registers and is killed; the runtime in a child process ([`ordered`]) | `processor_added.mean`, `processor_removed.mean`, from the daemon's order to the policy |
//! | `blocking overhead` | ns per `libc::getppid()`: direct; in `ferry::blocking` alone on 1 processor; with a second runnable thread (`handoff_after(0)`, the default: each call wakes a spare that waits on its core, unless one is already on its way, and takes the processor only if the call sleeps); the same on a runtime of `max_processors(1)` (whose kernel threads ferry leaves unpinned, while with room for a second processor processor 0's drivers are all pinned to the first CPU); the same as the first with `handoff_after(20 µs)` (Go's rule) | ns per call, ratio over direct, and `Blocked` events per call |
//!
//! Targets: `blocked.mean` at most twice one same-core futex wake+wait, the
//! unannounced stall at most 100 µs. Missed targets are printed as such;
//! nothing fails the program.
//!
//! # Figure 2: a ping-pong under processor disruptions
//!
//! Two threads ping-pong on a shared structure (a mutex-guarded turn and a
//! condition variable) on two cores, while one core suffers
//! [`Plan::disruptions`] disruptions of `M` ms, each followed by `M` ms
//! without, until the disruptor has finished (so every regime's elapsed time
//! is about `2 * disruptions * M` ms and round trips per second are the
//! comparable number). Regimes:
//!
//! | regime | threads | disruption |
//! |--------|---------|------------|
//! | `suspension` | two kernel threads (`std::sync::{Mutex, Condvar}`), pinned one per core | the victim kernel thread is stopped: `SIGUSR1`, whose handler sleeps `M` ms |
//! | `time-slicing` | as above | a hog kernel thread pinned to the victim core spins for `M` ms |
//! | `ferry activations` | two ferry threads (`ferry::sync::{Mutex, Condvar}`) on `processors(2)` | `Handle::set_processors(1)` for `M` ms, then `set_processors(2)`: the processor is removed and its thread moves to the other one |
//!
//! Every disruptor is a kernel thread that is not pinned (but for the
//! hog) and not started from a ferry thread (which would inherit a
//! processor's pinning); the ferry one is handed a [`ferry::Handle`] from
//! inside the runtime. `M = 0` is an undisturbed run of
//! [`Plan::undisturbed`]. The plot (x =
//! `M`, y = round trips per second, one line per regime) is written to
//! `docs/results/upcalls-figure2.png` under the workspace root with
//! `--write-docs`, else to `upcalls-figure2.png` in the temporary
//! directory.
//!
//! # Synthesis Table 4: partial against full context switch
//!
//! Partial: ns per voluntary `ferry::yield_now` switch between two threads
//! on 1 processor. Full (signal-driven, as a preemption): the kernel's part,
//! ns per `raise` of a signal with an empty handler on a kernel thread
//! (delivery, handler frame, `sigreturn`), beside ferry's part, the
//! `preempted` event latency of Table 1 (handler entry to the policy).
//!
//! # Method
//!
//! Every scenario runs `--runs` times (default 5, with `--quick` 3 and
//! shorter loops), interleaved: run *k* of
//! every scenario before run *k+1* of any; Figure 2's regimes are rotated
//! from one round to the next. Every number printed is the median over the
//! runs, with min and max.
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::common::{Common, Defaults};
use crate::report::{Error, Ratio, Report, Section};
use crate::watchdog::hang;

mod blocking;
mod collect;
mod events;
mod figure2;
pub mod ordered;
mod sys;

use collect::Collector;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "upcalls";

/// Runs per scenario: 5, with `--quick` 3; at least 1.
pub const DEFAULTS: Defaults = Defaults {
    runs: 5,
    quick_runs: 3,
    min_runs: 1,
};

/// How long the first thread waits, after the reader went into its call,
/// before it writes the byte (so that the reader really sleeps in the
/// kernel).
pub const WRITE_DELAY: Duration = Duration::from_micros(50);

/// How long any wait of a scenario may last before it is declared lost (an
/// event never delivered, a thread never run).
const LOST_AFTER: Duration = Duration::from_secs(2);

/// Command-line arguments of `ferry-bench upcalls`. `--quick` means
/// shorter loops, fewer disruptions (M = 1, 5 ms, 10 each) and 3 runs.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
}

/// The sizes of one invocation's scenarios.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Runs per scenario.
    pub runs: u32,
    /// Blocking reads per run of `blocked` and `unannounced`, counted.
    pub io_events: u32,
    /// Blocking reads made first in each such run and not counted: while
    /// they run, the new runtime makes its kernel threads (spares, the
    /// stand-in), and a takeover may wait for one to be made. Their mean
    /// is reported on its own (`stats.blocked.warmup_mean`).
    pub io_warmup: u32,
    /// Add/remove pairs per run of `processors`.
    pub processor_changes: u32,
    /// Add/remove pairs per run of `processors ordered by allocd` (each
    /// takes a few of the daemon's and the follower's 10 ms ticks).
    pub ordered_changes: u32,
    /// Yields of the yielding thread per run of `preempted`.
    pub preempt_yields: u32,
    /// Round trips per run of the futex baseline.
    pub futex_round_trips: u64,
    /// Yields of each thread per run of the partial-switch measurement.
    pub switch_yields: u64,
    /// Longest time one timed loop (getppid, raise) runs.
    pub loop_limit: Duration,
    /// Disruption lengths of Figure 2, in ms.
    pub disruption_ms: Vec<u64>,
    /// Disruptions per (regime, M) run.
    pub disruptions: u32,
    /// Length of the undisturbed (M = 0) run of each regime.
    pub undisturbed: Duration,
}

impl Plan {
    /// The plan `common` asks for.
    pub fn new(common: &Common) -> Result<Plan, Error> {
        let runs = common.runs(DEFAULTS)?;
        Ok(if common.quick {
            Plan {
                runs,
                io_events: 60,
                io_warmup: 20,
                processor_changes: 60,
                ordered_changes: 10,
                preempt_yields: 100,
                futex_round_trips: 3_000,
                switch_yields: 50_000,
                loop_limit: Duration::from_millis(5),
                disruption_ms: vec![1, 5],
                disruptions: 10,
                undisturbed: Duration::from_millis(50),
            }
        } else {
            Plan {
                runs,
                io_events: 200,
                io_warmup: 50,
                processor_changes: 200,
                ordered_changes: 40,
                preempt_yields: 1000,
                futex_round_trips: 10_000,
                switch_yields: 200_000,
                loop_limit: Duration::from_millis(20),
                disruption_ms: vec![1, 2, 5, 10, 20],
                disruptions: 50,
                undisturbed: Duration::from_millis(200),
            }
        })
    }
}

/// Case names (the table and scenario).
mod case {
    pub const FUTEX: &str = "table1 futex same-core";
    pub const BLOCKED: &str = "table1 blocked";
    pub const UNANNOUNCED: &str = "table1 unannounced";
    pub const PREEMPTED: &str = "table1 preempted";
    pub const PROCESSORS: &str = "table1 processors";
    pub const ORDERED: &str = "table1 processors ordered by allocd";
    pub const OVERHEAD: &str = "table1 blocking overhead";
    pub const SWITCH: &str = "table4 context switch";
}

/// Quantity names shared between the scenarios, the tables and the targets.
mod q {
    pub const WAKE_WAIT: &str = "one wake+wait (round trip / 2)";
    pub const ROUND_TRIP: &str = "round trip";
    pub const STALL: &str = "stall seen from outside (median of calls)";
    pub const DIRECT: &str = "getppid direct";
    pub const ALONE: &str = "blocking(getppid), alone";
    pub const HANDOFF: &str = "blocking(getppid), 2nd thread runnable, handoff_after 0";
    pub const HANDOFF_UNPINNED: &str =
        "blocking(getppid), 2nd thread runnable, handoff_after 0, max_processors(1)";
    pub const HANDOFF_GO: &str = "blocking(getppid), 2nd thread runnable, handoff_after 20us";
    pub const PARTIAL: &str = "partial switch (ferry::yield_now)";
    pub const SIGNAL: &str = "signal delivery + sigreturn (raise, empty handler)";
    pub const PREEMPTED: &str = "preempted event (handler -> policy)";
}

/// Runs the experiment: Table 1's rows with the targets, Synthesis Table
/// 4's, and Figure 2's with its plot.
///
/// # Errors
/// Never for a scenario that fails (it is printed as absent); only if
/// nothing at all could be measured.
pub fn run(common: &Common, _args: &Args) -> Result<Report, Error> {
    let plan = Plan::new(common)?;
    // The daemon's binary is built before any scenario is watched for a
    // hang: a cold release build takes minutes.
    let ferry_cli = ordered::build();
    let started = Instant::now();
    let mut col = Collector::default();
    let mut fig = figure2::Figure2::default();
    for round in 0..plan.runs {
        eprintln!(
            "ferry-bench upcalls: round {}/{} ({:.1} s so far)",
            round + 1,
            plan.runs,
            started.elapsed().as_secs_f64()
        );
        let watch = |what: &str| hang::watch(what, Duration::from_secs(60));
        watch(case::FUTEX);
        events::table1_futex(&plan, &mut col);
        watch(case::BLOCKED);
        blocking::table1_io(&plan, &mut col, true);
        watch(case::UNANNOUNCED);
        blocking::table1_io(&plan, &mut col, false);
        watch(case::PREEMPTED);
        events::table1_preempted(&plan, &mut col);
        watch(case::PROCESSORS);
        events::table1_processors(&plan, &mut col);
        watch(case::ORDERED);
        ordered::table1_ordered(&plan, ferry_cli.as_deref(), &mut col, case::ORDERED);
        watch(case::OVERHEAD);
        blocking::table1_overhead(&plan, &mut col);
        watch(case::SWITCH);
        events::table4(&plan, &mut col);
        hang::unwatch();
        figure2::figure2_round(&plan, round, &mut fig);
    }
    if col.rows.is_empty() && fig.rate.is_empty() {
        return Err(Error("nothing could be measured".to_owned()));
    }

    let targets = targets(&col);
    let full_switch = full_switch(&col);
    let (table1, failed1) = col.take("table1");
    let (table4, failed4) = col.take("table4");
    let plot_path = if common.write_docs {
        crate::docs::results_dir()
    } else {
        std::env::temp_dir()
    }
    .join("upcalls-figure2.png");
    Ok(Report {
        doc: EXPERIMENT,
        title: format!(
            "upcalls: medians of {} runs{}",
            plan.runs,
            if common.quick { " (--quick)" } else { "" }
        ),
        sections: vec![
            Section {
                title: "Table 1 (004): event latencies, cause -> policy, beside a same-core \
                        futex handoff"
                    .to_owned(),
                headers: ("case", "quantity"),
                rows: table1,
                ratios: vec![Ratio::to_system("vs direct", q::DIRECT)],
                notes: format!("{failed1}\n{targets}"),
            },
            Section {
                title: "Synthesis Table 4: partial against full (signal-driven) context switch"
                    .to_owned(),
                headers: ("case", "quantity"),
                rows: table4,
                ratios: Vec::new(),
                notes: format!("{full_switch}{failed4}"),
            },
            figure2::section(&plan, &fig, &plot_path),
        ],
    })
}

/// The targets of Table 1, as text.
fn targets(col: &Collector) -> String {
    let mut out = String::from("targets (Table 1), medians of this run:\n");
    let wake = col.median(case::FUTEX, q::WAKE_WAIT);
    let blocked = col.median(case::BLOCKED, "stats.blocked.mean");
    let verdict = match (blocked, wake) {
        (Some(b), Some(w)) if w > 0.0 => format!(
            "{} ({:.0} ns vs 2 x {:.0} ns = {:.0} ns: {:.2}x the wake+wait)",
            if b <= 2.0 * w { "met" } else { "missed" },
            b,
            w,
            2.0 * w,
            b / w
        ),
        (None, _) => "n/a (no blocked events)".to_owned(),
        _ => "n/a (no futex baseline)".to_owned(),
    };
    let _ = writeln!(
        out,
        "  blocked.mean <= 2x one same-core futex wake+wait: {verdict}"
    );
    let stall = col.median(case::UNANNOUNCED, q::STALL);
    let verdict = at_most(stall, 100_000.0, (1e3, "us"), "no stall measured");
    let _ = writeln!(out, "  unannounced stall <= 100 us: {verdict}");
    let reclaim = col.median(case::ORDERED, "stats.killed_to_added.mean");
    let verdict = at_most(reclaim, 100e6, (1e6, "ms"), "no kill measured");
    let _ = writeln!(
        out,
        "  a killed process's core back at work elsewhere <= 100 ms: {verdict}"
    );
    out
}

/// A target line's verdict on a median of `ns` against a bound of
/// `bound_ns`: met or missed, with the value in `unit` (ns per unit and
/// its name); `n/a` with `why` if nothing was measured.
fn at_most(ns: Option<f64>, bound_ns: f64, unit: (f64, &str), why: &str) -> String {
    match ns {
        Some(v) => format!(
            "{} ({:.1} {})",
            if v <= bound_ns { "met" } else { "missed" },
            v / unit.0,
            unit.1
        ),
        None => format!("n/a ({why})"),
    }
}

/// Synthesis Table 4's full switch (a signal's round trip and ferry's
/// `Preempted` event) against the partial one, as a line.
fn full_switch(col: &Collector) -> String {
    let partial = col.median(case::SWITCH, q::PARTIAL);
    let signal = col.median(case::SWITCH, q::SIGNAL);
    let preempted = col.median(case::SWITCH, q::PREEMPTED);
    match (partial, signal, preempted) {
        (Some(p), Some(s), Some(e)) if p > 0.0 => format!(
            "full switch (signal + preempted event) ~ {:.0} ns = {:.0}x the partial switch\n",
            s + e,
            (s + e) / p
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::sys::delta;
    use super::*;
    use ferry::upcall::EventLatency;
    use figure2::Schedule;

    fn lat(count: u64, mean_ns: u64, max_ns: u64) -> EventLatency {
        EventLatency {
            count,
            mean: Duration::from_nanos(mean_ns),
            max: Duration::from_nanos(max_ns),
        }
    }

    #[test]
    fn delta_is_the_mean_of_the_new_events() {
        let d = delta(&lat(10, 100, 500), &lat(20, 150, 900));
        assert_eq!(d.count, 10);
        assert_eq!(d.mean_ns, 200.0);
        assert_eq!(d.max_ns, 900.0);
        assert!(delta(&lat(3, 1, 1), &lat(3, 1, 1)).mean_ns.is_nan());
    }

    #[test]
    fn schedule_windows_alternate() {
        let s = Schedule {
            m: Duration::from_millis(5),
            count: 3,
            undisturbed: Duration::from_millis(100),
        };
        let t = Instant::now();
        assert_eq!(
            s.window(t, 1),
            (t + Duration::from_millis(10), t + Duration::from_millis(15))
        );
        assert_eq!(s.end(t), t + Duration::from_millis(30));
    }

    #[test]
    fn futex_baseline_measures() {
        let (cpu, _) = crate::affinity::two_cores();
        let rt = events::futex_round_trip(200, cpu).unwrap();
        assert!(rt.is_finite() && rt > 0.0);
    }

    #[test]
    fn ferry_scenarios_deliver_their_events() {
        let run = blocking::io_run(2, 5, true).unwrap();
        assert_eq!(run.stalls.len(), 5);
        let (before, after) = events::processors_run(3).unwrap();
        assert!(after.processor_added.count >= before.processor_added.count + 3);
        assert!(after.processor_removed.count >= before.processor_removed.count + 3);
    }

    #[test]
    fn quick_plan_is_smaller() {
        let quick = Plan::new(&Common {
            quick: true,
            ..Common::default()
        })
        .unwrap();
        assert_eq!(quick.runs, DEFAULTS.quick_runs);
        assert_eq!(quick.disruption_ms, vec![1, 5]);
        assert_eq!(quick.disruptions, 10);
    }
}
