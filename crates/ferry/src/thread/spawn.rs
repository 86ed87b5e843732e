//! Making threads: [`Builder`], [`spawn`], where every thread starts
//! (`thread_entry`), [`exit_with`], and the switch into an adopted first
//! thread.
//!
//! This file owns a new thread's block, stack and first context; it must
//! not choose where the thread runs first (the policy does, through
//! `make_ready` with `Ready::Spawned`).

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering::Release;

use super::JoinHandle;
use crate::arch::{self, Context};
use crate::header::raw::{self, RawJoin};
use crate::header::{
    HELD, Header, Priority, Ready, SUSPENDED, Schedule, Thread, ThreadId, begin_exit,
};
use crate::processor::{self, OwnerToken};
use crate::stack::Stack;
use crate::upcall::Shared;

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
    tag: usize,
    suspended: bool,
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

    /// The thread's [`tag`](Thread::tag) from its start, before it can run.
    pub fn tag(mut self, tag: usize) -> Builder {
        self.tag = tag;
        self
    }

    /// Whether the thread starts *suspended* (Mach's `thread_create`):
    /// made and stopped, it runs only once [`Thread::resume`]d (default
    /// `false`: it is queued to run at once).
    ///
    /// ```
    /// ferry::run(|| {
    ///     let t = ferry::thread::Builder::new().suspended(true).spawn(|| 5).unwrap();
    ///     assert_eq!(t.thread().suspension(), ferry::thread::Suspension::Stopped);
    ///     t.thread().resume();
    ///     assert_eq!(t.join().unwrap(), 5);
    /// })
    /// .unwrap();
    /// ```
    pub fn suspended(mut self, suspended: bool) -> Builder {
        self.suspended = suspended;
        self
    }

    /// Starts the thread on the calling thread's runtime.
    ///
    /// # Errors
    /// [`io::ErrorKind::OutOfMemory`] if the allocator has no memory for
    /// the thread's block, or the error of mapping its stack; nothing is
    /// started or kept then.
    ///
    /// # Panics
    /// Outside a ferry runtime.
    pub fn spawn<T: Send + 'static>(
        self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        match self.spawn_local(f) {
            Ok(r) => r,
            Err(_) => panic!("ferry::spawn: not inside a ferry runtime (use ferry::run)"),
        }
    }

    /// Starts the thread on the caller's processor, with an id and a stack
    /// from the processor's caches, and queues it there; gives the builder
    /// and `f` back off a ferry thread.
    ///
    /// One entry into the runtime does it all: the block takes its runtime
    /// reference from the caller's, and the thread goes straight to the
    /// entered processor's policy.
    #[allow(clippy::type_complexity)]
    fn spawn_local<F, T>(self, f: F) -> Result<io::Result<JoinHandle<T>>, (Builder, F)>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Some(mut e) = crate::upcall::enter() else {
            return Err((self, f));
        };
        let Some(shared) =
            e.p.current_ref(&e.tok)
                .map(|t| Arc::clone(&t.header().scheduler))
        else {
            return Err((self, f));
        };
        // The block first: a spawn the allocator refuses takes nothing else.
        let Some(block) = raw::Block::alloc(|| e.take_block()) else {
            return Ok(Err(out_of_memory()));
        };
        let (id, stack) = match e.p.thread_parts(e.tok.rb(), self.stack_size) {
            Ok(parts) => parts,
            Err(err) => return Ok(Err(err)),
        };
        let suspended = self.suspended;
        let (thread, raw) = self.make(block, shared, id, stack, f);
        if suspended {
            start_held(thread);
        } else {
            e.p.make_ready(e.tok.rb(), thread, Ready::Spawned);
        }
        Ok(Ok(JoinHandle { raw }))
    }

    /// Starts the thread on the caller's processor when the caller is a
    /// ferry thread (as [`spawn`](Builder::spawn)), else on `handle`'s
    /// runtime from outside (as [`spawn_on`](Builder::spawn_on)).
    ///
    /// # Errors
    /// As [`spawn`](Builder::spawn) and [`spawn_on`](Builder::spawn_on).
    pub fn spawn_here_or_on<T: Send + 'static>(
        self,
        handle: &crate::Handle,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        match self.spawn_local(f) {
            Ok(r) => r,
            Err((builder, f)) => builder.spawn_on(handle, f),
        }
    }

    /// Starts the thread on `handle`'s runtime, from any thread (a ferry
    /// thread or a plain kernel thread).
    ///
    /// # Errors
    /// [`io::ErrorKind::BrokenPipe`] if the runtime has shut down (its
    /// `run` returned, or is returning: its first thread finished), or
    /// ended by a reported deadlock; otherwise as
    /// [`spawn`](Builder::spawn). A spawn that returns `Ok` either runs, or
    /// (when the runtime ends before it got to run) its join returns an
    /// error saying so.
    pub fn spawn_on<T: Send + 'static>(
        self,
        handle: &crate::Handle,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        self.spawn_in(handle.shared(), f)
    }

    /// Starts the thread on `shared` from outside its processors (or from
    /// one of them, through a [`crate::Handle`]): an error once the runtime
    /// has shut down, decided by the queue the thread goes to (see
    /// `Shared::schedule_spawned`).
    pub(crate) fn spawn_in<T: Send + 'static>(
        self,
        shared: &Arc<Shared>,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        if shared.is_shut_down() {
            return Err(crate::upcall::shut_down_error());
        }
        let block = raw::Block::alloc(|| None).ok_or_else(out_of_memory)?;
        let id = ThreadId(shared.next_thread_ids(1).start);
        // (On a ferry thread the cache holds its preemption off: its locks
        // are the processors' too, `stack::shield`.)
        let stack =
            crate::stack::StackCache::global().get(self.stack_size.unwrap_or(shared.stack_size))?;
        let suspended = self.suspended;
        let (thread, raw) = self.make(block, shared.arc(), id, stack, f);
        if suspended {
            start_held(thread);
            return Ok(JoinHandle { raw });
        }
        match shared.schedule_spawned(thread) {
            Ok(()) => Ok(JoinHandle { raw }),
            // The runtime ended first: the thread never runs; it and its
            // join side go (its closure is dropped with its block).
            Err(thread) => {
                drop(raw);
                drop(thread);
                Err(crate::upcall::shut_down_error())
            }
        }
    }

    /// Makes the thread's block in `block` (not yet queued): the runtime's
    /// reference and the join side's.
    // Always inlined: with two callers it was not, and the C fork then paid
    // a call and stored settings that fold away inline (64 of a C
    // fork+join's instructions, counted with callgrind).
    #[inline(always)]
    fn make<F, T>(
        self,
        block: raw::Block<F, T>,
        scheduler: Arc<dyn Schedule>,
        id: ThreadId,
        mut stack: Stack,
        f: F,
    ) -> (Thread, RawJoin<T>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        stack.set_owner_tagged(id.0, self.name.as_deref(), self.tag);
        // SAFETY: the stack is fresh or reused (nothing runs on it), and it
        // stays in the thread's block until the thread has exited and
        // switched away.
        let context = unsafe { arch::prepare(stack.top(), thread_entry, std::ptr::null_mut()) };
        let slot = stack.registry_slot();
        let runtime = Arc::as_ptr(&scheduler).cast::<()>() as usize;
        let (thread, join) = raw::new(
            block,
            raw::Spec {
                id,
                name: self.name.map(String::into_boxed_str),
                priority: self.priority,
                context,
                stack: Some(stack),
                scheduler,
                keep_block: crate::upcall::keep_block,
                tag: self.tag,
            },
            f,
        );
        crate::waits::set_thread(slot, runtime, thread.as_ptr());
        (thread, join)
    }
}

/// Holds new thread `t` instead of queueing it (it was made suspended): its
/// `control` word takes the runtime's reference, as a processor holding a
/// suspended thread does, before anyone else can see the thread.
fn start_held(t: Thread) {
    t.header().control.store(SUSPENDED | HELD, Release);
    let _ = t.into_raw();
}

/// Ends the calling ferry thread at once, as if its closure had returned
/// `value` (its joiner gets `Ok(value)`), without returning to the
/// closure: the frames between are abandoned, their destructors do not
/// run. Its thread-locals are dropped as at a normal end.
///
/// This is C-Threads' `cthread_exit` (and `pthread_exit` without
/// cancellation handlers); Rust code rarely wants it.
///
/// # Safety
/// Nothing on the calling thread's stack may rely on its destructor running
/// or on control coming back to it: no pinned value that others point to,
/// no scope guard (a `std::thread::scope`), no lock guard others wait on
/// (the lock stays held). Memory owned by the abandoned frames leaks.
///
/// # Panics
/// Off a ferry thread, or if the thread's closure returns another type
/// than `T` (`value` is then dropped and nothing ends).
pub unsafe fn exit_with<T: Send + 'static>(value: T) -> ! {
    let me = crate::upcall::enter()
        .and_then(|e| e.p.current_ref(&e.tok).map(Thread::as_ptr))
        .expect("ferry::thread::exit_with: not on a ferry thread");
    // SAFETY: `me` is this running thread's block, alive while it runs.
    if !begin_exit(unsafe { me.as_ref() }) {
        drop(value);
        crate::upcall::stop_terminated();
    }
    // SAFETY: `me` is this running thread's block; we exit right after, and
    // never return to the closure.
    let done = unsafe { raw::finish_with(me, value) };
    assert!(
        done,
        "ferry::thread::exit_with: the thread's closure returns another type"
    );
    // SAFETY: this thread's own block, and nothing borrows its table.
    drop(unsafe { raw::take_locals(me) });
    let e = crate::upcall::enter().expect("a ferry thread ended outside a processor");
    let p = e.p;
    let tok = e.hand_over();
    p.exit_current(tok)
}

/// Switches from the adopting kernel thread's own flow of control, which
/// becomes thread `header`, to the driver context `to`; returns once the
/// thread runs on a processor, with that switch finished and the level it
/// inherited released: from here on it is an ordinary ferry thread.
///
/// # Safety
/// As `processor::switch_out_to`, except that the caller holds no level
/// (it is no activation yet); `header`'s block is queued only after the
/// switch saved `from`.
pub(crate) unsafe fn switch_in_adopted(
    from: *mut Context,
    to: *const Context,
    header: NonNull<Header>,
) -> &'static crate::processor::Processor {
    let p = processor::switch_out_to(from, to, header);
    crate::upcall::critical_release_inherited();
    p
}

/// The error of a spawn the allocator refused: made without allocating.
fn out_of_memory() -> io::Error {
    io::Error::from(io::ErrorKind::OutOfMemory)
}

/// Starts a user-level thread running `f` on the calling thread's runtime.
///
/// # Panics
/// Outside a ferry runtime, or if no memory or stack can be had for it
/// (see [`Builder::spawn`] for the fallible form).
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    Builder::new()
        .spawn(f)
        .expect("ferry::spawn: cannot make the new thread")
}

/// Where every thread starts: finishes the switch that brought it here, runs
/// its closure (which catches panics), drops its locals and exits.
unsafe extern "C" fn thread_entry(_: *mut ()) -> ! {
    {
        // We run with the critical level the switch to us handed over.
        let p =
            crate::upcall::resumed_processor().expect("a ferry thread started outside a processor");
        // SAFETY: we run on `p`, with the level the switch to us handed
        // over: this kernel thread drives `p`, and nothing holds a
        // reference into its owner part.
        let mut tok = unsafe { OwnerToken::new() };
        p.finish_switch(tok.rb());
        let me = p
            .current_ref(&tok)
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
    let e = crate::upcall::enter().expect("a ferry thread ended outside a processor");
    let p = e.p;
    // The next context inherits our level.
    let tok = e.hand_over();
    p.exit_current(tok)
}
