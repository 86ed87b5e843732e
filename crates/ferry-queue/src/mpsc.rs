//! MP-SC: many producers, one consumer; one CAS per push, and atomic
//! multi-item insert.
//!
//! Synthesis Figure 2. A producer "stakes a claim" to `n` consecutive
//! positions with one compare-and-swap on `head`, fills them while other
//! producers fill theirs, and sets each slot's *valid flag* as it goes. The
//! consumer cannot trust `head` (claimed is not written), so it goes by the
//! flags alone: it takes the item at `tail` once its flag says so and
//! advances `tail`. A batch claimed together is contiguous and in order in the
//! consumer's sequence, all of it or none of it.
//!
//! Where Synthesis' consumer clears a flag bit as it takes the item, ferry's
//! flag is *stamped with the position it validates*: "valid for position `p`"
//! is the value `2p + 1`, which no earlier or later lap of the slot can hold,
//! so the consumer never writes the producers' cache lines (measured: 5.0 to
//! 4.1 ns per transfer across two cores, 13 to 10.4 with the CAS path).
//!
//! | word         | written by | when | orderings |
//! |--------------|------------|------|-----------|
//! | `head`       | producers, CAS `h -> h + n` | to claim `n` positions, after checking `h + n - tail <= capacity` | Relaxed: the CAS only makes the claim exclusive |
//! | slot flag    | the producer that claimed position `p` stores `2p + 1` | after writing the item | store Release / consumer loads Acquire |
//! | `tail`       | consumer   | after reading the item of position `tail` | store Release / producers load Acquire before reusing slots |
//!
//! Flag values for the slot of position `p`: `2p + 1` = the item of `p` is
//! written; anything else (`0` initially, or `2(p - capacity) + 1` left by
//! the previous lap) = no item for `p` yet (free, or claimed and not yet
//! written). A claimed but unwritten slot holds back the items behind it until
//! its producer finishes (the price of lock-free contiguous batches).
//!
//! Each producer handle caches `tail` and reads it only when the cache says
//! there is no room; the consumer keeps `tail` in its handle and never reads
//! `head`. While only one producer handle exists (count 1), it claims with a
//! plain store instead of the CAS: no other handle can appear during its call,
//! since handles are made only by cloning one.
//!
//! ```
//! let (tx, rx) = ferry_queue::mpsc::channel::<u32>(16);
//! let mut batch = vec![1, 2, 3];
//! tx.try_push_many(&mut batch).unwrap();
//! assert!(batch.is_empty());
//! assert_eq!((rx.pop(), rx.pop(), rx.pop()), (Ok(1), Ok(2), Ok(3)));
//! ```
//!
//! The consumer is not `Clone`: there is one.
//!
//! ```compile_fail,E0599
//! let (_tx, rx) = ferry_queue::mpsc::channel::<u8>(8);
//! let rx2 = rx.clone();
//! ```

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::ring::{Protocol, Retries, Ring, Side, Step, full_stamp};
use crate::wait::{SpinPark, Wait};
use crate::{BatchError, Kind};

/// Marker of the MP-SC kind.
#[derive(Debug)]
pub enum Mpsc {}

/// The sending handle of an MP-SC queue. `Clone` it for each producing thread.
pub type Producer<T, W = SpinPark> = crate::Producer<T, Mpsc, W>;
/// The receiving handle of an MP-SC queue. Not `Clone`: there is one.
pub type Consumer<T, W = SpinPark> = crate::Consumer<T, Mpsc, W>;

/// Creates an MP-SC queue with `capacity` slots and the default wait
/// strategy ([`SpinPark`]).
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    crate::local::channel(capacity)
}

/// Creates an MP-SC queue with `capacity` slots whose synchronous
/// operations wait through `W`.
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`](crate::MAX_CAPACITY).
pub fn channel_with<T, W: Wait>(capacity: usize) -> (Producer<T, W>, Consumer<T, W>) {
    crate::local::channel(capacity)
}

impl<T, W: Wait> crate::Producer<T, Mpsc, W> {
    /// Pushes all of `items`, in order and contiguous in the consumer's
    /// sequence, or none of them, without waiting (Synthesis' multi-item
    /// insert: one CAS claims room for the whole batch).
    ///
    /// On success `items` is left empty (its allocation is kept for reuse);
    /// on error it is untouched.
    ///
    /// ```
    /// use ferry_queue::BatchError;
    /// let (tx, rx) = ferry_queue::mpsc::channel::<u8>(4);
    /// let mut batch = vec![1, 2, 3];
    /// tx.try_push_many(&mut batch).unwrap();
    /// let mut more = vec![4, 5];
    /// assert_eq!(tx.try_push_many(&mut more), Err(BatchError::Full));
    /// assert_eq!(more, [4, 5]);
    /// assert_eq!(
    ///     tx.try_push_many(&mut vec![0; 5]),
    ///     Err(BatchError::TooLarge { len: 5, capacity: 4 })
    /// );
    /// ```
    pub fn try_push_many(&self, items: &mut Vec<T>) -> Result<(), BatchError> {
        let len = items.len();
        if len == 0 {
            return Ok(());
        }
        let (buffer, side) = self.buffer_side();
        if len as u64 > buffer.capacity() {
            return Err(BatchError::TooLarge {
                len,
                capacity: buffer.capacity() as usize,
            });
        }
        match Mpsc::claim(buffer, side, self.alone(), len as u64) {
            Step::Done(first) => {
                for (i, item) in items.drain(..).enumerate() {
                    // SAFETY: positions first..first + len were claimed by the
                    // CAS above for this call, and each is published once.
                    unsafe { Mpsc::publish(buffer, first.wrapping_add(i as u64), item) };
                }
                self.notify_consumers_all();
                Ok(())
            }
            step => {
                debug_assert!(
                    matches!(step, Step::NotNow),
                    "an in-process ring is never corrupt"
                );
                Err(BatchError::Full)
            }
        }
    }

    /// Pushes all of `items` as one contiguous batch, waiting through `W`
    /// until there is room for all of them. Fails with
    /// [`BatchError::TooLarge`] (at once) or [`BatchError::Disconnected`];
    /// nothing is pushed then and `items` is untouched.
    pub fn push_many(&self, items: &mut Vec<T>) -> Result<(), BatchError> {
        match self.try_push_many(items) {
            Err(BatchError::Full) => self.push_many_slow(items),
            done => done,
        }
    }

    #[cold]
    fn push_many_slow(&self, items: &mut Vec<T>) -> Result<(), BatchError> {
        self.wait_for_batch_room(|| match self.try_push_many(items) {
            Err(BatchError::Full) if self.is_disconnected() => Some(Err(BatchError::Disconnected)),
            Err(BatchError::Full) => None,
            done => Some(done),
        })
    }
}

impl Kind for Mpsc {}
impl crate::ring::MultiProducer for Mpsc {}

/// The producing side of an MP-SC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmProducer<'r, T> = crate::shm::Producer<'r, T, Mpsc>;
/// The consuming side of an MP-SC queue in shared memory; see [`crate::shm`].
#[cfg(not(ferry_loom))]
pub type ShmConsumer<'r, T> = crate::shm::Consumer<'r, T, Mpsc>;

impl Mpsc {
    /// Claims `n` consecutive positions with one CAS on `head` (Synthesis
    /// Figure 2) and returns the first. `n` must be in `1..=capacity`.
    ///
    /// The caller must then [`publish`](Self::publish) every claimed position,
    /// in any order; the consumer takes them in position order.
    #[inline]
    pub(crate) fn claim<R: Ring>(ring: &R, side: &Side, alone: bool, n: u64) -> Step<u64> {
        let cap = ring.capacity();
        debug_assert!(n >= 1 && n <= cap);
        let mut retries = Retries::new(R::HOSTILE);
        // Relaxed: the CAS only has to make the claim exclusive; the slots'
        // contents are ordered by the flags and `tail`, not by `head`.
        let mut head = ring.head().load(Relaxed);
        loop {
            if head.wrapping_sub(side.cached.get()).wrapping_add(n) > cap {
                // Acquire: the consumer read the items
                // of every position below `tail` before storing it.
                let tail = ring.tail().load(Acquire);
                side.cached.set(tail);
                let used = head.wrapping_sub(tail);
                if used > cap {
                    // `head` is stale (others claimed and the consumer took
                    // past it since we read it), or the ring is corrupt.
                    match retries.reread(ring.head(), head) {
                        Some(now) => head = now,
                        None => return Step::Corrupt,
                    }
                    continue;
                }
                if used + n > cap {
                    return Step::NotNow;
                }
            }
            if alone {
                // No other producer exists to race for `head`.
                ring.head().store(head.wrapping_add(n), Relaxed);
                return Step::Done(head);
            }
            match ring
                .head()
                .compare_exchange_weak(head, head.wrapping_add(n), Relaxed, Relaxed)
            {
                Ok(_) => return Step::Done(head),
                Err(now) => head = now,
            }
            if !retries.again() {
                return Step::Corrupt;
            }
        }
    }

    /// Writes `item` at a position this producer claimed and sets its flag.
    ///
    /// # Safety
    /// `pos` was returned inside a range by [`claim`](Self::claim) to this
    /// caller and has not been published yet.
    #[inline]
    pub(crate) unsafe fn publish<R: Ring>(ring: &R, pos: u64, item: R::Item) {
        let slot = ring.slot(pos);
        // SAFETY: the claim made this slot ours: the consumer read its previous
        // item and advanced `tail` past it before we could claim it, and no
        // other producer holds a claim on it.
        unsafe { ring.write(slot, item) };
        // Release: the item is written before the consumer can see the flag.
        ring.stamp(slot).store(full_stamp(pos), Release);
    }
}

impl Protocol for Mpsc {
    const TAG: u64 = 2;
    const NAME: &'static str = "MP-SC";
    const MULTI_PRODUCER: bool = true;
    const MULTI_CONSUMER: bool = false;
    const BATCHES: bool = true;

    fn initial_stamp(_: u64) -> u64 {
        0
    }

    #[inline]
    fn push<R: Ring>(
        ring: &R,
        side: &Side,
        alone: bool,
        item: R::Item,
    ) -> Result<(), (Step<()>, R::Item)> {
        match Self::claim(ring, side, alone, 1) {
            Step::Done(pos) => {
                // SAFETY: `pos` was just claimed by us.
                unsafe { Self::publish(ring, pos, item) };
                Ok(())
            }
            Step::NotNow => Err((Step::NotNow, item)),
            Step::Corrupt => Err((Step::Corrupt, item)),
        }
    }

    #[inline]
    fn pop<R: Ring>(ring: &R, side: &Side, _alone: bool) -> Step<R::Item> {
        let tail = side.pos.get();
        let slot = ring.slot(tail);
        let flag = ring.stamp(slot);
        // Acquire: pairs with the producer's Release store of the flag.
        if flag.load(Acquire) != full_stamp(tail) {
            return Step::NotNow;
        }
        // SAFETY: the flag says the producer that claimed `tail` has written
        // it; only this single consumer reads it, until `tail` moves on.
        let item = unsafe { ring.read(slot) };
        // Release: the item is read before a producer can see the slot as free.
        ring.tail().store(tail.wrapping_add(1), Release);
        side.pos.set(tail.wrapping_add(1));
        Step::Done(item)
    }
}

/// MP-SC's multi-item insert (Synthesis Figure 2) on the shared-memory
/// form; the in-process form's is above.
#[cfg(not(ferry_loom))]
impl<'r, T: bytemuck::Pod> crate::shm::Producer<'r, T, Mpsc> {
    /// Pushes all of `items` as one contiguous batch, or nothing (one CAS
    /// claims room for the whole batch).
    ///
    /// # Errors
    /// [`crate::shm::PushError::Full`], [`crate::shm::PushError::TooLarge`], or [`crate::shm::PushError::Corrupt`].
    pub fn try_push_many(&self, items: &[T]) -> Result<(), crate::shm::PushError> {
        if items.is_empty() {
            return Ok(());
        }
        if items.len() as u64 > self.ring.capacity {
            return Err(crate::shm::PushError::TooLarge {
                len: items.len(),
                capacity: self.capacity(),
            });
        }
        match Mpsc::claim(&self.ring, &self.side, false, items.len() as u64) {
            Step::Done(first) => {
                for (i, item) in items.iter().enumerate() {
                    // SAFETY: positions first..first + len were claimed for
                    // this call by the CAS in `claim`; each is published once.
                    unsafe { Mpsc::publish(&self.ring, first.wrapping_add(i as u64), *item) };
                }
                Ok(())
            }
            Step::NotNow => Err(crate::shm::PushError::Full),
            Step::Corrupt => Err(crate::shm::PushError::Corrupt),
        }
    }
}
