//! SP-MC: one producer, many consumers; one CAS per pop.
//!
//! Consumers compete for `tail` with a compare-and-swap; the producer never
//! reads `tail` at all, because each slot carries a sequence stamp that says
//! whose turn it is (the dedicated side needs no synchronisation beyond the
//! stamp: frugality).
//!
//! | word       | written by | when | orderings |
//! |------------|------------|------|-----------|
//! | slot stamp | producer stores `full(p)`; the consumer that took `p` stores `free(p + capacity)` | after writing / after reading the item | stores Release / loads Acquire on both sides |
//! | `tail`     | consumers, CAS `t -> t + 1` | to claim position `t` once its stamp is `full(t)` | CAS Release (the stamp already ordered the item; Release makes `head >= tail` for a reader that loads `tail` Acquire first) |
//! | `head`     | producer   | before the stamp of each push | Relaxed, informational (`len`, drop) |
//!
//! Stamp values for the slot of position `p`: `free(p) = 2p` = free for the
//! producer of `p`; `full(p) = 2p + 1` = holds item `p`; `free(p + capacity)`
//! = item taken, free for position `p + capacity`. Counting in half-steps
//! keeps "full at `p`" and "free at `p + capacity`" apart even at capacity 1.
//! A single consumer handle (count 1) claims `tail` with a plain store.
//!
//! ```
//! let (tx, rx) = ferry_queue::spmc::channel::<u32>(16);
//! let rx2 = rx.clone();
//! tx.push(1).unwrap();
//! tx.push(2).unwrap();
//! drop(tx);
//! let mut got = vec![rx.pop().unwrap(), rx2.pop().unwrap()];
//! got.sort();
//! assert_eq!(got, [1, 2]);
//! assert!(rx.pop().is_err());
//! ```
//!
//! The producer is not `Clone`: there is one.
//!
//! ```compile_fail,E0599
//! let (tx, _rx) = ferry_queue::spmc::channel::<u8>(8);
//! let tx2 = tx.clone();
//! ```

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::Kind;
use crate::ring::{Protocol, Ring, Side, Step, free_stamp, full_stamp};
use crate::wait::{SpinPark, Wait};

/// Marker of the SP-MC kind.
#[derive(Debug)]
pub enum Spmc {}

/// The sending handle of an SP-MC queue. Not `Clone`: there is one.
pub type Producer<T, W = SpinPark> = crate::Producer<T, Spmc, W>;
/// The receiving handle of an SP-MC queue. `Clone` it for each consuming thread.
pub type Consumer<T, W = SpinPark> = crate::Consumer<T, Spmc, W>;

/// Creates an SP-MC queue with `capacity` slots and the default wait
/// strategy ([`SpinPark`]).
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    crate::local::channel(capacity)
}

/// Creates an SP-MC queue with `capacity` slots whose synchronous
/// operations wait through `W`.
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel_with<T, W: Wait>(capacity: usize) -> (Producer<T, W>, Consumer<T, W>) {
    crate::local::channel(capacity)
}

impl Kind for Spmc {}
impl crate::ring::MultiConsumer for Spmc {}

/// The producing side of an SP-MC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmProducer<'r, T> = crate::shm::Producer<'r, T, Spmc>;
/// The consuming side of an SP-MC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmConsumer<'r, T> = crate::shm::Consumer<'r, T, Spmc>;

impl Protocol for Spmc {
    const TAG: u64 = 3;
    const NAME: &'static str = "SP-MC";
    const MULTI_PRODUCER: bool = false;
    const MULTI_CONSUMER: bool = true;

    fn initial_stamp(slot: u64) -> u64 {
        free_stamp(slot)
    }

    #[inline]
    fn push<R: Ring>(
        ring: &R,
        side: &Side,
        _alone: bool,
        item: R::Item,
    ) -> Result<(), (Step<()>, R::Item)> {
        let head = side.pos.get();
        let slot = ring.slot(head);
        let stamp = ring.stamp(slot);
        // Acquire: the consumer of the slot's previous item finished reading it.
        if stamp.load(Acquire) != free_stamp(head) {
            return Err((Step::NotNow, item));
        }
        // SAFETY: the stamp says the slot is free at this lap, and only this
        // single producer writes slots.
        unsafe { ring.write(slot, item) };
        // Consumers go by the stamps; `head` serves `len` and drop. Stored
        // before the stamp, so whoever sees a consumer's `tail` past this
        // position (tail Release, reader Acquire) also sees `head` past it.
        ring.head().store(head.wrapping_add(1), Relaxed);
        // Release: the item (and `head`) are written before a consumer can
        // claim the position.
        stamp.store(full_stamp(head), Release);
        side.pos.set(head.wrapping_add(1));
        Ok(())
    }

    #[inline]
    fn pop<R: Ring>(ring: &R, _side: &Side, alone: bool) -> Step<R::Item> {
        crate::ring::pop_multi(ring, alone)
    }
}
