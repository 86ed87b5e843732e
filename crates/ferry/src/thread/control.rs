//! Mach's thread control on a [`Thread`] (003 §4): suspend, resume, wait
//! until stopped, abort a blocking call, terminate; and where a thread
//! stands ([`Suspension`]). The control word's protocol is in `header`'s
//! module docs.
//!
//! This file owns the controller's side; it must not run the thread it
//! controls (a processor holds a stopped thread, `processor::switch`).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, SeqCst};

use super::{ended, exit_with};
use crate::header::park_word::PARKED;
use crate::header::raw;
use crate::header::{DROPPED, HELD, RUNNING, Ready, SUSPENDED, TERMINATED, Thread, WILL_SUSPEND};
use crate::processor;

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
        if let Some(mut e) = crate::upcall::enter().filter(|e| {
            e.p.current_ref(&e.tok)
                .is_some_and(|c| c.as_ptr() == self.as_ptr())
        }) {
            let _resumed_on = e.p.switch_away_held(e.tok.rb());
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
            ended::pause(tries);
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
    /// [`Interrupted`](std::io::ErrorKind::Interrupted) instead of retrying it.
    /// A thread parked on a socket of [`crate::net`] (no kernel call) is
    /// woken, and its call returns `Interrupted` too; so is a thread
    /// parked on a file operation in the io_uring of [`crate::fs`], whose
    /// operation is cancelled (unless it completed first: its result then
    /// stands).
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
                crate::upcall::AbortStep::NotInCall => {
                    // A wait on a socket of `crate::net` or on the ring of
                    // `crate::fs` is no blocking call: the reactor ends the
                    // first, a cancel the second (`Interrupted`).
                    let sources = &self.shared().sources;
                    let id = self.id().as_u64();
                    // The ring's cancel takes the locks every file
                    // operation takes inside its critical section: not to
                    // be switched out holding them.
                    return sent
                        || sources.readiness.abort(id)
                        || crate::upcall::without_preemption(|| sources.ring.abort(id));
                }
                crate::upcall::AbortStep::Interrupted => return true,
                crate::upcall::AbortStep::Sent => sent = true,
            }
            tries += 1;
            ended::pause(tries);
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
    /// - **A call into another process is aborted** (000 §5): a thread
    ///   terminated anywhere in [`rpc::Client::call`](crate::rpc::Client::call)
    ///   on a local binding (a shared-memory channel), or while it waits in
    ///   a started [`rpc::Call`](crate::rpc::Call) on one, has the server's
    ///   activation alerted, the reply discarded and the channel's slot and
    ///   permit given back; a call over a remote transport (gRPC, in
    ///   [`rpc::remote::on_alert`](crate::rpc::remote::on_alert)) is
    ///   cancelled as an alert cancels it. (A started `Call` it holds
    ///   without waiting in it is a value on its stack, as below.)
    /// - **Its thread-locals are dropped** ([`thread_local!`](crate::thread_local)):
    ///   their destructors run here, on the caller's thread (a destructor
    ///   that uses a key reaches the *caller's* value).
    /// - **Its stack is freed** (to the stack cache, for the next thread).
    ///   Nothing of ferry's points into it any more: a sleep's or timed
    ///   wait's timer, kept on its stack, was taken out of the runtime's
    ///   timers with its other waits; a join it waited in and a wakeup
    ///   that comes late hold only a reference to the thread, never to
    ///   its stack.
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
            .and_then(|e| e.p.current_ref(&e.tok).map(|c| c.as_ptr() == self.as_ptr()))
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
    /// A turn begins when a processor switches to the thread and ends when
    /// it switches away; in a blocking call the thread holds its processor
    /// until a spare takes it over (from the lend of
    /// [`blocking`](crate::blocking), or, for a call the runtime was not
    /// told of, from when the monitor found its kernel thread asleep), and
    /// all along if it takes the processor back. Each stretch counts once:
    /// the thread's own reading ([`thread::cpu_time`](crate::thread::cpu_time))
    /// never goes back, and grows by no more than the wall-clock time
    /// between two readings plus what servers charged meanwhile.
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
