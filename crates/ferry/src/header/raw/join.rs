//! The join side of a thread's block ([`RawJoin`]): taking the result of a
//! completed thread, registering to be woken when it completes, and
//! detaching (the `join` word's table is in the parent's docs).
//!
//! This file owns the join side's transitions of the `join` word; it must
//! not run the thread or write its result (the cell does, in the parent).

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

use super::{COMPLETE, DETACHED, Header, JOIN_WAITING, release};
use crate::header::{Panic, Thread, Unparker};

/// The join side's reference to a thread's block, typed by the result.
pub(crate) struct RawJoin<T> {
    pub(super) ptr: NonNull<Header>,
    pub(super) _output: PhantomData<fn() -> T>,
}

// SAFETY: the join side only moves a `T: Send` out of the block, and the
// block's shared parts are atomic (see the module docs).
unsafe impl<T: Send> Send for RawJoin<T> {}
// SAFETY: `&RawJoin` only reads the `join` word.
unsafe impl<T: Send> Sync for RawJoin<T> {}

impl<T> RawJoin<T> {
    fn header(&self) -> &Header {
        // SAFETY: a `RawJoin` holds a reference, so the block is live.
        unsafe { self.ptr.as_ref() }
    }

    /// A `Thread` handle on the same block.
    pub(crate) fn thread(&self) -> Thread {
        self.header().refs.fetch_add(1, Relaxed);
        Thread { ptr: self.ptr }
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.header().join.load(Acquire) & COMPLETE != 0
    }

    /// Whether no processor has switched to the thread yet (it is new and
    /// queued, or held or terminated before it ran). A hint: the answer may
    /// be stale by the time the caller acts on it.
    pub(crate) fn never_ran(&self) -> bool {
        self.header().processor.load(Relaxed).is_null()
    }

    /// The block's address, to compare with a `Thread`'s.
    pub(crate) fn thread_ptr(&self) -> NonNull<Header> {
        self.ptr
    }

    /// The result, if the thread has completed and it was not taken yet.
    pub(crate) fn try_take(&self) -> Option<Result<T, Panic>> {
        if !self.is_complete() {
            return None;
        }
        let mut out: Option<Result<T, Panic>> = None;
        // SAFETY: `COMPLETE` seen with Acquire, `DETACHED` is set only by
        // our own drop, and `&self` methods of the one join side do not run
        // concurrently with this one in a way that matters: `take_output`
        // leaves `Taken` behind, so a second call finds nothing.
        unsafe { (self.header().vtable.take_output)(self.ptr, (&raw mut out).cast()) };
        out
    }

    /// Takes the result of a completed thread and gives up the handle: the
    /// join's end. `None` if the thread has not completed.
    pub(crate) fn into_output(self) -> Option<Result<T, Panic>> {
        let out = self.try_take()?;
        // `COMPLETE` is set, so the thread reads the `join` word no more and
        // `DETACHED` would tell nobody anything: release without it.
        release(ManuallyDrop::new(self).ptr);
        Some(out)
    }

    /// Registers the caller to be woken when the thread completes; false if
    /// it already has (then nothing was registered).
    pub(crate) fn register(&self, who: Unparker) -> bool {
        let join = &self.header().join;
        let s = join.load(Acquire);
        if s & COMPLETE != 0 {
            return false;
        }
        if s & JOIN_WAITING != 0 {
            return true;
        }
        // SAFETY: before `JOIN_WAITING` is set only the join side touches
        // `joiner`, and there is one join side.
        unsafe { *self.header().joiner.get() = Some(who) };
        join.fetch_or(JOIN_WAITING, AcqRel) & COMPLETE == 0
    }
}

impl<T> Drop for RawJoin<T> {
    fn drop(&mut self) {
        let prev = self.header().join.fetch_or(DETACHED, AcqRel);
        if prev & COMPLETE != 0 {
            // The result is ours: drop it here rather than with the block,
            // which `Thread` handles may keep alive.
            let mut out: Option<Result<T, Panic>> = None;
            // SAFETY: `COMPLETE` seen with AcqRel; we are the join side.
            unsafe { (self.header().vtable.take_output)(self.ptr, (&raw mut out).cast()) };
        }
        release(self.ptr);
    }
}
