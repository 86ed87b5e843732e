//! The cthread table: generation-counted handles, so that a `cthread_t`
//! stays safe to pass after its thread is gone.
//!
//! This room owns the table and each record's lifetime; it must not
//! schedule or wait (it only ever holds a slot's lock for a few loads and
//! stores; the join's waiting is `cthreads`').
//!
//! # Handles
//!
//! `cthread_t` is `(generation << 32) | (index + 1)` cast to a pointer: zero
//! is never a handle (`NO_CTHREAD`). A slot's generation grows by one each
//! time its record is freed, so an old handle no longer matches; a garbage
//! value fails the range check or the match. Slots live in chunks that are
//! never freed, so reading a slot through any index in range is sound.
//!
//! # A slot's `state` word
//!
//! One atomic word holds the generation (high 32 bits) and the flags
//! below, so that checking a handle and locking its slot is one
//! compare-and-swap (`lock`), and unlocking is one store that may also
//! change the flags (`Locked`'s drop):
//!
//! | bit | written by | meaning |
//! |-----|------------|---------|
//! | `LIVE` | [`alloc_forked`] / [`alloc_known`] (set, by a store, on a slot nobody else can lock); the free (clear, with the generation bumped, under the lock) | the slot holds a record: a handle of its generation is valid |
//! | `LOCKED` | a locker (set, CAS from a `LIVE` state of the handle's generation, Acquire); its unlock (clear, store, Release) | the locker owns the record's fields (all but `progress`, and `join` before `ready`: see below) |
//! | `FORKED` | the allocation; cleared in a fork child for the kept thread (single-threaded there) | made by `cthread_fork`: its thread's result is an [`Outcome`] |
//! | `CLAIMED` | `cthread_join` / `cthread_detach`, under the lock | the right to join was taken: a second join or detach is refused |
//!
//! # The other words of a slot
//!
//! | field | written by | meaning |
//! |-------|------------|---------|
//! | `ready` | the allocation (`false`, or `true` for a thread already known); [`Record::publish`] (`true`, Release, without the lock); the free (`false`, under the lock) | `join` (for a forked thread) is in place: lockers may read and take it |
//! | `join` | [`Record::publish`] (before `ready`, without the lock: only the forker touches it then); lockers once `ready` | the right to join, until a join or detach takes it out |
//! | `thread` | the allocation; lockers once `ready` | the thread, for a record the C API did not fork, or one whose join handle was taken out (detached, or a join waits on it); a forked thread is reached through `join` while it is in place |
//! | `name`, `data` | lockers (`name` also read without the lock by the overflow report: see [`name_for_report`]) | `cthread_set_name` / `cthread_set_data` |
//! | `progress` | the allocation (`NEW`); the thread itself as its function starts (`STARTED`) and returns (`ENDED`) | a hint, read without the lock by a join deciding whether to give way first |
//!
//! `cthread_fork` needs the handle before the spawn (it is the thread's tag
//! from its start), and gets the join handle only after it: the record is
//! live from [`alloc_forked`] on (its name and data work at once), and a
//! locker that needs `join` or `thread` checks `ready` (Acquire) and, if it
//! is not set yet, lets go and comes back (the forker is a few
//! instructions from it). So the publication costs no lock.
//!
//! # Who frees a record
//!
//! A forked thread's closure returns an [`Outcome`]: its result and its
//! handle. Dropping an `Outcome` frees the handle's record, so ferry's own
//! join protocol decides the race between a detach and the thread's end
//! (no flag of ours, no read-modify-write at the thread's end): a detached
//! thread drops its outcome as it completes (or the detach drops it, if the
//! thread had completed), and a joined one's outcome goes to its joiner.
//! Records of threads the C API did not fork are never freed (but in a
//! fork child, see [`forget_all_but`]).
//!
//! # Joining
//!
//! A join (or detach) takes the right and the join handle in one locked
//! section ([`take_join`]). If the thread has finished — a join first gives
//! way once when the thread's `progress` hint says it has not started
//! ([`peek`]), as ferry's own join does for a thread that has not run, so
//! in a fork-then-join it usually has — the same section frees the record,
//! and the join disarms the outcome it takes. Otherwise a join first makes
//! sure it is not the thread itself (refused without touching the right,
//! so that a thread joining itself never makes another's join fail), and
//! a second section leaves a `Thread` in the record (others still reach
//! the thread: `thread_suspend` on a thread being joined), sets `CLAIMED`,
//! which refuses a second join or detach, and takes the join handle out;
//! the outcome's drop frees the record once the join has it.

// The docs above are for maintainers: they name the crate-private steps
// of the protocol they describe.
#![allow(rustdoc::private_intra_doc_links)]

use std::cell::UnsafeCell;

use crate::raw_lock::{RawLock, back_off};

mod fork;
mod join;

pub(crate) use fork::{adopt_in_child, forget_all_but, hold_for_fork, release_after_fork};
pub(crate) use join::{Peek, Taken, peek, take_join, untake_join};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize};

/// Mach's `any_t`: an untyped pointer passed through ferry unchanged.
#[allow(non_camel_case_types)]
pub type any_t = *mut std::ffi::c_void;

/// `cthread_t`'s C type: an opaque handle (see the module docs).
#[allow(non_camel_case_types)]
pub type cthread_t = *mut cthread;

/// The incomplete type behind `cthread_t`; a `cthread_t` is never
/// dereferenced.
#[allow(non_camel_case_types)]
pub struct cthread {
    _private: [u8; 0],
}

/// What a forked thread's closure returns: its result, and its handle,
/// whose record the outcome's drop frees (see the module docs). A
/// disarmed outcome (handle 0) frees nothing.
pub(crate) struct Outcome {
    value: usize,
    handle: usize,
}

impl Outcome {
    /// The outcome `value` of the thread of `h`, which frees `h`'s record
    /// when dropped.
    pub(crate) fn new(value: usize, h: cthread_t) -> Outcome {
        Outcome {
            value,
            handle: h as usize,
        }
    }

    /// The result, without freeing the record (for a caller that freed it
    /// already, or must not).
    pub(crate) fn disarm(self) -> usize {
        let value = self.value;
        std::mem::forget(self);
        value
    }

    /// The result, freeing the record.
    pub(crate) fn into_value(self) -> usize {
        self.value
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        if self.handle != 0 {
            free(self.handle as cthread_t);
        }
    }
}

/// The join handle of a forked thread.
pub(crate) type Join = ferry_rt::JoinHandle<Outcome>;

/// One record; see the module docs for who touches which field when.
#[repr(align(64))]
struct Slot {
    /// Generation and flags; see the module docs.
    state: AtomicU64,
    /// `join` (and `thread`) are published; see the module docs.
    ready: AtomicBool,
    /// How far the thread's function got (`NEW`, `STARTED`, `ENDED`): a
    /// hint for a join (see [`peek`]).
    progress: AtomicU8,
    /// The right to join, while nobody took it out.
    join: UnsafeCell<Option<Join>>,
    /// The thread, for a record the C API did not fork, or one whose join
    /// handle was taken out (detached, or a join waits on it).
    thread: UnsafeCell<Option<ferry_rt::Thread>>,
    /// `cthread_set_name`'s pointer, kept as given (C-Threads copies
    /// nothing). Atomic, so that [`name_for_report`] may read it from a
    /// signal handler without the lock; written only under the lock.
    name: AtomicUsize,
    data: UnsafeCell<usize>,
}

// SAFETY: the cells are reached only under the slot's lock, or by the one
// party the protocol in the module docs gives them to.
unsafe impl Sync for Slot {}

const LOCKED: u64 = 1;
const LIVE: u64 = 2;
const FORKED: u64 = 4;
const CLAIMED: u64 = 8;
const FLAGS: u64 = 0xffff_ffff;

/// `Slot::progress`: the thread's function has not started.
const NEW: u8 = 0;
/// `Slot::progress`: the thread's function runs.
const STARTED: u8 = 1;
/// `Slot::progress`: the thread's function returned.
const ENDED: u8 = 2;

fn generation_of(state: u64) -> u32 {
    (state >> 32) as u32
}

fn state_of(generation: u32, flags: u64) -> u64 {
    (u64::from(generation) << 32) | flags
}

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

/// A slot locked for a valid handle; unlocks (storing `flags` under the
/// handle's generation) when dropped.
struct Locked {
    slot: &'static Slot,
    index: u32,
    generation: u32,
    /// The flags to store at the unlock (without `LOCKED`).
    flags: u64,
    /// Preemption and stops are held off while the slot is locked; let go
    /// after the unlock (a field drops after `Drop::drop`).
    _off: ferry_rt::upcall::PreemptionOff,
}

impl Locked {
    /// Whether the join handle was published.
    fn ready(&self) -> bool {
        self.slot.ready.load(Acquire)
    }

    /// The record's name and data words.
    fn words(&mut self) -> (&AtomicUsize, &mut usize) {
        // SAFETY: the lock makes us the data word's only user.
        (&self.slot.name, unsafe { &mut *self.slot.data.get() })
    }

    /// The join handle, if in place, and the thread (only once
    /// [`Locked::ready`]), to read.
    fn parts(&self) -> (Option<&Join>, Option<&ferry_rt::Thread>) {
        debug_assert!(self.ready());
        // SAFETY: once `ready`, only lockers touch the fields, and we hold
        // the lock.
        unsafe {
            (
                (*self.slot.join.get()).as_ref(),
                (*self.slot.thread.get()).as_ref(),
            )
        }
    }

    /// The join handle and the thread, to change.
    ///
    /// # Safety
    /// The record is ready, or the caller is the forker (the one writer of
    /// `join` before it is) and never published it.
    unsafe fn parts_mut(&mut self) -> (&mut Option<Join>, &mut Option<ferry_rt::Thread>) {
        // SAFETY: the lock and the contract make us the fields' only user.
        unsafe { (&mut *self.slot.join.get(), &mut *self.slot.thread.get()) }
    }

    /// Frees the record: the generation moves on, and the slot is free
    /// once unlocked (the caller then puts its index on the free list).
    /// Returns what it held, for the caller to drop after the unlock.
    ///
    /// # Safety
    /// As [`Locked::parts_mut`].
    unsafe fn free(mut self) -> (Option<Join>, Option<ferry_rt::Thread>) {
        // SAFETY: forwarded.
        let (join, thread) = unsafe { self.parts_mut() };
        let parts = (join.take(), thread.take());
        // Set again only by the next allocation or publication, which
        // the unlock's Release store orders after this.
        self.slot.ready.store(false, Relaxed);
        self.generation = self.generation.wrapping_add(1);
        self.flags = 0;
        parts
    }

    /// The slot's index.
    fn index(&self) -> u32 {
        self.index
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        self.slot
            .state
            .store(state_of(self.generation, self.flags), Release);
    }
}

/// Locks `h`'s slot if `h` names a live record.
#[inline]
fn lock(h: cthread_t) -> Option<Locked> {
    let (index, generation) = decode(h)?;
    let s = slot(index)?;
    let mut spins = 0u32;
    loop {
        // Held off while the slot is locked, as for `RawLock::lock`.
        let off = ferry_rt::upcall::preemption_off();
        let now = s.state.load(Relaxed);
        if generation_of(now) != generation || now & LIVE == 0 {
            return None;
        }
        if now & LOCKED == 0
            && s.state
                .compare_exchange_weak(now, now | LOCKED, Acquire, Relaxed)
                .is_ok()
        {
            return Some(Locked {
                slot: s,
                index,
                generation,
                flags: now & FLAGS,
                _off: off,
            });
        }
        drop(off);
        back_off(&mut spins);
    }
}

/// Locks `h`'s slot once its join handle is published (see the module
/// docs: the forker is a few instructions from it).
#[inline]
fn lock_ready(h: cthread_t) -> Option<Locked> {
    let mut spins = 0u32;
    loop {
        let l = lock(h)?;
        if l.ready() {
            return Some(l);
        }
        drop(l);
        back_off(&mut spins);
    }
}

/// Takes a free slot; `None` when the table is full.
fn take_index() -> Option<(u32, &'static Slot)> {
    let mut free = FREE.lock();
    let index = match free.0.pop() {
        Some(i) => i,
        None => {
            let i = free.1;
            if i as usize >= CHUNK * MAX_CHUNKS {
                return None;
            }
            if (i as usize).is_multiple_of(CHUNK) {
                let chunk: Box<[Slot]> = (0..CHUNK)
                    .map(|_| Slot {
                        state: AtomicU64::new(0),
                        ready: AtomicBool::new(false),
                        progress: AtomicU8::new(NEW),
                        join: UnsafeCell::new(None),
                        thread: UnsafeCell::new(None),
                        name: AtomicUsize::new(0),
                        data: UnsafeCell::new(0),
                    })
                    .collect();
                let base = Box::leak(chunk).as_mut_ptr();
                CHUNKS[i as usize / CHUNK].store(base, Release);
            }
            free.1 += 1;
            i
        }
    };
    drop(free);
    Some((index, slot(index).expect("allocated slots are published")))
}

/// Makes a free slot `s` live with `flags`, `name` and `thread`.
///
/// # Safety
/// `s` came from `take_index`: nobody else can lock it (it is not `LIVE`)
/// or holds a guard of it.
unsafe fn make_live(
    index: u32,
    s: &'static Slot,
    flags: u64,
    name: usize,
    thread: Option<ferry_rt::Thread>,
) -> cthread_t {
    let ready = thread.is_some();
    // SAFETY: nobody else touches a slot that is not `LIVE` (the
    // contract); the `LIVE` store below publishes these writes.
    unsafe {
        debug_assert!((*s.join.get()).is_none() && (*s.thread.get()).is_none());
        *s.thread.get() = thread;
        *s.data.get() = 0;
    }
    s.name.store(name, Relaxed);
    s.ready.store(ready, Relaxed);
    s.progress.store(NEW, Relaxed);
    let generation = generation_of(s.state.load(Relaxed));
    s.state.store(state_of(generation, LIVE | flags), Release);
    encode(index, generation)
}

/// A forked thread's record as its forker and the thread itself reach it:
/// the slot, without decoding the handle and looking it up again.
#[derive(Clone, Copy)]
pub(crate) struct Record {
    slot: &'static Slot,
    /// The handle, as a number so that the thread's closure is `Send`.
    handle: usize,
}

impl Record {
    /// The record's handle.
    pub(crate) fn handle(self) -> cthread_t {
        self.handle as cthread_t
    }

    /// Stores the join handle of the freshly spawned thread (see the
    /// module docs), without the lock.
    ///
    /// # Safety
    /// This is the record's one publication, by its forker.
    pub(crate) unsafe fn publish(self, join: Join) {
        // SAFETY: until `ready` is set, only the forker (the caller, once)
        // touches `join`, and the record cannot be freed (that takes the
        // join right, which needs `ready`).
        unsafe { *self.slot.join.get() = Some(join) };
        self.slot.ready.store(true, Release);
    }

    /// Marks the start of the thread's function, called by that thread (a
    /// hint for [`peek`]).
    pub(crate) fn begin(self) {
        // The record is live while its thread runs.
        self.slot.progress.store(STARTED, Relaxed);
    }

    /// Marks the end of the thread's function, called by that thread as
    /// the function returns (a hint for [`peek`]); true if the record is a
    /// fork child's copy that nobody joins (see [`adopt_in_child`]), which
    /// the caller must then free.
    pub(crate) fn end(self) -> bool {
        // The record is live until the thread's outcome is dropped, after
        // this.
        self.slot.progress.store(ENDED, Relaxed);
        // Only the fork child's single thread clears `FORKED`, before this
        // thread goes on: a relaxed load sees it in program order.
        let now = self.slot.state.load(Relaxed);
        let generation = (self.handle >> 32) as u32;
        generation_of(now) == generation && now & LIVE != 0 && now & FORKED == 0
    }
}

/// A record for a thread `cthread_fork` is about to spawn; `None` when the
/// table is full. Its join handle is [`Record::publish`]ed once the thread
/// is spawned.
pub(crate) fn alloc_forked() -> Option<Record> {
    let (index, slot) = take_index()?;
    // SAFETY: just taken off the free list.
    let h = unsafe { make_live(index, slot, FORKED, 0, None) };
    Some(Record {
        slot,
        handle: h as usize,
    })
}

/// A record for `thread`, which the C API did not fork (the first thread,
/// or a Rust thread asking for its handle), named `name`; `None` when the
/// table is full.
pub(crate) fn alloc_known(thread: ferry_rt::Thread, name: usize) -> Option<cthread_t> {
    let (index, s) = take_index()?;
    // SAFETY: just taken off the free list.
    Some(unsafe { make_live(index, s, 0, name, Some(thread)) })
}

/// Undoes [`alloc_forked`] when the spawn failed.
pub(crate) fn unalloc(h: cthread_t) {
    let Some(l) = lock(h) else { return };
    let index = l.index();
    // SAFETY: the caller is the forker, which never published.
    let parts = unsafe { l.free() };
    drop(parts);
    FREE.lock().0.push(index);
}

/// Frees `h`'s record if `h` is still live; what it held is dropped after
/// the slot's lock is released. Called by the one party that owns the
/// record's end: an [`Outcome`]'s drop, or a join or a fork child's thread
/// that has none to drop.
pub(crate) fn free(h: cthread_t) -> bool {
    let Some(l) = lock_ready(h) else {
        return false;
    };
    let index = l.index();
    // SAFETY: ready (the record was published before its outcome could
    // be made, and `lock_ready` checked).
    let parts = unsafe { l.free() };
    drop(parts);
    FREE.lock().0.push(index);
    true
}

/// Runs `f` on `h`'s name and data words under its slot's lock; `None` if
/// `h` names no live record.
pub(crate) fn with_words<R>(
    h: cthread_t,
    f: impl FnOnce(&mut usize, &mut usize) -> R,
) -> Option<R> {
    let mut l = lock(h)?;
    let (name, data) = l.words();
    // Only lockers write the name, so this copy is current until we store
    // it back.
    let mut n = name.load(Relaxed);
    let r = f(&mut n, data);
    name.store(n, Release);
    Some(r)
}

/// The name last set for the thread whose handle is `tag` (null if none,
/// or if `tag` names no live record), read without the lock: atomic loads
/// only, so the overflow report may call it from its signal handler
/// (`ferry_rt::stack::set_tag_namer`).
pub(crate) fn name_for_report(tag: usize) -> *const std::ffi::c_char {
    let Some((index, generation)) = decode(tag as cthread_t) else {
        return std::ptr::null();
    };
    let Some(s) = slot(index) else {
        return std::ptr::null();
    };
    let state = s.state.load(Acquire);
    if generation_of(state) != generation || state & LIVE == 0 {
        return std::ptr::null();
    }
    s.name.load(Acquire) as *const std::ffi::c_char
}

/// Whether `h` names a live record of a thread made by `cthread_fork`
/// (`None` if `h` names no live record).
pub(crate) fn forked(h: cthread_t) -> Option<bool> {
    let (index, generation) = decode(h)?;
    let now = slot(index)?.state.load(Acquire);
    (generation_of(now) == generation && now & LIVE != 0).then_some(now & FORKED != 0)
}

/// The thread behind `h`, if `h` is live.
pub(crate) fn thread(h: cthread_t) -> Option<ferry_rt::Thread> {
    let l = lock_ready(h)?;
    match l.parts() {
        (Some(join), _) => Some(join.thread()),
        (None, thread) => thread.cloned(),
    }
}

/// Every live handle (a snapshot).
pub(crate) fn live() -> Vec<cthread_t> {
    let high = FREE.lock().1;
    let mut out = Vec::new();
    for index in 0..high {
        if let Some(s) = slot(index) {
            let now = s.state.load(Acquire);
            if now & LIVE != 0 {
                out.push(encode(index, generation_of(now)));
            }
        }
    }
    out
}

/// How many records are in use (a scan of the table: for rare callers).
pub(crate) fn live_count() -> usize {
    live().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_go_stale_when_freed() {
        let h = alloc_forked().unwrap().handle();
        assert!(!h.is_null());
        assert_eq!(with_words(h, |_, d| *d), Some(0));
        with_words(h, |_, d| *d = 5);
        assert_eq!(with_words(h, |_, d| *d), Some(5));
        unalloc(h);
        assert!(!free(h), "a free of a freed handle");
        assert_eq!(with_words(h, |_, d| *d), None);
        // The slot is reused under a new generation; the old handle stays dead.
        let h2 = alloc_forked().unwrap().handle();
        assert_ne!(h, h2);
        assert_eq!(with_words(h, |_, d| *d), None);
        assert_eq!(with_words(h2, |_, d| *d), Some(0));
        unalloc(h2);
    }

    #[test]
    fn garbage_handles_are_refused() {
        for g in [1usize, 0xdead_beef, usize::MAX, 12345 << 32, 1 << 40 | 7] {
            assert_eq!(with_words(g as cthread_t, |_, d| *d), None, "{g:#x}");
            assert!(take_join(g as cthread_t, true).is_none());
        }
        assert_eq!(with_words(std::ptr::null_mut(), |_, d| *d), None);
    }
}
