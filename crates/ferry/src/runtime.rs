//! The runtime: its processors, the injector queue threads go to when they
//! are made or woken off a processor, the idle set, and [`run`], which turns
//! the calling kernel thread into processor 0 (as scheduler activations turn
//! the first thread into the first activation) and runs a closure as the
//! first user-level thread.
//!
//! This room owns the runtime's lifetime and its shared state; it must not
//! switch contexts itself (that is [`crate::processor`]'s job).

use std::io;
use std::ops::Range;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};

use crate::processor::{self, Processor};
use crate::sched::{Injector, Ready};
use crate::stack::DEFAULT_STACK_SIZE;
use crate::thread::{self, Thread};
use crate::timer::Timers;

/// State every processor and every thread of one runtime shares.
///
/// | word | written by | meaning |
/// |------|------------|---------|
/// | `spinning` | a processor entering (+1) and leaving (-1) its spin in `idle` (SeqCst) | how many processors are looking for work right now; while any is, nobody needs waking |
/// | `sleeper_count` | a processor joining or leaving `sleepers`, under its lock | how many processors sleep (or are about to); read without the lock by `notify_work` |
pub(crate) struct Shared {
    pub(crate) processors: Box<[Processor]>,
    /// Threads made or woken off a processor, and ring overflow.
    pub(crate) injector: Injector,
    /// Indices of processors asleep (or about to sleep) in `idle`.
    sleepers: Mutex<Vec<usize>>,
    sleeper_count: AtomicUsize,
    spinning: AtomicUsize,
    shutdown: AtomicBool,
    pub(crate) stack_size: usize,
    spin_tries: u32,
    next_thread_id: AtomicU64,
    pub(crate) timers: Timers,
}

impl Shared {
    /// Makes `t` runnable: through the calling processor's policy if it is
    /// one of this runtime's, else on the injector; and lets an idle
    /// processor know.
    pub(crate) fn schedule(&self, t: Thread, why: Ready) {
        match processor::current() {
            Some(p) if std::ptr::eq(p.shared(), self) => p.make_ready(t, why),
            // Off the runtime (a kernel thread, or another runtime's processor).
            _ => {
                self.injector.push(t);
                self.notify_work();
            }
        }
    }

    /// Work was just published (on a processor's queues or the injector):
    /// wakes a sleeping processor unless one is spinning, which will find it.
    /// See `processor`'s module docs for the handshake.
    #[inline]
    pub(crate) fn notify_work(&self) {
        ferry_queue::wait::light_fence();
        if self.spinning.load(Relaxed) != 0 || self.sleeper_count.load(Relaxed) == 0 {
            return;
        }
        self.wake_sleeper();
    }

    /// Wakes one sleeping processor, if any sleeps.
    #[cold]
    fn wake_sleeper(&self) {
        let index = {
            let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
            let i = sleepers.pop();
            self.sleeper_count.store(sleepers.len(), Relaxed);
            i
        };
        if let Some(i) = index {
            self.processors[i].wake();
        }
    }

    pub(crate) fn spinning_enter(&self) {
        self.spinning.fetch_add(1, SeqCst);
    }

    pub(crate) fn spinning_exit(&self) {
        self.spinning.fetch_sub(1, SeqCst);
    }

    /// A spinner found work: if it was the last spinner, another processor
    /// is woken to spin in its place, so that more work already queued does
    /// not wait for this one (Go's rule).
    pub(crate) fn spinning_exit_found_work(&self) {
        if self.spinning.fetch_sub(1, SeqCst) == 1 && self.sleeper_count.load(Relaxed) != 0 {
            self.wake_sleeper();
        }
    }

    pub(crate) fn sleeper_enter(&self, index: usize) {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.push(index);
        self.sleeper_count.store(sleepers.len(), SeqCst);
    }

    pub(crate) fn sleeper_exit(&self, index: usize) {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.retain(|&i| i != index);
        self.sleeper_count.store(sleepers.len(), SeqCst);
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    pub(crate) fn spin_tries(&self) -> u32 {
        self.spin_tries
    }

    /// `n` fresh thread ids.
    pub(crate) fn next_thread_ids(&self, n: u64) -> Range<u64> {
        let start = self.next_thread_id.fetch_add(n, Relaxed);
        start..start + n
    }

    /// Drops every queued thread, after every processor has stopped.
    fn drain(&self) {
        for p in self.processors.iter() {
            // SAFETY: called by `run` after every processor's kernel thread
            // has left its loop and been joined, so nobody else touches them.
            unsafe { p.drain() };
        }
        self.injector.clear();
    }

    /// Stops every processor's scheduler loop.
    fn shut_down(&self) {
        self.shutdown.store(true, Release);
        for p in self.processors.iter() {
            p.wake();
        }
    }
}

/// Shuts the runtime down when the first thread's closure ends, by return or
/// by panic.
struct ShutDownOnDrop(Arc<Shared>);

impl Drop for ShutDownOnDrop {
    fn drop(&mut self) {
        self.0.shut_down();
    }
}

/// Settings for a runtime; see [`Runtime::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    processors: Option<usize>,
    stack_size: usize,
    spin_tries: u32,
}

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
            stack_size: DEFAULT_STACK_SIZE,
            spin_tries: 4096,
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

    /// How many times an idle processor looks for work before it sleeps.
    pub fn spin_tries(&mut self, tries: u32) -> &mut Self {
        self.spin_tries = tries;
        self
    }

    /// Runs `main` as the first user-level thread, with the calling kernel
    /// thread as processor 0, and returns its result once it finishes. Threads
    /// still running then are abandoned, as when a process's `main` returns.
    ///
    /// # Errors
    /// If a processor's kernel thread or the first thread's stack cannot be
    /// made. A panic in `main` is resumed in the caller.
    pub fn run<T: Send + 'static>(
        &self,
        main: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        assert!(
            processor::current().is_none(),
            "ferry::run: this kernel thread already runs a ferry processor"
        );
        let count = self.processors.unwrap_or_else(available_cpus);
        let shared = Arc::new(Shared {
            processors: Processor::build(count).into_boxed_slice(),
            injector: Injector::new(),
            sleepers: Mutex::new(Vec::with_capacity(count)),
            sleeper_count: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            stack_size: self.stack_size,
            spin_tries: self.spin_tries,
            next_thread_id: AtomicU64::new(1),
            timers: Timers::new(),
        });

        for p in shared.processors.iter() {
            // SAFETY: no kernel thread runs the processors yet, and `shared`
            // owns them and outlives every use of them.
            unsafe { p.set_shared(Arc::as_ptr(&shared)) };
        }
        let first = {
            let guard = ShutDownOnDrop(Arc::clone(&shared));
            thread::Builder::new()
                .name("main")
                .spawn_in(&shared, move || {
                    let _guard = guard;
                    main()
                })?
        };

        let mut kernel_threads = Vec::with_capacity(count - 1);
        for index in 1..count {
            let for_kernel_thread = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("ferry-processor-{index}"))
                .spawn(move || {
                    let shared = for_kernel_thread;
                    let p = &shared.processors[index];
                    pin_to_cpu(index);
                    p.enter();
                    p.run(&shared);
                    Processor::leave();
                });
            match spawned {
                Ok(k) => kernel_threads.push(k),
                Err(e) => {
                    shared.shut_down();
                    for k in kernel_threads {
                        let _ = k.join();
                    }
                    return Err(e);
                }
            }
        }

        let p0 = &shared.processors[0];
        let affinity = rustix::thread::sched_getaffinity(None).ok();
        // One processor gains nothing from a fixed CPU and would lose the
        // kernel's freedom to move it off a busy one.
        if count > 1 {
            pin_to_cpu(0);
        }
        p0.enter();
        p0.run(&shared);
        Processor::leave();
        if let Some(mask) = affinity {
            let _ = rustix::thread::sched_setaffinity(None, &mask);
        }
        for k in kernel_threads {
            let _ = k.join();
        }
        // Threads still queued hold the runtime; let them (and their stacks) go.
        shared.drain();
        match first.try_take() {
            Some(Ok(value)) => Ok(value),
            Some(Err(panic)) => std::panic::resume_unwind(panic.into_payload()),
            None => unreachable!("the runtime shuts down only after its first thread finished"),
        }
    }
}

/// A handle on the runtime the calling thread runs in: what it holds and
/// what its processors are doing.
///
/// ```
/// ferry::Runtime::builder()
///     .processors(2)
///     .run(|| {
///         let rt = ferry::Handle::current();
///         assert_eq!(rt.processors(), 2);
///         assert!(rt.idle_processors() <= 1); // this thread keeps one busy
///     })
///     .unwrap();
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    /// The runtime of the calling ferry thread.
    ///
    /// # Panics
    /// Outside a ferry thread.
    pub fn current() -> Handle {
        let shared = processor::current()
            .and_then(|p| p.current_ref().map(|t| Arc::clone(t.shared())))
            .expect("ferry::Handle::current: not on a ferry thread");
        Handle { shared }
    }

    /// How many processors the runtime holds.
    pub fn processors(&self) -> usize {
        self.shared.processors.len()
    }

    /// How many processors have nothing to run: they stopped spinning for
    /// work and sleep, marked willing to yield their core (scheduler
    /// activations' idle processors, which a processor allocator may take
    /// back). A snapshot: it may change as soon as it is read.
    pub fn idle_processors(&self) -> usize {
        self.shared
            .processors
            .iter()
            .filter(|p| p.is_willing_to_yield())
            .count()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("processors", &self.processors())
            .field("idle_processors", &self.idle_processors())
            .finish()
    }
}

/// Runs `main` on a runtime with default settings; see [`Builder::run`].
///
/// # Errors
/// As [`Builder::run`].
pub fn run<T: Send + 'static>(main: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    Runtime::builder().run(main)
}

/// The number of CPUs this process may run on.
fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling kernel thread to the `index`-th CPU of the process's
/// affinity mask, where the kernel allows; best effort.
fn pin_to_cpu(index: usize) {
    let Ok(allowed) = rustix::thread::sched_getaffinity(None) else {
        return;
    };
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| allowed.is_set(c))
        .collect();
    if cpus.len() < 2 {
        return;
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpus[index % cpus.len()]);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}
