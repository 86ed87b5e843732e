//! SP-SC: one producer, one consumer; no read-modify-write atomics at all.
//!
//! Synthesis Figure 1. The producer alone writes `head`, the consumer alone
//! writes `tail` (Code Isolation), and each writes its word with the last
//! instruction of its operation, so the other side never sees a half-done
//! push or pop. Each handle keeps its own word in a private field and a cached
//! copy of the other side's word, so in the steady state a push touches only
//! the slot and `head`, and reads `tail` only when the cached copy says full.
//!
//! | word   | written by | when | orderings |
//! |--------|------------|------|-----------|
//! | `head` | producer   | after writing the slot of position `head` | store Release / consumer loads Acquire: the item is visible before the position is |
//! | `tail` | consumer   | after moving the item of position `tail` out | store Release / producer loads Acquire: the read is done before the slot is reused |
//!
//! `head - tail` is the number of items, always in `0..=capacity`.
//!
//! ```
//! let (tx, rx) = ferry_queue::spsc::channel::<String>(8);
//! let t = std::thread::spawn(move || {
//!     for i in 0..100 { tx.push(i.to_string()).unwrap(); }
//! });
//! for i in 0..100 { assert_eq!(rx.pop().unwrap(), i.to_string()); }
//! t.join().unwrap();
//! ```
//!
//! Neither handle is `Clone`, so "one producer, one consumer" is checked by
//! the compiler:
//!
//! ```compile_fail,E0599
//! let (tx, _rx) = ferry_queue::spsc::channel::<u8>(8);
//! let tx2 = tx.clone();
//! ```

use core::sync::atomic::Ordering::{Acquire, Release};

use crate::Kind;
use crate::ring::{Protocol, Ring, Side, Step};
use crate::wait::{SpinPark, Wait};

/// Marker of the SP-SC kind.
#[derive(Debug)]
pub enum Spsc {}

/// The sending handle of an SP-SC queue. Not `Clone`: there is one.
pub type Producer<T, W = SpinPark> = crate::Producer<T, Spsc, W>;
/// The receiving handle of an SP-SC queue. Not `Clone`: there is one.
pub type Consumer<T, W = SpinPark> = crate::Consumer<T, Spsc, W>;

/// Creates an SP-SC queue with `capacity` slots and the default wait
/// strategy ([`SpinPark`]).
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    crate::local::channel(capacity)
}

/// Creates an SP-SC queue with `capacity` slots whose synchronous
/// operations wait through `W`.
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel_with<T, W: Wait>(capacity: usize) -> (Producer<T, W>, Consumer<T, W>) {
    crate::local::channel(capacity)
}

impl Kind for Spsc {}

/// The producing side of an SP-SC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmProducer<'r, T> = crate::shm::Producer<'r, T, Spsc>;
/// The consuming side of an SP-SC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmConsumer<'r, T> = crate::shm::Consumer<'r, T, Spsc>;

impl Protocol for Spsc {
    const TAG: u64 = 1;
    const NAME: &'static str = "SP-SC";
    const MULTI_PRODUCER: bool = false;
    const MULTI_CONSUMER: bool = false;

    fn initial_stamp(_: u64) -> u64 {
        0
    }

    #[inline]
    fn push<R: Ring>(
        ring: &R,
        side: &Side,
        _alone: bool,
        item: R::Item,
    ) -> Result<(), (Step<()>, R::Item)> {
        let head = side.pos.get();
        let cap = ring.capacity();
        if head.wrapping_sub(side.cached.get()) >= cap {
            // Acquire: the consumer's reads of the slots it freed happen before
            // we overwrite them.
            let tail = ring.tail().load(Acquire);
            let used = head.wrapping_sub(tail);
            if R::HOSTILE && used > cap {
                return Err((Step::Corrupt, item));
            }
            side.cached.set(tail);
            if used >= cap {
                return Err((Step::NotNow, item));
            }
        }
        // SAFETY: positions [tail, head) hold items, so slot(head) is free
        // (head - tail < capacity) and only this single producer writes it
        // until `head` is published below.
        unsafe { ring.write(ring.slot(head), item) };
        ring.head().store(head.wrapping_add(1), Release);
        side.pos.set(head.wrapping_add(1));
        Ok(())
    }

    #[inline]
    fn pop<R: Ring>(ring: &R, side: &Side, _alone: bool) -> Step<R::Item> {
        let tail = side.pos.get();
        if tail == side.cached.get() {
            // Acquire: the producer's write of the slot happens before we read it.
            let head = ring.head().load(Acquire);
            if R::HOSTILE && head.wrapping_sub(tail) > ring.capacity() {
                return Step::Corrupt;
            }
            side.cached.set(head);
            if head == tail {
                return Step::NotNow;
            }
        }
        // SAFETY: tail < head, so the slot holds a published item and only this
        // single consumer reads it until `tail` is published below.
        let item = unsafe { ring.read(ring.slot(tail)) };
        ring.tail().store(tail.wrapping_add(1), Release);
        side.pos.set(tail.wrapping_add(1));
        Step::Done(item)
    }
}
