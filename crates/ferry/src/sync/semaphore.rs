//! [`Semaphore`]: a counting semaphore that blocks at user level.
//!
//! This room owns the permit count and its waiter queue; it never parks while
//! holding the spinlock, and never lets a permit be both counted and handed to
//! a waiter.
//!
//! # Protocol
//!
//! `state = permits << 1 | QUEUED`.
//!
//! | transition | by | when |
//! |------------|----|------|
//! | `s -> s - 2` (CAS, Acquire) | an acquirer | `s >= 2` (a permit is free) |
//! | `s -> s + 2` (CAS, Release) | a releaser | `QUEUED` clear |
//! | `0 -> QUEUED` (CAS) | an acquirer, **under the spinlock**, right before it queues itself | no permit free |
//! | `QUEUED -> QUEUED or 0` (store) | a releaser, **under the spinlock**, after it re-read `QUEUED` there, popped the first waiter and handed it the permit | `0` iff the queue is now empty (a releaser that finds `QUEUED` gone under the spinlock goes back to the CAS) |
//!
//! Invariant: while `QUEUED` is set the count is zero, and releases hand their
//! permit straight to the first waiter (its `woken` flag, Release/Acquire,
//! carries the permit). So waiters are served in FIFO order and nobody can
//! take a permit past them.
//!
//! A terminated waiter (see `waiter`'s termination table) that is still
//! queued is removed, and the word goes from `QUEUED` to `0` under the
//! spinlock if it was the last (the count is zero while `QUEUED` is set,
//! and nobody changes the word without the spinlock then). One that was
//! already handed a permit gives it back through
//! [`release`](Semaphore::release): to the next waiter, or to the count.

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

const QUEUED: usize = 1;
const PERMIT: usize = 2;

/// Tries (with the spin hint between them) before an acquirer queues itself.
const SPINS: u32 = 32;

/// A counting semaphore for ferry threads and plain kernel threads alike.
///
/// [`acquire`](Semaphore::acquire) takes a permit, blocking (only the
/// user-level thread, on a ferry thread) while there are none;
/// [`release`](Semaphore::release) gives one back, to the longest waiting
/// thread if any waits. Permits are not tied to threads: any thread may
/// release.
///
/// ```
/// use std::sync::Arc;
/// use ferry::sync::Semaphore;
///
/// ferry::run(|| {
///     let sem = Arc::new(Semaphore::new(2));
///     let handles: Vec<_> = (0..5)
///         .map(|_| {
///             let sem = Arc::clone(&sem);
///             ferry::spawn(move || {
///                 let _permit = sem.access(); // at most 2 threads in here
///                 ferry::yield_now();
///             })
///         })
///         .collect();
///     for h in handles {
///         h.join().unwrap();
///     }
///     assert_eq!(sem.available_permits(), 2);
/// })
/// .unwrap();
/// ```
pub struct Semaphore {
    state: AtomicUsize,
    waiters: SpinLock<WaitList>,
}

/// A permit taken by [`Semaphore::access`]; released when dropped.
#[must_use = "the permit is released at once if it is not kept"]
pub struct SemaphorePermit<'a> {
    semaphore: &'a Semaphore,
}

impl Semaphore {
    /// The largest permit count a semaphore can hold.
    pub const MAX_PERMITS: usize = usize::MAX >> 1;

    /// A semaphore with `permits` free permits.
    ///
    /// # Panics
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    pub const fn new(permits: usize) -> Semaphore {
        assert!(
            permits <= Self::MAX_PERMITS,
            "ferry::sync::Semaphore: too many permits"
        );
        Semaphore {
            state: AtomicUsize::new(permits * PERMIT),
            waiters: SpinLock::new(WaitList::new()),
        }
    }

    /// Takes a permit if one is free right now.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        let mut s = self.state.load(Relaxed);
        while s >= PERMIT {
            match self
                .state
                .compare_exchange_weak(s, s - PERMIT, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Takes a permit, blocking the calling thread (the user-level thread on
    /// a ferry thread, the kernel thread otherwise) until one is free.
    #[inline]
    pub fn acquire(&self) {
        if !self.try_acquire() {
            self.acquire_contended();
        }
    }

    /// Takes a permit as [`acquire`](Semaphore::acquire) does, and gives it
    /// back when the returned guard drops.
    pub fn access(&self) -> SemaphorePermit<'_> {
        self.acquire();
        SemaphorePermit { semaphore: self }
    }

    #[cold]
    fn acquire_contended(&self) {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            if self.state.load(Relaxed) & QUEUED != 0 {
                break;
            }
            if self.try_acquire() {
                return;
            }
        }
        let entry = Entry::enter();
        // SAFETY: `abandon` takes a semaphore, which outlives its waits.
        let me = entry.waiter(
            unsafe { Site::new(Semaphore::abandon, self, None::<&()>) }
                .describing(WaitsOn::Semaphore, self),
        );
        {
            let mut list = self.waiters.lock_entered(&entry);
            let mut s = self.state.load(Relaxed);
            loop {
                if s >= PERMIT {
                    match self.state.compare_exchange(s, s - PERMIT, Acquire, Relaxed) {
                        Ok(_) => return,
                        Err(now) => s = now,
                    }
                } else if s == 0 {
                    match self.state.compare_exchange(0, QUEUED, Relaxed, Relaxed) {
                        Ok(_) => break,
                        Err(now) => s = now,
                    }
                } else {
                    break; // QUEUED already
                }
            }
            // SAFETY: `me` is in no list and stays on this frame until
            // `entry.wait` returns, which is after a releaser took it out (a
            // semaphore waiter never removes itself; its terminator may, for
            // a thread that never runs again).
            unsafe { list.push_back(&me) };
        }
        // Woken = handed a permit.
        entry.wait(&me);
    }

    /// Leaves the wait of a terminated waiter `w` (see the module docs).
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `sem` points at a semaphore, `w` is a
    /// waiter of it whose thread has stopped for good.
    unsafe fn abandon(sem: *const (), _: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let sem = unsafe { &*sem.cast::<Semaphore>() };
        {
            let entry = Entry::enter();
            let mut list = sem.waiters.lock_entered(&entry);
            if list.holds(w) {
                // SAFETY: queued in this list (checked under its spinlock).
                unsafe { list.remove(w) };
                if list.is_empty() {
                    // `QUEUED` with a zero count: nobody else changes the
                    // word while we hold the spinlock.
                    sem.state.store(0, Relaxed);
                }
                return true;
            }
            if !w.is_woken() {
                return true; // out already
            }
        }
        // Handed a permit it will never use: give it on.
        sem.release();
        true
    }

    /// Gives a permit back: to the longest waiting thread if one waits,
    /// otherwise to the count.
    ///
    /// # Panics
    /// If the count would exceed [`Semaphore::MAX_PERMITS`].
    #[inline]
    pub fn release(&self) {
        let mut s = self.state.load(Relaxed);
        loop {
            if s & QUEUED != 0 {
                if self.release_contended() {
                    return;
                }
                s = self.state.load(Relaxed);
                continue;
            }
            assert!(
                s < Self::MAX_PERMITS * PERMIT,
                "ferry::sync::Semaphore: too many permits"
            );
            match self
                .state
                .compare_exchange_weak(s, s + PERMIT, Release, Relaxed)
            {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// Hands the permit to the first waiter. Returns false, having done
    /// nothing, if the queue emptied (another release served the last waiter)
    /// since the caller saw `QUEUED`.
    #[cold]
    fn release_contended(&self) -> bool {
        let entry = Entry::enter();
        let wake = {
            let mut list = self.waiters.lock_entered(&entry);
            // `QUEUED` only changes under the spinlock, and while it is set
            // the count is zero and stays zero: the word is `QUEUED` or `0`.
            if self.state.load(Relaxed) & QUEUED == 0 {
                return false;
            }
            let wake = list.pop_front();
            debug_assert!(wake.is_some());
            self.state
                .store(if list.is_empty() { 0 } else { QUEUED }, Relaxed);
            wake
        };
        if let Some(w) = wake {
            entry.unpark(w);
        }
        true
    }

    /// Gives `n` permits back, one at a time as [`release`](Semaphore::release).
    pub fn release_many(&self, n: usize) {
        for _ in 0..n {
            self.release();
        }
    }

    /// The number of free permits at the moment of the call.
    pub fn available_permits(&self) -> usize {
        self.state.load(Relaxed) / PERMIT
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.load(Relaxed);
        f.debug_struct("Semaphore")
            .field("permits", &(s / PERMIT))
            .field("queued", &(s & QUEUED != 0))
            .finish()
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.semaphore.release();
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}
