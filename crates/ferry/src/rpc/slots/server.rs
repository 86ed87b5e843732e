//! The server's side of the slot arena: reading calls and writing their
//! replies.
//!
//! This file owns the server's transition of the control word (CALL →
//! REPLY; the table is in the parent's docs); it must not touch the
//! client's free list or generations, which it never sees.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::super::layout::ChannelView;
use super::{ABORT, ALERT, Arena, CALL, IncomingCall, REPLY, SlotError, control, meta};

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
