//! The parts every blocking primitive of [`crate::sync`] is built from: a
//! spinlock held for a few instructions, an intrusive FIFO of [`Waiter`]s that
//! live on the (parked) stacks of their threads, and the park loop.
//!
//! This room owns *how* a thread waits and is woken; it never decides *who*
//! is woken (each primitive does), and nothing here parks, switches or calls
//! out while a [`SpinLock`] is held.
//!
//! # A waiter's life
//!
//! A blocking thread builds a [`Waiter`] on its own stack, links it into a
//! primitive's [`WaitList`] under that primitive's spinlock, drops the
//! spinlock and parks until `woken` is set ([`Entry::wait`], or
//! [`Waiter::wait`]). A ferry thread's stack stays where it is while it is
//! parked, and so does a kernel thread's, so the list can point at the
//! waiter.
//!
//! | `Waiter::woken` | written by | meaning |
//! |-----------------|------------|---------|
//! | `false` | [`Entry::waiter`] | queued (or about to be); the list owns the links |
//! | `true` | the waker, under the list's spinlock, after it unlinked the waiter and cloned its [`Unparker`] (Release) | the wait is over; the waker never touches the waiter again, and unparks its clone after dropping the spinlock |
//!
//! The waiter reads `woken` with Acquire, so whatever the waker did before
//! (handing over a lock, a permit, a barrier generation) is visible once it
//! sees `true`. Because the waker unparks a *clone*, the waiter may already
//! have returned and freed its stack frame by then; the late unpark only
//! leaves a stale token, and every park loop here tolerates a spurious
//! return.
//!
//! # One entry per wait or wake
//!
//! Naming the waiting thread, holding a spinlock, parking and queuing a
//! woken thread each need the kernel thread's critical level (see
//! [`SpinLock`]). A primitive enters once with an [`Entry`] and runs all of
//! its steps inside that level: a condition variable's wait enters once
//! instead of three times, its signal once instead of twice. The level is
//! never held across the program's code (`ParkWait`'s `ready` closure runs
//! outside it, and a woken thread's reference is dropped after it), nor
//! across a batch of wakes (`notify_all`, a barrier's or a lock's batch:
//! each wake enters on its own).
//!
//! | `SpinLock::locked` | written by | meaning |
//! |--------------------|------------|---------|
//! | `false` | the holder, on unlock (Release) | free |
//! | `true` | a locker, CAS `false -> true` (Acquire) | held, for a few instructions, by a thread that will not switch or park before it unlocks |

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomPinned;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::processor::{self, Entered};
use crate::thread::Unparker;
use crate::upcall::{Critical, critical_enter};
use std::fmt;

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
        match entry.0 {
            Some(_) => self.acquire(None),
            None => self.lock(),
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

/// One entry into the runtime for a whole wait or wake of a primitive.
///
/// Blocking takes three steps that each need the calling thread's critical
/// level (see [`SpinLock`]): naming the thread for its [`Waiter`], holding
/// the primitive's spinlock, and parking; waking takes two (the spinlock, and
/// queuing the woken thread). An `Entry` enters once and the steps run
/// inside that one level: [`Entry::waiter`], [`SpinLock::lock_entered`],
/// then [`Entry::wait`] or [`Entry::unpark`]. On a plain kernel thread (or
/// an activation between processors) it holds nothing, and each step enters
/// on its own as it would without it.
///
/// Held only for the few instructions of one step sequence: never across
/// the program's code, and never across anything that may block in the
/// kernel.
pub(crate) struct Entry(Option<Entered>);

impl Entry {
    /// Enters the runtime, if the calling kernel thread drives a processor.
    #[inline]
    pub(crate) fn enter() -> Entry {
        Entry(processor::enter())
    }

    /// A waiter for the calling thread (ferry or plain kernel thread).
    #[inline]
    pub(crate) fn waiter(&self) -> Waiter {
        Waiter::with(Unparker::current_entered(self.0.as_ref()))
    }

    /// Parks until `w` is woken, leaving the entry: after the first park
    /// returns (the thread may then run on another processor), or at once
    /// if a waker came first.
    pub(crate) fn wait(self, w: &Waiter) {
        if w.is_woken() {
            return;
        }
        match self.0 {
            Some(e) => crate::thread::park_entered(e),
            None => crate::thread::park(),
        }
        w.wait();
    }

    /// Wakes the thread a waker took out of its list, leaving the entry
    /// (see `Unparker::unpark_leaving`). Call it after dropping the
    /// spinlock.
    #[inline]
    pub(crate) fn unpark(self, w: Wake) {
        match self.0 {
            Some(e) => w.0.unpark_leaving(e),
            None => w.unpark(),
        }
    }
}

/// One blocked thread, on its own stack, linked into one [`WaitList`].
pub(crate) struct Waiter {
    unparker: Unparker,
    /// Links: touched only by whoever holds the spinlock guarding the list
    /// the waiter is in (or owns a list detached with [`WaitList::take`]).
    next: Cell<*const Waiter>,
    prev: Cell<*const Waiter>,
    /// See the module's table.
    woken: AtomicBool,
    /// Linked by address: must not move while in a list.
    _pinned: PhantomPinned,
}

// SAFETY: the `Cell` links are only touched under the list's spinlock (see
// the field doc), `unparker` is only cloned, and `woken` is atomic.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// A waiter that `unparker` wakes.
    #[inline]
    fn with(unparker: Unparker) -> Waiter {
        Waiter {
            unparker,
            next: Cell::new(ptr::null()),
            prev: Cell::new(ptr::null()),
            woken: AtomicBool::new(false),
            _pinned: PhantomPinned,
        }
    }

    /// Parks the calling thread (only its user-level thread if it is a ferry
    /// thread) until a waker has taken this waiter out of its list.
    pub(crate) fn wait(&self) {
        while !self.woken.load(Acquire) {
            crate::thread::park();
        }
    }

    /// Whether a waker has taken this waiter out of its list. Only
    /// meaningful under the list's spinlock (or after [`Waiter::wait`]).
    pub(crate) fn is_woken(&self) -> bool {
        self.woken.load(Acquire)
    }
}

/// Whom to unpark, once the spinlock is dropped.
#[must_use = "a popped waiter must be unparked, after the spinlock is dropped"]
pub(crate) struct Wake(Unparker);

impl Wake {
    /// Unparks the woken thread. Call it after dropping the spinlock.
    pub(crate) fn unpark(self) {
        self.0.unpark();
    }
}

/// A FIFO of waiters, linked through the waiters themselves. Lives inside a
/// [`SpinLock`] (or is a detached batch owned by one waker).
pub(crate) struct WaitList {
    head: *const Waiter,
    tail: *const Waiter,
    len: usize,
}

// SAFETY: the list only holds pointers to `Sync` waiters; who may touch them
// is governed by the spinlock around the list.
unsafe impl Send for WaitList {}

impl Default for WaitList {
    fn default() -> Self {
        WaitList::new()
    }
}

impl WaitList {
    pub(crate) const fn new() -> WaitList {
        WaitList {
            head: ptr::null(),
            tail: ptr::null(),
            len: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Queues `w` last.
    ///
    /// # Safety
    /// `w` is in no list, and stays where it is, alive, until a waker takes it
    /// out (`pop_front`, after which its wait returns) or its owner removes
    /// it with [`WaitList::remove`].
    pub(crate) unsafe fn push_back(&mut self, w: &Waiter) {
        w.next.set(ptr::null());
        w.prev.set(self.tail);
        if self.tail.is_null() {
            self.head = w;
        } else {
            // SAFETY: `tail` is a waiter in this list, alive by the contract
            // of `push_*`.
            unsafe { (*self.tail).next.set(w) };
        }
        self.tail = w;
        self.len += 1;
    }

    /// Queues `w` first (a waiter that was woken but lost the race again).
    ///
    /// # Safety
    /// As [`WaitList::push_back`].
    pub(crate) unsafe fn push_front(&mut self, w: &Waiter) {
        w.prev.set(ptr::null());
        w.next.set(self.head);
        if self.head.is_null() {
            self.tail = w;
        } else {
            // SAFETY: `head` is a waiter in this list, alive by the contract
            // of `push_*`.
            unsafe { (*self.head).prev.set(w) };
        }
        self.head = w;
        self.len += 1;
    }

    /// Takes `w` out without waking it: its owner gives up waiting.
    ///
    /// # Safety
    /// `w` is in this list (not woken).
    pub(crate) unsafe fn remove(&mut self, w: &Waiter) {
        let (prev, next) = (w.prev.get(), w.next.get());
        if prev.is_null() {
            self.head = next;
        } else {
            // SAFETY: a neighbour in this list is alive (contract of `push_*`).
            unsafe { (*prev).next.set(next) };
        }
        if next.is_null() {
            self.tail = prev;
        } else {
            // SAFETY: as above.
            unsafe { (*next).prev.set(prev) };
        }
        self.len -= 1;
    }

    /// Takes the first waiter out and marks it woken; the caller must
    /// [`Wake::unpark`] it after dropping the spinlock.
    pub(crate) fn pop_front(&mut self) -> Option<Wake> {
        let w = self.head;
        if w.is_null() {
            return None;
        }
        // SAFETY: `w` is in this list, so alive until it is marked woken
        // below (contract of `push_*`); after the `woken` store it is not
        // touched again.
        unsafe {
            let next = (*w).next.get();
            self.head = next;
            if next.is_null() {
                self.tail = ptr::null();
            } else {
                (*next).prev.set(ptr::null());
            }
            self.len -= 1;
            let unparker = (*w).unparker.clone();
            (*w).woken.store(true, Release);
            Some(Wake(unparker))
        }
    }

    /// Detaches every waiter as a batch the caller owns, leaving this list
    /// empty; wake the batch with [`WaitList::wake_all`] after dropping the
    /// spinlock.
    pub(crate) fn take(&mut self) -> WaitList {
        std::mem::take(self)
    }

    /// Wakes every waiter of a batch detached with [`WaitList::take`].
    ///
    /// # Safety
    /// The waiters of this batch never [`remove`](WaitList::remove)
    /// themselves (they only leave when woken), so no one but the caller
    /// touches them.
    pub(crate) unsafe fn wake_all(mut self) {
        while let Some(w) = self.pop_front() {
            w.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The references a waiter and its wake take to the thread are dropped
    /// exactly once each, whichever way the waiter leaves: never queued,
    /// taken out by a waker, or removed by its owner.
    #[test]
    fn a_waiters_thread_reference_is_neither_lost_nor_leaked() {
        crate::Runtime::builder()
            .processors(1)
            .run(|| {
                let me = crate::thread::current();
                let base = me.ref_count();
                let entry = Entry::enter();

                let never_queued = entry.waiter();
                assert_eq!(me.ref_count(), base + 1);
                drop(never_queued);
                assert_eq!(me.ref_count(), base);

                let mut list = WaitList::new();
                let woken = entry.waiter();
                // SAFETY: in no list, and it outlives its time in this one
                // (popped below).
                unsafe { list.push_back(&woken) };
                let wake = list.pop_front().expect("queued above");
                assert!(woken.is_woken());
                // The wake holds its own reference, which outlives the
                // woken waiter's.
                drop(woken);
                assert_eq!(me.ref_count(), base + 1);
                drop(wake);
                assert_eq!(me.ref_count(), base);

                let removed = entry.waiter();
                // SAFETY: as above (removed below).
                unsafe {
                    list.push_back(&removed);
                    list.remove(&removed);
                }
                drop(removed);
                assert_eq!(me.ref_count(), base);
                assert!(list.is_empty());
            })
            .unwrap();
    }
}
