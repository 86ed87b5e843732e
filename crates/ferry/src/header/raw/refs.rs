//! A `Thread` handle as a counted reference to its block: the block's
//! address, the raw pointer a switch carries, clones, and the drop of the
//! last reference, which frees the block.
//!
//! This file owns the `refs` count's updates; it must not touch the join
//! word or the result (the join side does, `join.rs`).

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::fence;

use super::Header;
use crate::header::Thread;

impl Thread {
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: a `Thread` holds a reference, so the block is live.
        unsafe { self.ptr.as_ref() }
    }

    /// The block, without a reference of its own.
    pub(crate) fn as_ptr(&self) -> NonNull<Header> {
        self.ptr
    }

    /// Gives up this reference without dropping it, as a raw pointer for an
    /// atomic slot.
    pub(crate) fn into_raw(self) -> *mut Header {
        ManuallyDrop::new(self).ptr.as_ptr()
    }

    /// Takes back a reference given up with [`Thread::into_raw`].
    ///
    /// # Safety
    /// `ptr` came from `into_raw` and is taken back once.
    pub(crate) unsafe fn from_raw(ptr: *mut Header) -> Thread {
        // SAFETY: `into_raw` pointers are never null (the caller's contract).
        let ptr = unsafe { NonNull::new_unchecked(ptr) };
        Thread { ptr }
    }
}

#[cfg(test)]
impl Thread {
    /// How many references to the block exist (for tests that check a
    /// reference is neither lost nor leaked).
    pub(crate) fn ref_count(&self) -> usize {
        self.header().refs.load(Relaxed)
    }
}

impl Clone for Thread {
    fn clone(&self) -> Thread {
        // Relaxed as in `Arc`: a new reference is made from an existing one,
        // which keeps the block alive meanwhile.
        self.header().refs.fetch_add(1, Relaxed);
        Thread { ptr: self.ptr }
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        release(self.ptr);
    }
}

/// Drops one reference; frees the block with the last.
pub(super) fn release(ptr: NonNull<Header>) {
    // SAFETY: the caller held a reference, so the block is live until the
    // decrement below.
    let header = unsafe { ptr.as_ref() };
    // The last reference needs no read-modify-write: a count of 1 seen
    // while we hold one means ours is the only one, and nobody can make
    // another (references are made only from live ones). The Acquire load
    // pairs with the Release decrements of the others, as the fence below.
    if header.refs.load(Acquire) != 1 {
        if header.refs.fetch_sub(1, Release) != 1 {
            return;
        }
        // Pairs with the Release decrements of the other references: their
        // uses of the block happen before it is freed.
        fence(Acquire);
    }
    let dealloc = header.vtable.dealloc;
    // SAFETY: that was the last reference.
    unsafe { dealloc(ptr) };
}
