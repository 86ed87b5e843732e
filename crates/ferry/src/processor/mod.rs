//! Processors: one per core the runtime holds, each running user-level
//! threads that its scheduling [`Policy`] picks, and spinning, then sleeping
//! on a futex, when there is nothing to run. A processor is driven by one
//! kernel thread at a time, an activation (`crate::upcall`), which may
//! change when a thread blocks in the kernel.
//!
//! This room owns the mechanism: the switch between threads, what is left to
//! do after a switch, idling and waking. It must not decide *which* thread
//! runs or where a runnable thread waits (that is [`crate::sched`]'s policy),
//! must not block its kernel thread anywhere but in [`Processor::idle`], and
//! never caches a processor's address across a switch: code that resumes
//! after a switch may be on another kernel thread, so it asks its activation
//! again (`upcall::critical_enter`).
//!
//! # Who touches what
//!
//! A processor's [`Owner`] part (its rings' producer side, its policy, its
//! driver's scheduler context, the running thread, the pending action, its
//! caches of stacks and thread ids), and its cache of freed thread blocks
//! beside it, are touched only by the kernel thread whose activation holds
//! the processor's driver word (see `upcall::activation`). The owner part
//! is reached only through an [`OwnerToken`], the proof of that, lent by
//! `&mut` for as long as a reference into it lives: `upcall::enter` makes
//! one for its `Entered` guard, the scheduler loop for its [`Driver`], and a
//! thread resumed on the processor for itself. The rest
//! (`next`, `sleep`, `willing_to_yield`, the driver, dispatch and
//! membership words) is atomic and touched by anyone.
//!
//! # The pending action
//!
//! A thread that gives up its processor cannot finish the job itself: it is
//! still running on its own stack until the switch completes. So it leaves a
//! [`Pending`] action in the processor, and whoever runs next (another thread,
//! or the processor's scheduler loop) performs it first thing after the switch
//! lands (`finish_switch`):
//!
//! | pending | left by | performed after the switch |
//! |---------|---------|----------------------------|
//! | `Requeue(t)` | `yield_now` | the policy queues `t` again ([`Ready::Yielded`](crate::sched::Ready::Yielded)) |
//! | `Park(t)` | a thread that blocks | `t.state`: `PARKING -> PARKED`; if an unpark came first (`NOTIFIED`), `t` is queued again at once ([`Ready::Woken`](crate::sched::Ready::Woken)) |
//! | `Exit(t)` | a finished thread | `t`'s stack goes back to a cache |
//! | `Preempted(t, at)` | the preemption signal's handler (or a chained preemption) | the policy gets `Event::Preempted(t)` |
//! | `Hold(t)` | a thread that suspends itself (`Thread::wait_suspended`) | `t.control`: `SUSPENDED -> SUSPENDED \| HELD`; if it was resumed first, `t` is queued again ([`Ready::Woken`](crate::sched::Ready::Woken)) |
//!
//! # Straight from the poll into an activation
//!
//! The one exception to "the policy picks": a delivery of the event
//! sources ([`Processor::deliver_sources`], from the scheduler loop, a
//! yield or a switch) that gives an incoming `rpc` call to an unoccupied
//! activation ([`Ready::Call`](crate::sched::Ready::Call)) while nothing
//! else is ready on this processor keeps the activation in
//! `Owner::handoff` instead of queuing it, and the delivery's caller
//! switches straight to it (000 §4: no run queue, no scheduling decision).
//! With anything else ready, before or by the end of the same delivery,
//! the activation goes to the policy like any woken thread, at the
//! caller's priority. The slot is empty outside a
//! delivery: each caller takes it as the delivery returns.
//!
//! A thread about to be switched to whose `control` word says `SUSPENDED`
//! is held instead, the same way, and the processor picks another
//! (`enter_context`; see `thread`'s module docs on suspension).
//!
//! # Idling and waking
//!
//! An idle processor spins a bounded number of tries (it counts itself in
//! the runtime's `spinning`), then marks itself willing to yield its core,
//! joins the runtime's sleepers and parks on its `sleep` futex, no longer than
//! until the earliest timer. Whoever makes a thread runnable on a processor
//! (or the injector) then calls `Set::notify_work`, which wakes a sleeper
//! only when nobody spins: a spinner will find the work. The last spinner to
//! find work wakes one sleeper in its place, so that a burst of work spreads
//! one processor at a time (Go's rule). A batch made runnable at once
//! (`Processor::make_ready_batch`) calls `Set::notify_work_n` instead, with
//! the same handshake, which wakes as many sleepers as the batch has
//! threads (Go's `injectglist`). The idle poller (the one processor
//! blocked in the reactor's `epoll_wait` instead of its futex) that wakes
//! threads from its harvest runs the first of them itself: it leaves the
//! sleepers before the wakes and counts that one out (`Owner::polling`),
//! so a single readied socket wakes no other processor. Lost wakeups are excluded by an
//! asymmetric Dekker handshake: the idler publishes itself (spinning count
//! down, sleeper count up), issues `heavy_fence` and looks for work once
//! more; the notifier has published its work and issues `light_fence` before
//! it reads the counts. One of the two sees the other.
//!
//! | `Processor::sleep` | written by | meaning |
//! |--------------------|------------|---------|
//! | `0` | the processor, before it joins the sleepers | asleep, or about to be |
//! | `1` | a waker (Release), then `FUTEX_WAKE` | woken: leave `idle` |
//!
//! | `Processor::willing_to_yield` | written by | meaning |
//! |-------------------------------|------------|---------|
//! | `false` | the processor, when it leaves `idle` | busy, or spinning for work |
//! | `true` | the processor, when it stops spinning and goes to sleep | it has nothing to run: its core may be taken back |
//!
//! Both stores go through `set_willing`, which also writes the processor's
//! mirror word when a processor allocator's page gave it one (`alloc`'s
//! client; one load and a branch when none did).

pub(crate) mod block_depot;
mod cpus;
mod drive;
mod home;
mod idle;
mod idle_set;
mod parts;
mod ready;
mod run;
mod set;
mod switch;
#[cfg(all(test, not(ferry_loom)))]
mod tests;

/// The atomics, lock and fences `idle_set` uses (its loom model,
/// `tests/loom_idle.rs`, swaps in loom's).
mod atomic {
    pub(crate) use ferry_queue::wait::{heavy_fence, light_fence};
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
    pub(crate) use std::sync::{Mutex, PoisonError};
}

pub(crate) use cpus::{
    allowed_cpus, available_cpus, cpus_without_processors, note_first_cpu, pin, pin_to_cpus,
};
pub(crate) use drive::{Delivery, Driver, OwnerToken};
pub(crate) use set::{Host, Set, Settings};
pub(crate) use switch::switch_out_to;

use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;

use crate::arch::Context;
use crate::header::{Header, SmallBlock, Thread};
use crate::sched::Event;
use crate::sched::{self, Chosen, NextSlot, Policy, RingLens, RunQueue, SchedPolicy};
use crate::stack::LocalStacks;

/// Freed small thread blocks each processor keeps for its next spawns,
/// without a lock (two magazines, 32 KiB); beyond that a magazine goes to
/// the process's depot ([`block_depot`]), and an empty cache takes one
/// from it.
pub(crate) const LOCAL_BLOCKS: usize = 2 * block_depot::MAGAZINE;

/// Thread ids a processor takes from the runtime's counter at a time.
const ID_BLOCK: u64 = 1024;

/// How long the last processor to sleep waits, asleep, before it confirms
/// a deadlock it saw ([`Host::quiet`], [`Host::confirm`]): long enough that
/// nothing is still on its way (a woken processor the kernel has not run
/// yet), short enough for a prompt report.
pub(crate) const DEADLOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Where [`Processor::switch_to`] goes.
enum To {
    /// To this thread, which the caller took from the policy.
    Thread(Thread),
    /// To the thread the policy picks, else the scheduler loop.
    Policy,
    /// To the scheduler loop.
    Loop,
}

/// What the next context to run must do for the one that just left.
pub(crate) enum Pending {
    /// Nothing.
    None,
    /// Queue the thread again (it yielded).
    Requeue(Thread),
    /// Finish parking the thread (it blocked).
    Park(Thread),
    /// Release the thread's stack (it exited).
    Exit(Thread),
    /// Queue the thread again, as preempted at the given moment.
    Preempted(Thread, Instant),
    /// Hold the thread (it stopped itself: `Thread::wait_suspended`), unless
    /// it was resumed meanwhile.
    Hold(Thread),
}

/// Why a processor's scheduler loop returned to its activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// The runtime shut down.
    ShutDown,
    /// The activation lost the processor while its thread was away in the
    /// kernel (the thread is now switched out and must be handed back).
    Lost,
    /// The processor was removed from the set.
    Stopped,
}

/// `Processor::membership`: whether the processor belongs to the set.
///
/// | value | written by | meaning |
/// |-------|------------|---------|
/// | `ACTIVE` | a starting driver (from `STARTING`); `set_processors` (from `STOPPING`) | in the set |
/// | `STOPPING` | `set_processors` (from `ACTIVE` or `STARTING`) | to leave: its driver preempts its thread, gives its queues away and stops it |
/// | `STOPPED` | its driver, once stopped | out of the set; nobody drives it |
/// | `STARTING` | `set_processors` (from `STOPPED`), the runtime at start | a spare is on its way to drive it |
pub(crate) const ACTIVE: u8 = 0;
pub(crate) const STOPPING: u8 = 1;
pub(crate) const STOPPED: u8 = 2;
pub(crate) const STARTING: u8 = 3;

/// `Processor::core` when the processor has no named core.
pub(crate) const NO_CORE: usize = usize::MAX;

/// What the kernel thread driving a processor runs: the thread, and when
/// its turn began. It belongs to the driver (an activation), and only its
/// kernel thread touches it: the processor it drives writes it at each
/// switch, through [`Owner`]'s pointer. It is the driver's rather than the
/// processor's so that a driver whose processor was taken while it slept
/// in the kernel still knows when its thread's turn began, and ends that
/// turn itself (`Processor::end_taken_turn`) before it hands the thread
/// back, while no processor can run the thread yet.
pub(crate) struct Turn {
    /// The header of the thread running, null while none does.
    pub(crate) running: Cell<*mut Header>,
    /// `sys::cycles()` when the running thread's turn began (read by the
    /// `account` of the thread switched out before it, by the scheduler
    /// loop, or by a lend), if the runtime accounts run time.
    pub(crate) since: Cell<u64>,
}

impl Turn {
    /// No thread running, no turn begun.
    pub(crate) const fn new() -> Turn {
        Turn {
            running: Cell::new(ptr::null_mut()),
            since: Cell::new(0),
        }
    }
}

/// The parts of a processor only its own kernel thread touches.
pub(crate) struct Owner {
    queue: RunQueue,
    policy: Chosen,
    /// Where the driving kernel thread records the thread it runs and when
    /// its turn began (its activation's [`Turn`]).
    turn: *const Turn,
    /// Where that activation's scheduler loop is suspended while a thread
    /// runs.
    sched: *mut Context,
    /// Threads dispatched so far (the monitor sees it in `dispatch`).
    dispatches: u32,
    /// The thread running on this processor, if any.
    current: Option<Thread>,
    pending: Pending,
    /// Switches since the last look at every event source.
    ticks: u32,
    /// This processor's part of the event sources (its polled list).
    sources: crate::event::Local,
    /// This processor's two magazines of stacks of the runtime's default
    /// size (when it is an arena size), taken and given without a lock.
    stacks: LocalStacks,
    /// Thread ids this processor hands out before it takes more.
    ids: Range<u64>,
    /// The errno slot of the kernel thread running this processor.
    errno: *mut i32,
    /// The runtime's `account_cpu`, kept here so that a switch reads it
    /// without going through `shared`.
    account_cpu: bool,
    /// Set while this processor, idle, harvests readiness as the poller:
    /// the first thread it makes runnable is the one it runs next itself,
    /// so no sleeper is woken for it (see [`Processor::make_ready_batch`]).
    polling: bool,
    /// Set while this processor delivers its event sources
    /// ([`Processor::deliver_sources`]): an activation given a call then
    /// ([`Ready::Call`](crate::sched::Ready::Call)) may be kept in
    /// `handoff` instead of queued.
    delivering: bool,
    /// The activation a delivery gave a call to, with nothing else ready
    /// here: the delivery's caller switches straight to it (no run queue,
    /// no pick). Empty outside a delivery.
    handoff: Option<Thread>,
}

/// One processor: a kernel thread's worth of user-level scheduling.
pub(crate) struct Processor {
    pub(crate) index: usize,
    owner: UnsafeCell<Owner>,
    /// The set this processor belongs to (written once, by `set_set`,
    /// before any kernel thread runs it).
    set: AtomicPtr<Set>,
    /// Freed small thread blocks for this processor's next spawns (see
    /// `thread::raw`): touched, like `owner`, only by the kernel thread
    /// driving the processor (or by `drain`), but apart from it, because a
    /// block comes back from a thread's last drop, which may run while code
    /// up the stack holds the `Owner` (`finish_switch` dropping a thread).
    /// Each use is one push or pop, which frees no thread.
    blocks: UnsafeCell<Vec<SmallBlock>>,
    /// The next-to-run slot (the policy's; thieves may take from it).
    next: NextSlot,
    /// The futex word while it sleeps in `idle`; see the module docs.
    sleep: AtomicU32,
    /// The runtime's reactor while this processor blocks in its
    /// `epoll_wait` (the one poller, `idle`), else null: `wake` then
    /// writes the reactor's eventfd too.
    in_epoll: AtomicPtr<crate::event::readiness::Reactor>,
    /// See the module docs.
    willing_to_yield: AtomicBool,
    /// A word outside the runtime that follows `willing_to_yield` (a
    /// processor allocator's page), or null: see
    /// [`Processor::mirror_willing_to`].
    willing_mirror: AtomicPtr<AtomicU32>,
    /// A look at this processor's rings from outside, for
    /// [`Processor::queued_hint`].
    rings: RingLens,
    /// `dispatches << 1 | running a thread`, written at every switch (see
    /// `mark_dispatch`), read by the monitor: a value that stays the same
    /// while the low bit is set means one thread has run (or blocked) all
    /// along.
    pub(crate) dispatch: AtomicU32,
    /// The quantum, in microseconds, of the thread this processor runs or
    /// is about to run, under the fine-grain policy (which writes it when
    /// it picks the thread, before `dispatch` is stored); read by the
    /// monitor after `dispatch`, instead of the runtime's time slice. `0`
    /// (never written) under the default policy. See `sched::fine_grain`.
    pub(crate) quantum: AtomicU32,
    /// See [`ACTIVE`].
    pub(crate) membership: AtomicU8,
    /// The core its driver is pinned to, or [`NO_CORE`] for the default.
    core: AtomicUsize,
    /// Where the default is, for a processor with no core named: the CPU
    /// the watcher ran on when it took the processor over
    /// ([`settle_where_taken`](Processor::settle_where_taken)), another
    /// its own idle driver chose when spinning for polled entries did not
    /// pay ([`move_home_by_chance`](Processor::move_home_by_chance)), or
    /// [`NO_CORE`] for the `index`-th CPU. Written by the watcher once its
    /// takeover succeeded, before it binds, and by the idle driver; reset
    /// by `set_processors` when the set grows. (A takeover that races with that growth can leave
    /// two processors one home until the next growth: time, not
    /// correctness.)
    home: AtomicUsize,
}

// SAFETY: `owner` is only touched from the kernel thread whose activation
// holds the driver word (see the module docs; `owner()` is reached through
// `enter()`, which checks the word, through the driver's own loop, or by
// `drain` after every processor stopped); everything else is atomic.
unsafe impl Sync for Processor {}
// SAFETY: the handles in `Owner` are `Send`; the processor is built on one
// kernel thread and then used by the one it is handed to.
unsafe impl Send for Processor {}

impl Processor {
    /// Builds the processors of one runtime, with their queues and each one's
    /// stealing handles on all the others.
    pub(crate) fn build(count: usize, policy: SchedPolicy) -> Vec<Processor> {
        RunQueue::build(count)
            .into_iter()
            .enumerate()
            .map(|(index, queue)| Processor {
                index,
                rings: queue.lens(),
                owner: UnsafeCell::new(Owner {
                    queue,
                    policy: Chosen::new(policy),
                    turn: ptr::null(),
                    sched: ptr::null_mut(),
                    dispatches: 0,
                    current: None,
                    pending: Pending::None,
                    ticks: 0,
                    sources: Default::default(),
                    stacks: LocalStacks::new(),
                    ids: 0..0,
                    errno: ptr::null_mut(),
                    account_cpu: false,
                    polling: false,
                    delivering: false,
                    handoff: None,
                }),
                set: AtomicPtr::new(ptr::null_mut()),
                blocks: UnsafeCell::new(Vec::with_capacity(LOCAL_BLOCKS)),
                next: NextSlot::new(),
                sleep: AtomicU32::new(0),
                in_epoll: AtomicPtr::new(std::ptr::null_mut()),
                willing_to_yield: AtomicBool::new(false),
                willing_mirror: AtomicPtr::new(ptr::null_mut()),
                dispatch: AtomicU32::new(0),
                quantum: AtomicU32::new(0),
                membership: AtomicU8::new(STOPPED),
                core: AtomicUsize::new(NO_CORE),
                home: AtomicUsize::new(NO_CORE),
            })
            .collect()
    }

    /// This processor, for as long as its runtime lives.
    pub(crate) fn as_static(&self) -> &'static Processor {
        // SAFETY: processors live in their runtime's `Shared` (a boxed
        // slice that never moves) until the last `Arc<Shared>` drops, and
        // every kernel thread that keeps such a reference (activations, the
        // monitor, the runtime's caller) holds an `Arc<Shared>` meanwhile.
        unsafe { &*ptr::from_ref(self) }
    }

    /// Records the set this processor belongs to.
    ///
    /// # Safety
    /// Called once per processor, before any kernel thread runs it, with the
    /// `Set` that owns it (which outlives every use of the processor).
    pub(crate) unsafe fn set_set(&self, set: &Set) {
        self.set
            .store(ptr::from_ref(set).cast_mut(), Ordering::Release);
        // SAFETY: nobody drives the processor yet (the contract), so no
        // other reference into its owner part lives.
        let tok = unsafe { OwnerToken::new() };
        self.owner(tok).account_cpu = set.account_cpu;
    }

    /// The set of processors this one belongs to: its view of the runtime.
    #[inline]
    pub(crate) fn shared(&self) -> &Set {
        // SAFETY: set by `set_set` before the processor ran, to the `Set`
        // that owns this processor and so outlives this borrow.
        unsafe { &*self.set.load(Relaxed) }
    }

    /// Makes the calling kernel thread, which just took this processor's
    /// driver word, the one whose scheduler loop (suspended in `sched`) the
    /// processor's threads return to, and which records in `turn` the
    /// thread it runs and when its turn began. `turn` must stay alive (and
    /// in place) while the calling kernel thread drives the processor.
    pub(crate) fn bind(&self, mut tok: OwnerToken<'_>, sched: *mut Context, turn: &Turn) {
        let owner = self.owner(tok.rb());
        owner.turn = turn;
        owner.sched = sched;
        owner.errno = crate::sys::errno_location();
        // Without an alternate signal stack an overflow still kills the
        // process, it just cannot say which thread overflowed.
        let _ = crate::stack::ensure_signal_stack();
    }

    /// Whether the processor is on its way out of the set.
    pub(crate) fn is_stopping(&self) -> bool {
        self.membership.load(Acquire) == STOPPING
    }

    /// A spare took this lent processor: takes the thread that was
    /// running on it (it is blocked in the kernel) out of `current`, and
    /// publishes that no thread runs.
    pub(crate) fn take_blocked(&self, mut tok: OwnerToken<'_>) -> Option<Thread> {
        let blocked = self.owner(tok.rb()).current.take();
        self.mark_dispatch(tok.rb(), false);
        blocked
    }

    /// Tells this processor's policy of `event`.
    pub(crate) fn policy_event(&self, mut tok: OwnerToken<'_>, event: Event<'_>) {
        self.with_policy(tok.rb(), |policy, cx| policy.event(cx, event));
    }

    /// The processor leaves the set: gives every queued thread to the
    /// injector (which is closed only once every processor stopped, so it
    /// takes them all), and publishes that no thread runs.
    ///
    /// # Safety
    /// The caller drives this processor (its scheduler loop, stopping it).
    pub(crate) unsafe fn give_queues_away(&self, mut tok: OwnerToken<'_>) {
        let shared = self.shared();
        if let Some(t) = self.next.take() {
            drop(shared.injector.push(t));
        }
        let owner = self.owner(tok.rb());
        for level in 0..sched::LEVELS {
            while let Some(t) = owner.queue.pop(level) {
                drop(shared.injector.push(t));
            }
        }
        self.mark_dispatch(tok.rb(), false);
    }

    /// Publishes whether a thread runs, for the monitor.
    #[inline]
    fn mark_dispatch(&self, mut tok: OwnerToken<'_>, running: bool) {
        let owner = self.owner(tok.rb());
        owner.dispatches = owner.dispatches.wrapping_add(1);
        self.dispatch
            .store((owner.dispatches << 1) | u32::from(running), Release);
    }

    /// Preempts the running thread (time slice over, or the processor is
    /// leaving): it goes back to the policy as `Preempted` once switched out.
    pub(crate) fn preempt_current(&self, mut tok: OwnerToken<'_>) {
        let at = Instant::now();
        self.switch_away(tok.rb(), |t| Pending::Preempted(t, at));
    }

    /// The owner-only part, for as long as `tok` is lent.
    #[inline]
    fn owner<'a>(&'a self, tok: OwnerToken<'a>) -> &'a mut Owner {
        let _ = tok;
        // SAFETY: `tok` proves the calling kernel thread drives this
        // processor and that no other reference into its owner part lives
        // (`OwnerToken::new`'s contract); `tok` is a reborrow held for `'a`,
        // which keeps a second one from being made through its token
        // meanwhile.
        unsafe { &mut *self.owner.get() }
    }

    /// The owner-only part, to read, for as long as `tok` is lent.
    #[inline]
    fn owner_ref<'a>(&'a self, tok: &'a OwnerToken<'_>) -> &'a Owner {
        let _ = tok;
        // SAFETY: as in `owner`; the shared borrow of `tok` keeps a `&mut`
        // from being made through it meanwhile.
        unsafe { &*self.owner.get() }
    }

    /// The thread running on this processor, borrowed until it switches.
    pub(crate) fn current_ref<'a>(&'a self, tok: &'a OwnerToken<'_>) -> Option<&'a Thread> {
        self.owner_ref(tok).current.as_ref()
    }

    /// Whether a user-level thread is running (rather than the scheduler loop).
    /// Whether another thread is ready to run here (this processor's
    /// queues, or the runtime's injector): a thread that would rather spin
    /// than park asks it.
    pub(crate) fn others_ready(&self, mut tok: OwnerToken<'_>) -> bool {
        self.with_policy(tok.rb(), |policy, cx| policy.has_ready(cx))
    }

    /// Whether one of the runtime's polled entries has something (a call
    /// for a server here, a reply for a thread here) that only this
    /// processor would hand over soon: every other processor sleeps.
    pub(crate) fn polled_waits_for_me(&self, tok: OwnerToken<'_>) -> bool {
        let shared = self.shared();
        shared.others_asleep()
            && shared
                .sources
                .polled
                .is_ready(&mut self.owner(tok).sources.polled)
    }

    pub(crate) fn in_thread(&self, tok: &OwnerToken<'_>) -> bool {
        self.owner_ref(tok).current.is_some()
    }

    /// Whether this processor has nothing to run and offers its core back
    /// (see the module docs).
    pub(crate) fn is_willing_to_yield(&self) -> bool {
        self.willing_to_yield.load(Relaxed)
    }

    /// Marks this processor willing to yield its core, or not, and its
    /// mirror word if it has one (one load and a branch without).
    #[inline]
    pub(crate) fn set_willing(&self, willing: bool) {
        self.willing_to_yield.store(willing, Relaxed);
        let mirror = self.willing_mirror.load(Relaxed);
        if !mirror.is_null() {
            // SAFETY: `mirror_willing_to`'s contract keeps the word valid
            // for as long as the processor lives.
            unsafe { (*mirror).store(u32::from(willing), Relaxed) };
        }
    }

    /// From now on `set_willing` stores 1 or 0 in `word` too (null: no
    /// more). The word is not written now: it shows the processor's state
    /// from its next change.
    ///
    /// # Safety
    /// `word` (if not null) stays valid for as long as this processor
    /// lives, whatever is mirrored later: its memory is kept by the set
    /// ([`Set::keep`]).
    pub(crate) unsafe fn mirror_willing_to(&self, word: *const AtomicU32) {
        self.willing_mirror.store(word.cast_mut(), Relaxed);
    }

    /// How many threads look queued on this processor (its rings and its
    /// next-to-run slot): a hint, from any kernel thread.
    pub(crate) fn queued_hint(&self) -> usize {
        self.rings.len() + usize::from(!self.next.is_empty())
    }

    /// Whether the processor runs a thread now (a snapshot of `dispatch`).
    pub(crate) fn runs_a_thread(&self) -> bool {
        self.dispatch.load(Relaxed) & 1 != 0
    }
}

/// The processor that last switched to the thread of `header` (see
/// `switch::claim`), if any has.
pub(crate) fn last_of(header: &Header) -> Option<&'static Processor> {
    // SAFETY: a non-null `processor` was stored by `claim` and points into
    // the runtime's processors, which live as long as the runtime the
    // block holds.
    unsafe { header.processor.load(Acquire).cast::<Processor>().as_ref() }
}
