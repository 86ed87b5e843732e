//! [`SpinLock`]: a lock for critical sections of a few instructions that
//! never puts its waiter to sleep in the kernel.
//!
//! This module owns the lock word and the waiting on it; it must never
//! park a kernel thread (no futex, no allocation of its own) and never
//! touches what the lock protects but through a guard.
//!
//! A runtime of user-level threads needs it below its own synchronisation:
//! a kernel thread driving a processor that sleeps on a contended `std`
//! mutex looks, to whoever watches for blocking system calls, like one
//! that blocked, and gets its processor taken over. A waiter here spins
//! with the CPU hint, then gives its time slice away (`sched_yield`), so
//! that a holder the kernel preempted on the same core can finish; it is
//! always runnable.
//!
//! The contract that makes this sound is the holder's: hold the lock for
//! a few instructions, never across a blocking call, an allocation that
//! may take the allocator's own lock, a park or a context switch.
//!
//! | `SpinLock::locked` | written by | meaning |
//! |--------------------|------------|---------|
//! | `false` | the holder, on unlock (Release) | free |
//! | `true` | a locker, CAS `false -> true` (Acquire) | held, for a few instructions |
//!
//! Under `cfg(ferry_loom)` the word and the cell come from loom (see
//! `primitive`), so a model of code that uses the lock explores the lock
//! word itself; only the *waiting* differs: a contended locker sleeps on a
//! loom condition variable that every unlock signals, instead of
//! spinning, because loom cannot bound a model in which two threads spin
//! while a third holds what they wait for (tokio-rs/loom#53).

use core::fmt;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::primitive::{AtomicBool, UnsafeCell};
#[cfg(not(ferry_loom))]
use crate::primitive::{spin_loop, yield_now};

/// CPU-hint spins before a waiter starts giving its time slice away (the
/// loom build waits on a condition variable instead).
#[cfg(not(ferry_loom))]
const SPINS_BEFORE_YIELD: u32 = 64;

/// A test-and-test-and-set spin lock around a `T`, for critical sections of
/// a few instructions that neither block nor allocate.
///
/// ```
/// use ferry_queue::lock::SpinLock;
///
/// let lock = std::sync::Arc::new(SpinLock::new(0u64));
/// let hs: Vec<_> = (0..4)
///     .map(|_| {
///         let lock = lock.clone();
///         std::thread::spawn(move || {
///             for _ in 0..1000 {
///                 *lock.lock() += 1;
///             }
///         })
///     })
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert_eq!(*lock.lock(), 4000);
/// ```
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
    /// The model's stand-in for spinning (see the module docs).
    #[cfg(ferry_loom)]
    waiting: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

// SAFETY: `value` is reached only through a `SpinGuard`, and `locked`
// makes guards exclusive; the value moves between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &self.locked.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T> SpinLock<T> {
    /// A free lock around `value`.
    #[cfg(not(ferry_loom))]
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// A free lock around `value` (loom's constructors are not `const`).
    #[cfg(ferry_loom)]
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
            waiting: (loom::sync::Mutex::new(()), loom::sync::Condvar::new()),
        }
    }

    /// Takes the lock, spinning (then yielding the kernel thread) while it
    /// is held.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Acquire, Relaxed)
            .ok()
            .map(|_| SpinGuard { lock: self })
    }

    /// Whether the lock is held now (a snapshot, for statistics and
    /// assertions).
    pub fn is_locked(&self) -> bool {
        self.locked.load(Relaxed)
    }

    /// Marks the lock free without a guard: for a fork child, where the
    /// kernel thread that held it does not exist.
    ///
    /// # Safety
    /// No guard of this lock is alive that will ever be used or dropped,
    /// and the value is consistent (its holder did not stop halfway through
    /// an update, or the caller repairs it).
    pub unsafe fn force_unlock(&self) {
        self.locked.store(false, Release);
        #[cfg(ferry_loom)]
        self.unlocked();
    }

    #[cold]
    #[cfg(ferry_loom)]
    fn lock_contended(&self) {
        let (m, cv) = &self.waiting;
        let mut held = m.lock().unwrap();
        while self
            .locked
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
        {
            held = cv.wait(held).unwrap();
        }
    }

    /// Wakes the model's waiters after an unlock (see the module docs).
    #[cfg(ferry_loom)]
    fn unlocked(&self) {
        let (m, cv) = &self.waiting;
        drop(m.lock().unwrap());
        cv.notify_all();
    }

    #[cold]
    #[cfg(not(ferry_loom))]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    spin_loop();
                } else {
                    yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Acquire, Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Holds a [`SpinLock`]; unlocks when dropped.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other guard, and hence no
        // other reference to the value, exists while this one lives.
        unsafe { &*self.lock.value.with_mut(|p| p) }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this one unique.
        unsafe { &mut *self.lock.value.with_mut(|p| p) }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
        #[cfg(ferry_loom)]
        self.lock.unlocked();
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;

    #[test]
    fn guards_exclude_each_other() {
        let lock = Arc::new(SpinLock::new(Vec::new()));
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        let mut g = lock.lock();
                        // A torn read-modify-write would lose a push.
                        let n = g.len();
                        g.push((t, i));
                        assert_eq!(g.len(), n + 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(lock.lock().len(), 8000);
    }

    #[test]
    fn try_lock_fails_while_held_and_succeeds_after() {
        let lock = SpinLock::new(1);
        let g = lock.lock();
        assert!(lock.is_locked());
        assert!(lock.try_lock().is_none());
        drop(g);
        assert!(!lock.is_locked());
        *lock.try_lock().expect("free") += 1;
        assert_eq!(*lock.lock(), 2);
    }

    #[test]
    fn force_unlock_frees_a_lock_whose_guard_was_forgotten() {
        let lock = SpinLock::new(5);
        std::mem::forget(lock.lock());
        assert!(lock.try_lock().is_none());
        // SAFETY: the forgotten guard is never used or dropped, and the
        // value was not being updated.
        unsafe { lock.force_unlock() };
        assert_eq!(*lock.lock(), 5);
    }
}
