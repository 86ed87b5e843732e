//! Activations: the kernel threads that drive processors. Each one runs a
//! processor's scheduler loop until the processor is taken from it (its
//! thread blocked in the kernel) or stopped, then waits in the runtime's
//! pool of spares until it is handed another processor, or the monitor's
//! watch (one spare keeps it, see `monitor`).
//!
//! This room owns the driver protocol of a processor, the runtime-critical
//! count of each kernel thread and the pool; it must not decide what a
//! processor runs (the policy does) nor block anywhere but in the pool wait
//! (and the watch's timed sleeps).
//!
//! # The driver word (`Processor::driver`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | the runtime at start; a driver stopping the processor (swap from `A` or `A\|PROBING`) | nobody drives it: not started, or removed |
//! | `A` | a spare or starter (CAS from `0` or a lent value); `A` reclaiming (CAS from `A\|LENT` or `A\|PROBING`); the monitor putting it back; `A` whose stop was called off | activation `A` drives it; only `A`'s kernel thread touches the processor's owner part |
//! | `A\|LENT` | `A` entering an announced blocking call (a store, over `A` or `A\|PROBING`) | `A` is off in a kernel call: `A` may reclaim it, a spare may take it |
//! | `A\|PROBING` | the monitor, having found `A` asleep in the kernel | being checked: nobody may take it; `A` still drives it (runtime code of `A`'s, whose count is above zero, goes on as under `A`) and may take it back |
//! | `A\|LENT\|UNANNOUNCED` | the monitor, from `A\|PROBING`, having seen `A`'s count at zero | as `A\|LENT`; a spare that takes it marks `A` an orphan |
//!
//! Whoever moves the word to its own activation (by CAS) owns the
//! processor's owner part from then on. The monitor's `A -> A|PROBING`
//! races with `A` entering the runtime; an asymmetric
//! Dekker handshake settles it: `A` raises its `critical` count (a plain
//! store) and then loads the word; the monitor swaps the word, issues
//! `heavy_fence` and then loads `critical`. If it sees a count it puts the
//! word back, else it confirms the lend; if `A` sees a flag it takes the
//! word back. Only a confirmed (`LENT`) word can be taken by a spare. So
//! `A`'s own code inside the runtime (count above zero) may find the word
//! at `A|PROBING` for a moment, which still means `A`: it never finds a
//! `LENT` it did not set.
//!
//! # Handing a lent processor over
//!
//! A spare must take a lent processor only once its lender really sleeps
//! in the kernel: taken from a call that returns at once, the lender finds
//! it gone and must hand its thread back, and on the same core that
//! round trip waits for the kernel to time-slice two kernel threads (a
//! millisecond, not a microsecond). Linux cannot tell us when a thread
//! blocks, but its scheduler can act on it: a `SCHED_BATCH` thread woken
//! on a core never preempts the thread running there, so it runs there
//! when that core has nothing else to run, which is when the lender
//! sleeps (or at a scheduler tick).
//!
//! So the lender of a processor with work waiting asks for a *patient*
//! takeover (`Assignment::Take(p, true)`): the hander picks a pooled spare,
//! makes sure it is in `SCHED_BATCH` and on the lender's core
//! (`pin_remotely`; the lender's CPU is `Processor::lent_cpu` when the
//! processor is not pinned) and wakes it; a short call is back and has
//! reclaimed the word before the spare runs, which then finds no `LENT` and
//! goes back to the pool. The
//! monitor's takeovers (a lend that outlasted the handoff wait, a thread
//! seen asleep) are *urgent*: the activation that keeps the watch takes
//! the processor itself, at once (or, when nobody could watch after it, a
//! spare in the normal class does). A patient spare that still has not
//! come a tick later (other processes hold the core) is hurried back into
//! the normal class.
//!
//! A processor with a stand-in (`stand_in`) skips the wakeup: the
//! stand-in waits runnable on the lender's core in `SCHED_IDLE` and holds
//! `standby` up, so the lend wakes nobody and the kernel runs the stand-in
//! the moment the lender sleeps.
//!
//! The class changes are system calls of several microseconds each, kept
//! off the way from the lend to `Blocked`: an activation puts itself in
//! `SCHED_BATCH` before it enters the pool (so the hander usually has
//! nothing to change and only wakes it), and a patient spare that took a
//! processor goes back to the normal class only once it has delivered
//! `Blocked`, before it runs any thread.
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `Processor::standby` | raised by a hander (CAS `0 -> ON_WAY`: `hand_lent`, the monitor providing a stand-in or claiming for the watcher, which raises it to its own word) or a stand-in attaching (CAS `0 -> S`); set to the picked spare's word by the hander, before it wakes or starts it; lowered only by its holder (CAS from its own word to `0`, SeqCst, before it loads the driver word), or by a hander that started nobody | `0`: nobody will take a lend, the lender hands it to a spare. Otherwise someone will look at the driver word after any lend: a lend wakes nobody else. The lender stores the driver word (SeqCst) before its CAS: either the holder sees `LENT` or the lender sees `0` and wakes another. The word names the holder, so a taker that was not on its way (a stand-in taking a lend a spare was woken for, the watcher) never lowers another's flag, and the monitor knows whom to hurry |
//! | `Activation::class` | the activation itself (`Batch` before it enters the pool, the stand-in class while it stands in, `Normal` once it drives a processor); a hander while it sleeps in the pool; the monitor (`Normal`, `hurry`) while it waits to arrive | its kernel thread's scheduling class (mirrors the kernel's setting). A `hurry` that read `Batch` just before its spare arrived may land after that spare is back in the pool and in `SCHED_BATCH` again, leaving the mirror `Normal` over a batch thread: until that spare next enters the pool, an urgent handoff to it waits for a tick and its wakeups do not preempt (time, never correctness). A stand-in compares the mirror with its class at every pass, so a hurried one goes back |
//! | `Activation::pinned` | the activation itself; a hander while it sleeps in the pool | the CPU its kernel thread is pinned to, or `NO_CORE` |
//!
//! # The critical count (`Activation::critical`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | the kernel thread itself, leaving the runtime | it runs a ferry thread's own code: it may be preempted, and its processor may be taken while it sleeps in the kernel |
//! | `n > 0` | the kernel thread itself, entering the runtime or taking a `SpinLock` | it runs runtime code or holds `n` spinlocks: a preemption waits (`chained`), the processor stays |
//!
//! A user-level thread switches only with a count of exactly one, which the
//! context it switches to inherits and gives back when it leaves the
//! runtime; the scheduler loop always runs with one. So the count is a
//! property of the kernel thread, read fresh from its thread-local each
//! time (never cached across a switch).
//!
//! At zero the code may also be moved by a preemption (its handler
//! switches away), between any two instructions: code entering from zero
//! may have read the activation of the kernel thread it ran on a moment
//! ago. So the raise from zero is checked against the kernel thread it
//! runs on, in one block the handler does not interrupt (`raise`), and
//! leaving to zero touches the activation only before the store.

use std::cell::{Cell, UnsafeCell};
use std::fs::File;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicUsize, compiler_fence};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::Posted;
use super::Words;
use crate::arch::Context;
use crate::header::{Header, Thread};
use crate::processor::{Driver, NO_CORE, Processor, RunEnd, STOPPED, STOPPING};
use crate::sys::{self, SchedClass};
use crate::upcall::Shared;

use super::per_processor::PerProcessor;
pub(crate) use super::per_processor::{FLAGS, LENT, ON_WAY, PROBING, UNANNOUNCED};

/// `Activation::pinned` before the activation first pins itself: a new
/// kernel thread inherits its creator's CPU mask, whatever it is, so the
/// first pin always asks the kernel.
const PIN_UNKNOWN: usize = usize::MAX - 1;

thread_local! {
    /// The activation this kernel thread is, or null.
    static LOCAL: Cell<*const Activation> = const { Cell::new(ptr::null()) };
}

/// The calling kernel thread's activation, if it is one. Never inlined, so
/// that no caller keeps a thread-local address across a switch.
#[inline(never)]
pub(crate) fn local() -> Option<&'static Activation> {
    let a = LOCAL.with(Cell::get);
    // SAFETY: `LOCAL` is set by `Activation::main` to an activation kept
    // alive by the runtime's list until after that kernel thread's `main`
    // returned and cleared it.
    unsafe { a.as_ref() }
}

/// Forgets the calling kernel thread's activation without touching it: in
/// the child of a `fork`, where the runtime it belonged to has no other
/// kernel threads left.
///
/// # Safety
/// Only in a fork child, before anything else of ferry's runs there.
pub(crate) unsafe fn forget_local() {
    LOCAL.with(|l| l.set(ptr::null()));
}

/// What to do with a processor handed to a spare.
#[derive(Clone, Copy)]
pub(crate) enum Assignment {
    /// Take over a lent processor (its driver is off in the kernel). A
    /// *patient* takeover (asked for by the lender itself, which may not
    /// block at all) waits until the lender's core has nothing else to run;
    /// the monitor's (the lender was seen asleep, or outlasted the handoff
    /// wait) takes at once.
    Take(&'static Processor, bool),
    /// Start a processor nobody drives (a new or re-added one).
    Start(&'static Processor),
    /// Keep the runtime's watch (`monitor::watch`).
    Watch,
    /// Stand in for a processor: wait on its core in the lowest class and
    /// take it over when its driver sleeps (`stand_in`); `true` if the
    /// monitor provided it (the processor's stand-in word is `COMING`).
    StandIn(&'static Processor, bool),
}

/// A kernel thread of the runtime: the paper's scheduler activation, which
/// drives one processor at a time.
pub(crate) struct Activation {
    /// Runtime-critical depth; see the module docs.
    pub(crate) critical: AtomicU32,
    /// A preemption arrived while `critical` was above zero: the kernel
    /// thread performs it when the count returns to zero.
    pub(crate) chained: AtomicBool,
    /// Its processor was taken while it slept in the kernel outside the
    /// runtime; set by the taker, cleared by the kernel thread when it
    /// notices. The monitor pushes an orphan that runs again off its thread.
    pub(crate) orphaned: AtomicBool,
    /// Between taking the processor from `A|LENT` and posting `Unblocked`:
    /// a ferry thread's code runs here on no processor (or blocks).
    pub(crate) away: AtomicBool,
    /// The announced blocking call its kernel thread is in, and whether it
    /// is being aborted: the call word of `blocking`'s module docs.
    pub(crate) call: AtomicUsize,
    /// The processor it drives (its own kernel thread only).
    processor: Cell<*const Processor>,
    /// That processor's activation words (its own kernel thread only; set
    /// with `processor` and meaningful only while `processor` is set).
    words: Cell<*const PerProcessor>,
    /// The header of the thread running on this kernel thread (its own
    /// kernel thread only; set by its processor on each switch).
    running: Cell<*mut Header>,
    /// The thread it must give back after its processor was taken.
    lost: Cell<Option<(Thread, Instant)>>,
    /// It kept the watch and is taking a processor itself: it hands the
    /// watch on once `Blocked` is delivered (own kernel thread only).
    hands_watch_on: Cell<bool>,
    /// It stood in for the processor it is about to take (own kernel
    /// thread only; for `UpcallStats::stand_in_takeovers`).
    stood_in: Cell<bool>,
    /// Its scheduler loop, suspended while a thread runs.
    pub(crate) sched: UnsafeCell<Context>,
    /// An assignment (`Assignment` encoded) left while it waits in the pool.
    assigned: AtomicUsize,
    /// Futex word of the pool wait.
    wake: AtomicU32,
    /// Kernel thread id (for signals).
    pub(crate) tid: AtomicU32,
    /// Its kernel thread's thread pointer (`sys::thread_pointer`), set
    /// before `LOCAL` names it: how `raise` tells that the code raising the
    /// count still runs on this kernel thread.
    home: AtomicUsize,
    /// Its `/proc` stat file, for the monitor.
    stat: std::sync::OnceLock<File>,
    /// The CPU it is pinned to, `NO_CORE` for every allowed CPU, or
    /// `PIN_UNKNOWN` until it first pins itself (a new kernel thread
    /// inherits its creator's mask): written by its own kernel thread, or
    /// by a hander while it sleeps in the pool (before `assign`, whose
    /// store publishes it).
    pinned: AtomicUsize,
    /// Its kernel thread's scheduling class (a `SchedClass`, mirroring the
    /// kernel's setting): written by its own kernel thread (entering the
    /// pool, taking a processor, standing in), by a hander while it sleeps
    /// in the pool, or by the monitor hurrying it (see the module docs).
    class: AtomicU8,
}

// SAFETY: the `Cell`s and the `UnsafeCell` are touched only by the
// activation's own kernel thread (see each field); the rest is atomic or
// written once.
unsafe impl Sync for Activation {}
// SAFETY: as above; an `Activation` is built and then owned by an `Arc`.
unsafe impl Send for Activation {}

impl Activation {
    pub(crate) fn new() -> Activation {
        Activation {
            critical: AtomicU32::new(1),
            chained: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
            away: AtomicBool::new(false),
            call: AtomicUsize::new(0),
            processor: Cell::new(ptr::null()),
            words: Cell::new(ptr::null()),
            running: Cell::new(ptr::null_mut()),
            lost: Cell::new(None),
            hands_watch_on: Cell::new(false),
            stood_in: Cell::new(false),
            sched: UnsafeCell::new(Context::empty()),
            assigned: AtomicUsize::new(0),
            wake: AtomicU32::new(0),
            tid: AtomicU32::new(0),
            home: AtomicUsize::new(0),
            stat: std::sync::OnceLock::new(),
            pinned: AtomicUsize::new(PIN_UNKNOWN),
            class: AtomicU8::new(SchedClass::Normal as u8),
        }
    }

    /// This activation's address, as the driver word holds it.
    pub(crate) fn word(&self) -> usize {
        ptr::from_ref(self) as usize
    }

    /// The activation a driver word names, if any.
    ///
    /// # Safety
    /// `word` was read from a driver word of a live runtime: its activation
    /// lives as long as the runtime.
    pub(crate) unsafe fn from_word(word: usize) -> Option<&'static Activation> {
        // SAFETY: the caller's contract; activations are never freed before
        // their runtime.
        unsafe { ((word & !FLAGS) as *const Activation).as_ref() }
    }

    /// What the kernel says this activation's kernel thread is doing.
    pub(crate) fn task_state(&self) -> sys::TaskState {
        match self.stat.get() {
            Some(f) => sys::task_state(f),
            None => sys::TaskState::Other,
        }
    }

    /// The processor this kernel thread drives, if any (own thread only).
    pub(crate) fn processor(&self) -> Option<&'static Processor> {
        // SAFETY: processors live in the runtime's `Shared`, which outlives
        // every activation's drive loop.
        unsafe { self.processor.get().as_ref() }
    }

    /// Makes the calling kernel thread this activation and runs it: drives
    /// `first` if given, then whatever the pool hands it, until the runtime
    /// shuts down.
    pub(crate) fn main(self: &Arc<Self>, shared: &Arc<Shared>, mut next: Option<Assignment>) {
        self.home.store(sys::thread_pointer(), Relaxed);
        LOCAL.with(|l| l.set(Arc::as_ptr(self)));
        self.tid.store(sys::gettid() as u32, Relaxed);
        // Its timed sleeps (the watch's ticks, a stand-in's waits) end
        // within a microsecond of their deadline.
        sys::set_timer_slack(1_000);
        if let Some(f) = sys::open_own_stat() {
            let _ = self.stat.set(f);
        }
        loop {
            let assignment = match next.take() {
                Some(a) => a,
                None => match self.wait(shared) {
                    Some(a) => a,
                    None => break,
                },
            };
            let assignment = match assignment {
                Assignment::Watch => {
                    // (`watch` pins it off the processors' cores.)
                    self.set_class(SchedClass::Normal);
                    match super::monitor::watch(shared) {
                        Some(p) => {
                            crate::probe_mark!(19);
                            self.hands_watch_on.set(true);
                            Some(Assignment::Take(p, false))
                        }
                        None => {
                            restore_thread_name();
                            break;
                        }
                    }
                }
                // A stand-in that held the `standby` word leaves through
                // `take`: it may find the processor lent (see `stand_in`).
                Assignment::StandIn(p, provided) => {
                    let held = super::stand_in::stand_in(self, shared, p, provided);
                    self.stood_in.set(held);
                    held.then_some(Assignment::Take(p, true))
                }
                other => Some(other),
            };
            if let Some(p) = assignment.and_then(|a| self.take(shared, a)) {
                let end = self.drive(shared, p);
                if let Some((t, at)) = self.lost.take() {
                    // Our thread is switched out now: hand it back. Posted
                    // before `away` is cleared, so that the deadlock check,
                    // which sees neither an away activation nor a pending
                    // upcall only once both are done, never sees the
                    // thread nowhere (the post may wait for memory).
                    shared.sources.upcalls.post(Posted::Unblocked(t), at);
                    self.away.store(false, Release);
                    shared.notify_work_anywhere();
                }
                if end == RunEnd::ShutDown {
                    break;
                }
                if end == RunEnd::Lost && shared.stand_ins && !shared.is_shut_down() {
                    // We are on the core of the processor that was taken
                    // from us, and it may have lost its stand-in to the
                    // takeover: stand in for it (unless the watch is
                    // vacant, which comes first).
                    next = Some(if shared.monitor.claim_vacancy() {
                        Assignment::Watch
                    } else {
                        Assignment::StandIn(p, false)
                    });
                    continue;
                }
            } else if self.hands_watch_on.replace(false) {
                // Reclaimed before we came: watch on.
                next = Some(Assignment::Watch);
                continue;
            }
            if shared.is_shut_down() {
                break;
            }
            // Ready for a patient handoff before anyone can pick us, so
            // that the hander need not move us (a system call on the
            // lender's way into its call).
            self.set_class(SchedClass::Batch);
            if !shared.activations.to_pool(shared, Arc::clone(self)) {
                // The watch was vacant: keep it instead.
                next = Some(Assignment::Watch);
            }
        }
        // The kernel thread ends: a late signal (thread control on a thread
        // kept past the run) must not reach whichever thread reuses its id.
        self.tid.store(0, Relaxed);
        LOCAL.with(|l| l.set(ptr::null()));
    }

    /// Waits in the pool for an assignment; `None` at shutdown.
    fn wait(&self, shared: &Shared) -> Option<Assignment> {
        loop {
            self.prepare_sleep();
            let a = self.assigned.swap(0, SeqCst);
            if a != 0 {
                return Some(decode(a));
            }
            if shared.is_shut_down() {
                return None;
            }
            // Bounded, so that a spare made while the runtime shuts down
            // (which `wake_pool` may miss) still sees the flag. (The `wake`
            // word was armed at the top of the loop.)
            self.sleep(std::time::Duration::from_millis(50));
            crate::probe_mark!(8);
        }
    }

    /// Hands this (pooled) activation an assignment and wakes it.
    pub(crate) fn assign(&self, a: Assignment) {
        self.assigned.store(encode(a), SeqCst);
        self.wake_up();
    }

    /// Arms the `wake` word before a [`sleep`](Self::sleep) that
    /// [`wake_up`](Self::wake_up) ends (the pool wait's, a stand-in's; own
    /// thread only).
    pub(super) fn prepare_sleep(&self) {
        self.wake.store(0, SeqCst);
    }

    /// Sleeps until [`wake_up`](Self::wake_up) (since the last
    /// [`prepare_sleep`](Self::prepare_sleep)) or for `timeout`.
    pub(super) fn sleep(&self, timeout: std::time::Duration) {
        crate::sys::futex_wait(&self.wake, 0, Some(timeout));
    }

    /// Wakes it from the pool wait (for an assignment, or shutdown), or
    /// from a stand-in's sleep.
    pub(crate) fn wake_up(&self) {
        self.wake.store(1, SeqCst);
        crate::sys::futex_wake_one(&self.wake);
    }

    /// Makes this activation the driver of the assigned processor, if it
    /// still needs one, and delivers the event the takeover means.
    fn take(&self, shared: &Shared, a: Assignment) -> Option<&'static Processor> {
        match a {
            Assignment::Take(p, patient) => {
                crate::probe_mark!(9);
                // Patient: the hander put us in the wait class on the
                // lender's core, so that we run there only once the lender
                // sleeps (or at a scheduler tick, or when the monitor
                // hurries us). Else take at once.
                if !patient {
                    self.set_class(SchedClass::Normal);
                }
                let watcher = self.hands_watch_on.get();
                let lent_cpu = p.upcall().lent_cpu.load(Relaxed);
                let want = p.core(shared).or((lent_cpu != NO_CORE).then_some(lent_cpu));
                // A spare runs where the processor lives before it looks;
                // the watcher takes first and may settle it where it is.
                if want.is_some() && !watcher {
                    self.pin_to(want);
                }
                // Off standby before looking, if we were on it (SeqCst, the
                // pair of `lend`'s driver store and `hand_lent`'s CAS): a
                // lend we do not see finds the word down and wakes another
                // spare. A taker that was not on standby leaves the word to
                // its holder, who looks after us.
                let stood_in = self.stood_in.replace(false);
                // (`None`: reclaimed, or stopped, before we came.)
                let d = p.upcall().take_lent(self.word())?;
                if stood_in {
                    shared.counters.by_stand_in.fetch_add(1, Relaxed);
                }
                crate::probe_mark!(10);
                if watcher {
                    // Ours now: run it here, if no core is named for it and
                    // no other processor lives here, rather than wake the
                    // blocked driver's core, which has just gone idle
                    // (`begin` pins for its home).
                    p.settle_where_taken(shared);
                }
                // SAFETY: `d` was the driver word of a live processor.
                if let Some(previous) = unsafe { Activation::from_word(d) }
                    && d & UNANNOUNCED != 0
                {
                    previous.orphaned.store(true, Release);
                    shared.counters.unannounced.fetch_add(1, Relaxed);
                }
                crate::probe_mark!(12);
                self.begin(shared, p);
                super::handover::deliver_blocked(p, shared);
                // Back in the normal class only now that the policy knows
                // (the system call is off the way from the lend to
                // `Blocked`), and before any thread runs here.
                self.set_class(SchedClass::Normal);
                if self.hands_watch_on.replace(false) {
                    shared.activations.hand_watch(&shared.arc());
                    crate::probe_mark!(21);
                    restore_thread_name();
                    crate::probe_mark!(22);
                }
                crate::probe_mark!(11);
                Some(p)
            }
            Assignment::Start(p) => {
                self.set_class(SchedClass::Normal);
                if !p.upcall().start(self.word()) {
                    return None;
                }
                self.begin(shared, p);
                super::handover::deliver_added(p, shared);
                Some(p)
            }
            Assignment::Watch | Assignment::StandIn(..) => {
                unreachable!("the watch and standing in are kept in `main`")
            }
        }
    }

    /// Binds this kernel thread to `p` (which it now drives).
    fn begin(&self, shared: &Shared, p: &'static Processor) {
        debug_assert_eq!(
            self.critical.load(Relaxed),
            1,
            "an activation starts at one level"
        );
        self.processor.set(p);
        self.words.set(shared.words(p));
        self.critical.store(1, Relaxed);
        self.pin_for(shared, p);
        crate::probe_mark!(20);
        p.bind(self.sched.get(), &self.running);
    }

    /// Names this activation, picked by a hander that raised `p`'s
    /// `standby` word, as its holder (before it is woken or started).
    fn put_on_standby(&self, p: &Processor) {
        p.upcall().name_standby(self.word());
    }

    /// Pins this kernel thread to the core `p` runs on, if it changed.
    pub(crate) fn pin_for(&self, shared: &Shared, p: &Processor) {
        self.pin_to(p.core(shared));
    }

    /// Puts this kernel thread in `class` (own thread only; a system call
    /// only when it changes): `Batch` is the spares' wait class, the
    /// stand-in class is `stand_in::class()`.
    pub(super) fn set_class(&self, class: SchedClass) {
        if self.class.load(Relaxed) != class as u8 && sys::set_class(0, class) {
            self.class.store(class as u8, Relaxed);
        }
    }

    /// [`set_class`](Self::set_class) from a hander's kernel thread, while
    /// this activation sleeps in the pool: its wakeup must already be in
    /// the right class (a patient spare must not preempt the lender; an
    /// urgent one must; a stand-in must run only on an idle core).
    ///
    /// Also used by the monitor on a spare that is awake ([`hurry`](Self::hurry)):
    /// the only race is with that spare setting a class itself.
    fn set_class_remotely(&self, class: SchedClass) {
        let tid = self.tid.load(Relaxed);
        if tid != 0 && self.class.load(Relaxed) != class as u8 && sys::set_class(tid as i32, class)
        {
            self.class.store(class as u8, Relaxed);
        }
    }

    /// Pins this kernel thread to `want` (`None`: every allowed CPU), if it
    /// changed.
    pub(super) fn pin_to(&self, want: Option<usize>) {
        let want = want.unwrap_or(NO_CORE);
        if self.pinned.load(Relaxed) != want {
            crate::processor::pin(None, want);
            self.pinned.store(want, Relaxed);
        }
    }

    /// Pins this kernel thread to `cpus` (every allowed CPU if empty; own
    /// thread only): the watcher, keeping off the processors' cores.
    pub(super) fn pin_to_cpus(&self, cpus: &[usize]) {
        crate::processor::pin_to_cpus(cpus);
        self.pinned.store(PIN_UNKNOWN, Relaxed);
    }

    /// Hurries a patient spare that waits for its lender's core: back in
    /// the normal class, it competes for the core like any thread (the
    /// monitor's call, when a lend outlasts a tick).
    pub(crate) fn hurry(&self) {
        self.set_class_remotely(SchedClass::Normal);
    }

    /// Pins this pooled (sleeping) activation to `cpu` from the hander's
    /// kernel thread, before `assign` wakes it: in the wait class it might
    /// not get to run where it is pinned now to move itself.
    fn pin_remotely(&self, cpu: usize) {
        if self.pinned.load(Relaxed) != cpu {
            let tid = self.tid.load(Relaxed);
            if tid != 0 {
                crate::processor::pin(Some(tid as i32), cpu);
                self.pinned.store(cpu, Relaxed);
            }
        }
    }

    /// Runs `p`'s scheduler loop until the processor is lost, stopped or the
    /// runtime shuts down.
    fn drive(&self, shared: &Shared, p: &'static Processor) -> RunEnd {
        let end = p.run(&Driving { act: self, shared });
        self.processor.set(ptr::null());
        end
    }

    /// The running thread found its processor taken (it was away in the
    /// kernel): it leaves this kernel thread for the scheduler loop's
    /// frame, which hands it back with `Unblocked`. Returns the processor it
    /// resumes on, with its critical count held.
    #[cold]
    #[inline(never)]
    pub(crate) fn give_back_thread(&self) -> &'static Processor {
        self.orphaned.store(false, Relaxed);
        self.processor.set(ptr::null());
        let header = self.running.replace(ptr::null_mut());
        // SAFETY: `header` is the running thread's own block; the taker of
        // the processor forgot its handle on it (`deliver_blocked`), whose
        // reference this one now carries.
        let me = unsafe { Thread::from_raw(header) };
        let (from, my_header) = (me.context_ptr(), me.as_ptr());
        self.lost.set(Some((me, Instant::now())));
        // SAFETY: `from` is our own context slot, kept alive by the handle
        // in `lost` until someone resumes it; `sched` is this activation's
        // scheduler loop, suspended in `Processor::run` since it switched to
        // a thread, and resumed only here.
        crate::processor::switch_out_to(from, self.sched.get(), my_header)
    }
}

/// Gives the calling kernel thread back the name it was made with (a
/// watcher renames itself while it watches).
fn restore_thread_name() {
    if let Some(name) = std::thread::current().name() {
        sys::set_thread_name(name);
    }
}

/// Marks the calling kernel thread as in runtime-critical code (or holding
/// a spinlock) until the returned guard drops; `None` on a kernel thread
/// that is no activation (nothing there can be preempted or taken).
///
/// The activation is returned for the caller's immediate use only: after a
/// switch the code may run on another one.
///
/// Entering from the thread's own code (a count of zero), it first makes
/// sure the kernel thread still drives its processor: a lent one is taken
/// back, and if it was taken (the thread slept in the kernel), the thread
/// is handed back and this returns once it runs again, on whichever kernel
/// thread. Nested entries need no check: nobody takes a processor from a
/// kernel thread whose count is above zero (the handshake in the module
/// docs), so code inside the runtime or under a spinlock never switches
/// for this reason.
#[inline(never)]
pub(crate) fn critical_enter() -> Option<(Critical, &'static Activation)> {
    // Entering from a count of zero, this code may be preempted and moved
    // to another kernel thread until the count is raised, so the activation
    // `raise` read may name the kernel thread it ran on a moment ago;
    // `raise` checks, and then we ask again. Nested, the count holds it
    // here.
    let (a, c) = loop {
        let (a, c) = raise();
        if a.is_null() {
            return None;
        }
        if c != MOVED {
            // SAFETY: a non-null `LOCAL` is an activation kept alive by the
            // runtime's list while its kernel thread runs (see `local`).
            break (unsafe { &*a }, c);
        }
    };
    // Pairs with the monitor's `heavy_fence` (see the module docs).
    ferry_queue::wait::light_fence();
    let critical = Critical {
        _not_send: PhantomData,
    };
    if c == 0
        && let Some(p) = a.processor()
    {
        // (The words of the processor it drives, kept beside it: one load,
        // as the processor's own field would be.)
        // SAFETY: set with `processor` in `begin`, to the words of that
        // processor, which live as long as its runtime.
        let d = unsafe { &*a.words.get() }.driver.load(Acquire);
        if d != a.word() {
            return back_from_call(critical, a, p, d);
        }
    }
    Some((critical, a))
}

/// [`critical_enter`]'s rare branch, out of line (inlined, it made every
/// entry save more registers): back from a blocking call (or entering from
/// inside one) to processor `p`, whose driver word is `d`: the call is over.
#[cold]
#[inline(never)]
fn back_from_call(
    critical: Critical,
    a: &'static Activation,
    p: &'static Processor,
    d: usize,
) -> Option<(Critical, &'static Activation)> {
    super::blocking::leave_call(a);
    super::handover::reclaim_or_give_back(p, a, d);
    // Possibly resumed on another kernel thread: ask again.
    Some((critical, local()?))
}

/// What [`raise`] returns for a count it could not raise: the calling code
/// was moved off the kernel thread whose activation it read.
const MOVED: u32 = u32::MAX;

/// Reads the calling kernel thread's activation (null if it is none) and
/// raises its count by one, returning it with the count before; or the
/// count [`MOVED`] if the code no longer runs on the activation's kernel
/// thread (it was moved after the read, and that count belongs to whatever
/// runs there now). The check and the store are one `asm!` block
/// (`arch::raise_on_home`, always inlined) in a function of its own, whose code the preemption handler leaves alone
/// (`preempt::in_count_update`): no move can come between them, whatever
/// the compiler makes of the code around it. The read of `LOCAL` is in the
/// same function (one call per entry instead of two); where the compiler
/// keeps it out of line (a debug build), a move after it is what the check
/// catches.
#[inline(never)]
fn raise() -> (*const Activation, u32) {
    let a = LOCAL.with(Cell::get);
    // SAFETY: as in `local`: a non-null `LOCAL` is a live activation.
    let Some(act) = (unsafe { a.as_ref() }) else {
        return (a, 0);
    };
    // SAFETY: both pointers are to fields of a live activation (activations
    // outlive their runtime's threads); `critical` is only ever written from
    // the kernel thread it belongs to, whose thread pointer `home` holds,
    // with plain relaxed stores (`critical_exit`).
    let before = unsafe { crate::arch::raise_on_home(act.home.as_ptr(), act.critical.as_ptr()) };
    (a, before)
}

/// Where `raise` starts (for the preemption handler).
pub(crate) fn raise_address() -> usize {
    raise as *const () as usize
}

/// The processor the calling kernel thread drives, without entering the
/// runtime: for a context that was just switched to (it runs with the
/// level the switch handed over).
pub(crate) fn resumed_processor() -> Option<&'static Processor> {
    local()?.processor()
}

/// The calling kernel thread's critical count (0 off the runtime). Exact
/// only while the caller holds a level: at zero, a preemption may move it
/// between reading its activation and the count.
pub(crate) fn critical_depth() -> u32 {
    local().map_or(0, |a| a.critical.load(Relaxed))
}

/// Leaves one level of runtime-critical code on the calling kernel thread;
/// at zero, performs a preemption that waited for it.
///
/// The caller holds a level, so until the store `a` is this kernel
/// thread's; once the count is zero the code may be moved, so nothing
/// after the store touches `a`. (A preemption that arrives between the
/// look at `chained` and the store stays chained until the next time the
/// count reaches zero here, or the monitor asks again.)
#[inline(never)]
fn critical_exit() {
    // `LOCAL` read here rather than through `local`, saving a call: this
    // function is never inlined and does not switch before its last use of
    // `a` (only `preempt::chained` may, after the store), so the address
    // cannot outlive the kernel thread it was read on.
    // SAFETY: as in `local`.
    let Some(a) = (unsafe { LOCAL.with(Cell::get).as_ref() }) else {
        return;
    };
    compiler_fence(SeqCst);
    let c = a.critical.load(Relaxed) - 1;
    // Only this kernel thread and its own signal handler touch `chained`:
    // look before the swap (a full barrier on x86), which it rarely needs.
    let chained = c == 0 && a.chained.load(Relaxed) && a.chained.swap(false, Relaxed);
    a.critical.store(c, Release);
    compiler_fence(SeqCst);
    if chained {
        super::preempt::chained();
    }
}

/// One level of the calling kernel thread's critical count (see the module
/// docs). Dropping it leaves the level on whatever kernel thread the code
/// runs on by then: a switch in between hands the level over with it.
#[must_use]
pub(crate) struct Critical {
    _not_send: PhantomData<*const ()>,
}

impl Critical {
    /// Leaves without dropping through `Drop`'s chained-preemption check
    /// (the count is handed to the context switched to).
    pub(crate) fn hand_over(self) {
        std::mem::forget(self);
    }
}

impl Drop for Critical {
    fn drop(&mut self) {
        critical_exit();
    }
}

/// Leaves one level of the count that a context switched to us handed over
/// (a thread's first run).
pub(crate) fn critical_release_inherited() {
    critical_exit();
}

/// An assignment as one word: the processor's address (aligned to at least
/// 8) with a tag in the low three bits: `0` an urgent `Take`, `1` `Start`,
/// `2` a patient `Take`, `3` a `StandIn` the runtime's monitor provided, `4`
/// one the activation took up itself; [`WATCH`] (tag 3, no address) for
/// `Watch`.
fn encode(a: Assignment) -> usize {
    match a {
        Assignment::Take(p, patient) => ptr::from_ref(p) as usize | (usize::from(patient) << 1),
        Assignment::Start(p) => ptr::from_ref(p) as usize | 1,
        Assignment::StandIn(p, provided) => {
            ptr::from_ref(p) as usize | if provided { 3 } else { 4 }
        }
        Assignment::Watch => WATCH,
    }
}

/// `Assignment::Watch`, encoded: no processor's address.
const WATCH: usize = 3;

fn decode(word: usize) -> Assignment {
    if word == WATCH {
        return Assignment::Watch;
    }
    // SAFETY: encoded by `encode` from a processor of the live runtime.
    let p = unsafe { &*((word & !7) as *const Processor) };
    match word & 7 {
        0 => Assignment::Take(p, false),
        1 => Assignment::Start(p),
        2 => Assignment::Take(p, true),
        3 => Assignment::StandIn(p, true),
        _ => Assignment::StandIn(p, false),
    }
}

const _: () = assert!(std::mem::align_of::<Processor>() >= 8);

/// An activation and its kernel thread (none for the runtime's caller).
type Registered = (Arc<Activation>, Option<std::thread::JoinHandle<()>>);

/// Every activation of a runtime, and the pool of spare ones.
pub(crate) struct Activations {
    all: std::sync::Mutex<Vec<Registered>>,
    pool: std::sync::Mutex<Vec<Arc<Activation>>>,
    /// How many activations there are (read without the lock).
    count: AtomicUsize,
    max: usize,
    /// The activations of an ended run, joined: kept until the runtime
    /// itself goes, because a driver word may still name one (thread
    /// control on a `Thread` kept past the run reads the word and signals
    /// its kernel thread, which then has exited: the signal is refused).
    retired: std::sync::Mutex<Vec<Arc<Activation>>>,
}

impl Activations {
    pub(crate) fn new(max: usize) -> Activations {
        Activations {
            all: std::sync::Mutex::new(Vec::new()),
            pool: std::sync::Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            max,
            retired: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The most kernel threads the runtime runs as activations.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// How many kernel threads are activations now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// Registers the calling kernel thread's activation (the runtime's
    /// first), which the caller then runs.
    pub(crate) fn register_caller(&self) -> Arc<Activation> {
        let a = Arc::new(Activation::new());
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        all.push((Arc::clone(&a), None));
        // Room in the pool for every activation (see `to_pool`); at the
        // runtime's start, where a failure would abort anyway.
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve(all.len());
        drop(all);
        self.count.fetch_add(1, Relaxed);
        a
    }

    /// Starts a new activation on a new kernel thread, running `first`;
    /// fails when the bound is reached or no thread can be made.
    pub(crate) fn spawn(
        &self,
        shared: &Arc<Shared>,
        first: Option<Assignment>,
    ) -> std::io::Result<()> {
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.is_shut_down() {
            return Err(std::io::Error::other("ferry: the runtime is shutting down"));
        }
        if all.len() >= self.max {
            return Err(std::io::Error::other(
                "ferry: the runtime's activation bound is reached",
            ));
        }
        // Room for the new activation in the list and in the pool, made
        // now, where a failure is an error: an activation going back to the
        // pool (after a blocking call, with memory short) then never
        // allocates.
        let out_of_memory = |_| std::io::Error::from(std::io::ErrorKind::OutOfMemory);
        all.try_reserve(1).map_err(out_of_memory)?;
        {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            let room = (all.len() + 1).saturating_sub(pool.len());
            pool.try_reserve(room).map_err(out_of_memory)?;
        }
        let a = Arc::new(Activation::new());
        if let Some(Assignment::Take(p, _) | Assignment::StandIn(p, _)) = first {
            a.put_on_standby(p);
        }
        let (mine, for_thread) = (Arc::clone(&a), Arc::clone(shared));
        let k = std::thread::Builder::new()
            .name(format!("ferry-activation-{}", all.len()))
            .spawn(move || mine.main(&for_thread, first))?;
        if first.is_none() {
            // A spare from birth: it waits in the pool.
            let _ = self.to_pool(shared, Arc::clone(&a));
        }
        all.push((a, Some(k)));
        self.count.store(all.len(), Relaxed);
        Ok(())
    }

    /// Puts an activation whose work ended into the pool, unless the watch
    /// is vacant: then it is `false` and the activation keeps the watch.
    /// Both under the pool's lock, which `hand_watch` holds to leave the
    /// watch vacant: either it finds this activation in the pool, or this
    /// finds the watch vacant.
    ///
    /// Never allocates: `spawn` and `register_caller` keep room in the pool
    /// for every activation there is.
    fn to_pool(&self, shared: &Shared, a: Arc<Activation>) -> bool {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.monitor.claim_vacancy() {
            return false;
        }
        debug_assert!(pool.len() < pool.capacity(), "the pool's room was kept");
        pool.push(a);
        true
    }

    /// Hands `assignment` to a spare, making one if the pool is empty and
    /// the bound allows. Returns whether anyone got it.
    pub(crate) fn hand(&self, shared: &Arc<Shared>, assignment: Assignment) -> bool {
        let spare = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match spare {
            Some(a) => {
                crate::probe_mark!(2);
                match assignment {
                    Assignment::Take(p, true) => {
                        a.set_class_remotely(SchedClass::Batch);
                        crate::probe_mark!(3);
                        a.put_on_standby(p);
                        let lent_cpu = p.upcall().lent_cpu.load(Relaxed);
                        match p.core(shared) {
                            Some(core) => a.pin_remotely(core),
                            None if lent_cpu != NO_CORE => a.pin_remotely(lent_cpu),
                            None => {}
                        }
                    }
                    Assignment::Take(p, false) => {
                        a.set_class_remotely(SchedClass::Normal);
                        a.put_on_standby(p);
                    }
                    Assignment::Start(_) => a.set_class_remotely(SchedClass::Normal),
                    // It must run only when the core has nothing else.
                    Assignment::StandIn(p, _) => {
                        a.set_class_remotely(super::stand_in::class());
                        a.put_on_standby(p);
                        if let Some(core) = p.core(shared) {
                            a.pin_remotely(core);
                        }
                    }
                    // It must run soon: out of the wait class (a batch
                    // thread woken on a busy core waits for a scheduler
                    // tick; in the normal class it preempts), it then
                    // unpins itself.
                    Assignment::Watch => a.set_class_remotely(SchedClass::Normal),
                }
                crate::probe_mark!(5);
                a.assign(assignment);
                crate::probe_mark!(6);
                true
            }
            None => self.spawn(shared, Some(assignment)).is_ok(),
        }
    }

    /// Whether a watcher that takes a processor could hand the watch on: a
    /// spare waits in the pool, or the bound leaves room for a new one.
    pub(crate) fn has_successor(&self) -> bool {
        self.count() < self.max
            || !self
                .pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Hands the watch to a spare (a new one if the pool is empty); leaves
    /// it vacant if there is none (see `monitor`): under the pool's lock,
    /// so that an activation on its way into the pool either is found
    /// there or finds the watch vacant (`to_pool`).
    pub(crate) fn hand_watch(&self, shared: &Arc<Shared>) {
        if self.hand(shared, Assignment::Watch) {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        match pool.pop() {
            Some(a) => {
                drop(pool);
                a.set_class_remotely(SchedClass::Normal);
                a.assign(Assignment::Watch);
            }
            None => shared.monitor.leave_vacant(),
        }
    }

    /// Starts one spare, so that the first handoff need not make a kernel
    /// thread.
    pub(crate) fn add_spare(&self, shared: &Arc<Shared>) -> std::io::Result<()> {
        self.spawn(shared, None)
    }

    /// Calls `f` on every activation (the monitor's scan).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<Activation>)) {
        for (a, _) in self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            f(a);
        }
    }

    /// Wakes every pooled activation (at shutdown).
    pub(crate) fn wake_pool(&self) {
        for a in self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            a.wake_up();
        }
    }

    /// Joins every activation's kernel thread that is not away in a
    /// ferry thread's kernel call (those end when their call returns).
    pub(crate) fn join_all(&self) {
        let all = std::mem::take(&mut *self.all.lock().unwrap_or_else(PoisonError::into_inner));
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        for (a, k) in all {
            if let Some(k) = k
                && !a.away.load(Acquire)
            {
                let _ = k.join();
            }
            retired.push(a);
        }
    }
}

/// An activation driving a processor, as the processor's scheduler loop
/// sees it.
struct Driving<'a> {
    act: &'a Activation,
    shared: &'a Shared,
}

impl Driver for Driving<'_> {
    #[inline]
    fn drives(&self, p: &Processor) -> bool {
        debug_assert_eq!(
            self.act.critical.load(Relaxed),
            1,
            "the scheduler loop runs at one level"
        );
        std::ptr::eq(self.act.processor().map_or(ptr::null(), ptr::from_ref), p)
    }

    #[inline]
    fn pin_for(&self, p: &Processor) {
        self.act.pin_for(self.shared, p);
    }

    /// Leaves the set: gives every queued thread to the injector, lets go
    /// of the driver word and lets the others know. `false` if the
    /// processor was re-added meanwhile (it goes on).
    fn stop(&self, p: &Processor) -> bool {
        let (act, shared) = (self.act, self.shared);
        // SAFETY: we drive `p` (its scheduler loop calls us).
        unsafe { p.give_queues_away() };
        let words = shared.words(p);
        // Our word, or `A|PROBING` if the monitor is checking us: it will
        // see our count (the scheduler loop runs at one level) and fail to
        // put the word back, so its mark on `away` is ours to undo, and the
        // flag must not come back with the word.
        let me = words.release();
        debug_assert_eq!(
            me & !PROBING,
            act.word(),
            "stopping a processor we do not drive"
        );
        if me & PROBING != 0 {
            act.away.store(false, Relaxed);
        }
        if p.membership
            .compare_exchange(STOPPING, STOPPED, AcqRel, Acquire)
            .is_err()
        {
            words.restore(act.word());
            return false;
        }
        shared.sources.upcalls.post(
            Posted::ProcessorRemoved(p.index),
            shared.instant_of(words.changed_at.load(Relaxed)),
        );
        shared.notify_work();
        true
    }
}
