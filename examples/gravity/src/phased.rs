//! The simulation's shared state, owned in turns by phase.
//!
//! This room owns the two cells through which the workers share the
//! simulation without locks: [`Phased`], the whole state, which the leader
//! holds alone in the sequential phase and every worker reads in the
//! parallel ones, and [`Slots`], an array whose disjoint ranges different
//! workers write in one parallel phase. It must not decide who owns what:
//! that is the phase table of `sim`, and every `unsafe` call of these cells
//! names the row of that table it relies on.
//!
//! The barriers between the phases (a `std::sync::Barrier` or a
//! `ferry::sync::Barrier`) order every write of one phase before every read
//! of the next.

use std::cell::UnsafeCell;
use std::ops::Range;

/// A value that one thread holds alone in some phases and all threads read
/// in others, the phases separated by barriers.
pub(crate) struct Phased<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get` or `get_mut`, whose contracts
// make the phases exclusive (one `get_mut` holder, no readers) or shared
// (readers only, plus writes through `Slots` to disjoint ranges); a
// barrier separates the phases. `T: Send` because the value is used from
// several threads in turn.
unsafe impl<T: Send> Sync for Phased<T> {}

impl<T> Phased<T> {
    /// A cell holding `value`.
    pub(crate) fn new(value: T) -> Phased<T> {
        Phased(UnsafeCell::new(value))
    }

    /// The value, for a reader of a parallel phase.
    ///
    /// # Safety
    /// No thread holds the result of [`get_mut`](Phased::get_mut) while
    /// the returned reference lives (a barrier lies between).
    pub(crate) unsafe fn get(&self) -> &T {
        // SAFETY: the contract: no `&mut T` exists meanwhile.
        unsafe { &*self.0.get() }
    }

    /// The value, for the one thread of a sequential phase.
    ///
    /// # Safety
    /// No other reference to the value (from `get` or `get_mut`) lives
    /// while the returned one does.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_mut(&self) -> &mut T {
        // SAFETY: the contract: this is the only reference.
        unsafe { &mut *self.0.get() }
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

    /// The elements in `range`, for their one writer of the phase.
    ///
    /// # Safety
    /// No other reference to any element of `range` lives while the
    /// returned one does (no other writer of an overlapping range, no
    /// reader of [`all`](Slots::all) in the same phase).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range_mut(&self, range: Range<usize>) -> &mut [E] {
        let cells = &self.0[range];
        // SAFETY: `cells` is in bounds (indexing checked it); the elements
        // live in `UnsafeCell`s, so writing them through a shared `&self`
        // is allowed, and the contract makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(UnsafeCell::raw_get(cells.as_ptr()), cells.len()) }
    }

    /// Every element, for readers of a phase in which nobody writes them.
    ///
    /// # Safety
    /// No reference from [`range_mut`](Slots::range_mut) lives while the
    /// returned one does.
    pub(crate) unsafe fn all(&self) -> &[E] {
        // SAFETY: `UnsafeCell<E>` has the layout of `E`; the contract
        // excludes writers meanwhile.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<E>(), self.0.len()) }
    }
}
