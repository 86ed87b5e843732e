//! The thread object: a thread's control block ([`Header`], in `raw`), the
//! [`Thread`] handle on it, its identity, its park and control words, and
//! the [`Schedule`] trait through which a thread reaches the scheduler of
//! its runtime.
//!
//! This room owns what a thread *is*; it must not run, switch or queue a
//! thread (the rooms above do: `sched`, `processor`, and the thread API in
//! `thread`), and it reaches nothing above it but through [`Schedule`].
//!
//! # The thread's park state
//!
//! `Header::state` carries at most one wakeup token, like
//! `std::thread::park`:
//!
//! | value | meaning | set by |
//! |-------|---------|--------|
//! | `EMPTY` | running or runnable, no token | the thread (`NOTIFIED -> EMPTY`, a swap, as it takes a token), `unpark` (`PARKED -> EMPTY`, then it queues the thread), `finish_switch` (`NOTIFIED -> EMPTY`, a swap, for a thread that was unparked while switching out) |
//! | `NOTIFIED` | a token waits: the next `park` returns at once | `unpark` (`EMPTY -> NOTIFIED`, `PARKING -> NOTIFIED`, or `NOTIFIED -> NOTIFIED`: a token already there is written again) |
//! | `PARKING` | the thread decided to block and is switching out | the thread (`EMPTY -> PARKING`) |
//! | `PARKED` | switched out, in no queue; only `unpark` brings it back | `finish_switch` (`PARKING -> PARKED`) |
//!
//! Every change of the word is a read-modify-write (Release on the
//! `unpark` side, Acquire on the taking side), never a load then a store,
//! so all changes fall in one order. A waker sets its condition, then
//! unparks; the thread takes the token, then looks at its condition. If
//! the unpark's write comes first, the take reads from it (or from a later
//! `NOTIFIED -> NOTIFIED`) and sees the condition; if the take comes
//! first, the unpark finds no token and leaves one (or queues the thread),
//! and the next `park` returns at once. A token taken by a load and a plain
//! store, against an `unpark` that wrote nothing when it found one, lost
//! wakeups: a join on two processors parked for ever. The transitions live
//! in `park_word`, which `tests/loom_park.rs` compiles against loom's
//! atomics (`--cfg ferry_loom`; it fails all three of its models with the
//! old protocol).
//!
//! # Suspension: the `control` word
//!
//! Mach's three thread states (running, will-suspend, suspended; 003 §4)
//! live in `Header::control`, beside the scheduling state above:
//!
//! | value | meaning | set by |
//! |-------|---------|--------|
//! | `RUNNING` | runs and is scheduled as usual | [`Thread::resume`] (from anything) |
//! | `WILL_SUSPEND` | still runs; a [`Thread::wait_suspended`] will stop it | [`Thread::suspend`] (from `RUNNING`) |
//! | `SUSPENDED` | must not run: the next processor that would run it holds it instead | [`Thread::wait_suspended`] (from `WILL_SUSPEND`) |
//! | `SUSPENDED \| HELD` | held: in no queue, switched out; only `resume` brings it back | the processor that held it (`SUSPENDED -> SUSPENDED \| HELD`, CAS); [`Builder::suspended`](crate::thread::Builder::suspended) (a store, before the thread is shared) |
//! | `\| TERMINATED` | never runs again; sticky (`resume` leaves it) | [`Thread::terminate`] (`fetch_or`) |
//! | `\| TERMINATED \| DROPPED` | a processor about to run it dropped the runtime's reference instead | that processor (`fetch_or`) |
//!
//! A thread that is running when it becomes `SUSPENDED` or `TERMINATED`
//! is stopped by the preemption signal (`upcall::preempt`): promptly,
//! with or without a time slice, but never inside the runtime, under a
//! [`SpinLock`](crate::sync::SpinLock), in the C library or while it
//! panics (it stops as soon as it leaves those). One in an announced
//! blocking call ([`crate::blocking`] and the wrappers built on it) stops
//! when the call returns, before it runs anything after it; meanwhile it
//! counts as stopped, in the call
//! ([`Suspension::StoppedInCall`](crate::thread::Suspension::StoppedInCall)).
//!
//! A thread whose closure has returned (or that called [`exit_with`](crate::thread::exit_with)) is
//! past stopping: it sets `Header::exiting` and then loads `control`
//! (`begin_exit`). From then on a stop or a termination leaves it alone,
//! so a termination can never drop it between publishing its result and
//! waking its joiner:
//!
//! | `exiting` | written by | read by |
//! |-----------|------------|---------|
//! | `false -> true` (Relaxed store) | the thread itself, before it publishes its result | the preemption handler on its own kernel thread; a processor about to run it and its terminator, after its switch or park ordered the store |
//! | `true -> false` (Relaxed store) | the thread itself, when the load after the store found `TERMINATED`: it stops at once and its terminator completes it | as above |
//!
//! A termination whose `TERMINATED` the thread's load missed finds the
//! thread exiting (or finished) once it is off its processor, and leaves it
//! to finish on its own.
//!
//! A processor checks the word (one relaxed load) each time it is about to
//! switch to a thread, and holds a `SUSPENDED` one instead: it keeps the
//! runtime's reference to the thread in the word's owner (the `HELD` bit)
//! and picks another. `resume` swaps in `RUNNING`; if the old value had
//! `HELD`, it takes that reference back and queues the thread. The CAS and
//! the swap decide between them who owns the reference, so a thread resumed
//! while it is being held is queued exactly once.
//!
//! The thread states themselves (new, runnable, running, parked, exited) are
//! where a thread is: in a run queue (runnable), in a processor's `current`
//! (running), nowhere but a waiter list (parked), or gone (exited).
//!

pub(crate) mod locals;
pub(crate) mod park_word;
pub(crate) mod raw;
pub(crate) mod wait_record;

/// The atomics `park_word` uses (its loom model swaps in loom's).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, Ordering};
}

use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};

use crate::arch::Context;
use crate::stack::Stack;
use locals::LocalTable;
pub(crate) use raw::{Header, SmallBlock};

/// How a thread reaches the scheduler of its runtime: the one thing the
/// header knows of the rooms above it (as a task reaches its scheduler in
/// tokio). The runtime implements it; every header holds it.
///
/// Each method is called on the thread's own runtime, from any kernel
/// thread (a processor of that runtime or of another, or a plain one).
pub(crate) trait Schedule: Send + Sync + 'static {
    /// `t` was parked and is runnable again, for `why`: queue it (on the
    /// calling processor if it is one of this runtime's, else where any
    /// processor finds it) and let an idle processor know.
    fn schedule(&self, t: Thread, why: Ready);

    /// Stops the calling thread for good: it was terminated before it
    /// began to exit (see [`begin_exit`]); its terminator completes it.
    fn stop_terminated(&self) -> !;

    /// The runtime behind this scheduler, for the rooms that know its type.
    fn as_any(&self) -> &dyn Any;
}

/// `Header::control`: see the module docs.
pub(crate) const RUNNING: u32 = 0;
pub(crate) const WILL_SUSPEND: u32 = 1;
pub(crate) const SUSPENDED: u32 = 2;
pub(crate) const HELD: u32 = 4;
pub(crate) const TERMINATED: u32 = 8;
pub(crate) const DROPPED: u32 = 16;
/// Whether the thread of `h` must not run now: it is suspended, or
/// terminated before it began to exit. One load of `control` in the usual
/// case; the `exiting` flag is read only when a stop is asked for.
#[inline]
pub(crate) fn held_back(h: &Header, control: u32) -> bool {
    control & (SUSPENDED | TERMINATED) != 0 && !h.exiting.load(Relaxed)
}

/// Marks the calling thread as exiting: its result is about to be
/// published and its joiner woken, and from here on neither a stop nor a
/// termination acts on it. False if it was terminated first: then it must
/// stop at once ([`Schedule::stop_terminated`]) and leave its end to the terminator.
///
/// No fence and no read-modify-write: the flag is read by the thread's own
/// kernel thread (the preemption handler) or after a switch or park of the
/// thread, which orders it; a termination whose `TERMINATED` this load
/// misses finds the thread exiting (or finished) when it looks, after the
/// thread is off its processor, and leaves it to finish on its own.
#[inline]
pub(crate) fn begin_exit(header: &Header) -> bool {
    header.exiting.store(true, Relaxed);
    if header.control.load(Acquire) & TERMINATED != 0 {
        header.exiting.store(false, Relaxed);
        return false;
    }
    true
}

/// A handle on a user-level thread: one pointer to its control block (see
/// `raw`), which lives while any handle does.
pub struct Thread {
    ptr: NonNull<Header>,
}

// SAFETY: the control block's shared parts are atomic or written once before
// the block is shared; the parts that are not (`context`, `stack`, `locals`)
// are touched only by the processor switching the thread or by the thread
// itself, one at a time (see `raw`'s field docs).
unsafe impl Send for Thread {}
// SAFETY: as above.
unsafe impl Sync for Thread {}

/// A thread's identifier, unique within its runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(pub(crate) u64);

impl ThreadId {
    /// The number behind the id.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// Alert bit (`Header::alert`, `thread::alert`'s module docs): an alert
/// is pending.
pub(crate) const ALERT_PENDING: u8 = 1;
/// Alert bit: the thread does not see alerts now.
pub(crate) const ALERT_BLOCKED: u8 = 2;

impl Thread {
    /// The thread's id.
    pub fn id(&self) -> ThreadId {
        self.header().id
    }

    /// The thread's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.header().name.as_deref()
    }

    /// The thread's scheduling priority.
    pub fn priority(&self) -> Priority {
        Priority::from_level(self.header().priority.load(Relaxed))
    }

    /// Changes the thread's scheduling priority; it takes effect the next
    /// time the thread is queued (a thread waiting in a run queue keeps its
    /// place until it runs). A thread serving a call on an
    /// [`rpc::Activation`](crate::rpc::Activation) runs at its caller's
    /// priority and cannot be raised above it: see
    /// [`thread::set_priority`](crate::thread::set_priority).
    pub fn set_priority(&self, priority: Priority) {
        self.header()
            .priority
            .store(priority.level() as u8, Relaxed);
    }

    /// Whether the thread has an alert pending and allows alerts, so that a
    /// blocking call it enters now is aborted at entry (the alert word's
    /// protocol, with the entry's fence, is in `thread::alert`'s module
    /// docs). Read by the thread itself after it published its call.
    pub(crate) fn alert_aborts_calls(&self) -> bool {
        self.header().alert.load(Acquire) & (ALERT_PENDING | ALERT_BLOCKED) == ALERT_PENDING
    }

    /// Gives the thread a wakeup token: if it is parked it becomes runnable,
    /// otherwise its next park returns at once.
    pub fn unpark(&self) {
        self.unpark_as(Ready::Woken);
    }

    /// [`unpark`](Thread::unpark), telling the policy why (`Woken`, or
    /// `Expired` from a timer) if it was parked.
    pub(crate) fn unpark_as(&self, why: Ready) {
        if park_word::unpark(&self.header().state) {
            self.header().scheduler.schedule(self.clone(), why);
        }
    }

    /// Whether the thread was asked to stop (suspended and waited for, or
    /// terminated) and so must not go on running.
    pub(crate) fn must_stop(&self) -> bool {
        let h = self.header();
        held_back(h, h.control.load(SeqCst))
    }

    /// Whether the thread has finished (returned, panicked or exited).
    pub fn is_finished(&self) -> bool {
        raw::is_complete(self.ptr)
    }

    /// A word kept in the thread for whoever embeds ferry (ferry's C API
    /// keeps the thread's `cthread_t` there); ferry never interprets it
    /// (the overflow report passes the tag given at spawn to the
    /// embedder's [`set_tag_namer`](crate::stack::set_tag_namer)). Zero
    /// until set.
    pub fn tag(&self) -> usize {
        self.header().tag.load(Acquire)
    }

    /// Sets the embedder's word; see [`Thread::tag`].
    pub fn set_tag(&self, tag: usize) {
        self.header().tag.store(tag, Release);
    }

    /// Lends the thread's local table to `f`.
    ///
    /// # Safety
    /// Only the thread itself, while running, and `f` must not lend the
    /// table again (no re-entry, no user code).
    pub(crate) unsafe fn with_locals<R>(&self, f: impl FnOnce(&mut LocalTable) -> R) -> R {
        // SAFETY: by the caller's contract this is the only loan of the table.
        f(unsafe { &mut *self.header().locals.get() })
    }

    pub(crate) fn state(&self) -> &AtomicU32 {
        &self.header().state
    }

    pub(crate) fn context_ptr(&self) -> *mut Context {
        self.header().context.get()
    }

    /// The usable range of the thread's own stack; `None` for an adopted
    /// thread, which runs on a stack ferry did not make. For the running
    /// thread itself (who holds a lock: `sync::owner`).
    pub(crate) fn stack_range(&self) -> Option<std::ops::Range<usize>> {
        // SAFETY: the field changes only when the exited thread's stack is
        // taken; the caller is the thread, running, so it has not exited.
        let stack = unsafe { &*self.header().stack.get() };
        stack
            .as_ref()
            .map(|s| s.bottom() as usize..s.top() as usize)
    }

    /// Takes the stack out of an exited thread.
    ///
    /// # Safety
    /// The thread has exited and switched away for good, and the caller is
    /// the processor that finished that switch.
    pub(crate) unsafe fn take_stack(&self) -> Option<Stack> {
        // SAFETY: nothing runs on the stack any more and nobody else touches
        // the field (the caller's contract).
        unsafe { (*self.header().stack.get()).take() }
    }
}

impl PartialEq for Thread {
    fn eq(&self, other: &Thread) -> bool {
        self.ptr == other.ptr
    }
}

impl Eq for Thread {}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("priority", &self.priority())
            .finish()
    }
}

/// Whoever must be woken: a ferry thread or a plain kernel thread.
#[derive(Debug, Clone)]
pub(crate) enum Unparker {
    Ferry(Thread),
    Kernel(std::thread::Thread),
}

impl Unparker {
    pub(crate) fn unpark(&self) {
        self.unpark_as(Ready::Woken);
    }

    /// [`unpark`](Unparker::unpark), telling a ferry thread's policy why.
    pub(crate) fn unpark_as(&self, why: Ready) {
        match self {
            Unparker::Ferry(t) => t.unpark_as(why),
            Unparker::Kernel(t) => t.unpark(),
        }
    }
}

/// A panic that ended a thread, as [`JoinHandle::join`](crate::JoinHandle::join) returns it.
pub struct Panic(Box<dyn Any + Send>);

impl Panic {
    /// The panic's message, if it was a string.
    pub fn message(&self) -> Option<&str> {
        self.0
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| self.0.downcast_ref::<String>().map(String::as_str))
    }

    /// The payload `panic!` was called with.
    pub fn into_payload(self) -> Box<dyn Any + Send> {
        self.0
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Panic").field(&self.message()).finish()
    }
}

impl fmt::Display for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(m) => write!(f, "thread panicked: {m}"),
            None => f.write_str("thread panicked"),
        }
    }
}

impl std::error::Error for Panic {}

/// How urgently a thread wants a processor.
///
/// The default policy is strict among the threads of one processor and of
/// the injector: a runnable `High` thread runs before any `Normal` one, and a
/// `Normal` one before any `Low` one. Across processors it is approximate: a
/// processor runs its own `Normal` threads while another one's queue may
/// still hold a `High` thread it has not stolen. A running thread is never
/// interrupted for a higher one (a time slice, if set, preempts it only
/// when the slice ends), and a thread
/// woken by another runs next only at `Normal` priority (the next-to-run
/// slot, unless a just-spawned thread waits there: then it queues at the
/// back of the ring), and a thread whose sleep or timed wait ended runs
/// ahead of the other queued threads of its level, in the order the
/// timers fired; `Low` threads can starve while higher ones keep
/// running.
///
/// ```
/// use ferry::thread::{Builder, Priority};
///
/// let order = ferry::Runtime::builder()
///     .processors(1)
///     .run(|| {
///         let log = std::sync::Arc::new(ferry::sync::Mutex::new(Vec::new()));
///         let spawn = |p: Priority, tag: &'static str| {
///             let log = log.clone();
///             Builder::new().priority(p).spawn(move || log.lock().push(tag)).unwrap()
///         };
///         let low = spawn(Priority::Low, "low");
///         let high = spawn(Priority::High, "high");
///         let normal = spawn(Priority::Normal, "normal");
///         for h in [low, high, normal] {
///             h.join().unwrap();
///         }
///         let order = log.lock().clone();
///         order
///     })
///     .unwrap();
/// assert_eq!(order, ["high", "normal", "low"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Runs only when no `Normal` or `High` thread is runnable here.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Runs before `Normal` and `Low` threads.
    High,
}

/// Priority levels, one ring each.
pub(crate) const LEVELS: usize = 3;

impl Priority {
    /// The ring index: `High` first.
    pub(crate) fn level(self) -> usize {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }

    /// The priority of ring `level` (anything past `Low` is `Low`).
    pub(crate) fn from_level(level: u8) -> Priority {
        match level {
            0 => Priority::High,
            1 => Priority::Normal,
            _ => Priority::Low,
        }
    }
}

/// Why a thread became runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// It was just made.
    Spawned,
    /// It gave way with `yield_now`.
    Yielded,
    /// Another thread unparked it.
    Woken,
    /// A timer unparked it: its sleep or timed wait reached its deadline.
    Expired,
    /// A poller gave it an incoming call (an `rpc` activation). Delivered
    /// by the processor's own event sources with nothing else ready there,
    /// the processor switches straight to it; otherwise the policy sees it
    /// as [`Ready::Woken`].
    Call,
}
