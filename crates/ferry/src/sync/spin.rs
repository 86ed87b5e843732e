//! [`SpinLock`]: the spinlock every [`crate::sync`] primitive keeps its
//! waiter bookkeeping under, held for a few instructions.
//!
//! This room owns the lock word and the lock-holder care around it; it
//! never parks, switches or calls out while the lock is held, and never
//! touches what the lock protects.
//!
//! | `SpinLock::locked` | written by | meaning |
//! |--------------------|------------|---------|
//! | `false` | the holder, on unlock (Release) | free |
//! | `true` | a locker, CAS `false -> true` (Acquire) | held, for a few instructions, by a thread that will not switch or park before it unlocks |

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::waiter::Entry;
use crate::upcall::{Critical, critical_enter};

/// Spins with the CPU hint this many times before it starts giving the
/// kernel thread's slice away while waiting for a [`SpinLock`].
const SPINS_BEFORE_YIELD: u32 = 64;

/// A test-and-test-and-set spinlock for critical sections of a few
/// instructions, which every [`crate::sync`] primitive uses for its waiter
/// bookkeeping.
///
/// Held only for a few instructions and never across a park, a switch or a
/// blocking call, so its holder is always running: a waiter spins, then
/// yields its *kernel* thread (`sched_yield`) so that a holder the kernel
/// preempted on the same core can finish.
///
/// **Lock-holder care.** While a ferry thread holds a `SpinLock` it counts
/// in its kernel thread's critical count: ferry never preempts it there
/// (a time slice that ends, or its processor being removed, waits) and
/// performs the preemption right after the last spinlock is released
/// (Synthesis's procedure chaining, the lock-holder recovery of scheduler
/// activations); and its processor is not taken over if it sleeps in the
/// kernel while holding one, so do not block while holding it.
///
/// ```
/// use std::sync::Arc;
/// use ferry::sync::SpinLock;
///
/// let total = ferry::run(|| {
///     let counter = Arc::new(SpinLock::new(0u64));
///     let hs: Vec<_> = (0..4)
///         .map(|_| {
///             let c = Arc::clone(&counter);
///             ferry::spawn(move || {
///                 for _ in 0..1000 {
///                     *c.lock() += 1;
///                 }
///             })
///         })
///         .collect();
///     for h in hs {
///         h.join().unwrap();
///     }
///     let total = *counter.lock();
///     total
/// })
/// .unwrap();
/// assert_eq!(total, 4000);
/// ```
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `SpinGuard`, and `locked` makes
// guards exclusive; the value moves between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &self.locked.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T> SpinLock<T> {
    /// A free lock around `value`.
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning (then yielding the kernel thread) while it is
    /// held.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.acquire(critical_enter().map(|(c, _)| c))
    }

    /// Takes the lock inside the critical level `entry` holds, without
    /// entering one of its own.
    #[inline]
    pub(crate) fn lock_entered<'a>(&'a self, entry: &'a Entry) -> SpinGuard<'a, T> {
        if entry.is_entered() {
            self.acquire(None)
        } else {
            self.lock()
        }
    }

    /// Takes the lock for a holder whose critical level is `critical` (or
    /// a caller's entry, when `None` on a ferry thread).
    #[inline]
    fn acquire(&self, critical: Option<Critical>) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard {
            lock: self,
            _critical: critical,
        }
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        let critical = critical_enter().map(|(c, _)| c);
        self.locked
            .compare_exchange(false, true, Acquire, Relaxed)
            .ok()
            .map(|_| SpinGuard {
                lock: self,
                _critical: critical,
            })
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
    }

    /// The value, through exclusive access (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
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

/// Holds a [`SpinLock`]; unlocks when dropped (and then performs a
/// preemption that waited for it).
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Dropped after the unlock in `drop`: the kernel thread's critical
    /// level, if it is one of a runtime's; `None` too when an [`Entry`]
    /// holds the level for the guard ([`SpinLock::lock_entered`]).
    _critical: Option<Critical>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the
        // value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this one unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
    }
}
