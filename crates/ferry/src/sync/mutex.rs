//! [`Mutex`]: mutual exclusion that blocks at user level; one CAS to lock and
//! one to unlock when uncontended, and the holder's mark, which answers
//! misuse: relocking one's own mutex, unlocking another's.
//!
//! This room owns the lock word, the holder's mark and the waiter queue; it
//! must never park or switch while holding the queue's spinlock, never wake
//! more than one waiter per unlock, and never refuse a thread that holds the
//! lock (where the holder cannot be told, it lets the call through).
//!
//! # Protocol
//!
//! `state` holds two bits:
//!
//! | value | meaning |
//! |-------|---------|
//! | `0` | unlocked, nobody queued |
//! | `LOCKED` | locked, nobody queued: unlock is one CAS `LOCKED -> 0` |
//! | `LOCKED \| QUEUED` | locked, waiters queued: unlock takes the slow path and wakes one |
//! | `QUEUED` | unlocked, waiters queued (an unlock just woke one of them; anyone may take the lock first) |
//!
//! | transition | by | when |
//! |------------|----|------|
//! | `s -> s \| LOCKED` (CAS, Acquire) | a locker | `s` has no `LOCKED`: fast path (`0 -> LOCKED`) or after spinning / being woken |
//! | `s -> s \| QUEUED` (CAS) | a locker, **under the queue spinlock**, right before it queues itself | `s` has `LOCKED` |
//! | `LOCKED -> 0` (CAS, Release) | the holder | fast unlock; fails iff `QUEUED` is set |
//! | `LOCKED \| QUEUED -> 0 or QUEUED` (store, Release) | the holder, **under the queue spinlock**, after it popped the first waiter | `QUEUED` stays iff waiters remain |
//!
//! `QUEUED` is only set or cleared under the queue spinlock, and only while
//! `LOCKED` is set, so the holder's slow unlock sees a stable word. A locker
//! that sets `QUEUED` and queues itself holds the spinlock throughout, so an
//! unlock that fails its fast CAS finds it in the queue. A woken waiter is not
//! handed the lock: it competes again (a running thread may take the lock
//! first, which keeps the lock busy instead of waiting for the woken thread to
//! be scheduled), and if it loses it re-queues at the *front*, so waiters are
//! served in FIFO order among themselves.
//!
//! # The holder's mark
//!
//! `owner` holds the holder's stack mark (`super::owner`: an address in
//! the frame that locked), or 0:
//!
//! | transition | by | when |
//! |------------|----|------|
//! | `0 -> mark` (Relaxed store) | the new holder | right after its CAS set `LOCKED` |
//! | `mark -> 0` (Relaxed store) | the holder | right before the Release CAS or store that clears `LOCKED` |
//!
//! Only the holder writes it, so the holder reads its own mark back; a thread
//! that does not hold the lock reads 0 or another thread's mark, never its
//! own (it stored 0 over that before letting go). It is read only where
//! misuse is possible: a contended lock checks for a relock (a panic for
//! [`Mutex::lock`], [`WouldDeadlock`] for [`Mutex::lock_raw`]), and
//! [`Mutex::unlock_raw`] and [`Condvar::wait_raw`](super::Condvar::wait_raw)
//! refuse a caller that does not hold the lock ([`NotOwner`]). The guard API
//! needs no such check: only the holder has a guard, and guards are not
//! `Send`.
//!
//! A terminated waiter (see `waiter`'s termination table) that is still
//! queued is removed, and `QUEUED` cleared if it was the last; one that an
//! unlock had already woken passes the wake on: if the lock is free, the
//! next waiter is woken (clearing `QUEUED` if it was the last), and if a
//! thread took the lock meanwhile, that thread's unlock wakes the next.
//! Clearing `QUEUED` there, under the spinlock, is safe whether or not
//! `LOCKED` is set: nobody is queued, and lockers only change `LOCKED`.
//!
//! There is no poisoning: a panic while the lock is held unlocks it (the
//! guard's drop) and the next holder sees the data as the panicking thread
//! left it, as with `parking_lot` and Tokio.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicUsize};

use super::owner::{self, Held};
use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

const LOCKED: u32 = 1;
const QUEUED: u32 = 2;

/// Tries of the lock (with the spin hint between them) before a contended
/// locker queues itself and parks.
const SPINS: u32 = 64;

/// A mutual-exclusion lock protecting a `T`, for ferry threads and plain
/// kernel threads alike.
///
/// A contended [`lock`](Mutex::lock) spins briefly, then blocks: on a ferry
/// thread only that user-level thread (its processor runs others), on a
/// plain kernel thread that kernel thread. Both kinds may contend on one
/// mutex. Waiters are woken in FIFO order; a running thread may still take
/// the lock before a woken one gets to it. No poisoning (see the module docs).
///
/// Misuse is answered rather than hung on: [`lock`](Mutex::lock) by the
/// thread that holds the mutex panics, naming the thread. Unlocking by
/// another thread cannot be written with guards (a [`MutexGuard`] is not
/// `Send`); the raw API for callers that pair lock and unlock themselves
/// ([`lock_raw`](Mutex::lock_raw), [`unlock_raw`](Mutex::unlock_raw))
/// returns errors for both.
///
/// ```
/// use std::sync::Arc;
/// use ferry::sync::Mutex;
///
/// let total = ferry::run(|| {
///     let m = Arc::new(Mutex::new(0u64));
///     let handles: Vec<_> = (0..8)
///         .map(|_| {
///             let m = Arc::clone(&m);
///             ferry::spawn(move || {
///                 for _ in 0..100 {
///                     *m.lock() += 1;
///                 }
///             })
///         })
///         .collect();
///     for h in handles {
///         h.join().unwrap();
///     }
///     let n = *m.lock();
///     n
/// })
/// .unwrap();
/// assert_eq!(total, 800);
/// ```
pub struct Mutex<T: ?Sized> {
    state: AtomicU32,
    /// The holder's stack mark, or 0 (see the module docs).
    owner: AtomicUsize,
    waiters: SpinLock<WaitList>,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex owns a `T` and can be sent with it.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: the lock hands `&mut T` to one thread at a time, so sharing the
// mutex only ever moves access to the `T` between threads: `T: Send`.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Access to a [`Mutex`]'s data; unlocks when dropped.
///
/// Not `Send`, as with std's guard (though a ferry lock is not tied to a
/// kernel thread, the guard keeps std's contract).
#[must_use = "the mutex unlocks at once if the guard is not kept"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard gives only `&T`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            state: AtomicU32::new(0),
            owner: AtomicUsize::new(0),
            waiters: SpinLock::new(WaitList::new()),
            data: UnsafeCell::new(value),
        }
    }

    /// The data, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, blocking the calling thread (user-level thread on a
    /// ferry thread, kernel thread otherwise) while another holds it.
    ///
    /// # Panics
    /// If the calling thread already holds the mutex (it would wait for
    /// itself for ever); the message names the thread.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self
            .state
            .compare_exchange(0, LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            self.owner.store(owner::mark(), Relaxed);
        } else if self.lock_slow().is_err() {
            relock_panic();
        }
        MutexGuard {
            mutex: self,
            _not_send: PhantomData,
        }
    }

    /// Locks the mutex if it is free right now.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let mut s = self.state.load(Relaxed);
        while s & LOCKED == 0 {
            match self
                .state
                .compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => {
                    self.owner.store(owner::mark(), Relaxed);
                    return Some(MutexGuard {
                        mutex: self,
                        _not_send: PhantomData,
                    });
                }
                Err(now) => s = now,
            }
        }
        None
    }

    /// Locks the mutex and keeps it locked without a guard, for callers
    /// that pair lock and unlock themselves (ferry's C API: `mutex_lock`).
    /// Unlock it with [`unlock_raw`](Mutex::unlock_raw).
    ///
    /// # Errors
    /// [`WouldDeadlock`] if the calling thread holds the mutex already: it
    /// returns at once, and the caller still holds it (once: a mutex does
    /// not count its locks).
    pub fn lock_raw(&self) -> Result<(), WouldDeadlock> {
        if self
            .state
            .compare_exchange(0, LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            self.owner.store(owner::mark(), Relaxed);
            return Ok(());
        }
        self.lock_slow()
    }

    /// Takes the mutex if it is free, keeping it locked without a guard;
    /// whether it was taken. See [`lock_raw`](Mutex::lock_raw).
    pub fn try_lock_raw(&self) -> bool {
        self.try_lock().map(std::mem::forget).is_some()
    }

    /// Unlocks a mutex the calling thread locked with
    /// [`lock_raw`](Mutex::lock_raw) or [`try_lock_raw`](Mutex::try_lock_raw)
    /// (or whose guard it forgot), waking one waiter if any.
    ///
    /// # Errors
    /// [`NotOwner`] if the calling thread does not hold the mutex (it is
    /// free, or another thread holds it): the mutex is left as it was. Where
    /// the caller's stack cannot be told (an adopted thread whose adoption
    /// did not record it), the unlock is not checked.
    ///
    /// # Safety
    /// No guard of the caller's for this lock is alive, and the caller holds
    /// no borrow of the data: the next holder may change it at once.
    pub unsafe fn unlock_raw(&self) -> Result<(), NotOwner> {
        if self.held_by_caller() == Held::No {
            return Err(NotOwner);
        }
        self.unlock();
        Ok(())
    }

    /// A guard for a lock the caller holds without one (for
    /// [`Condvar::wait`](super::Condvar::wait) on a raw-locked mutex).
    ///
    /// # Safety
    /// The mutex is locked by the calling thread and no other guard of that
    /// lock is alive.
    pub unsafe fn make_guard_unchecked(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            mutex: self,
            _not_send: PhantomData,
        }
    }

    /// Whether some thread holds the lock at the moment of the call.
    pub fn is_locked(&self) -> bool {
        self.state.load(Relaxed) & LOCKED != 0
    }

    /// Whether threads wait for the lock at the moment of the call.
    pub fn has_waiters(&self) -> bool {
        self.state.load(Relaxed) & QUEUED != 0
    }

    /// Whether the calling thread holds the lock, as its mark tells.
    pub(crate) fn held_by_caller(&self) -> Held {
        owner::caller_holds(self.owner.load(Relaxed))
    }

    /// The contended lock: refuses a relock, then waits its turn and marks
    /// the lock the caller's.
    #[cold]
    fn lock_slow(&self) -> Result<(), WouldDeadlock> {
        if self.held_by_caller() == Held::Yes {
            return Err(WouldDeadlock);
        }
        self.lock_contended();
        self.owner.store(owner::mark(), Relaxed);
        Ok(())
    }

    /// The data, through exclusive access to the mutex (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn lock_contended(&self) {
        let mut spins = 0;
        let mut woken_before = false;
        loop {
            let s = self.state.load(Relaxed);
            if s & LOCKED == 0 {
                if self
                    .state
                    .compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            // Spin only while nobody is queued: queued waiters mean the
            // holder keeps the lock long enough for someone to have given up.
            if s & QUEUED == 0 && spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let entry = Entry::enter();
            // SAFETY: `abandon` takes these two parts, which live as long as
            // the mutex, and every waiter leaves before the mutex can go.
            let site = unsafe { Site::new(abandon, &self.state, Some(&self.waiters)) }
                .describing(WaitsOn::Mutex, self);
            let me = entry.waiter(site);
            {
                let mut list = self.waiters.lock_entered(&entry);
                let s = self.state.load(Relaxed);
                if s & LOCKED == 0 {
                    continue;
                }
                if s & QUEUED == 0
                    && self
                        .state
                        .compare_exchange(s, s | QUEUED, Relaxed, Relaxed)
                        .is_err()
                {
                    continue;
                }
                // SAFETY: `me` is in no list and stays on this stack frame
                // until `entry.wait` below returns, which is after a waker
                // took it out of the list (no one else removes it, but for
                // the terminator of a thread that never runs again).
                unsafe {
                    if woken_before {
                        list.push_front(&me);
                    } else {
                        list.push_back(&me);
                    }
                }
            }
            entry.wait(&me);
            woken_before = true;
            spins = 0;
        }
    }

    /// Unlocks; called by the guard's drop.
    #[inline]
    fn unlock(&self) {
        // Before the release: the next holder's mark must not be overwritten.
        self.owner.store(0, Relaxed);
        if self
            .state
            .compare_exchange(LOCKED, 0, Release, Relaxed)
            .is_err()
        {
            self.unlock_contended();
        }
    }

    #[cold]
    fn unlock_contended(&self) {
        let entry = Entry::enter();
        let wake = {
            let mut list = self.waiters.lock_entered(&entry);
            let wake = list.pop_front();
            // Nobody else changes `state` now: `LOCKED` is ours and `QUEUED`
            // only changes under the spinlock we hold.
            let next = if list.is_empty() { 0 } else { QUEUED };
            self.state.store(next, Release);
            wake
        };
        if let Some(w) = wake {
            entry.unpark(w);
        }
    }
}

/// [`Mutex::lock`]'s answer to a relock.
#[cold]
#[inline(never)]
#[track_caller]
fn relock_panic() -> ! {
    panic!(
        "ferry::sync::Mutex::lock: {} already holds this mutex; locking it again would deadlock",
        caller_name()
    )
}

/// The calling thread, for a message: the ferry thread's id and name, or
/// the kernel thread's name.
fn caller_name() -> String {
    match crate::thread::try_current() {
        Some(t) => match t.name() {
            Some(name) => format!("ferry thread {} ('{name}')", t.id().as_u64()),
            None => format!("ferry thread {}", t.id().as_u64()),
        },
        None => match std::thread::current().name() {
            Some(name) => format!("kernel thread '{name}'"),
            None => "an unnamed kernel thread".to_owned(),
        },
    }
}

/// [`Mutex::lock_raw`]'s error: the calling thread already holds the mutex,
/// so waiting for it would never end (C: `EDEADLK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WouldDeadlock;

impl fmt::Display for WouldDeadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the calling thread already holds this mutex")
    }
}

impl std::error::Error for WouldDeadlock {}

/// [`Mutex::unlock_raw`]'s and [`Condvar::wait_raw`](super::Condvar::wait_raw)'s
/// error: the calling thread does not hold the mutex (C: `EPERM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotOwner;

impl fmt::Display for NotOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the calling thread does not hold this mutex")
    }
}

impl std::error::Error for NotOwner {}

/// Leaves a mutex's wait for a terminated waiter `w` (see the module
/// docs): `state` and `waiters` are the mutex's.
///
/// # Safety
/// As `Site::new`'s `abandon`: `state` points at a mutex's `AtomicU32`,
/// `waiters` at its `SpinLock<WaitList>`, and `w` is a waiter of it whose
/// thread has stopped for good.
unsafe fn abandon(state: *const (), waiters: *const (), w: &Waiter) -> bool {
    // SAFETY: the contract.
    let (state, waiters) = unsafe {
        (
            &*state.cast::<AtomicU32>(),
            &*waiters.cast::<SpinLock<WaitList>>(),
        )
    };
    let entry = Entry::enter();
    let mut list = waiters.lock_entered(&entry);
    if list.holds(w) {
        // SAFETY: queued in this list (checked under its spinlock).
        unsafe { list.remove(w) };
    } else if !w.is_woken() || state.load(Relaxed) & LOCKED != 0 {
        // Out of the list already, or the holder's unlock wakes the next.
        return true;
    } else if let Some(next) = list.pop_front() {
        if list.is_empty() {
            state.fetch_and(!QUEUED, Relaxed);
        }
        drop(list);
        entry.unpark(next);
        return true;
    }
    if list.is_empty() {
        state.fetch_and(!QUEUED, Relaxed);
    }
    true
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard holds (for [`super::Condvar`]).
    pub(crate) fn mutex(guard: &Self) -> &'a Mutex<T> {
        guard.mutex
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no `&mut T` exists elsewhere.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this the
        // only reference derived from it.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
