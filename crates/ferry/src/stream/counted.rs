//! [`Counted`]: the pointer every handle of one stream holds to what they
//! share, counted like an `Arc`, except that the last handle to go hands
//! the allocation to [`Recycle::recycle`] instead of freeing it, so that a
//! closed stream's memory can serve the next open (`spares.rs`).
//!
//! This room owns the count and the allocation's life; it must not know
//! what the value is nor where a recycled one goes (the value's
//! [`Recycle`] decides).
//!
//! # Protocol
//!
//! | word | written by | when | orderings |
//! |------|------------|------|-----------|
//! | `refs` | [`Counted::clone`] (`+1`), a handle's drop (`-1`) | `1` when made or revived from a [`Spare`] | `+1` Relaxed (the cloner holds a handle, so the count is not 0); `-1` Release, and the handle that takes it to `0` issues an Acquire fence before it touches the value: every other handle's use of the value happens before the recycle |
//!
//! Exactly one drop takes the count to `0`, and only that one calls
//! [`Recycle::recycle`], with the allocation as a [`Spare`] that nobody
//! else can reach. `tests/loom_stream.rs` models it.

use std::ops::Deref;
use std::ptr::NonNull;

use super::atomic::Ordering::{Acquire, Relaxed, Release};
use super::atomic::{AtomicUsize, fence};

/// More handles than this to one value is a leak gone wild: abort, as
/// `Arc` does, rather than let the count wrap.
const MAX_REFS: usize = isize::MAX as usize;

/// What becomes of a value when the last [`Counted`] handle to it goes.
pub(super) trait Recycle: Sized {
    /// Takes the value whose handles are all gone: keep it for reuse
    /// ([`Spare::revive`]) or drop it (which frees it).
    fn recycle(spare: Spare<Self>);
}

/// The allocation behind a [`Counted`].
struct Inner<T> {
    refs: AtomicUsize,
    value: T,
}

/// A value no handle points to, in its allocation: owned alone, so it can
/// be reset through [`value_mut`](Spare::value_mut) and handed out again.
pub(super) struct Spare<T>(Box<Inner<T>>);

impl<T> Spare<T> {
    /// A value in an allocation of its own, with no handle yet.
    #[cfg(test)]
    pub(super) fn new(value: T) -> Spare<T> {
        Spare(Box::new(Inner {
            refs: AtomicUsize::new(0),
            value,
        }))
    }

    /// The value, to reset before it is revived.
    pub(super) fn value_mut(&mut self) -> &mut T {
        &mut self.0.value
    }

    /// The value, to read.
    pub(super) fn value(&self) -> &T {
        &self.0.value
    }

    /// The first handle to the value again.
    pub(super) fn revive(self) -> Counted<T>
    where
        T: Recycle,
    {
        // Owned alone: nobody else reads the count (the Release of the
        // hand-over that gives the new handle to another thread orders it).
        self.0.refs.store(1, Relaxed);
        Counted {
            ptr: NonNull::from(Box::leak(self.0)),
        }
    }
}

/// A counted handle to a value shared by a stream's handles (see the
/// module docs).
pub(super) struct Counted<T: Recycle> {
    ptr: NonNull<Inner<T>>,
}

// SAFETY: as `Arc<T>`: the handles give shared access to `T` from any
// thread (`T: Sync`) and the last one may recycle (drop) it on any thread
// (`T: Send`).
unsafe impl<T: Recycle + Send + Sync> Send for Counted<T> {}
// SAFETY: as above.
unsafe impl<T: Recycle + Send + Sync> Sync for Counted<T> {}

impl<T: Recycle> Counted<T> {
    /// The first handle to a new value.
    pub(super) fn new(value: T) -> Counted<T> {
        Spare(Box::new(Inner {
            refs: AtomicUsize::new(0),
            value,
        }))
        .revive()
    }
}

impl<T: Recycle> Deref for Counted<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the allocation lives while a handle does (the count
        // includes this one).
        unsafe { &self.ptr.as_ref().value }
    }
}

impl<T: Recycle> Clone for Counted<T> {
    fn clone(&self) -> Counted<T> {
        // SAFETY: as in `deref`.
        let inner = unsafe { self.ptr.as_ref() };
        if inner.refs.fetch_add(1, Relaxed) >= MAX_REFS {
            std::process::abort();
        }
        Counted { ptr: self.ptr }
    }
}

impl<T: Recycle> Drop for Counted<T> {
    fn drop(&mut self) {
        // SAFETY: as in `deref`.
        if unsafe { self.ptr.as_ref() }.refs.fetch_sub(1, Release) != 1 {
            return;
        }
        fence(Acquire);
        // SAFETY: the count went to 0 here, so no other handle is left:
        // the allocation (made by `Box::leak` in `revive`) is this drop's
        // alone, and every other handle's accesses happen before (the
        // fence above).
        let inner = unsafe { Box::from_raw(self.ptr.as_ptr()) };
        T::recycle(Spare(inner));
    }
}
