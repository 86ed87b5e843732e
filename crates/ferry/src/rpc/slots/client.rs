//! The client's side of the slot arena: which slots are free and which
//! calls are in flight (kept in this process only, never read back from
//! shared memory), writing calls and reading replies, and the reserved
//! calls' access outside the channel's lock.
//!
//! This file owns the client's local record and its transitions of the
//! control word (FREE → CALL, REPLY → FREE, CALL → FREE; the table is in
//! the parent's docs); it must not write a reply or read a call.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::collections::VecDeque;

use super::super::layout::ChannelView;
use super::{Arena, CALL, FREE, REPLY, SlotError, Ticket, control, meta, signal};

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

    /// Adds `bits` ([`ALERT`](super::ALERT), [`ABORT`](super::ABORT)) to
    /// the signal word of the call `ticket`; the caller then bumps its
    /// signal count. Release: pairs with the server's Acquire load.
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
