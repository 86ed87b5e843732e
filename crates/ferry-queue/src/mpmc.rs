//! MP-MC: many producers and many consumers; one CAS per push and one per
//! pop.
//!
//! Producers compete for `head` and consumers for `tail`, each with a
//! compare-and-swap taken only once the slot's sequence stamp says the slot
//! is ready for that position, so a claim never has to be undone.
//!
//! | word       | written by | when | orderings |
//! |------------|------------|------|-----------|
//! | `head`     | producers, CAS `h -> h + 1` | to claim position `h` once its stamp is `free(h)` | Relaxed: the stamp orders the slot |
//! | slot stamp | the producer of `p` stores `full(p)`; the consumer of `p` stores `free(p + capacity)` | after writing / after reading the item | stores Release / loads Acquire |
//! | `tail`     | consumers, CAS `t -> t + 1` | to claim position `t` once its stamp is `full(t)` | CAS Release, as in [`crate::spmc`] |
//!
//! Stamp values as in [`crate::spmc`]. A side with a single handle (count 1)
//! claims its positions with a plain store instead of the CAS.
//!
//! ```
//! let (tx, rx) = ferry_queue::mpmc::channel::<u32>(4);
//! let (tx2, rx2) = (tx.clone(), rx.clone());
//! tx.push(1).unwrap();
//! tx2.push(2).unwrap();
//! assert_eq!(rx2.pop().unwrap() + rx.pop().unwrap(), 3);
//! ```

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::Kind;
use crate::ring::{Protocol, Retries, Ring, Side, Step, free_stamp, full_stamp};
use crate::wait::{SpinPark, Wait};

/// Marker of the MP-MC kind.
#[derive(Debug)]
pub enum Mpmc {}

/// The sending handle of an MP-MC queue. `Clone` it for each producing thread.
pub type Producer<T, W = SpinPark> = crate::Producer<T, Mpmc, W>;
/// The receiving handle of an MP-MC queue. `Clone` it for each consuming thread.
pub type Consumer<T, W = SpinPark> = crate::Consumer<T, Mpmc, W>;

/// Creates an MP-MC queue with `capacity` slots and the default wait
/// strategy ([`SpinPark`]).
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    crate::local::channel(capacity)
}

/// Creates an MP-MC queue with `capacity` slots whose synchronous
/// operations wait through `W`.
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel_with<T, W: Wait>(capacity: usize) -> (Producer<T, W>, Consumer<T, W>) {
    crate::local::channel(capacity)
}

impl Kind for Mpmc {}
impl crate::ring::MultiProducer for Mpmc {}
impl crate::ring::MultiConsumer for Mpmc {}

/// The producing side of an MP-MC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmProducer<'r, T> = crate::shm::Producer<'r, T, Mpmc>;
/// The consuming side of an MP-MC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmConsumer<'r, T> = crate::shm::Consumer<'r, T, Mpmc>;

impl Protocol for Mpmc {
    const TAG: u64 = 4;
    const NAME: &'static str = "MP-MC";
    const MULTI_PRODUCER: bool = true;
    const MULTI_CONSUMER: bool = true;

    fn initial_stamp(slot: u64) -> u64 {
        free_stamp(slot)
    }

    #[inline]
    fn push<R: Ring>(
        ring: &R,
        _side: &Side,
        alone: bool,
        item: R::Item,
    ) -> Result<(), (Step<()>, R::Item)> {
        let mut head = ring.head().load(Relaxed);
        if alone {
            let slot = ring.slot(head);
            // Acquire: the consumer of the slot's previous item finished reading it.
            if ring.stamp(slot).load(Acquire) != free_stamp(head) {
                return Err((Step::NotNow, item));
            }
            // No other producer exists to race for `head`.
            ring.head().store(head.wrapping_add(1), Relaxed);
            // SAFETY: position `head` is ours (we are the only producer) and
            // its stamp says the slot is free at this lap.
            unsafe { ring.write(slot, item) };
            // Release: the item is written before a consumer claims it.
            ring.stamp(slot).store(full_stamp(head), Release);
            return Ok(());
        }
        let mut retries = Retries::new(R::HOSTILE);
        loop {
            let slot = ring.slot(head);
            // Acquire: the consumer of the slot's previous item finished reading it.
            let stamp = ring.stamp(slot).load(Acquire);
            let lag = stamp.wrapping_sub(free_stamp(head)) as i64;
            if lag == 0 {
                match ring.head().compare_exchange_weak(
                    head,
                    head.wrapping_add(1),
                    Relaxed,
                    Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the CAS gave us position `head`, whose slot
                        // the stamp says is free at this lap.
                        unsafe { ring.write(slot, item) };
                        // Release: the item is written before a consumer claims it.
                        ring.stamp(slot).store(full_stamp(head), Release);
                        return Ok(());
                    }
                    Err(now) => head = now,
                }
            } else if lag < 0 {
                // The slot still holds the item of the previous lap: full.
                return Err((Step::NotNow, item));
            } else {
                // Another producer took `head` already.
                match retries.reread(ring.head(), head) {
                    Some(now) => head = now,
                    None => return Err((Step::Corrupt, item)),
                }
            }
            if !retries.again() {
                return Err((Step::Corrupt, item));
            }
        }
    }

    #[inline]
    fn pop<R: Ring>(ring: &R, _side: &Side, alone: bool) -> Step<R::Item> {
        crate::ring::pop_multi(ring, alone)
    }
}
