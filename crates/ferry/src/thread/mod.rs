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
//! `errno` is saved and restored per ferry thread across every switch.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

mod local;

pub use local::LocalKey;
use local::LocalTable;

use crate::arch::{self, Context};
use crate::processor::{self, Pending};
use crate::runtime::Shared;
use crate::stack::{Stack, StackCache};

pub(crate) const EMPTY: u32 = 0;
pub(crate) const NOTIFIED: u32 = 1;
pub(crate) const PARKING: u32 = 2;
pub(crate) const PARKED: u32 = 3;

type Main = Box<dyn FnOnce() + Send>;

pub(crate) struct ThreadInner {
    id: ThreadId,
    name: Option<Box<str>>,
    state: AtomicU32,
    /// Saved while the thread is not running; written by the kernel thread
    /// switching it out, read by the one switching it in (ordered by the run
    /// queue or park state hand-over between them).
    context: UnsafeCell<Context>,
    /// Its stack, until it exits.
    stack: Mutex<Option<Stack>>,
    /// What it runs, until it starts.
    main: Mutex<Option<Main>>,
    /// Its `thread_local!` values; touched only by the thread itself.
    locals: UnsafeCell<LocalTable>,
    shared: Arc<Shared>,
}

// SAFETY: `context` is accessed only by the processor that switches the
// thread out or in, one at a time (see its field doc), and `locals` only by
// the thread itself while it runs; the rest is `Sync`.
unsafe impl Sync for ThreadInner {}
// SAFETY: as above; a thread's parts move between kernel threads by design.
unsafe impl Send for ThreadInner {}

/// A handle on a user-level thread.
#[derive(Clone)]
pub struct Thread(Arc<ThreadInner>);

/// A thread's identifier, unique within its runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(u64);

impl ThreadId {
    /// The number behind the id.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl Thread {
    /// The thread's id.
    pub fn id(&self) -> ThreadId {
        self.0.id
    }

    /// The thread's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// Gives the thread a wakeup token: if it is parked it becomes runnable,
    /// otherwise its next park returns at once.
    pub fn unpark(&self) {
        let state = &self.0.state;
        let mut s = state.load(Acquire);
        loop {
            let next = match s {
                EMPTY | PARKING => NOTIFIED,
                NOTIFIED => return,
                _ => EMPTY, // PARKED
            };
            match state.compare_exchange(s, next, AcqRel, Acquire) {
                Ok(_) if s == PARKED => {
                    self.0.shared.schedule(self.clone());
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
        f(unsafe { &mut *self.0.locals.get() })
    }

    /// The runtime the thread belongs to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.0.shared
    }

    pub(crate) fn state(&self) -> &AtomicU32 {
        &self.0.state
    }

    pub(crate) fn context_ptr(&self) -> *mut Context {
        self.0.context.get()
    }

    /// Gives the stack back to the cache; the thread has exited and nothing
    /// runs on it any more.
    pub(crate) fn release_stack(&self) {
        let stack = self
            .0
            .stack
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(stack) = stack {
            StackCache::global().put(stack);
        }
    }
}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread")
            .field("id", &self.0.id)
            .field("name", &self.0.name)
            .finish()
    }
}

/// The running user-level thread.
///
/// # Panics
/// On a kernel thread that is not running a ferry thread.
pub fn current() -> Thread {
    processor::current()
        .filter(|p| p.in_thread())
        .map(|p| p.current_thread())
        .expect("ferry::thread::current: not on a ferry thread")
}

/// Lets other runnable threads of this processor run first. Cheap when there
/// are none. Outside a ferry thread, yields the kernel thread.
pub fn yield_now() {
    let Some(p) = processor::current().filter(|p| p.in_thread()) else {
        std::thread::yield_now();
        return;
    };
    let shared = p.shared();
    if p.local_is_empty() {
        // Timers fire into this processor's queue; threads woken from
        // outside wait in the injector: either way, queue one ahead of us.
        if shared.timers.fire_due() == 0 && !p.pull_injected(shared) {
            return;
        }
    }
    p.switch_away(shared, Pending::Requeue);
}

/// Blocks the calling thread until it gets a wakeup token (see
/// [`Thread::unpark`]); may also return spuriously. On a plain kernel thread
/// this is `std::thread::park`.
pub fn park() {
    let Some(p) = processor::current().filter(|p| p.in_thread()) else {
        std::thread::park();
        return;
    };
    let me = p.current_thread();
    let state = &me.0.state;
    if state
        .compare_exchange(NOTIFIED, EMPTY, Acquire, Relaxed)
        .is_ok()
    {
        return;
    }
    if let Err(now) = state.compare_exchange(EMPTY, PARKING, Acquire, Acquire) {
        debug_assert_eq!(now, NOTIFIED);
        state.store(EMPTY, Relaxed);
        return;
    }
    drop(me);
    p.switch_away(p.shared(), Pending::Park);
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
        match processor::current().filter(|p| p.in_thread()) {
            Some(p) => Unparker::Ferry(p.current_thread()),
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

/// Where a finished thread leaves its result for its joiner.
struct Packet<T> {
    slot: Mutex<PacketSlot<T>>,
}

struct PacketSlot<T> {
    /// Set once, by the finishing thread.
    result: Option<Result<T, Panic>>,
    /// Who to wake when `result` is set: registered by a waiting joiner.
    joiner: Option<Unparker>,
}

impl<T> Packet<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, PacketSlot<T>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn complete(&self, result: Result<T, Panic>) {
        let joiner = {
            let mut slot = self.lock();
            slot.result = Some(result);
            slot.joiner.take()
        };
        if let Some(j) = joiner {
            j.unpark();
        }
    }
}

/// Owns the right to join a thread. Dropping it detaches the thread.
pub struct JoinHandle<T> {
    thread: Thread,
    packet: Arc<Packet<T>>,
}

impl<T> JoinHandle<T> {
    /// The thread.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Waits for the thread to finish and returns what it returned, or the
    /// panic that ended it. From a ferry thread this blocks only the caller's
    /// user-level thread; from a plain kernel thread, that kernel thread.
    pub fn join(self) -> Result<T, Panic> {
        loop {
            {
                let mut slot = self.packet.lock();
                if let Some(result) = slot.result.take() {
                    return result;
                }
                slot.joiner = Some(Unparker::current());
            }
            park();
        }
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.packet.lock().result.is_some()
    }

    /// The result if the thread has finished.
    pub(crate) fn try_take(&self) -> Option<Result<T, Panic>> {
        self.packet.lock().result.take()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread)
            .finish()
    }
}

/// Settings for one thread: name and stack size.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
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
        let shared = processor::current()
            .filter(|p| p.in_thread())
            .map(|p| p.current_thread().0.shared.clone())
            .expect("ferry::spawn: not inside a ferry runtime (use ferry::run)");
        self.spawn_in(&shared, f)
    }

    pub(crate) fn spawn_in<T: Send + 'static>(
        self,
        shared: &Arc<Shared>,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        let id = ThreadId(shared.next_thread_id());
        let mut stack = StackCache::global().get(self.stack_size.unwrap_or(shared.stack_size))?;
        stack.set_owner(id.0, self.name.as_deref());
        let packet = Arc::new(Packet {
            slot: Mutex::new(PacketSlot {
                result: None,
                joiner: None,
            }),
        });
        let result = Arc::clone(&packet);
        let main: Main = Box::new(move || {
            let r = catch_unwind(AssertUnwindSafe(f)).map_err(Panic);
            result.complete(r);
        });
        // SAFETY: the stack is fresh or reused (nothing runs on it), and it is
        // kept in the thread until the thread has exited and switched away.
        let context = unsafe { arch::prepare(stack.top(), thread_entry, std::ptr::null_mut()) };
        let thread = Thread(Arc::new(ThreadInner {
            id,
            name: self.name.map(String::into_boxed_str),
            state: AtomicU32::new(EMPTY),
            context: UnsafeCell::new(context),
            stack: Mutex::new(Some(stack)),
            main: Mutex::new(Some(main)),
            locals: UnsafeCell::new(Vec::new()),
            shared: Arc::clone(shared),
        }));
        shared.schedule(thread.clone());
        Ok(JoinHandle { thread, packet })
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
/// its closure (which catches panics), and exits.
unsafe extern "C" fn thread_entry(_: *mut ()) -> ! {
    {
        let p = processor::current().expect("a ferry thread started outside a processor");
        let me = p.current_thread();
        let shared = me.0.shared.clone();
        p.finish_switch(&shared);
        let main =
            me.0.main
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        drop(me);
        drop(shared);
        if let Some(main) = main {
            main();
        }
        // Drop the thread's locals now, as the thread ends, on its own stack
        // (their destructors may use other keys, which then start afresh).
        let p = processor::current().expect("a ferry thread ended outside a processor");
        let me = p.current_thread();
        // SAFETY: the running thread lends its own table, to `take` only.
        let locals = unsafe { me.with_locals(std::mem::take) };
        drop(me);
        drop(locals);
    }
    let p = processor::current().expect("a ferry thread ended outside a processor");
    p.exit_current()
}
