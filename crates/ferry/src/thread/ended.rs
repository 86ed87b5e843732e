//! What a terminated thread leaves behind, and how [`Thread::terminate`]
//! clears it up: the waits it is registered in, its thread-locals and its
//! stack.
//!
//! This room owns the thread's list of registered waits ([`WaitRecord`])
//! and the order of the clean-up; it must not know what a wait *is* (each
//! record's `abandon` says how to leave it, and `crate::sync::waiter`
//! writes those), and it runs only on a thread that never runs again.
//!
//! # Registered waits
//!
//! A ferry thread that links something on its own stack into a structure
//! others reach (a waiter in a lock's list, a batch of waiters it is
//! waking) registers a [`WaitRecord`] for it in `Header::waits` first, and
//! unregisters it once nothing outside points at it any more. Records
//! nest, innermost first, through `outer`.
//!
//! | `Header::waits` | written by | meaning |
//! |-----------------|------------|---------|
//! | null | the thread itself, unregistering its outermost record | nothing outside points into its stack on ferry's behalf |
//! | `r` | the thread itself ([`register`]: `r.outer` = the old value; [`unregister`]: back to `r.outer`) | `r` and the records behind it are live on its stack |
//! | `r`, frozen | [`clear`], on a thread that stopped for good | the terminator abandons each record, then frees the stack |
//!
//! Only the thread writes the word while it runs (Relaxed: it is its own
//! program order). The terminator reads it only after the thread is off
//! its processor for good; what ordered that stop (the park word's
//! `PARKING -> PARKED` AcqRel CAS, the `control` word's `DROPPED` or
//! `HELD` bits, each seen with Acquire) also makes the thread's last
//! writes to its records visible.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{Acquire, Relaxed};

use super::raw::{self, Header};

/// One wait a thread registered: what to do if the thread is terminated
/// in it. Lives on the thread's stack, inside the structure it registers
/// (the first field of a `#[repr(C)]` struct, so `abandon` can reach the
/// rest).
pub(crate) struct WaitRecord {
    /// Leaves the wait for the terminated thread: unlinks what is linked,
    /// passes on what was handed over. Runs on the terminator; returns
    /// false if it must be called again (a waker still owns the links for
    /// a moment).
    ///
    /// # Safety
    /// The record's thread has stopped for good and the record is live.
    abandon: unsafe fn(&WaitRecord) -> bool,
    /// The record registered before this one, or null.
    outer: Cell<*const WaitRecord>,
    /// What the thread waits on, for the deadlock report (`crate::waits`'
    /// code and the object's address or a thread id); code 0 for a record
    /// that is no wait of the thread's own (a batch it is waking).
    what: u32,
    on: usize,
}

impl WaitRecord {
    /// A record that `abandon` undoes, of no wait of the thread's own.
    pub(crate) const fn new(abandon: unsafe fn(&WaitRecord) -> bool) -> WaitRecord {
        WaitRecord::describing(abandon, 0, 0)
    }

    /// A record that `abandon` undoes, of the thread's wait `what` on `on`
    /// (as `crate::waits` words them).
    pub(crate) const fn describing(
        abandon: unsafe fn(&WaitRecord) -> bool,
        what: u32,
        on: usize,
    ) -> WaitRecord {
        WaitRecord {
            abandon,
            outer: Cell::new(ptr::null()),
            what,
            on,
        }
    }

    /// A record of a wait with nothing to undo at termination (a join: the
    /// joined thread holds no pointer into the waiter's stack).
    pub(crate) const fn nothing_to_undo(what: u32, on: usize) -> WaitRecord {
        WaitRecord::describing(nothing_to_abandon, what, on)
    }
}

/// `abandon` of a record with nothing to undo.
///
/// # Safety
/// None needed; `unsafe` for the record's function type.
unsafe fn nothing_to_abandon(_: &WaitRecord) -> bool {
    true
}

/// What the thread of `header` waits on, by its innermost registered
/// record that describes a wait: `(code, on)` as `crate::waits` words them.
///
/// # Safety
/// The thread of `header` is not running (parked or held) and stays so
/// while this reads: its records are live and unchanging.
pub(crate) unsafe fn waits_on(header: &Header) -> Option<(u32, usize)> {
    let mut r = header.waits.load(Acquire).cast_const();
    while let Some(rec) = NonNull::new(r.cast_mut()) {
        // SAFETY: a registered record is live until unregistered, and the
        // thread, not running, unregisters nothing meanwhile.
        let rec = unsafe { rec.as_ref() };
        if rec.what != 0 {
            return Some((rec.what, rec.on));
        }
        r = rec.outer.get();
    }
    None
}

/// Registers `r` as the thread's innermost wait.
///
/// # Safety
/// The caller is the running thread that owns `header`; `r` stays where it
/// is, alive, until [`unregister`]ed (or the thread is terminated).
pub(crate) unsafe fn register(header: &Header, r: &WaitRecord) {
    r.outer.set(header.waits.load(Relaxed));
    header.waits.store(ptr::from_ref(r).cast_mut(), Relaxed);
}

/// Unregisters `r` if it is the innermost record (it always is when
/// registered: waits end in the reverse order they begin).
///
/// # Safety
/// The caller is the running thread that owns `header`.
pub(crate) unsafe fn unregister(header: &Header, r: &WaitRecord) {
    if ptr::eq(header.waits.load(Relaxed), r) {
        header.waits.store(r.outer.get().cast_mut(), Relaxed);
    }
}

/// Abandons every wait the stopped thread registered, innermost first, and
/// empties its list.
///
/// # Safety
/// The thread of `header` has stopped for good (terminated, off its
/// processor), and the caller is its one terminator.
unsafe fn clear(header: &Header) {
    let mut r = header.waits.load(Acquire).cast_const();
    let mut tries = 0u32;
    while let Some(rec) = NonNull::new(r.cast_mut()) {
        // SAFETY: a registered record is live until unregistered, and the
        // thread, stopped for good, unregisters nothing any more.
        let rec = unsafe { rec.as_ref() };
        // SAFETY: as above; the thread has stopped for good.
        if unsafe { (rec.abandon)(rec) } {
            r = rec.outer.get();
            tries = 0;
        } else {
            tries += 1;
            super::pause(tries);
        }
    }
    header.waits.store(ptr::null_mut(), Relaxed);
}

/// Clears up after a terminated thread that has stopped for good, then
/// completes it with `value` as if its closure had returned it: leaves its
/// registered waits (which frees its stack of every outside pointer),
/// drops its thread-locals (their destructors run here, on the caller's
/// thread), puts its stack back in the global stack cache, and completes
/// its join. False (and nothing done but the clean-up) if the closure's
/// result is not a `T`.
///
/// # Safety
/// The thread is terminated and off its processor for good: it never runs
/// again, nothing runs on its stack, no kernel call uses its stack, and
/// the caller is its one terminator.
pub(crate) unsafe fn finish_terminated<T: 'static>(ptr: NonNull<Header>, value: T) -> bool {
    // SAFETY: the caller holds a reference to the block.
    let header = unsafe { ptr.as_ref() };
    // SAFETY: the contract: stopped for good, one terminator.
    unsafe { clear(header) };
    // SAFETY: the thread no longer touches its table (it never runs
    // again), and nobody else does.
    drop(unsafe { raw::take_locals(ptr) });
    // SAFETY: nothing runs on the stack or points into it (the waits are
    // left); the thread never runs again, so its context is never resumed.
    if let Some(stack) = unsafe { raw::take_stack(ptr) } {
        crate::stack::StackCache::global().put(stack);
    }
    // SAFETY: the thread never runs again, so the stage is ours.
    unsafe { raw::finish_with(ptr, value) }
}
