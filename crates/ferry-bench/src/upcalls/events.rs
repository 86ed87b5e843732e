//! The other scenarios of 004 Table 1 and Synthesis Table 4: the
//! same-core futex baseline, `preempted` (a spinner on a 1 ms time slice),
//! `processors` (processors added and removed), and the partial switch
//! against a signal's round trip.
//!
//! This module owns these scenarios and what each run adds to the
//! [`Collector`]; the schedule is [`super`]'s.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use ferry::upcall::UpcallStats;

use super::collect::Collector;
use super::sys::*;
use super::{LOST_AFTER, Plan, case, q};
use crate::affinity;
use crate::row::Unit;
use crate::watchdog;

/// ns per round trip of two kernel threads pinned to the same CPU,
/// ping-ponging through two futex words.
pub(super) fn futex_round_trip(n: u64, cpu: Option<usize>) -> Result<f64, String> {
    let ping = AtomicU32::new(0);
    let pong = AtomicU32::new(0);
    let barrier = Barrier::new(2);
    let elapsed = thread::scope(|s| {
        let other = s.spawn(|| {
            affinity::pin_or_warn(cpu, "futex pong");
            barrier.wait();
            for _ in 0..n {
                futex_take(&ping);
                pong.store(1, Ordering::Release);
                futex_wake(&pong);
            }
        });
        affinity::pin_or_warn(cpu, "futex ping");
        barrier.wait();
        let start = Instant::now();
        for _ in 0..n {
            ping.store(1, Ordering::Release);
            futex_wake(&ping);
            futex_take(&pong);
        }
        let d = start.elapsed();
        other.join().map(|()| d)
    })
    .map_err(|_| "a futex thread panicked".to_owned())?;
    Ok(ns(elapsed) / n as f64)
}

/// The same-core futex baseline, run on scoped threads of its own so that
/// the caller's affinity is left as it was.
pub(super) fn table1_futex(plan: &Plan, col: &mut Collector) {
    let (cpu, _) = affinity::two_cores();
    let n = plan.futex_round_trips;
    let r = thread::scope(|s| {
        s.spawn(|| futex_round_trip(n, cpu))
            .join()
            .unwrap_or_else(|_| Err("the futex baseline panicked".to_owned()))
    });
    match r {
        Ok(rt) => {
            col.push(case::FUTEX, q::WAKE_WAIT, Unit::Ns, n, rt / 2.0);
            col.push(case::FUTEX, q::ROUND_TRIP, Unit::Ns, n, rt);
        }
        Err(e) => col.fail(case::FUTEX, e),
    }
}

/// What one run of `preempted` saw.
pub(super) struct PreemptRun {
    before: UpcallStats,
    after: UpcallStats,
    elapsed: Duration,
}

/// One run of `preempted`: a spinner and a thread that yields `yields`
/// times, on 1 processor with a 1 ms time slice.
pub(super) fn preempt_run(yields: u32) -> Result<PreemptRun, String> {
    let stop = Arc::new(AtomicBool::new(false));
    // A watchdog on a kernel thread (started outside the runtime, so not
    // pinned with a processor): if preemption never happens the spinner
    // would keep the only processor forever.
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (stop, timed_out) = (Arc::clone(&stop), Arc::clone(&timed_out));
        let limit = LOST_AFTER + Duration::from_millis(u64::from(yields) * 20);
        let start = Instant::now();
        watchdog::poll("preempt-watchdog", Duration::from_millis(5), move || {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            if start.elapsed() > limit {
                timed_out.store(true, Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                return false;
            }
            true
        })
    };
    let outer_stop = Arc::clone(&stop);
    let r = on_runtime(
        |b| {
            b.processors(1).time_slice(Some(Duration::from_millis(1)));
        },
        move || {
            let h = ferry::Handle::current();
            let before = h.upcall_stats();
            let start = Instant::now();
            let spinner = {
                let stop = Arc::clone(&stop);
                ferry::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            };
            let yielder = {
                let stop = Arc::clone(&stop);
                ferry::spawn(move || {
                    for _ in 0..yields {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        ferry::yield_now();
                    }
                    stop.store(true, Ordering::Relaxed);
                })
            };
            let s = spinner.join();
            let y = yielder.join();
            let elapsed = start.elapsed();
            let after = h.upcall_stats();
            stop.store(true, Ordering::Relaxed);
            s.map_err(|p| format!("the spinner panicked: {p}"))?;
            y.map_err(|p| format!("the yielder panicked: {p}"))?;
            if timed_out.load(Ordering::Relaxed) {
                return Err(format!(
                    "the yielder did not finish its {yields} yields in time: the spinner was \
                     preempted {} times",
                    after.preempted.count - before.preempted.count
                ));
            }
            Ok(PreemptRun {
                before,
                after,
                elapsed,
            })
        },
    );
    outer_stop.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    r?
}

/// One run of `preempted`, into `col`.
pub(super) fn table1_preempted(plan: &Plan, col: &mut Collector) {
    let run = match preempt_run(plan.preempt_yields) {
        Ok(r) => r,
        Err(e) => return col.fail(case::PREEMPTED, e),
    };
    let d = delta(&run.before.preempted, &run.after.preempted);
    col.push_latency(case::PREEMPTED, "preempted", &d, true);
    col.push(
        case::PREEMPTED,
        "stats.chained_preemptions",
        Unit::Count,
        d.count,
        (run.after.chained_preemptions - run.before.chained_preemptions) as f64,
    );
    if d.count > 0 {
        col.push(
            case::PREEMPTED,
            "wall time per preemption (slice as enforced)",
            Unit::Ns,
            d.count,
            ns(run.elapsed) / d.count as f64,
        );
        col.push(case::SWITCH, q::PREEMPTED, Unit::Ns, d.count, d.mean_ns);
    }
}

/// One run of `processors`: `changes` add/remove pairs; the snapshots
/// around them.
pub(super) fn processors_run(changes: u32) -> Result<(UpcallStats, UpcallStats), String> {
    on_runtime(
        |b| {
            b.processors(1).max_processors(2);
        },
        move || {
            let h = ferry::Handle::current();
            let before = h.upcall_stats();
            for _ in 0..changes {
                let s0 = h.upcall_stats();
                h.set_processors(2)
                    .map_err(|e| format!("set_processors(2): {e}"))?;
                ferry_wait_until("ProcessorAdded never delivered", || {
                    h.processors() == 2
                        && h.upcall_stats().processor_added.count > s0.processor_added.count
                })?;
                h.set_processors(1)
                    .map_err(|e| format!("set_processors(1): {e}"))?;
                ferry_wait_until("ProcessorRemoved never delivered", || {
                    h.upcall_stats().processor_removed.count > s0.processor_removed.count
                })?;
            }
            Ok((before, h.upcall_stats()))
        },
    )?
}

/// One run of `processors`, into `col`.
pub(super) fn table1_processors(plan: &Plan, col: &mut Collector) {
    match processors_run(plan.processor_changes) {
        Ok((before, after)) => {
            let added = delta(&before.processor_added, &after.processor_added);
            let removed = delta(&before.processor_removed, &after.processor_removed);
            col.push_latency(case::PROCESSORS, "processor_added", &added, false);
            col.push_latency(case::PROCESSORS, "processor_removed", &removed, false);
        }
        Err(e) => col.fail(case::PROCESSORS, e),
    }
}

/// ns per voluntary switch: two threads on 1 processor yield `n` times each.
pub(super) fn partial_switch(n: u64) -> Result<f64, String> {
    on_runtime(
        |b| {
            b.processors(1);
        },
        move || crate::threads::ferry::yields(n),
    )?
}

/// The empty handler of the signal round trip.
pub(super) extern "C" fn empty_handler(_: libc::c_int) {}

/// ns per `raise` of `SIGUSR2` with an empty handler, on a kernel thread.
pub(super) fn signal_round_trip(limit: Duration) -> Result<(f64, u64), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install_handler(libc::SIGUSR2, empty_handler))
        .clone()?;
    let (n, d) = timed_loop(limit, 10_000_000, || {
        // SAFETY: SIGUSR2's handler is installed and does nothing.
        unsafe { libc::raise(libc::SIGUSR2) };
    });
    Ok((ns(d) / n as f64, n))
}

/// One run of Synthesis Table 4's own measurements, into `col`.
pub(super) fn table4(plan: &Plan, col: &mut Collector) {
    match partial_switch(plan.switch_yields) {
        Ok(x) => col.push(
            case::SWITCH,
            q::PARTIAL,
            Unit::Ns,
            2 * plan.switch_yields,
            x,
        ),
        Err(e) => col.fail(case::SWITCH, format!("{}: {e}", q::PARTIAL)),
    }
    // On a scoped kernel thread of its own: no ferry runtime, no pinning.
    let r = thread::scope(|s| {
        s.spawn(|| signal_round_trip(plan.loop_limit))
            .join()
            .unwrap_or_else(|_| Err("the signal loop panicked".to_owned()))
    });
    match r {
        Ok((x, n)) => col.push(case::SWITCH, q::SIGNAL, Unit::Ns, n, x),
        Err(e) => col.fail(case::SWITCH, format!("{}: {e}", q::SIGNAL)),
    }
}
