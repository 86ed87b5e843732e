//! The channel layout's vocabulary for what is wrong: [`AreaName`], [`Area`]
//! and [`LayoutError`], with their messages. It owns no checks (the parent
//! does them).

use core::fmt;

use super::{HEADER_SIZE, LAYOUT_VERSION, LINE, MAGIC, MAX_EXTENT_SIZE, MAX_SLOT_SIZE, MAX_SLOTS};
use ferry_queue::shm;

/// The areas a header names, for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AreaName {
    /// The header itself, at offset 0.
    Header,
    /// The call queue.
    CallQueue,
    /// The reply queue.
    ReplyQueue,
    /// The slot arena.
    Slots,
    /// The doorbell lines.
    Doorbells,
    /// The liveness lines.
    Liveness,
    /// The slots' extents.
    Extents,
}

/// One area of the channel: `len` bytes at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Area {
    /// Bytes from the start of the region, a multiple of [`LINE`].
    pub(crate) offset: usize,
    /// Bytes in the area.
    pub(crate) len: usize,
}

impl Area {
    pub(super) fn end(&self) -> usize {
        self.offset + self.len
    }

    pub(super) fn overlaps(&self, other: &Area) -> bool {
        self.offset < other.end() && other.offset < self.end()
    }
}

/// Why a channel cannot be laid out, or a region does not hold a valid one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayoutError {
    /// The region does not start on an 8-byte boundary.
    RegionMisaligned,
    /// The region is shorter than a header.
    RegionTooSmall {
        /// Bytes in the region.
        len: usize,
    },
    /// The first word is not [`MAGIC`] (not a channel, or not initialised yet).
    BadMagic {
        /// The word found.
        found: u64,
    },
    /// Another layout version.
    BadVersion {
        /// The version found.
        found: u64,
    },
    /// The slot count is not a power of two in `1..=`[`MAX_SLOTS`].
    BadSlotCount {
        /// The count found or asked for.
        found: u64,
    },
    /// The slot size is not a multiple of 8 in `8..=`[`MAX_SLOT_SIZE`].
    BadSlotSize {
        /// The size found or asked for.
        found: u64,
    },
    /// The header's total size is not the region's length.
    SizeMismatch {
        /// The total the header states.
        header: u64,
        /// The region's length.
        region: usize,
    },
    /// The header's extent size is not a multiple of [`LINE`] up to
    /// [`MAX_EXTENT_SIZE`].
    BadExtentSize {
        /// The extent size found.
        found: u64,
    },
    /// An area's offset is not a multiple of [`LINE`].
    Misaligned {
        /// Which area.
        area: AreaName,
        /// Its offset.
        offset: u64,
    },
    /// An area does not lie inside the region, after the header.
    OutOfBounds {
        /// Which area.
        area: AreaName,
        /// Its offset.
        offset: u64,
        /// Its length, computed locally.
        len: usize,
        /// The channel's total size.
        total: usize,
    },
    /// Two areas overlap.
    Overlap {
        /// One area.
        first: AreaName,
        /// The other.
        second: AreaName,
    },
    /// A queue in the channel could not be laid out or attached.
    Queue(shm::LayoutError),
}

impl fmt::Display for AreaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AreaName::Header => "header",
            AreaName::CallQueue => "call queue",
            AreaName::ReplyQueue => "reply queue",
            AreaName::Slots => "slot arena",
            AreaName::Doorbells => "doorbells",
            AreaName::Liveness => "liveness words",
            AreaName::Extents => "extents",
        })
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::RegionMisaligned => f.write_str("channel region is not 8-byte aligned"),
            LayoutError::RegionTooSmall { len } => {
                write!(
                    f,
                    "channel region of {len} bytes is smaller than its header ({HEADER_SIZE})"
                )
            }
            LayoutError::BadMagic { found } => write!(
                f,
                "channel header has magic {found:#x}, expected {MAGIC:#x} (not a ferry channel, or not initialised)"
            ),
            LayoutError::BadVersion { found } => write!(
                f,
                "channel header has layout version {found}, this side speaks {LAYOUT_VERSION}"
            ),
            LayoutError::BadSlotCount { found } => write!(
                f,
                "slot count {found} is not a power of two between 1 and {MAX_SLOTS}"
            ),
            LayoutError::BadSlotSize { found } => write!(
                f,
                "slot size {found} is not a multiple of 8 between 8 and {MAX_SLOT_SIZE}"
            ),
            LayoutError::BadExtentSize { found } => write!(
                f,
                "extent size {found} is not a multiple of {LINE} up to {MAX_EXTENT_SIZE}"
            ),
            LayoutError::SizeMismatch { header, region } => write!(
                f,
                "channel header states {header} bytes, the region has {region}"
            ),
            LayoutError::Misaligned { area, offset } => {
                write!(f, "{area} at offset {offset} is not {LINE}-byte aligned")
            }
            LayoutError::OutOfBounds {
                area,
                offset,
                len,
                total,
            } => write!(
                f,
                "{area} ({len} bytes at offset {offset}) is not inside the channel's {total} bytes after the header"
            ),
            LayoutError::Overlap { first, second } => write!(f, "{first} overlaps {second}"),
            LayoutError::Queue(e) => write!(f, "channel queue: {e}"),
        }
    }
}

impl std::error::Error for LayoutError {}
