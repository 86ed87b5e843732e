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
//! after a switch may be on another kernel thread, so it asks [`current`]
//! again.
//!
//! # Who touches what
//!
//! A processor's [`Owner`] part (its rings' producer side, its policy, its
//! driver's scheduler context, the running thread, the pending action, its
//! caches of stacks and thread ids), and its cache of freed thread blocks
//! beside it, are touched only by the kernel thread whose activation holds
//! the processor's driver word (see `upcall::activation`). The rest
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
//! | `Requeue(t)` | `yield_now` | the policy queues `t` again ([`Ready::Yielded`]) |
//! | `Park(t)` | a thread that blocks | `t.state`: `PARKING -> PARKED`; if an unpark came first (`NOTIFIED`), `t` is queued again at once ([`Ready::Woken`]) |
//! | `Exit(t)` | a finished thread | `t`'s stack goes back to a cache |
//! | `Preempted(t, at)` | the preemption signal's handler (or a chained preemption) | the policy gets `Event::Preempted(t)` |
//! | `Hold(t)` | a thread that suspends itself (`Thread::wait_suspended`) | `t.control`: `SUSPENDED -> SUSPENDED \| HELD`; if it was resumed first, `t` is queued again ([`Ready::Woken`]) |
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
//! (or the injector) then calls `Shared::notify_work`, which wakes a sleeper
//! only when nobody spins: a spinner will find the work. The last spinner to
//! find work wakes one sleeper in its place, so that a burst of work spreads
//! one processor at a time (Go's rule). Lost wakeups are excluded by an
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
//! | `true` | the processor, when it stops spinning and goes to sleep | it has nothing to run: its core may be taken back (the processor-allocation issue reads it) |

mod cpus;
mod idle_set;
mod set;
#[cfg(all(test, not(ferry_loom)))]
mod tests;

/// The atomics, lock and fences `idle_set` uses (its loom model,
/// `tests/loom_idle.rs`, swaps in loom's).
mod atomic {
    pub(crate) use ferry_queue::wait::{heavy_fence, light_fence};
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
    pub(crate) use std::sync::{Mutex, PoisonError};
}

pub(crate) use cpus::{available_cpus, cpus_without_processors, pin, pin_to_cpus};
pub(crate) use set::{Host, Set, Settings};

use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ops::Range;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicUsize};
use std::time::Instant;

use crate::arch::{self, Context};
use crate::event::stats::Kind;
use crate::event::{Deliver, Sources};
use crate::header::{
    DROPPED, HELD, Header, SUSPENDED, SmallBlock, TERMINATED, Thread, ThreadId, held_back,
    park_word::finish_parking,
};
use crate::sched::Event;
use crate::sched::{self, Cx, NextSlot, Policy, Ready, RunQueue, WorkStealing};
use crate::stack::{Stack, StackCache};
use crate::sys;

/// Stacks of the runtime's default size each processor keeps for its next
/// spawns, without a lock; beyond that they go to the process-wide cache.
const LOCAL_STACKS: usize = 64;

/// Freed small thread blocks each processor keeps for its next spawns,
/// without a lock (16 KiB); beyond that they go back to the allocator.
pub(crate) const LOCAL_BLOCKS: usize = 64;

/// Thread ids a processor takes from the runtime's counter at a time.
const ID_BLOCK: u64 = 1024;

/// How long the last processor to sleep waits, asleep, before it confirms
/// a deadlock it saw ([`Host::quiet`], [`Host::confirm`]): long enough that
/// nothing is still on its way (a woken processor the kernel has not run
/// yet), short enough for a prompt report.
pub(crate) const DEADLOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// The kernel thread that drives a processor, as the processor's scheduler
/// loop sees it (an activation; see `upcall`).
pub(crate) trait Driver {
    /// Whether it still drives `p` (it loses `p` when a thread of its comes
    /// back from the kernel to find `p` taken).
    fn drives(&self, p: &Processor) -> bool;

    /// Moves its kernel thread to the core `p` runs on, if that changed.
    fn pin_for(&self, p: &Processor);

    /// `p` is leaving the set: stops driving it (its queues go to the
    /// injector first, see [`Processor::give_queues_away`]). `false` if `p`
    /// was added back meanwhile and goes on.
    fn stop(&self, p: &Processor) -> bool;
}

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

/// The parts of a processor only its own kernel thread touches.
pub(crate) struct Owner {
    queue: RunQueue,
    policy: WorkStealing,
    /// Where the driving kernel thread records the thread it runs (its
    /// activation's, for the preemption handler and the monitor).
    running: *const Cell<*mut Header>,
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
    /// Warm stacks of the default size, for this processor's next spawns.
    stacks: Vec<Stack>,
    /// Thread ids this processor hands out before it takes more.
    ids: Range<u64>,
    /// The errno slot of the kernel thread running this processor.
    errno: *mut i32,
    /// `sys::cycles()` when the running thread was switched to (read by the
    /// `account` of the thread switched out before it, or by the scheduler
    /// loop), if the runtime accounts run time.
    since: u64,
    /// The runtime's `account_cpu`, kept here so that a switch reads it
    /// without going through `shared`.
    account_cpu: bool,
    /// The runtime this processor belongs to (set once, before it runs).
    shared: *const Set,
}

/// One processor: a kernel thread's worth of user-level scheduling.
pub(crate) struct Processor {
    pub(crate) index: usize,
    owner: UnsafeCell<Owner>,
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
    /// See the module docs.
    willing_to_yield: AtomicBool,
    /// `dispatches << 1 | running a thread`, written at every switch (see
    /// `mark_dispatch`), read by the monitor: a value that stays the same
    /// while the low bit is set means one thread has run (or blocked) all
    /// along.
    pub(crate) dispatch: AtomicU32,
    /// See [`ACTIVE`].
    pub(crate) membership: AtomicU8,
    /// The core its driver is pinned to, or [`NO_CORE`] for the default.
    core: AtomicUsize,
    /// Where the default is, for a processor with no core named: the CPU
    /// the watcher ran on when it took the processor over
    /// ([`settle_where_taken`](Processor::settle_where_taken)), or
    /// [`NO_CORE`] for the `index`-th CPU. Written by the watcher once its
    /// takeover succeeded, before it binds; reset by `set_processors` when
    /// the set grows. (A takeover that races with that growth can leave
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
    pub(crate) fn build(count: usize) -> Vec<Processor> {
        RunQueue::build(count)
            .into_iter()
            .enumerate()
            .map(|(index, queue)| Processor {
                index,
                owner: UnsafeCell::new(Owner {
                    queue,
                    policy: WorkStealing::default(),
                    running: ptr::null(),
                    sched: ptr::null_mut(),
                    dispatches: 0,
                    current: None,
                    pending: Pending::None,
                    ticks: 0,
                    stacks: Vec::new(),
                    ids: 0..0,
                    errno: ptr::null_mut(),
                    since: 0,
                    account_cpu: false,
                    shared: ptr::null(),
                }),
                blocks: UnsafeCell::new(Vec::with_capacity(LOCAL_BLOCKS)),
                next: NextSlot::new(),
                sleep: AtomicU32::new(0),
                willing_to_yield: AtomicBool::new(false),
                dispatch: AtomicU32::new(0),
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
        let owner = self.owner();
        owner.shared = set;
        owner.account_cpu = set.account_cpu;
    }

    /// The set of processors this one belongs to: its view of the runtime.
    pub(crate) fn shared(&self) -> &Set {
        // SAFETY: set by `set_shared` before the processor ran, to the
        // `Shared` that owns this processor and so outlives this borrow.
        unsafe { &*self.owner().shared }
    }

    /// Makes the calling kernel thread, which just took this processor's
    /// driver word, the one whose scheduler loop (suspended in `sched`) the
    /// processor's threads return to, and which records in `running` the
    /// thread it runs.
    pub(crate) fn bind(&self, sched: *mut Context, running: &Cell<*mut Header>) {
        let owner = self.owner();
        owner.running = running;
        owner.sched = sched;
        owner.errno = crate::sys::errno_location();
        // Without an alternate signal stack an overflow still kills the
        // process, it just cannot say which thread overflowed.
        let _ = crate::stack::ensure_signal_stack();
    }

    /// The core this processor's driver is pinned to: the one named with
    /// `processor_on`, else (with several processors) its home, which is
    /// the `index`-th CPU of the process's mask unless a takeover moved it,
    /// else none.
    pub(crate) fn core(&self, shared: &Set) -> Option<usize> {
        match self.core.load(Relaxed) {
            NO_CORE if shared.processors.len() > 1 => match self.home.load(Relaxed) {
                NO_CORE => cpus::default_core(self.index),
                home => Some(home),
            },
            NO_CORE => None,
            c => Some(c),
        }
    }

    /// Makes the calling CPU this processor's home, if no core is named
    /// for it and no other processor in the set lives there: the watcher,
    /// taking it over, runs it where it is instead of moving to the blocked
    /// driver's core, which went idle (on a VM, waking an idle core for
    /// the move cost 50-100 µs, most of such a takeover).
    pub(crate) fn settle_where_taken(&self, shared: &Set) {
        if self.core.load(Relaxed) != NO_CORE || shared.processors.len() < 2 {
            return;
        }
        let Some(cpu) = crate::sys::current_cpu() else {
            return;
        };
        if self.core(shared) == Some(cpu) {
            return;
        }
        let taken = shared.processors.iter().any(|q| {
            !std::ptr::eq(q.as_static(), self)
                && q.membership.load(Relaxed) != STOPPED
                && q.core(shared) == Some(cpu)
        });
        if !taken {
            self.home.store(cpu, Relaxed);
        }
    }

    /// Sends the processor back to its default home (the set grew: every
    /// processor's default core may be wanted again).
    pub(crate) fn reset_home(&self) {
        self.home.store(NO_CORE, Relaxed);
    }

    /// Names the core this processor's driver runs on (it moves there at
    /// its next pass through the scheduler loop).
    pub(crate) fn set_core(&self, core: usize) {
        self.core.store(core, Relaxed);
    }

    /// Whether the processor is on its way out of the set.
    pub(crate) fn is_stopping(&self) -> bool {
        self.membership.load(Acquire) == STOPPING
    }

    /// A spare took this lent processor: takes the thread that was
    /// running on it (it is blocked in the kernel) out of `current`, and
    /// publishes that no thread runs.
    pub(crate) fn take_blocked(&self) -> Option<Thread> {
        let blocked = self.owner().current.take();
        self.mark_dispatch(false);
        blocked
    }

    /// Tells this processor's policy of `event`.
    pub(crate) fn policy_event(&self, event: Event<'_>) {
        self.with_policy(|policy, cx| policy.event(cx, event));
    }

    /// The processor leaves the set: gives every queued thread to the
    /// injector (which is closed only once every processor stopped, so it
    /// takes them all), and publishes that no thread runs.
    ///
    /// # Safety
    /// The caller drives this processor (its scheduler loop, stopping it).
    pub(crate) unsafe fn give_queues_away(&self) {
        let owner = self.owner();
        let shared = self.shared();
        if let Some(t) = self.next.take() {
            drop(shared.injector.push(t));
        }
        for level in 0..sched::LEVELS {
            while let Some(t) = owner.queue.pop(level) {
                drop(shared.injector.push(t));
            }
        }
        self.mark_dispatch(false);
    }

    /// Publishes whether a thread runs, for the monitor.
    #[inline]
    fn mark_dispatch(&self, running: bool) {
        let owner = self.owner();
        owner.dispatches = owner.dispatches.wrapping_add(1);
        self.dispatch
            .store((owner.dispatches << 1) | u32::from(running), Release);
    }

    /// Preempts the running thread (time slice over, or the processor is
    /// leaving): it goes back to the policy as `Preempted` once switched out.
    pub(crate) fn preempt_current(&self) {
        let at = Instant::now();
        self.switch_away(|t| Pending::Preempted(t, at));
    }

    /// The owner-only part.
    #[allow(clippy::mut_from_ref)]
    fn owner(&self) -> &mut Owner {
        // SAFETY: only the kernel thread driving this processor gets here
        // (through `enter()` or its own loop), and no caller keeps the reference across a
        // switch or a re-entrant call.
        unsafe { &mut *self.owner.get() }
    }

    /// The thread running on this processor, borrowed until it switches.
    pub(crate) fn current_ref(&self) -> Option<&Thread> {
        self.owner().current.as_ref()
    }

    /// Whether a user-level thread is running (rather than the scheduler loop).
    pub(crate) fn in_thread(&self) -> bool {
        self.owner().current.is_some()
    }

    /// Whether this processor has nothing to run and offers its core back
    /// (see the module docs).
    pub(crate) fn is_willing_to_yield(&self) -> bool {
        self.willing_to_yield.load(Relaxed)
    }

    /// Runs `f` with this processor's policy and the view it decides on.
    #[inline]
    fn with_policy<R>(&self, f: impl FnOnce(&mut WorkStealing, &Cx<'_>) -> R) -> R {
        let owner = self.owner();
        // SAFETY: as in `shared()`.
        let shared = unsafe { &*owner.shared };
        let cx = Cx {
            queue: &owner.queue,
            next: &self.next,
            injector: &shared.injector,
        };
        f(&mut owner.policy, &cx)
    }

    /// Makes `t` runnable on this processor, as the policy places it, and
    /// lets an idle processor know.
    pub(crate) fn make_ready(&self, t: Thread, why: Ready) {
        self.with_policy(|policy, cx| policy.ready(cx, t, why));
        let shared = self.shared();
        // With one processor, this one (running now) is the one to run it.
        if shared.processors.len() > 1 {
            shared.notify_work();
        }
    }

    /// An id and a stack for a thread spawned here: the id from this
    /// processor's block, a default-size stack from its own cache.
    pub(crate) fn thread_parts(&self, stack_size: Option<usize>) -> io::Result<(ThreadId, Stack)> {
        let owner = self.owner();
        // SAFETY: as in `shared()`.
        let shared = unsafe { &*owner.shared };
        if owner.ids.is_empty() {
            owner.ids = shared.next_thread_ids(ID_BLOCK);
        }
        let id = ThreadId(owner.ids.start);
        owner.ids.start += 1;
        let size = stack_size.unwrap_or(shared.stack_size);
        let cached = if size == shared.stack_size {
            owner.stacks.pop()
        } else {
            None
        };
        let stack = match cached {
            Some(s) => s,
            None => StackCache::global().get(size)?,
        };
        Ok((id, stack))
    }

    /// Takes back an exited thread's stack: into this processor's cache if
    /// it has the default size and there is room, else the global cache.
    fn release_stack(&self, stack: Stack) {
        // Its thread is gone: a deadlock report must not list it.
        crate::waits::forget_stack(&stack);
        let owner = self.owner();
        // SAFETY: as in `shared()`.
        let shared = unsafe { &*owner.shared };
        if owner.stacks.len() < LOCAL_STACKS
            && Some(stack.size()) == crate::stack::round_to_pages(shared.stack_size)
            && stack.has_default_guard()
        {
            owner.stacks.push(stack);
        } else {
            StackCache::global().put(stack);
        }
    }

    /// Does what the context that switched to us left to do.
    pub(crate) fn finish_switch(&self) {
        match std::mem::replace(&mut self.owner().pending, Pending::None) {
            Pending::None => {}
            Pending::Requeue(t) => {
                self.make_ready(t, Ready::Yielded);
            }
            Pending::Park(t) => {
                // An unpark that came while it switched out: run it again.
                if !finish_parking(t.state()) {
                    self.make_ready(t, Ready::Woken);
                }
            }
            Pending::Exit(t) => {
                // SAFETY: `t` exited and the switch away from it has landed:
                // nothing runs on its stack, and only we hold it now.
                if let Some(stack) = unsafe { t.take_stack() } {
                    self.release_stack(stack);
                }
            }
            Pending::Hold(t) => hold(t, Ready::Woken, self),
            Pending::Preempted(t, at) => {
                self.with_policy(|policy, cx| policy.event(cx, Event::Preempted(t)));
                let shared = self.shared();
                shared.counters.record(Kind::Preempted, at);
                if shared.processors.len() > 1 {
                    shared.notify_work();
                }
            }
        }
    }

    /// Yields the running thread to the one the policy has ready here, if
    /// any.
    pub(crate) fn yield_current(&self) {
        let shared = self.shared();
        shared.sources.poll(self);
        match self.with_policy(|policy, cx| policy.next_local(cx)) {
            Some(next) => self.switch_to(To::Thread(next), Pending::Requeue),
            // A thread that yields with nothing else to run would go on
            // for ever after a shutdown: to the scheduler loop, which leaves.
            None if shared.is_shut_down() => self.switch_to(To::Loop, Pending::Requeue),
            None => {}
        }
    }

    /// Makes `next` the running thread and returns its context, or the
    /// scheduler loop's when there is none. The thread learns which
    /// processor resumed it from its header, without a TLS lookup.
    #[inline]
    fn enter_context(&self, mut next: Option<Thread>) -> *const Context {
        // A suspended thread is held, not run (see `thread`'s docs).
        while next.as_ref().is_some_and(|t| {
            let h = t.header();
            held_back(h, h.control.load(Relaxed))
        }) {
            let held = next.take().expect("checked above");
            let c = held.header().control.load(Acquire);
            if c & TERMINATED != 0 && !held.header().exiting.load(Relaxed) {
                // It never runs again: drop the runtime's reference.
                held.header().control.fetch_or(DROPPED, AcqRel);
                drop(held);
            } else if let Some(resumed) = try_hold(held) {
                next = Some(resumed);
                break;
            }
            if self.membership.load(Relaxed) == ACTIVE {
                next = self.with_policy(|policy, cx| policy.next(cx));
            }
        }
        self.mark_dispatch(next.is_some());
        let owner = self.owner();
        match next {
            Some(next) => {
                claim(&next, self);
                let to = next.context_ptr();
                // SAFETY: `running` is our driver's, set in `bind`; only
                // its kernel thread (this one) touches it.
                unsafe { (*owner.running).set(next.as_ptr().as_ptr()) };
                // (Its run time is counted from `since`: the clock read of
                // the `account` that switched the last thread out, or the
                // scheduler loop's, one read per switch.)
                owner.current = Some(next);
                to
            }
            None => owner.sched,
        }
    }

    /// Adds the running thread's time since it was switched to (when the
    /// runtime accounts it), and starts the next thread's from the same
    /// clock read: one `rdtsc` a switch, and a plain load and store of the
    /// count. The C API, which accounts (`thread_info` reports it), pays two
    /// of them per fork+join: about 11 ns, 5-6% of it, on the development
    /// VM.
    #[inline]
    fn account(&self, t: &Thread) {
        let owner = self.owner();
        if owner.account_cpu {
            let now = sys::cycles();
            let ran = now.wrapping_sub(owner.since);
            owner.since = now;
            // Only the processor running `t` writes its count, and the next
            // one to run it is handed `t` through a queue or slot (release,
            // acquire), after this store: a plain load and store suffice.
            let ticks = &t.header().cpu_ticks;
            ticks.store(ticks.load(Relaxed).wrapping_add(ran), Relaxed);
        }
    }

    /// Starts the run time of a thread the scheduler loop switches to (when
    /// the runtime accounts it): the loop's time is nobody's.
    #[inline]
    fn start_account(&self) {
        let owner = self.owner();
        if owner.account_cpu {
            owner.since = sys::cycles();
        }
    }

    /// Switches the running thread away and holds it (it suspended itself);
    /// returns once it is resumed, on whichever processor.
    pub(crate) fn switch_away_held(&self) -> &'static Processor {
        let owner = self.owner();
        let me = owner
            .current
            .take()
            .expect("switch_away_held outside a thread");
        self.account(&me);
        let from = me.context_ptr();
        let my_header = me.as_ptr();
        owner.pending = Pending::Hold(me);
        let to = self.next_context();
        switch_out_to(from, to, my_header)
    }

    /// The next context: the thread the policy chooses (a handoff, straight
    /// from thread to thread), else the scheduler loop. A processor that is
    /// leaving the set, or whose runtime shut down, goes to its scheduler
    /// loop.
    #[inline]
    fn next_context(&self) -> *const Context {
        // After a shutdown, to the loop, which leaves: a thread that
        // spawns its successor and exits would otherwise relay for ever.
        let next = if self.membership.load(Relaxed) == ACTIVE && !self.shared().is_shut_down() {
            self.with_policy(|policy, cx| policy.next(cx))
        } else {
            None
        };
        self.enter_context(next)
    }

    /// Switches away from the running thread, leaving `pending` for whoever
    /// runs next: straight to the thread the policy picks if there is one
    /// (handoff), else to the scheduler loop. Returns when the thread is
    /// resumed, possibly on another processor.
    pub(crate) fn switch_away(&self, make_pending: impl FnOnce(Thread) -> Pending) {
        self.switch_to(To::Policy, make_pending);
    }

    /// As [`Processor::switch_away`], to `to`.
    #[inline]
    fn switch_to(&self, mut to: To, make_pending: impl FnOnce(Thread) -> Pending) {
        let owner = self.owner();
        // Threads handed off among themselves never pass through the
        // scheduler loop: ask the event sources here too (those that read
        // the clock every so often).
        owner.ticks = owner.ticks.wrapping_add(1);
        let tick = owner.ticks.is_multiple_of(Sources::TICKS);
        if tick {
            // Threads that only yield would hand the processor among
            // themselves for ever after a shutdown: every so often, look,
            // and go to the scheduler loop, which leaves (the chosen
            // thread is abandoned with the others still queued).
            if self.shared().is_shut_down() {
                if let To::Thread(t) = to {
                    self.make_ready(t, Ready::Yielded);
                }
                to = To::Loop;
            }
        }
        self.shared().sources.at_switch(tick, self);
        let owner = self.owner();
        let me = owner.current.take().expect("switch_away outside a thread");
        self.account(&me);
        let from = me.context_ptr();
        let my_header = me.as_ptr();
        owner.pending = make_pending(me);
        let to = match to {
            To::Thread(t) => self.enter_context(Some(t)),
            To::Policy => self.next_context(),
            To::Loop => self.enter_context(None),
        };
        switch_out_to(from, to, my_header);
    }

    /// Ends the running thread: its stack is released by whoever runs next.
    pub(crate) fn exit_current(&self) -> ! {
        let owner = self.owner();
        let me = owner.current.take().expect("exit outside a thread");
        self.account(&me);
        owner.pending = Pending::Exit(me);
        let to = self.next_context();
        // SAFETY: `to` as in `switch_out_to`; nothing on this stack is used
        // again (the caller dropped its locals), and the stack is released
        // only after the switch, by `finish_switch`.
        unsafe { arch::resume(to) }
    }

    /// The scheduler loop, run by `driver`'s kernel thread: runs threads
    /// until the runtime shuts down, the processor leaves the set, or the
    /// driver loses it (a thread of the driver's came back from the kernel
    /// to find it taken and switched to this loop to be handed back).
    pub(crate) fn run(&self, driver: &impl Driver) -> RunEnd {
        let shared = self.shared();
        loop {
            if !driver.drives(self) {
                return RunEnd::Lost;
            }
            self.finish_switch();
            if shared.is_shut_down() {
                return RunEnd::ShutDown;
            }
            if self.is_stopping() && driver.stop(self) {
                return RunEnd::Stopped;
            }
            shared.sources.poll(self);
            driver.pin_for(self);
            match self.with_policy(|policy, cx| policy.next(cx)) {
                Some(t) => {
                    self.start_account();
                    let to = self.enter_context(Some(t));
                    let sched = self.owner().sched;
                    // `t` was held or dropped (suspended, terminated) and
                    // nothing else was ready: `to` is this loop's own
                    // context, which is running, not saved. Look again.
                    if ptr::eq(to, sched) {
                        continue;
                    }
                    // SAFETY: `sched` is the driver's scheduler context, on
                    // its kernel thread's own stack, saved here and resumed
                    // only by a thread this processor (or the driver) runs; `to` is a
                    // queued thread's context, saved or prepared and not
                    // resumed since.
                    unsafe { arch::switch(sched, to) };
                }
                None => self.idle(shared),
            }
        }
    }

    /// Whether there looks to be work for this processor (or a reason to
    /// stop idling): cheap loads only.
    pub(crate) fn sees_work(&self, shared: &Set) -> bool {
        shared.is_shut_down()
            || self.is_stopping()
            || shared.sources.switch_ready()
            || self.with_policy(|policy, cx| policy.has_ready(cx))
            || self.owner().queue.others_have_work()
    }

    /// Takes a thread that has sat in another processor's next-to-run slot
    /// for [`sched::NEXT_STEAL_AFTER`], queuing it here; `seen` keeps
    /// what was in each slot and since when.
    fn steal_stale_next(
        &self,
        shared: &Set,
        seen: &mut Vec<(usize, *const Header, Instant)>,
    ) -> bool {
        let now = Instant::now();
        let victims: Vec<usize> = self.owner().queue.victim_indices().collect();
        for v in victims {
            let slot = &shared.processors[v].next;
            let who = slot.peek();
            match seen.iter_mut().find(|(i, _, _)| *i == v) {
                Some(entry) if entry.1 == who => {
                    if !who.is_null()
                        && now.duration_since(entry.2) >= sched::NEXT_STEAL_AFTER
                        && self.steal_next_if_still(slot, who)
                    {
                        return true;
                    }
                }
                Some(entry) => *entry = (v, who, now),
                None => seen.push((v, who, now)),
            }
        }
        false
    }

    /// Nothing to run: spin a while, then sleep until woken (or until the
    /// earliest timer is due). Returns when there may be work.
    fn idle(&self, shared: &Set) {
        if shared.processors.len() > 1 {
            shared.spinning_enter();
            let mut seen = Vec::new();
            let mut found = false;
            for i in 0..shared.spin_tries() {
                if self.sees_work(shared) {
                    found = true;
                    break;
                }
                if i % 64 == 63
                    && (shared.sources.any_ready() || self.steal_stale_next(shared, &mut seen))
                {
                    found = true;
                    break;
                }
                std::hint::spin_loop();
            }
            if found {
                shared.spinning_exit_found_work();
                return;
            }
            // Give up spinning, and offer the core while asleep.
            self.willing_to_yield.store(true, Relaxed);
            self.sleep.store(0, Relaxed);
            shared.sleeper_enter(self.index);
            shared.spinning_exit();
        } else {
            if self.sees_work(shared) || shared.sources.any_ready() {
                return;
            }
            self.willing_to_yield.store(true, Relaxed);
            self.sleep.store(0, Relaxed);
            shared.sleeper_enter(self.index);
        }
        // Pairs with `light_fence` in `Shared::notify_work`: either the
        // notifier sees us among the sleepers, or we see its work below.
        ferry_queue::wait::heavy_fence();
        if self.sees_work(shared) || shared.sources.any_ready() || self.steal_stranded_next(shared)
        {
            shared.sleeper_exit(self.index);
            self.willing_to_yield.store(false, Relaxed);
            return;
        }
        let mut looked = !shared.host().watches_deadlocks();
        while self.sleep.load(Acquire) == 0 && !shared.is_shut_down() {
            // Sleep no longer than until the earliest timer, then look again.
            if let Some(wait) = shared.sources.until_next() {
                if wait.is_zero() {
                    break;
                }
                sys::futex_wait(&self.sleep, 0, Some(wait));
                break;
            }
            // The last processor to sleep, with nothing pending: look for a
            // deadlock, twice a grace apart (once per idle spell).
            if !looked {
                looked = true;
                if let Some(seen) = shared.host().quiet() {
                    sys::futex_wait(&self.sleep, 0, Some(DEADLOCK_GRACE));
                    if self.sleep.load(Acquire) == 0 {
                        shared.host().confirm(seen);
                    }
                    continue;
                }
            }
            sys::futex_wait(&self.sleep, 0, None);
        }
        shared.sleeper_exit(self.index);
        self.willing_to_yield.store(false, Relaxed);
        shared.host().woke();
    }

    /// Before sleeping: if another processor's next-to-run slot holds a
    /// thread, waits [`sched::NEXT_STEAL_AFTER`] and steals it if it is
    /// still the same one (its owner is busy with something else). A slot
    /// whose occupant changed meanwhile belongs to a processor that is
    /// scheduling; a thread put there after our `heavy_fence` wakes us.
    fn steal_stranded_next(&self, shared: &Set) -> bool {
        let occupied: Vec<(usize, *const Header)> = self
            .owner()
            .queue
            .victim_indices()
            .map(|v| (v, shared.processors[v].next.peek()))
            .filter(|(_, who)| !who.is_null())
            .collect();
        if occupied.is_empty() {
            return false;
        }
        let start = Instant::now();
        while start.elapsed() < sched::NEXT_STEAL_AFTER {
            std::hint::spin_loop();
        }
        occupied
            .into_iter()
            .any(|(v, who)| self.steal_next_if_still(&shared.processors[v].next, who))
    }

    /// Takes the thread in another processor's next-to-run `slot` if `who`
    /// still sits there, and makes it ready here.
    fn steal_next_if_still(&self, slot: &NextSlot, who: *const Header) -> bool {
        if slot.peek() != who {
            return false;
        }
        match slot.take() {
            Some(t) => {
                self.with_policy(|policy, cx| policy.ready(cx, t, Ready::Woken));
                true
            }
            None => false,
        }
    }

    /// Hands every thread still queued here to `abandon`, and drops the
    /// stacks this processor still holds; `lent`: its driver was away in a
    /// kernel call, whose thread keeps the processor's reference to it.
    ///
    /// # Safety
    /// No kernel thread runs this processor any more.
    pub(crate) unsafe fn drain(&self, lent: bool, mut abandon: impl FnMut(Thread)) {
        let owner = self.owner();
        owner.queue.clear(&mut abandon);
        if let Some(t) = self.next.take() {
            abandon(t);
        }
        if lent {
            // Its thread runs on, away in the kernel, on this reference.
            std::mem::forget(owner.current.take());
        }
        owner.current = None;
        owner.pending = Pending::None;
        for stack in owner.stacks.drain(..) {
            StackCache::global().put(stack);
        }
        // SAFETY: as for `owner` (the contract): nobody drives it.
        unsafe { (*self.blocks.get()).clear() };
    }

    /// A freed small thread block from this processor's cache, for a spawn
    /// here.
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn take_block(&self) -> Option<SmallBlock> {
        // SAFETY: the caller drives us; the borrow ends with the pop, which
        // frees nothing.
        unsafe { (*self.blocks.get()).pop() }
    }

    /// Keeps a freed small thread block in this processor's cache if there
    /// is room; frees it otherwise.
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn keep_block(&self, block: SmallBlock) {
        // SAFETY: the caller drives us; the borrow ends with the push, which
        // frees nothing (the vector has its full capacity from the start).
        let blocks = unsafe { &mut *self.blocks.get() };
        if blocks.len() < LOCAL_BLOCKS {
            blocks.push(block);
        }
    }

    /// How many freed small thread blocks this processor keeps (for tests).
    ///
    /// # Safety
    /// The caller drives this processor.
    #[cfg(test)]
    pub(crate) unsafe fn cached_blocks(&self) -> usize {
        // SAFETY: as in `take_block`.
        unsafe { (*self.blocks.get()).len() }
    }

    /// Wakes this processor if it sleeps in `idle`.
    pub(crate) fn wake(&self) {
        self.sleep.store(1, Release);
        sys::futex_wake_one(&self.sleep);
    }
}

/// Records in `t`'s header that `p` is about to switch to it. Only the
/// processor doing so calls it, while the thread is not running.
#[inline]
fn claim(t: &Thread, p: &Processor) {
    t.header()
        .processor
        .store(ptr::from_ref(p).cast_mut().cast(), Relaxed);
}

/// The processor that last switched to the thread of `header` (see
/// [`claim`]), if any has.
pub(crate) fn last_of(header: &Header) -> Option<&'static Processor> {
    // SAFETY: a non-null `processor` was stored by `claim` and points into
    // the runtime's processors, which live as long as the runtime the
    // block holds.
    unsafe { header.processor.load(Acquire).cast::<Processor>().as_ref() }
}

/// The processor that switched to the thread owning `header`.
///
/// # Safety
/// Called by that thread, running (so its block is alive and [`claim`]
/// was called for this run).
#[inline]
unsafe fn resumed_on(header: NonNull<Header>) -> &'static Processor {
    // SAFETY: the block is live (the contract) and the processor, owned by
    // the runtime's `Shared`, outlives every thread run on it.
    unsafe { &*header.as_ref().processor.load(Relaxed).cast::<Processor>() }
}

/// Holds suspended thread `t` (its `control` word takes over the runtime's
/// reference), or gives it back if it was resumed meanwhile.
fn try_hold(t: Thread) -> Option<Thread> {
    match t
        .header()
        .control
        .compare_exchange(SUSPENDED, SUSPENDED | HELD, AcqRel, Acquire)
    {
        Ok(_) => {
            let _ = t.into_raw();
            None
        }
        Err(_) => Some(t),
    }
}

/// Holds `t` as [`try_hold`] does, or queues it on `p` if it was resumed.
fn hold(t: Thread, why: Ready, p: &Processor) {
    if let Some(t) = try_hold(t) {
        p.make_ready(t, why);
    }
}

/// Saves the running thread's context into `from`, continues `to`, and once
/// someone resumes the thread (on whichever processor) finishes the switch
/// there and puts back the thread's errno. Returns the processor it resumed
/// on. The caller holds one level of the critical count, which `to`
/// inherits and the resumer hands back.
pub(crate) fn switch_out_to(
    from: *mut Context,
    to: *const Context,
    my_header: std::ptr::NonNull<Header>,
) -> &'static Processor {
    // errno belongs to the kernel thread; a user-level thread keeps its own
    // on its stack across the switch and puts it back wherever it resumes.
    let errno_slot = crate::sys::errno_location();
    // SAFETY: the calling kernel thread's own errno slot.
    let errno = unsafe { *errno_slot };
    // SAFETY: `from` is the running thread's own context slot, kept alive by
    // its `Thread` (in a pending action, a queue or a lost-thread slot) until
    // it is resumed; `to` is a context that was saved or prepared and not
    // resumed since (a queued thread's, or a scheduler loop's, which is
    // suspended while any thread runs on its processor).
    unsafe { arch::switch(from, to) };
    // Resumed, possibly by another processor on another kernel thread: the
    // one that resumed us left itself in our header.
    // SAFETY: we run, so the processor that switched to us holds our block
    // as its `current`; it wrote `processor` just before.
    let p = unsafe { resumed_on(my_header) };
    p.finish_switch();
    // SAFETY: the errno slot of the kernel thread driving `p`, which is the
    // one running us now (set in `bind`).
    unsafe { *p.owner().errno = errno };
    p
}

/// What the event sources hand a processor goes to its policy, counted in
/// the runtime's upcall statistics.
impl Deliver for Processor {
    fn event(&self, event: Event<'_>, cause: Instant) {
        let kind = match event {
            Event::Blocked(_) => Kind::Blocked,
            Event::Unblocked(_) => Kind::Unblocked,
            Event::Preempted(_) => Kind::Preempted,
            Event::ProcessorAdded(_) => Kind::ProcessorAdded,
            Event::ProcessorRemoved(_) => Kind::ProcessorRemoved,
        };
        self.policy_event(event);
        self.shared().counters.record(kind, cause);
    }

    fn made_ready(&self) {
        let shared = self.shared();
        if shared.processors.len() > 1 {
            shared.notify_work();
        }
    }
}
