//! The two ways a handle holds its end of a stream: [`Alone`], the lone
//! handle of its side, with no synchronisation at all, and [`Turns`], one
//! of several handles of its side, each holding the end in turn under the
//! end's spinlock (Synthesis' monitor on the end with several
//! participants, 002 §5.2). Each handle operation is written once, generic
//! over [`Path`], and compiled once per path.
//!
//! This room owns only that choice; it must not touch the ring (the
//! handles do, inside [`Path::hold`]).

use crate::sync::SpinLock;

/// How a handle holds its end while it moves bytes.
pub(super) trait Path {
    /// Whether other handles of the side may exist (then a write of up to
    /// the atomic-write size goes in whole, and a call moves at most
    /// `TURN_BYTES` under the lock).
    const SHARED: bool;

    /// Runs `f` holding the end that `lock` guards: at once if the handle
    /// is alone on its side, under `lock` if not.
    fn hold<R>(lock: &SpinLock<()>, f: impl FnOnce() -> R) -> R;
}

/// The lone handle of its side: the end is its own.
pub(super) enum Alone {}

/// One of several handles of its side: the end is held under its lock.
pub(super) enum Turns {}

/// The most bytes one call moves while holding an end's lock (a
/// [`SpinLock`] is for short sections: this bounds one to a copy of a few
/// kilobytes). Equal to [`super::ATOMIC_WRITE`].
pub(super) const TURN_BYTES: usize = super::ATOMIC_WRITE;

impl Path for Alone {
    const SHARED: bool = false;

    #[inline(always)]
    fn hold<R>(_: &SpinLock<()>, f: impl FnOnce() -> R) -> R {
        f()
    }
}

impl Path for Turns {
    const SHARED: bool = true;

    #[inline]
    fn hold<R>(lock: &SpinLock<()>, f: impl FnOnce() -> R) -> R {
        let _held = lock.lock();
        f()
    }
}
