//! User-level threads: [`spawn`], [`Builder`], [`JoinHandle`], [`current`],
//! [`yield_now`], and the park/unpark pair every blocking primitive is built
//! on.
//!
//! This room owns a thread's identity, stack, saved context and its park
//! state; it must not pick which thread runs next (that is
//! the `processor` module's job).
//!
//! # The thread's park state
//!
//! `ThreadInner::state` carries at most one wakeup token, like
//! `std::thread::park`:
//!
//! | value | meaning | set by |
//! |-------|---------|--------|
//! | `EMPTY` | running or runnable, no token | the thread (after it consumed a token), `unpark` (`PARKED -> EMPTY`, then it queues the thread), `finish_switch` (`NOTIFIED -> EMPTY` for a thread that was unparked while switching out) |
//! | `NOTIFIED` | a token waits: the next `park` returns at once | `unpark` (`EMPTY -> NOTIFIED`, or `PARKING -> NOTIFIED`) |
//! | `PARKING` | the thread decided to block and is switching out | the thread (`EMPTY -> PARKING`) |
//! | `PARKED` | switched out, in no queue; only `unpark` brings it back | `finish_switch` (`PARKING -> PARKED`) |
//!
//! The thread states themselves (new, runnable, running, parked, exited) are
//! where a thread is: in a run queue (runnable), in a processor's `current`
//! (running), nowhere but a waiter list (parked), or gone (exited).
//!
//! # What must not be held across a switch
//!
//! A ferry thread can stop at any blocking call (`park`, `join`, `sleep`,
//! `yield_now`, and every `ferry::sync` wait) and resume on another kernel
//! thread. So, across such a call, do not hold:
//!
//! - a reference obtained from a `std::thread_local!` (the value belongs to
//!   the kernel thread, which may by then run another ferry thread); use
//!   [`thread_local!`](crate::thread_local) for per-thread state instead;
//! - a `std::sync::Mutex`/`RwLock` guard, or anything else that blocks the
//!   *kernel* thread: another ferry thread on the same processor that waits
//!   for it would block the processor, and the guard may be released from a
//!   different kernel thread than took it (pthread forbids that);
//! - raw pointers to the current processor: the runtime itself always asks
//!   for the current processor again after a switch, never through an
//!   address cached before it.
//!
//! With a time slice ([`crate::Builder::time_slice`]) a thread can also be
//! preempted *between* any two instructions of its own code, and resume on
//! another kernel thread. ferry defers a preemption inside the runtime,
//! under a [`SpinLock`](crate::sync::SpinLock), in the C library and while
//! the thread panics; code of your own that depends on its kernel thread
//! (a `std::thread_local!` borrow, std's stdout lock held by `println!`)
//! can ask for the same with [`without_preemption`](crate::upcall::without_preemption).
//!
//! `errno` is saved and restored per ferry thread across every switch. One
//! trap remains, and it is the compiler's: std declares `__errno_location`
//! `ffi_const`, so in an optimised build a function that reads errno through
//! std (`io::Error::last_os_error()`) may compute the errno *address* once
//! and reuse it after a switch that moved the thread to another kernel
//! thread — reading that kernel thread's errno, not its own. Make the failing
//! call and the errno read in a small `#[inline(never)]` function that does
//! not switch in between (ferry's own wrappers do), or read errno through
//! `libc::__errno_location`, which is not declared `ffi_const`. The same
//! holds for any address the compiler derives from a kernel thread's TLS.

use std::any::Any;
use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

mod local;
mod raw;

pub use local::LocalKey;
use local::LocalTable;
pub(crate) use raw::Header;
use raw::RawJoin;

pub use crate::sched::Priority;

use crate::arch::{self, Context};
use crate::processor::{self, Pending};
use crate::runtime::Shared;
use crate::sched::Ready;
use crate::stack::Stack;

pub(crate) const EMPTY: u32 = 0;
pub(crate) const NOTIFIED: u32 = 1;
pub(crate) const PARKING: u32 = 2;
pub(crate) const PARKED: u32 = 3;

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
        self.header().priority
    }

    /// Gives the thread a wakeup token: if it is parked it becomes runnable,
    /// otherwise its next park returns at once.
    pub fn unpark(&self) {
        let state = &self.header().state;
        let mut s = state.load(Acquire);
        loop {
            let next = match s {
                EMPTY | PARKING => NOTIFIED,
                NOTIFIED => return,
                _ => EMPTY, // PARKED
            };
            match state.compare_exchange(s, next, AcqRel, Acquire) {
                Ok(_) if s == PARKED => {
                    self.header().shared.schedule(self.clone(), Ready::Woken);
                    return;
                }
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
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

    /// The runtime the thread belongs to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.header().shared
    }

    pub(crate) fn state(&self) -> &AtomicU32 {
        &self.header().state
    }

    pub(crate) fn context_ptr(&self) -> *mut Context {
        self.header().context.get()
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

/// The running user-level thread.
///
/// # Panics
/// On a kernel thread that is not running a ferry thread.
pub fn current() -> Thread {
    processor::enter()
        .and_then(|e| e.p.current_ref().cloned())
        .expect("ferry::thread::current: not on a ferry thread")
}

/// Lets other runnable threads of this processor run first. Cheap when there
/// are none. Outside a ferry thread, yields the kernel thread.
pub fn yield_now() {
    let Some(e) = processor::enter().filter(|e| e.p.in_thread()) else {
        std::thread::yield_now();
        return;
    };
    e.p.yield_current();
}

/// Blocks the calling thread until it gets a wakeup token (see
/// [`Thread::unpark`]); may also return spuriously. On a plain kernel thread
/// this is `std::thread::park`.
pub fn park() {
    let Some(e) = processor::enter() else {
        std::thread::park();
        return;
    };
    let p = e.p;
    let Some(me) = p.current_ref() else {
        std::thread::park();
        return;
    };
    let state = &me.header().state;
    // Only the thread itself takes a token, so a token seen stays ours.
    if state.load(Acquire) == NOTIFIED {
        state.store(EMPTY, Relaxed);
        return;
    }
    if let Err(now) = state.compare_exchange(EMPTY, PARKING, Acquire, Acquire) {
        debug_assert_eq!(now, NOTIFIED);
        state.store(EMPTY, Relaxed);
        return;
    }
    p.switch_away(Pending::Park);
}

/// Whoever must be woken: a ferry thread or a plain kernel thread.
#[derive(Debug, Clone)]
pub(crate) enum Unparker {
    Ferry(Thread),
    Kernel(std::thread::Thread),
}

impl Unparker {
    /// The caller, as something to wake later.
    pub(crate) fn current() -> Unparker {
        match processor::enter().and_then(|e| e.p.current_ref().cloned()) {
            Some(t) => Unparker::Ferry(t),
            None => Unparker::Kernel(std::thread::current()),
        }
    }

    pub(crate) fn unpark(&self) {
        match self {
            Unparker::Ferry(t) => t.unpark(),
            Unparker::Kernel(t) => t.unpark(),
        }
    }
}

/// A panic that ended a thread, as [`JoinHandle::join`] returns it.
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

/// Owns the right to join a thread. Dropping it detaches the thread (its
/// result, when it comes, is dropped).
pub struct JoinHandle<T> {
    raw: RawJoin<T>,
}

impl<T> JoinHandle<T> {
    /// The thread.
    pub fn thread(&self) -> Thread {
        self.raw.thread()
    }

    /// Waits for the thread to finish and returns what it returned, or the
    /// panic that ended it. From a ferry thread this blocks only the caller's
    /// user-level thread; from a plain kernel thread, that kernel thread.
    pub fn join(self) -> Result<T, Panic> {
        if !self.raw.is_complete() && self.raw.register(Unparker::current()) {
            // Spurious returns from `park` are possible; `COMPLETE` is the
            // truth. A token left behind only makes a later `park` return
            // once, which every caller of `park` tolerates.
            while !self.raw.is_complete() {
                park();
            }
        }
        self.raw
            .try_take()
            .expect("ferry: a completed thread's result is taken only by its one join")
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.raw.is_complete()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread())
            .finish()
    }
}

/// Settings for one thread: name, stack size and priority.
///
/// ```
/// use ferry::thread::{Builder, Priority};
///
/// ferry::run(|| {
///     let t = Builder::new()
///         .name("worker")
///         .priority(Priority::High)
///         .spawn(|| ferry::thread::current().name().map(str::to_owned))
///         .unwrap();
///     assert_eq!(t.join().unwrap().as_deref(), Some("worker"));
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    priority: Priority,
}

impl Builder {
    /// Default settings.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown by [`Thread::name`] and in stack-overflow
    /// reports).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// The thread's stack size in bytes (rounded up to pages); default: the
    /// runtime's.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// The thread's scheduling priority (default [`Priority::Normal`]); see
    /// [`Priority`] for what the default policy does with it.
    pub fn priority(mut self, priority: Priority) -> Builder {
        self.priority = priority;
        self
    }

    /// Starts the thread on the calling thread's runtime.
    ///
    /// # Errors
    /// If no stack can be mapped for it.
    ///
    /// # Panics
    /// Outside a ferry runtime.
    pub fn spawn<T: Send + 'static>(
        self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        let e = processor::enter()
            .filter(|e| e.p.in_thread())
            .expect("ferry::spawn: not inside a ferry runtime (use ferry::run)");
        let (id, stack) = e.p.thread_parts(self.stack_size)?;
        let shared = Arc::clone(e.p.current_ref().expect("checked above").shared());
        Ok(self.spawn_with(shared, id, stack, f))
    }

    /// Starts the thread on `shared` from outside its processors.
    pub(crate) fn spawn_in<T: Send + 'static>(
        self,
        shared: &Arc<Shared>,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        let id = ThreadId(shared.next_thread_ids(1).start);
        let stack =
            crate::stack::StackCache::global().get(self.stack_size.unwrap_or(shared.stack_size))?;
        Ok(self.spawn_with(Arc::clone(shared), id, stack, f))
    }

    fn spawn_with<T: Send + 'static>(
        self,
        shared: Arc<Shared>,
        id: ThreadId,
        mut stack: Stack,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        stack.set_owner(id.0, self.name.as_deref());
        // SAFETY: the stack is fresh or reused (nothing runs on it), and it
        // stays in the thread's block until the thread has exited and
        // switched away.
        let context = unsafe { arch::prepare(stack.top(), thread_entry, std::ptr::null_mut()) };
        let (thread, raw) = raw::new(
            raw::Spec {
                id,
                name: self.name.map(String::into_boxed_str),
                priority: self.priority,
                context,
                stack,
                shared,
            },
            f,
        );
        let shared = Arc::clone(thread.shared());
        shared.schedule(thread, Ready::Spawned);
        JoinHandle { raw }
    }
}

/// Starts a user-level thread running `f` on the calling thread's runtime.
///
/// # Panics
/// Outside a ferry runtime, or if no stack can be mapped (see
/// [`Builder::spawn`] for the fallible form).
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    Builder::new()
        .spawn(f)
        .expect("ferry::spawn: cannot map a stack for the new thread")
}

/// Where every thread starts: finishes the switch that brought it here, runs
/// its closure (which catches panics), drops its locals and exits.
unsafe extern "C" fn thread_entry(_: *mut ()) -> ! {
    {
        // We run with the critical level the switch to us handed over.
        let p =
            crate::upcall::resumed_processor().expect("a ferry thread started outside a processor");
        p.finish_switch();
        let me = p
            .current_ref()
            .expect("a ferry thread runs as its processor's current")
            .as_ptr();
        debug_assert_eq!(
            crate::upcall::critical_depth(),
            1,
            "a thread starts with the one level its switch handed over"
        );
        // From here on it is the thread's own code: preemptible, movable.
        crate::upcall::critical_release_inherited();
        // SAFETY: `me` is this thread's own block, kept alive by whichever
        // processor's `current` holds this thread while it runs; called once.
        unsafe { raw::run_main(me) };
        // Drop the thread's locals now, as the thread ends, on its own stack
        // (their destructors may use other keys, which then start afresh).
        // SAFETY: as above, and nothing borrows the table now.
        let locals = unsafe { raw::take_locals(me) };
        drop(locals);
    }
    let e = processor::enter().expect("a ferry thread ended outside a processor");
    let p = e.p;
    // The next context inherits our level.
    e.hand_over();
    p.exit_current()
}
