//! The `threads` experiment: the cost of thread operations, as URPC's
//! Table I (Anderson et al., 1991: FastThreads against Taos kernel threads)
//! and Synthesis's Table 3 (Massalin and Pu, 1989) measured them, for ferry's
//! user-level threads against kernel threads (`std::thread` + `std::sync`),
//! Tokio's tasks (current-thread and multi-thread runtimes) and Go's
//! goroutines.
//!
//! This module owns the run schedule and the list of systems; the rows
//! are [`thread_ops`](crate::thread_ops)', ferry's side is [`ferry`], the peers' sides are in
//! [`crate::peers`] (the Go side is a small standard-library program in
//! `crates/ferry-bench/go/`), the targets are [`targets`]'.
//!
//! # Rows
//!
//! Every row is "ns per operation": a loop of `n` operations, timed as a
//! whole, divided by `n`, as the paper did ("Each test was run a large number
//! of times as part of a loop, and the measured elapsed time was divided by
//! the loop limit").
//!
//! | row | the paper's words | exactly what is timed here |
//! |-----|-------------------|----------------------------|
//! | `PROCEDURE CALL` | "invokes the null procedure", the machine's baseline | a call of a never-inlined empty function (an empty `asm!` keeps the call from being removed; `//go:noinline` in Go), made from a thread of the system |
//! | `FORK` | "creates, starts, and terminates a thread" | forking `B` = [`FORK_BATCH`] null threads one after the other, then waiting once for the whole batch to have finished (joining every handle; Go: one `sync.WaitGroup`); repeated to `n` threads; per thread. Every forked thread has started, run and terminated inside the timed loop, and its resources have been reclaimed (ferry: its stack is back in the cache) |
//! | `FORK;JOIN` | "like FORK, except that the thread which creates the new thread blocks until the forked thread completes" | fork one null thread and join it (Go: `wg.Add(1); go f(); wg.Wait()`); per pair |
//! | `YIELD` | "forces a thread to make a full trip through the scheduling machinery" | two threads each yield `n` times to the other, which is runnable; elapsed time of the pair over `2n`, per yield |
//! | `ACQUIRE;RELEASE` | "acquires and then releases a blocking (nonspinning) lock for which there is no contention" | one thread locks a mutex, increments the integer it guards, unlocks; per pair |
//! | `PINGPONG` | "two threads 'pingpong' back and forth on a condition variable ... Each pingpong cycle blocks, schedules, and unblocks two threads in succession" | two threads share a mutex-guarded turn and a condition variable; each waits for its turn, hands the turn over, signals, unlocks; per cycle (one turn of each thread) |
//! | `create` | Synthesis: create a thread (allocate and fill in its TTE), not run it | the forking half of the `FORK` loop alone: the `B` fork calls of a batch, per thread, before the parent waits for any of them |
//! | `destroy` | Synthesis: destroy a thread | the other half of the `FORK` loop: from the end of a batch's fork calls until every thread of it has finished and been reclaimed (joined), per thread. None of these systems can kill a thread, so the "destroy" of a null thread is its run-out: it is dispatched, runs its empty body, exits, and its resources go back |
//!
//! `FORK` is therefore `create` + `destroy` of the same runs (two clock reads
//! per batch of [`FORK_BATCH`] are inside it, under 2 ns a thread). The batch
//! is kept below the 64 warm stacks of ferry's stack cache
//! (`CacheLimits::DEFAULT`), so every ferry spawn reuses a warm stack: the
//! paper's loop, too, forked one thread after another rather than thousands
//! at once.
//!
//! # Systems
//!
//! | system | where it runs | the operations |
//! |--------|---------------|----------------|
//! | `ferry` | a runtime of **1 processor** (`Runtime::builder().processors(1)`), as the paper's FastThreads tests "were constrained to run on a single processor" | `ferry::spawn`, `JoinHandle::join`, `ferry::yield_now`, `ferry::sync::{Mutex, Condvar}`; `PINGPONG` also with `ferry::park` / `Thread::unpark` on an atomic turn instead of the condition variable, labelled `ferry (park/unpark)` |
//! | `std::thread` | kernel threads on any core (as Taos's, which "had no such constraint"), except `YIELD`, whose two threads are pinned to one CPU: on two CPUs a `sched_yield` finds nobody to yield to and switches nothing | `std::thread::spawn` + `join`, `std::thread::yield_now`, `std::sync::{Mutex, Condvar}` |
//! | `pthread_mutex_t` | the calling kernel thread | `ACQUIRE;RELEASE` only: glibc's `pthread_mutex_lock`/`unlock` on a default mutex (std's `Mutex` is its own futex lock, not a pthread one) |
//! | `tokio current-thread` | Tokio's single-threaded scheduler, the driver inside `block_on` | `tokio::spawn` + `.await` of the `JoinHandle`, `tokio::task::yield_now`, `tokio::sync::Mutex`; `PINGPONG` with two `tokio::sync::Notify` (each task notifies the other's and awaits its own), Tokio's condition-variable equivalent |
//! | `tokio multi-thread` | one worker per CPU; the driver is itself a spawned task, so it runs on a worker as the tasks it spawns do | as above |
//! | `go GOMAXPROCS=1` | Go's scheduler on one processor, the single-processor-comparable Go | `go f()` + `sync.WaitGroup`, `runtime.Gosched`, `sync.Mutex`, `sync.Cond` |
//! | `go GOMAXPROCS=N` | N = the CPUs of the machine | as above |
//!
//! The Go program is built once per invocation with `go build`
//! (`GOTOOLCHAIN=local`, `GOPROXY=off`: standard library only, nothing is
//! downloaded) into a temporary directory and run once per timed run; it
//! times its own loop. Without `go` (or if the build fails) the Go rows are
//! printed as absent.
//!
//! # Method
//!
//! As in `queues`: every (row, system) pair runs `--runs` times (at least 5),
//! interleaved (run *k* of every pair before run *k+1* of any) with the order
//! of systems rotated from one round to the next, and the median is
//! reported with min and max. Round 0 is an untimed warm-up that also sizes
//! the runs: each pair gets the `n` that makes one run last about
//! [`DEFAULT_TARGET`] ([`QUICK_TARGET`] with `--quick`), so that kernel
//! thread creation (tens of µs) and a null call (a ns) are both timed over a
//! meaningful loop. Runtimes (ferry's, Tokio's) are built outside the timed
//! part of each run.
//!
//! The C API's targets (`--lang c`) are ratios between two systems of one
//! row, and are judged on the median of the per-round ratios: a round runs
//! the row's systems back to back, so each ratio is taken within tens of
//! milliseconds, while the host's slow and fast phases last seconds. The
//! ratio of the two medians is printed beside it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{Common, MEDIAN_OF_FIVE};
use crate::machine;
use crate::measure;
use crate::peers::{c, go, pthread, stdlib, tokio};
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};

pub mod ferry;
mod targets;

use crate::thread_ops::{FORK_BATCH, Kind, Op, Outcome, Sample, whole_batches};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "threads";

/// How long one run should last by default (sizes `n`).
const DEFAULT_TARGET: Duration = Duration::from_millis(25);
/// How long one run should last with `--quick`.
const QUICK_TARGET: Duration = Duration::from_millis(4);
/// Bounds of the `n` chosen for a run.
const MIN_N: u64 = 64;
const MAX_N: u64 = 50_000_000;

/// Command-line arguments of `ferry-bench threads`. `--quick` makes each
/// run about 4 ms instead of 25 ms.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,

    /// Leave out the Go rows (printed as absent) even if `go` is installed
    #[arg(long)]
    pub no_go: bool,

    /// `rust` (default): ferry against kernel threads, Tokio and Go. `c`:
    /// the rows from C through ferry's C-Threads API (`libferry.a`) against
    /// the same C program on pthreads, beside ferry's Rust rows, plus 003
    /// Table 8-1 (Unix fork/wait/exit against cthread_fork/join)
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
}

/// Which side of ferry `threads` measures; see [`Args::lang`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// ferry's Rust API against its peers.
    Rust,
    /// ferry's C API against pthreads, from C.
    C,
}

/// A system under test.
struct System {
    name: String,
    measure: Box<dyn Fn(Kind, u64) -> Result<Outcome, String>>,
}

/// Every system, in report order. `go` is the built Go program or why there
/// is none.
fn systems(go: &Result<Arc<go::Program>, String>) -> Vec<System> {
    let cpus = machine::online_cpus();
    let mut v = vec![
        System {
            name: ferry::NAME.to_owned(),
            measure: Box::new(ferry::measure),
        },
        System {
            name: stdlib::threads::NAME.to_owned(),
            measure: Box::new(stdlib::threads::measure),
        },
        System {
            name: pthread::NAME.to_owned(),
            measure: Box::new(pthread::measure),
        },
        System {
            name: tokio::CURRENT.to_owned(),
            measure: Box::new(|k, n| tokio::measure(false, k, n)),
        },
        System {
            name: tokio::multi_name(),
            measure: Box::new(|k, n| tokio::measure(true, k, n)),
        },
    ];
    for procs in [1, cpus] {
        let label = format!("go GOMAXPROCS={procs}");
        let measure: Box<dyn Fn(Kind, u64) -> Result<Outcome, String>> = match go {
            Ok(program) => {
                let program = Arc::clone(program);
                let label = label.clone();
                Box::new(move |kind, n| {
                    let rows = program.run(kind, n, procs)?;
                    Ok(Outcome::Measured(
                        rows.into_iter()
                            .map(|(row, ns)| Sample::new(row, &label, ns))
                            .collect(),
                    ))
                })
            }
            Err(reason) => {
                let (label, reason) = (label.clone(), reason.clone());
                Box::new(move |_, _| {
                    Ok(Outcome::Absent {
                        label: label.clone(),
                        reason: reason.clone(),
                    })
                })
            }
        };
        v.push(System {
            name: label,
            measure,
        });
    }
    v
}

/// The systems of `--lang c`: ferry from Rust (the baseline of the ratios),
/// and the one C program on C-Threads and on pthreads.
fn c_systems(programs: &Arc<c::Programs>) -> Vec<System> {
    let mut v = vec![System {
        name: ferry::NAME.to_owned(),
        measure: Box::new(ferry::measure),
    }];
    for (label, cthreads) in [(c::CTHREADS, true), (c::PTHREADS, false)] {
        let programs = Arc::clone(programs);
        v.push(System {
            name: label.to_owned(),
            measure: Box::new(move |kind, n| {
                let rows = programs.run(cthreads, kind.go_name(), n)?;
                let rows = go::parse(&rows, kind)?;
                Ok(Outcome::Measured(
                    rows.into_iter()
                        .map(|(row, ns)| Sample::new(row, label, ns))
                        .collect(),
                ))
            }),
        });
    }
    v
}

/// Chooses `n` so that a run lasts about `target`, from a warm-up estimate.
fn size_run(kind: Kind, estimate_ns: f64, target: Duration) -> u64 {
    let n = if estimate_ns > 0.0 && estimate_ns.is_finite() {
        (target.as_nanos() as f64 / estimate_ns) as u64
    } else {
        MAX_N
    };
    let n = n.clamp(MIN_N, MAX_N);
    if kind == Kind::Fork {
        whole_batches(n)
    } else {
        n
    }
}

/// Runs the experiment: a row per (row, system label), absent rows
/// included, with ratios to ferry's in the same row, and the targets
/// (against Go, Tokio and kernel threads; with `--lang c`, the C API's and
/// 003 Table 8-1) as notes.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let runs = common.runs(MEDIAN_OF_FIVE)?;
    let target = if common.quick {
        QUICK_TARGET
    } else {
        DEFAULT_TARGET
    };
    let c_programs = match args.lang {
        Lang::C => Some(Arc::new(c::build()?)),
        Lang::Rust => None,
    };
    let systems = if let Some(programs) = &c_programs {
        c_systems(programs)
    } else {
        let go = if args.no_go {
            Err("left out (--no-go)".to_owned())
        } else {
            go::build().map(Arc::new)
        };
        if let Err(why) = &go {
            eprintln!("ferry-bench threads: Go rows absent: {why}");
        }
        systems(&go)
    };
    eprintln!(
        "ferry-bench threads: {runs} runs x {} kinds x {} systems, ~{} ms per run, fork batch {FORK_BATCH}",
        Kind::ALL.len(),
        systems.len(),
        target.as_millis()
    );

    // n[kind][system], set by the warm-up round.
    let mut sizes = vec![vec![0u64; systems.len()]; Kind::ALL.len()];
    // samples per (row, system index, label); absent rows per (system index, row).
    let mut samples: HashMap<(Op, usize, String), Vec<f64>> = HashMap::new();
    let mut absent: HashMap<(usize, Op), (String, String)> = HashMap::new();

    measure::interleaved(runs, Kind::ALL.len(), systems.len(), |turn| {
        let (ki, si) = (turn.case, turn.system);
        let (kind, sys) = (Kind::ALL[ki], &systems[si]);
        let n = if turn.warmup() {
            kind.warmup_n()
        } else {
            sizes[ki][si]
        };
        let outcome = (sys.measure)(kind, n)
            .map_err(|e| Error(format!("{} / {}: {e}", kind.rows()[0].name(), sys.name)))?;
        match outcome {
            Outcome::Measured(list) => {
                if turn.warmup() {
                    // Size by the first row of the kind (FORK for the fork
                    // kind: its whole loop).
                    let first = kind.rows()[0];
                    let est = list
                        .iter()
                        .filter(|s| s.row == first)
                        .map(|s| s.ns)
                        .fold(0.0, f64::max);
                    sizes[ki][si] = size_run(kind, est, target);
                } else {
                    for s in list {
                        samples.entry((s.row, si, s.label)).or_default().push(s.ns);
                    }
                }
            }
            Outcome::Absent { label, reason } => {
                for &row in kind.rows() {
                    absent.insert((si, row), (label.clone(), reason.clone()));
                }
            }
            Outcome::NotApplicable => {}
        }
        Ok(())
    })?;

    let mut rows = Vec::new();
    for &op in &Op::ALL {
        let kind = Kind::ALL
            .iter()
            .position(|k| k.rows().contains(&op))
            .expect("every row has a kind");
        for (si, sys) in systems.iter().enumerate() {
            let mut mine: Vec<_> = samples
                .iter()
                .filter(|((r, s, _), _)| *r == op && *s == si)
                .collect();
            // The system's plain label first, then variants.
            mine.sort_by_key(|((_, _, label), _)| (label != &sys.name, label.clone()));
            for ((_, _, label), runs) in mine {
                rows.push(Row::new(
                    EXPERIMENT,
                    op.name(),
                    label,
                    Unit::Ns,
                    runs.clone(),
                    sizes[kind][si],
                ));
            }
            if let Some((label, reason)) = absent.get(&(si, op)) {
                rows.push(Row::absent(EXPERIMENT, op.name(), label, Unit::Ns, reason));
            }
        }
    }

    let mut notes = match args.lang {
        Lang::Rust => targets::rust(&rows),
        Lang::C => targets::c(&rows),
    };
    if let Some(programs) = &c_programs {
        notes.push_str(&targets::table_8_1(programs, &rows, runs)?);
    }
    let section = Section {
        headers: ("row", "system"),
        ratios: vec![Ratio::to_system("vs ferry", ferry::NAME)],
        notes: format!("\n{notes}"),
        rows,
        ..Section::default()
    };
    let mut report = Report::single(EXPERIMENT, section);
    if args.lang == Lang::C {
        report.doc = "capi";
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_ops::Sample;

    fn measured(o: Outcome) -> Vec<Sample> {
        match o {
            Outcome::Measured(v) => v,
            other => panic!("expected samples, got {other:?}"),
        }
    }

    fn check_kind(sys: &str, kind: Kind, samples: &[Sample]) {
        for &op in kind.rows() {
            let s = samples
                .iter()
                .find(|s| s.row == op)
                .unwrap_or_else(|| panic!("{sys}: no {} sample", op.name()));
            assert!(
                s.ns.is_finite() && s.ns > 0.0,
                "{sys} {}: {}",
                op.name(),
                s.ns
            );
        }
    }

    #[test]
    fn ferry_measures_every_kind() {
        for kind in Kind::ALL {
            check_kind("ferry", kind, &measured(ferry::measure(kind, 200).unwrap()));
        }
    }

    #[test]
    fn ferry_pingpong_is_labelled_by_mechanism() {
        let s = measured(ferry::measure(Kind::PingPong, 100).unwrap());
        assert!(s.iter().any(|s| s.label == ferry::PARK_UNPARK));
        // The condition variable first: it is the row's baseline.
        assert_eq!(s[0].label, ferry::NAME);
    }

    #[test]
    fn std_and_tokio_measure_every_kind() {
        for kind in Kind::ALL {
            check_kind(
                "std",
                kind,
                &measured(stdlib::threads::measure(kind, 100).unwrap()),
            );
            for multi in [false, true] {
                check_kind(
                    "tokio",
                    kind,
                    &measured(tokio::measure(multi, kind, 100).unwrap()),
                );
            }
        }
        check_kind(
            "pthread",
            Kind::AcquireRelease,
            &measured(pthread::measure(Kind::AcquireRelease, 1000).unwrap()),
        );
        assert_eq!(
            pthread::measure(Kind::Fork, 10).unwrap(),
            Outcome::NotApplicable
        );
    }

    #[test]
    fn fork_rows_add_up() {
        let s = measured(ferry::measure(Kind::Fork, 100).unwrap());
        let get = |op| s.iter().find(|s| s.row == op).unwrap().ns;
        let sum = get(Op::Create) + get(Op::Destroy);
        assert!((get(Op::Fork) - sum).abs() < 1e-6 * sum.max(1.0));
    }

    /// Runs only where `go` is installed; elsewhere there is nothing to test.
    #[test]
    fn go_program_runs_every_kind_where_go_is_installed() {
        let Ok(program) = go::build() else { return };
        for kind in Kind::ALL {
            let rows = program.run(kind, 1000, 1).unwrap();
            assert_eq!(rows.len(), kind.rows().len());
            assert!(rows.iter().all(|(_, ns)| ns.is_finite() && *ns > 0.0));
        }
    }

    #[test]
    fn runs_are_sized_to_the_target() {
        let t = Duration::from_millis(10);
        assert_eq!(size_run(Kind::Yield, 100.0, t), 100_000);
        assert_eq!(size_run(Kind::ForkJoin, 1e9, t), MIN_N);
        assert_eq!(size_run(Kind::ProcedureCall, 0.0, t), MAX_N);
        assert_eq!(size_run(Kind::Fork, 100.0, t) % FORK_BATCH, 0);
    }
}
