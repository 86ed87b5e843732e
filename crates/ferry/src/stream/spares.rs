//! Spare streams: what closed streams shared (the ring with its bytes, the
//! waits and the end locks), kept for the next open of the same capacity,
//! as Synthesis kept quajects to hand out instead of building them anew
//! (002 §2.3, §6.2): opening a stream then allocates nothing and closing
//! it frees nothing.
//!
//! This room owns the shelf of spares and its bounds; it must not reset a
//! spare nor decide which values may be kept (its caller, the stream's
//! [`Recycle`](super::counted::Recycle), does both before [`keep`]).
//!
//! The shelf holds at most [`PER_CLASS`] spares of each power-of-two
//! capacity up to [`MAX_SPARE_CAPACITY`], and at most [`SPARE_BYTES`] of
//! rings in all; a spare past either bound is freed. The memory kept is
//! the rings' bytes as the streams left them: resident pages stay
//! resident, like memory `free` keeps in its heap. Taking and keeping each
//! hold the shelf's [`SpinLock`] for a few instructions; freeing happens
//! outside it.

use super::Shared;
use super::counted::{Counted, Spare};
use crate::sync::SpinLock;

/// Most bytes of rings the shelf keeps, over every capacity.
pub(super) const SPARE_BYTES: usize = 1 << 20;

/// The largest capacity kept.
pub(super) const MAX_SPARE_CAPACITY: usize = 256 * 1024;

/// Most spares kept of one capacity.
pub(super) const PER_CLASS: usize = 16;

/// One class per power of two from 1 to [`MAX_SPARE_CAPACITY`].
const CLASSES: usize = MAX_SPARE_CAPACITY.trailing_zeros() as usize + 1;

/// The spares, by capacity.
struct Shelf {
    /// Bytes of rings kept, in all.
    bytes: usize,
    /// Spares kept per class, in `slots[class][..counts[class]]`.
    counts: [usize; CLASSES],
    slots: [[Option<Spare<Shared>>; PER_CLASS]; CLASSES],
}

static SHELF: SpinLock<Shelf> = SpinLock::new(Shelf::new());

/// The class of `capacity` (a power of two), if it is one the shelf keeps.
fn class(capacity: usize) -> Option<usize> {
    debug_assert!(capacity.is_power_of_two());
    (capacity <= MAX_SPARE_CAPACITY).then(|| capacity.trailing_zeros() as usize)
}

impl Shelf {
    const fn new() -> Shelf {
        Shelf {
            bytes: 0,
            counts: [0; CLASSES],
            slots: [const { [const { None }; PER_CLASS] }; CLASSES],
        }
    }

    /// A spare of `capacity` bytes, if there is one.
    fn take(&mut self, capacity: usize) -> Option<Spare<Shared>> {
        let c = class(capacity)?;
        let n = self.counts[c];
        if n == 0 {
            return None;
        }
        self.counts[c] = n - 1;
        self.bytes -= capacity;
        self.slots[c][n - 1].take()
    }

    /// Keeps `spare`, or gives it back if that would pass a bound.
    fn put(&mut self, spare: Spare<Shared>) -> Option<Spare<Shared>> {
        let capacity = spare.value().ring.capacity();
        let Some(c) = class(capacity) else {
            return Some(spare);
        };
        let n = self.counts[c];
        if n == PER_CLASS || self.bytes + capacity > SPARE_BYTES {
            return Some(spare);
        }
        self.slots[c][n] = Some(spare);
        self.counts[c] = n + 1;
        self.bytes += capacity;
        None
    }

    /// How many spares of `capacity` bytes it holds.
    #[cfg(test)]
    fn count(&self, capacity: usize) -> usize {
        class(capacity).map_or(0, |c| self.counts[c])
    }
}

/// A spare of `capacity` bytes (a power of two), revived as the first
/// handle of a new stream, if the shelf has one.
pub(super) fn take(capacity: usize) -> Option<Counted<Shared>> {
    class(capacity)?;
    hold_across_fork();
    let spare = SHELF.lock().take(capacity);
    spare.map(Spare::revive)
}

/// Keeps `spare` (reset, with no handle) for the next open of its
/// capacity, or frees it if the shelf is full.
pub(super) fn keep(spare: Spare<Shared>) {
    hold_across_fork();
    let refused = SHELF.lock().put(spare);
    drop(refused); // freed outside the lock
}

/// Registers the shelf's lock with the locks the runtime holds across
/// `fork` (`sync::fork_hold`), once: a child finds the shelf unlocked and
/// whole, not locked by a kernel thread it does not have.
fn hold_across_fork() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if ONCE.is_completed() {
        return;
    }
    // Streams opened on several ferry threads at once race here: the one
    // registering is not switched out while the others wait in the kernel.
    crate::upcall::without_preemption(|| {
        ONCE.call_once(|| crate::sync::fork_hold::register(|| Box::new(SHELF.lock())));
    });
}

/// How many spares of `capacity` bytes the process's shelf holds (for
/// tests).
#[cfg(test)]
pub(super) fn held(capacity: usize) -> usize {
    SHELF.lock().count(capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spare(capacity: usize) -> Spare<Shared> {
        Spare::new(Shared::new(capacity))
    }

    #[test]
    fn a_shelf_keeps_per_class_and_in_all_no_more_than_its_bounds() {
        let mut shelf = Box::new(Shelf::new());
        const CAP: usize = 1 << 14;
        for i in 0..PER_CLASS + 3 {
            let back = shelf.put(spare(CAP));
            assert_eq!(back.is_some(), i >= PER_CLASS, "put {i}");
        }
        assert_eq!(shelf.count(CAP), PER_CLASS);
        assert_eq!(shelf.bytes, PER_CLASS * CAP);

        // Past the largest capacity kept: refused.
        assert!(shelf.put(spare(MAX_SPARE_CAPACITY * 2)).is_some());

        // The byte bound, over every class.
        let mut kept = 0;
        while shelf.put(spare(MAX_SPARE_CAPACITY)).is_none() {
            kept += 1;
            assert!(kept <= PER_CLASS);
        }
        assert!(shelf.bytes <= SPARE_BYTES);
        assert!(shelf.bytes + MAX_SPARE_CAPACITY > SPARE_BYTES || kept == PER_CLASS);

        // Taking gives back what was kept, class by class.
        for _ in 0..PER_CLASS {
            let s = shelf.take(CAP).expect("a spare of CAP");
            assert_eq!(s.value().ring.capacity(), CAP);
        }
        assert!(shelf.take(CAP).is_none());
        assert!(shelf.take(1 << 13).is_none());
        assert_eq!(shelf.bytes, kept * MAX_SPARE_CAPACITY);
    }
}
