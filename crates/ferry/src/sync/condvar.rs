//! [`Condvar`]: waiting for a condition on data a [`Mutex`] protects.
//!
//! This room owns the condition variable's waiter queue; it never touches
//! the mutex's word itself (it unlocks and relocks through the guard), and
//! never parks while holding its spinlock.
//!
//! # Protocol
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `waiters` (list, under the spinlock) | a waiter pushes itself *before* it unlocks the mutex; a notifier pops (`notify_one`) or detaches all (`notify_all`) | who waits |
//! | `queued` | whoever changes the list, under the spinlock (Relaxed) | the list's length, readable without the spinlock |
//!
//! A waiter is queued while it still holds the mutex. A notifier that changed
//! the condition under the mutex therefore either finds it queued, or the
//! waiter had not yet checked the condition. The notifier reads `queued`
//! without the spinlock: its own lock of the mutex (or its unlock, for a
//! notify after it) happens after the waiter's unlock, which came after the
//! waiter's push, so the count it reads includes the waiter. A notifier that
//! never locks the mutex gets no such guarantee (as with any condvar).
//!
//! A terminated waiter (see `waiter`'s termination table) that is still
//! queued is removed; one that a `notify_one` had already woken passes the
//! notification on to the next waiter, as POSIX asks of a cancelled
//! `pthread_cond_wait`. One woken by a `notify_all` does so too, which
//! gives the next waiter (if one queued since) a spurious wakeup. The
//! waiter's wait ends (and its registration with it) before it locks the
//! mutex again, so a thread terminated in `wait` never holds the mutex.

use std::fmt;
use std::pin::pin;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use super::mutex::{Mutex, MutexGuard, NotOwner};
use super::owner::Held;
use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

/// A condition variable for [`Mutex`], for ferry threads and plain kernel
/// threads alike.
///
/// [`wait`](Condvar::wait) atomically unlocks the mutex and blocks (the
/// user-level thread on a ferry thread, the kernel thread otherwise) until a
/// [`notify_one`](Condvar::notify_one) or
/// [`notify_all`](Condvar::notify_all), then locks the mutex again. Use one
/// condvar with one mutex. As with every condvar, check the condition in a
/// loop (or use [`wait_while`](Condvar::wait_while)).
///
/// Waiting without the mutex cannot be written with guards: `wait` takes the
/// guard, which only the holder has. The raw [`wait_raw`](Condvar::wait_raw)
/// checks that the caller holds the mutex. A condvar is not tied to one
/// mutex: waiters with different mutexes each unlock and relock their own,
/// so mixing them is not an error here (only a puzzle for the reader).
///
/// ```
/// use std::sync::Arc;
/// use ferry::sync::{Condvar, Mutex};
///
/// ferry::run(|| {
///     let pair = Arc::new((Mutex::new(false), Condvar::new()));
///     let p = Arc::clone(&pair);
///     let t = ferry::spawn(move || {
///         *p.0.lock() = true;
///         p.1.notify_one();
///     });
///     let (m, cv) = &*pair;
///     let ready = cv.wait_while(m.lock(), |ready| !*ready);
///     assert!(*ready);
///     drop(ready);
///     t.join().unwrap();
/// })
/// .unwrap();
/// ```
pub struct Condvar {
    waiters: SpinLock<WaitList>,
    queued: AtomicUsize,
}

impl Condvar {
    /// A condition variable nobody waits on.
    pub const fn new() -> Condvar {
        Condvar {
            waiters: SpinLock::new(WaitList::new()),
            queued: AtomicUsize::new(0),
        }
    }

    /// Unlocks `guard`'s mutex, blocks until notified, and locks the mutex
    /// again before returning.
    ///
    /// A wakeup may come without the condition holding (another thread may
    /// have changed it first), so callers re-check it.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex: &'a Mutex<T> = MutexGuard::mutex(&guard);
        {
            let entry = Entry::enter();
            // Pinned, and dropped where it stands at the end of this block:
            // its drop unregisters it by its address, so a moved copy (a
            // `drop(me)`) would leave the linked original registered with
            // the thread after its frame is gone.
            // SAFETY: `abandon` takes a condvar, which outlives its waits.
            let site = unsafe { Site::new(Condvar::abandon, self, None::<&()>) }
                .describing(WaitsOn::Condvar, self);
            let me = pin!(entry.waiter(site));
            {
                let mut list = self.waiters.lock_entered(&entry);
                // SAFETY: `me` is in no list and stays where it is (pinned)
                // until `entry.wait` returns, which is after a notifier took
                // it out (a condvar waiter never removes itself; its
                // terminator may, for a thread that never runs again).
                unsafe { list.push_back(&me) };
                self.queued.store(list.len(), Relaxed);
            }
            drop(guard);
            entry.wait(&me);
            // The wait is over: `me` is dropped (and unregistered) here,
            // before the mutex wait begins.
        }
        mutex.lock()
    }

    /// [`wait`](Condvar::wait) for a mutex the caller locked with
    /// [`Mutex::lock_raw`] (or [`Mutex::try_lock_raw`]): unlocks it, blocks
    /// until notified, and locks it again, leaving it locked without a guard.
    ///
    /// # Errors
    /// [`NotOwner`] if the calling thread does not hold `mutex`: it returns
    /// at once without waiting, and without taking the mutex. (Where the
    /// caller's stack cannot be told, as for [`Mutex::unlock_raw`], the wait
    /// is not checked.)
    ///
    /// # Safety
    /// No guard of the caller's for `mutex` is alive, and the caller holds no
    /// borrow of its data across the call.
    pub unsafe fn wait_raw<T: ?Sized>(&self, mutex: &Mutex<T>) -> Result<(), NotOwner> {
        if mutex.held_by_caller() == Held::No {
            return Err(NotOwner);
        }
        // SAFETY: the caller holds the lock (checked) with no guard alive
        // (the contract); the guard the wait returns stands for the lock
        // taken again, which stays the caller's.
        std::mem::forget(self.wait(unsafe { mutex.make_guard_unchecked() }));
        Ok(())
    }

    /// Whether threads wait on the condvar at the moment of the call.
    pub fn has_waiters(&self) -> bool {
        self.queued.load(Relaxed) != 0
    }

    /// Leaves the wait of a terminated waiter `w` (see the module docs).
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `cv` points at a condvar, `w` is a
    /// waiter of it whose thread has stopped for good.
    unsafe fn abandon(cv: *const (), _: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let cv = unsafe { &*cv.cast::<Condvar>() };
        let entry = Entry::enter();
        let mut list = cv.waiters.lock_entered(&entry);
        if list.holds(w) {
            // SAFETY: queued in this list (checked under its spinlock).
            unsafe { list.remove(w) };
            cv.queued.store(list.len(), Relaxed);
            return true;
        }
        if !w.is_woken() {
            // Out already, or in a `notify_all` batch being woken.
            return w.is_out();
        }
        let next = list.pop_front();
        cv.queued.store(list.len(), Relaxed);
        drop(list);
        if let Some(next) = next {
            entry.unpark(next);
        }
        true
    }

    /// Blocks while `condition` holds for the data: re-checks it after every
    /// wakeup, and returns the guard once it is false.
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> MutexGuard<'a, T>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// Wakes one waiting thread, if any waits (the longest waiting).
    pub fn notify_one(&self) {
        if self.queued.load(Relaxed) == 0 {
            return;
        }
        let entry = Entry::enter();
        let wake = {
            let mut list = self.waiters.lock_entered(&entry);
            let wake = list.pop_front();
            self.queued.store(list.len(), Relaxed);
            wake
        };
        if let Some(w) = wake {
            entry.unpark(w);
        }
    }

    /// Wakes every waiting thread.
    pub fn notify_all(&self) {
        if self.queued.load(Relaxed) == 0 {
            return;
        }
        let entry = Entry::enter();
        let batch = {
            let mut list = self.waiters.lock_entered(&entry);
            self.queued.store(0, Relaxed);
            list.take()
        };
        // SAFETY: condvar waiters never remove themselves (a terminator
        // leaves a batch's waiter alone until it is woken); the batch is
        // ours.
        unsafe { batch.wake_all(entry) };
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar")
            .field("waiters", &self.queued.load(Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Acquire;

    use super::*;

    /// Once a wait has returned, nothing of it is left registered with
    /// the thread: its waiter was unregistered where it was linked (a
    /// moved copy's unregister would leave the linked original in the
    /// thread's list, and a later termination would call into the dead
    /// frame).
    #[test]
    fn a_finished_wait_leaves_nothing_registered() {
        crate::Runtime::builder()
            .processors(1)
            .run(|| {
                let me = crate::thread::current();
                let pair = Arc::new((Mutex::new(false), Condvar::new()));
                let (m, cv) = &*pair;
                // Locked before the notifier exists: the wait below waits.
                let mut g = m.lock();
                let p = Arc::clone(&pair);
                let t = crate::spawn(move || {
                    *p.0.lock() = true;
                    p.1.notify_one();
                });
                assert!(me.header().waits.load(Acquire).is_null());
                assert!(!*g);
                while !*g {
                    g = cv.wait(g);
                    assert!(
                        me.header().waits.load(Acquire).is_null(),
                        "a finished condvar wait left a record registered"
                    );
                }
                drop(g);
                t.join().unwrap();
            })
            .unwrap();
    }
}
