//! Processors: one kernel thread per core the runtime holds, each running
//! user-level threads from its own run queue, stealing from the others, and
//! parking on a futex when there is nothing to run.
//!
//! This room owns which [`Thread`] runs where and the switch between them. It
//! must not block its kernel thread anywhere but in [`Processor::idle`], and it
//! never caches a processor's address across a switch: code that resumes after
//! a switch may be on another kernel thread, so it asks [`current`] again.
//!
//! # Who touches what
//!
//! A processor's [`Owner`] part (run-queue producer, stealing handles, its
//! scheduler context, the running thread, the pending action) is touched only
//! by the kernel thread the processor runs on; the shared part (`sleep`) by
//! anyone.
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
//! | `Requeue(t)` | `yield_now` | `t` goes to the back of this processor's queue |
//! | `Park(t)` | a thread that blocks | `t.state`: `PARKING -> PARKED`; if an unpark came first (`NOTIFIED`), `t` is queued again at once |
//! | `Exit(t)` | a finished thread | `t`'s stack goes back to the cache |

use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicU32, fence};

use ferry_queue::spmc;
use ferry_queue::wait::Spin;

use crate::arch::{self, Context};
use crate::runtime::Shared;
use crate::sys;
use crate::thread::{EMPTY, NOTIFIED, PARKED, PARKING, Thread};

/// Slots in each processor's run queue; a full queue overflows to the
/// runtime's injector.
pub(crate) const LOCAL_QUEUE: usize = 256;

/// A processor looks at the timers at least once per this many switches.
const TIMER_CHECK_EVERY: u32 = 64;

/// A processor looks at the injector before its own queue once per this
/// many scheduling rounds (Go uses 61 for its global queue).
const INJECTOR_FIRST_EVERY: u32 = 61;

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
}

/// The parts of a processor only its own kernel thread touches.
pub(crate) struct Owner {
    local_tx: spmc::Producer<Thread, Spin>,
    local_rx: spmc::Consumer<Thread, Spin>,
    /// One stealing handle on every other processor's queue.
    steal_from: Vec<spmc::Consumer<Thread, Spin>>,
    /// Where the scheduler loop is suspended while a thread runs.
    sched: Context,
    /// The thread running on this processor, if any.
    current: Option<Thread>,
    pending: Pending,
    /// Rotates the first victim of a steal.
    next_victim: usize,
    /// Switches since the last look at the timers.
    ticks: u32,
    /// Calls of `find_work`, to give the injector its turn.
    rounds: u32,
    /// The runtime this processor belongs to (set once, before it runs).
    shared: *const Shared,
}

/// One processor: a kernel thread's worth of user-level scheduling.
pub(crate) struct Processor {
    pub(crate) index: usize,
    owner: UnsafeCell<Owner>,
    /// The processor's futex word while it sleeps in `idle`: `0` asleep (or
    /// about to be), `1` woken. Written by the waker (`1`) and the sleeper
    /// (`0` before it sleeps).
    sleep: AtomicU32,
}

// SAFETY: `owner` is only touched from the kernel thread the processor runs
// on (see the module docs; `owner()` is only called through `current()`,
// which reads that kernel thread's own thread-local); everything else is
// atomic.
unsafe impl Sync for Processor {}
// SAFETY: the handles in `Owner` are `Send`; the processor is built on one
// kernel thread and then used by the one it is handed to.
unsafe impl Send for Processor {}

thread_local! {
    /// The processor this kernel thread runs, or null.
    static CURRENT: Cell<*const Processor> = const { Cell::new(ptr::null()) };
}

/// The processor the calling kernel thread runs, if it runs one.
///
/// Never inlined, so that the compiler cannot keep a thread-local address
/// across a context switch: a user-level thread may resume on another kernel
/// thread.
#[inline(never)]
pub(crate) fn current() -> Option<&'static Processor> {
    let p = CURRENT.with(Cell::get);
    // SAFETY: `CURRENT` is set by `Processor::enter` to a processor owned by
    // the runtime's `Shared`, which outlives every kernel thread that runs
    // it, and cleared before the processor is dropped.
    unsafe { p.as_ref() }
}

impl Processor {
    /// Builds the processors of one runtime, with their queues and each one's
    /// stealing handles on all the others.
    pub(crate) fn build(count: usize) -> Vec<Processor> {
        let queues: Vec<_> = (0..count)
            .map(|_| spmc::channel_with::<Thread, Spin>(LOCAL_QUEUE))
            .collect();
        let stealers: Vec<Vec<_>> = (0..count)
            .map(|i| {
                (1..count)
                    .map(|k| queues[(i + k) % count].1.clone())
                    .collect()
            })
            .collect();
        queues
            .into_iter()
            .zip(stealers)
            .enumerate()
            .map(|(index, ((local_tx, local_rx), steal_from))| Processor {
                index,
                owner: UnsafeCell::new(Owner {
                    local_tx,
                    local_rx,
                    steal_from,
                    sched: Context::empty(),
                    current: None,
                    pending: Pending::None,
                    next_victim: 0,
                    ticks: 0,
                    rounds: 0,
                    shared: ptr::null(),
                }),
                sleep: AtomicU32::new(0),
            })
            .collect()
    }

    /// Records the runtime this processor belongs to.
    ///
    /// # Safety
    /// Called once per processor, before any kernel thread runs it, with the
    /// `Shared` that owns it (which outlives every use of the processor).
    pub(crate) unsafe fn set_shared(&self, shared: *const Shared) {
        self.owner().shared = shared;
    }

    /// The runtime this processor belongs to.
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: set by `set_shared` before the processor ran, to the
        // `Shared` that owns this processor and so outlives this borrow.
        unsafe { &*self.owner().shared }
    }

    /// Makes the calling kernel thread run this processor.
    pub(crate) fn enter(&self) {
        CURRENT.with(|c| c.set(self));
        // Without an alternate signal stack an overflow still kills the
        // process, it just cannot say which thread overflowed.
        let _ = crate::stack::ensure_signal_stack();
    }

    /// Makes the calling kernel thread stop running a processor.
    pub(crate) fn leave() {
        CURRENT.with(|c| c.set(ptr::null()));
    }

    /// The owner-only part.
    #[allow(clippy::mut_from_ref)]
    fn owner(&self) -> &mut Owner {
        // SAFETY: only the kernel thread running this processor gets here
        // (through `current()`), and no caller keeps the reference across a
        // switch or a re-entrant call.
        unsafe { &mut *self.owner.get() }
    }

    /// The thread running on this processor. Panics outside a ferry thread.
    pub(crate) fn current_thread(&self) -> Thread {
        self.owner()
            .current
            .clone()
            .expect("ferry: no user-level thread is running on this processor")
    }

    /// Whether a user-level thread is running (rather than the scheduler loop).
    pub(crate) fn in_thread(&self) -> bool {
        self.owner().current.is_some()
    }

    /// Queues `t` on this processor, or on the injector when the local queue
    /// is full.
    pub(crate) fn push_local(&self, shared: &Shared, t: Thread) {
        if let Err(t) = self.owner().local_tx.try_push(t) {
            shared.inject(t);
        }
    }

    /// Moves one injected thread to this processor's queue, so that a
    /// yielding thread goes behind it; false if there was none.
    pub(crate) fn pull_injected(&self, shared: &Shared) -> bool {
        match shared.take_injected() {
            Some(t) => {
                self.push_local(shared, t);
                true
            }
            None => false,
        }
    }

    /// Whether this processor's own queue looks empty.
    pub(crate) fn local_is_empty(&self) -> bool {
        self.owner().local_rx.is_empty()
    }

    /// Does what the context that switched to us left to do.
    pub(crate) fn finish_switch(&self, shared: &Shared) {
        match std::mem::replace(&mut self.owner().pending, Pending::None) {
            Pending::None => {}
            Pending::Requeue(t) => self.push_local(shared, t),
            Pending::Park(t) => {
                if t.state()
                    .compare_exchange(PARKING, PARKED, AcqRel, Acquire)
                    .is_err()
                {
                    // Unparked while it was still switching out.
                    debug_assert_eq!(t.state().load(Relaxed), NOTIFIED);
                    t.state().store(EMPTY, Relaxed);
                    self.push_local(shared, t);
                }
            }
            Pending::Exit(t) => t.release_stack(),
        }
    }

    /// The next thread this processor should run: its own queue first, then
    /// the injector, then the other processors' queues.
    fn find_work(&self, shared: &Shared) -> Option<Thread> {
        shared.timers.fire_due();
        let owner = self.owner();
        // Now and then the injector goes first, so that threads woken from
        // outside are not starved by local threads that keep each other busy.
        owner.rounds = owner.rounds.wrapping_add(1);
        if owner.rounds.is_multiple_of(INJECTOR_FIRST_EVERY)
            && let Some(t) = shared.take_injected()
        {
            return Some(t);
        }
        if let Some(t) = owner.local_rx.try_pop() {
            return Some(t);
        }
        if let Some(t) = shared.take_injected() {
            return Some(t);
        }
        let n = owner.steal_from.len();
        for k in 0..n {
            let victim = (owner.next_victim + k) % n;
            if let Some(t) = owner.steal_from[victim].try_pop() {
                owner.next_victim = victim + 1;
                return Some(t);
            }
        }
        None
    }

    /// Switches away from the running thread, leaving `pending` for whoever
    /// runs next: straight to the next local thread if there is one
    /// (handoff), else to the scheduler loop. Returns when the thread is
    /// resumed, possibly on another processor.
    pub(crate) fn switch_away(
        &self,
        shared: &Shared,
        make_pending: impl FnOnce(Thread) -> Pending,
    ) {
        let owner = self.owner();
        // Threads handed off among themselves never pass through
        // `find_work`: look at the timers every so often here too.
        owner.ticks = owner.ticks.wrapping_add(1);
        if owner.ticks.is_multiple_of(TIMER_CHECK_EVERY) {
            shared.timers.fire_due();
        }
        let me = owner.current.take().expect("switch_away outside a thread");
        let from = me.context_ptr();
        owner.pending = make_pending(me);
        let to: *const Context = match owner.local_rx.try_pop() {
            Some(next) => {
                let to = next.context_ptr();
                owner.current = Some(next);
                to
            }
            None => &owner.sched,
        };
        // errno belongs to the kernel thread; a user-level thread keeps its
        // own on its stack across the switch and puts it back wherever it
        // resumes.
        let errno = sys::errno();
        // SAFETY: `from` is the running thread's own context slot, kept alive
        // by the `Thread` in `pending` (or by whoever holds it while it is
        // parked) until it is resumed; `to` is a context that was saved or
        // prepared and not resumed since (a queued thread's, or the
        // scheduler loop's, which is suspended while any thread runs).
        unsafe { arch::switch(from, to) };
        // Resumed: possibly on another kernel thread, so ask again.
        let p = current().expect("a ferry thread resumed outside a processor");
        p.finish_switch(shared);
        sys::set_errno(errno);
    }

    /// Ends the running thread: its stack is released by whoever runs next.
    pub(crate) fn exit_current(&self) -> ! {
        let owner = self.owner();
        let me = owner.current.take().expect("exit outside a thread");
        owner.pending = Pending::Exit(me);
        let to: *const Context = match owner.local_rx.try_pop() {
            Some(next) => {
                let to = next.context_ptr();
                owner.current = Some(next);
                to
            }
            None => &owner.sched,
        };
        // SAFETY: `to` as in `switch_away`; nothing on this stack is used
        // again (the caller dropped its locals), and the stack is released
        // only after the switch, by `finish_switch`.
        unsafe { arch::resume(to) }
    }

    /// The scheduler loop: runs threads until the runtime shuts down.
    pub(crate) fn run(&self, shared: &Shared) {
        loop {
            self.finish_switch(shared);
            if shared.is_shut_down() {
                return;
            }
            match self.find_work(shared) {
                Some(t) => {
                    let owner = self.owner();
                    let to = t.context_ptr();
                    owner.current = Some(t);
                    // SAFETY: the scheduler context is this kernel thread's
                    // own stack, saved here and resumed only by this
                    // processor; `to` is a queued thread's context, saved or
                    // prepared and not resumed since.
                    unsafe { arch::switch(&mut owner.sched, to) };
                }
                None => self.idle(shared),
            }
        }
    }

    /// Nothing to run: spin a while, then sleep until woken.
    fn idle(&self, shared: &Shared) {
        for _ in 0..shared.spin_tries() {
            if shared.has_work_hint() || !self.local_is_empty() || shared.is_shut_down() {
                return;
            }
            std::hint::spin_loop();
        }
        self.sleep.store(0, Relaxed);
        shared.add_idle(self.index);
        // Pairs with the fence in `Shared::wake_one`: either the waker sees
        // us in the idle set, or we see its work below.
        fence(SeqCst);
        if shared.has_work_hint() || !self.local_is_empty() || shared.is_shut_down() {
            shared.remove_idle(self.index);
            return;
        }
        if let Some(t) = self.find_work(shared) {
            shared.remove_idle(self.index);
            self.push_local(shared, t);
            return;
        }
        while self.sleep.load(Acquire) == 0 && !shared.is_shut_down() {
            // Sleep no longer than until the earliest timer, then look again.
            if let Some(wait) = shared.timers.until_next() {
                if wait.is_zero() {
                    break;
                }
                let timeout = rustix::thread::futex::Timespec {
                    tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
                    tv_nsec: wait.subsec_nanos().into(),
                };
                let _ = rustix::thread::futex::wait(
                    &self.sleep,
                    rustix::thread::futex::Flags::PRIVATE,
                    0,
                    Some(&timeout),
                );
                break;
            }
            let _ = rustix::thread::futex::wait(
                &self.sleep,
                rustix::thread::futex::Flags::PRIVATE,
                0,
                None,
            );
        }
        shared.remove_idle(self.index);
    }

    /// Drops every thread this processor still holds.
    ///
    /// # Safety
    /// No kernel thread runs this processor any more.
    pub(crate) unsafe fn drain(&self) {
        let owner = self.owner();
        while owner.local_rx.try_pop().is_some() {}
        owner.current = None;
        owner.pending = Pending::None;
    }

    /// Wakes this processor if it sleeps in `idle`.
    pub(crate) fn wake(&self) {
        self.sleep.store(1, Release);
        let _ = rustix::thread::futex::wake(&self.sleep, rustix::thread::futex::Flags::PRIVATE, 1);
    }
}
