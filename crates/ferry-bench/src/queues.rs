//! The `queues` experiment: nanoseconds per push+pop transfer of a `u64`
//! through ferry's four bounded queue kinds and through three peers
//! (crossbeam `ArrayQueue`, crossbeam-channel `bounded`, std `sync_channel`),
//! all with capacity [`CAPACITY`].
//!
//! This module owns the systems under test (each a [`Transport`]), the two
//! cases (`1-thread`: push one, pop it, repeat; `2-thread`: a producer pinned to
//! one core, a consumer pinned to another), the run schedule and the
//! correctness check of every run. Summarising and printing are delegated to
//! [`crate::measure`] and [`crate::report`].
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

use std::fmt;
use std::hint;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ferry_queue::wait::Spin;

use crate::affinity;
use crate::machine::{self, CpuSnapshot};
use crate::measure::{SpinBarrier, Stats};
use crate::report::{Align, Record, Table};

/// Queue capacity used for every system.
pub const CAPACITY: usize = 1024;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "queues";

/// Items per run by default.
const DEFAULT_ITEMS: u64 = 2_000_000;
/// Runs per (case, system) by default.
const DEFAULT_RUNS: u32 = 7;
/// Items per run with `--quick`.
const QUICK_ITEMS: u64 = 200_000;
/// Runs per (case, system) with `--quick`.
const QUICK_RUNS: u32 = 5;
/// Fewest runs accepted: a median of fewer is not worth reporting.
const MIN_RUNS: u32 = 5;
/// Fewest items per run accepted.
const MIN_ITEMS: u64 = 1_000;

/// Command-line arguments of `ferry-bench queues`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Timed runs per (case, system); the median is reported (at least 5)
    /// [default: 7, or 5 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(i64::from(MIN_RUNS)..))]
    pub runs: Option<u32>,

    /// Items transferred per run [default: 2000000, or 200000 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u64).range(MIN_ITEMS..))]
    pub items: Option<u64>,

    /// Fewer items and runs (200000 items, 5 runs), for a fast look; an
    /// explicit --items or --runs still wins
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON object per line per (case, system) instead of a table
    #[arg(long)]
    pub json: bool,
}

impl Args {
    fn runs(&self) -> u32 {
        self.runs
            .unwrap_or(if self.quick { QUICK_RUNS } else { DEFAULT_RUNS })
    }

    fn items(&self) -> u64 {
        self.items.unwrap_or(if self.quick {
            QUICK_ITEMS
        } else {
            DEFAULT_ITEMS
        })
    }
}

/// A run whose consumer did not receive exactly `0..N` in order, or whose
/// producer could not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    /// Case of the failed run.
    pub case: &'static str,
    /// System of the failed run.
    pub system: &'static str,
    /// What went wrong.
    pub detail: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {}: items were lost or corrupted: {}",
            self.case, self.system, self.detail
        )
    }
}

impl std::error::Error for VerifyError {}

/// Flags through which the two sides of a run learn that the other has
/// stopped. They are read only on the slow paths (queue full or empty), so
/// they cost nothing while items flow, and they turn a lost item into an error
/// instead of an endless spin.
#[derive(Debug, Default)]
struct Control {
    /// Set (Release) by the producer after its last push, or when it dies.
    producer_done: AtomicBool,
    /// Set by the consumer when it gives up on a bad item.
    consumer_quit: AtomicBool,
}

impl Control {
    /// For the `1-thread` case: nobody else pushes or pops, so "empty after a
    /// push" and "full with one item" are immediately errors.
    fn single_threaded() -> Control {
        Control {
            producer_done: AtomicBool::new(true),
            consumer_quit: AtomicBool::new(true),
        }
    }
}

/// Sets the flag when dropped, so a panicking producer still releases a
/// spinning consumer.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// One system under test: how to make a queue of capacity `n` and move a
/// `u64` through it. Implementations are zero-sized markers, so each
/// benchmark loop is monomorphised for its system.
trait Transport {
    /// Name in the report.
    const NAME: &'static str;
    /// The producer's handle.
    type Tx: Send;
    /// The consumer's handle.
    type Rx: Send;
    /// A queue of the given capacity.
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Sends `v`, waiting while the queue is full. `false` if the consumer is
    /// gone or has given up.
    fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool;
    /// Receives one item, waiting while the queue is empty. `None` if the
    /// producer is done or gone and the queue is empty.
    fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64>;
}

/// `try_push` in a loop with `spin_loop()` while full.
#[inline(always)]
fn spin_send(mut v: u64, ctl: &Control, mut try_push: impl FnMut(u64) -> Result<(), u64>) -> bool {
    loop {
        match try_push(v) {
            Ok(()) => return true,
            Err(back) => {
                if ctl.consumer_quit.load(Ordering::Relaxed) {
                    return false;
                }
                v = back;
                hint::spin_loop();
            }
        }
    }
}

/// `try_pop` in a loop with `spin_loop()` while empty.
#[inline(always)]
fn spin_recv(ctl: &Control, mut try_pop: impl FnMut() -> Option<u64>) -> Option<u64> {
    loop {
        if let Some(v) = try_pop() {
            return Some(v);
        }
        if ctl.producer_done.load(Ordering::Acquire) {
            // Everything the producer pushed happened before this load, so
            // one more try sees it; still empty means it is lost.
            return try_pop();
        }
        hint::spin_loop();
    }
}

/// Defines a [`Transport`] for a ferry queue kind with the `Spin` strategy,
/// driven by `try_push`/`try_pop` spin loops.
macro_rules! ferry_spin {
    ($marker:ident, $kind:ident, $name:literal) => {
        #[doc = concat!("`", $name, "`: `ferry_queue::", stringify!($kind), "` with `Spin`, try_push/try_pop loops.")]
        struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = ferry_queue::$kind::Producer<u64, Spin>;
            type Rx = ferry_queue::$kind::Consumer<u64, Spin>;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                ferry_queue::$kind::channel_with::<u64, Spin>(capacity)
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
                spin_send(v, ctl, |v| tx.try_push(v))
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
                spin_recv(ctl, || rx.try_pop())
            }
        }
    };
}

/// Defines a [`Transport`] for a ferry queue kind with the default
/// `SpinPark` strategy, driven by the blocking `push`/`pop`.
macro_rules! ferry_park {
    ($marker:ident, $kind:ident, $name:literal) => {
        #[doc = concat!("`", $name, "`: `ferry_queue::", stringify!($kind), "` with `SpinPark`, blocking push/pop.")]
        struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = ferry_queue::$kind::Producer<u64>;
            type Rx = ferry_queue::$kind::Consumer<u64>;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                ferry_queue::$kind::channel::<u64>(capacity)
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, _ctl: &Control) -> bool {
                tx.push(v).is_ok()
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, _ctl: &Control) -> Option<u64> {
                rx.pop().ok()
            }
        }
    };
}

/// Defines a [`Transport`] for a multi-producer (and, with `both`,
/// multi-consumer) ferry kind whose handles each have an idle twin kept
/// alive, so every operation takes the shared-side path (a CAS per claim)
/// instead of the lone-handle path the plain rows measure.
macro_rules! ferry_shared {
    ($marker:ident, $kind:ident, $name:literal, $rx:ty, $rx_twin:expr) => {
        #[doc = concat!("`", $name, "`: `ferry_queue::", stringify!($kind), "` with `Spin` and a second, idle handle per multi side.")]
        struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = (
                ferry_queue::$kind::Producer<u64, Spin>,
                ferry_queue::$kind::Producer<u64, Spin>,
            );
            type Rx = $rx;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                let (tx, rx) = ferry_queue::$kind::channel_with::<u64, Spin>(capacity);
                let twin = tx.clone();
                ((tx, twin), $rx_twin(rx))
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
                spin_send(v, ctl, |v| tx.0.try_push(v))
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
                spin_recv(ctl, || first(rx).try_pop())
            }
        }
    };
}

/// The handle a transport uses, whether or not it has an idle twin.
trait First {
    type Handle;
    fn first(&self) -> &Self::Handle;
}

impl<K: ferry_queue::Kind> First for ferry_queue::Consumer<u64, K, Spin> {
    type Handle = Self;
    fn first(&self) -> &Self {
        self
    }
}

impl<K: ferry_queue::Kind> First
    for (
        ferry_queue::Consumer<u64, K, Spin>,
        ferry_queue::Consumer<u64, K, Spin>,
    )
{
    type Handle = ferry_queue::Consumer<u64, K, Spin>;
    fn first(&self) -> &Self::Handle {
        &self.0
    }
}

#[inline(always)]
fn first<F: First>(f: &F) -> &F::Handle {
    f.first()
}

ferry_spin!(FerrySpsc, spsc, "ferry spsc");
ferry_spin!(FerryMpsc, mpsc, "ferry mpsc");
ferry_spin!(FerrySpmc, spmc, "ferry spmc");
ferry_spin!(FerryMpmc, mpmc, "ferry mpmc");
ferry_park!(FerrySpscPark, spsc, "ferry spsc (park)");
ferry_park!(FerryMpscPark, mpsc, "ferry mpsc (park)");
ferry_shared!(
    FerryMpscShared,
    mpsc,
    "ferry mpsc (2 producer handles)",
    ferry_queue::mpsc::Consumer<u64, Spin>,
    |rx| rx
);
ferry_shared!(
    FerryMpmcShared,
    mpmc,
    "ferry mpmc (2+2 handles)",
    (
        ferry_queue::mpmc::Consumer<u64, Spin>,
        ferry_queue::mpmc::Consumer<u64, Spin>
    ),
    |rx: ferry_queue::mpmc::Consumer<u64, Spin>| {
        let twin = rx.clone();
        (rx, twin)
    }
);

/// Name of the crossbeam `ArrayQueue` system, the first ratio baseline.
const ARRAY_QUEUE: &str = "crossbeam ArrayQueue";
/// Name of the std `sync_channel` system, the second ratio baseline.
const STD_SYNC: &str = "std sync_channel";

/// `crossbeam ArrayQueue`: `crossbeam_queue::ArrayQueue` shared through an
/// `Arc`, push/pop spin loops.
struct CrossbeamArrayQueue;

impl Transport for CrossbeamArrayQueue {
    const NAME: &'static str = ARRAY_QUEUE;
    type Tx = Arc<crossbeam_queue::ArrayQueue<u64>>;
    type Rx = Arc<crossbeam_queue::ArrayQueue<u64>>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(crossbeam_queue::ArrayQueue::new(capacity));
        (Arc::clone(&q), q)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
        spin_send(v, ctl, |v| tx.push(v))
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
        spin_recv(ctl, || rx.pop())
    }
}

/// `crossbeam-channel bounded`: blocking `send`/`recv`.
struct CrossbeamBounded;

impl Transport for CrossbeamBounded {
    const NAME: &'static str = "crossbeam-channel bounded";
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(capacity)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64, _ctl: &Control) -> bool {
        tx.send(v).is_ok()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx, _ctl: &Control) -> Option<u64> {
        rx.recv().ok()
    }
}

/// `std sync_channel`: `std::sync::mpsc::sync_channel`, blocking `send`/`recv`.
struct StdSyncChannel;

impl Transport for StdSyncChannel {
    const NAME: &'static str = STD_SYNC;
    type Tx = std::sync::mpsc::SyncSender<u64>;
    type Rx = std::sync::mpsc::Receiver<u64>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(capacity)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64, _ctl: &Control) -> bool {
        tx.send(v).is_ok()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx, _ctl: &Control) -> Option<u64> {
        rx.recv().ok()
    }
}

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

/// Runs the experiment and prints its results to stdout (table or JSON
/// lines). Returns an error if any run lost or corrupted an item.
pub fn run(args: &Args) -> Result<(), VerifyError> {
    let runs = args.runs();
    let items = args.items();
    let systems = systems();
    let placement = placement();
    let started = Instant::now();
    let cpu_before = CpuSnapshot::now();
    eprintln!(
        "ferry-bench queues: {runs} runs x {} cases x {} systems, {items} items per run, \
         capacity {CAPACITY}, producer on cpu {}, consumer on cpu {}",
        Case::ALL.len(),
        systems.len(),
        fmt_cpu(placement.producer),
        fmt_cpu(placement.consumer),
    );

    // samples[case][system] = ns per op of each run.
    let mut samples = vec![vec![Vec::with_capacity(runs as usize); systems.len()]; Case::ALL.len()];

    // Round 0 is an untimed warm-up on a tenth of the items.
    for round in 0..=runs {
        let warmup = round == 0;
        for (ci, &case) in Case::ALL.iter().enumerate() {
            for k in 0..systems.len() {
                let si = (k + round as usize) % systems.len();
                let sys = &systems[si];
                let n = if warmup { items / 10 } else { items };
                let elapsed = sys.run(case, n, placement).map_err(|detail| VerifyError {
                    case: case.name(),
                    system: sys.name,
                    detail,
                })?;
                if !warmup {
                    samples[ci][si].push(elapsed.as_nanos() as f64 / n as f64);
                }
            }
        }
    }

    let mut records = Vec::new();
    for (ci, &case) in Case::ALL.iter().enumerate() {
        for (si, sys) in systems.iter().enumerate() {
            let stats = Stats::from_samples(&samples[ci][si]).expect("runs >= 5 and finite");
            records.push(Record::new(
                EXPERIMENT,
                case.name(),
                sys.name,
                &stats,
                items,
            ));
        }
    }

    if args.json {
        for r in &records {
            println!("{}", r.json_line());
        }
    } else {
        print!("{}", table(&records));
    }
    eprintln!(
        "ferry-bench queues: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    machine::report_interference("queues", cpu_before);
    Ok(())
}

fn fmt_cpu(cpu: Option<usize>) -> String {
    cpu.map_or_else(|| "any".to_owned(), |c| c.to_string())
}

/// The text table: one row per record, with ratios against the two baselines
/// of the same case.
fn table(records: &[Record]) -> String {
    let baseline = |case: &str, system: &str| {
        records
            .iter()
            .find(|r| r.case == case && r.system == system)
            .map(|r| r.ns_per_op)
    };
    let ratio = |x: f64, base: Option<f64>| match base {
        Some(b) if b > 0.0 => format!("{:.2}x", x / b),
        _ => "-".to_owned(),
    };
    let mut t = Table::new(&[
        ("case", Align::Left),
        ("system", Align::Left),
        ("median ns/op", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
        ("vs ArrayQueue", Align::Right),
        ("vs sync_channel", Align::Right),
    ]);
    for r in records {
        t.push_row(vec![
            r.case.clone(),
            r.system.clone(),
            format!("{:.2}", r.ns_per_op),
            format!("{:.2}", r.min),
            format!("{:.2}", r.max),
            ratio(r.ns_per_op, baseline(&r.case, ARRAY_QUEUE)),
            ratio(r.ns_per_op, baseline(&r.case, STD_SYNC)),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let s = |x: f64| Stats::from_samples(&[x; 5]).unwrap();
        let records = vec![
            Record::new(EXPERIMENT, "1-thread", ARRAY_QUEUE, &s(10.0), 100),
            Record::new(EXPERIMENT, "1-thread", STD_SYNC, &s(20.0), 100),
            Record::new(EXPERIMENT, "1-thread", "x", &s(5.0), 100),
            Record::new(EXPERIMENT, "2-thread", ARRAY_QUEUE, &s(20.0), 100),
            Record::new(EXPERIMENT, "2-thread", "x", &s(5.0), 100),
        ];
        let out = table(&records);
        let row = |case: &str| {
            out.lines()
                .find(|l| l.starts_with(case) && l.contains(" x "))
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(row("1-thread")[5..], ["0.50x", "0.25x"], "{out}");
        // No sync_channel record in the 2-thread case: no ratio, not a wrong one.
        assert_eq!(row("2-thread")[5..], ["0.25x", "-"], "{out}");
    }
}
