//! A raw lock: a test-and-set flag held for a few loads and stores — the
//! cthread table's free list and C-Threads' spin locks (`spin_lock_t`).
//!
//! This room owns the flag's protocol and its guard; it must not decide
//! what the lock guards, nor wait other than by spinning, then yielding.

use std::cell::UnsafeCell;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The free list's lock, and C-Threads' spin locks (`spin_lock_t`, in
/// `locks`): a test-and-set flag held for a few loads and stores, which
/// contenders wait out by spinning a little, then yielding (their
/// processor then runs the holder). Through a guard ([`RawLock::lock`])
/// the holder also holds preemption and thread control's stops off
/// (`ferry::upcall::preemption_off`, about 4 ns a section): a holder
/// suspended or terminated there would keep the free list from every
/// later fork. A spin lock (`lock_raw`) does not: its holder runs the
/// program's code, which may block.
///
/// | `locked` | written by | meaning |
/// |----------|------------|---------|
/// | `false -> true` (CAS, Acquire) | a locker | it owns `value` |
/// | `true -> false` (store, Release) | the owner's guard drop; `force_unlock` before and after a fork, and for `spin_unlock` | free |
pub(crate) struct RawLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through a guard, and `locked` makes
// guards exclusive; the value moves between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for RawLock<T> {}

impl<T> RawLock<T> {
    pub(crate) const fn new(value: T) -> RawLock<T> {
        RawLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, with preemption and thread control's stops held off
    /// until the guard drops: a holder stopped for good (terminated) would
    /// keep the lock from every later caller.
    #[inline]
    pub(crate) fn lock(&self) -> RawGuard<'_, T> {
        let off = ferry_rt::upcall::preemption_off();
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_ok()
        {
            return RawGuard {
                lock: self,
                _off: off,
            };
        }
        drop(off);
        let off = self.lock_contended();
        RawGuard {
            lock: self,
            _off: off,
        }
    }

    /// Spins, then yields, until the lock is taken; returns with preemption
    /// held off (it is let go around each yield: a switch must not carry
    /// it).
    #[cold]
    fn lock_contended(&self) -> ferry_rt::upcall::PreemptionOff {
        let mut spins = 0u32;
        loop {
            let off = ferry_rt::upcall::preemption_off();
            if !self.locked.load(Relaxed)
                && self
                    .locked
                    .compare_exchange_weak(false, true, Acquire, Relaxed)
                    .is_ok()
            {
                return off;
            }
            drop(off);
            back_off(&mut spins);
        }
    }

    /// Takes the lock without a guard and without holding preemption off
    /// (before a fork; `spin_lock`, whose holder runs the program's code).
    pub(crate) fn lock_raw(&self) {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            back_off(&mut spins);
        }
    }

    /// Takes the lock without a guard if it is free (`spin_try_lock`).
    pub(crate) fn try_lock_raw(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
    }

    /// Marks the lock free without a guard.
    ///
    /// # Safety
    /// No guard of it is alive that will be used or dropped (after a fork,
    /// in the parent: the one `lock_raw` took; in the child: any, since
    /// their holders do not exist there; for `spin_unlock`, none is ever
    /// made).
    pub(crate) unsafe fn force_unlock(&self) {
        self.locked.store(false, Release);
    }
}

/// Access to a [`RawLock`]'s value; unlocks when dropped (then lets
/// preemption act again).
pub(crate) struct RawGuard<'a, T> {
    lock: &'a RawLock<T>,
    _off: ferry_rt::upcall::PreemptionOff,
}

impl<T> std::ops::Deref for RawGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard owns the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for RawGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard owns the lock.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for RawGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
    }
}

/// Waits a little for a lock held by someone else: spins, then yields (on
/// one processor the holder may be the thread that must run).
pub(crate) fn back_off(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        ferry_rt::yield_now();
    }
}
