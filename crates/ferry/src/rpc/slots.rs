//! The slot arena: where a call's arguments and its result travel between
//! the two processes, inline in the channel.
//!
//! This module owns the slots' words and their protocol: the client's side
//! ([`ClientSlots`]: a local free list, writing calls, reading replies) and
//! the server's ([`ServerSlots`]: reading calls, writing replies). It must
//! not push or pop the queues (the channel passes the indices through them)
//! nor decode payloads (it hands out copies of the bytes).
//!
//! # A slot
//!
//! `n` slots of [`slot_stride`] bytes each, in the arena of the layout.
//! Slot `i` starts at `i × stride`:
//!
//! | bytes | word |
//! |-------|------|
//! | 0..8 | control: state in the low 32 bits, generation in the high 32 |
//! | 8..16 | op in the low 32 bits, payload length in the high 32 |
//! | 16..24 | signal: the call's generation in the high 32 bits, [`ALERT`] and [`ABORT`] in the low (client writes, server reads) |
//! | 24..24 + `s` | payload bytes, `s` = the layout's slot size (a multiple of 8) |
//!
//! A call's payload is the call's context (the logical thread, encoded by
//! `rpc::logical`) then its arguments; a reply's is the run time the server
//! spent on it (8 bytes) then its result. This module sees only bytes.
//!
//! A payload longer than `s` (up to the layout's extent size) lives in the
//! slot's extent instead, extent `i` for slot `i`; the length word says
//! which (`len > s`: out of line). Which extent is never read from shared
//! memory: it is the slot's own.
//!
//! # The control word's states
//!
//! | from | to | by | when |
//! |------|----|----|------|
//! | FREE | CALL | client | [`ClientSlots::begin_call`]: payload, then op/length, then control (Release) with a new generation |
//! | CALL | REPLY | server | [`ServerSlots::write_reply`]: payload, then op/length, then a compare-exchange of control from (CALL, g) to (REPLY, g) |
//! | REPLY | FREE | client | [`ClientSlots::read_reply`], after copying the result out |
//! | CALL | FREE | client | [`ClientSlots::abandon`] (the call timed out): compare-exchange from (CALL, g), so a server that has not read it yet skips it |
//!
//! # Generations
//!
//! Which slots are free, and the generation each slot is at, are kept
//! locally by the client and never read back from shared memory. Each
//! [`ClientSlots::begin_call`] bumps the slot's generation (wrapping) and
//! returns a [`Ticket`] of (index, generation). A reply completes a call only
//! if the slot's control word says REPLY with the ticket's generation, and
//! the client's own record says that ticket is in flight; anything else (a
//! forged reply, a reply for an older generation, a repeat) is an error and
//! leaves the call in flight.
//!
//! A call that timed out is [`ClientSlots::abandon`]ed: its slot goes back
//! to the free list (at the cold end, so it is reused last) and its next use
//! bumps the generation, so a late reply for the old generation is refused.
//! What remains: a server that is still writing the late reply when the
//! slot has been reused may overwrite the new call's op/length and payload
//! before its compare-exchange fails; the new call then carries garbage
//! that the server's decoder rejects or the call's own deadline ends. That
//! is denial of service by a slow server, never a wrong call completed, and
//! never an access out of bounds. A generation repeats only after 2³² uses
//! of one slot.
//!
//! Nothing read from a slot is trusted: indices are checked against the
//! slot count and masked, the header is copied out before it is checked,
//! lengths are checked against the slot size, and payloads are copied out.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed};

use super::layout::{ChannelView, SLOT_HEADER, slot_stride};
use super::shared_copy::copy_shared;

mod client;
mod error;
mod server;

pub(crate) use client::ClientSlots;
pub(crate) use error::SlotError;
pub(crate) use server::ServerSlots;

/// Control-word state: the client owns the slot.
pub(crate) const FREE: u32 = 0;
/// Control-word state: a call waits for or is being served by the server.
pub(crate) const CALL: u32 = 1;
/// Control-word state: the server's reply waits for the client.
pub(crate) const REPLY: u32 = 2;

/// Signal bit: the caller's logical thread was alerted.
pub(crate) const ALERT: u32 = 1;
/// Signal bit: the caller gave the call up (aborted, or its deadline
/// passed); its answer will be discarded.
pub(crate) const ABORT: u32 = 2;

/// The control word for `state` at `generation`.
pub(crate) fn control(state: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(state)
}

/// The signal word: `bits` for the call at `generation`.
pub(crate) fn signal(bits: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(bits)
}

/// The op/length word.
pub(crate) fn meta(op: u32, len: u32) -> u64 {
    (u64::from(len) << 32) | u64::from(op)
}

/// A call in flight: its slot and the generation it was written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// The slot's index.
    pub(crate) index: u32,
    /// The slot's generation for this call.
    pub(crate) generation: u32,
}

/// A call as the server copied it out of its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IncomingCall {
    /// The slot's index.
    pub(crate) index: u32,
    /// The call's generation.
    pub(crate) generation: u32,
    /// The operation the client asked for (not checked here).
    pub(crate) op: u32,
    /// A copy of the arguments (at most the slot size).
    pub(crate) args: Vec<u8>,
}

/// A slot's header words, copied out.
#[derive(Debug, Clone, Copy)]
struct SlotHeader {
    state: u32,
    generation: u32,
    op: u32,
    len: u32,
}

/// The arena's words with its geometry taken from the local layout.
#[derive(Debug, Clone, Copy)]
struct Arena<'r> {
    words: &'r [AtomicU64],
    extents: &'r [AtomicU64],
    count: u32,
    stride_words: usize,
    slot_size: usize,
    extent_size: usize,
}

impl<'r> Arena<'r> {
    fn new(view: &ChannelView<'r>) -> Self {
        let layout = view.layout();
        Arena {
            words: view.slot_words(),
            extents: view.extent_words(),
            count: layout.slot_count(),
            stride_words: slot_stride(layout.slot_size()) / 8,
            slot_size: layout.slot_size(),
            extent_size: layout.extent_size(),
        }
    }

    /// Slot `index`'s words: checked against the count, then masked.
    fn slot(&self, index: u32) -> Result<&'r [AtomicU64], SlotError> {
        if index >= self.count {
            return Err(SlotError::BadIndex {
                index,
                count: self.count,
            });
        }
        let start = (index & (self.count - 1)) as usize * self.stride_words;
        self.words
            .get(start..start + self.stride_words)
            .ok_or(SlotError::BadIndex {
                index,
                count: self.count,
            })
    }

    fn header(slot: &[AtomicU64]) -> SlotHeader {
        let c = slot[0].load(Acquire);
        let m = slot[1].load(Relaxed);
        SlotHeader {
            state: c as u32,
            generation: (c >> 32) as u32,
            op: m as u32,
            len: (m >> 32) as u32,
        }
    }

    /// The largest payload: inline, or in the slot's extent.
    fn max_len(&self) -> usize {
        self.slot_size.max(self.extent_size)
    }

    fn check_len(&self, len: usize) -> Result<u32, SlotError> {
        if len > self.max_len() {
            return Err(SlotError::TooLarge {
                len,
                max: self.max_len(),
            });
        }
        Ok(len as u32)
    }

    /// Where slot `index`'s payload of `len` bytes lives: inline after the
    /// header words, or (longer than the slot size) its extent.
    fn payload(&self, index: u32, slot: &'r [AtomicU64], len: usize) -> &'r [AtomicU64] {
        if len <= self.slot_size {
            &slot[SLOT_HEADER / 8..]
        } else {
            let words = self.extent_size / 8;
            let start = (index & (self.count - 1)) as usize * words;
            &self.extents[start..start + words]
        }
    }

    /// Writes `bytes` (checked to fit) as slot `index`'s payload.
    fn write_payload(&self, index: u32, slot: &'r [AtomicU64], bytes: &[u8]) {
        self.write_parts(index, slot, &[], bytes);
    }

    /// Writes `head` then `bytes` (together checked to fit) as slot
    /// `index`'s payload; `head` is a whole number of 8-byte words.
    fn write_parts(&self, index: u32, slot: &'r [AtomicU64], head: &[u8], bytes: &[u8]) {
        debug_assert!(head.len().is_multiple_of(8));
        let payload = self.payload(index, slot, head.len() + bytes.len());
        let (head_words, rest) = payload.split_at(head.len() / 8);
        store_words(head_words, head);
        if bytes.len() <= SHORT {
            store_words(rest, bytes);
        } else {
            assert!(
                bytes.len() <= rest.len() * 8,
                "a payload is checked to fit before it is written"
            );
            // SAFETY: the copy stays within `rest` (asserted): shared
            // memory this process may write (atomics' cells), which
            // `bytes`, a borrowed slice of this process's own memory, does
            // not overlap. A write meanwhile by the peer (or, in one
            // process, by a late reply to the slot's last call) is one
            // `copy_shared` tolerates.
            unsafe {
                copy_shared(
                    bytes.as_ptr(),
                    rest.as_ptr().cast::<u8>().cast_mut(),
                    bytes.len(),
                );
            }
        }
    }

    /// Copies slot `index`'s `len` payload bytes out, after checking `len`.
    fn read_payload(
        &self,
        index: u32,
        slot: &'r [AtomicU64],
        len: u32,
    ) -> Result<Vec<u8>, SlotError> {
        let n = len as usize;
        if n > self.max_len() {
            return Err(SlotError::BadLength {
                len,
                max: self.max_len(),
            });
        }
        let mut out = Vec::with_capacity(n);
        // SAFETY: `out` has room for `n` bytes, outside shared memory.
        unsafe { self.copy_payload(index, slot, out.as_mut_ptr(), n) };
        // SAFETY: the copy initialised the first `n` bytes.
        unsafe { out.set_len(n) };
        Ok(out)
    }

    /// Copies slot `index`'s first `n` payload bytes (checked by the caller
    /// against the maximum) to `out`, uninitialised or not.
    ///
    /// # Safety
    /// `out` is writable for `n` bytes and lies outside shared memory.
    unsafe fn copy_payload(&self, index: u32, slot: &'r [AtomicU64], out: *mut u8, n: usize) {
        let payload = self.payload(index, slot, n);
        assert!(
            n <= payload.len() * 8,
            "a length is checked against the slot before it is copied"
        );
        if n <= SHORT {
            let full = n / 8;
            for (i, word) in payload[..full].iter().enumerate() {
                // SAFETY: `8 * i + 8 <= n`, inside `out` (the contract).
                unsafe {
                    out.add(8 * i)
                        .cast::<u64>()
                        .write_unaligned(word.load(Relaxed))
                };
            }
            let tail = n % 8;
            if tail > 0 {
                let w = payload[full].load(Relaxed).to_ne_bytes();
                // SAFETY: the last `tail` bytes of `out`'s `n` (the
                // contract), from a local array.
                unsafe { core::ptr::copy_nonoverlapping(w.as_ptr(), out.add(8 * full), tail) };
            }
        } else {
            // SAFETY: the copy stays within `payload` (asserted) and `out`
            // is writable outside shared memory (the contract); a write
            // meanwhile by the peer, or by a late reply in this process,
            // only changes the bytes copied, which whoever decodes them
            // checks.
            unsafe { copy_shared(payload.as_ptr().cast::<u8>(), out, n) };
        }
    }
}

/// Payloads up to this many bytes are copied as Relaxed atomic words;
/// longer ones by [`copy_shared`], which moves them at the width the
/// processor picks but costs a few dozen cycles to start.
const SHORT: usize = 128;

/// Stores `bytes` into `words` from the first, as Relaxed atomic words, the
/// last one padded with zeros; `bytes` is checked to fit.
fn store_words(words: &[AtomicU64], bytes: &[u8]) {
    assert!(
        bytes.len() <= words.len() * 8,
        "a payload is checked to fit before it is written"
    );
    let mut words = words.iter();
    let mut chunks = bytes.chunks_exact(8);
    for (chunk, word) in chunks.by_ref().zip(words.by_ref()) {
        let w: [u8; 8] = chunk.try_into().expect("chunks of 8");
        word.store(u64::from_ne_bytes(w), Relaxed);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        if let Some(word) = words.next() {
            word.store(u64::from_ne_bytes(w), Relaxed);
        }
    }
}
