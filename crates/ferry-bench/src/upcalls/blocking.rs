//! The blocking-call scenarios of 004 Table 1: `blocked` (an announced
//! one-byte pipe read on a 1-processor runtime beside a compute thread),
//! `unannounced` (the same read made raw, found by the monitor), and the
//! `blocking overhead` of a short announced call (`getppid`).
//!
//! This module owns these scenarios' threads and what each run adds to the
//! [`Collector`]; the schedule is [`super`]'s.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry::upcall::UpcallStats;

use super::collect::Collector;
use super::sys::*;
use super::{LOST_AFTER, Plan, WRITE_DELAY, case, q};
use crate::row::Unit;
use crate::watchdog;

/// What one run of `blocked` or `unannounced` saw.
#[derive(Debug, Clone)]
pub(super) struct IoRun {
    /// At the start, and after the warm-up calls.
    start: UpcallStats,
    before: UpcallStats,
    after: UpcallStats,
    /// ns from just before each call to the compute thread's next run.
    pub stalls: Vec<f64>,
    calls: u32,
}

/// Words the threads of an I/O run share.
#[derive(Debug, Default)]
pub(super) struct IoShared {
    stop: AtomicBool,
    /// Call `g` may start (`go == g`).
    go: AtomicU32,
    /// The reader is about to make call `g`.
    entered: AtomicU32,
    /// The reader is back from call `g`.
    done: AtomicU32,
    /// ns since the base when call `entered` was made.
    call_at: AtomicU64,
    /// ns since the base at which the compute thread first ran after call
    /// `first_gen` was made.
    first_run: AtomicU64,
    first_gen: AtomicU32,
    /// Call `rescued` was ended by the rescuer's byte, not the first thread's.
    rescued: AtomicU32,
}

/// One run of `blocked` (`announced`) or `unannounced`: `warmup` then
/// `calls` one-byte reads from a pipe on a 1-processor runtime with a
/// compute thread (only `calls` counted).
pub(super) fn io_run(warmup: u32, calls: u32, announced: bool) -> Result<IoRun, String> {
    let counted = calls;
    let calls = warmup + calls;
    let pipe = Pipe::new()?;
    let (rfd, wfd) = (pipe.read, pipe.write);
    let sh = Arc::new(IoShared::default());
    // If a call is never taken over (no thread of the runtime can run to
    // write its byte), a kernel thread writes it after LOST_AFTER, so the
    // run ends and says so. Started here, not from a ferry thread, so that
    // it does not inherit a processor's pinning.
    let rescue = {
        let sh = Arc::clone(&sh);
        let mut pending = (0, Instant::now());
        watchdog::poll("rescue", Duration::from_millis(5), move || {
            if sh.stop.load(Ordering::Relaxed) {
                return false;
            }
            let g = sh.entered.load(Ordering::Acquire);
            if g > sh.done.load(Ordering::Acquire) {
                if g != pending.0 {
                    pending = (g, Instant::now());
                } else if pending.1.elapsed() > LOST_AFTER {
                    sh.rescued.store(g, Ordering::Release);
                    write_byte(wfd);
                    pending = (0, Instant::now());
                }
            }
            true
        })
    };
    let runtime_sh = Arc::clone(&sh);
    let r = on_runtime(
        |b| {
            // The monitor's takeover of a processor whose kernel thread
            // sleeps unannounced is opt-in.
            b.processors(1).take_over_unannounced(!announced);
        },
        move || {
            let sh = runtime_sh;
            let base = Instant::now();
            let h = ferry::Handle::current();
            let compute = {
                let sh = Arc::clone(&sh);
                ferry::spawn(move || {
                    let mut seen = 0;
                    while !sh.stop.load(Ordering::Relaxed) {
                        let g = sh.entered.load(Ordering::Acquire);
                        if g != seen {
                            seen = g;
                            sh.first_run.store(ns_since(base), Ordering::Relaxed);
                            sh.first_gen.store(g, Ordering::Release);
                        }
                        ferry::yield_now();
                    }
                })
            };
            let reader = {
                let sh = Arc::clone(&sh);
                ferry::spawn(move || {
                    for g in 1..=calls {
                        while sh.go.load(Ordering::Acquire) < g {
                            if sh.stop.load(Ordering::Relaxed) {
                                return;
                            }
                            ferry::yield_now();
                        }
                        sh.call_at.store(ns_since(base), Ordering::Relaxed);
                        sh.entered.store(g, Ordering::Release);
                        let ok = if announced {
                            ferry::blocking(|| read_byte(rfd))
                        } else {
                            read_byte(rfd)
                        };
                        // Back into ferry: a kernel thread whose processor
                        // was taken over hands the thread back here.
                        ferry::yield_now();
                        if !ok {
                            sh.stop.store(true, Ordering::Relaxed);
                            return;
                        }
                        sh.done.store(g, Ordering::Release);
                    }
                })
            };
            let start = h.upcall_stats();
            let mut before = start;
            let mut stalls = Vec::with_capacity(counted as usize);
            let mut result = Ok(());
            for g in 1..=calls {
                if g == warmup + 1 {
                    // Every event of the warm-up calls is counted by now:
                    // call `g - 1`'s `Unblocked` came before its reader ran.
                    before = h.upcall_stats();
                }
                sh.go.store(g, Ordering::Release);
                if let Err(e) = ferry_wait_until("the reader never went into its call", || {
                    sh.entered.load(Ordering::Acquire) >= g
                }) {
                    result = Err(e);
                    break;
                }
                let t = Instant::now();
                while t.elapsed() < WRITE_DELAY {
                    ferry::yield_now();
                }
                if !write_byte(wfd) {
                    result = Err("cannot write to the pipe".to_owned());
                    break;
                }
                if let Err(e) = ferry_wait_until("the reader never came back from its call", || {
                    sh.done.load(Ordering::Acquire) >= g
                }) {
                    result = Err(e);
                    break;
                }
                let rescued = sh.rescued.load(Ordering::Acquire);
                if rescued != 0 {
                    result = Err(format!(
                        "call {rescued}: the only processor stayed with the kernel thread asleep \
                         in read for {LOST_AFTER:?} (no other thread ran); ended by a byte \
                         written from outside the runtime"
                    ));
                    break;
                }
                if g > warmup && sh.first_gen.load(Ordering::Acquire) == g {
                    let first = sh.first_run.load(Ordering::Relaxed);
                    let at = sh.call_at.load(Ordering::Relaxed);
                    stalls.push(first.saturating_sub(at) as f64);
                }
            }
            let after = h.upcall_stats();
            sh.stop.store(true, Ordering::Relaxed);
            if result.is_err() {
                // Let a reader still in its call out.
                write_byte(wfd);
            }
            let c = compute.join();
            let r = reader.join();
            result?;
            c.map_err(|p| format!("the compute thread panicked: {p}"))?;
            r.map_err(|p| format!("the reader panicked: {p}"))?;
            Ok(IoRun {
                start,
                before,
                after,
                stalls,
                calls: counted,
            })
        },
    );
    sh.stop.store(true, Ordering::Relaxed);
    let _ = rescue.join();
    drop(pipe);
    r?
}

/// One run of `blocked` (`announced`) or `unannounced`, into `col`.
pub(super) fn table1_io(plan: &Plan, col: &mut Collector, announced: bool) {
    let case = if announced {
        case::BLOCKED
    } else {
        case::UNANNOUNCED
    };
    let run = match io_run(plan.io_warmup, plan.io_events, announced) {
        Ok(r) => r,
        Err(e) => return col.fail(case, e),
    };
    let warmup = delta(&run.start.blocked, &run.before.blocked);
    if warmup.count > 0 {
        col.push(
            case,
            "stats.blocked.warmup_mean",
            Unit::Ns,
            warmup.count,
            warmup.mean_ns,
        );
    }
    let blocked = delta(&run.before.blocked, &run.after.blocked);
    let unblocked = delta(&run.before.unblocked, &run.after.unblocked);
    let calls = u64::from(run.calls);
    if announced {
        col.push_latency(case, "blocked", &blocked, true);
        col.push_latency(case, "unblocked", &unblocked, false);
    } else {
        let unannounced = run.after.unannounced_blocks - run.before.unannounced_blocks;
        col.push(
            case,
            "stats.unannounced_blocks",
            Unit::Count,
            calls,
            unannounced as f64,
        );
        col.push_latency(case, "blocked", &blocked, false);
        col.push_latency(case, "unblocked", &unblocked, false);
    }
    if run.stalls.is_empty() {
        col.miss(case, q::STALL, Unit::Ns, "the compute thread never ran");
    } else {
        col.push(case, q::STALL, Unit::Ns, calls, median(&run.stalls));
    }
    col.push(
        case,
        "stats.reclaimed_blocking_calls",
        Unit::Count,
        calls,
        (run.after.reclaimed_blocking_calls - run.before.reclaimed_blocking_calls) as f64,
    );
}

/// How a `blocking(getppid)` loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overhead {
    /// Plain `getppid`, no `blocking`.
    Direct,
    /// `blocking`, nothing else runnable.
    Alone,
    /// `blocking` with a second thread yielding, with this handoff wait;
    /// `max_one`: on a runtime of at most 1 processor, whose kernel threads
    /// ferry does not pin (with room for more, processor 0's driver and
    /// every spare that takes it over are pinned to the first CPU).
    Contended { handoff: Duration, max_one: bool },
}

/// ns per call, and `Blocked` events per call.
pub(super) fn overhead_run(how: Overhead, limit: Duration) -> Result<(f64, f64, u64), String> {
    let (handoff, max_one) = match how {
        Overhead::Contended { handoff, max_one } => (handoff, max_one),
        _ => (Duration::ZERO, false),
    };
    on_runtime(
        |b| {
            b.processors(1).handoff_after(handoff);
            if max_one {
                b.max_processors(1);
            }
        },
        move || {
            let h = ferry::Handle::current();
            let stop = Arc::new(AtomicBool::new(false));
            let other = matches!(how, Overhead::Contended { .. }).then(|| {
                let stop = Arc::clone(&stop);
                ferry::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        ferry::yield_now();
                    }
                })
            });
            // Let the second thread start, so that it waits for the processor.
            ferry::yield_now();
            let before = h.upcall_stats();
            let (n, d) = match how {
                Overhead::Direct => timed_loop(limit, 10_000_000, || {
                    black_box(getppid());
                }),
                _ => timed_loop(limit, 10_000_000, || {
                    black_box(ferry::blocking(getppid));
                }),
            };
            let after = h.upcall_stats();
            stop.store(true, Ordering::Relaxed);
            if let Some(t) = other {
                t.join()
                    .map_err(|p| format!("the yielding thread panicked: {p}"))?;
            }
            let blocked = after.blocked.count - before.blocked.count;
            Ok((ns(d) / n as f64, blocked as f64 / n as f64, n))
        },
    )?
}

/// One run of each blocking-overhead case, into `col`.
pub(super) fn table1_overhead(plan: &Plan, col: &mut Collector) {
    let cases = [
        (q::DIRECT, Overhead::Direct),
        (q::ALONE, Overhead::Alone),
        (
            q::HANDOFF,
            Overhead::Contended {
                handoff: Duration::ZERO,
                max_one: false,
            },
        ),
        (
            q::HANDOFF_UNPINNED,
            Overhead::Contended {
                handoff: Duration::ZERO,
                max_one: true,
            },
        ),
        (
            q::HANDOFF_GO,
            Overhead::Contended {
                handoff: Duration::from_micros(20),
                max_one: false,
            },
        ),
    ];
    for (name, how) in cases {
        match overhead_run(how, plan.loop_limit) {
            Ok((per_call, blocked, n)) => {
                col.push(case::OVERHEAD, name, Unit::Ns, n, per_call);
                if how != Overhead::Direct {
                    col.push(
                        case::OVERHEAD,
                        &format!("{name}: Blocked events per call"),
                        Unit::Count,
                        n,
                        blocked,
                    );
                }
            }
            Err(e) => col.fail(case::OVERHEAD, format!("{name}: {e}")),
        }
    }
}
