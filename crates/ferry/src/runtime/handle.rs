//! [`Handle`]: a running runtime, seen from its threads or from outside:
//! its processors and their changes, spawning onto it, and what its
//! scheduler activations did.
//!
//! This file owns only the public face; the work is `upcall::Shared`'s.

use std::io;
use std::sync::{Arc, Weak};

use crate::thread;
use crate::upcall::{Shared, UpcallStats};

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
    pub(super) shared: Arc<Shared>,
}

impl Handle {
    /// The runtime of the calling ferry thread.
    ///
    /// # Panics
    /// Outside a ferry thread.
    pub fn current() -> Handle {
        let shared = crate::upcall::enter()
            .and_then(|e| e.p.current_ref(&e.tok).map(|t| t.shared().arc()))
            .expect("ferry::Handle::current: not on a ferry thread");
        Handle { shared }
    }

    /// The runtime of the running ferry thread, or `None` on a kernel
    /// thread that runs none.
    pub fn try_current() -> Option<Handle> {
        let shared = crate::upcall::enter()
            .and_then(|e| e.p.current_ref(&e.tok).map(|t| t.shared().arc()))?;
        Some(Handle { shared })
    }

    /// How many processors the runtime holds (the set
    /// [`Handle::set_processors`] changes).
    pub fn processors(&self) -> usize {
        self.shared.active_processors()
    }

    /// The most processors the set may grow to ([`Builder::max_processors`](crate::Builder::max_processors)).
    pub fn max_processors(&self) -> usize {
        self.shared.processors.len()
    }

    /// Grows or shrinks the set of processors to `n` (clamped to `1..=`
    /// [`Handle::max_processors`]), as a processor allocator does.
    ///
    /// An added processor is driven by a spare kernel thread and its policy
    /// is told `ProcessorAdded`. A removed one stops at once: its running
    /// thread is preempted (after any spinlock it holds is released) and its
    /// queued threads go to the others; the others are told
    /// `ProcessorRemoved`. The call returns once the changes are under way;
    /// [`Handle::processors`] counts a processor until it has stopped.
    ///
    /// ```
    /// ferry::Runtime::builder()
    ///     .processors(1)
    ///     .max_processors(2)
    ///     .run(|| {
    ///         let rt = ferry::Handle::current();
    ///         rt.set_processors(2).unwrap();
    ///         assert_eq!(rt.processors(), 2);
    ///         rt.set_processors(1).unwrap();
    ///     })
    ///     .unwrap();
    /// ```
    ///
    /// # Errors
    /// If no kernel thread can be made to drive an added processor.
    pub fn set_processors(&self, n: usize) -> io::Result<()> {
        self.shared.set_processors(n)
    }

    /// Names the core processor `processor` runs on: its kernel thread (and
    /// every spare that later drives it) is pinned there from its next pass
    /// through its scheduler loop.
    ///
    /// # Errors
    /// `InvalidInput` if there is no such processor or no such core in the
    /// process's affinity mask.
    pub fn processor_on(&self, processor: usize, core: usize) -> io::Result<()> {
        let Some(p) = self.shared.processors.get(processor) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ferry: no processor {processor}"),
            ));
        };
        // The process's mask as the runtime first saw it: the calling
        // kernel thread may be a processor pinned to one core by now.
        let allowed = crate::processor::allowed_cpus();
        let in_mask = if allowed.is_empty() {
            let mine = rustix::thread::sched_getaffinity(None)?;
            core < rustix::thread::CpuSet::MAX_CPU && mine.is_set(core)
        } else {
            allowed.contains(&core)
        };
        if !in_mask {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ferry: core {core} is not in the process's affinity mask"),
            ));
        }
        p.set_core(core);
        p.wake();
        Ok(())
    }

    /// Starts a user-level thread on this runtime, from any thread (a ferry
    /// thread of another runtime, or a plain kernel thread).
    ///
    /// # Errors
    /// [`io::ErrorKind::BrokenPipe`] once the runtime has shut down (its
    /// first thread finished, or a deadlock ended it): the thread would
    /// never run. [`io::ErrorKind::OutOfMemory`] if the allocator refuses
    /// the thread's block, or the error of mapping its stack. A spawn that
    /// returns `Ok` runs, or if the runtime ends before it could, its join
    /// returns an error saying so.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<thread::JoinHandle<T>> {
        thread::Builder::new().spawn_in(&self.shared, f)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A handle that does not keep the runtime alive.
    pub(crate) fn downgrade(&self) -> WeakHandle {
        WeakHandle(Arc::downgrade(&self.shared))
    }

    /// How many kernel threads the runtime runs now (processor drivers,
    /// spares, the one that watches, and threads away in blocking calls),
    /// and the bound
    /// ([`Builder::max_kernel_threads`](crate::Builder::max_kernel_threads)).
    pub fn kernel_threads(&self) -> (usize, usize) {
        (
            self.shared.activations.count(),
            self.shared.activations.max(),
        )
    }

    /// What the scheduler activations did so far: events delivered to the
    /// scheduling policy and their latencies.
    pub fn upcall_stats(&self) -> UpcallStats {
        self.shared.counters.snapshot()
    }

    /// How many timers are armed: threads in [`sleep`](crate::sleep) and
    /// timed waits (an rpc call's deadline) whose timer has neither fired
    /// nor been taken out. A snapshot.
    pub fn armed_timers(&self) -> usize {
        self.shared.sources.timers.armed()
    }

    /// How this runtime's [`crate::fs`] runs file operations: through its
    /// io_uring, or through the blocking handoff and why. Asking makes the
    /// ring if no file operation has yet (the answer does not change
    /// afterwards).
    pub fn fs_backend(&self) -> crate::event::ring::Backend {
        let sources = &self.shared.sources;
        sources.ring.backend(&sources.readiness)
    }

    /// The counts of this runtime's io_uring for [`crate::fs`]
    /// (operations completed, in flight, records alive); all zero without
    /// a ring.
    pub fn fs_ring_stats(&self) -> crate::event::ring::RingStats {
        self.shared.sources.ring.stats()
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

/// A [`Handle`] that does not keep its runtime alive (for a kernel
/// thread that serves the runtime and must end with it).
#[derive(Clone)]
pub(crate) struct WeakHandle(Weak<Shared>);

impl WeakHandle {
    /// The handle, while the runtime lives.
    pub(crate) fn upgrade(&self) -> Option<Handle> {
        self.0.upgrade().map(|shared| Handle { shared })
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
