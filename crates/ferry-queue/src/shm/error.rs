//! The errors of the shared-memory queues: why a region cannot hold the
//! queue asked for ([`LayoutError`]) and why a push did not happen
//! ([`PushError`]).
//!
//! This file owns the error types and their messages; it must not check a
//! region (the parent does).

use core::fmt;

#[cfg(doc)]
use super::Producer;
use super::{LAYOUT_VERSION, VERSION_WORD};
use crate::Corrupt;
use crate::local::MAX_CAPACITY;

/// Why a region cannot hold, or does not hold, the queue asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// The region does not start on an 8-byte boundary.
    Misaligned,
    /// The capacity is not a power of two in `1..=`[`MAX_CAPACITY`], or the size overflows.
    BadCapacity(u64),
    /// The region is smaller than the queue needs.
    TooSmall {
        /// Bytes the queue needs.
        needed: usize,
        /// Bytes the region has.
        got: usize,
    },
    /// The version word is not this crate's magic and [`LAYOUT_VERSION`]
    /// (not initialised yet, another layout version, or not a queue).
    Version {
        /// The word found.
        found: u64,
    },
    /// The region holds a queue of another kind.
    WrongKind {
        /// Tag found (1 SP-SC, 2 MP-SC, 3 SP-MC, 4 MP-MC).
        found: u64,
        /// Tag of the kind asked for.
        expected: u64,
    },
    /// The region holds items of another size.
    WrongItemSize {
        /// Item size found, in bytes.
        found: u64,
        /// `size_of::<T>()` of the item type asked for.
        expected: u64,
    },
    /// The indices already contradict the protocol at attach time.
    Corrupt,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Misaligned => f.write_str("region is not 8-byte aligned"),
            LayoutError::BadCapacity(c) => {
                write!(
                    f,
                    "capacity {c} is not a power of two between 1 and {MAX_CAPACITY}, or too large for this item type"
                )
            }
            LayoutError::TooSmall { needed, got } => {
                write!(f, "region has {got} bytes, the queue needs {needed}")
            }
            LayoutError::Version { found } => write!(
                f,
                "region has version word {found:#x}, expected {VERSION_WORD:#x} (not an initialised ferry queue of layout {LAYOUT_VERSION})"
            ),
            LayoutError::WrongKind { found, expected } => {
                write!(
                    f,
                    "region holds a queue of kind tag {found}, expected {expected}"
                )
            }
            LayoutError::WrongItemSize { found, expected } => {
                write!(
                    f,
                    "region holds items of {found} bytes, expected {expected}"
                )
            }
            LayoutError::Corrupt => f.write_str("region's indices are corrupt"),
        }
    }
}

impl std::error::Error for LayoutError {}

/// Why a shared-memory push did not happen. Nothing was inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// No room now.
    Full,
    /// A batch larger than the capacity ([`Producer::try_push_many`]).
    TooLarge {
        /// Items in the batch.
        len: usize,
        /// Slots in the queue.
        capacity: usize,
    },
    /// The region's words contradict the protocol; see [`Corrupt`].
    Corrupt,
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full => f.write_str("shared-memory queue is full"),
            PushError::TooLarge { len, capacity } => write!(
                f,
                "a batch of {len} items can never fit in a queue of capacity {capacity}"
            ),
            PushError::Corrupt => Corrupt.fmt(f),
        }
    }
}

impl std::error::Error for PushError {}
