//! `std`'s `UnsafeCell` with loom's access methods (`with`, `with_mut`),
//! so that a protocol file written against loom's cell compiles against
//! std's unchanged (`event/timer/entry.rs`, `sync/oneshot/slot.rs`; their
//! loom models give them loom's cell instead).
//!
//! This file owns only the wrapper; it must not add any access rule: the
//! file that uses a cell says in its own protocol who may touch it when.

/// `std::cell::UnsafeCell` reached through closures, as loom's is.
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    /// A cell holding `v`.
    pub(crate) const fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    /// Calls `f` with a pointer to read the value through.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a pointer to write the value through.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
