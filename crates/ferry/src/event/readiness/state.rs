//! The readiness word of one registration: what the last harvests said of
//! a socket (readable, writable, closed sides, an error), the tick of the
//! last change, and the registration's generation.
//!
//! This file owns the word's layout and its three transitions; it must not
//! wait, wake or make a system call (the reactor sets bits, `net` clears
//! them and parks). It reaches its atomics through `super::atomic`, so
//! that `tests/loom_readiness.rs` compiles this very file against loom's.
//!
//! # The word
//!
//! | bits | meaning |
//! |------|---------|
//! | 0..8 | readiness flags: [`READABLE`], [`WRITABLE`], [`READ_CLOSED`], [`WRITE_CLOSED`], [`ERROR`], [`CLOSED`] |
//! | 8..32 | tick: moves on (wrapping) at every harvest that sets a flag |
//! | 32..64 | generation of the registration using the slot |
//!
//! | transition | by | does |
//! |------------|----|------|
//! | [`set`] | the harvester, for an event tagged with generation `g` | if the word's generation is `g`: ORs the flags in and moves the tick on (AcqRel CAS); else nothing (a stale event of an earlier socket in the slot) |
//! | [`clear`] | an operation that got `EAGAIN` after reading the word as `seen` | clears the direction's flags only if the tick is still `seen`'s (tokio's rule): an edge harvested during the operation is never lost, the operation retries instead |
//! | [`retire`] | the owner deregistering (or the runtime's end) | moves the generation on and sets [`CLOSED`]: waiters see the change and stop waiting |
//!
//! A waiter reads the word under its direction's list lock after queueing
//! itself, and the harvester sets the word before it takes that lock to
//! wake the list: so either the waiter sees the new flags (or tick) and
//! does not park, or the harvester finds it queued.

use super::atomic::AtomicU64;
use super::atomic::Ordering::{AcqRel, Acquire};

/// The socket has data (or a connection) to take.
pub(crate) const READABLE: u64 = 1;
/// The socket takes data (or a connect completed).
pub(crate) const WRITABLE: u64 = 2;
/// The peer shut its writing side (`EPOLLRDHUP`), or both sides hung up.
pub(crate) const READ_CLOSED: u64 = 4;
/// Both sides hung up (`EPOLLHUP`): writes fail.
pub(crate) const WRITE_CLOSED: u64 = 8;
/// An error is pending on the socket (`EPOLLERR`).
pub(crate) const ERROR: u64 = 16;
/// The registration is over (the socket was deregistered, or its runtime
/// ended).
pub(crate) const CLOSED: u64 = 32;
/// Every flag.
pub(crate) const FLAGS: u64 = 0xff;

/// What an operation in direction "read" waits for: any of these ends the
/// wait.
pub(crate) const READ_INTEREST: u64 = READABLE | READ_CLOSED | ERROR | CLOSED;
/// What an operation in direction "write" waits for.
pub(crate) const WRITE_INTEREST: u64 = WRITABLE | WRITE_CLOSED | ERROR | CLOSED;

const TICK_SHIFT: u32 = 8;
const TICK_MASK: u64 = 0x00ff_ffff << TICK_SHIFT;
const GEN_SHIFT: u32 = 32;

/// The flags of word `w`.
#[inline]
pub(crate) fn flags(w: u64) -> u64 {
    w & FLAGS
}

/// The tick of word `w`.
#[inline]
pub(crate) fn tick(w: u64) -> u32 {
    ((w & TICK_MASK) >> TICK_SHIFT) as u32
}

/// The generation of word `w`.
#[inline]
pub(crate) fn generation(w: u64) -> u32 {
    (w >> GEN_SHIFT) as u32
}

/// A fresh word for generation `g`: no flag, tick 0.
#[inline]
pub(crate) fn fresh(g: u32) -> u64 {
    u64::from(g) << GEN_SHIFT
}

/// The harvester's transition: ORs `bits` in and moves the tick on, if the
/// word still belongs to generation `g`. Returns the new word, or `None`
/// for a stale event.
pub(crate) fn set(word: &AtomicU64, g: u32, bits: u64) -> Option<u64> {
    let mut cur = word.load(Acquire);
    loop {
        if generation(cur) != g || cur & CLOSED != 0 {
            return None;
        }
        let t = (u64::from(tick(cur).wrapping_add(1)) << TICK_SHIFT) & TICK_MASK;
        let new = (cur & !TICK_MASK) | t | (bits & FLAGS);
        match word.compare_exchange_weak(cur, new, AcqRel, Acquire) {
            Ok(_) => return Some(new),
            Err(now) => cur = now,
        }
    }
}

/// An operation's transition after `EAGAIN`: clears `bits` if the word
/// still has `seen`'s tick and generation (nothing was harvested since the
/// operation read it). Returns whether it cleared them.
pub(crate) fn clear(word: &AtomicU64, seen: u64, bits: u64) -> bool {
    let mut cur = word.load(Acquire);
    loop {
        if tick(cur) != tick(seen) || generation(cur) != generation(seen) {
            return false;
        }
        let new = cur & !(bits & (READABLE | WRITABLE));
        if new == cur {
            return true;
        }
        match word.compare_exchange_weak(cur, new, AcqRel, Acquire) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

/// The owner's transition: ends generation `g` (if the word still has it),
/// leaving the next generation's word with [`CLOSED`] set until the slot
/// is handed out again ([`fresh`]). Returns the next generation.
pub(crate) fn retire(word: &AtomicU64, g: u32) -> u32 {
    let next = g.wrapping_add(1);
    let mut cur = word.load(Acquire);
    loop {
        if generation(cur) != g {
            return generation(cur);
        }
        let new = fresh(next) | CLOSED;
        match word.compare_exchange_weak(cur, new, AcqRel, Acquire) {
            Ok(_) => return next,
            Err(now) => cur = now,
        }
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_clear_under_a_newer_tick_keeps_the_edge() {
        let w = AtomicU64::new(fresh(7));
        let seen = set(&w, 7, READABLE).expect("current generation");
        assert_eq!(flags(seen), READABLE);
        assert!(clear(&w, seen, READABLE));
        assert_eq!(flags(w.load(Acquire)), 0);
        let seen = set(&w, 7, READABLE | WRITABLE).unwrap();
        set(&w, 7, READABLE).unwrap();
        assert!(!clear(&w, seen, READABLE), "a harvest came in between");
        assert_eq!(flags(w.load(Acquire)), READABLE | WRITABLE);
    }

    #[test]
    fn a_stale_event_does_not_touch_the_next_generation() {
        let w = AtomicU64::new(fresh(1));
        assert_eq!(retire(&w, 1), 2);
        assert!(set(&w, 1, READABLE).is_none(), "old generation");
        assert!(
            set(&w, 2, READABLE).is_none(),
            "retired, not handed out yet"
        );
        w.store(fresh(2), std::sync::atomic::Ordering::Release);
        assert_eq!(flags(set(&w, 2, WRITABLE).unwrap()), WRITABLE);
        assert_eq!(retire(&w, 1), 2, "retiring an old generation does nothing");
        assert_eq!(generation(w.load(Acquire)), 2);
    }

    #[test]
    fn the_tick_wraps_within_its_bits() {
        let w = AtomicU64::new(fresh(u32::MAX) | (TICK_MASK));
        let new = set(&w, u32::MAX, ERROR).unwrap();
        assert_eq!(tick(new), 0);
        assert_eq!(generation(new), u32::MAX);
        assert_eq!(flags(new), ERROR);
    }
}
