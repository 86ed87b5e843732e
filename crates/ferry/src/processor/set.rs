//! The processors of one runtime as they see each other: the set itself,
//! the injector, who spins and who sleeps, the event sources, and the
//! counts and settings a processor needs while it schedules. [`Set`] is the
//! processor's narrow view of its runtime; what lies above it (kernel
//! threads, the monitor, deadlock detection) is reached only through
//! [`Host`].
//!
//! This file owns the set and what its processors share; the idle
//! bookkeeping and the notifier's decisions in the handshake of
//! `processor`'s module docs are [`IdleSet`]'s (`idle_set`), and this file
//! only wakes the processor it names. It must not switch or park anyone
//! itself.
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `shutdown` | the runtime, once (Release) | every scheduler loop leaves |

use std::any::Any;
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use super::Processor;
use super::idle_set::IdleSet;
use crate::event::Sources;
use crate::event::polled::Polled;
use crate::event::stats::Counters;
use crate::sched::Injector;

/// What a processor asks of the runtime above it, at the slow ends of its
/// idle path. Called from the processor's own kernel thread.
pub(crate) trait Host: Send + Sync {
    /// Whether the runtime looks for deadlocks when the last processor
    /// goes to sleep.
    fn watches_deadlocks(&self) -> bool;

    /// The last processor to sleep, with nothing pending: a snapshot if
    /// every thread looks blocked for good, to be confirmed a grace later.
    fn quiet(&self) -> Option<u64>;

    /// Still asleep a grace after [`Host::quiet`] returned `seen`: reports
    /// the deadlock if nothing moved.
    fn confirm(&self, seen: u64);

    /// A sleeping processor woke (the monitor may have something to watch).
    fn woke(&self);

    /// The runtime itself, for the rooms that know its type.
    fn as_any(&self) -> &dyn Any;
}

/// The processors of one runtime and what they share; see the module docs.
pub(crate) struct Set {
    /// The processors, by index.
    pub(crate) processors: Box<[Processor]>,
    /// Threads made or woken off a processor, and ring overflow.
    pub(crate) injector: Injector,
    /// Who spins and who sleeps in `idle`.
    idle: IdleSet,
    shutdown: AtomicBool,
    /// The default stack size of a thread.
    pub(crate) stack_size: usize,
    spin_tries: u32,
    next_thread_id: AtomicU64,
    /// The event sources the processors ask in one place (`event`).
    pub(crate) sources: Sources,
    /// What the activations and events did, for `Handle::upcall_stats`.
    pub(crate) counters: Counters,
    /// Whether processors account each thread's run time.
    pub(crate) account_cpu: bool,
    /// The runtime this set belongs to (set once, before any processor
    /// runs: [`Set::set_host`]).
    host: UnsafeCell<Option<*const dyn Host>>,
    /// Memory outside the runtime that processors' mirror words point
    /// into, kept until the set (and so every processor) is gone
    /// ([`Set::keep`]).
    kept: Mutex<Vec<Box<dyn Any + Send + Sync>>>,
}

// SAFETY: `host` is written once, before the set is shared with any other
// kernel thread, and only read afterwards; everything else is `Sync`.
unsafe impl Sync for Set {}
// SAFETY: as above; the host pointer names the runtime that owns the set.
unsafe impl Send for Set {}

/// How a [`Set`] is made.
pub(crate) struct Settings {
    /// Processors the set holds (at most).
    pub(crate) processors: usize,
    /// The default stack size of a thread.
    pub(crate) stack_size: usize,
    /// Spins of an idle processor before it sleeps.
    pub(crate) spin_tries: u32,
    /// Whether processors account each thread's run time.
    pub(crate) account_cpu: bool,
    /// The scheduling policy every processor uses.
    pub(crate) policy: crate::sched::SchedPolicy,
}

impl Set {
    /// A set of `settings.processors` stopped processors, with no host yet.
    pub(crate) fn new(settings: &Settings) -> Set {
        Set {
            processors: Processor::build(settings.processors, settings.policy).into_boxed_slice(),
            injector: Injector::new(),
            idle: IdleSet::new(settings.processors),
            shutdown: AtomicBool::new(false),
            stack_size: settings.stack_size,
            spin_tries: settings.spin_tries,
            next_thread_id: AtomicU64::new(1),
            sources: Sources::new(),
            counters: Counters::new(),
            account_cpu: settings.account_cpu,
            host: UnsafeCell::new(None),
            kept: Mutex::new(Vec::new()),
        }
    }

    /// Keeps `memory` alive until the set drops, after its processors
    /// stopped: what a processor's mirror word may point into
    /// (`Processor::mirror_willing_to`).
    pub(crate) fn keep(&self, memory: Box<dyn Any + Send + Sync>) {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(memory);
    }

    /// Names the runtime the set belongs to, and tells each processor its
    /// set.
    ///
    /// # Safety
    /// Called once, before any kernel thread runs a processor of the set or
    /// reads its host, with a host that owns the set (so outlives it) and
    /// a set that does not move any more.
    pub(crate) unsafe fn set_host(&self, host: *const dyn Host) {
        // SAFETY: nobody reads the field yet (the contract).
        unsafe { *self.host.get() = Some(host) };
        for p in self.processors.iter() {
            // SAFETY: no kernel thread runs the processors yet, and the
            // set outlives them (it owns them) and stays where it is.
            unsafe { p.set_set(self) };
        }
    }

    /// The address of the runtime the set belongs to (the data pointer of
    /// its host), for the room that knows the runtime's type and made the
    /// set, to reach it without a virtual call (`upcall::Shared::of`).
    #[inline]
    pub(crate) fn host_addr(&self) -> *const () {
        // SAFETY: written once before the set was shared (`set_host`).
        unsafe { (*self.host.get()).map_or(std::ptr::null(), |h| h.cast::<()>()) }
    }

    /// The runtime the set belongs to.
    pub(crate) fn host(&self) -> &dyn Host {
        // SAFETY: written once before the set was shared (`set_host`), and
        // the host owns the set, so it outlives this borrow.
        unsafe { &*(*self.host.get()).expect("a running set has a host") }
    }

    /// Work was just published (on a processor's queues or the injector):
    /// wakes a sleeping processor unless one is spinning, which will find it.
    /// See `processor`'s module docs for the handshake.
    #[inline]
    pub(crate) fn notify_work(&self) {
        if self.idle.notify_work() {
            self.wake_sleeper();
        }
    }

    /// `n` threads of work were just published together by a processor
    /// (a batch, `Processor::make_ready_batch`): wakes up to `n` sleeping
    /// processors, as many as sleep, unless one is spinning (it will find
    /// the work and, finding it, wake the next: `spinning_exit_found_work`).
    /// Go's `injectglist` wakes the same way (`startIdle(n)`, bounded by
    /// the idle count).
    pub(crate) fn notify_work_n(&self, n: usize) {
        if n == 0 || !self.idle.notify_work() {
            return;
        }
        for _ in 0..n {
            if !self.wake_sleeper() {
                return;
            }
        }
    }

    /// [`Set::notify_work`], from a kernel thread that drives no
    /// processor.
    pub(crate) fn notify_work_anywhere(&self) {
        if self.idle.notify_work_anywhere() {
            self.wake_sleeper();
        }
    }

    /// Adds a polled entry (an `rpc` channel) to the runtime's sources.
    /// Every processor is woken to look again: one asleep since before the
    /// entry existed does not wait on its doorbell.
    pub(crate) fn add_polled(&self, entry: Arc<dyn Polled>) {
        self.sources.polled.register(entry);
        self.wake_all();
    }

    /// Drops a polled entry; every processor is woken to let go of it at
    /// its next look.
    pub(crate) fn remove_polled(&self, entry: &Arc<dyn Polled>) {
        self.sources.polled.unregister(entry);
        self.wake_all();
    }

    /// Wakes every processor that sleeps in `idle` (each looks at its
    /// sources again).
    fn wake_all(&self) {
        for p in self.processors.iter() {
            p.wake();
        }
    }

    /// Wakes one sleeping processor, if any sleeps; false if none did.
    #[cold]
    fn wake_sleeper(&self) -> bool {
        let Some(i) = self.idle.take_sleeper() else {
            return false;
        };
        self.counters.processor_wakes.fetch_add(1, Relaxed);
        self.processors[i].wake();
        true
    }

    /// The calling processor starts spinning for work in `idle`.
    pub(crate) fn spinning_enter(&self) {
        self.idle.spinning_enter();
    }

    /// The calling processor stops spinning, to sleep (it joined the
    /// sleepers first).
    pub(crate) fn spinning_exit(&self) {
        self.idle.spinning_exit();
    }

    /// A spinner found work: if it was the last spinner, another processor
    /// is woken to spin in its place, so that more work already queued does
    /// not wait for this one (Go's rule).
    pub(crate) fn spinning_exit_found_work(&self) {
        if self.idle.spinning_exit_found_work() {
            self.wake_sleeper();
        }
    }

    /// Processor `index` joins the sleepers.
    pub(crate) fn sleeper_enter(&self, index: usize) {
        self.idle.sleeper_enter(index);
    }

    /// How many processors sleep in `idle` (or are about to).
    /// Whether every processor of the set but the caller's sleeps in
    /// `idle` (or there is no other): nobody else is awake to look at the
    /// runtime's sources.
    pub(crate) fn others_asleep(&self) -> bool {
        let members = self
            .processors
            .iter()
            .filter(|p| matches!(p.membership.load(Relaxed), super::ACTIVE | super::STARTING))
            .count();
        self.sleepers() + 1 >= members
    }

    pub(crate) fn sleepers(&self) -> usize {
        self.idle.sleepers()
    }

    /// Processor `index` leaves `idle`.
    pub(crate) fn sleeper_exit(&self, index: usize) {
        self.idle.sleeper_exit(index);
    }

    /// Whether the runtime shut down: every scheduler loop leaves.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    /// Marks the runtime shut down (the caller then wakes every kernel
    /// thread that waits). `SeqCst`: the untimed waits of pooled spares and
    /// the monitor rely on it (`Activation::wait`, `Monitor::park`).
    pub(crate) fn mark_shut_down(&self) {
        self.shutdown.store(true, SeqCst);
    }

    pub(crate) fn spin_tries(&self) -> u32 {
        self.spin_tries
    }

    /// `n` fresh thread ids.
    pub(crate) fn next_thread_ids(&self, n: u64) -> Range<u64> {
        let start = self.next_thread_id.fetch_add(n, Relaxed);
        start..start + n
    }
}
