//! The cthread table: generation-counted handles, so that a `cthread_t`
//! stays safe to pass after its thread is gone.
//!
//! This room owns the table and each record's lifetime; it must not
//! schedule or wait (it only ever holds a slot's spinlock for a few loads
//! and stores).
//!
//! # Handles
//!
//! `cthread_t` is `(generation << 32) | (index + 1)` cast to a pointer: zero
//! is never a handle (`NO_CTHREAD`). A slot's `generation` grows by one each
//! time its record is freed, so an old handle no longer matches; a garbage
//! value fails the range check or the match. Slots live in chunks that are
//! never freed, so reading a slot through any index in range is sound.
//!
//! # A record's life
//!
//! | field | written by | meaning |
//! |-------|------------|---------|
//! | `Record::join` (under the slot's spinlock) | `cthread_fork` (set), `cthread_join` / `cthread_detach` (take) | the right to join; `None` once taken, or for a thread ferry's C API did not create |
//! | `Slot::ends` bit `FINISHED` (`fetch_or`) | the thread's end ([`finish`]), or `thread_terminate` | it ran out, exited or was terminated; a join frees the record |
//! | `Slot::ends` bit `DETACHED` (`fetch_or`) | `cthread_detach`; set from the start for records of threads the C API did not fork | nobody will join: the thread's end frees the record |
//!
//! Whoever sets the second of the two `ends` bits frees the record; a join
//! frees it after the thread completed. A thread's own end needs no lock:
//! its record cannot be freed before it ends (a join waits for the end, a
//! detach frees only once `FINISHED` is set). Everything else is under the
//! slot's spinlock, and a free bumps the generation under it too, so a call
//! that validated a handle sees a record that stays until it lets go.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU32};

use std::cell::UnsafeCell;
use std::sync::atomic::AtomicBool;

/// Mach's `any_t`: an untyped pointer passed through ferry unchanged.
#[allow(non_camel_case_types)]
pub type any_t = *mut std::ffi::c_void;

/// The table's lock: a test-and-set flag held for a few loads and stores.
/// Unlike `ferry::sync::SpinLock` it does not raise the runtime's critical
/// count (which costs as much as the whole critical section here): a
/// holder preempted by a time slice is waited out by contenders that spin
/// a little, then yield (their processor then runs the holder).
///
/// | `locked` | written by | meaning |
/// |----------|------------|---------|
/// | `false -> true` (CAS, Acquire) | a locker | it owns `value` |
/// | `true -> false` (store, Release) | the owner's guard drop; `force_unlock` before and after a fork | free |
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

    #[inline]
    pub(crate) fn lock(&self) -> RawGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        RawGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            if !self.locked.load(Relaxed)
                && self
                    .locked
                    .compare_exchange_weak(false, true, Acquire, Relaxed)
                    .is_ok()
            {
                return;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                ferry_rt::yield_now();
            }
        }
    }

    /// Takes the lock without a guard (before a fork).
    fn lock_raw(&self) {
        std::mem::forget(self.lock());
    }

    /// Marks the lock free without a guard.
    ///
    /// # Safety
    /// No guard of it is alive that will be used or dropped (after a fork,
    /// in the parent: the one `lock_raw` took; in the child: any, since
    /// their holders do not exist there).
    unsafe fn force_unlock(&self) {
        self.locked.store(false, Release);
    }
}

/// Access to a [`RawLock`]'s value; unlocks when dropped.
pub(crate) struct RawGuard<'a, T> {
    lock: &'a RawLock<T>,
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

/// `cthread_t`'s C type: an opaque handle (see the module docs).
#[allow(non_camel_case_types)]
pub type cthread_t = *mut cthread;

/// The incomplete type behind `cthread_t`; a `cthread_t` is never
/// dereferenced.
#[allow(non_camel_case_types)]
pub struct cthread {
    _private: [u8; 0],
}

/// What the table keeps per cthread.
pub(crate) struct Record {
    /// The thread, once known (set right after the spawn).
    pub(crate) thread: Option<ferry_rt::Thread>,
    pub(crate) join: Option<ferry_rt::JoinHandle<usize>>,
    /// `cthread_set_name`'s pointer, kept as given (C-Threads copies nothing).
    pub(crate) name: usize,
    pub(crate) data: usize,
    /// Made by `cthread_fork` (its closure returns a `usize`).
    pub(crate) forked: bool,
}

impl Record {
    pub(crate) fn new(thread: Option<ferry_rt::Thread>, forked: bool) -> Record {
        Record {
            thread,
            join: None,
            name: 0,
            data: 0,
            forked,
        }
    }
}

struct Slot {
    generation: AtomicU32,
    /// `FINISHED | DETACHED`; see the module docs.
    ends: AtomicU32,
    record: RawLock<Option<Record>>,
}

/// `Slot::ends`: the thread ended.
const FINISHED: u32 = 1;
/// `Slot::ends`: nobody will join.
const DETACHED: u32 = 2;

const CHUNK: usize = 1024;
const MAX_CHUNKS: usize = 4096;

#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());
static CHUNKS: [AtomicPtr<Slot>; MAX_CHUNKS] = [NO_CHUNK; MAX_CHUNKS];

/// Free slot indices, and the first index never handed out.
type FreeList = (Vec<u32>, u32);
static FREE: RawLock<FreeList> = RawLock::new((Vec::new(), 0));

fn slot(index: u32) -> Option<&'static Slot> {
    let (chunk, at) = (index as usize / CHUNK, index as usize % CHUNK);
    let base = CHUNKS.get(chunk)?.load(Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: a published chunk is a leaked array of `CHUNK` slots.
    Some(unsafe { &*base.add(at) })
}

fn encode(index: u32, generation: u32) -> cthread_t {
    (((generation as usize) << 32) | (index as usize + 1)) as cthread_t
}

fn decode(h: cthread_t) -> Option<(u32, u32)> {
    let v = h as usize;
    let low = (v & 0xffff_ffff) as u32;
    (low != 0).then(|| (low - 1, (v >> 32) as u32))
}

/// Stores `record` in a free slot and returns its handle; `None` when the
/// table is full.
pub(crate) fn alloc(record: Record) -> Option<cthread_t> {
    let index = {
        let mut free = FREE.lock();
        match free.0.pop() {
            Some(i) => i,
            None => {
                let i = free.1;
                if i as usize >= CHUNK * MAX_CHUNKS {
                    return None;
                }
                if (i as usize).is_multiple_of(CHUNK) {
                    let chunk: Box<[Slot]> = (0..CHUNK)
                        .map(|_| Slot {
                            generation: AtomicU32::new(0),
                            ends: AtomicU32::new(0),
                            record: RawLock::new(None),
                        })
                        .collect();
                    let base = Box::leak(chunk).as_mut_ptr();
                    CHUNKS[i as usize / CHUNK].store(base, Release);
                }
                free.1 += 1;
                i
            }
        }
    };
    let s = slot(index).expect("allocated slots are published");
    let mut r = s.record.lock();
    s.ends
        .store(if record.forked { 0 } else { DETACHED }, Relaxed);
    *r = Some(record);
    let generation = s.generation.load(Relaxed);
    drop(r);
    Some(encode(index, generation))
}

/// Runs `f` on `h`'s record under its slot's lock; `None` if `h` names no
/// live record.
pub(crate) fn with<R>(h: cthread_t, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
    let (index, generation) = decode(h)?;
    let s = slot(index)?;
    let mut r = s.record.lock();
    if s.generation.load(Relaxed) != generation {
        return None;
    }
    r.as_mut().map(f)
}

/// The thread behind `h`, if `h` is live and its thread known.
pub(crate) fn thread(h: cthread_t) -> Option<ferry_rt::Thread> {
    loop {
        match with(h, |r| r.thread.clone()) {
            None => return None,
            Some(Some(t)) => return Some(t),
            // Forked a moment ago: its creator is storing the thread.
            Some(None) => std::hint::spin_loop(),
        }
    }
}

/// Marks `h`'s thread ended; frees the record if it was detached. Called
/// by the thread itself as it ends (or for it by `thread_terminate`), so
/// `h` is live.
pub(crate) fn finish(h: cthread_t) {
    let Some((index, _)) = decode(h) else { return };
    let Some(s) = slot(index) else { return };
    if s.ends.fetch_or(FINISHED, AcqRel) & (FINISHED | DETACHED) == DETACHED {
        free(h);
    }
}

/// As [`finish`], for a thread that was terminated (it will not end by
/// itself): checks under the slot's lock that `h` is still live, and
/// does nothing if the thread had already marked its end.
pub(crate) fn finish_terminated(h: cthread_t) {
    let prev = with(h, |_| {
        let (index, _) = decode(h).expect("validated by `with`");
        slot(index)
            .expect("validated by `with`")
            .ends
            .fetch_or(FINISHED, AcqRel)
    });
    if prev.is_some_and(|p| p & (FINISHED | DETACHED) == DETACHED) {
        free(h);
    }
}

/// Marks `h` detached (the caller took its join right, under the slot's
/// lock); frees the record if its thread had ended.
pub(crate) fn detach(h: cthread_t) {
    let Some((index, _)) = decode(h) else { return };
    let Some(s) = slot(index) else { return };
    if s.ends.fetch_or(DETACHED, AcqRel) & FINISHED != 0 {
        free(h);
    }
}

/// Marks the record of `h` (kept in a fork child) as one nobody joins.
pub(crate) fn set_detached(h: cthread_t) {
    if let Some(s) = decode(h).and_then(|(index, _)| slot(index)) {
        s.ends.fetch_or(DETACHED, AcqRel);
    }
}

/// Frees `h`'s record if `h` is still live; the record is dropped after
/// the slot's lock is released.
pub(crate) fn free(h: cthread_t) -> bool {
    let Some((index, generation)) = decode(h) else {
        return false;
    };
    let Some(s) = slot(index) else {
        return false;
    };
    let record = {
        let mut r = s.record.lock();
        if s.generation.load(Relaxed) != generation || r.is_none() {
            return false;
        }
        // Only ever changed under the slot's lock, which we hold.
        s.generation.store(generation.wrapping_add(1), Release);
        r.take()
    };
    drop(record);
    FREE.lock().0.push(index);
    true
}

/// Every live handle (a snapshot).
pub(crate) fn live() -> Vec<cthread_t> {
    let high = FREE.lock().1;
    let mut out = Vec::new();
    for index in 0..high {
        if let Some(s) = slot(index) {
            let r = s.record.lock();
            if r.is_some() {
                out.push(encode(index, s.generation.load(Relaxed)));
            }
        }
    }
    out
}

/// How many records are in use (a scan of the table: for rare callers).
pub(crate) fn live_count() -> usize {
    live().len()
}

/// Before a fork: takes the free list's lock, so that the child's copy is
/// consistent; the parent lets it go in [`release_after_fork`].
pub(crate) fn hold_for_fork() {
    FREE.lock_raw();
}

/// After a fork, in the parent: lets the free list's lock go.
pub(crate) fn release_after_fork() {
    // SAFETY: `hold_for_fork` took it, without a guard, for this fork.
    unsafe { FREE.force_unlock() };
}

/// In a fork child: frees every record but `keep`'s (their threads are not
/// in the child), without running their drops (they name the parent's
/// runtime, which the child abandons). A slot lock held in the parent at
/// the fork was held by a kernel thread the child does not have: each is
/// forced free first (a slot is only ever held for a few loads and stores,
/// and a half-written record belongs to a thread that is gone anyway).
pub(crate) fn forget_all_but(keep: cthread_t) {
    // The free list's lock was taken before the fork by this very flow;
    // its copy in the child is ours to release.
    // SAFETY: `hold_for_fork` took it without a guard, for this fork.
    unsafe { FREE.force_unlock() };
    let high = FREE.lock().1;
    for index in 0..high {
        let Some(s) = slot(index) else { continue };
        // SAFETY: a fork child has one thread, this one, which holds no
        // slot guard here.
        unsafe { s.record.force_unlock() };
        let generation = s.generation.load(Relaxed);
        if encode(index, generation) == keep {
            continue;
        }
        let mut r = s.record.lock();
        if let Some(rec) = r.take() {
            std::mem::forget(rec);
            s.generation.store(generation.wrapping_add(1), Release);
            drop(r);
            FREE.lock().0.push(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_go_stale_when_freed() {
        let h = alloc(Record::new(None, false)).unwrap();
        assert!(!h.is_null());
        assert_eq!(with(h, |r| r.data), Some(0));
        with(h, |r| r.data = 5);
        assert_eq!(with(h, |r| r.data), Some(5));
        assert!(free(h));
        assert!(!free(h), "a second free of one handle");
        assert_eq!(with(h, |r| r.data), None);
        // The slot is reused under a new generation; the old handle stays dead.
        let h2 = alloc(Record::new(None, false)).unwrap();
        assert_ne!(h, h2);
        assert_eq!(with(h, |r| r.data), None);
        assert_eq!(with(h2, |r| r.data), Some(0));
        assert!(free(h2));
    }

    #[test]
    fn garbage_handles_are_refused() {
        for g in [1usize, 0xdead_beef, usize::MAX, 12345 << 32, 1 << 40 | 7] {
            assert_eq!(with(g as cthread_t, |r| r.data), None, "{g:#x}");
        }
        assert_eq!(with(std::ptr::null_mut(), |r| r.data), None);
    }
}
