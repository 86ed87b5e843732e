//! The runtime: its processors, the injector queue threads go to when they
//! are made or woken off a processor, the idle set, and [`run`], which turns
//! the calling kernel thread into processor 0 (as scheduler activations turn
//! the first thread into the first activation) and runs a closure as the
//! first user-level thread.
//!
//! This room owns the runtime's lifetime and its shared state; it must not
//! switch contexts itself (that is [`crate::processor`]'s job).

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, fence};
use std::sync::{Arc, Mutex, PoisonError};

use crate::processor::{self, Processor};
use crate::stack::DEFAULT_STACK_SIZE;
use crate::thread::{self, Thread};
use crate::timer::Timers;

/// State every processor and every thread of one runtime shares.
pub(crate) struct Shared {
    pub(crate) processors: Box<[Processor]>,
    /// Threads made or woken off a processor, and local-queue overflow.
    injector: Mutex<VecDeque<Thread>>,
    /// `injector.len()`, readable without the lock (a hint).
    injected: AtomicUsize,
    /// Indices of processors asleep (or about to sleep) in `idle`.
    idle: Mutex<Vec<usize>>,
    idle_count: AtomicUsize,
    shutdown: AtomicBool,
    pub(crate) stack_size: usize,
    spin_tries: u32,
    next_thread_id: AtomicU64,
    pub(crate) timers: Timers,
}

impl Shared {
    /// Queues `t` on the injector and wakes a sleeping processor for it.
    pub(crate) fn inject(&self, t: Thread) {
        let mut q = self.injector.lock().unwrap_or_else(PoisonError::into_inner);
        q.push_back(t);
        self.injected.store(q.len(), Release);
        drop(q);
        self.wake_one();
    }

    /// Takes the oldest injected thread.
    pub(crate) fn take_injected(&self) -> Option<Thread> {
        if self.injected.load(Acquire) == 0 {
            return None;
        }
        let mut q = self.injector.lock().unwrap_or_else(PoisonError::into_inner);
        let t = q.pop_front();
        self.injected.store(q.len(), Release);
        t
    }

    /// Whether the injector looks non-empty.
    pub(crate) fn has_work_hint(&self) -> bool {
        self.injected.load(Acquire) != 0
    }

    /// Makes `t` runnable: on the calling processor if there is one, else on
    /// the injector; and wakes a sleeping processor if one sleeps.
    pub(crate) fn schedule(&self, t: Thread) {
        match processor::current() {
            Some(p) if std::ptr::eq(p.shared(), self) => {
                p.push_local(self, t);
                // With one processor, the caller's is the one that will run it.
                if self.processors.len() > 1 {
                    self.wake_one();
                }
            }
            // Off the runtime (a kernel thread, or another runtime's processor).
            _ => self.inject(t),
        }
    }

    /// Wakes one sleeping processor, if any sleeps.
    pub(crate) fn wake_one(&self) {
        // Pairs with the fence in `Processor::idle`.
        fence(SeqCst);
        if self.idle_count.load(Relaxed) == 0 {
            return;
        }
        let index = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let i = idle.pop();
            self.idle_count.store(idle.len(), Relaxed);
            i
        };
        if let Some(i) = index {
            self.processors[i].wake();
        }
    }

    pub(crate) fn add_idle(&self, index: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.push(index);
        self.idle_count.store(idle.len(), Relaxed);
    }

    pub(crate) fn remove_idle(&self, index: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|&i| i != index);
        self.idle_count.store(idle.len(), Relaxed);
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    pub(crate) fn spin_tries(&self) -> u32 {
        self.spin_tries
    }

    pub(crate) fn next_thread_id(&self) -> u64 {
        self.next_thread_id.fetch_add(1, Relaxed)
    }

    /// Drops every queued thread, after every processor has stopped.
    fn drain(&self) {
        for p in self.processors.iter() {
            // SAFETY: called by `run` after every processor's kernel thread
            // has left its loop and been joined, so nobody else touches them.
            unsafe { p.drain() };
        }
        self.injector
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.injected.store(0, Release);
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
            injector: Mutex::new(VecDeque::new()),
            injected: AtomicUsize::new(0),
            idle: Mutex::new(Vec::with_capacity(count)),
            idle_count: AtomicUsize::new(0),
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
