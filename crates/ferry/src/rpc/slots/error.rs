//! Why a slot operation failed: [`SlotError`] and its messages. It owns no
//! checks (the parent does them).

use core::fmt;

/// Why a slot operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotError {
    /// The payload does not fit in a slot (nothing was written).
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The slot size.
        max: usize,
    },
    /// Every slot is in flight.
    NoFreeSlot,
    /// A slot index (from a queue, or a ticket) beyond the slot count.
    BadIndex {
        /// The index.
        index: u32,
        /// The slot count.
        count: u32,
    },
    /// The slot's control word is in the wrong state.
    BadState {
        /// The state found.
        found: u32,
        /// The state expected.
        expected: u32,
    },
    /// The slot's generation is not the one expected.
    BadGeneration {
        /// The generation found.
        found: u32,
        /// The generation expected.
        expected: u32,
    },
    /// The slot's payload length is larger than the slot.
    BadLength {
        /// The length found.
        len: u32,
        /// The slot size.
        max: usize,
    },
    /// The reply names a slot or generation that has no call in flight here
    /// (a repeat, a reply for an abandoned call, or a forgery), or a slot
    /// other than the ticket's.
    NotInFlight {
        /// The slot index.
        index: u32,
        /// The generation asked about.
        generation: u32,
    },
    /// The call was abandoned by the client or its slot reused before the
    /// reply could be written (nothing was published).
    Stale {
        /// The slot index.
        index: u32,
        /// The call's generation.
        generation: u32,
    },
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::TooLarge { len, max } => {
                write!(f, "payload of {len} bytes does not fit in a slot of {max}")
            }
            SlotError::NoFreeSlot => f.write_str("every slot of the channel is in flight"),
            SlotError::BadIndex { index, count } => {
                write!(
                    f,
                    "slot index {index} is beyond the channel's {count} slots"
                )
            }
            SlotError::BadState { found, expected } => {
                write!(f, "slot is in state {found}, expected {expected}")
            }
            SlotError::BadGeneration { found, expected } => {
                write!(f, "slot is at generation {found}, expected {expected}")
            }
            SlotError::BadLength { len, max } => {
                write!(
                    f,
                    "slot states a payload of {len} bytes, the slot holds {max}"
                )
            }
            SlotError::NotInFlight { index, generation } => write!(
                f,
                "no call is in flight in slot {index} at generation {generation}"
            ),
            SlotError::Stale { index, generation } => write!(
                f,
                "the call in slot {index} at generation {generation} was abandoned or its slot reused"
            ),
        }
    }
}

impl std::error::Error for SlotError {}
