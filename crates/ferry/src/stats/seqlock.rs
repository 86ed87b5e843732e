//! The page's sequence lock: one writer publishes a block of words, any
//! number of readers in other processes copy it out whole or not at all.
//! No reader ever blocks the writer, and the writer never waits.
//!
//! This file owns the protocol of the sequence word; it must not know what
//! the words mean (`page` does). It reaches its atomics through
//! `super::atomic` (loom's in `tests/loom_stats.rs`).
//!
//! | `seq` | written by | meaning |
//! |-------|------------|---------|
//! | even `2n` | the writer, Release, after the data words | the data words are the `n`-th snapshot, whole |
//! | odd `2n + 1` | the writer, Relaxed then a Release fence, before the data words | a write is under way: the data words may be torn |
//!
//! The reader loads `seq` (Acquire); if odd it tries again. Else it copies
//! the data words (Relaxed loads), makes an Acquire fence and loads `seq`
//! again: the same value means no write began before its copies were made
//! (a write's data stores would be ordered after the odd value by the
//! writer's fence, and the reader's fence orders its copies before the
//! second load), so the copy is whole. A changed value means a write
//! overlapped: it tries again, a bounded number of times, and otherwise
//! reports the page busy (a writer that died in the middle of a write
//! leaves `seq` odd for good; a reader must not spin on it forever).

use super::atomic::Ordering::{Acquire, Relaxed, Release};
use super::atomic::{AtomicU64, fence};

/// Publishes `src` into `words` under `seq`. The caller must be the only
/// writer of `seq` and `words` (a second writer would let a reader accept a
/// mix of two writes). `words` and `src` have the same length.
pub(crate) fn write(seq: &AtomicU64, words: &[AtomicU64], src: &[u64]) {
    debug_assert_eq!(words.len(), src.len());
    let s = seq.load(Relaxed);
    // An odd value left by a writer that stopped half-way (another
    // process's page is never written here) starts over from even.
    let start = s | 1;
    seq.store(start, Relaxed);
    fence(Release);
    for (w, v) in words.iter().zip(src) {
        w.store(*v, Relaxed);
    }
    seq.store(start.wrapping_add(1), Release);
}

/// One attempt to copy `words` into `dst`: `true` if the copy is whole.
/// `between` runs after the copy and before the check (a test's way to
/// make a write overlap the copy; a no-op otherwise).
pub(crate) fn try_read(
    seq: &AtomicU64,
    words: &[AtomicU64],
    dst: &mut [u64],
    between: &mut dyn FnMut(),
) -> bool {
    let before = seq.load(Acquire);
    if before & 1 == 1 {
        return false;
    }
    for (d, w) in dst.iter_mut().zip(words) {
        *d = w.load(Relaxed);
    }
    between();
    fence(Acquire);
    seq.load(Relaxed) == before
}

/// Copies `words` into `dst` whole, trying at most `tries` times; `false`
/// if every try overlapped a write (or found one under way).
pub(crate) fn read(seq: &AtomicU64, words: &[AtomicU64], dst: &mut [u64], tries: u32) -> bool {
    for _ in 0..tries {
        if try_read(seq, words, dst, &mut || {}) {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}
