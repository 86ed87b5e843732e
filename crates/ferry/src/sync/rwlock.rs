//! [`RwLock`]: many readers or one writer, blocking at user level.
//!
//! This room owns the reader/writer word and its two waiter queues; it never
//! parks while holding the spinlock, and never lets a reader in while a
//! writer holds the lock or waits for it.
//!
//! # Protocol
//!
//! `state = readers << 2 | QUEUED | WRITER`.
//!
//! | transition | by | when |
//! |------------|----|------|
//! | `s -> s + READER` (CAS, Acquire) | a reader | fast path: neither `WRITER` nor `QUEUED`; or under the spinlock: no `WRITER` and no writer queued |
//! | `0 -> WRITER` (CAS, Acquire) | a writer | fast path; or under the spinlock: no holder (`s & !QUEUED == 0`) |
//! | `s -> s \| QUEUED` (CAS) | a reader or writer, **under the spinlock**, right before it queues itself | it must wait |
//! | `s -> s - READER` (fetch_sub, Release) | a reader unlocking | always; the last reader (`READER \| QUEUED` before) then takes the slow path |
//! | `WRITER -> 0` (CAS, Release) | the writer unlocking | fast path; fails iff `QUEUED` |
//! | `-> grant` (store, Release) | the last unlocker, **under the spinlock**, when nobody holds the lock and waiters are queued | `WRITER` for the first queued writer, or `n * READER` for all `n` queued readers, plus `QUEUED` iff waiters remain |
//!
//! `QUEUED` is set and cleared only under the spinlock. Grants hand the lock
//! over directly: the granted waiters' `woken` flags (Release/Acquire) carry
//! it, and the state word already counts them.
//!
//! # Termination
//!
//! A terminated waiter (see `waiter`'s termination table) that is still
//! queued is removed, and `QUEUED` cleared if both queues are then empty;
//! if it was the last queued writer and no writer holds the lock, the
//! readers queued behind it are admitted at once (a CAS that adds them
//! and clears `QUEUED`: readers holding the lock may unlock meanwhile). A
//! waiter already granted the lock (woken) unlocks it as a reader or
//! writer would, which hands it on.
//!
//! # Fairness
//!
//! Phase-fair, which starves neither side: a reader that arrives while a
//! writer holds the lock *or waits for it* queues; a writer unlocking admits
//! every queued reader at once (if any), otherwise the next writer; the last
//! reader out admits the next writer. So a steady stream of readers cannot
//! starve a writer, and a stream of writers cannot starve readers.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

const WRITER: usize = 1;
const QUEUED: usize = 2;
const READER: usize = 4;

/// Tries (with the spin hint between them) before a blocked reader or writer
/// queues itself.
const SPINS: u32 = 32;

struct Queues {
    readers: WaitList,
    writers: WaitList,
}

/// A reader-writer lock protecting a `T`, for ferry threads and plain kernel
/// threads alike: any number of readers at once, or one writer.
///
/// Blocking blocks only the user-level thread on a ferry thread, the kernel
/// thread otherwise. Phase-fair (see the module docs): readers queue behind a
/// waiting writer, and a writer's unlock admits all queued readers. No
/// poisoning.
///
/// ```
/// use ferry::sync::RwLock;
///
/// ferry::run(|| {
///     let lock = RwLock::new(vec![1, 2]);
///     {
///         let a = lock.read();
///         let b = lock.read(); // readers share
///         assert_eq!(a.len() + b.len(), 4);
///     }
///     lock.write().push(3);
///     assert_eq!(*lock.read(), [1, 2, 3]);
/// })
/// .unwrap();
/// ```
pub struct RwLock<T: ?Sized> {
    state: AtomicUsize,
    queues: SpinLock<Queues>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock owns a `T` and can be sent with it.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: writers get `&mut T` one at a time (needs `T: Send`), readers get
// `&T` concurrently (needs `T: Sync`), as std's `RwLock`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to an [`RwLock`]'s data; unlocks when dropped.
#[must_use = "the lock is released at once if the guard is not kept"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _not_send: PhantomData<*const ()>,
}

/// Exclusive access to an [`RwLock`]'s data; unlocks when dropped.
#[must_use = "the lock is released at once if the guard is not kept"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared read guard gives only `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: a shared write guard gives only `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            state: AtomicUsize::new(0),
            queues: SpinLock::new(Queues {
                readers: WaitList::new(),
                writers: WaitList::new(),
            }),
            data: UnsafeCell::new(value),
        }
    }

    /// The data, consuming the lock.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Takes shared access, blocking while a writer holds the lock or waits
    /// for it.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        if !self.try_read_fast() {
            self.read_contended();
        }
        RwLockReadGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    /// Takes shared access if no writer holds the lock or waits for it.
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.try_read_fast().then(|| RwLockReadGuard {
            lock: self,
            _not_send: PhantomData,
        })
    }

    /// Takes exclusive access, blocking while anyone holds the lock.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        if self
            .state
            .compare_exchange(0, WRITER, Acquire, Relaxed)
            .is_err()
        {
            self.write_contended();
        }
        RwLockWriteGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    /// Takes exclusive access if nobody holds the lock or waits for it.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        self.state
            .compare_exchange(0, WRITER, Acquire, Relaxed)
            .is_ok()
            .then(|| RwLockWriteGuard {
                lock: self,
                _not_send: PhantomData,
            })
    }

    /// The data, through exclusive access to the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn try_read_fast(&self) -> bool {
        let mut s = self.state.load(Relaxed);
        while s & (WRITER | QUEUED) == 0 {
            match self
                .state
                .compare_exchange_weak(s, s + READER, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    #[cold]
    fn read_contended(&self) {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            if self.try_read_fast() {
                return;
            }
        }
        let entry = Entry::enter();
        let me = entry.waiter(self.site(WaitsOn::RwLockRead));
        {
            let mut q = self.queues.lock_entered(&entry);
            let mut s = self.state.load(Relaxed);
            loop {
                if s & WRITER == 0 && q.writers.is_empty() {
                    match self.state.compare_exchange(s, s + READER, Acquire, Relaxed) {
                        Ok(_) => return,
                        Err(now) => s = now,
                    }
                } else if s & QUEUED == 0 {
                    match self.state.compare_exchange(s, s | QUEUED, Relaxed, Relaxed) {
                        Ok(_) => break,
                        Err(now) => s = now,
                    }
                } else {
                    break;
                }
            }
            // SAFETY: `me` is in no list and stays on this frame until
            // `entry.wait` returns, which is after a granting unlocker took it
            // out (a waiter never removes itself; its terminator may, for a
            // thread that never runs again).
            unsafe { q.readers.push_back(&me) };
        }
        // Woken = granted: the state already counts us as a reader.
        entry.wait(&me);
    }

    #[cold]
    fn write_contended(&self) {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            if self
                .state
                .compare_exchange(0, WRITER, Acquire, Relaxed)
                .is_ok()
            {
                return;
            }
        }
        let entry = Entry::enter();
        let me = entry.waiter(self.site(WaitsOn::RwLockWrite));
        {
            let mut q = self.queues.lock_entered(&entry);
            let mut s = self.state.load(Relaxed);
            loop {
                if s & !QUEUED == 0 {
                    match self.state.compare_exchange(s, s | WRITER, Acquire, Relaxed) {
                        Ok(_) => return,
                        Err(now) => s = now,
                    }
                } else if s & QUEUED == 0 {
                    match self.state.compare_exchange(s, s | QUEUED, Relaxed, Relaxed) {
                        Ok(_) => break,
                        Err(now) => s = now,
                    }
                } else {
                    break;
                }
            }
            // SAFETY: as in `read_contended`.
            unsafe { q.writers.push_back(&me) };
        }
        // Woken = granted: the state already says `WRITER` for us.
        entry.wait(&me);
    }

    /// The site this lock's waits (to read or to write: `what`) are left
    /// through (see the module docs).
    fn site(&self, what: WaitsOn) -> Site {
        // SAFETY: `abandon` takes these two parts, which live as long as the
        // lock, and every waiter leaves before the lock can go.
        unsafe { Site::new(abandon, &self.state, Some(&self.queues)) }.describing(what, self)
    }

    fn read_unlock(&self) {
        read_unlock(&self.state, &self.queues);
    }

    fn write_unlock(&self) {
        write_unlock(&self.state, &self.queues);
    }
}

fn read_unlock(state: &AtomicUsize, queues: &SpinLock<Queues>) {
    let prev = state.fetch_sub(READER, Release);
    if prev == READER | QUEUED {
        unlock_contended(state, queues, false);
    }
}

fn write_unlock(state: &AtomicUsize, queues: &SpinLock<Queues>) {
    if state.compare_exchange(WRITER, 0, Release, Relaxed).is_err() {
        unlock_contended(state, queues, true);
    }
}

/// Hands the lock to queued waiters: called by the last reader out (the
/// word reads `QUEUED` then, unless someone barged in) or by a writer
/// whose fast unlock failed (`WRITER | QUEUED`, which it still holds).
#[cold]
fn unlock_contended(state: &AtomicUsize, queues: &SpinLock<Queues>, writer: bool) {
    let entry = Entry::enter();
    let mut q = queues.lock_entered(&entry);
    let s = state.load(Acquire);
    if writer {
        debug_assert_eq!(s, WRITER | QUEUED);
    } else if s != QUEUED {
        // A reader or writer got in before us; its unlock hands over.
        return;
    }
    // Readers first after a writer, writers first after readers.
    if (writer && !q.readers.is_empty()) || q.writers.is_empty() {
        let n = q.readers.len();
        let batch = q.readers.take();
        let queued = if q.writers.is_empty() { 0 } else { QUEUED };
        state.store((n * READER) | queued, Release);
        drop(q);
        // SAFETY: waiters never remove themselves (a terminator leaves a
        // batch's waiter alone until it is woken); the batch is ours.
        unsafe { batch.wake_all(entry) };
    } else {
        let wake = q.writers.pop_front();
        let queued = if q.writers.is_empty() && q.readers.is_empty() {
            0
        } else {
            QUEUED
        };
        state.store(WRITER | queued, Release);
        drop(q);
        if let Some(w) = wake {
            entry.unpark(w);
        }
    }
}

/// Leaves a lock's wait for a terminated waiter `w` (see the module
/// docs): `state` and `queues` are the lock's.
///
/// # Safety
/// As `Site::new`'s `abandon`: `state` points at a lock's `AtomicUsize`,
/// `queues` at its `SpinLock<Queues>`, and `w` is a waiter of it whose
/// thread has stopped for good.
unsafe fn abandon(state: *const (), queues: *const (), w: &Waiter) -> bool {
    // SAFETY: the contract.
    let (state, queues) = unsafe {
        (
            &*state.cast::<AtomicUsize>(),
            &*queues.cast::<SpinLock<Queues>>(),
        )
    };
    let entry = Entry::enter();
    let mut q = queues.lock_entered(&entry);
    let was_writer = q.writers.holds(w);
    if was_writer || q.readers.holds(w) {
        // SAFETY: queued in that list (checked under its spinlock).
        unsafe {
            if was_writer {
                q.writers.remove(w);
            } else {
                q.readers.remove(w);
            }
        }
        let no_writer = q.writers.is_empty() && state.load(Relaxed) & WRITER == 0;
        if was_writer && no_writer && !q.readers.is_empty() {
            // The readers waited only for that writer: admit them. Readers
            // holding the lock may unlock meanwhile, hence the CAS.
            let n = q.readers.len();
            let batch = q.readers.take();
            let mut s = state.load(Relaxed);
            while let Err(now) =
                state.compare_exchange_weak(s, (s + n * READER) & !QUEUED, Release, Relaxed)
            {
                s = now;
            }
            drop(q);
            // SAFETY: as in `unlock_contended`.
            unsafe { batch.wake_all(entry) };
        } else if q.writers.is_empty() && q.readers.is_empty() {
            state.fetch_and(!QUEUED, Relaxed);
        }
        return true;
    }
    if !w.is_woken() {
        // Out already, or in a batch of readers being woken.
        return w.is_out();
    }
    // Granted a lock it will never use: unlock it, which hands it on.
    let reader = w.was_on(&q.readers);
    drop(q);
    drop(entry);
    if reader {
        read_unlock(state, queues);
    } else {
        write_unlock(state, queues);
    }
    true
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard counts as a reader, so no writer holds `&mut T`.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard is the only holder of the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard is the only holder, and `&mut self` makes this
        // the only reference derived from it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
