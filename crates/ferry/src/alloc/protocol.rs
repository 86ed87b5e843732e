//! The order and acknowledgement words of a process's allocation page,
//! as functions over its atomics: the daemon publishes an order (the cores
//! the process owns) under a sequence word, the runtime reads it whole or
//! not at all, follows it, and acknowledges it.
//!
//! This file owns the orderings of that exchange; it must not know the
//! page's layout (it is handed the words) and must not wait or wake (the
//! futex calls are the page's). `tests/loom_alloc.rs` compiles it against
//! loom's atomics.
//!
//! | word | written by | when, with which ordering | read by |
//! |------|------------|---------------------------|---------|
//! | `order`, odd `g + 1` | the daemon | before it rewrites the cores: Relaxed, then a Release fence | the runtime: an odd value means "being written", read again later |
//! | `cores[..]` | the daemon | between the two `order` stores: Relaxed | the runtime, between its two loads of `order`, Relaxed |
//! | `order`, even `g + 2` | the daemon | after the cores: Release (then a futex wake) | the runtime: Acquire first, then after an Acquire fence, Relaxed; equal and even means the cores read are those of order `g + 2` |
//! | `acked` | the runtime | once it followed order `g`: Release | the daemon: Acquire; checked against the orders it issued (see [`check_ack`]) |
//!
//! Generations are even and never 0 once issued (0 is "no order yet"); the
//! daemon keeps its own count and never reads `order` back, so a runtime
//! that scribbles on it only spoils its own reads.

use super::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// The low bit of `order`: the daemon is rewriting the cores.
pub(crate) const WRITING: u32 = 1;

/// The generation after `g` (even, never 0).
pub(crate) fn next_generation(g: u32) -> u32 {
    match (g & !WRITING).wrapping_add(2) {
        0 => 2,
        n => n,
    }
}

/// The daemon: writes `set` into `cores` as the order after generation
/// `prev` (the daemon's own count, not read from the page) and returns the
/// new generation. The daemon is the only writer.
pub(crate) fn publish(order: &AtomicU32, cores: &[AtomicU64], set: &[u64], prev: u32) -> u32 {
    let next = next_generation(prev);
    order.store((prev & !WRITING) | WRITING, Ordering::Relaxed);
    fence(Ordering::Release);
    for (word, &bits) in cores.iter().zip(set) {
        word.store(bits, Ordering::Relaxed);
    }
    order.store(next, Ordering::Release);
    next
}

/// The runtime: one try at reading the current order into `out`. Its
/// generation if the cores read are exactly that order's; `None` while the
/// daemon writes (try again).
pub(crate) fn read(order: &AtomicU32, cores: &[AtomicU64], out: &mut [u64]) -> Option<u32> {
    let before = order.load(Ordering::Acquire);
    if before & WRITING != 0 {
        return None;
    }
    for (o, word) in out.iter_mut().zip(cores) {
        *o = word.load(Ordering::Relaxed);
    }
    fence(Ordering::Acquire);
    let after = order.load(Ordering::Relaxed);
    (before == after).then_some(before)
}

/// The runtime: order `g` is followed.
pub(crate) fn ack(acked: &AtomicU32, g: u32) {
    acked.store(g, Ordering::Release);
}

/// The daemon: the runtime's acknowledgement word.
pub(crate) fn acked(acked: &AtomicU32) -> u32 {
    acked.load(Ordering::Acquire)
}

/// What an acknowledgement word says, given the last order the daemon
/// issued and the last acknowledgement it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// The last order issued is followed.
    Current,
    /// An earlier order (or none yet) is the last followed.
    Behind,
    /// Odd, or not a generation issued since the last accepted one (ahead
    /// of the orders, or back before it): the word cannot be meaningful.
    Malformed,
}

/// Judges the acknowledgement `word` against `issued` (the daemon's last
/// generation) and `accepted` (the last acknowledgement it accepted, 0 for
/// none).
pub fn check_ack(word: u32, issued: u32, accepted: u32) -> Ack {
    if word & WRITING != 0 {
        return Ack::Malformed;
    }
    if word == issued {
        return Ack::Current;
    }
    // Generations move forward by 2 (skipping 0) from `accepted` to
    // `issued`: a valid word lies on that path.
    let span = issued.wrapping_sub(accepted);
    let back = issued.wrapping_sub(word);
    if word == accepted || (word != 0 && back <= span && back != 0) {
        Ack::Behind
    } else {
        Ack::Malformed
    }
}
