//! The `queues` experiment: nanoseconds per push+pop transfer of a `u64`
//! through ferry's four bounded queue kinds and through three peers
//! (crossbeam `ArrayQueue`, crossbeam-channel `bounded`, std `sync_channel`),
//! all with capacity [`CAPACITY`].
//!
//! This module owns the two cases (`1-thread`: push one, pop it, repeat;
//! `2-thread`: a producer pinned to one core, a consumer pinned to another),
//! the run schedule and the correctness check of every run. How each system
//! moves an item is [`transport`](crate::transport)'s (ferry's kinds) and [`crate::peers`]'
//! (the peers); summarising and printing are [`crate::row`]'s and
//! [`crate::report`]'s.
//!
//! ## Method
//! * Every (case, system) pair is run `--runs` times. Runs are interleaved:
//!   run *k* of every pair happens before run *k+1* of any pair, and the order
//!   of systems is rotated from one round to the next, so that slow drifts of
//!   the machine (frequency, a noisy neighbour) hit all systems alike.
//! * One untimed warm-up round (a tenth of the items) precedes the timed ones.
//! * `2-thread` time is measured from the moment both threads leave a spinning
//!   start barrier (the earlier of the two threads' clocks) until the consumer
//!   has received the last item.
//! * Every run checks that the consumer received exactly `0..N`, in order (there
//!   is one consumer in both cases, so FIFO order is required of every kind). A
//!   lost, duplicated or reordered item ends the program with an error.
//! * Every system transfers the same `N` items per run, the blocking peers
//!   (crossbeam-channel, std `sync_channel`) included: with capacity 1024 they
//!   rarely park, and measured 15-60 ns/op across two cores of the 2-core
//!   development VM, so scaling their item count down was not needed. The JSON
//!   records carry the item count (`items`) anyway.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::affinity;
use crate::common::{Common, MEDIAN_OF_FIVE};
use crate::measure::{self, SpinBarrier};
use crate::peers::crossbeam::{ARRAY_QUEUE, CrossbeamArrayQueue, CrossbeamBounded};
use crate::peers::stdlib::{SYNC_CHANNEL, StdSyncChannel};
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};

use crate::transport::*;

/// Queue capacity used for every system.
pub const CAPACITY: usize = 1024;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "queues";

/// Command-line arguments of `ferry-bench queues`.
pub use crate::common::Counted as Args;

/// The two scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// One thread pushes one item, then pops it, `N` times.
    OneThread,
    /// A pinned producer pushes `N` items, a pinned consumer pops them.
    TwoThread,
}

impl Case {
    const ALL: [Case; 2] = [Case::OneThread, Case::TwoThread];

    fn name(self) -> &'static str {
        match self {
            Case::OneThread => "1-thread",
            Case::TwoThread => "2-thread",
        }
    }
}

/// Where the benchmark threads run: the first two CPUs this process may use
/// (cores 0 and 1 on an unrestricted machine), or `None` if pinning is off.
#[derive(Debug, Clone, Copy)]
struct Placement {
    producer: Option<usize>,
    consumer: Option<usize>,
}

/// Result of one timed run: elapsed time or what was wrong with the items.
type RunResult = Result<Duration, String>;

/// A system under test, type-erased into function pointers to its
/// monomorphised benchmark loops.
struct System {
    name: &'static str,
    one_thread: fn(u64, Placement) -> RunResult,
    two_thread: fn(u64, Placement) -> RunResult,
}

impl System {
    fn of<T: Transport>() -> System {
        System {
            name: T::NAME,
            one_thread: one_thread::<T>,
            two_thread: two_thread::<T>,
        }
    }

    fn run(&self, case: Case, items: u64, placement: Placement) -> RunResult {
        match case {
            Case::OneThread => (self.one_thread)(items, placement),
            Case::TwoThread => (self.two_thread)(items, placement),
        }
    }
}

/// Every system, in report order.
fn systems() -> Vec<System> {
    vec![
        System::of::<FerrySpsc>(),
        System::of::<FerryMpsc>(),
        System::of::<FerrySpmc>(),
        System::of::<FerryMpmc>(),
        System::of::<FerrySpscPark>(),
        System::of::<FerryMpscPark>(),
        System::of::<FerryMpscShared>(),
        System::of::<FerryMpmcShared>(),
        System::of::<CrossbeamArrayQueue>(),
        System::of::<CrossbeamBounded>(),
        System::of::<StdSyncChannel>(),
    ]
}

/// Checks that the `i`-th received item is `i`.
#[inline(always)]
fn check(i: u64, got: Option<u64>) -> Result<(), String> {
    match got {
        Some(v) if v == i => Ok(()),
        Some(v) => Err(format!("item #{i} received as {v}")),
        None => Err(format!(
            "item #{i} never arrived (queue empty, producer done)"
        )),
    }
}

/// The `1-thread` case: push `i`, pop it, for `i` in `0..items`, on the
/// producer's CPU.
fn one_thread<T: Transport>(items: u64, placement: Placement) -> RunResult {
    // In a fresh thread so that pinning does not touch the main thread.
    thread::scope(|s| {
        s.spawn(|| {
            affinity::pin_or_warn(placement.producer, "1-thread worker");
            let (tx, rx) = T::channel(CAPACITY);
            let ctl = Control::single_threaded();
            let start = Instant::now();
            for i in 0..items {
                if !T::send(&tx, i, &ctl) {
                    return Err(format!(
                        "push of item #{i} failed on a queue with no items in it"
                    ));
                }
                check(i, T::recv(&rx, &ctl))?;
            }
            Ok(start.elapsed())
        })
        .join()
        .unwrap_or_else(|_| Err("the 1-thread worker panicked".to_owned()))
    })
}

/// The `2-thread` case: a producer pushes `0..items`, a consumer pops and
/// checks them, each on its own CPU; timed from the start barrier to the last
/// item received.
fn two_thread<T: Transport>(items: u64, placement: Placement) -> RunResult {
    let (tx, rx) = T::channel(CAPACITY);
    let ctl = &Control::default();
    let barrier = &SpinBarrier::new(2);
    thread::scope(|s| {
        let producer = s.spawn(move || {
            let _done = SetOnDrop(&ctl.producer_done);
            affinity::pin_or_warn(placement.producer, "producer");
            barrier.wait();
            let start = Instant::now();
            let mut sent = 0;
            while sent < items && T::send(&tx, sent, ctl) {
                sent += 1;
            }
            // `tx` drops here, before `_done`: blocking consumers see a
            // disconnect, spinning ones the flag.
            drop(tx);
            (start, sent)
        });
        let consumer = s.spawn(move || {
            affinity::pin_or_warn(placement.consumer, "consumer");
            barrier.wait();
            let start = Instant::now();
            let mut result = Ok(());
            for i in 0..items {
                result = check(i, T::recv(&rx, ctl));
                if result.is_err() {
                    ctl.consumer_quit.store(true, Ordering::Relaxed);
                    break;
                }
            }
            let end = Instant::now();
            drop(rx);
            (start, end, result)
        });
        let consumed = consumer.join();
        let produced = producer.join();
        let (c_start, end, result) =
            consumed.map_err(|_| "the consumer thread panicked".to_owned())?;
        let (p_start, sent) = produced.map_err(|_| "the producer thread panicked".to_owned())?;
        result?;
        if sent != items {
            return Err(format!("producer sent only {sent} of {items} items"));
        }
        Ok(end.duration_since(p_start.min(c_start)))
    })
}

/// Picks the CPUs for producer and consumer: the first two this process may
/// run on. Warns on stderr (and returns no pinning) if that is not possible.
fn placement() -> Placement {
    match affinity::allowed_cpus() {
        Ok(cpus) if cpus.len() >= 2 => Placement {
            producer: Some(cpus[0]),
            consumer: Some(cpus[1]),
        },
        Ok(cpus) => {
            eprintln!(
                "ferry-bench: warning: only {} CPU(s) allowed ({cpus:?}); running unpinned, \
                 2-thread results share one core",
                cpus.len()
            );
            Placement {
                producer: None,
                consumer: None,
            }
        }
        Err(e) => {
            eprintln!("ferry-bench: warning: cannot read CPU affinity ({e}); running unpinned");
            Placement {
                producer: None,
                consumer: None,
            }
        }
    }
}

/// Runs the experiment: a row per (case, system), with ratios to
/// `ArrayQueue` and `sync_channel` in the same case. An error if any run
/// lost or corrupted an item.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let runs = common.runs(MEDIAN_OF_FIVE)?;
    let items = common.items(args)?;
    let systems = systems();
    let placement = placement();
    eprintln!(
        "ferry-bench queues: {runs} runs x {} cases x {} systems, {items} items per run, \
         capacity {CAPACITY}, producer on cpu {}, consumer on cpu {}",
        Case::ALL.len(),
        systems.len(),
        affinity::name(placement.producer),
        affinity::name(placement.consumer),
    );

    // samples[case][system] = ns per op of each run.
    let mut samples = vec![vec![Vec::with_capacity(runs as usize); systems.len()]; Case::ALL.len()];

    // Round 0 is an untimed warm-up on a tenth of the items.
    measure::interleaved(runs, Case::ALL.len(), systems.len(), |turn| {
        let (case, sys) = (Case::ALL[turn.case], &systems[turn.system]);
        let n = if turn.warmup() { items / 10 } else { items };
        let elapsed = sys.run(case, n, placement).map_err(|detail| {
            Error(format!(
                "{} / {}: items were lost or corrupted: {detail}",
                case.name(),
                sys.name
            ))
        })?;
        if !turn.warmup() {
            samples[turn.case][turn.system].push(elapsed.as_nanos() as f64 / n as f64);
        }
        Ok(())
    })?;

    let mut rows = Vec::new();
    for (ci, &case) in Case::ALL.iter().enumerate() {
        for (si, sys) in systems.iter().enumerate() {
            let s = std::mem::take(&mut samples[ci][si]);
            rows.push(Row::new(
                EXPERIMENT,
                case.name(),
                sys.name,
                Unit::Ns,
                s,
                items,
            ));
        }
    }
    Ok(Report::single(EXPERIMENT, section(rows)))
}

/// The table: the rows with ratios against the two baselines of the same
/// case.
fn section(rows: Vec<Row>) -> Section {
    Section {
        rows,
        ratios: vec![
            Ratio::to_system("vs ArrayQueue", ARRAY_QUEUE),
            Ratio::to_system("vs sync_channel", SYNC_CHANNEL),
        ],
        ..Section::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const UNPINNED: Placement = Placement {
        producer: None,
        consumer: None,
    };

    #[test]
    fn every_system_passes_both_cases() {
        for sys in systems() {
            for case in Case::ALL {
                let r = sys.run(case, 10_000, UNPINNED);
                assert!(r.is_ok(), "{} / {}: {r:?}", case.name(), sys.name);
            }
        }
    }

    /// A deliberately broken transport that drops every 1000th item: the
    /// harness must report it, not hang or succeed.
    struct Lossy;

    impl Transport for Lossy {
        const NAME: &'static str = "lossy";
        type Tx = Arc<crossbeam_queue::ArrayQueue<u64>>;
        type Rx = Arc<crossbeam_queue::ArrayQueue<u64>>;
        fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
            CrossbeamArrayQueue::channel(capacity)
        }
        fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
            v % 1000 == 999 || CrossbeamArrayQueue::send(tx, v, ctl)
        }
        fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
            CrossbeamArrayQueue::recv(rx, ctl)
        }
    }

    #[test]
    fn lost_items_fail_the_run() {
        let one = one_thread::<Lossy>(5_000, UNPINNED);
        assert_eq!(
            one,
            Err("item #999 never arrived (queue empty, producer done)".to_owned())
        );
        let two = two_thread::<Lossy>(5_000, UNPINNED);
        assert_eq!(two, Err("item #999 received as 1000".to_owned()));
    }

    #[test]
    fn table_ratios_are_against_the_same_case() {
        let r = |case: &str, system: &str, x: f64| {
            Row::new(EXPERIMENT, case, system, Unit::Ns, vec![x; 5], 100)
        };
        let out = section(vec![
            r("1-thread", ARRAY_QUEUE, 10.0),
            r("1-thread", SYNC_CHANNEL, 20.0),
            r("1-thread", "x", 5.0),
            r("2-thread", ARRAY_QUEUE, 20.0),
            r("2-thread", "x", 5.0),
        ])
        .render();
        let row = |case: &str| {
            out.lines()
                .find(|l| l.starts_with(case) && l.contains(" x "))
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(row("1-thread")[5..], ["0.50x", "0.25x"], "{out}");
        // No sync_channel row in the 2-thread case: no ratio, not a wrong one.
        assert_eq!(row("2-thread")[5..], ["0.25x", "-"], "{out}");
    }
}
