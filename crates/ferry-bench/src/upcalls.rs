//! The `upcalls` experiment: ferry's scheduler activations measured as the
//! scheduler-activations paper (Anderson et al., 1992, seed `004`) and
//! Synthesis (Massalin and Pu, 1989) framed them.
//!
//! This module owns the scenarios, their run schedule, the targets and the
//! Figure 2 plot; summarising goes through [`crate::measure`], tables through
//! [`crate::report`], pinning through [`crate::affinity`] and the noise check
//! through [`crate::machine`].
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
//! | `blocking overhead` | ns per `libc::getppid()`: direct; in `ferry::blocking` alone on 1 processor; with a second runnable thread (`handoff_after(0)`, the default: each call wakes a patient spare on its core unless one is already on its way, and the spare takes the processor only if the call sleeps); the same on a runtime of `max_processors(1)` (whose kernel threads ferry leaves unpinned, while with room for a second processor processor 0's drivers are all pinned to the first CPU); the same as the first with `handoff_after(20 µs)` (Go's rule) | ns per call, ratio over direct, and `Blocked` events per call |
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
//! `docs/results/upcalls-figure2.png` under the workspace root.
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
//! Every scenario runs `--runs` times (default [`DEFAULT_RUNS`], with
//! `--quick` [`QUICK_RUNS`] and shorter loops), interleaved: run *k* of
//! every scenario before run *k+1* of any; Figure 2's regimes are rotated
//! from one round to the next. Every number printed is the median over the
//! runs, with min and max.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use ferry::upcall::{EventLatency, UpcallStats};
use serde::Serialize;

use crate::affinity;
use crate::machine::{self, CpuSnapshot};
use crate::measure::Stats;
use crate::report::{Align, Table};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "upcalls";

/// Runs per scenario by default.
pub const DEFAULT_RUNS: u32 = 5;
/// Runs per scenario with `--quick`.
pub const QUICK_RUNS: u32 = 3;

/// How long the first thread waits, after the reader went into its call,
/// before it writes the byte (so that the reader really sleeps in the
/// kernel).
pub const WRITE_DELAY: Duration = Duration::from_micros(50);

/// How long any wait of a scenario may last before it is declared lost (an
/// event never delivered, a thread never run).
const LOST_AFTER: Duration = Duration::from_secs(2);

/// The last-resort guard against a scenario that hangs (a ferry thread
/// that is never run again cannot be timed out from inside): one kernel
/// thread that checks the deadline of the scenario under way and, past it,
/// says which scenario hung and ends the process.
mod hang {
    use std::sync::{Mutex, Once, PoisonError};
    use std::time::{Duration, Instant};

    /// The scenario under way and its deadline.
    static WATCHED: Mutex<Option<(String, Instant)>> = Mutex::new(None);

    /// Watches `what` until [`unwatch`]: if it is still under way after
    /// `limit`, the process prints so on stderr and exits with status 3.
    pub fn watch(what: &str, limit: Duration) {
        static START: Once = Once::new();
        START.call_once(|| {
            let _ = std::thread::Builder::new()
                .name("hang-watchdog".into())
                .spawn(|| {
                    loop {
                        std::thread::sleep(Duration::from_millis(100));
                        let w = WATCHED.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some((what, deadline)) = &*w
                            && Instant::now() > *deadline
                        {
                            eprintln!(
                                "ferry-bench upcalls: HANG: {what} did not finish in time; \
                                 giving up (exit status 3)"
                            );
                            std::process::exit(3);
                        }
                    }
                });
        });
        *WATCHED.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((what.to_owned(), Instant::now() + limit));
    }

    /// The scenario under way finished.
    pub fn unwatch() {
        *WATCHED.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Command-line arguments of `ferry-bench upcalls`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Runs per scenario; every number is the median over them
    /// [default: 5, or 3 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,

    /// Shorter loops, fewer disruptions (M = 1, 5 ms, 10 each) and 3 runs,
    /// for a fast look (under 30 s); an explicit --runs still wins
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON object per line per reported number instead of tables
    #[arg(long)]
    pub json: bool,
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
    /// The plan `args` ask for.
    pub fn new(args: &Args) -> Plan {
        let runs = args
            .runs
            .unwrap_or(if args.quick { QUICK_RUNS } else { DEFAULT_RUNS });
        if args.quick {
            Plan {
                runs,
                io_events: 60,
                io_warmup: 20,
                processor_changes: 60,
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
                preempt_yields: 1000,
                futex_round_trips: 10_000,
                switch_yields: 200_000,
                loop_limit: Duration::from_millis(20),
                disruption_ms: vec![1, 2, 5, 10, 20],
                disruptions: 50,
                undisturbed: Duration::from_millis(200),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Collecting samples

/// The unit of a reported quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Nanoseconds.
    Ns,
    /// A count (events, calls), or a ratio of counts.
    Count,
}

impl Unit {
    /// The unit's name in tables and JSON.
    fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Count => "count",
        }
    }
}

/// One reported quantity of one case: a sample per run.
#[derive(Debug, Clone)]
struct Metric {
    /// The table and scenario, e.g. `"table1 blocked"`.
    case: &'static str,
    /// What was measured, e.g. `"stats.blocked.mean"`.
    quantity: String,
    unit: Unit,
    samples: Vec<f64>,
    /// Operations (calls, events) behind each sample (the last run's).
    items: u64,
    /// Why a run had no sample, the first time it happened.
    missing: Option<String>,
}

/// All quantities of an invocation, in the order first reported.
#[derive(Debug, Default)]
struct Collector {
    metrics: Vec<Metric>,
    /// Scenarios that failed in a run: (case, reason).
    failures: Vec<(&'static str, String)>,
}

impl Collector {
    /// The metric `(case, quantity)`, made if new.
    fn entry(&mut self, case: &'static str, quantity: &str, unit: Unit) -> &mut Metric {
        let i = match self
            .metrics
            .iter()
            .position(|m| m.case == case && m.quantity == quantity)
        {
            Some(i) => i,
            None => {
                self.metrics.push(Metric {
                    case,
                    quantity: quantity.to_owned(),
                    unit,
                    samples: Vec::new(),
                    items: 0,
                    missing: None,
                });
                self.metrics.len() - 1
            }
        };
        &mut self.metrics[i]
    }

    /// Adds one run's sample.
    fn push(&mut self, case: &'static str, quantity: &str, unit: Unit, items: u64, value: f64) {
        let m = self.entry(case, quantity, unit);
        if value.is_finite() {
            m.samples.push(value);
            m.items = items;
        } else if m.missing.is_none() {
            m.missing = Some("not a finite number".to_owned());
        }
    }

    /// Notes that a run had no sample for the quantity, and why.
    fn miss(&mut self, case: &'static str, quantity: &str, unit: Unit, reason: &str) {
        let m = self.entry(case, quantity, unit);
        if m.missing.is_none() {
            m.missing = Some(reason.to_owned());
        }
    }

    /// Adds an event latency's mean (and max) with its count, or notes that
    /// no event was delivered.
    fn push_latency(&mut self, case: &'static str, name: &str, d: &Delta, with_max: bool) {
        let mean = format!("stats.{name}.mean");
        if d.count == 0 {
            self.miss(case, &mean, Unit::Ns, "no event delivered");
        } else {
            self.push(case, &mean, Unit::Ns, d.count, d.mean_ns);
            if with_max {
                self.push(
                    case,
                    &format!("stats.{name}.max"),
                    Unit::Ns,
                    d.count,
                    d.max_ns,
                );
            }
        }
        self.push(
            case,
            &format!("stats.{name}.count"),
            Unit::Count,
            d.count,
            d.count as f64,
        );
    }

    /// Records that a scenario failed in a run.
    fn fail(&mut self, case: &'static str, reason: String) {
        if !self
            .failures
            .iter()
            .any(|(c, r)| *c == case && *r == reason)
        {
            self.failures.push((case, reason));
        }
    }

    /// The summary of `(case, quantity)`'s samples, if any.
    fn stats(&self, case: &str, quantity: &str) -> Option<Stats> {
        self.metrics
            .iter()
            .find(|m| m.case == case && m.quantity == quantity)
            .and_then(|m| Stats::from_samples(&m.samples))
    }

    /// The median of `(case, quantity)`'s samples, if any.
    fn median(&self, case: &str, quantity: &str) -> Option<f64> {
        self.stats(case, quantity).map(|s| s.median)
    }
}

/// The events of one kind delivered between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delta {
    /// Events delivered in between.
    pub count: u64,
    /// Their mean latency, ns (NaN if none).
    pub mean_ns: f64,
    /// The longest latency the runtime had seen by the second snapshot, ns.
    pub max_ns: f64,
}

/// The events of one kind delivered between snapshots `before` and `after`.
pub fn delta(before: &EventLatency, after: &EventLatency) -> Delta {
    let count = after.count.saturating_sub(before.count);
    let total = |l: &EventLatency| l.mean.as_nanos() as f64 * l.count as f64;
    Delta {
        count,
        mean_ns: if count == 0 {
            f64::NAN
        } else {
            ((total(after) - total(before)) / count as f64).max(0.0)
        },
        max_ns: after.max.as_nanos() as f64,
    }
}

// ---------------------------------------------------------------------------
// Small tools

/// Nanoseconds of `d`, as a float.
fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// Nanoseconds since `base`, as a word an atomic can hold.
fn ns_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Calls `f` until `max_n` calls or `limit` have passed; returns the calls
/// made and the time they took.
fn timed_loop(limit: Duration, max_n: u64, mut f: impl FnMut()) -> (u64, Duration) {
    let start = Instant::now();
    let mut n = 0;
    while n < max_n {
        for _ in 0..64 {
            f();
        }
        n += 64;
        if start.elapsed() >= limit {
            break;
        }
    }
    (n, start.elapsed())
}

/// Yields (a ferry thread) until `done()` or [`LOST_AFTER`]; `Err(what)`
/// on the latter.
fn ferry_wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > LOST_AFTER {
            return Err(format!("{what}: nothing after {LOST_AFTER:?}"));
        }
        ferry::yield_now();
    }
    Ok(())
}

/// Sleeps (a kernel thread) until `deadline`.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        thread::sleep(deadline - now);
    }
}

/// The first two CPUs this process may use (the second is the victim core
/// of Figure 2); the same CPU twice on a one-CPU machine, `None` if the
/// mask cannot be read.
fn two_cores() -> (Option<usize>, Option<usize>) {
    match affinity::allowed_cpus() {
        Ok(cpus) if !cpus.is_empty() => (Some(cpus[0]), Some(*cpus.get(1).unwrap_or(&cpus[0]))),
        _ => (None, None),
    }
}

/// Runs `f` as the first thread of a runtime built by `configure`.
fn on_runtime<T: Send + 'static>(
    configure: impl FnOnce(&mut ferry::Builder),
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let mut b = ferry::Runtime::builder();
    configure(&mut b);
    b.run(f)
        .map_err(|e| format!("cannot start a ferry runtime: {e}"))
}

/// `FUTEX_WAIT` on `word` while it holds `expected`.
fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic for the whole call; a
    // null timeout means no timeout. The result (woken, EAGAIN, EINTR) is
    // rechecked by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// `FUTEX_WAKE` of one waiter on `word`.
fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; waking touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// Waits until `word` is 1, then resets it to 0.
fn futex_take(word: &AtomicU32) {
    while word.swap(0, Ordering::Acquire) != 1 {
        futex_wait(word, 0);
    }
}

/// Installs `handler` for `signal` (with `SA_RESTART`), once per signal.
fn install_handler(signal: i32, handler: extern "C" fn(libc::c_int)) -> Result<(), String> {
    // SAFETY: `sigaction` is a plain C struct for which all-zero is valid
    // (no flags, empty mask); it is filled in before use.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as usize;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is a valid `sigset_t` owned by `act`.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: `act` is fully initialised; the handler only does
    // async-signal-safe things (an atomic load, `nanosleep`, or nothing).
    let rc = unsafe { libc::sigaction(signal, &act, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sigaction({signal}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// A pipe's two ends, closed on drop.
#[derive(Debug)]
struct Pipe {
    read: i32,
    write: i32,
}

impl Pipe {
    /// A fresh pipe (close-on-exec).
    fn new() -> Result<Pipe, String> {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a writable array of two ints, as pipe2 wants.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
        }
        Ok(Pipe {
            read: fds[0],
            write: fds[1],
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: both descriptors were opened by `Pipe::new` and are owned
        // by this value alone.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// Reads one byte from `fd`, blocking; whether one came.
fn read_byte(fd: i32) -> bool {
    let mut b = 0u8;
    // SAFETY: `b` is a writable byte; `fd` is an open pipe end.
    let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
    n == 1
}

/// Writes one byte to `fd`; whether it went.
fn write_byte(fd: i32) -> bool {
    let b = 1u8;
    // SAFETY: `b` is a readable byte; `fd` is an open pipe end.
    let n = unsafe { libc::write(fd, (&raw const b).cast(), 1) };
    n == 1
}

/// `getppid`, the cheapest real system call, never cached by the C library.
fn getppid() -> i32 {
    // SAFETY: no arguments, no memory touched.
    unsafe { libc::getppid() }
}

// ---------------------------------------------------------------------------
// Table 1

/// Case names of Table 1.
mod case {
    pub const FUTEX: &str = "table1 futex same-core";
    pub const BLOCKED: &str = "table1 blocked";
    pub const UNANNOUNCED: &str = "table1 unannounced";
    pub const PREEMPTED: &str = "table1 preempted";
    pub const PROCESSORS: &str = "table1 processors";
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

/// ns per round trip of two kernel threads pinned to the same CPU,
/// ping-ponging through two futex words.
fn futex_round_trip(n: u64, cpu: Option<usize>) -> Result<f64, String> {
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
fn table1_futex(plan: &Plan, col: &mut Collector) {
    let (cpu, _) = two_cores();
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

/// What one run of `blocked` or `unannounced` saw.
#[derive(Debug, Clone)]
struct IoRun {
    /// At the start, and after the warm-up calls.
    start: UpcallStats,
    before: UpcallStats,
    after: UpcallStats,
    /// ns from just before each call to the compute thread's next run.
    stalls: Vec<f64>,
    calls: u32,
}

/// Words the threads of an I/O run share.
#[derive(Debug, Default)]
struct IoShared {
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
fn io_run(warmup: u32, calls: u32, announced: bool) -> Result<IoRun, String> {
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
        thread::spawn(move || {
            let mut pending = (0, Instant::now());
            while !sh.stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(5));
                let g = sh.entered.load(Ordering::Acquire);
                if g <= sh.done.load(Ordering::Acquire) {
                    continue;
                }
                if g != pending.0 {
                    pending = (g, Instant::now());
                } else if pending.1.elapsed() > LOST_AFTER {
                    sh.rescued.store(g, Ordering::Release);
                    write_byte(wfd);
                    pending = (0, Instant::now());
                }
            }
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
                        // Back into ferry: an orphaned kernel thread hands
                        // the thread back here.
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

/// Median of `v` (NaN if empty).
fn median(v: &[f64]) -> f64 {
    Stats::from_samples(v).map_or(f64::NAN, |s| s.median)
}

/// One run of `blocked` (`announced`) or `unannounced`, into `col`.
fn table1_io(plan: &Plan, col: &mut Collector, announced: bool) {
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

/// What one run of `preempted` saw.
struct PreemptRun {
    before: UpcallStats,
    after: UpcallStats,
    elapsed: Duration,
}

/// One run of `preempted`: a spinner and a thread that yields `yields`
/// times, on 1 processor with a 1 ms time slice.
fn preempt_run(yields: u32) -> Result<PreemptRun, String> {
    let stop = Arc::new(AtomicBool::new(false));
    // A watchdog on a kernel thread (started outside the runtime, so not
    // pinned with a processor): if preemption never happens the spinner
    // would keep the only processor forever.
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (stop, timed_out) = (Arc::clone(&stop), Arc::clone(&timed_out));
        let limit = LOST_AFTER + Duration::from_millis(u64::from(yields) * 20);
        thread::spawn(move || {
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if start.elapsed() > limit {
                    timed_out.store(true, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
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
fn table1_preempted(plan: &Plan, col: &mut Collector) {
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
        col.push(case::PREEMPTED, q::PREEMPTED, Unit::Ns, d.count, d.mean_ns);
    }
}

/// One run of `processors`: `changes` add/remove pairs; the snapshots
/// around them.
fn processors_run(changes: u32) -> Result<(UpcallStats, UpcallStats), String> {
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
fn table1_processors(plan: &Plan, col: &mut Collector) {
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

/// How a `blocking(getppid)` loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overhead {
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
fn overhead_run(how: Overhead, limit: Duration) -> Result<(f64, f64, u64), String> {
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
fn table1_overhead(plan: &Plan, col: &mut Collector) {
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

// ---------------------------------------------------------------------------
// Synthesis Table 4

/// ns per voluntary switch: two threads on 1 processor yield `n` times each.
fn partial_switch(n: u64) -> Result<f64, String> {
    on_runtime(
        |b| {
            b.processors(1);
        },
        move || crate::threads::ferry_yields(n),
    )?
}

/// The empty handler of the signal round trip.
extern "C" fn empty_handler(_: libc::c_int) {}

/// ns per `raise` of `SIGUSR2` with an empty handler, on a kernel thread.
fn signal_round_trip(limit: Duration) -> Result<(f64, u64), String> {
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
fn table4(plan: &Plan, col: &mut Collector) {
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

// ---------------------------------------------------------------------------
// Figure 2

/// The regimes of Figure 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Regime {
    /// Kernel threads; the victim is stopped by a signal whose handler sleeps.
    Suspension,
    /// Kernel threads; a hog spins on the victim core.
    TimeSlicing,
    /// ferry threads; the victim processor is removed from the set.
    Ferry,
}

impl Regime {
    /// Every regime, in report order.
    const ALL: [Regime; 3] = [Regime::Suspension, Regime::TimeSlicing, Regime::Ferry];

    /// The regime's name in tables, JSON and the plot.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Suspension => "suspension",
            Regime::TimeSlicing => "time-slicing",
            Regime::Ferry => "ferry activations",
        }
    }

    /// The plot colour.
    fn color(self) -> plotters::style::RGBColor {
        match self {
            Regime::Suspension => plotters::style::RGBColor(200, 40, 40),
            Regime::TimeSlicing => plotters::style::RGBColor(40, 90, 200),
            Regime::Ferry => plotters::style::RGBColor(30, 150, 60),
        }
    }

    /// The colour's name, for captions.
    fn color_name(self) -> &'static str {
        match self {
            Regime::Suspension => "red",
            Regime::TimeSlicing => "blue",
            Regime::Ferry => "green",
        }
    }
}

/// The disruptions of one Figure 2 run: `count` of `m` each followed by
/// `m` without; `m == 0`: none, for `undisturbed`.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    m: Duration,
    count: u32,
    undisturbed: Duration,
}

impl Schedule {
    /// When disruption `i` starts and ends, from `start`.
    fn window(&self, start: Instant, i: u32) -> (Instant, Instant) {
        let on = start + self.m * (2 * i);
        (on, on + self.m)
    }

    /// When the run's disruptions (and the gaps after them) are over.
    fn end(&self, start: Instant) -> Instant {
        if self.m.is_zero() {
            start + self.undisturbed
        } else {
            start + self.m * (2 * self.count)
        }
    }
}

/// The state of a ping-pong: whose turn, and whether to stop.
#[derive(Debug, Default)]
struct Turn {
    turn: u8,
    stop: bool,
}

/// One Figure 2 run's result.
#[derive(Debug, Clone, Copy)]
struct PingPongRun {
    round_trips: u64,
    elapsed: Duration,
    /// ferry: the `ProcessorRemoved` events delivered during the run.
    removals: Option<Delta>,
}

/// How many ns `SIGUSR1`'s handler sleeps.
static SUSPEND_NS: AtomicU64 = AtomicU64::new(0);

/// `SIGUSR1`'s handler: sleeps [`SUSPEND_NS`] (the suspension regime's
/// disruption). `nanosleep` is async-signal-safe.
extern "C" fn suspend_handler(_: libc::c_int) {
    let ns = SUSPEND_NS.load(Ordering::Relaxed);
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// One side of the Figure 2 ping-pong, over any mutex and condition
/// variable: holding `g`, it waits (`wait`) for its turn, passes the turn
/// and wakes the other side (`notify_one`), until `done` (then it stops
/// both sides, `notify_all`); returns the turns it took.
fn pingpong_side<G: std::ops::DerefMut<Target = Turn>>(
    mut g: G,
    wait: impl Fn(G) -> G,
    notify_one: impl Fn(),
    notify_all: impl Fn(),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let mut turns = 0;
    loop {
        while g.turn != me && !g.stop {
            g = wait(g);
        }
        if g.stop {
            return turns;
        }
        if done.load(Ordering::Relaxed) {
            g.stop = true;
            notify_all();
            return turns;
        }
        turns += 1;
        g.turn = 1 - me;
        notify_one();
    }
}

/// One side of the kernel-thread ping-pong; returns the turns it took.
fn std_side(
    shared: &(std::sync::Mutex<Turn>, std::sync::Condvar),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let (m, c) = shared;
    pingpong_side(
        m.lock().unwrap_or_else(|e| e.into_inner()),
        |g| c.wait(g).unwrap_or_else(|e| e.into_inner()),
        || c.notify_one(),
        || c.notify_all(),
        done,
        me,
    )
}

/// A Figure 2 run of a kernel-thread regime.
fn std_pingpong(regime: Regime, s: Schedule) -> Result<PingPongRun, String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    if regime == Regime::Suspension {
        INSTALLED
            .get_or_init(|| install_handler(libc::SIGUSR1, suspend_handler))
            .clone()?;
        SUSPEND_NS.store(
            u64::try_from(s.m.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
    let (core0, core1) = two_cores();
    let shared = (
        std::sync::Mutex::new(Turn::default()),
        std::sync::Condvar::new(),
    );
    let done = AtomicBool::new(false);
    let victim = OnceLock::<libc::pthread_t>::new();
    let barrier = Barrier::new(3);
    thread::scope(|sc| {
        let b = sc.spawn(|| {
            affinity::pin_or_warn(core1, "ping-pong (victim core)");
            // SAFETY: pthread_self has no preconditions.
            let _ = victim.set(unsafe { libc::pthread_self() });
            barrier.wait();
            std_side(&shared, &done, 1)
        });
        let disruptor = sc.spawn(|| {
            if regime == Regime::TimeSlicing {
                affinity::pin_or_warn(core1, "hog");
            }
            barrier.wait();
            let start = Instant::now();
            if !s.m.is_zero() {
                for i in 0..s.count {
                    let (on, off) = s.window(start, i);
                    sleep_until(on);
                    match regime {
                        Regime::Suspension => {
                            if let Some(&t) = victim.get() {
                                // SAFETY: `t` is the victim's pthread_t; it
                                // is alive until `done` is set after this
                                // loop; SIGUSR1's handler is installed.
                                unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
                            }
                        }
                        Regime::TimeSlicing => {
                            while Instant::now() < off {
                                std::hint::spin_loop();
                            }
                        }
                        Regime::Ferry => unreachable!("not a kernel-thread regime"),
                    }
                }
            }
            sleep_until(s.end(start));
            done.store(true, Ordering::Relaxed);
        });
        // On a thread of its own: the caller's affinity stays as it was.
        let a = sc.spawn(|| {
            affinity::pin_or_warn(core0, "ping-pong");
            barrier.wait();
            let start = Instant::now();
            let turns = std_side(&shared, &done, 0);
            (turns, start.elapsed())
        });
        let a = a.join();
        let d = disruptor.join();
        let other = b.join();
        match (a, d, other) {
            (Ok((turns, elapsed)), Ok(()), Ok(_)) => Ok(PingPongRun {
                round_trips: turns,
                elapsed,
                removals: None,
            }),
            _ => Err("a ping-pong thread panicked".to_owned()),
        }
    })
}

/// One side of the ferry ping-pong; returns the turns it took.
fn ferry_side(
    shared: &(ferry::sync::Mutex<Turn>, ferry::sync::Condvar),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let (m, c) = shared;
    pingpong_side(
        m.lock(),
        |g| c.wait(g),
        || c.notify_one(),
        || c.notify_all(),
        done,
        me,
    )
}

/// A Figure 2 run of the ferry regime. The disruptor is a kernel thread
/// started before the runtime (so it does not inherit processor 0's
/// pinning), handed a [`ferry::Handle`] from inside it.
fn ferry_pingpong(s: Schedule) -> Result<PingPongRun, String> {
    let (tx, rx) = std::sync::mpsc::channel::<ferry::Handle>();
    let done = Arc::new(AtomicBool::new(false));
    let disruptor = {
        let done = Arc::clone(&done);
        thread::Builder::new()
            .name("disruptor".into())
            .spawn(move || -> Result<(), String> {
                // No handle: the runtime did not start; nothing to disrupt.
                let Ok(h) = rx.recv() else { return Ok(()) };
                let start = Instant::now();
                let mut result = Ok(());
                if !s.m.is_zero() {
                    for i in 0..s.count {
                        let (on, off) = s.window(start, i);
                        sleep_until(on);
                        if let Err(e) = h.set_processors(1) {
                            result = Err(format!("set_processors(1): {e}"));
                            break;
                        }
                        sleep_until(off);
                        if let Err(e) = h.set_processors(2) {
                            result = Err(format!("set_processors(2): {e}"));
                            break;
                        }
                    }
                }
                sleep_until(s.end(start));
                done.store(true, Ordering::Relaxed);
                result
            })
            .map_err(|e| format!("cannot spawn the disruptor: {e}"))?
    };
    let r = on_runtime(
        |b| {
            b.processors(2).max_processors(2);
        },
        move || -> Result<PingPongRun, String> {
            let h = ferry::Handle::current();
            type Shared = (ferry::sync::Mutex<Turn>, ferry::sync::Condvar);
            let shared: Arc<Shared> = Arc::new((
                ferry::sync::Mutex::new(Turn::default()),
                ferry::sync::Condvar::new(),
            ));
            let before = h.upcall_stats();
            let b = {
                let (shared, done) = (Arc::clone(&shared), Arc::clone(&done));
                ferry::spawn(move || ferry_side(&shared, &done, 1))
            };
            if tx.send(h.clone()).is_err() {
                done.store(true, Ordering::Relaxed);
            }
            let start = Instant::now();
            let turns = ferry_side(&shared, &done, 0);
            let elapsed = start.elapsed();
            let other = b.join();
            let after = h.upcall_stats();
            other.map_err(|p| format!("a ping-pong thread panicked: {p}"))?;
            Ok(PingPongRun {
                round_trips: turns,
                elapsed,
                removals: Some(delta(&before.processor_removed, &after.processor_removed)),
            })
        },
    );
    let d = disruptor
        .join()
        .map_err(|_| "the disruptor panicked".to_owned());
    let run = r??;
    d??;
    Ok(run)
}

/// Figure 2's samples: per (regime, M ms), round trips per second and
/// elapsed ms of each run.
#[derive(Debug, Default)]
struct Figure2 {
    rate: BTreeMap<(Regime, u64), Vec<f64>>,
    elapsed_ms: BTreeMap<(Regime, u64), Vec<f64>>,
    /// ferry's `ProcessorRemoved` events, per M.
    removals: BTreeMap<u64, Removals>,
    failures: Vec<String>,
}

/// The ferry regime's `ProcessorRemoved` events at one M, over the runs.
#[derive(Debug, Default)]
struct Removals {
    /// Events delivered.
    got: u64,
    /// Removals asked (`set_processors(1)` calls).
    asked: u64,
    /// Each run's mean latency, ns.
    means: Vec<f64>,
    /// The longest latency of any run, ns.
    max: f64,
}

/// Round `round` of Figure 2: every M (0 first), every regime (rotated by
/// round), once each, into `fig`.
fn figure2_round(plan: &Plan, round: u32, fig: &mut Figure2) {
    let mut ms = vec![0];
    ms.extend(&plan.disruption_ms);
    for &m in &ms {
        let s = Schedule {
            m: Duration::from_millis(m),
            count: plan.disruptions,
            undisturbed: plan.undisturbed,
        };
        for k in 0..Regime::ALL.len() {
            let regime = Regime::ALL[(k + round as usize) % Regime::ALL.len()];
            let now = Instant::now();
            hang::watch(
                &format!("figure 2, {} M={m} ms", regime.name()),
                s.end(now) - now + Duration::from_secs(30),
            );
            let r = match regime {
                Regime::Ferry => ferry_pingpong(s),
                _ => std_pingpong(regime, s),
            };
            hang::unwatch();
            match r {
                Ok(run) => {
                    let secs = run.elapsed.as_secs_f64();
                    fig.rate
                        .entry((regime, m))
                        .or_default()
                        .push(run.round_trips as f64 / secs);
                    fig.elapsed_ms
                        .entry((regime, m))
                        .or_default()
                        .push(secs * 1e3);
                    if let Some(d) = run.removals
                        && m != 0
                    {
                        let e = fig.removals.entry(m).or_default();
                        e.got += d.count;
                        e.asked += u64::from(plan.disruptions);
                        if d.count > 0 {
                            e.means.push(d.mean_ns);
                            e.max = e.max.max(d.max_ns);
                        }
                    }
                }
                Err(e) => {
                    let e = format!("{} M={m} ms: {e}", regime.name());
                    if !fig.failures.contains(&e) {
                        fig.failures.push(e);
                    }
                }
            }
        }
    }
}

/// The workspace root (where `docs/` lives).
fn workspace_root() -> PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map_or_else(|| manifest.join("../.."), std::path::Path::to_path_buf)
}

/// Where the Figure 2 plot goes.
pub fn figure2_path() -> PathBuf {
    workspace_root().join("docs/results/upcalls-figure2.png")
}

/// Registers a system TrueType font as plotters' `sans-serif`, once; whether
/// one was found.
fn font_available() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        const CANDIDATES: [&str; 5] = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
        ];
        CANDIDATES.iter().any(|path| {
            std::fs::read(path).is_ok_and(|bytes| {
                // plotters keeps fonts for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font(
                    "sans-serif",
                    plotters::style::FontStyle::Normal,
                    bytes,
                )
                .is_ok()
            })
        })
    })
}

/// A rate for an axis label: `120k`, `5.0M`.
fn fmt_rate(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

/// Draws Figure 2 (one line per regime, x = M ms, y = round trips per
/// second) into `path`; with `labels` false, without any text.
fn plot_figure2(
    path: &std::path::Path,
    series: &[(Regime, Vec<(f64, f64)>)],
    labels: bool,
) -> Result<(), String> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    }
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold(1.0, f64::max);
    let ys = || series.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y));
    let y_max = ys().fold(1.0, f64::max);
    let y_min = ys().filter(|&y| y > 0.0).fold(y_max, f64::min);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if labels {
        builder
            .caption(
                "ping-pong under disruptions of one of two cores (004 Figure 2)",
                ("sans-serif", 20),
            )
            .x_label_area_size(45)
            .y_label_area_size(80);
    } else {
        builder.x_label_area_size(10).y_label_area_size(10);
    }
    let mut chart = builder
        // Logarithmic y: the regimes differ by orders of magnitude.
        .build_cartesian_2d(0.0..x_max * 1.05, (y_min / 2.0..y_max * 2.0).log_scale())
        .map_err(|e| err(&e))?;
    if labels {
        chart
            .configure_mesh()
            .x_desc("disruption length M (ms); 0 = undisturbed")
            .y_desc("round trips per second (log scale)")
            .y_label_formatter(&|&y| fmt_rate(y))
            .draw()
            .map_err(|e| err(&e))?;
    } else {
        // plotters' mesh needs a font even without labels: draw the axes
        // and a grey line at every power of ten by hand.
        let (x0, x1) = (0.0, x_max * 1.05);
        let (y0, y1) = (y_min / 2.0, y_max * 2.0);
        let mut decade = 10f64.powf(y0.log10().ceil());
        while decade < y1 {
            chart
                .draw_series(LineSeries::new(
                    [(x0, decade), (x1, decade)],
                    RGBColor(190, 190, 190),
                ))
                .map_err(|e| err(&e))?;
            decade *= 10.0;
        }
        chart
            .draw_series(LineSeries::new([(x0, y1), (x0, y0), (x1, y0)], BLACK))
            .map_err(|e| err(&e))?;
    }
    for (regime, points) in series {
        let color = regime.color();
        let line = chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        if labels {
            line.label(regime.name()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(&e))?;
    }
    if labels {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Output

/// One JSON line: the stable keys of the crate's records first
/// (`experiment`, `case`, `system`, `ns_per_op`, `runs`), then this
/// experiment's own. `system` names the quantity (or the regime);
/// `ns_per_op` is the median in ns for time quantities, `null` for counts;
/// `value` is the median in `unit`.
#[derive(Debug, Serialize)]
struct Line<'a> {
    experiment: &'static str,
    case: &'a str,
    system: &'a str,
    ns_per_op: Option<f64>,
    runs: usize,
    min: Option<f64>,
    max: Option<f64>,
    items: u64,
    unit: &'a str,
    value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    round_trips_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disruption_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    absent: Option<&'a str>,
}

/// `x` rounded to 0.01, as the crate's records are.
fn round2(x: f64) -> f64 {
    ferry_report::round2(x)
}

/// The JSON line of one quantity.
fn metric_line(m: &Metric) -> String {
    let stats = Stats::from_samples(&m.samples);
    let is_ns = m.unit == Unit::Ns;
    let line = Line {
        experiment: EXPERIMENT,
        case: m.case,
        system: &m.quantity,
        ns_per_op: stats.filter(|_| is_ns).map(|s| round2(s.median)),
        runs: stats.map_or(0, |s| s.runs),
        min: stats.map(|s| round2(s.min)),
        max: stats.map(|s| round2(s.max)),
        items: m.items,
        unit: m.unit.name(),
        value: stats.map(|s| round2(s.median)),
        round_trips_per_s: None,
        elapsed_ms: None,
        disruption_ms: None,
        absent: if stats.is_none() {
            Some(m.missing.as_deref().unwrap_or("no samples"))
        } else {
            None
        },
    };
    serde_json::to_string(&line).expect("a line always serialises")
}

/// The JSON lines of Figure 2: one per (M, regime).
fn figure2_lines(plan: &Plan, fig: &Figure2) -> Vec<String> {
    let mut out = Vec::new();
    for (&(regime, m), rates) in &fig.rate {
        let Some(rate) = Stats::from_samples(rates) else {
            continue;
        };
        let per_rt: Vec<f64> = rates.iter().map(|r| 1e9 / r).collect();
        let per_rt = Stats::from_samples(&per_rt).expect("rates are finite");
        let elapsed = fig
            .elapsed_ms
            .get(&(regime, m))
            .and_then(|v| Stats::from_samples(v))
            .map(|s| round2(s.median));
        let case = if m == 0 {
            "figure2 undisturbed".to_owned()
        } else {
            format!("figure2 M={m}ms")
        };
        let line = Line {
            experiment: EXPERIMENT,
            case: &case,
            system: regime.name(),
            ns_per_op: Some(round2(per_rt.median)),
            runs: rate.runs,
            min: Some(round2(per_rt.min)),
            max: Some(round2(per_rt.max)),
            items: if m == 0 {
                0
            } else {
                u64::from(plan.disruptions)
            },
            unit: "round trips/s",
            value: Some(round2(rate.median)),
            round_trips_per_s: Some(round2(rate.median)),
            elapsed_ms: elapsed,
            disruption_ms: Some(m),
            absent: None,
        };
        out.push(serde_json::to_string(&line).expect("a line always serialises"));
    }
    out
}

/// A number for a table: ns with 2 decimals below 1000, else whole; counts
/// whole (2 decimals if fractional).
fn fmt_value(x: f64, unit: Unit) -> String {
    match unit {
        Unit::Ns if x >= 1000.0 => format!("{x:.0}"),
        Unit::Ns => format!("{x:.2}"),
        Unit::Count if x.fract() == 0.0 => format!("{x:.0}"),
        Unit::Count => format!("{x:.2}"),
    }
}

/// The table of the metrics whose case starts with `prefix`; for the
/// blocking-overhead rows, the ratio of the median over direct.
fn metrics_table(col: &Collector, prefix: &str) -> String {
    let mut t = Table::new(&[
        ("case", Align::Left),
        ("quantity", Align::Left),
        ("median", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
        ("unit", Align::Left),
        ("vs direct", Align::Right),
    ]);
    let direct = col.median(case::OVERHEAD, q::DIRECT);
    let mut notes = String::new();
    for m in col.metrics.iter().filter(|m| m.case.starts_with(prefix)) {
        let short = m.case.split_once(' ').map_or(m.case, |(_, c)| c);
        match Stats::from_samples(&m.samples) {
            Some(s) => {
                let ratio = match direct {
                    Some(d) if m.case == case::OVERHEAD && m.unit == Unit::Ns && d > 0.0 => {
                        format!("{:.2}x", s.median / d)
                    }
                    _ => String::new(),
                };
                t.push_row(vec![
                    short.to_owned(),
                    m.quantity.clone(),
                    fmt_value(s.median, m.unit),
                    fmt_value(s.min, m.unit),
                    fmt_value(s.max, m.unit),
                    m.unit.name().to_owned(),
                    ratio,
                ]);
            }
            None => {
                t.push_row(vec![
                    short.to_owned(),
                    m.quantity.clone(),
                    "absent".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    m.unit.name().to_owned(),
                    String::new(),
                ]);
                let _ = writeln!(
                    notes,
                    "absent: {short} / {}: {}",
                    m.quantity,
                    m.missing.as_deref().unwrap_or("no samples")
                );
            }
        }
    }
    for (c, reason) in col.failures.iter().filter(|(c, _)| c.starts_with(prefix)) {
        let short = c.split_once(' ').map_or(*c, |(_, c)| c);
        let _ = writeln!(notes, "failed run: {short}: {reason}");
    }
    let mut out = t.render();
    out.push_str(&notes);
    out
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
    let verdict = match stall {
        Some(s) => format!(
            "{} ({:.1} us)",
            if s <= 100_000.0 { "met" } else { "missed" },
            s / 1e3
        ),
        None => "n/a (no stall measured)".to_owned(),
    };
    let _ = writeln!(out, "  unannounced stall <= 100 us: {verdict}");
    out
}

/// The Synthesis Table 4 summary lines.
fn table4_text(col: &Collector) -> String {
    let mut t = Table::new(&[
        ("Synthesis Table 4", Align::Left),
        ("median ns", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
    ]);
    let rows = [
        (case::SWITCH, q::PARTIAL),
        (case::SWITCH, q::SIGNAL),
        (case::PREEMPTED, q::PREEMPTED),
    ];
    for (c, quantity) in rows {
        match col.stats(c, quantity) {
            Some(s) => t.push_row(vec![
                quantity.to_owned(),
                fmt_value(s.median, Unit::Ns),
                fmt_value(s.min, Unit::Ns),
                fmt_value(s.max, Unit::Ns),
            ]),
            None => t.push_row(vec![
                quantity.to_owned(),
                "absent".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ]),
        }
    }
    let mut out = t.render();
    let partial = col.median(case::SWITCH, q::PARTIAL);
    let signal = col.median(case::SWITCH, q::SIGNAL);
    let preempted = col.median(case::PREEMPTED, q::PREEMPTED);
    if let (Some(p), Some(s), Some(e)) = (partial, signal, preempted)
        && p > 0.0
    {
        let _ = writeln!(
            out,
            "full switch (signal + preempted event) ~ {:.0} ns = {:.0}x the partial switch",
            s + e,
            (s + e) / p
        );
    }
    for (c, reason) in col.failures.iter().filter(|(c, _)| *c == case::SWITCH) {
        let _ = writeln!(out, "failed run: {c}: {reason}");
    }
    out
}

/// The Figure 2 table, and the plot's caption.
fn figure2_text(plan: &Plan, fig: &Figure2, plot: &Result<bool, String>) -> String {
    let mut t = Table::new(&[
        ("M ms", Align::Right),
        ("regime", Align::Left),
        ("round trips/s", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
        ("elapsed ms", Align::Right),
        ("vs undisturbed", Align::Right),
    ]);
    let mut ms = vec![0];
    ms.extend(&plan.disruption_ms);
    for &m in &ms {
        for regime in Regime::ALL {
            let rate = fig
                .rate
                .get(&(regime, m))
                .and_then(|v| Stats::from_samples(v));
            let elapsed = fig
                .elapsed_ms
                .get(&(regime, m))
                .and_then(|v| Stats::from_samples(v));
            let base = fig
                .rate
                .get(&(regime, 0))
                .and_then(|v| Stats::from_samples(v));
            let m_name = if m == 0 {
                "0 (none)".to_owned()
            } else {
                m.to_string()
            };
            match (rate, elapsed) {
                (Some(r), Some(e)) => t.push_row(vec![
                    m_name,
                    regime.name().to_owned(),
                    format!("{:.0}", r.median),
                    format!("{:.0}", r.min),
                    format!("{:.0}", r.max),
                    format!("{:.1}", e.median),
                    base.filter(|b| b.median > 0.0)
                        .map_or(String::new(), |b| format!("{:.2}", r.median / b.median)),
                ]),
                _ => t.push_row(vec![
                    m_name,
                    regime.name().to_owned(),
                    "absent".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    String::new(),
                ]),
            }
        }
    }
    let mut out = t.render();
    for (m, r) in &fig.removals {
        let _ = writeln!(
            out,
            "ferry M={m} ms: {} ProcessorRemoved events for {} set_processors(1) calls, latency \
             (call -> policy) median of run means {:.1} us, max {:.1} us{}",
            r.got,
            r.asked,
            median(&r.means) / 1e3,
            r.max / 1e3,
            if r.got < r.asked {
                " (a removal not finished when set_processors(2) comes is cancelled, no event)"
            } else {
                ""
            }
        );
    }
    for e in &fig.failures {
        let _ = writeln!(out, "failed run: {e}");
    }
    let path = figure2_path();
    match plot {
        Ok(true) => {
            let _ = writeln!(
                out,
                "plot: {} (x = M ms, 0 = undisturbed; y = round trips/s, log scale; legend inside)",
                path.display()
            );
        }
        Ok(false) => {
            let colors: Vec<String> = Regime::ALL
                .iter()
                .map(|r| format!("{} = {}", r.color_name(), r.name()))
                .collect();
            let _ = writeln!(
                out,
                "plot: {} drawn WITHOUT text (no font found): x = M ms from 0 (undisturbed) to {} \
                 ms, y = round trips/s on a log scale, a grey line at each power of ten; {}",
                path.display(),
                plan.disruption_ms.last().copied().unwrap_or(0),
                colors.join(", ")
            );
        }
        Err(e) => {
            let _ = writeln!(out, "plot: not written: {e}");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The subcommand

/// Runs the experiment and prints its tables (or JSON lines).
///
/// # Errors
/// Never for a scenario that fails (it is printed as absent); only if
/// nothing at all could be measured.
pub fn run(args: &Args) -> Result<(), String> {
    let plan = Plan::new(args);
    let started = Instant::now();
    let cpu_before = CpuSnapshot::now();
    let mut col = Collector::default();
    let mut fig = Figure2::default();
    for round in 0..plan.runs {
        eprintln!(
            "ferry-bench upcalls: round {}/{} ({:.1} s so far)",
            round + 1,
            plan.runs,
            started.elapsed().as_secs_f64()
        );
        let watch = |what: &str| hang::watch(what, Duration::from_secs(60));
        watch(case::FUTEX);
        table1_futex(&plan, &mut col);
        watch(case::BLOCKED);
        table1_io(&plan, &mut col, true);
        watch(case::UNANNOUNCED);
        table1_io(&plan, &mut col, false);
        watch(case::PREEMPTED);
        table1_preempted(&plan, &mut col);
        watch(case::PROCESSORS);
        table1_processors(&plan, &mut col);
        watch(case::OVERHEAD);
        table1_overhead(&plan, &mut col);
        watch(case::SWITCH);
        table4(&plan, &mut col);
        hang::unwatch();
        figure2_round(&plan, round, &mut fig);
    }
    if col.metrics.is_empty() && fig.rate.is_empty() {
        return Err("nothing could be measured".to_owned());
    }

    let series: Vec<(Regime, Vec<(f64, f64)>)> = Regime::ALL
        .iter()
        .map(|&regime| {
            let points = fig
                .rate
                .iter()
                .filter(|((r, _), _)| *r == regime)
                .filter_map(|(&(_, m), v)| Stats::from_samples(v).map(|s| (m as f64, s.median)))
                .collect();
            (regime, points)
        })
        .collect();
    let labels = font_available();
    let plot = plot_figure2(&figure2_path(), &series, labels).map(|()| labels);

    if args.json {
        for m in &col.metrics {
            println!("{}", metric_line(m));
        }
        for l in figure2_lines(&plan, &fig) {
            println!("{l}");
        }
        eprint!("{}", targets(&col));
        for (c, reason) in &col.failures {
            eprintln!("failed run: {c}: {reason}");
        }
        for e in &fig.failures {
            eprintln!("failed run: {e}");
        }
        if let Err(e) = &plot {
            eprintln!("plot: not written: {e}");
        }
    } else {
        println!(
            "upcalls: medians of {} runs{}",
            plan.runs,
            if args.quick { " (--quick)" } else { "" }
        );
        println!();
        println!(
            "Table 1 (004): event latencies, cause -> policy, beside a same-core futex handoff"
        );
        print!("{}", metrics_table(&col, "table1"));
        println!();
        print!("{}", targets(&col));
        println!();
        println!("Synthesis Table 4: partial against full (signal-driven) context switch");
        print!("{}", table4_text(&col));
        println!();
        println!(
            "Figure 2 (004): ping-pong on 2 cores, {} disruptions of M ms of the second core, \
             each followed by M ms without",
            plan.disruptions
        );
        print!("{}", figure2_text(&plan, &fig, &plot));
    }
    eprintln!(
        "ferry-bench upcalls: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    machine::report_interference(EXPERIMENT, cpu_before);
    Ok(())
}

/// The subcommand: [`run`], with its error on stderr and in the exit status.
pub fn main(args: &Args) -> std::process::ExitCode {
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (cpu, _) = two_cores();
        let rt = futex_round_trip(200, cpu).unwrap();
        assert!(rt.is_finite() && rt > 0.0);
    }

    #[test]
    fn ferry_scenarios_deliver_their_events() {
        let run = io_run(2, 5, true).unwrap();
        assert_eq!(run.stalls.len(), 5);
        let (before, after) = processors_run(3).unwrap();
        assert!(after.processor_added.count >= before.processor_added.count + 3);
        assert!(after.processor_removed.count >= before.processor_removed.count + 3);
    }

    #[test]
    fn quick_plan_is_smaller() {
        let quick = Plan::new(&Args {
            runs: None,
            quick: true,
            json: false,
        });
        assert_eq!(quick.runs, QUICK_RUNS);
        assert_eq!(quick.disruption_ms, vec![1, 5]);
        assert_eq!(quick.disruptions, 10);
    }
}
