//! The atomics, cells and thread hooks the queues are built from.
//!
//! Under `cfg(ferry_loom)` everything here comes from loom so that the loom
//! models in `tests/loom.rs` explore every interleaving of the real queue code;
//! otherwise it is std. Nothing else in the crate names `std::sync::atomic` for
//! state shared between threads of one process (the shared-memory forms, which
//! loom cannot model, use `core` atomics directly and are compiled out under loom).

#[cfg(not(ferry_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(ferry_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

#[cfg(ferry_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(ferry_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

/// A busy-wait hint. Under loom it yields so the model checker can schedule
/// the thread that will make progress.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(ferry_loom))]
    std::hint::spin_loop();
    #[cfg(ferry_loom)]
    loom::thread::yield_now();
}

/// Gives up the rest of the time slice to the kernel (loom: to the model).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(not(ferry_loom))]
    std::thread::yield_now();
    #[cfg(ferry_loom)]
    loom::thread::yield_now();
}

#[cfg(ferry_loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `std::cell::UnsafeCell` with loom's closure-based access API, so the queue
/// code reads the same under both configurations.
#[cfg(not(ferry_loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(ferry_loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
