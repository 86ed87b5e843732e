//! The layout of a cross-process stream's memory: where each word and
//! each ring's bytes live in the sealed memfd, the header that names the
//! layout, and its check.
//!
//! This room owns the offsets (all computed here from the capacity, never
//! read from the memory but for the header, which is checked once) and
//! the header's words; it must not move bytes or positions (`ring.rs`
//! does) and trusts nothing it reads.
//!
//! | bytes | what |
//! |-------|------|
//! | 0..8 | magic [`MAGIC`] (`ferrySTM`) |
//! | 8..16 | layout version [`VERSION`] |
//! | 16..24 | capacity of each ring, in bytes (a power of two, 1..=[`MAX_CAPACITY`]) |
//! | 128 + 640 i .. | ring `i`'s words (ring 0 carries bytes from the listener to the connector, ring 1 back), five lines of 128 bytes: `head`; `tail`; `wclosed` and `rclosed`; `rbell` (flag, then count); `wbell` (the same) (see `ring.rs` for each word's states) |
//! | [`DATA`] + i × capacity .. | ring `i`'s bytes |
//!
//! The memory is exactly [`DATA`] + 2 × capacity bytes.

use core::sync::atomic::{AtomicU32, AtomicU64};

use super::ring::{Bell, RingWords};
use std::sync::atomic::Ordering::Relaxed;

/// The header's first word: `ferrySTM`, little-endian.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"ferrySTM");

/// The layout's version; a peer with another one is refused.
pub(super) const VERSION: u64 = 1;

/// The version hash a stream's binding announces in the handshake (rpc's
/// `bind`): names the layout and its version, so that an rpc server or a
/// stream of another layout version refuses the binding outright.
pub(super) const BINDING_HASH: u64 = MAGIC ^ (VERSION << 56);

/// The largest capacity of a stream across processes, each way (256
/// MiB: both rings and their words fit rpc's largest channel memory).
pub const MAX_CAPACITY: usize = 1 << 28;

/// A cache line (as rpc's channel layout).
const LINE: usize = 128;

/// Where the header's and each ring's words end and the bytes begin.
pub(super) const DATA: usize = 4096;

/// The first word of ring `i`'s five lines. `head` and `tail`, which
/// each side stores at every move, have a line each; the closed flags,
/// which each side loads at every move, one that is written only once.
const fn ring_base(i: usize) -> usize {
    LINE + i * 5 * LINE
}

const _: () = assert!(ring_base(2) <= DATA);

/// The memory's length for rings of `capacity` bytes.
pub(super) fn total_len(capacity: usize) -> usize {
    DATA + 2 * capacity
}

/// The 4-byte word at the start of the 8-byte `word`.
fn bell(word: &AtomicU64) -> &AtomicU32 {
    // SAFETY: an `AtomicU32` is no larger and no more aligned than the
    // `AtomicU64` it is carved from, has the representation of a `u32`,
    // and lives as long; the word is touched only through this view.
    unsafe { &*core::ptr::from_ref(word).cast::<AtomicU32>() }
}

/// Ring `i`'s words (`i` is 0 or 1) in `words`, a memory of this layout
/// (at least [`DATA`] bytes: checked by [`check`] or made by [`init`]).
pub(super) fn ring_words(words: &[AtomicU64], i: usize) -> RingWords<'_> {
    let at = |byte: usize| &words[byte / 8];
    let base = ring_base(i);
    RingWords {
        head: at(base),
        tail: at(base + LINE),
        wclosed: at(base + 2 * LINE),
        rclosed: at(base + 2 * LINE + 8),
        rbell: Bell {
            flag: bell(at(base + 3 * LINE)),
            seq: bell(at(base + 3 * LINE + 8)),
        },
        wbell: Bell {
            flag: bell(at(base + 4 * LINE)),
            seq: bell(at(base + 4 * LINE + 8)),
        },
    }
}

/// Writes the header of rings of `capacity` bytes over zeroed `words`
/// (the listener's side, before the memory is sent).
pub(super) fn init(words: &[AtomicU64], capacity: usize) {
    words[0].store(MAGIC, Relaxed);
    words[1].store(VERSION, Relaxed);
    words[2].store(capacity as u64, Relaxed);
}

/// Checks the header of a memory of `len` bytes a peer handed over, and
/// returns the capacity of its rings; the error says what is wrong.
pub(super) fn check(words: &[AtomicU64], len: usize) -> Result<usize, String> {
    if len < DATA || words.len() < DATA / 8 {
        return Err(format!(
            "the memory is {len} bytes, less than a stream's header"
        ));
    }
    let magic = words[0].load(Relaxed);
    if magic != MAGIC {
        return Err(format!(
            "the memory is not a ferry stream's (magic {magic:#018x}, expected {MAGIC:#018x})"
        ));
    }
    let version = words[1].load(Relaxed);
    if version != VERSION {
        return Err(format!(
            "the stream's layout version is {version}, this side speaks {VERSION}"
        ));
    }
    let cap = words[2].load(Relaxed);
    if cap == 0 || !cap.is_power_of_two() || cap > MAX_CAPACITY as u64 {
        return Err(format!(
            "the stream's capacity {cap} is not a power of two in 1..={MAX_CAPACITY}"
        ));
    }
    let cap = cap as usize;
    if total_len(cap) != len {
        return Err(format!(
            "the memory is {len} bytes, rings of {cap} bytes need {}",
            total_len(cap)
        ));
    }
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(cap: usize) -> Vec<AtomicU64> {
        (0..total_len(cap) / 8).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn a_header_made_by_init_checks_out_and_each_bad_field_is_named() {
        let m = memory(64);
        init(&m, 64);
        assert_eq!(check(&m, total_len(64)), Ok(64));
        let bad = |word: usize, v: u64| {
            let m = memory(64);
            init(&m, 64);
            m[word].store(v, Relaxed);
            check(&m, total_len(64)).unwrap_err()
        };
        assert!(bad(0, 7).contains("not a ferry stream"));
        assert!(bad(1, 2).contains("layout version is 2"));
        assert!(bad(2, 0).contains("capacity 0"));
        assert!(bad(2, 48).contains("capacity 48"));
        assert!(bad(2, 1 << 40).contains("not a power of two in"));
        assert!(bad(2, 32).contains("need"));
        assert!(check(&m, 100).unwrap_err().contains("less than"));
    }

    #[test]
    fn the_rings_words_are_distinct_and_before_the_bytes() {
        let m = memory(8);
        let base = m.as_ptr() as usize;
        let mut seen = Vec::new();
        for i in 0..2 {
            let r = ring_words(&m, i);
            for p in [
                std::ptr::from_ref(r.head) as usize,
                std::ptr::from_ref(r.wclosed) as usize,
                std::ptr::from_ref(r.tail) as usize,
                std::ptr::from_ref(r.rclosed) as usize,
                std::ptr::from_ref(r.rbell.flag) as usize,
                std::ptr::from_ref(r.rbell.seq) as usize,
                std::ptr::from_ref(r.wbell.flag) as usize,
                std::ptr::from_ref(r.wbell.seq) as usize,
            ] {
                assert!(p - base >= 24 && p - base < DATA);
                assert!(!seen.contains(&p));
                seen.push(p);
            }
        }
    }
}
