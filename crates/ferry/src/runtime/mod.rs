//! The runtime: its processors, the injector queue threads go to when they
//! are made or woken off a processor, the idle set, and [`run`], which turns
//! the calling kernel thread into processor 0 (as scheduler activations turn
//! the first thread into the first activation) and runs a closure as the
//! first user-level thread.
//!
//! This room owns the runtime's public entry: its settings ([`Builder`]),
//! its start, the adoption of the calling flow of control (`adopt.rs`),
//! ferry's locks across `fork` (`fork.rs`), and [`Handle`] (`handle.rs`). The shared state it builds is `upcall::Shared`; it must
//! not switch contexts itself (that is `processor`'s job).

mod adopt;
mod fork;
mod handle;

pub use handle::Handle;
pub(crate) use handle::WeakHandle;

use std::io;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::processor::available_cpus;
use crate::sched::SchedPolicy;
use crate::stack::DEFAULT_STACK_SIZE;
use crate::thread;
use crate::upcall::deadlock::Deadlock;
use crate::upcall::{self, Assignment, Config, Shared};

/// Settings for a runtime; see [`Runtime::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    processors: Option<usize>,
    max_processors: Option<usize>,
    stack_size: usize,
    spin_tries: u32,
    time_slice: Option<Duration>,
    handoff_after: Duration,
    max_activations: usize,
    take_over_unannounced: bool,
    stand_ins: bool,
    account_cpu: bool,
    on_deadlock: Deadlock,
    io_uring: bool,
    policy: SchedPolicy,
    stats: bool,
    allocd: bool,
}

/// The time slice when [`Builder::time_slice`] is not called and
/// `FERRY_TIME_SLICE` is not set: Go's 10 ms.
pub const DEFAULT_TIME_SLICE: Duration = Duration::from_millis(10);

/// A ferry runtime: user-level threads multiplexed on one kernel thread per
/// processor.
///
/// ```
/// let sum = ferry::Runtime::builder()
///     .processors(2)
///     .run(|| {
///         let handles: Vec<_> = (0..10u64).map(|i| ferry::spawn(move || i * i)).collect();
///         handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
///     })
///     .unwrap();
/// assert_eq!(sum, 285);
/// ```
#[derive(Debug)]
pub struct Runtime;

impl Runtime {
    /// Settings with their defaults: one processor per CPU the process may
    /// use, [`DEFAULT_STACK_SIZE`] stacks.
    pub fn builder() -> Builder {
        Builder {
            processors: None,
            max_processors: None,
            stack_size: DEFAULT_STACK_SIZE,
            spin_tries: 4096,
            time_slice: time_slice_from_env(),
            on_deadlock: Deadlock::from_env().unwrap_or(Deadlock::Error),
            handoff_after: Duration::ZERO,
            max_activations: 1024,
            take_over_unannounced: true,
            stand_ins: std::env::var_os("FERRY_STAND_INS").is_none_or(|v| v != "0"),
            account_cpu: true,
            io_uring: true,
            policy: SchedPolicy::from_env(),
            stats: true,
            allocd: std::env::var_os("FERRY_ALLOCD").is_none_or(|v| v != "off"),
        }
    }
}

impl Builder {
    /// How many processors (kernel threads running user-level threads);
    /// default: the CPUs in the process's affinity mask.
    pub fn processors(&mut self, n: usize) -> &mut Self {
        self.processors = Some(n.max(1));
        self
    }

    /// Default stack size of spawned threads (rounded up to pages).
    pub fn stack_size(&mut self, bytes: usize) -> &mut Self {
        self.stack_size = bytes;
        self
    }

    /// How many times an idle processor looks for work before it sleeps
    /// (default 4,096). While threads of the runtime wait on sockets, an
    /// idle processor spins a 32nd of it (128 tries by default): their
    /// work comes from the kernel, which wakes the processor that waits in
    /// `epoll_wait` for it, and a long spin would take the CPU from the
    /// peers that make it. A runtime with rpc channels spins for their
    /// adaptive budget instead.
    pub fn spin_tries(&mut self, tries: u32) -> &mut Self {
        self.spin_tries = tries;
        self
    }

    /// The most processors [`Handle::set_processors`] may grow the set to;
    /// default: the larger of [`Builder::processors`] and the CPUs in the
    /// process's affinity mask.
    pub fn max_processors(&mut self, n: usize) -> &mut Self {
        self.max_processors = Some(n.max(1));
        self
    }

    /// Preempts a thread that has run this long without switching: a signal
    /// interrupts it, its whole register state is saved, and it goes to the
    /// back of its queue; `None` turns preemption off (threads then switch
    /// only when they block, yield or end, and a thread that computes
    /// without either keeps its processor from the others).
    ///
    /// The default is 10 ms (as Go's), so that a
    /// busy loop cannot starve the other threads of its processor; the
    /// environment variable `FERRY_TIME_SLICE` sets another default (e.g.
    /// `500us`, `2ms`; `off` or `0` for none; a value it cannot read leaves
    /// 10 ms).
    ///
    /// A thread is never stopped while it holds a [`SpinLock`] or is inside
    /// the runtime, nor while it runs C library code (malloc keeps
    /// per-kernel-thread caches): the preemption waits for the lock to be
    /// released (and happens right then), or for the next look of the
    /// monitor, which checks the processors every 20 µs (about 50 µs as
    /// the kernel wakes it), so a slice is enforced to within about that.
    ///
    /// [`SpinLock`]: crate::sync::SpinLock
    pub fn time_slice(&mut self, slice: Option<Duration>) -> &mut Self {
        self.time_slice = slice;
        self
    }

    /// The scheduling policy of every processor (see [`SchedPolicy`]):
    /// [`SchedPolicy::WorkStealing`] by default, or
    /// [`SchedPolicy::FineGrain`], which gives each thread a quantum
    /// following the rate of bytes it moves through streams (200 µs to
    /// 2 ms) in place of [`Builder::time_slice`], and runs a woken thread
    /// next. The environment variable `FERRY_SCHED` (`work-stealing`,
    /// `fine-grain`) sets another default; a value it cannot read leaves
    /// the work-stealing policy.
    ///
    /// ```
    /// let n = ferry::Runtime::builder()
    ///     .processors(2)
    ///     .policy(ferry::SchedPolicy::FineGrain)
    ///     .run(|| ferry::spawn(|| 6 * 7).join().unwrap())
    ///     .unwrap();
    /// assert_eq!(n, 42);
    /// ```
    pub fn policy(&mut self, policy: SchedPolicy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// How long a processor whose thread entered [`blocking`](crate::blocking)
    /// waits before a spare kernel thread takes it over. Zero (the default)
    /// hands it over at once if other threads wait for it, and otherwise at
    /// the monitor's next look (within about 50 µs); a longer wait makes
    /// short calls cheaper and strands the processor for that long when the
    /// call does block (Go uses 20 µs).
    pub fn handoff_after(&mut self, wait: Duration) -> &mut Self {
        self.handoff_after = wait;
        self
    }

    /// Lets the monitor take a processor over from a thread that blocks in
    /// the kernel without announcing it (a raw `read`, `std::thread::sleep`,
    /// a page fault), as if it had called [`blocking`](crate::blocking).
    ///
    /// On by default. Only a kernel thread outside the runtime (its thread's
    /// own code) is taken over; the thread, when it wakes, is handed back at
    /// its next call into ferry, or pushed off by the preemption signal if
    /// it runs on. Off, such a call stalls its processor until it returns.
    pub fn take_over_unannounced(&mut self, on: bool) -> &mut Self {
        self.take_over_unannounced = on;
        self
    }

    /// The most kernel threads the runtime runs (the processors' drivers,
    /// their stand-ins, the spare that keeps the monitor's watch, and the
    /// spares that take over from threads blocked in the kernel); default
    /// 1,024, at least twice [`max_processors`](Builder::max_processors)
    /// plus two. When every one is in use, a further blocking call keeps its
    /// processor until it returns.
    pub fn max_kernel_threads(&mut self, n: usize) -> &mut Self {
        self.max_activations = n.max(4);
        self
    }

    /// Gives each busy processor pinned to a core a *stand-in*: a spare
    /// kernel thread that waits runnable on that core in `SCHED_BATCH`,
    /// yielding it at every pick, so that the kernel runs it as soon as the
    /// processor's kernel thread sleeps in a system call, and it takes the
    /// processor over at once (for an announced [`blocking`](crate::blocking)
    /// call without a wakeup, for an unannounced one within about
    /// 10 µs instead of the monitor's next look). On by default; it costs
    /// one parked kernel thread per processor, and a `sched_yield` round
    /// trip each time the kernel offers a busy core to the stand-in (about
    /// once per scheduler slice). Not `SCHED_IDLE`: a process whose
    /// threads wait in it dies slowly beside busy processes, each such
    /// thread waiting for a share of a core to run its exit. Processors
    /// that are not pinned (a runtime of at most one processor with no
    /// core named) never have one.
    /// `FERRY_STAND_INS=0` in the environment turns the default off.
    pub fn stand_ins(&mut self, on: bool) -> &mut Self {
        self.stand_ins = on;
        self
    }

    /// What the runtime does when every one of its threads is blocked and
    /// nothing could wake one (see [`Deadlock`]): report it and abort, end
    /// [`run`](Builder::run) with an error of kind
    /// [`io::ErrorKind::Deadlock`] listing which threads wait on what, or
    /// nothing.
    ///
    /// The default is [`Deadlock::Error`]: `run` has a caller, and its
    /// `io::Result` already says when the runtime could not finish, so the
    /// caller decides (a `?` passes the report on, an `unwrap` panics with
    /// it) where Go, with no caller to return to, aborts. A runtime started
    /// with [`adopt`](Builder::adopt) aborts instead. The environment
    /// variable `FERRY_DEADLOCK` (`abort`, `error`, `ignore`) sets another
    /// default.
    ///
    /// A deadlock is reported only when it is certain: every processor
    /// sleeps, no timer is pending, no thread is away in a kernel call,
    /// and the process has no kernel thread besides the runtime's own, so
    /// no one outside could wake a thread (a `Handle`, a `Thread` or a lock
    /// held by a plain kernel thread). So it is not reported in a process
    /// with other kernel threads (another runtime, a thread of the
    /// program's, a test harness), nor when only some threads block one
    /// another while others run or sleep, nor for a thread spinning on a
    /// flag nobody sets. The check runs only when the last processor goes
    /// to sleep with no timer pending, and costs the scheduling paths
    /// nothing.
    ///
    /// ```no_run
    /// use ferry::sync::Mutex;
    /// use std::sync::Arc;
    ///
    /// let err = ferry::Runtime::builder()
    ///     .on_deadlock(ferry::Deadlock::Error)
    ///     .run(|| {
    ///         let (a, b) = (Arc::new(Mutex::new(())), Arc::new(Mutex::new(())));
    ///         let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    ///         let _ga = a.lock();
    ///         let t = ferry::thread::Builder::new()
    ///             .name("other")
    ///             .spawn(move || {
    ///                 let _gb = b2.lock();
    ///                 let _ga = a2.lock(); // waits for `main`
    ///             })
    ///             .unwrap();
    ///         ferry::sleep(std::time::Duration::from_millis(10));
    ///         let _gb = b.lock(); // waits for "other": neither goes on
    ///         t.join().unwrap();
    ///     })
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::Deadlock);
    /// ```
    pub fn on_deadlock(&mut self, mode: Deadlock) -> &mut Self {
        self.on_deadlock = mode;
        self
    }

    /// Accounts how long each thread runs on processors
    /// ([`Thread::cpu_time`](crate::Thread::cpu_time),
    /// [`thread::cpu_time`]), including the time
    /// servers spend on its calls (charged back with each reply): one read
    /// of the time stamp counter per switch. On by default; off saves about
    /// 1.5 ns a switch, and then no thread's run time is known (a server
    /// still measures and returns what its activations spend). Measured
    /// with `ferry-bench threads` on a 2-core VM, medians of 17 runs taken
    /// alternately on and off: `YIELD` 24.4 ns on, 22.6 ns off; `FORK;JOIN`
    /// 92.9 ns on, 90.2 ns off; `PINGPONG` 201.6 ns on, 199.4 ns off. (The
    /// `switch` experiment times the bare context switch, below the
    /// runtime, which accounting does not touch.)
    pub fn thread_cpu_time(&mut self, on: bool) -> &mut Self {
        self.account_cpu = on;
        self
    }

    /// Whether [`crate::fs`] may submit file operations to an io_uring
    /// (made at the first one) instead of handing each to a kernel thread
    /// through [`crate::blocking`]. On by default; off, or with
    /// `FERRY_IO_URING=0` in the environment, or where the kernel refuses
    /// io_uring, files take the blocking handoff
    /// ([`Handle::fs_backend`](crate::Handle::fs_backend) says which).
    pub fn io_uring(&mut self, on: bool) -> &mut Self {
        self.io_uring = on;
        self
    }

    /// Whether the runtime publishes its figures (processors, threads,
    /// upcall events, cross-process channels) in a page of the user's
    /// runtime directory that `ferry top` reads ([`crate::stats`]). On by
    /// default; off here or with `FERRY_STATS=off` in the environment. One
    /// runtime per process publishes, the first to start while none does.
    /// The cost when on: the monitor writes the page at most every 100 ms
    /// while processors are busy, and once before it parks.
    pub fn stats(&mut self, on: bool) -> &mut Self {
        self.stats = on;
        self
    }

    /// Whether the runtime registers with a processor allocation daemon
    /// (`ferry allocd`) when one listens in the user's runtime directory
    /// at start, and then runs as many processors as it owns cores,
    /// following the daemon's orders (`ferry::alloc`). On by default;
    /// `FERRY_ALLOCD=off` in the environment turns the default off.
    /// Without a daemon nothing changes either way.
    pub fn allocd(&mut self, on: bool) -> &mut Self {
        self.allocd = on;
        self
    }

    /// The processor count this builder starts with, and the most it may
    /// grow to.
    fn processor_counts(&self) -> (usize, usize) {
        let count = self.processors.unwrap_or_else(available_cpus);
        let max = self
            .max_processors
            .unwrap_or_else(available_cpus)
            .max(count);
        (count, max)
    }

    /// What `run` and `adopt` share before their first thread: the checks,
    /// the process-wide handlers, and the runtime's state with its starting
    /// processor count.
    ///
    /// # Panics
    /// If the calling kernel thread already runs ferry threads (`what`
    /// names the caller in the message).
    fn prepare(&self, what: &str) -> io::Result<(Arc<Shared>, usize)> {
        assert!(
            upcall::resumed_processor().is_none(),
            "{what}: this kernel thread already runs a ferry processor"
        );
        let (count, max) = self.processor_counts();
        // Processors' default cores count from the CPU this kernel thread
        // runs on (where the kernel started the process), not from one a
        // helper was put on.
        crate::processor::note_first_cpu();
        upcall::install_preemption()?;
        fork::install_fork_handlers();
        thread::install_panic_hook();
        // Read here, off the processors: its first read registers a fork
        // handler inside a `Once`, which ferry threads making their first
        // rpc calls together would otherwise wait on in the kernel.
        let _ = crate::sys::process_identity();
        // The stack cache's calls on a ferry thread hold its preemption
        // off (see `stack::shield`).
        crate::stack::install_shield(|f| upcall::without_preemption(f));
        // Every entry into the runtime makes a light fence (pairing with
        // the monitor's heavy one); until the first heavy fence chose the
        // mode it is a full fence, and a runtime that never idles or
        // blocks may never make one (a fork+join loop paid a full fence at
        // each entry).
        ferry_queue::wait::prepare_fences();
        Ok((self.build_shared(count, max), count))
    }

    /// The runtime's shared state, with processors `..count` starting.
    fn build_shared(&self, count: usize, max: usize) -> Arc<Shared> {
        let shared = Shared::build(&Config {
            max_processors: max,
            start: count,
            stack_size: self.stack_size,
            spin_tries: self.spin_tries,
            max_activations: self.max_activations,
            handoff_after: self.handoff_after,
            time_slice: self.time_slice,
            take_over_unannounced: self.take_over_unannounced,
            stand_ins: self.stand_ins,
            account_cpu: self.account_cpu,
            on_deadlock: self.on_deadlock,
            policy: self.policy,
        });
        if self.policy == SchedPolicy::FineGrain {
            thread::count_stream_bytes_from_now();
        }
        shared.sources.ring.allow(self.io_uring);
        shared
    }

    /// Starts the watch (an activation that keeps the monitor), a first
    /// spare and the drivers of processors `1..count`; on failure, shuts
    /// the runtime down.
    fn start_helpers(shared: &Arc<Shared>, count: usize) -> io::Result<()> {
        let started = shared
            .activations
            .spawn(shared, Some(Assignment::Watch))
            .and_then(|()| {
                // One spare from the start: the first handoff need not make one.
                let _ = shared.activations.add_spare(shared);
                shared.processors[1..count].iter().try_for_each(|p| {
                    shared
                        .activations
                        .spawn(shared, Some(Assignment::Start(p.as_static())))
                })
            });
        if let Err(e) = started {
            shared.shut_down();
            shared.activations.join_all();
            return Err(e);
        }
        Ok(())
    }

    /// Starts the runtime in the background, every processor on a kernel
    /// thread of its own, and returns its handle; the calling kernel thread
    /// stays what it was (not a ferry thread). Threads start with
    /// [`Handle::spawn`]; the caller may join them and use `ferry::sync`
    /// with them as any kernel thread outside the runtime may.
    ///
    /// As with [`adopt`](Builder::adopt), the runtime runs until the process
    /// exits; it is not shut down. Unlike `adopt`, the caller's flow is never
    /// moved, so this suits a kernel thread that must end as it started (a
    /// `std::thread` or a pthread).
    ///
    /// ```
    /// let rt = ferry::Runtime::builder().processors(2).start().unwrap();
    /// let t = rt.spawn(|| 6 * 7).unwrap();
    /// assert_eq!(t.join().unwrap(), 42);
    /// assert_eq!(rt.processors(), 2);
    /// ```
    ///
    /// # Errors
    /// If a kernel thread cannot be made.
    ///
    /// # Panics
    /// If the calling kernel thread runs ferry threads.
    pub fn start(&self) -> io::Result<Handle> {
        let (shared, count) = self.prepare("ferry::Builder::start")?;
        let page = crate::stats::start(&shared, self.stats);
        Self::start_helpers(&shared, count)?;
        let first = shared.activations.spawn(
            &shared,
            Some(Assignment::Start(shared.processors[0].as_static())),
        );
        if let Err(e) = first {
            shared.shut_down();
            shared.activations.join_all();
            return Err(e);
        }
        if let Some(page) = page {
            page.keep_until_exit();
        }
        let handle = Handle { shared };
        crate::runtime_started(&handle, self.allocd);
        Ok(handle)
    }

    /// Runs `main` as the first user-level thread, with the calling kernel
    /// thread as processor 0, and returns its result once it finishes. Threads
    /// still running then are abandoned, as when a process's `main` returns.
    ///
    /// # Errors
    /// If a processor's kernel thread or the first thread's stack cannot be
    /// made; [`io::ErrorKind::Deadlock`] if every thread blocked for good
    /// and the runtime was told to report it so
    /// ([`Builder::on_deadlock`], the default). A panic in `main` is
    /// resumed in the caller.
    pub fn run<T: Send + 'static>(
        &self,
        main: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        let (shared, count) = self.prepare("ferry::run")?;
        // The page is in place before the first thread runs; it goes when
        // `run` returns (its activations joined: nobody writes it any more).
        let page = crate::stats::start(&shared, self.stats);
        shared.deadlock.report_to_caller();
        // The first thread leaves its outcome here *before* it shuts the
        // runtime down, so that nothing after the shutdown (a preemption, a
        // lost processor) can keep the outcome from the caller.
        type Outcome<T> = std::sync::Mutex<Option<std::thread::Result<T>>>;
        let outcome: Arc<Outcome<T>> = Arc::new(std::sync::Mutex::new(None));
        {
            let (outcome, for_thread) = (Arc::clone(&outcome), Arc::clone(&shared));
            thread::Builder::new()
                .name("main")
                .spawn_in(&shared, move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(main));
                    *outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
                    for_thread.shut_down();
                })?;
        }
        Self::start_helpers(&shared, count)?;
        crate::runtime_started(
            &Handle {
                shared: Arc::clone(&shared),
            },
            self.allocd,
        );
        let caller = shared.activations.register_caller();

        let affinity = rustix::thread::sched_getaffinity(None).ok();
        caller.main(
            &shared,
            Some(Assignment::Start(shared.processors[0].as_static())),
        );
        if let Some(mask) = affinity {
            let _ = rustix::thread::sched_setaffinity(None, &mask);
        }
        shared.activations.join_all();
        drop(page);
        // Threads still queued hold the runtime; let them (and their stacks) go.
        shared.drain();
        // Sockets of threads parked for good, and the epoll instance, close.
        shared.sources.readiness.shut_down();
        let outcome = outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match outcome {
            Some(Ok(value)) => Ok(value),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Err(shared.deadlock.take_error().expect(
                "the runtime shuts down only after its first thread finished, or on a deadlock",
            )),
        }
    }
}

/// Runs `main` on a runtime with default settings; see [`Builder::run`].
///
/// # Errors
/// As [`Builder::run`].
pub fn run<T: Send + 'static>(main: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    Runtime::builder().run(main)
}

/// The default time slice: from `FERRY_TIME_SLICE` (`500us`, `2ms`, `1s`,
/// or plain microseconds; empty, `0` or `off` mean none) if it is set and
/// readable, else [`DEFAULT_TIME_SLICE`].
fn time_slice_from_env() -> Option<Duration> {
    let Ok(v) = std::env::var("FERRY_TIME_SLICE") else {
        return Some(DEFAULT_TIME_SLICE);
    };
    let v = v.trim();
    if v.is_empty() || v == "0" || v.eq_ignore_ascii_case("off") {
        return None;
    }
    parse_duration(v).or(Some(DEFAULT_TIME_SLICE))
}

/// Parses `500us`, `2ms`, `1s` or a bare number of microseconds.
fn parse_duration(v: &str) -> Option<Duration> {
    if v.is_empty() || v == "0" || v.eq_ignore_ascii_case("off") {
        return None;
    }
    let (num, unit) = v
        .find(|c: char| !c.is_ascii_digit())
        .map_or((v, "us"), |i| (&v[..i], &v[i..]));
    let n: u64 = num.parse().ok()?;
    match unit {
        "ns" => Some(Duration::from_nanos(n)),
        "us" | "µs" => Some(Duration::from_micros(n)),
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500us"), Some(Duration::from_micros(500)));
        assert_eq!(parse_duration("2ms"), Some(Duration::from_millis(2)));
        assert_eq!(parse_duration("750"), Some(Duration::from_micros(750)));
        assert_eq!(parse_duration("off"), None);
        assert_eq!(parse_duration("0"), None);
        assert_eq!(parse_duration("3 parsecs"), None);
    }
}
