//! The four queue protocols, written once over a [`Ring`] of slots.
//!
//! A `Ring` is storage: a head word, a tail word, and `capacity` slots each
//! holding a stamp word and an item. The in-process queues (`local`) and the
//! shared-memory queues (`shm`) are two `Ring`s; the protocol code here is the
//! same for both. This module owns the orderings; it must not allocate, block
//! or call a wait strategy (the handles do that around it).
//!
//! Positions are `u64` counters that only grow (wrapping after 2^64 operations,
//! which never happens in practice); a position's slot is `pos & (capacity - 1)`.
//! A hostile ring ([`Ring::HOSTILE`], the shared-memory form) may hold any value
//! in any word at any time: every slot index is masked, every retry loop is
//! bounded by [`RETRY_LIMIT`], and contradictions are reported as
//! [`Step::Corrupt`] instead of being trusted.
//!
//! # The words, per kind
//!
//! | kind | `head` | `tail` | slot stamp |
//! |------|--------|--------|------------|
//! | SP-SC | next position to fill; stored (Release) only by the producer, after the slot is written | next position to take; stored (Release) only by the consumer, after the slot is read | unused |
//! | MP-SC | next unclaimed position; producers claim `n` positions with one CAS (Synthesis Figure 2) | as SP-SC | valid flag stamped with its position: `2·pos + 1` = the producer has written item `pos`; anything else = not yet |
//! | SP-MC | next position to fill; stored (Relaxed) by the producer *before* the slot's stamp, informational (`len`, drop): consumers go by the stamps | next unclaimed position; consumers claim one with a CAS | sequence: `2·pos` = free for the producer of `pos`; `2·pos + 1` = holds item `pos`; the consumer that took `pos` stores `2·(pos + capacity)` |
//! | MP-MC | producers claim one position with a CAS | as SP-MC | as SP-MC |
//!
//! Each side keeps in its handle ([`Side`]) the words that only it writes, so
//! a single producer never re-reads `head` and a single consumer never re-reads
//! `tail`; both keep a cached copy of the other side's word and re-read it only
//! when the cached copy says full or empty.

use core::cell::Cell;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::primitive::AtomicU64;

/// How often a hostile ring's CAS or re-read loop may retry before the
/// operation gives up with [`Step::Corrupt`]. Honest contention never comes
/// near it (every failed CAS means another party made progress); a peer that
/// rewrites a word in a loop cannot make a call hang.
pub const RETRY_LIMIT: u32 = 1 << 16;

/// Storage for one of the protocols below.
///
/// # Safety
/// `stamp`, `write` and `read` must be memory-safe for every `slot <
/// capacity()`. `capacity()` is a power of two and never changes.
pub unsafe trait Ring {
    /// What one slot carries.
    type Item;
    /// True when the words may be written by an untrusted party.
    const HOSTILE: bool;
    /// The producers' word.
    fn head(&self) -> &AtomicU64;
    /// The consumers' word.
    fn tail(&self) -> &AtomicU64;
    /// Number of slots; a power of two, from trusted (local) memory.
    fn capacity(&self) -> u64;
    /// The stamp word of slot `slot` (`slot < capacity`).
    fn stamp(&self, slot: usize) -> &AtomicU64;
    /// Moves `item` into slot `slot`.
    ///
    /// # Safety
    /// The caller has claimed the slot under its protocol: nobody else reads
    /// or writes it until the caller publishes it.
    unsafe fn write(&self, slot: usize, item: Self::Item);
    /// Moves the item out of slot `slot`.
    ///
    /// # Safety
    /// The caller has claimed the slot under its protocol and it holds an item
    /// (for a trusted ring: one written by `write` and not read since).
    unsafe fn read(&self, slot: usize) -> Self::Item;

    /// The slot of position `pos`.
    #[inline(always)]
    fn slot(&self, pos: u64) -> usize {
        (pos & (self.capacity() - 1)) as usize
    }
}

/// The outcome of one non-blocking protocol step.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// Done (push: `T = ()`; pop: the item).
    Done(T),
    /// Full (push) or empty (pop): try again later.
    NotNow,
    /// The ring's words contradict the protocol (hostile rings only).
    Corrupt,
}

/// A handle's private view of the indices: the position it owns (if its side
/// is single) and its cached copy of the other side's word.
#[derive(Debug, Default, Clone)]
pub struct Side {
    /// Own position (single-producer `head` / single-consumer `tail`).
    pub(crate) pos: Cell<u64>,
    /// Last value read of the other side's word.
    pub(crate) cached: Cell<u64>,
}

impl Side {
    #[cfg_attr(ferry_loom, allow(dead_code))] // only the shared-memory form uses it
    pub(crate) fn new(pos: u64, cached: u64) -> Self {
        Side {
            pos: Cell::new(pos),
            cached: Cell::new(cached),
        }
    }
}

/// Kinds whose producing side may have many handles (`Clone`).
pub trait MultiProducer {}
/// Kinds whose consuming side may have many handles (`Clone`).
pub trait MultiConsumer {}

/// Counts retries of a loop that a hostile ring could otherwise keep spinning.
/// For a trusted ring `hostile` is a constant `false` and the count folds away.
pub struct Retries {
    hostile: bool,
    count: u32,
}

impl Retries {
    #[inline(always)]
    pub fn new(hostile: bool) -> Self {
        Retries { hostile, count: 0 }
    }

    /// False once a hostile ring's loop has run out of retries.
    #[inline(always)]
    pub fn again(&mut self) -> bool {
        if !self.hostile {
            return true;
        }
        self.count += 1;
        self.count <= RETRY_LIMIT
    }

    /// Re-reads an index that the caller found stale: in an honest ring,
    /// what the caller saw (a `tail` past it, a stamp past it) proves the
    /// index has already moved beyond `stale`, and the caller's Acquire load
    /// of that evidence makes the move visible. So a hostile ring whose index
    /// still reads `stale` is corrupt, said at once instead of after
    /// [`RETRY_LIMIT`] turns. `None` means corrupt.
    #[inline]
    pub fn reread(&mut self, index: &AtomicU64, stale: u64) -> Option<u64> {
        let now = index.load(Relaxed);
        if self.hostile && (now == stale || !self.again()) {
            return None;
        }
        Some(now)
    }
}

/// A queue protocol: which words each operation reads, writes and CASes.
pub trait Protocol {
    /// The kind's tag in a shared-memory header (`1..=4`).
    const TAG: u64;
    /// The kind's name, for messages.
    const NAME: &'static str;
    /// The stamp every slot starts with.
    fn initial_stamp(slot: u64) -> u64;
    /// Whether producer handles can be many (`Clone`).
    const MULTI_PRODUCER: bool;
    /// Whether consumer handles can be many (`Clone`).
    const MULTI_CONSUMER: bool;
    /// Whether producers can push batches (and wait for room for them).
    const BATCHES: bool = false;
    /// Pushes one item. `alone`: see [`pop`](Self::pop).
    fn push<R: Ring>(
        ring: &R,
        side: &Side,
        alone: bool,
        item: R::Item,
    ) -> Result<(), (Step<()>, R::Item)>;
    /// Pops one item.
    ///
    /// `alone` says that the caller's handle is, for the whole call, the only
    /// live handle of its side, so a multi side may claim a position with a
    /// plain store instead of a CAS (frugality decided per operation). It
    /// holds when an in-process side's handle count is 1: handles are only
    /// made by cloning a live handle of the same side, so while the lone
    /// handle is busy in this call no other can appear; and the count's
    /// Acquire load orders every operation of handles already dropped before
    /// this one. Shared-memory handles cannot know their peers and pass false.
    fn pop<R: Ring>(ring: &R, side: &Side, alone: bool) -> Step<R::Item>;
}

/// The stamp of a slot that is free for the producer of position `pos`.
///
/// Stamps count in half-steps so that "free for `pos + capacity`" and "holds
/// `pos`" differ even at capacity 1: free = `2·pos`, full = `2·pos + 1`.
#[inline(always)]
pub fn free_stamp(pos: u64) -> u64 {
    pos.wrapping_mul(2)
}

/// The stamp of a slot that holds the item of position `pos`.
#[inline(always)]
pub fn full_stamp(pos: u64) -> u64 {
    pos.wrapping_mul(2) | 1
}

/// The consumer side shared by SP-MC and MP-MC: claim `tail` with a CAS once
/// the slot's stamp says it holds the item of that position (with a plain
/// store when the consumer is `alone`).
#[inline]
pub fn pop_multi<R: Ring>(ring: &R, alone: bool) -> Step<R::Item> {
    let cap = ring.capacity();
    if alone {
        let tail = ring.tail().load(Relaxed);
        let slot = ring.slot(tail);
        // Acquire: pairs with the producer's Release store of the full stamp.
        if ring.stamp(slot).load(Acquire) != full_stamp(tail) {
            return Step::NotNow;
        }
        // No other consumer exists to race for `tail`. Release: whoever reads
        // this `tail` (Acquire) also sees the producer's `head` past it.
        ring.tail().store(tail.wrapping_add(1), Release);
        // SAFETY: position `tail` is ours (we are the only consumer) and its
        // stamp says the slot holds its item.
        let item = unsafe { ring.read(slot) };
        // Release: the read is done before a producer reuses the slot.
        ring.stamp(slot)
            .store(free_stamp(tail.wrapping_add(cap)), Release);
        return Step::Done(item);
    }
    let mut retries = Retries::new(R::HOSTILE);
    let mut tail = ring.tail().load(Relaxed);
    loop {
        let slot = ring.slot(tail);
        // Acquire: pairs with the producer's Release store of the full stamp.
        let stamp = ring.stamp(slot).load(Acquire);
        let lag = stamp.wrapping_sub(full_stamp(tail)) as i64;
        if lag == 0 {
            // The stamp already ordered the item's write before us. Release:
            // whoever reads this `tail` (Acquire) also sees the producer's
            // `head` past it, so `head - tail` never looks negative.
            match ring
                .tail()
                .compare_exchange_weak(tail, tail.wrapping_add(1), Release, Relaxed)
            {
                Ok(_) => {
                    // SAFETY: the CAS gave us position `tail`, whose stamp says
                    // the slot holds its item; the producer will not touch the
                    // slot until we store `tail + capacity`.
                    let item = unsafe { ring.read(slot) };
                    // Release: the read is done before a producer reuses the slot.
                    ring.stamp(slot)
                        .store(free_stamp(tail.wrapping_add(cap)), Release);
                    return Step::Done(item);
                }
                Err(now) => tail = now,
            }
        } else if lag < 0 {
            // The slot is still free at this lap: item `tail` not produced yet.
            return Step::NotNow;
        } else {
            // Another consumer took `tail` already.
            match retries.reread(ring.tail(), tail) {
                Some(now) => tail = now,
                None => return Step::Corrupt,
            }
        }
        if !retries.again() {
            return Step::Corrupt;
        }
    }
}
