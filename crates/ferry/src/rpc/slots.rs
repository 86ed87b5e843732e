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
//! memory: it is the slot's own.//!
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
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::collections::VecDeque;

use super::layout::{ChannelView, SLOT_HEADER, slot_stride};
use super::shared_copy::copy_shared;

mod error;

pub(crate) use error::SlotError;

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

/// What the client knows about one slot, locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    /// On the free list; its last generation.
    Free(u32),
    /// A call at this generation is in flight.
    InFlight(u32),
}

/// The client's side of the arena: which slots are free and which calls are
/// in flight, kept in this process only. Not shared between threads by
/// itself (`&mut self`): the channel serialises its users.
#[derive(Debug)]
pub(crate) struct ClientSlots<'r> {
    arena: Arena<'r>,
    free: VecDeque<u32>,
    local: Vec<Local>,
}

impl<'r> ClientSlots<'r> {
    /// The client's side of a freshly initialised channel: every slot free
    /// at generation 0.
    pub(crate) fn new(view: &ChannelView<'r>) -> Self {
        let arena = Arena::new(view);
        ClientSlots {
            arena,
            free: (0..arena.count).collect(),
            local: vec![Local::Free(0); arena.count as usize],
        }
    }

    /// Slots free now.
    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// The call in flight in slot `index`, if any.
    pub(crate) fn in_flight(&self, index: u32) -> Option<Ticket> {
        match self.local.get(index as usize)? {
            Local::InFlight(generation) => Some(Ticket {
                index,
                generation: *generation,
            }),
            Local::Free(_) => None,
        }
    }

    /// Writes a call of `op` with `args` into a free slot at a new
    /// generation; the caller then pushes `ticket.index` on the call queue.
    ///
    /// # Errors
    /// [`SlotError::TooLarge`] if `args` exceed the slot size,
    /// [`SlotError::NoFreeSlot`] if every slot is in flight. Nothing is
    /// written in either case.
    pub(crate) fn begin_call(&mut self, op: u32, args: &[u8]) -> Result<Ticket, SlotError> {
        let ticket = self.reserve(args.len())?;
        self.arena().write_call(&ticket, op, args)?;
        Ok(ticket)
    }

    /// Takes a free slot for a call of `len` argument bytes at a new
    /// generation, without writing it: the caller writes it with
    /// [`ClientArena::write_call`] (outside whatever lock guards `self`),
    /// then pushes the index.
    ///
    /// # Errors
    /// As [`ClientSlots::begin_call`].
    pub(crate) fn reserve(&mut self, len: usize) -> Result<Ticket, SlotError> {
        self.arena.check_len(len)?;
        let index = self.free.pop_front().ok_or(SlotError::NoFreeSlot)?;
        let Local::Free(last) = self.local[index as usize] else {
            unreachable!("slot {index} was on the free list while in flight");
        };
        let generation = last.wrapping_add(1);
        self.local[index as usize] = Local::InFlight(generation);
        Ok(Ticket { index, generation })
    }

    /// The arena, for writing a reserved call and reading its reply outside
    /// the lock that guards `self` (the slot is the call's alone meanwhile).
    pub(crate) fn arena(&self) -> ClientArena<'r> {
        ClientArena(self.arena)
    }

    /// Frees the slot of `ticket` after its reply was read with
    /// [`ClientArena::read_answer`].
    ///
    /// # Errors
    /// [`SlotError::NotInFlight`] if the ticket is not in flight.
    pub(crate) fn release(&mut self, ticket: &Ticket) -> Result<(), SlotError> {
        let i = ticket.index as usize;
        if self.local.get(i) != Some(&Local::InFlight(ticket.generation)) {
            return Err(SlotError::NotInFlight {
                index: ticket.index,
                generation: ticket.generation,
            });
        }
        let slot = self.arena.slot(ticket.index)?;
        slot[0].store(control(FREE, ticket.generation), Relaxed);
        self.local[i] = Local::Free(ticket.generation);
        self.free.push_front(ticket.index);
        Ok(())
    }

    /// Reads the reply in slot `index` (as popped from the reply queue) for
    /// the call `ticket`; on success the slot is free again.
    ///
    /// # Errors
    /// [`SlotError::BadIndex`]; [`SlotError::NotInFlight`] if `index` is not
    /// the ticket's or the ticket is not in flight; [`SlotError::BadGeneration`],
    /// [`SlotError::BadState`] or [`SlotError::BadLength`] if the slot does not
    /// hold this call's reply. After an error the call stays in flight.
    pub(crate) fn read_reply(&mut self, index: u32, ticket: &Ticket) -> Result<Vec<u8>, SlotError> {
        let slot = self.arena.slot(index)?;
        let not_in_flight = SlotError::NotInFlight {
            index,
            generation: ticket.generation,
        };
        if index != ticket.index || self.local[index as usize] != Local::InFlight(ticket.generation)
        {
            return Err(not_in_flight);
        }
        let (_, result) = self.arena().read_answer(ticket)?;
        slot[0].store(control(FREE, ticket.generation), Relaxed);
        self.local[index as usize] = Local::Free(ticket.generation);
        self.free.push_front(index);
        Ok(result)
    }

    /// Gives up the call `ticket` (its deadline passed): withdraws it if the
    /// server has not taken it, and returns the slot to the free list, at the
    /// end reused last. Its next use bumps the generation, so a late reply
    /// is refused.
    ///
    /// # Errors
    /// [`SlotError::NotInFlight`] if the ticket is not in flight (already
    /// completed or abandoned); [`SlotError::BadIndex`].
    pub(crate) fn abandon(&mut self, ticket: &Ticket) -> Result<(), SlotError> {
        let slot = self.arena.slot(ticket.index)?;
        let i = ticket.index as usize;
        if self.local[i] != Local::InFlight(ticket.generation) {
            return Err(SlotError::NotInFlight {
                index: ticket.index,
                generation: ticket.generation,
            });
        }
        // Whether this succeeds is only a hint to the server; either way the
        // generation moves on at the next use.
        let _ = slot[0].compare_exchange(
            control(CALL, ticket.generation),
            control(FREE, ticket.generation),
            Relaxed,
            Relaxed,
        );
        self.local[i] = Local::Free(ticket.generation);
        self.free.push_back(ticket.index);
        Ok(())
    }
}

/// The client's access to the slots' words for calls it reserved (see
/// [`ClientSlots::reserve`]): no local state, so usable outside the lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientArena<'r>(Arena<'r>);

impl ClientArena<'_> {
    /// Writes the call `ticket` (reserved for `args.len()` bytes) and
    /// publishes it to the server (control word last, Release).
    ///
    /// # Errors
    /// [`SlotError::TooLarge`], [`SlotError::BadIndex`].
    pub(crate) fn write_call(
        &self,
        ticket: &Ticket,
        op: u32,
        args: &[u8],
    ) -> Result<(), SlotError> {
        self.write_call_parts(ticket, op, &[], args)
    }

    /// [`ClientArena::write_call`] with the payload `head` (a whole number
    /// of 8-byte words: the call's context) then `args`; the signal word is
    /// reset to this generation with no bits.
    ///
    /// # Errors
    /// As [`ClientArena::write_call`].
    pub(crate) fn write_call_parts(
        &self,
        ticket: &Ticket,
        op: u32,
        head: &[u8],
        args: &[u8],
    ) -> Result<(), SlotError> {
        let len = self.0.check_len(head.len() + args.len())?;
        let slot = self.0.slot(ticket.index)?;
        self.0.write_parts(ticket.index, slot, head, args);
        slot[1].store(meta(op, len), Relaxed);
        slot[2].store(signal(0, ticket.generation), Relaxed);
        // Release: the payload and op/length above are visible to whoever
        // reads this word with Acquire.
        slot[0].store(control(CALL, ticket.generation), Release);
        Ok(())
    }

    /// Adds `bits` ([`ALERT`], [`ABORT`]) to the signal word of the call
    /// `ticket`; the caller then bumps its signal count. Release: pairs
    /// with the server's Acquire load.
    pub(crate) fn signal(&self, ticket: &Ticket, bits: u32) {
        if let Ok(slot) = self.0.slot(ticket.index) {
            slot[2].fetch_or(signal(bits, ticket.generation), Release);
        }
    }

    /// Copies out the answer to the call `ticket` (its slot popped from the
    /// reply queue): the status the server put in the op word, and the
    /// result. The slot stays the call's; free it with
    /// [`ClientSlots::release`].
    ///
    /// # Errors
    /// [`SlotError::BadGeneration`], [`SlotError::BadState`] or
    /// [`SlotError::BadLength`] if the slot does not hold this call's reply.
    pub(crate) fn read_answer(&self, ticket: &Ticket) -> Result<(u32, Vec<u8>), SlotError> {
        let slot = self.0.slot(ticket.index)?;
        let h = Arena::header(slot);
        if h.generation != ticket.generation {
            return Err(SlotError::BadGeneration {
                found: h.generation,
                expected: ticket.generation,
            });
        }
        if h.state != REPLY {
            return Err(SlotError::BadState {
                found: h.state,
                expected: REPLY,
            });
        }
        let result = self.0.read_payload(ticket.index, slot, h.len)?;
        Ok((h.op, result))
    }

    /// Whether the slot of `ticket` holds its reply now (a look, for a
    /// caller that gave up: see [`ClientSlots::abandon`]).
    pub(crate) fn holds_reply(&self, ticket: &Ticket) -> bool {
        self.0
            .slot(ticket.index)
            .is_ok_and(|slot| slot[0].load(Acquire) == control(REPLY, ticket.generation))
    }
}

/// The server's side of the arena. Holds no state but the local geometry,
/// so it may be shared by all the server's threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerSlots<'r> {
    arena: Arena<'r>,
}

impl<'r> ServerSlots<'r> {
    /// The server's side of the arena of `view`.
    pub(crate) fn new(view: &ChannelView<'r>) -> Self {
        ServerSlots {
            arena: Arena::new(view),
        }
    }

    /// Copies out the call in slot `index` (as popped from the call queue).
    ///
    /// # Errors
    /// [`SlotError::BadIndex`]; [`SlotError::BadState`] if the slot is not a
    /// call; [`SlotError::BadLength`] if its length exceeds the slot.
    pub(crate) fn read_call(&self, index: u32) -> Result<IncomingCall, SlotError> {
        let mut args = Vec::new();
        let (mut call, len) = self.read_call_into(index, &mut args)?;
        args.truncate(len);
        call.args = args;
        Ok(call)
    }

    /// Copies out the call in slot `index` into `buf` (the serving
    /// activation's buffer, grown if it is too short): returns the call
    /// with no bytes of its own and the payload's length in `buf`.
    ///
    /// # Errors
    /// As [`ServerSlots::read_call`].
    pub(crate) fn read_call_into(
        &self,
        index: u32,
        buf: &mut Vec<u8>,
    ) -> Result<(IncomingCall, usize), SlotError> {
        let slot = self.arena.slot(index)?;
        let h = Arena::header(slot);
        if h.state != CALL {
            return Err(SlotError::BadState {
                found: h.state,
                expected: CALL,
            });
        }
        let n = h.len as usize;
        if n > self.arena.max_len() {
            return Err(SlotError::BadLength {
                len: h.len,
                max: self.arena.max_len(),
            });
        }
        if buf.len() < n {
            buf.resize(n, 0);
        }
        // SAFETY: `buf` holds at least `n` bytes, in this process's heap.
        unsafe { self.arena.copy_payload(index, slot, buf.as_mut_ptr(), n) };
        let call = IncomingCall {
            index,
            generation: h.generation,
            op: h.op,
            args: Vec::new(),
        };
        Ok((call, n))
    }

    /// The signal bits of `call` now ([`ALERT`], [`ABORT`]): 0 if the word
    /// is for another generation (a stale or forged word says nothing).
    pub(crate) fn signal_of(&self, call: &IncomingCall) -> u32 {
        let Ok(slot) = self.arena.slot(call.index) else {
            return 0;
        };
        let w = slot[2].load(Acquire);
        if (w >> 32) as u32 == call.generation {
            w as u32 & (ALERT | ABORT)
        } else {
            0
        }
    }

    /// Payload word `i` of the call in slot `index` (the context's words:
    /// its priority, its hops), if the slot holds a call that long: a look
    /// by the poller before it hands the call on; untrusted, like
    /// everything here.
    pub(crate) fn peek_word(&self, index: u32, i: usize) -> Option<u64> {
        let slot = self.arena.slot(index).ok()?;
        let h = Arena::header(slot);
        if h.state != CALL
            || (h.len as usize) < 8 * (i + 1)
            || h.len as usize > self.arena.max_len()
        {
            return None;
        }
        let payload = self.arena.payload(index, slot, h.len as usize);
        payload.get(i).map(|w| w.load(Relaxed))
    }

    /// Writes `result` as the reply to `call` into its slot; the caller then
    /// pushes `call.index` on the reply queue.
    ///
    /// # Errors
    /// [`SlotError::TooLarge`] if `result` exceeds the slot (nothing is
    /// written); [`SlotError::Stale`] if the slot no longer holds this call
    /// (abandoned, reused, or scribbled on): nothing is published then.
    pub(crate) fn write_reply(&self, call: &IncomingCall, result: &[u8]) -> Result<(), SlotError> {
        self.write_answer(call, call.op, result)
    }

    /// [`ServerSlots::write_reply`] with `status` in the op word instead of
    /// the call's op (what the call path uses: 0 for a result, else a
    /// fault's code).
    ///
    /// # Errors
    /// As [`ServerSlots::write_reply`].
    pub(crate) fn write_answer(
        &self,
        call: &IncomingCall,
        status: u32,
        result: &[u8],
    ) -> Result<(), SlotError> {
        self.write_answer_parts(call, status, &[], result)
    }

    /// [`ServerSlots::write_answer`] with the payload `head` (a whole
    /// number of 8-byte words: the run time spent) then `result`.
    ///
    /// # Errors
    /// As [`ServerSlots::write_reply`].
    pub(crate) fn write_answer_parts(
        &self,
        call: &IncomingCall,
        status: u32,
        head: &[u8],
        result: &[u8],
    ) -> Result<(), SlotError> {
        let len = self.arena.check_len(head.len() + result.len())?;
        let slot = self.arena.slot(call.index)?;
        let stale = SlotError::Stale {
            index: call.index,
            generation: call.generation,
        };
        let expected = control(CALL, call.generation);
        if slot[0].load(Relaxed) != expected {
            return Err(stale);
        }
        self.arena.write_parts(call.index, slot, head, result);
        slot[1].store(meta(status, len), Relaxed);
        // Release on success: the payload and length above are visible to
        // the client that reads this word with Acquire.
        slot[0]
            .compare_exchange(expected, control(REPLY, call.generation), Release, Relaxed)
            .map(|_| ())
            .map_err(|_| stale)
    }
}
