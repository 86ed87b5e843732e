//! User-level threads: [`spawn`], [`Builder`], [`JoinHandle`], [`current`],
//! [`yield_now`], and the park/unpark pair every blocking primitive is built
//! on.
//!
//! This room owns a thread's identity, stack, saved context and its park
//! state; it must not pick which thread runs next (that is
//! the `processor` module's job).
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
//! # errno and thread-local storage
//!
//! `errno` is saved and restored per ferry thread across every switch. One
//! trap remains, and it is the compiler's: std declares `__errno_location`
//! `ffi_const`, so in an optimised build a function that reads errno through
//! std (`io::Error::last_os_error()`) may compute the errno *address* once
//! and reuse it after a switch that moved the thread to another kernel
//! thread — reading that kernel thread's errno, not its own. Make the failing
//! call and the errno read in a small `#[inline(never)]` function that does
//! not switch in between (ferry's own wrappers do), or read errno through
//! `libc::__errno_location`, which is not declared `ffi_const`. (C code
//! that includes ferry's headers gets `errno` through a non-const accessor
//! and is safe as written; see the `ferry-capi` crate.)
//!
//! Thread-local storage — `std::thread_local!`, `#[thread_local]`, C's
//! `__thread` — belongs to the kernel thread, not to the ferry thread: a
//! ferry thread sees the values of whichever kernel thread runs it at the
//! moment, and the compiler treats the thread pointer as fixed within a
//! function, so after a switch it may go on using the address of the
//! kernel thread it left. Per-ferry-thread state goes in
//! [`thread_local!`](crate::thread_local) (C: `cthread_set_data`), whose
//! value is found through the running thread at each access. ferry does
//! not give each ferry thread an FS base of its own: where the kernel
//! allows `wrfsbase` the switch itself would cost about 12 ns more, but
//! glibc's thread control block at `fs:0` (the `struct pthread`, the stack
//! canary, the dtv) and every module's static TLS would need a copy per
//! ferry thread; `ferry-capi`'s crate docs give the measurement and the
//! reasons.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

#[cfg(test)]
mod block_cache_tests;
mod caller_stack;
mod ended;
mod local;
mod panic;
mod sleep;

pub(crate) use caller_stack::{caller_stack, note_adopted_stack};
pub use local::LocalKey;
pub(crate) use panic::install_panic_hook;
pub use sleep::sleep;

pub use crate::header::{Panic, Priority, Thread, ThreadId};

use crate::arch;
use crate::arch::Context;
use crate::header::park_word::PARKED;
use crate::header::raw::{self, RawJoin};
use crate::header::wait_record::WaitRecord;
use crate::header::wait_record::{register as register_wait, unregister as unregister_wait};
use crate::header::{
    DROPPED, HELD, Header, RUNNING, Ready, SUSPENDED, Schedule, TERMINATED, Unparker, WILL_SUSPEND,
    begin_exit, park_word,
};
use crate::processor::{self, Pending};
use crate::stack::Stack;
use crate::upcall::Shared;

/// Stops the calling thread, which was terminated before it began to exit:
/// it switches away and the processor drops it; its terminator completes
/// it. Never returns.
pub(crate) fn stop_terminated() -> ! {
    let e = crate::upcall::enter().expect("a ferry thread stopped outside a processor");
    let _ = e.p.switch_away_held();
    unreachable!("a terminated thread was resumed")
}

/// Where a thread stands in Mach's suspension protocol (003 §4); see
/// [`Thread::suspension`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspension {
    /// Scheduled as usual.
    Running,
    /// Still runs, until [`Thread::wait_suspended`] stops it.
    WillSuspend,
    /// Must not run until [`Thread::resume`]d; it may still be on its way
    /// off its processor.
    Suspended,
    /// Suspended and switched out: held by the runtime, in no queue.
    Stopped,
    /// Suspended while in a blocking call ([`crate::blocking`], or one of
    /// ferry's wrappers): its kernel thread may still be in the system
    /// call, but the thread runs nothing more (it stops when the call
    /// returns) until resumed. Mach reports such a thread stopped.
    StoppedInCall,
    /// Terminated: it never runs again.
    Terminated,
}

/// How many looks [`Thread::wait_until`] makes between two interruptions of
/// the thread it waits for (the first signal usually stops it; later ones
/// are for a thread that moved, or was where it must not stop).
const NUDGE_EVERY: u32 = 8;

/// Waits a little between looks at another thread's state: yields at
/// first, then sleeps 50 µs (the thread or kernel thread alike).
fn pause(tries: u32) {
    let on_ferry = crate::upcall::enter().is_some();
    match (tries < 64, on_ferry) {
        (true, true) => yield_now(),
        (true, false) => std::thread::yield_now(),
        (false, true) => crate::sleep(std::time::Duration::from_micros(50)),
        (false, false) => std::thread::sleep(std::time::Duration::from_micros(50)),
    }
}

impl Thread {
    /// Places the thread in *will-suspend* state (Mach's `thread_suspend`):
    /// it keeps running until [`Thread::wait_suspended`] stops it. Does
    /// nothing to a thread already suspended.
    ///
    /// The split into suspend and wait lets a thread announce that it will
    /// stop, publish that (unlock a queue it put itself on), and only then
    /// stop; a [`resume`](Thread::resume) that comes in between cancels the
    /// stop, so the wakeup is not lost:
    ///
    /// ```
    /// ferry::run(|| {
    ///     let me = ferry::current();
    ///     me.suspend();
    ///     me.resume(); // a waker came first
    ///     me.wait_suspended(true); // so this returns at once
    ///     assert_eq!(me.suspension(), ferry::thread::Suspension::Running);
    /// })
    /// .unwrap();
    /// ```
    pub fn suspend(&self) {
        let _ = self
            .header()
            .control
            .compare_exchange(RUNNING, WILL_SUSPEND, AcqRel, Relaxed);
    }

    /// Places the thread back in *running* state (Mach's `thread_resume`):
    /// a held thread is queued again, a will-suspend one will not stop.
    /// Does nothing to a terminated thread.
    pub fn resume(&self) {
        let control = &self.header().control;
        let mut c = control.load(Relaxed);
        loop {
            if c & TERMINATED != 0 || c == RUNNING {
                return;
            }
            match control.compare_exchange_weak(c, RUNNING, AcqRel, Relaxed) {
                Ok(_) => break,
                Err(now) => c = now,
            }
        }
        if c & HELD != 0 {
            // SAFETY: the `HELD` bit carried the runtime's reference, given
            // up with `into_raw` by the processor that held the thread; the
            // swap took it from the word, so it is ours alone.
            let t = unsafe { Thread::from_raw(self.as_ptr().as_ptr()) };
            let shared = t.shared().arc();
            shared.schedule(t, Ready::Woken);
        }
    }

    /// Stops a thread in *will-suspend* state (Mach's `thread_wait`): it
    /// becomes *suspended* and runs no more until resumed. Does nothing to
    /// a thread in another state.
    ///
    /// Called by the thread on itself, it switches away at once and returns
    /// once resumed. Another thread that is running is interrupted (the
    /// preemption signal, whether or not a time slice is set) and stops
    /// as soon as it is outside the runtime's critical sections and its
    /// spinlocks (see the module docs); one that is not running stops
    /// before it would run again; one in a blocking call stops when the
    /// call returns, and counts as stopped meanwhile
    /// ([`Suspension::StoppedInCall`]). With `wait`, the caller waits until
    /// it has stopped (or was resumed meanwhile).
    pub fn wait_suspended(&self, wait: bool) {
        let control = &self.header().control;
        // SeqCst: pairs with the thread's leaving a blocking call (see
        // `upcall::blocking`).
        if control
            .compare_exchange(WILL_SUSPEND, SUSPENDED, SeqCst, Relaxed)
            .is_err()
        {
            return;
        }
        if let Some(e) = crate::upcall::enter().filter(|e| {
            e.p.current_ref()
                .is_some_and(|c| c.as_ptr() == self.as_ptr())
        }) {
            let p = e.p;
            let _resumed_on = p.switch_away_held();
            drop(e);
            return;
        }
        self.interrupt();
        if wait {
            self.wait_stopped();
        }
    }

    /// Waits until the thread is off its processor for good (held,
    /// parked or finished), stopped in a blocking call, or was resumed,
    /// yielding (then sleeping) in between and interrupting it again now
    /// and then; a stop is asynchronous, so this looks, as Go's `suspendG`
    /// does.
    fn wait_stopped(&self) {
        self.wait_until(
            |c| {
                c & SUSPENDED == 0
                    || c & HELD != 0
                    || self.state().load(Acquire) == PARKED
                    || self.is_finished()
                    || self.in_call()
            },
            || self.interrupt(),
        );
    }

    /// Looks at the thread's `control` word until `done` says so, yielding
    /// (then sleeping) in between, and calling `nudge` at the first look
    /// and every [`NUDGE_EVERY`] after.
    fn wait_until(&self, done: impl Fn(u32) -> bool, nudge: impl Fn()) {
        let mut tries = 0u32;
        while !done(self.header().control.load(SeqCst)) {
            if tries.is_multiple_of(NUDGE_EVERY) {
                nudge();
            }
            tries += 1;
            pause(tries);
        }
    }

    /// Sends the preemption signal to the kernel thread that may be running
    /// the thread (see `upcall::preempt`); its handler stops the thread if
    /// it runs there and was asked to stop.
    fn interrupt(&self) {
        if let Some(p) = processor::last_of(self.header()) {
            crate::upcall::signal_driver(p);
        }
    }

    /// Whether the thread is in an announced blocking call.
    fn in_call(&self) -> bool {
        crate::upcall::thread_in_call(self.shared(), self.as_ptr().as_ptr() as usize)
    }

    /// Aborts the blocking call the thread is in (Mach's `thread_abort`):
    /// the system call it is blocked in fails with `EINTR`, and ferry's
    /// wrappers ([`crate::fs`], [`crate::net`], [`crate::process`]) return
    /// [`Interrupted`](io::ErrorKind::Interrupted) instead of retrying it.
    /// Returns once the system call was interrupted or the call is over;
    /// `true` if the thread was in a blocking call, `false` if it was in
    /// none (then nothing is done, and nothing is remembered for a later
    /// call).
    ///
    /// Only calls announced with [`crate::blocking`] (or the wrappers) can
    /// be aborted. Code inside the call that retries on `EINTR` itself
    /// (std's `read_exact`, `write_all`) blocks again; the abort is then
    /// spent. A call to a system call that signals do not interrupt (a
    /// disk read in uninterruptible sleep) keeps this waiting until it
    /// returns. ferry uses the signal `SIGRTMAX - 1` for this (installed
    /// without `SA_RESTART`): a program must leave it alone.
    pub fn abort(&self) -> bool {
        let h = self.as_ptr().as_ptr() as usize;
        let mut sent = false;
        let mut tries = 0u32;
        loop {
            match crate::upcall::abort_step(self.shared(), h) {
                crate::upcall::AbortStep::NotInCall => return sent,
                crate::upcall::AbortStep::Interrupted => return true,
                crate::upcall::AbortStep::Sent => sent = true,
            }
            tries += 1;
            pause(tries);
        }
    }

    /// Terminates the thread (Mach's `thread_terminate`): it never runs
    /// again, and its joiner gets `Ok(value)`, as if its closure had
    /// returned it. On the calling thread this is [`exit_with`]. Another
    /// thread is stopped as [`wait_suspended`](Thread::wait_suspended)
    /// stops it (a running one is interrupted, whether or not a time slice
    /// is set), and this waits until it has. A thread in a blocking call
    /// has the call aborted (as [`abort`](Thread::abort)) and is stopped
    /// when it returns; this waits for that too.
    ///
    /// Then, before it returns (and before the joiner sees the value):
    ///
    /// - **Waits are left, and no wakeup is lost.** If the thread waits in
    ///   a [`crate::sync`] primitive (a [`Mutex`](crate::sync::Mutex), a
    ///   [`Condvar`](crate::sync::Condvar), a
    ///   [`Semaphore`](crate::sync::Semaphore), an
    ///   [`RwLock`](crate::sync::RwLock), a [`Barrier`](crate::sync::Barrier),
    ///   a [`channel`](crate::sync::channel) or any
    ///   [`ParkWait`](crate::sync::ParkWait)), it is taken out of the
    ///   wait list; if a wakeup had already been given to it, the wakeup
    ///   goes on as the primitive would have given it next (an unlock's
    ///   wake to the next waiter, a `notify_one` to the next waiter, a
    ///   semaphore permit or an `RwLock` grant back to the primitive, and
    ///   from there to the next waiter), as POSIX asks of a cancelled
    ///   waiter. Its arrival at a barrier whose generation has not
    ///   completed is taken back. If it was waking a batch (a
    ///   `notify_all`, a barrier's release, an `RwLock`'s readers), the
    ///   rest of the batch is woken. One limit: a thread that waits in a
    ///   batch another thread is waking, while that waker is *suspended*
    ///   between two of its wakes, is left only once the waker is resumed,
    ///   and `terminate` waits for that.
    /// - **Its thread-locals are dropped** ([`thread_local!`](crate::thread_local)):
    ///   their destructors run here, on the caller's thread (a destructor
    ///   that uses a key reaches the *caller's* value).
    /// - **Its stack is freed** (to the stack cache, for the next thread).
    ///   Nothing of ferry's points into it any more: a join it waited in,
    ///   a sleep's timer and a wakeup that comes late hold only a
    ///   reference to the thread, never to its stack.
    ///
    /// **What it held stays held.** The frames on its stack are abandoned
    /// without running their destructors, as with `pthread_cancel` and no
    /// cleanup handlers: a lock it holds (a guard on its stack, or a C
    /// `mutex_lock` not yet unlocked) stays locked for good, a semaphore
    /// permit it took is not given back, and memory its frames own leaks.
    /// A thread terminated *while waiting* holds none of the lock it
    /// waited for: not the mutex it was queued on, nor, in a
    /// [`Condvar::wait`](crate::sync::Condvar::wait), the mutex (which the
    /// wait had released and had not retaken).
    ///
    /// Gives `value` back if the thread has already finished (or is being
    /// terminated by someone else).
    ///
    /// # Safety
    /// As [`exit_with`], for the target's stack: nothing on it may rely on
    /// its destructor running or on control coming back to it, and nothing
    /// outside the thread may point into its stack (apart from ferry's own
    /// waits, which are left as above), since the stack is reused.
    ///
    /// # Panics
    /// If the thread's closure returns another type than `T` (then nothing
    /// is done to the thread).
    pub unsafe fn terminate<T: Send + 'static>(&self, value: T) -> Result<(), T> {
        assert!(
            raw::returns::<T>(self.as_ptr()),
            "ferry::Thread::terminate: the thread's closure returns another type"
        );
        let on_self = crate::upcall::enter()
            .and_then(|e| e.p.current_ref().map(|c| c.as_ptr() == self.as_ptr()))
            .unwrap_or(false);
        if on_self {
            // SAFETY: forwarded from the caller's contract.
            unsafe { exit_with(value) }
        }
        // SeqCst: pairs with the thread's leaving a blocking call.
        let prev = self.header().control.fetch_or(TERMINATED, SeqCst);
        if prev & TERMINATED != 0 || self.is_finished() {
            return Err(value);
        }
        if prev & HELD != 0 {
            // SAFETY: `HELD` carried the runtime's reference; with
            // `TERMINATED` set nobody else takes it (`resume` leaves a
            // terminated thread alone), so it is ours: drop it.
            drop(unsafe { Thread::from_raw(self.as_ptr().as_ptr()) });
        }
        // Wait until it is off its processor for good: dropped by the
        // processor that would have run it next, or parked (a wakeup will
        // bring it to a processor, which drops it), or finished meanwhile.
        // Interrupt it if it runs, abort its blocking call if it is in one.
        self.wait_until(
            |c| {
                self.is_finished()
                    || c & (DROPPED | HELD) != 0
                    || self.state().load(Acquire) == PARKED
            },
            || {
                self.interrupt();
                let _ = crate::upcall::abort_step(self.shared(), self.as_ptr().as_ptr() as usize);
            },
        );
        // A thread that began to exit before it saw `TERMINATED` finishes
        // on its own (`begin_exit`): its joiner gets its own result. (Off
        // its processor now, its flag is seen: its switch or park ordered
        // the store.)
        if self.is_finished() || self.header().exiting.load(Acquire) {
            return Err(value);
        }
        // SAFETY: the thread never runs again (it is off its processor and
        // `TERMINATED` keeps it off): parked, held, or dropped by the
        // processor that would have run it, its stack is idle and no
        // kernel call uses it; we won the `TERMINATED` bit.
        let done = unsafe { ended::finish_terminated(self.as_ptr(), value) };
        debug_assert!(done, "the result type was checked above");
        Ok(())
    }

    /// Where the thread stands in the suspension protocol.
    pub fn suspension(&self) -> Suspension {
        let c = self.header().control.load(Acquire);
        // An exiting thread ends on its own: a termination after it began
        // does not count.
        let c = if self.header().exiting.load(Acquire) {
            c & !TERMINATED
        } else {
            c
        };
        if c & TERMINATED != 0 {
            Suspension::Terminated
        } else if c & HELD != 0 {
            Suspension::Stopped
        } else if c == SUSPENDED {
            if self.state().load(Acquire) == PARKED || self.is_finished() {
                Suspension::Stopped
            } else if self.in_call() {
                Suspension::StoppedInCall
            } else {
                Suspension::Suspended
            }
        } else if c == WILL_SUSPEND {
            Suspension::WillSuspend
        } else {
            Suspension::Running
        }
    }

    /// How long the thread has run on processors, if the runtime accounts
    /// it ([`Builder::thread_cpu_time`](crate::Builder::thread_cpu_time)):
    /// the time it held one, by the CPU's time-stamp counter, which
    /// includes any time the kernel took that processor's core away during
    /// its turns (other processes), unlike its kernel thread's CPU clock.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        if !self.shared().account_cpu {
            return None;
        }
        let ticks = self.header().cpu_ticks.load(Relaxed);
        Some(crate::sys::cycles_to_duration(ticks))
    }

    /// The index of the processor that last ran the thread, if any has.
    pub fn last_processor(&self) -> Option<usize> {
        processor::last_of(self.header()).map(|p| p.index)
    }
}

/// The running user-level thread, or `None` on a kernel thread that is not
/// running one.
pub fn try_current() -> Option<Thread> {
    crate::upcall::enter().and_then(|e| e.p.current_ref().cloned())
}

/// The running user-level thread's [`tag`](Thread::tag), or `None` on a
/// kernel thread that is not running one; cheaper than
/// `try_current().map(|t| t.tag())` (no reference taken).
pub fn current_tag() -> Option<usize> {
    crate::upcall::enter().and_then(|e| e.p.current_ref().map(Thread::tag))
}

/// The running user-level thread.
///
/// # Panics
/// On a kernel thread that is not running a ferry thread.
pub fn current() -> Thread {
    crate::upcall::enter()
        .and_then(|e| e.p.current_ref().cloned())
        .expect("ferry::thread::current: not on a ferry thread")
}

/// Lets other runnable threads of this processor run first. Cheap when there
/// are none. Outside a ferry thread, yields the kernel thread.
pub fn yield_now() {
    let Some(e) = crate::upcall::enter().filter(|e| e.p.in_thread()) else {
        std::thread::yield_now();
        return;
    };
    e.p.yield_current();
}

/// Blocks the calling thread until it gets a wakeup token (see
/// [`Thread::unpark`]); may also return spuriously. On a plain kernel thread
/// this is `std::thread::park`.
pub fn park() {
    match crate::upcall::enter() {
        Some(e) => park_entered(e),
        None => std::thread::park(),
    }
}

/// [`park`], inside an entry into the runtime the caller already made (a
/// blocking primitive that took its waiter spinlock in the same critical
/// section): the entry is left after the park returns, on whichever
/// processor resumed the thread.
pub(crate) fn park_entered(e: crate::upcall::Entered) {
    let p = e.p;
    let Some(me) = p.current_ref() else {
        drop(e);
        std::thread::park();
        return;
    };
    // A token taken means return at once (see `park_word`).
    if park_word::take_token_or_start_parking(&me.header().state) {
        return;
    }
    p.switch_away(Pending::Park);
}

impl Unparker {
    /// The caller, as something to wake later.
    pub(crate) fn current() -> Unparker {
        Unparker::current_entered(crate::upcall::enter().as_ref())
    }

    /// [`unpark`](Unparker::unpark) from inside the entry `e` into the
    /// runtime (see `sync::waiter::Entry`), leaving it. A parked ferry
    /// thread of the entered processor's runtime is queued there inside the
    /// level, without entering again and without another reference to it.
    /// Any other wake (another runtime's thread, a kernel thread) is made
    /// after the level is left, as `unpark` makes it. Either way the
    /// reference is dropped after `e`'s level is left, as `unpark`'s caller
    /// dropped it (the last reference to another runtime's thread may hold
    /// that runtime's last `Arc`).
    pub(crate) fn unpark_leaving(self, e: crate::upcall::Entered) {
        match self {
            Unparker::Ferry(t) if std::ptr::eq(e.p.shared(), &t.shared().set) => {
                let unqueued = if park_word::unpark(&t.header().state) {
                    e.p.make_ready(t, Ready::Woken);
                    None
                } else {
                    Some(t)
                };
                drop(e);
                drop(unqueued);
            }
            other => {
                drop(e);
                other.unpark();
            }
        }
    }

    /// The thread `e` runs, or (with no entry, or none running) the calling
    /// kernel thread: [`Unparker::current`] inside an entry already made.
    pub(crate) fn current_entered(e: Option<&crate::upcall::Entered>) -> Unparker {
        match e.and_then(|e| e.p.current_ref()) {
            Some(t) => Unparker::Ferry(t.clone()),
            None => Unparker::Kernel(std::thread::current()),
        }
    }
}
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
    ///
    /// # Panics
    /// If the thread is the caller's own (it would wait forever).
    pub fn join(self) -> Result<T, Panic> {
        match self.join_unless_current() {
            Ok(r) => r,
            Err(_) => panic!("ferry: a thread cannot join itself"),
        }
    }

    /// As [`join`](JoinHandle::join), but gives the handle back instead of
    /// waiting forever when the thread is the caller's own.
    pub fn join_unless_current(self) -> Result<Result<T, Panic>, JoinHandle<T>> {
        if !self.raw.is_complete() && self.raw.never_ran() {
            // A thread that has not run yet usually waits in the caller's
            // own queue (a fork followed by its join): give way once, so
            // that it runs, and most often finishes, before we look again.
            // That spares both sides the park/unpark round; if it did not
            // finish, we wait as usual below. (It cannot be the caller,
            // which is running.) A plain kernel thread just waits.
            if let Some(e) = crate::upcall::enter().filter(|e| e.p.in_thread()) {
                e.p.yield_current();
            }
        }
        if !self.raw.is_complete() {
            let me = Unparker::current();
            if matches!(&me, Unparker::Ferry(t) if t.as_ptr() == self.raw.thread_ptr()) {
                return Err(self);
            }
            // For the deadlock report: what this thread waits on.
            let mine = match &me {
                Unparker::Ferry(t) => Some(t.as_ptr()),
                Unparker::Kernel(_) => None,
            };
            if self.raw.register(me) {
                let id = usize::try_from(self.thread().id().as_u64()).unwrap_or(usize::MAX);
                let record = WaitRecord::nothing_to_undo(crate::waits::WaitsOn::Join as u32, id);
                if let Some(h) = mine {
                    // SAFETY: `h` is the calling thread's own block (it is
                    // running), and `record` stays in place until it is
                    // unregistered below.
                    unsafe { register_wait(&h.as_ref().waits, &record) };
                }
                // Spurious returns from `park` are possible; `COMPLETE` is
                // the truth. A token left behind only makes a later `park`
                // return once, which every caller of `park` tolerates.
                while !self.raw.is_complete() {
                    park();
                }
                if let Some(h) = mine {
                    // SAFETY: as above; the calling thread's own block.
                    unsafe { unregister_wait(&h.as_ref().waits, &record) };
                }
            }
        }
        Ok(self
            .raw
            .into_output()
            .expect("ferry: a completed thread's result is taken only by its one join"))
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
        let Some(e) = crate::upcall::enter() else {
            return Err((self, f));
        };
        let Some(shared) = e.p.current_ref().map(|t| Arc::clone(&t.header().scheduler)) else {
            return Err((self, f));
        };
        // The block first: a spawn the allocator refuses takes nothing else.
        let Some(block) = raw::Block::alloc(|| e.take_block()) else {
            return Ok(Err(out_of_memory()));
        };
        let (id, stack) = match e.p.thread_parts(self.stack_size) {
            Ok(parts) => parts,
            Err(err) => return Ok(Err(err)),
        };
        let suspended = self.suspended;
        let (thread, raw) = self.make(block, shared, id, stack, f);
        if suspended {
            start_held(thread);
        } else {
            e.p.make_ready(thread, Ready::Spawned);
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
        .and_then(|e| e.p.current_ref().map(Thread::as_ptr))
        .expect("ferry::thread::exit_with: not on a ferry thread");
    // SAFETY: `me` is this running thread's block, alive while it runs.
    if !begin_exit(unsafe { me.as_ref() }) {
        drop(value);
        stop_terminated();
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
    e.hand_over();
    p.exit_current()
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
    let e = crate::upcall::enter().expect("a ferry thread ended outside a processor");
    let p = e.p;
    // The next context inherits our level.
    e.hand_over();
    p.exit_current()
}
