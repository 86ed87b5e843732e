//! The simulation's shared state, owned in turns by phase.
//!
//! This room owns the two cells through which the workers share the
//! simulation without locks: [`Phased`], the whole state, which the leader
//! holds alone in the sequential phase and every worker reads in the
//! parallel ones, and [`Slots`], an array whose disjoint ranges different
//! workers write in one parallel phase. Both hand out raw pointers, never a
//! `&mut` from a `&self`: the dereference, and its `SAFETY` comment naming
//! the row of `sim`'s phase table it relies on, are at the use. This room
//! must not decide who owns what.
//!
//! The barriers between the phases (a `std::sync::Barrier` or a
//! `ferry::sync::Barrier`) order every write of one phase before every read
//! of the next.

use std::cell::UnsafeCell;
use std::ops::Range;

/// A value that one thread holds alone in some phases and all threads read
/// in others, the phases separated by barriers.
pub(crate) struct Phased<T>(UnsafeCell<T>);

// SAFETY: the value is reached only through the raw pointer of `get`,
// whose every dereference keeps the phases exclusive (one `&mut` holder, no
// readers) or shared (readers only, plus writes through `Slots` to disjoint
// ranges); a barrier separates the phases. `T: Send` because the value is
// used from several threads in turn.
unsafe impl<T: Send> Sync for Phased<T> {}

impl<T> Phased<T> {
    /// A cell holding `value`.
    pub(crate) fn new(value: T) -> Phased<T> {
        Phased(UnsafeCell::new(value))
    }

    /// A pointer to the value. Whoever dereferences it makes the phase
    /// table's promise: a `&mut` only for the one thread of a sequential
    /// phase, with no other reference alive; `&` for the readers of a
    /// parallel phase, with no `&mut` alive.
    pub(crate) fn get(&self) -> *mut T {
        self.0.get()
    }
}

/// An array whose elements different threads write in one phase, each its
/// own range.
pub(crate) struct Slots<E>(Vec<UnsafeCell<E>>);

impl<E: Clone> Slots<E> {
    /// `len` copies of `value`.
    pub(crate) fn new(len: usize, value: E) -> Slots<E> {
        Slots((0..len).map(|_| UnsafeCell::new(value.clone())).collect())
    }

    /// Makes the array `len` long, new elements copies of `value`.
    pub(crate) fn resize(&mut self, len: usize, value: E) {
        self.0.resize_with(len, || UnsafeCell::new(value.clone()));
    }
}

impl<E> Slots<E> {
    /// The array, with exclusive access.
    pub(crate) fn as_mut(&mut self) -> &mut [E] {
        // `UnsafeCell<E>` has the layout of `E`; `&mut self` excludes
        // every other access.
        let len = self.0.len();
        let ptr = self.0.as_mut_ptr().cast::<E>();
        // SAFETY: `ptr` is valid for `len` elements of `E` (same layout as
        // `UnsafeCell<E>`), and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// A pointer to the elements in `range` (panics if out of bounds).
    /// Whoever dereferences it as `&mut` makes the phase table's promise:
    /// it is the range's one writer of the phase, and nobody reads those
    /// elements meanwhile.
    pub(crate) fn range(&self, range: Range<usize>) -> *mut [E] {
        let cells = &self.0[range];
        // The elements live in `UnsafeCell`s, which allow writing them
        // through a pointer made from a shared reference.
        std::ptr::slice_from_raw_parts_mut(UnsafeCell::raw_get(cells.as_ptr()), cells.len())
    }

    /// Every element, for readers of a phase in which nobody writes them.
    ///
    /// # Safety
    /// No `&mut` made from [`range`](Slots::range) lives while the
    /// returned reference does.
    pub(crate) unsafe fn all(&self) -> &[E] {
        // SAFETY: `UnsafeCell<E>` has the layout of `E`; the contract
        // excludes writers meanwhile.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<E>(), self.0.len()) }
    }
}
