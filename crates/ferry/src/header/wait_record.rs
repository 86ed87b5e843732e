//! A thread's list of registered waits ([`WaitRecord`]), kept in its
//! block's `waits` word, which termination (`ended`) clears up and the
//! deadlock report reads.
//!
//! This room owns the records and the list's protocol; it must not know
//! what a wait *is* (each record's `abandon` says how to leave it, and
//! `crate::sync::waiter` writes those) and must not depend on the thread
//! block (it works on the `waits` word alone).
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
//! | `r`, frozen | `ended`'s `clear`, on a thread that stopped for good | the terminator abandons each record, then frees the stack |
//!
//! Only the thread writes the word while it runs (Relaxed: it is its own
//! program order). The terminator reads it only after the thread is off
//! its processor for good; what ordered that stop (the park word's
//! `PARKING -> PARKED` AcqRel CAS, the `control` word's `DROPPED` or
//! `HELD` bits, each seen with Acquire) also makes the thread's last
//! writes to its records visible.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

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
    /// Whether the record is in its thread's list: set by [`register`],
    /// cleared by [`unregister`]. Copied by a move, so a moved copy of a
    /// registered record says so, and its `unregister` (which finds
    /// another address at the head) fails its debug assertion rather than
    /// leave the original registered after its frame is gone.
    registered: Cell<bool>,
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
            registered: Cell::new(false),
        }
    }

    /// Leaves the wait for the record's terminated thread (see the field).
    ///
    /// # Safety
    /// The record's thread has stopped for good and the record is live.
    pub(crate) unsafe fn abandon(&self) -> bool {
        // SAFETY: the caller's contract is the function's.
        unsafe { (self.abandon)(self) }
    }

    /// The record registered before this one, or null.
    pub(crate) fn outer(&self) -> *const WaitRecord {
        self.outer.get()
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

/// What a thread waits on, by the innermost record of its `waits` word
/// that describes a wait: `(code, on)` as `crate::waits` words them.
///
/// # Safety
/// `waits` is a thread's word, and the thread is not running (parked or held) and stays so
/// while this reads: its records are live and unchanging.
pub(crate) unsafe fn waits_on(waits: &AtomicPtr<WaitRecord>) -> Option<(u32, usize)> {
    let mut r = waits.load(Acquire).cast_const();
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
/// `waits` is the word of the running thread that calls; `r` stays where
/// it is (pinned, or a local never moved), alive, until [`unregister`]ed
/// at that address (or the thread is terminated). Unregistering a moved
/// copy leaves `r` in the list after its frame is gone, and the
/// terminator's clean-up then calls whatever the stack holds there.
pub(crate) unsafe fn register(waits: &AtomicPtr<WaitRecord>, r: &WaitRecord) {
    debug_assert!(!r.registered.get(), "a wait record is registered once");
    r.registered.set(true);
    r.outer.set(waits.load(Relaxed));
    waits.store(ptr::from_ref(r).cast_mut(), Relaxed);
}

/// Unregisters `r` if it is registered; it is then the innermost record
/// (waits end in the reverse order they begin). Does nothing to a record
/// never registered (a waiter that was never queued).
///
/// # Safety
/// `waits` is the word of the running thread that calls.
pub(crate) unsafe fn unregister(waits: &AtomicPtr<WaitRecord>, r: &WaitRecord) {
    if ptr::eq(waits.load(Relaxed), r) {
        waits.store(r.outer.get().cast_mut(), Relaxed);
        r.registered.set(false);
    } else {
        debug_assert!(
            !r.registered.get(),
            "a registered wait record is not the innermost at its unregister: \
             unregistered out of order, or moved after it was registered"
        );
    }
}
