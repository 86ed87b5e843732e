//! The `threads` experiment: the cost of thread operations, as URPC's
//! Table I (Anderson et al., 1991: FastThreads against Taos kernel threads)
//! and Synthesis's Table 3 (Massalin and Pu, 1989) measured them, for ferry's
//! user-level threads against kernel threads (`std::thread` + `std::sync`),
//! Tokio's tasks (current-thread and multi-thread runtimes) and Go's
//! goroutines.
//!
//! This module owns the rows, the systems under test, the run schedule and
//! the targets against Go, Tokio and kernel threads; summarising and
//! printing go through [`crate::measure`] and [`crate::report`]. The Go side
//! is a small standard-library program in `crates/ferry-bench/go/` (see
//! [`go`]).
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
//! | `ferry` | a runtime of **1 processor** (`Runtime::builder().processors(1)`), as the paper's FastThreads tests "were constrained to run on a single processor" | `ferry::spawn`, `JoinHandle::join`, `ferry::yield_now`, `ferry::sync::{Mutex, Condvar}` (see [`ferry_sync`]); `PINGPONG` also with `ferry::park` / `Thread::unpark` on an atomic turn instead of the condition variable, labelled `ferry (park/unpark)` |
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
use std::fmt;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::affinity;
use crate::machine::{self, CpuSnapshot};
use crate::measure::Stats;
use crate::report::{Align, Record, Table};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "threads";

/// Threads forked per batch in the `FORK` / `create` / `destroy` loop.
pub const FORK_BATCH: u64 = 32;

/// How long one run should last by default (sizes `n`).
const DEFAULT_TARGET: Duration = Duration::from_millis(25);
/// How long one run should last with `--quick`.
const QUICK_TARGET: Duration = Duration::from_millis(4);
/// Runs per pair by default.
const DEFAULT_RUNS: u32 = 7;
/// Runs per pair with `--quick`.
const QUICK_RUNS: u32 = 5;
/// Fewest runs accepted.
const MIN_RUNS: u32 = 5;
/// Bounds of the `n` chosen for a run.
const MIN_N: u64 = 64;
const MAX_N: u64 = 50_000_000;

/// Command-line arguments of `ferry-bench threads`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Timed runs per (row, system); the median is reported (at least 5)
    /// [default: 7, or 5 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(i64::from(MIN_RUNS)..))]
    pub runs: Option<u32>,

    /// Shorter runs (about 4 ms each instead of 25 ms) and 5 of them, for a
    /// fast look; an explicit --runs still wins
    #[arg(long)]
    pub quick: bool,

    /// Leave out the Go rows (printed as absent) even if `go` is installed
    #[arg(long)]
    pub no_go: bool,

    /// Print one JSON object per line per (row, system) instead of a table
    #[arg(long)]
    pub json: bool,

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

impl Args {
    fn runs(&self) -> u32 {
        self.runs
            .unwrap_or(if self.quick { QUICK_RUNS } else { DEFAULT_RUNS })
    }

    fn target(&self) -> Duration {
        if self.quick {
            QUICK_TARGET
        } else {
            DEFAULT_TARGET
        }
    }
}

/// The rows of the report, in report order: URPC's Table I, then Synthesis's
/// Table 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Row {
    ProcedureCall,
    Fork,
    ForkJoin,
    Yield,
    AcquireRelease,
    PingPong,
    Create,
    Destroy,
}

impl Row {
    const ALL: [Row; 8] = [
        Row::ProcedureCall,
        Row::Fork,
        Row::ForkJoin,
        Row::Yield,
        Row::AcquireRelease,
        Row::PingPong,
        Row::Create,
        Row::Destroy,
    ];

    /// The row's name, as the papers print it; the `case` of JSON records.
    pub fn name(self) -> &'static str {
        match self {
            Row::ProcedureCall => "PROCEDURE CALL",
            Row::Fork => "FORK",
            Row::ForkJoin => "FORK;JOIN",
            Row::Yield => "YIELD",
            Row::AcquireRelease => "ACQUIRE;RELEASE",
            Row::PingPong => "PINGPONG",
            Row::Create => "create",
            Row::Destroy => "destroy",
        }
    }
}

/// What one timed run measures; `Fork` yields three rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ProcedureCall,
    Fork,
    ForkJoin,
    Yield,
    AcquireRelease,
    PingPong,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::ProcedureCall,
        Kind::Fork,
        Kind::ForkJoin,
        Kind::Yield,
        Kind::AcquireRelease,
        Kind::PingPong,
    ];

    fn rows(self) -> &'static [Row] {
        match self {
            Kind::ProcedureCall => &[Row::ProcedureCall],
            Kind::Fork => &[Row::Fork, Row::Create, Row::Destroy],
            Kind::ForkJoin => &[Row::ForkJoin],
            Kind::Yield => &[Row::Yield],
            Kind::AcquireRelease => &[Row::AcquireRelease],
            Kind::PingPong => &[Row::PingPong],
        }
    }

    /// `n` of the warm-up run that sizes the timed ones.
    fn warmup_n(self) -> u64 {
        match self {
            Kind::ProcedureCall | Kind::AcquireRelease => 100_000,
            Kind::Fork => 20 * FORK_BATCH,
            Kind::ForkJoin => 500,
            Kind::Yield => 5_000,
            Kind::PingPong => 1_000,
        }
    }

    /// The name the Go program knows the kind by.
    fn go_name(self) -> &'static str {
        match self {
            Kind::ProcedureCall => "proc-call",
            Kind::Fork => "fork",
            Kind::ForkJoin => "fork-join",
            Kind::Yield => "yield",
            Kind::AcquireRelease => "acquire-release",
            Kind::PingPong => "pingpong",
        }
    }
}

/// Which system a sample belongs to (labels may vary by row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SysId {
    Ferry,
    Std,
    Pthread,
    TokioCurrent,
    TokioMulti,
    Go1,
    GoN,
    /// The C program on ferry's C-Threads.
    CThreads,
    /// The C program on pthreads.
    PthreadC,
}

/// One row's result of one timed run.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    row: Row,
    /// The system as the report names it for this row.
    label: String,
    ns: f64,
}

impl Sample {
    fn new(row: Row, label: impl Into<String>, ns: f64) -> Sample {
        Sample {
            row,
            label: label.into(),
            ns,
        }
    }
}

/// What a system did with one kind.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Measured: one sample per row of the kind (more than one per row if the
    /// system measures variants, e.g. ferry's two ping-pongs).
    Measured(Vec<Sample>),
    /// Not measured on this system, and why; `label` names the system in the
    /// absent rows.
    Absent { label: String, reason: String },
    /// The kind does not apply to this system; no rows at all.
    NotApplicable,
}

/// Per-operation time of `n` operations taking `d`.
fn per_op(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// The null procedure of `PROCEDURE CALL`.
#[inline(never)]
fn null_procedure() {
    // SAFETY: an empty instruction sequence; it touches no memory, no stack
    // and no flags. It is there so the call is not deleted as side-effect
    // free.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) };
}

/// `n` null calls; per call.
fn procedure_calls(n: u64) -> f64 {
    let f = black_box(null_procedure as fn());
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    per_op(start.elapsed(), n)
}

/// Accumulates the two halves of the `FORK` loop and turns them into the
/// three rows.
#[derive(Debug, Default)]
struct ForkTimes {
    create: Duration,
    destroy: Duration,
}

impl ForkTimes {
    fn samples(&self, n: u64, label: &str) -> Vec<Sample> {
        vec![
            Sample::new(Row::Fork, label, per_op(self.create + self.destroy, n)),
            Sample::new(Row::Create, label, per_op(self.create, n)),
            Sample::new(Row::Destroy, label, per_op(self.destroy, n)),
        ]
    }
}

/// Rounds `n` up to whole fork batches.
fn whole_batches(n: u64) -> u64 {
    n.div_ceil(FORK_BATCH).max(1) * FORK_BATCH
}

// ---------------------------------------------------------------------------
// ferry

/// ferry on a 1-processor runtime.
/// ns per `ferry::yield_now` switch, as the YIELD row measures it (see
/// [`ferry_sys::yields`]); for Synthesis Table 4's partial switch in
/// `upcalls`.
pub(crate) fn ferry_yields(n: u64) -> Result<f64, String> {
    ferry_sys::yields(n)
}

mod ferry_sys {
    use super::*;

    pub const NAME: &str = "ferry";
    /// The label of `PINGPONG` measured with park/unpark.
    pub const PARK_UNPARK: &str = "ferry (park/unpark)";

    pub(super) fn on_one_processor<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        ferry::Runtime::builder()
            .processors(1)
            .run(f)
            .map_err(|e| format!("cannot start a ferry runtime: {e}"))
    }

    pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
        let samples = match kind {
            Kind::ProcedureCall => vec![Sample::new(
                Row::ProcedureCall,
                NAME,
                on_one_processor(move || procedure_calls(n))?,
            )],
            Kind::Fork => on_one_processor(move || fork(n))??,
            Kind::ForkJoin => vec![Sample::new(
                Row::ForkJoin,
                NAME,
                on_one_processor(move || fork_join(n))??,
            )],
            Kind::Yield => vec![Sample::new(
                Row::Yield,
                NAME,
                on_one_processor(move || yields(n))??,
            )],
            Kind::AcquireRelease => vec![Sample::new(
                Row::AcquireRelease,
                NAME,
                super::ferry_sync::acquire_release(n)?,
            )],
            Kind::PingPong => vec![
                Sample::new(Row::PingPong, NAME, super::ferry_sync::pingpong(n)?),
                Sample::new(
                    Row::PingPong,
                    PARK_UNPARK,
                    on_one_processor(move || pingpong_park(n))??,
                ),
            ],
        };
        Ok(Outcome::Measured(samples))
    }

    fn fork(n: u64) -> Result<Vec<Sample>, String> {
        let n = whole_batches(n);
        let mut times = ForkTimes::default();
        let mut handles = Vec::with_capacity(FORK_BATCH as usize);
        for _ in 0..n / FORK_BATCH {
            let t0 = Instant::now();
            for _ in 0..FORK_BATCH {
                handles.push(ferry::spawn(|| {}));
            }
            let t1 = Instant::now();
            for h in handles.drain(..) {
                h.join()
                    .map_err(|p| format!("a null thread panicked: {p}"))?;
            }
            let t2 = Instant::now();
            times.create += t1 - t0;
            times.destroy += t2 - t1;
        }
        Ok(times.samples(n, NAME))
    }

    fn fork_join(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        for _ in 0..n {
            ferry::spawn(|| {})
                .join()
                .map_err(|p| format!("a null thread panicked: {p}"))?;
        }
        Ok(per_op(start.elapsed(), n))
    }

    /// ns per `ferry::yield_now` switch: two threads on the calling
    /// thread's runtime yield `n` times each (also Synthesis Table 4's
    /// partial switch, in `upcalls`).
    pub(crate) fn yields(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        let a = ferry::spawn(move || {
            for _ in 0..n {
                ferry::yield_now();
            }
        });
        let b = ferry::spawn(move || {
            for _ in 0..n {
                ferry::yield_now();
            }
        });
        a.join().map_err(|p| p.to_string())?;
        b.join().map_err(|p| p.to_string())?;
        Ok(per_op(start.elapsed(), 2 * n))
    }

    /// `PINGPONG` with park/unpark: the turn is an atomic; each side parks
    /// until the turn is its own, hands it over and unparks the other.
    fn pingpong_park(n: u64) -> Result<f64, String> {
        let turn = Arc::new(AtomicU8::new(0));
        let a = ferry::current();
        let start = Instant::now();
        let b = {
            let turn = Arc::clone(&turn);
            ferry::spawn(move || {
                for _ in 0..n {
                    while turn.load(Ordering::Acquire) != 1 {
                        ferry::park();
                    }
                    turn.store(0, Ordering::Release);
                    a.unpark();
                }
            })
        };
        let b_thread = b.thread().clone();
        for _ in 0..n {
            while turn.load(Ordering::Acquire) != 0 {
                ferry::park();
            }
            turn.store(1, Ordering::Release);
            b_thread.unpark();
        }
        b.join().map_err(|p| p.to_string())?;
        Ok(per_op(start.elapsed(), n))
    }
}

/// ============================ ferry::sync ==================================
/// The rows that need `ferry::sync::{Mutex, Condvar}`: `ACQUIRE;RELEASE` and
/// the condition-variable `PINGPONG`, both on a 1-processor runtime. Written
/// first against the intended API while `ferry::sync` was a placeholder
/// (when `ACQUIRE;RELEASE` was absent for ferry and `PINGPONG` measured with
/// park/unpark only); the module has since landed and these use the real
/// types. `PINGPONG` with park/unpark is still reported beside it, as
/// `ferry (park/unpark)`: the floor the condition variable builds on.
mod ferry_sync {
    use super::*;

    /// ns per uncontended `ferry::sync::Mutex` lock + increment + unlock.
    pub fn acquire_release(n: u64) -> Result<f64, String> {
        ferry_sys::on_one_processor(move || {
            let m = ferry::sync::Mutex::new(0u64);
            let start = Instant::now();
            for _ in 0..n {
                *black_box(&m).lock() += 1;
            }
            let d = start.elapsed();
            assert_eq!(*m.lock(), n, "ferry::sync::Mutex lost increments");
            per_op(d, n)
        })
    }

    /// ns per `PINGPONG` cycle on `ferry::sync::{Mutex, Condvar}`.
    pub fn pingpong(n: u64) -> Result<f64, String> {
        ferry_sys::on_one_processor(move || {
            type Pair = (ferry::sync::Mutex<u8>, ferry::sync::Condvar);
            let shared: Arc<Pair> =
                Arc::new((ferry::sync::Mutex::new(0), ferry::sync::Condvar::new()));
            let side = move |shared: &Pair, me: u8, other: u8| {
                let (m, c) = shared;
                for _ in 0..n {
                    let mut turn = m.lock();
                    while *turn != me {
                        turn = c.wait(turn);
                    }
                    *turn = other;
                    c.notify_one();
                    drop(turn);
                }
            };
            let start = Instant::now();
            let b = {
                let shared = Arc::clone(&shared);
                ferry::spawn(move || side(&shared, 1, 0))
            };
            side(&shared, 0, 1);
            b.join().map_err(|p| p.to_string())?;
            Ok(per_op(start.elapsed(), n))
        })?
    }
}
// ========================== end of ferry::sync ==============================

// ---------------------------------------------------------------------------
// std::thread + std::sync, and a raw pthread mutex

mod std_sys {
    use super::*;
    use std::sync::{Condvar, Mutex};
    use std::thread;

    pub const NAME: &str = "std::thread";
    const YIELD_LABEL: &str = "std::thread (both on 1 cpu)";

    pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
        let samples = match kind {
            Kind::ProcedureCall => {
                vec![Sample::new(Row::ProcedureCall, NAME, procedure_calls(n))]
            }
            Kind::Fork => fork(n)?,
            Kind::ForkJoin => vec![Sample::new(Row::ForkJoin, NAME, fork_join(n)?)],
            Kind::Yield => vec![Sample::new(Row::Yield, YIELD_LABEL, yields(n)?)],
            Kind::AcquireRelease => {
                vec![Sample::new(Row::AcquireRelease, NAME, acquire_release(n))]
            }
            Kind::PingPong => vec![Sample::new(Row::PingPong, NAME, pingpong(n)?)],
        };
        Ok(Outcome::Measured(samples))
    }

    fn spawn_null() -> Result<thread::JoinHandle<()>, String> {
        thread::Builder::new()
            .spawn(|| {})
            .map_err(|e| format!("cannot spawn a kernel thread: {e}"))
    }

    fn fork(n: u64) -> Result<Vec<Sample>, String> {
        let n = whole_batches(n);
        let mut times = ForkTimes::default();
        let mut handles = Vec::with_capacity(FORK_BATCH as usize);
        for _ in 0..n / FORK_BATCH {
            let t0 = Instant::now();
            for _ in 0..FORK_BATCH {
                handles.push(spawn_null()?);
            }
            let t1 = Instant::now();
            for h in handles.drain(..) {
                h.join().map_err(|_| "a null thread panicked")?;
            }
            let t2 = Instant::now();
            times.create += t1 - t0;
            times.destroy += t2 - t1;
        }
        Ok(times.samples(n, NAME))
    }

    fn fork_join(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        for _ in 0..n {
            spawn_null()?.join().map_err(|_| "a null thread panicked")?;
        }
        Ok(per_op(start.elapsed(), n))
    }

    /// Two kernel threads pinned to the same CPU each `sched_yield` `n` times;
    /// from the earlier start to the later end.
    fn yields(n: u64) -> Result<f64, String> {
        let cpu = affinity::allowed_cpus()
            .ok()
            .and_then(|c| c.first().copied());
        let barrier = Barrier::new(2);
        let (a, b) = thread::scope(|s| {
            let side = || {
                affinity::pin_or_warn(cpu, "yield");
                barrier.wait();
                let start = Instant::now();
                for _ in 0..n {
                    thread::yield_now();
                }
                (start, Instant::now())
            };
            let a = s.spawn(side);
            let b = s.spawn(side);
            (a.join(), b.join())
        });
        let (a, b) = (
            a.map_err(|_| "a yield thread panicked")?,
            b.map_err(|_| "a yield thread panicked")?,
        );
        Ok(per_op(a.1.max(b.1) - a.0.min(b.0), 2 * n))
    }

    fn acquire_release(n: u64) -> f64 {
        let m = Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }
        let d = start.elapsed();
        assert_eq!(*m.lock().unwrap(), n, "std Mutex lost increments");
        per_op(d, n)
    }

    fn pingpong(n: u64) -> Result<f64, String> {
        let shared = (Mutex::new(0u8), Condvar::new());
        let side = |me: u8, other: u8| {
            let (m, c) = &shared;
            for _ in 0..n {
                let mut turn = m.lock().unwrap();
                while *turn != me {
                    turn = c.wait(turn).unwrap();
                }
                *turn = other;
                c.notify_one();
                drop(turn);
            }
        };
        let start = Instant::now();
        thread::scope(|s| {
            let b = s.spawn(|| side(1, 0));
            side(0, 1);
            b.join()
        })
        .map_err(|_| "a ping-pong thread panicked")?;
        Ok(per_op(start.elapsed(), n))
    }
}

/// `ACQUIRE;RELEASE` with glibc's `pthread_mutex_t`.
mod pthread_sys {
    use super::*;

    pub const NAME: &str = "pthread_mutex_t";

    pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
        if kind != Kind::AcquireRelease {
            return Ok(Outcome::NotApplicable);
        }
        let m: Box<std::cell::UnsafeCell<libc::pthread_mutex_t>> =
            Box::new(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        let p = m.get();
        let mut x = 0u64;
        let start = Instant::now();
        for _ in 0..n {
            // SAFETY: `p` points to an initialised default mutex, boxed so it
            // never moves, used by this thread only and not yet destroyed;
            // every lock is paired with an unlock by the same thread.
            unsafe {
                let p = black_box(p);
                libc::pthread_mutex_lock(p);
                x += 1;
                libc::pthread_mutex_unlock(p);
            }
        }
        let d = start.elapsed();
        // SAFETY: the mutex is unlocked and nobody else uses it.
        unsafe { libc::pthread_mutex_destroy(p) };
        if x != n {
            return Err("pthread mutex loop lost increments".to_owned());
        }
        Ok(Outcome::Measured(vec![Sample::new(
            Row::AcquireRelease,
            NAME,
            per_op(d, n),
        )]))
    }
}

// ---------------------------------------------------------------------------
// Tokio

mod tokio_sys {
    use super::*;
    use tokio::sync::{Mutex, Notify};

    pub const CURRENT: &str = "tokio current-thread";

    pub fn multi_name() -> String {
        format!("tokio multi-thread ({} workers)", machine::online_cpus())
    }

    /// Runs `f`'s future on a fresh runtime: on the current-thread runtime
    /// inside `block_on`, on the multi-thread one as a spawned task (so it
    /// runs on a worker, as the tasks it spawns do).
    fn on_runtime<F, Fut, T>(multi: bool, f: F) -> Result<T, String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread().build()
        } else {
            tokio::runtime::Builder::new_current_thread().build()
        }
        .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
        let fut = f();
        if multi {
            rt.block_on(rt.spawn(fut))
                .map_err(|e| format!("the Tokio driver task failed: {e}"))
        } else {
            Ok(rt.block_on(fut))
        }
    }

    pub fn measure(multi: bool, kind: Kind, n: u64) -> Result<Outcome, String> {
        let label = if multi {
            multi_name()
        } else {
            CURRENT.to_owned()
        };
        let samples = match kind {
            Kind::ProcedureCall => vec![Sample::new(
                Row::ProcedureCall,
                &label,
                on_runtime(multi, || async move { procedure_calls(n) })?,
            )],
            Kind::Fork => {
                let n = whole_batches(n);
                on_runtime(multi, || fork(n))??.samples(n, &label)
            }
            Kind::ForkJoin => vec![Sample::new(
                Row::ForkJoin,
                &label,
                on_runtime(multi, || fork_join(n))??,
            )],
            Kind::Yield => vec![Sample::new(
                Row::Yield,
                &label,
                on_runtime(multi, || yields(n))??,
            )],
            Kind::AcquireRelease => vec![Sample::new(
                Row::AcquireRelease,
                &label,
                on_runtime(multi, || acquire_release(n))?,
            )],
            Kind::PingPong => vec![Sample::new(
                Row::PingPong,
                &label,
                on_runtime(multi, || pingpong(n))??,
            )],
        };
        Ok(Outcome::Measured(samples))
    }

    async fn fork(n: u64) -> Result<ForkTimes, String> {
        let mut times = ForkTimes::default();
        let mut handles = Vec::with_capacity(FORK_BATCH as usize);
        for _ in 0..n / FORK_BATCH {
            let t0 = Instant::now();
            for _ in 0..FORK_BATCH {
                handles.push(tokio::spawn(async {}));
            }
            let t1 = Instant::now();
            for h in handles.drain(..) {
                h.await.map_err(|e| format!("a null task failed: {e}"))?;
            }
            let t2 = Instant::now();
            times.create += t1 - t0;
            times.destroy += t2 - t1;
        }
        Ok(times)
    }

    async fn fork_join(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        for _ in 0..n {
            tokio::spawn(async {})
                .await
                .map_err(|e| format!("a null task failed: {e}"))?;
        }
        Ok(per_op(start.elapsed(), n))
    }

    async fn yields(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        let side = move || async move {
            for _ in 0..n {
                tokio::task::yield_now().await;
            }
        };
        let a = tokio::spawn(side());
        let b = tokio::spawn(side());
        a.await.map_err(|e| e.to_string())?;
        b.await.map_err(|e| e.to_string())?;
        Ok(per_op(start.elapsed(), 2 * n))
    }

    async fn acquire_release(n: u64) -> f64 {
        let m = Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock().await += 1;
        }
        let d = start.elapsed();
        assert_eq!(*m.lock().await, n, "tokio Mutex lost increments");
        per_op(d, n)
    }

    /// Two tasks, two `Notify`s: each notifies the other's and awaits its
    /// own (`notify_one` keeps a permit if nobody waits yet).
    async fn pingpong(n: u64) -> Result<f64, String> {
        let ping = Arc::new(Notify::new());
        let pong = Arc::new(Notify::new());
        let start = Instant::now();
        let b = {
            let (ping, pong) = (Arc::clone(&ping), Arc::clone(&pong));
            tokio::spawn(async move {
                for _ in 0..n {
                    ping.notified().await;
                    pong.notify_one();
                }
            })
        };
        for _ in 0..n {
            ping.notify_one();
            pong.notified().await;
        }
        b.await.map_err(|e| e.to_string())?;
        Ok(per_op(start.elapsed(), n))
    }
}

// ---------------------------------------------------------------------------
// Go

/// The Go program in `crates/ferry-bench/go/`: built once, run once per
/// timed run with `GOMAXPROCS` set.
pub mod go {
    use super::*;

    /// Where the program's source is.
    pub fn source_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("go")
    }

    /// The built program; the temporary directory goes when it is dropped.
    #[derive(Debug)]
    pub struct Program {
        dir: PathBuf,
        bin: PathBuf,
    }

    impl Drop for Program {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Builds the program with the installed `go` (offline: `GOPROXY=off`,
    /// `GOTOOLCHAIN=local`). `Err` says why there is none.
    pub fn build() -> Result<Program, String> {
        let dir = std::env::temp_dir().join(format!("ferry-bench-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let bin = dir.join("threads-go");
        let program = Program {
            dir,
            bin: bin.clone(),
        };
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(".")
            .current_dir(source_dir())
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .output()
            .map_err(|e| format!("go is not installed ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "go build failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(program)
    }

    impl Program {
        /// One timed run of `kind` with `n` operations and `GOMAXPROCS=procs`:
        /// `(row, ns per op)` for each row the kind has.
        pub(super) fn run(
            &self,
            kind: Kind,
            n: u64,
            procs: usize,
        ) -> Result<Vec<(Row, f64)>, String> {
            let out = Command::new(&self.bin)
                .args(["-case", kind.go_name(), "-n", &n.to_string()])
                .args(["-batch", &FORK_BATCH.to_string()])
                .env("GOMAXPROCS", procs.to_string())
                .output()
                .map_err(|e| format!("cannot run the Go program: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "the Go program failed on {}: {}",
                    kind.go_name(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            parse(&String::from_utf8_lossy(&out.stdout), kind)
        }
    }

    /// Parses the program's `name ns_per_op` lines into the kind's rows.
    pub(super) fn parse(stdout: &str, kind: Kind) -> Result<Vec<(Row, f64)>, String> {
        let mut got = HashMap::new();
        for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!("unexpected line from the Go program: {line:?}"));
            };
            let ns: f64 = value
                .parse()
                .map_err(|_| format!("unexpected number from the Go program: {line:?}"))?;
            got.insert(name.to_owned(), ns);
        }
        kind.rows()
            .iter()
            .map(|&row| {
                let name = match row {
                    Row::Fork => "fork",
                    Row::Create => "create",
                    Row::Destroy => "destroy",
                    _ => kind.go_name(),
                };
                got.get(name)
                    .map(|&ns| (row, ns))
                    .ok_or_else(|| format!("the Go program printed no {name:?} line"))
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The harness

/// A system under test.
struct System {
    id: SysId,
    name: String,
    measure: Box<dyn Fn(Kind, u64) -> Result<Outcome, String>>,
}

/// Every system, in report order. `go` is the built Go program or why there
/// is none.
fn systems(go: &Result<Arc<go::Program>, String>) -> Vec<System> {
    let cpus = machine::online_cpus();
    let mut v = vec![
        System {
            id: SysId::Ferry,
            name: ferry_sys::NAME.to_owned(),
            measure: Box::new(ferry_sys::measure),
        },
        System {
            id: SysId::Std,
            name: std_sys::NAME.to_owned(),
            measure: Box::new(std_sys::measure),
        },
        System {
            id: SysId::Pthread,
            name: pthread_sys::NAME.to_owned(),
            measure: Box::new(pthread_sys::measure),
        },
        System {
            id: SysId::TokioCurrent,
            name: tokio_sys::CURRENT.to_owned(),
            measure: Box::new(|k, n| tokio_sys::measure(false, k, n)),
        },
        System {
            id: SysId::TokioMulti,
            name: tokio_sys::multi_name(),
            measure: Box::new(|k, n| tokio_sys::measure(true, k, n)),
        },
    ];
    for (id, procs) in [(SysId::Go1, 1), (SysId::GoN, cpus)] {
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
            id,
            name: label,
            measure,
        });
    }
    v
}

/// The systems of `--lang c`: ferry from Rust (the baseline of the ratios),
/// and the one C program on C-Threads and on pthreads.
fn c_systems(programs: &Arc<c_prog::Programs>) -> Vec<System> {
    let mut v = vec![System {
        id: SysId::Ferry,
        name: ferry_sys::NAME.to_owned(),
        measure: Box::new(ferry_sys::measure),
    }];
    for (id, label, cthreads) in [
        (SysId::CThreads, c_prog::CTHREADS, true),
        (SysId::PthreadC, c_prog::PTHREADS, false),
    ] {
        let programs = Arc::clone(programs);
        v.push(System {
            id,
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

/// A (row, label) result after all runs.
#[derive(Debug, Clone)]
struct Result1 {
    row: Row,
    sys: SysId,
    label: String,
    /// `Err`: absent, with the reason.
    stats: Result<Stats, String>,
    /// The samples in round order (empty when absent): sample `k` of every
    /// pair was taken in round `k`, tens of milliseconds from the others'.
    samples: Vec<f64>,
    items: u64,
}

/// An experiment failure: which pair, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError(String);

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}

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

/// Runs the experiment and prints its results to stdout (table or JSON
/// lines), and the targets against Go, Tokio and kernel threads.
pub fn run(args: &Args) -> Result<(), RunError> {
    let runs = args.runs();
    let target = args.target();
    let c_programs = match args.lang {
        Lang::C => Some(Arc::new(c_prog::build().map_err(RunError)?)),
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
    let started = Instant::now();
    let cpu_before = CpuSnapshot::now();
    eprintln!(
        "ferry-bench threads: {runs} runs x {} kinds x {} systems, ~{} ms per run, fork batch {FORK_BATCH}",
        Kind::ALL.len(),
        systems.len(),
        target.as_millis()
    );

    // n[kind][system], set by the warm-up round.
    let mut sizes = vec![vec![0u64; systems.len()]; Kind::ALL.len()];
    // samples per (row, system index, label); absent rows per (system index, row).
    let mut samples: HashMap<(Row, usize, String), Vec<f64>> = HashMap::new();
    let mut absent: HashMap<(usize, Row), (String, String)> = HashMap::new();

    for round in 0..=runs {
        let warmup = round == 0;
        for (ki, &kind) in Kind::ALL.iter().enumerate() {
            for k in 0..systems.len() {
                let si = (k + round as usize) % systems.len();
                let sys = &systems[si];
                let n = if warmup {
                    kind.warmup_n()
                } else {
                    sizes[ki][si]
                };
                let outcome = (sys.measure)(kind, n).map_err(|e| {
                    RunError(format!("{} / {}: {e}", kind.rows()[0].name(), sys.name))
                })?;
                match outcome {
                    Outcome::Measured(list) => {
                        if warmup {
                            // Size by the first row of the kind (FORK for the
                            // fork kind: its whole loop).
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
            }
        }
    }

    let mut results = Vec::new();
    for &row in &Row::ALL {
        let kind = Kind::ALL
            .iter()
            .position(|k| k.rows().contains(&row))
            .expect("every row has a kind");
        for (si, sys) in systems.iter().enumerate() {
            let mut mine: Vec<_> = samples
                .iter()
                .filter(|((r, s, _), _)| *r == row && *s == si)
                .collect();
            // The system's plain label first, then variants.
            mine.sort_by_key(|((_, _, label), _)| (label != &sys.name, label.clone()));
            for ((_, _, label), runs) in mine {
                results.push(Result1 {
                    row,
                    sys: sys.id,
                    label: label.clone(),
                    stats: Stats::from_samples(runs).ok_or_else(|| "no finite samples".to_owned()),
                    samples: runs.clone(),
                    items: sizes[kind][si],
                });
            }
            if let Some((label, reason)) = absent.get(&(si, row)) {
                results.push(Result1 {
                    row,
                    sys: sys.id,
                    label: label.clone(),
                    stats: Err(reason.clone()),
                    samples: Vec::new(),
                    items: 0,
                });
            }
        }
    }

    let mut targets = match args.lang {
        Lang::Rust => targets(&results),
        Lang::C => c_targets(&results),
    };
    if let Some(programs) = &c_programs {
        targets.push_str(&c_prog::table_8_1(programs, &results, runs).map_err(RunError)?);
    }
    if args.json {
        for r in &results {
            println!("{}", json_line(r));
        }
        eprint!("{targets}");
    } else {
        print!("{}", table(&results));
        println!();
        print!("{targets}");
    }
    eprintln!(
        "ferry-bench threads: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    machine::report_interference("threads", cpu_before);
    Ok(())
}

/// One JSON line: the stable keys of [`Record`], `null` time and `runs: 0`
/// plus an `absent` reason for an absent row.
fn json_line(r: &Result1) -> String {
    match &r.stats {
        Ok(stats) => Record::new(EXPERIMENT, r.row.name(), &r.label, stats, r.items).json_line(),
        Err(reason) => serde_json::to_string(&AbsentLine {
            experiment: EXPERIMENT,
            case: r.row.name(),
            system: &r.label,
            ns_per_op: None,
            runs: 0,
            absent: reason,
        })
        .expect("an absent line always serialises"),
    }
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

/// The JSON line of an absent row; field order is key order.
#[derive(serde::Serialize)]
struct AbsentLine<'a> {
    experiment: &'static str,
    case: &'static str,
    system: &'a str,
    ns_per_op: Option<f64>,
    runs: usize,
    absent: &'a str,
}

/// ferry's figure for a row: its first (plain) label, the baseline of the
/// ratios.
fn ferry_ns(results: &[Result1], row: Row) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.row == row && r.sys == SysId::Ferry)
        .find_map(|r| r.stats.as_ref().ok().map(|s| s.median))
}

fn system_ns(results: &[Result1], row: Row, sys: SysId) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.row == row && r.sys == sys)
        .find_map(|r| r.stats.as_ref().ok().map(|s| s.median))
}

/// The text table: one row per (row, label), with the median as a ratio to
/// ferry's in the same row (above 1: slower than ferry).
fn table(results: &[Result1]) -> String {
    let mut t = Table::new(&[
        ("row", Align::Left),
        ("system", Align::Left),
        ("median ns/op", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
        ("vs ferry", Align::Right),
    ]);
    let mut notes = Vec::new();
    for r in results {
        match &r.stats {
            Ok(s) => {
                let ratio = match ferry_ns(results, r.row) {
                    Some(f) if f > 0.0 => format!("{:.2}x", s.median / f),
                    _ => "-".to_owned(),
                };
                t.push_row(vec![
                    r.row.name().to_owned(),
                    r.label.clone(),
                    fmt_ns(s.median),
                    fmt_ns(s.min),
                    fmt_ns(s.max),
                    ratio,
                ]);
            }
            Err(reason) => {
                t.push_row(vec![
                    r.row.name().to_owned(),
                    r.label.clone(),
                    "absent".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                ]);
                match notes
                    .iter_mut()
                    .find(|(label, why, _): &&mut (String, String, Vec<&str>)| {
                        *label == r.label && why == reason
                    }) {
                    Some((_, _, rows)) => rows.push(r.row.name()),
                    None => notes.push((r.label.clone(), reason.clone(), vec![r.row.name()])),
                }
            }
        }
    }
    let mut out = t.render();
    for (label, reason, rows) in notes {
        let rows = if rows.len() == Row::ALL.len() {
            "all rows".to_owned()
        } else {
            rows.join(", ")
        };
        out.push_str(&format!("absent: {rows} / {label}: {reason}\n"));
    }
    out
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{ns:.0}")
    } else {
        format!("{ns:.2}")
    }
}

/// The targets against Go, Tokio and kernel threads, each a ratio of
/// medians from this run.
fn targets(results: &[Result1]) -> String {
    let mut out = String::from(
        "targets (against Go, Tokio and kernel threads), ratios of the medians above:\n",
    );
    let ferry = |row| ferry_ns(results, row);
    let other = |row, sys| system_ns(results, row, sys);
    // (description, ferry's row, other system, the factor ferry must beat it by)
    let checks = [
        (
            "FORK;JOIN >= 10x faster than Go (GOMAXPROCS=1)",
            Row::ForkJoin,
            SysId::Go1,
            10.0,
        ),
        (
            "FORK;JOIN >= 5x faster than tokio current-thread spawn+await",
            Row::ForkJoin,
            SysId::TokioCurrent,
            5.0,
        ),
        (
            "FORK;JOIN >= 5x faster than tokio multi-thread spawn+await",
            Row::ForkJoin,
            SysId::TokioMulti,
            5.0,
        ),
        (
            "YIELD <= 1/20 of Go's Gosched (GOMAXPROCS=1)",
            Row::Yield,
            SysId::Go1,
            20.0,
        ),
        (
            "PINGPONG <= 1/10 of Go's sync.Cond ping-pong (GOMAXPROCS=1)",
            Row::PingPong,
            SysId::Go1,
            10.0,
        ),
        (
            "ACQUIRE;RELEASE no slower than std::sync::Mutex",
            Row::AcquireRelease,
            SysId::Std,
            1.0,
        ),
        (
            "ACQUIRE;RELEASE no slower than pthread_mutex_t",
            Row::AcquireRelease,
            SysId::Pthread,
            1.0,
        ),
    ];
    for (what, row, sys, factor) in checks {
        let verdict = match (ferry(row), other(row, sys)) {
            (Some(f), Some(o)) if f > 0.0 => {
                let ratio = o / f;
                format!(
                    "{} ({:.1} ns vs {:.1} ns: {:.2}x, needs {factor}x)",
                    if ratio >= factor { "MET" } else { "MISSED" },
                    f,
                    o,
                    ratio
                )
            }
            (None, _) => "n/a (ferry's row is absent)".to_owned(),
            _ => "n/a (the other system's row is absent)".to_owned(),
        };
        out.push_str(&format!("  {what}: {verdict}\n"));
    }
    out
}

/// The samples of `sys`'s plain row `row`, in round order.
fn system_samples(results: &[Result1], row: Row, sys: SysId) -> Option<&[f64]> {
    results
        .iter()
        .filter(|r| r.row == row && r.sys == sys)
        .find(|r| r.stats.is_ok())
        .map(|r| r.samples.as_slice())
}

/// The median over rounds of `num`'s sample over `den`'s from the same
/// round: the two ran within tens of milliseconds of each other, so the
/// host's slow and fast phases (seconds long on the development VM) mostly
/// cancel out of each ratio, as they do not out of a ratio of two medians
/// taken from different rounds. `None` if either row is absent.
fn paired_ratio(results: &[Result1], row: Row, num: SysId, den: SysId) -> Option<f64> {
    let (n, d) = (
        system_samples(results, row, num)?,
        system_samples(results, row, den)?,
    );
    if n.len() != d.len() {
        return None;
    }
    let ratios: Vec<f64> = n.iter().zip(d).map(|(a, b)| a / b).collect();
    Stats::from_samples(&ratios).map(|s| s.median)
}

/// The C API's targets, from a `--lang c` run: each judged on the median of
/// the per-round ratios ([`paired_ratio`]), with the ratio of the medians
/// above printed beside it.
fn c_targets(results: &[Result1]) -> String {
    let mut out = String::from(
        "targets (C API against Rust and pthreads), judged on the median of per-round ratios (each round runs C and Rust, or C-Threads and pthreads, back to back); the ratio of the medians above beside it:\n",
    );
    for row in [
        Row::Fork,
        Row::ForkJoin,
        Row::Yield,
        Row::AcquireRelease,
        Row::PingPong,
    ] {
        let verdict = match (
            ferry_ns(results, row),
            system_ns(results, row, SysId::CThreads),
            paired_ratio(results, row, SysId::CThreads, SysId::Ferry),
        ) {
            (Some(rust), Some(c), Some(paired)) if rust > 0.0 => {
                format!(
                    "{} (per round {paired:.2}x; medians {c:.1} ns from C vs {rust:.1} ns from Rust: {:.2}x; needs <= 1.5x)",
                    if paired <= 1.5 { "MET" } else { "MISSED" },
                    c / rust
                )
            }
            _ => "n/a (a row is absent)".to_owned(),
        };
        out.push_str(&format!(
            "  {} C-Threads within 1.5x of Rust: {verdict}\n",
            row.name()
        ));
    }
    let verdict = match (
        system_ns(results, Row::ForkJoin, SysId::CThreads),
        system_ns(results, Row::ForkJoin, SysId::PthreadC),
        paired_ratio(results, Row::ForkJoin, SysId::PthreadC, SysId::CThreads),
    ) {
        (Some(c), Some(p), Some(paired)) if c > 0.0 => {
            format!(
                "{} (per round {paired:.0}x; medians {c:.1} ns vs pthread_create+join {p:.0} ns: {:.0}x; needs >= 300x)",
                if paired >= 300.0 { "MET" } else { "MISSED" },
                p / c
            )
        }
        _ => "n/a (a row is absent)".to_owned(),
    };
    out.push_str(&format!(
        "  FORK;JOIN C-Threads >= 300x faster than pthreads: {verdict}\n"
    ));
    out
}

// ---------------------------------------------------------------------------
// The C programs of `--lang c`

/// `crates/ferry-bench/c/threads.c`, built twice: against ferry's C-Threads
/// (`libferry.a`, built first with `cargo build --release -p ferry-capi`)
/// and against pthreads.
pub mod c_prog {
    use super::*;

    /// The label of the C program on ferry's C-Threads.
    pub const CTHREADS: &str = "C-Threads on ferry (C)";
    /// The label of the C program on pthreads.
    pub const PTHREADS: &str = "pthreads (C)";

    /// The built programs; their temporary directory goes when dropped.
    #[derive(Debug)]
    pub struct Programs {
        dir: PathBuf,
        cthreads: PathBuf,
        pthreads: PathBuf,
    }

    impl Drop for Programs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Builds `libferry.a` (release) and the two programs with the system
    /// `cc`. `Err` says what failed.
    pub fn build() -> Result<Programs, String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let out = Command::new(&cargo)
            .args(["build", "--release", "-p", "ferry-capi"])
            .current_dir(workspace())
            .output()
            .map_err(|e| format!("cannot run cargo to build libferry: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build --release -p ferry-capi failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace().join("target"), PathBuf::from);
        let lib = target.join("release").join("libferry.a");
        if !lib.exists() {
            return Err(format!("{} was not built", lib.display()));
        }
        let dir = std::env::temp_dir().join(format!("ferry-bench-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let programs = Programs {
            cthreads: dir.join("threads-cthreads"),
            pthreads: dir.join("threads-pthreads"),
            dir,
        };
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/threads.c");
        let include = workspace().join("crates/ferry-capi/include");
        let cc = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
            let out = Command::new("cc")
                .args(["-O2", "-std=c11", "-Wall", "-Werror"])
                .args(args)
                .output()
                .map_err(|e| format!("cannot run cc: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "cc failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        cc(&[
            "-DUSE_CTHREADS".as_ref(),
            "-I".as_ref(),
            include.as_os_str(),
            source.as_os_str(),
            lib.as_os_str(),
            "-lgcc_s".as_ref(),
            "-lutil".as_ref(),
            "-lrt".as_ref(),
            "-lpthread".as_ref(),
            "-lm".as_ref(),
            "-ldl".as_ref(),
            "-lc".as_ref(),
            "-o".as_ref(),
            programs.cthreads.as_os_str(),
        ])?;
        cc(&[
            "-pthread".as_ref(),
            source.as_os_str(),
            "-o".as_ref(),
            programs.pthreads.as_os_str(),
        ])?;
        Ok(programs)
    }

    impl Programs {
        /// One timed run of case `name` with `n` operations: the program's
        /// `name ns_per_op` lines. The C-Threads one runs on one processor.
        pub fn run(&self, cthreads: bool, name: &str, n: u64) -> Result<String, String> {
            let bin = if cthreads {
                &self.cthreads
            } else {
                &self.pthreads
            };
            let out = Command::new(bin)
                .args([name, &n.to_string(), &FORK_BATCH.to_string()])
                .env("FERRY_PROCESSORS", "1")
                .output()
                .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed on {name}: {}",
                    bin.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    }

    /// 003 Table 8-1: a Unix process's fork/wait/exit (`fork`, the child
    /// `_exit`s, `waitpid`) against `cthread_fork`/`cthread_join`, the
    /// latter the FORK;JOIN median above. `runs` runs of 200 forks each.
    pub(super) fn table_8_1(
        programs: &Programs,
        results: &[Result1],
        runs: u32,
    ) -> Result<String, String> {
        let mut samples = Vec::new();
        for _ in 0..runs {
            let out = programs.run(false, "process-fork", 200)?;
            let ns = out
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("unexpected process-fork output {out:?}"))?;
            samples.push(ns);
        }
        let process = Stats::from_samples(&samples).ok_or("no process-fork samples")?;
        let cthread = system_ns(results, Row::ForkJoin, SysId::CThreads);
        let mut out = String::from("\n003 Table 8-1 (process vs thread creation), medians:\n");
        out.push_str(&format!(
            "  fork/wait/exit (Unix process)   {:>12.0} ns  ({runs} runs of 200)\n",
            process.median
        ));
        if let Some(c) = cthread {
            out.push_str(&format!(
                "  cthread_fork/cthread_join       {c:>12.1} ns  ({:.0}x faster)\n",
                process.median / c
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(o: Outcome) -> Vec<Sample> {
        match o {
            Outcome::Measured(v) => v,
            other => panic!("expected samples, got {other:?}"),
        }
    }

    fn check_kind(sys: SysId, kind: Kind, samples: &[Sample]) {
        for &row in kind.rows() {
            let s = samples
                .iter()
                .find(|s| s.row == row)
                .unwrap_or_else(|| panic!("{sys:?}: no {} sample", row.name()));
            assert!(
                s.ns.is_finite() && s.ns > 0.0,
                "{sys:?} {}: {}",
                row.name(),
                s.ns
            );
        }
    }

    #[test]
    fn ferry_measures_every_kind() {
        for kind in Kind::ALL {
            check_kind(
                SysId::Ferry,
                kind,
                &measured(ferry_sys::measure(kind, 200).unwrap()),
            );
        }
    }

    #[test]
    fn ferry_pingpong_is_labelled_by_mechanism() {
        let s = measured(ferry_sys::measure(Kind::PingPong, 100).unwrap());
        assert!(s.iter().any(|s| s.label == ferry_sys::PARK_UNPARK));
        // The condition variable first: it is the row's baseline.
        assert_eq!(s[0].label, ferry_sys::NAME);
    }

    #[test]
    fn std_and_tokio_measure_every_kind() {
        for kind in Kind::ALL {
            check_kind(
                SysId::Std,
                kind,
                &measured(std_sys::measure(kind, 100).unwrap()),
            );
            for multi in [false, true] {
                check_kind(
                    SysId::TokioCurrent,
                    kind,
                    &measured(tokio_sys::measure(multi, kind, 100).unwrap()),
                );
            }
        }
        check_kind(
            SysId::Pthread,
            Kind::AcquireRelease,
            &measured(pthread_sys::measure(Kind::AcquireRelease, 1000).unwrap()),
        );
        assert_eq!(
            pthread_sys::measure(Kind::Fork, 10).unwrap(),
            Outcome::NotApplicable
        );
    }

    #[test]
    fn fork_rows_add_up() {
        let s = measured(ferry_sys::measure(Kind::Fork, 100).unwrap());
        let get = |row| s.iter().find(|s| s.row == row).unwrap().ns;
        let sum = get(Row::Create) + get(Row::Destroy);
        assert!((get(Row::Fork) - sum).abs() < 1e-6 * sum.max(1.0));
    }

    #[test]
    fn go_output_is_parsed_into_rows() {
        let rows = go::parse("create 10.5\ndestroy 20.25\nfork 30.75\n", Kind::Fork).unwrap();
        assert_eq!(
            rows,
            vec![
                (Row::Fork, 30.75),
                (Row::Create, 10.5),
                (Row::Destroy, 20.25)
            ]
        );
        assert_eq!(
            go::parse("yield 150\n", Kind::Yield).unwrap(),
            vec![(Row::Yield, 150.0)]
        );
        assert!(go::parse("yield\n", Kind::Yield).is_err());
        assert!(go::parse("pingpong 3\n", Kind::Yield).is_err());
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

    fn result(row: Row, sys: SysId, label: &str, ns: Option<f64>) -> Result1 {
        match ns {
            Some(x) => sampled(row, sys, label, &[x; 5]),
            None => Result1 {
                stats: Err("not built".to_owned()),
                samples: Vec::new(),
                ..sampled(row, sys, label, &[1.0])
            },
        }
    }

    #[test]
    fn table_ratios_are_against_ferry_in_the_same_row() {
        let results = vec![
            result(Row::Yield, SysId::Ferry, "ferry", Some(10.0)),
            result(Row::Yield, SysId::Go1, "go GOMAXPROCS=1", Some(150.0)),
            result(
                Row::PingPong,
                SysId::Ferry,
                "ferry (park/unpark)",
                Some(20.0),
            ),
            result(Row::PingPong, SysId::Std, "std::thread", Some(2000.0)),
            result(Row::AcquireRelease, SysId::Ferry, "ferry", None),
            result(Row::AcquireRelease, SysId::Std, "std::thread", Some(5.0)),
        ];
        let out = table(&results);
        let line = |row: &str, sys: &str| {
            out.lines()
                .find(|l| l.starts_with(row) && l[row.len()..].trim_start().starts_with(sys))
                .unwrap_or_else(|| panic!("no {row} / {sys} line in\n{out}"))
                .to_owned()
        };
        assert!(
            line("YIELD", "go GOMAXPROCS=1").ends_with("15.00x"),
            "{out}"
        );
        assert!(line("PINGPONG", "std").ends_with("100.00x"), "{out}");
        assert!(line("ACQUIRE;RELEASE", "ferry").contains("absent"), "{out}");
        assert!(line("ACQUIRE;RELEASE", "std").ends_with('-'), "{out}");
        assert!(
            out.contains("absent: ACQUIRE;RELEASE / ferry: not built"),
            "{out}"
        );

        let t = targets(&results);
        assert!(
            t.contains("YIELD <= 1/20 of Go's Gosched (GOMAXPROCS=1): MISSED"),
            "{t}"
        );
        assert!(
            t.contains("std::sync::Mutex: n/a (ferry's row is absent)"),
            "{t}"
        );
    }

    fn sampled(row: Row, sys: SysId, label: &str, samples: &[f64]) -> Result1 {
        Result1 {
            row,
            sys,
            label: label.to_owned(),
            stats: Ok(Stats::from_samples(samples).unwrap()),
            samples: samples.to_vec(),
            items: 10,
        }
    }

    #[test]
    fn c_targets_are_judged_on_per_round_ratios() {
        // Rust's rounds 1-3 caught a fast phase, C's rounds 3-5 a slow one:
        // the medians are 2.8x apart, every round but one 1.4x.
        let rust = [100.0, 100.0, 100.0, 200.0, 200.0];
        let c = [140.0, 140.0, 280.0, 280.0, 280.0];
        let pthreads = [1e5, 1e5, 1e5, 1e5, 1e5];
        let mut results = vec![
            sampled(Row::PingPong, SysId::Ferry, "ferry", &rust),
            sampled(Row::PingPong, SysId::CThreads, "C-Threads", &c),
            sampled(Row::ForkJoin, SysId::Ferry, "ferry", &rust),
            sampled(Row::ForkJoin, SysId::CThreads, "C-Threads", &c),
            sampled(Row::ForkJoin, SysId::PthreadC, "pthreads", &pthreads),
        ];
        let paired = paired_ratio(&results, Row::PingPong, SysId::CThreads, SysId::Ferry);
        assert_eq!(paired, Some(1.4));
        let t = c_targets(&results);
        assert!(
            t.contains("PINGPONG C-Threads within 1.5x of Rust: MET (per round 1.40x; medians 280.0 ns from C vs 100.0 ns from Rust: 2.80x"),
            "{t}"
        );
        // 1e5 / 280 = 357 in three rounds, 1e5 / 140 = 714 in two.
        assert!(
            t.contains("FORK;JOIN C-Threads >= 300x faster than pthreads: MET (per round 357x"),
            "{t}"
        );
        // A row whose rounds do not pair up is not judged.
        results[1] = sampled(Row::PingPong, SysId::CThreads, "C-Threads", &c[..4]);
        let t = c_targets(&results);
        assert!(
            t.contains("PINGPONG C-Threads within 1.5x of Rust: n/a"),
            "{t}"
        );
        assert!(
            t.contains("YIELD C-Threads within 1.5x of Rust: n/a"),
            "{t}"
        );
    }

    #[test]
    fn json_lines_keep_the_stable_keys_and_mark_absent_rows() {
        let present = json_line(&result(Row::ForkJoin, SysId::Ferry, "ferry", Some(40.0)));
        assert!(
            present.starts_with(
                r#"{"experiment":"threads","case":"FORK;JOIN","system":"ferry","ns_per_op":40.0,"runs":5,"#
            ),
            "{present}"
        );
        let gone = json_line(&result(Row::AcquireRelease, SysId::Ferry, "ferry", None));
        let v: serde_json::Value = serde_json::from_str(&gone).unwrap();
        assert_eq!(v["ns_per_op"], serde_json::Value::Null);
        assert_eq!(v["runs"], 0);
        assert_eq!(v["absent"], "not built");
        assert_eq!(v["case"], "ACQUIRE;RELEASE");
    }
}
