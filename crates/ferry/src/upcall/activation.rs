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
//! | `A\|PROBING` | a prober (the monitor or the processor's stand-in; the flag names which, and only that prober confirms or puts it back), having found `A` asleep in the kernel | being checked: nobody may take it; `A` still drives it (runtime code of `A`'s, whose count is above zero, goes on as under `A`) and may take it back |
//! | `A\|LENT\|UNANNOUNCED` | the prober, from its `A\|PROBING`, having seen `A`'s count at zero and stamped when it found `A` asleep (`blocked_at`) | as `A\|LENT`; a spare that takes it marks `A` as having lost its processor |
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
//! So the lender of a processor with work waiting asks for a *when-idle*
//! takeover (`Assignment::Take(p, true)`): the handoff picks a pooled spare,
//! makes sure it is in `SCHED_BATCH` and on the lender's core
//! (`pin_remotely`; the lender's CPU is `Processor::lent_cpu` when the
//! processor is not pinned) and wakes it; a short call is back and has
//! reclaimed the word before the spare runs, which then finds no `LENT` and
//! goes back to the pool. The
//! monitor's takeovers (a lend that outlasted the handoff wait, a thread
//! seen asleep) are *urgent*: the activation that keeps the watch takes
//! the processor itself, at once (or, when nobody could watch after it, a
//! spare in the normal class does). A when-idle spare that still has not
//! come a tick later (other processes hold the core) is moved at once back into
//! the normal class.
//!
//! A processor with a stand-in (`stand_in`) skips the wakeup: the
//! stand-in waits runnable on the lender's core in `SCHED_BATCH` and holds
//! `standby` up, so the lend wakes nobody and the kernel runs the stand-in
//! the moment the lender sleeps.
//!
//! The class changes are system calls of several microseconds each, kept
//! off the way from the lend to `Blocked`: an activation puts itself in
//! `SCHED_BATCH` before it enters the pool (so the handoff usually has
//! nothing to change and only wakes it), and a when-idle spare that took a
//! processor goes back to the normal class only once it has delivered
//! `Blocked`, before it runs any thread.
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `Processor::standby` | raised by a handoff (CAS `0 -> ON_WAY`: `hand_lent`, the monitor providing a stand-in or claiming for the watcher, which raises it to its own word) or a stand-in attaching (CAS `0 -> S`); set to the picked spare's word by the handoff, before it wakes or starts it; lowered only by its holder (CAS from its own word to `0`, SeqCst, before it loads the driver word), or by a handoff that started nobody | `0`: nobody will take a lend, the lender hands it to a spare. Otherwise someone will look at the driver word after any lend: a lend wakes nobody else. The lender stores the driver word (SeqCst) before its CAS: either the holder sees `LENT` or the lender sees `0` and wakes another. The word names the holder, so a taker that was not on its way (a stand-in taking a lend a spare was woken for, the watcher) never lowers another's flag, and the monitor knows whom to hurry |
//! | `Activation::class` | the activation itself (`Batch` before it enters the pool, the stand-in class while it stands in, `Normal` once it drives a processor); a handoff while it sleeps in the pool; the monitor (`Normal`, `take_at_once`) while it waits to arrive | its kernel thread's scheduling class (mirrors the kernel's setting). A `take_at_once` that read `Batch` just before its spare arrived may land after that spare is back in the pool and in `SCHED_BATCH` again, leaving the mirror `Normal` over a batch thread: until that spare next enters the pool, an urgent handoff to it waits for a tick and its wakeups do not preempt (time, never correctness). A stand-in compares the mirror with its class at every pass, so a hurried one goes back |
//! | `Activation::pinned` | the activation itself; a handoff while it sleeps in the pool | the CPU its kernel thread is pinned to, or `NO_CORE` |
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
use std::ptr;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::Posted;
use super::Words;
use crate::arch::Context;
use crate::header::Thread;
use crate::processor::{NO_CORE, OwnerToken, Processor, RunEnd, Turn};
use crate::sys::{self, SchedClass};
use crate::upcall::Shared;

mod driving;
mod placement;
mod waiting;

use super::per_processor::PerProcessor;
pub(crate) use super::per_processor::{FLAGS, LENT, ON_WAY, PROBING, UNANNOUNCED};

/// `Activation::pinned` before the activation first pins itself: a new
/// kernel thread inherits its creator's CPU mask, whatever it is, so the
/// first pin always asks the kernel.
const PIN_UNKNOWN: usize = usize::MAX - 1;

thread_local! {
    /// The activation this kernel thread is, or null.
    pub(super) static LOCAL: Cell<*const Activation> = const { Cell::new(ptr::null()) };
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
    /// Take over a lent processor (its driver is off in the kernel), as
    /// [`Takeover`] says.
    Take(&'static Processor, Takeover),
    /// Start a processor nobody drives (a new or re-added one).
    Start(&'static Processor),
    /// Keep the runtime's watch (`monitor::watch`).
    Watch,
    /// Stand in for a processor: wait on its core in the lowest class and
    /// take it over when its driver sleeps (`stand_in`).
    StandIn(&'static Processor, StandInBy),
}

/// When a spare takes over a lent processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Takeover {
    /// Once the lender's core has nothing else to run: the lender itself
    /// asked (its call may not block at all), and the spare waits in the
    /// batch class on the lender's core.
    WhenIdle,
    /// At once: the monitor saw the lender asleep, or the lend outlasted
    /// the handoff wait.
    AtOnce,
}

/// Who made an activation a processor's stand-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StandInBy {
    /// The monitor provided it (the processor's stand-in word is `COMING`
    /// and its `standby` word holds the activation's already).
    Monitor,
    /// The activation took it up itself, from the pool.
    Itself,
}

/// A kernel thread of the runtime: the paper's scheduler activation, which
/// drives one processor at a time. Aligned beyond the driver word's flags
/// (`per_processor::FLAGS`), which share the word with its address.
#[repr(align(16))]
pub(crate) struct Activation {
    /// Runtime-critical depth; see the module docs.
    pub(crate) critical: AtomicU32,
    /// A preemption arrived while `critical` was above zero: the kernel
    /// thread performs it when the count returns to zero.
    pub(crate) chained: AtomicBool,
    /// Its processor was taken while it slept in the kernel outside the
    /// runtime; set by the taker, cleared by the kernel thread when it
    /// notices. The monitor pushes such an activation that runs again off its thread.
    pub(crate) lost_processor: AtomicBool,
    /// Between taking the processor from `A|LENT` and posting `Unblocked`:
    /// a ferry thread's code runs here on no processor (or blocks).
    pub(crate) away: AtomicBool,
    /// The announced blocking call its kernel thread is in, and whether it
    /// is being aborted: the call word of `blocking`'s module docs.
    pub(crate) call: AtomicUsize,
    /// The processor it drives (its own kernel thread only).
    processor: Cell<*const Processor>,
    /// That processor's activation words, or null when `processor` is (its
    /// own kernel thread only; set and cleared with `processor`).
    pub(super) words: Cell<*const PerProcessor>,
    /// The thread running on this kernel thread and when its turn began
    /// (its own kernel thread only; set by its processor on each switch).
    turn: Turn,
    /// When the monitor found this kernel thread asleep in the kernel
    /// without having announced it (`sys::cycles()`; `0`: not found so):
    /// written (from `0` only: a stamp there is another prober's) by a
    /// prober before it confirms the unannounced lend
    /// (`monitor::take_unannounced`; the confirming store publishes it),
    /// cleared by that prober if the confirmation fails, and by this
    /// kernel thread once it is back (`handover::reclaim_or_give_back`):
    /// if the processor was taken, the thread's turn ended then
    /// (`give_back_thread`).
    pub(crate) blocked_at: AtomicU64,
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
    pub(super) home: AtomicUsize,
    /// Its `/proc/<tid>/stat` file (`sys::open_own_stat`), for the monitor
    /// and stand-ins; closed when it retires.
    stat: std::sync::Mutex<Option<File>>,
    /// The CPU it is pinned to, `NO_CORE` for every allowed CPU, or
    /// `PIN_UNKNOWN` until it first pins itself (a new kernel thread
    /// inherits its creator's mask): written by its own kernel thread, or
    /// by a handoff while it sleeps in the pool (before `assign`, whose
    /// store publishes it).
    pinned: AtomicUsize,
    /// Its kernel thread's scheduling class (a `SchedClass`, mirroring the
    /// kernel's setting): written by its own kernel thread (entering the
    /// pool, taking a processor, standing in), by a handoff while it sleeps
    /// in the pool, or by the monitor moving it back (`take_at_once`) (see the module docs).
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
            lost_processor: AtomicBool::new(false),
            away: AtomicBool::new(false),
            call: AtomicUsize::new(0),
            processor: Cell::new(ptr::null()),
            words: Cell::new(ptr::null()),
            turn: Turn::new(),
            blocked_at: AtomicU64::new(0),
            lost: Cell::new(None),
            hands_watch_on: Cell::new(false),
            stood_in: Cell::new(false),
            sched: UnsafeCell::new(Context::empty()),
            assigned: AtomicUsize::new(0),
            wake: AtomicU32::new(0),
            tid: AtomicU32::new(0),
            home: AtomicUsize::new(0),
            stat: std::sync::Mutex::new(None),
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

    /// What the kernel says this activation's kernel thread is doing;
    /// [`TaskState::Other`](sys::TaskState::Other) ("not known now") while
    /// another kernel thread reads it. The read never waits for that one:
    /// the monitor and a stand-in both read drivers' states, and a monitor
    /// that waited for a stand-in preempted in the middle of its read would
    /// wait until the kernel ran the stand-in again, which a driver
    /// computing on that core can put off for a scheduler slice or more.
    /// The caller looks again at its next pass.
    pub(crate) fn task_state(&self) -> sys::TaskState {
        let Some(stat) = crate::lock::try_lock(&self.stat) else {
            return sys::TaskState::Other;
        };
        match &*stat {
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
        *self.stat.lock().unwrap_or_else(PoisonError::into_inner) = sys::open_own_stat();
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
                            crate::probe_mark!(crate::probe::WATCHER_TAKES);
                            self.hands_watch_on.set(true);
                            Some(Assignment::Take(p, Takeover::AtOnce))
                        }
                        None => {
                            restore_thread_name();
                            break;
                        }
                    }
                }
                // A stand-in that held the `standby` word leaves through
                // `take`: it may find the processor lent (see `stand_in`).
                Assignment::StandIn(p, by) => {
                    let held = super::stand_in::stand_in(self, shared, p, by);
                    self.stood_in.set(held);
                    held.then_some(Assignment::Take(p, Takeover::WhenIdle))
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
                        Assignment::StandIn(p, StandInBy::Itself)
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
            // Ready for a when-idle handoff before anyone can pick us, so
            // that the handoff need not move us (a system call on the
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

    /// Makes this activation the driver of the assigned processor, if it
    /// still needs one, and delivers the event the takeover means.
    fn take(&self, shared: &Shared, a: Assignment) -> Option<&'static Processor> {
        match a {
            Assignment::Take(p, how) => {
                crate::probe_mark!(crate::probe::TAKE_BEGINS);
                // When idle: the handoff put us in the wait class on the
                // lender's core, so that we run there only once the lender
                // sleeps (or at a scheduler tick, or when the monitor
                // moves us back). Else take at once.
                if how == Takeover::AtOnce {
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
                crate::probe_mark!(crate::probe::DRIVER_WORD_MOVED);
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
                    previous.lost_processor.store(true, Release);
                    shared.counters.unannounced.fetch_add(1, Relaxed);
                }
                crate::probe_mark!(crate::probe::BEFORE_BEGIN);
                self.begin(shared, p);
                super::handover::deliver_blocked(p, shared);
                // Back in the normal class only now that the policy knows
                // (the system call is off the way from the lend to
                // `Blocked`), and before any thread runs here.
                self.set_class(SchedClass::Normal);
                if self.hands_watch_on.replace(false) {
                    shared.activations.hand_watch(&shared.arc());
                    crate::probe_mark!(crate::probe::WATCH_HANDED_ON);
                    restore_thread_name();
                    crate::probe_mark!(crate::probe::NAME_RESTORED);
                }
                crate::probe_mark!(crate::probe::SPARE_NORMAL_CLASS);
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
        crate::probe_mark!(crate::probe::PINNED_FOR_PROCESSOR);
        // SAFETY: we just took `p`'s driver word and run at one level; no
        // reference into its owner part lives.
        let mut tok = unsafe { OwnerToken::new() };
        p.bind(tok.rb(), self.sched.get(), &self.turn);
    }

    /// Names this activation, picked by a handoff that raised `p`'s
    /// `standby` word, as its holder (before it is woken or started).
    pub(super) fn put_on_standby(&self, p: &Processor) {
        p.upcall().name_standby(self.word());
    }
}

/// Gives the calling kernel thread back the name it was made with (a
/// watcher renames itself while it watches).
fn restore_thread_name() {
    if let Some(name) = std::thread::current().name() {
        sys::set_thread_name(name);
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_state_read_never_waits_for_another_reader() {
        let a = Arc::new(Activation::new());
        *a.stat.lock().unwrap() = sys::open_own_stat();
        assert_eq!(a.task_state(), sys::TaskState::Running, "we run");
        // Another reader holds the file (a stand-in preempted in its read):
        // a read from elsewhere answers at once, not knowing.
        let held = a.stat.lock().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = Arc::clone(&a);
        let t = std::thread::spawn(move || tx.send(reader.task_state()).unwrap());
        let answer = rx.recv_timeout(Duration::from_secs(10));
        drop(held);
        t.join().unwrap();
        assert_eq!(
            answer,
            Ok(sys::TaskState::Other),
            "a read waited for the holder"
        );
    }
}
