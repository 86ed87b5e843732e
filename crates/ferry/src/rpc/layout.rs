//! The memory layout of one channel: a `#[repr(C)]` [`Header`] at offset 0
//! and the areas it names, laid over one shared region (a memfd that the
//! client and the server both map).
//!
//! This module owns the header's format, the computation of the areas'
//! offsets ([`ChannelLayout::new`]), writing a fresh channel ([`init`]),
//! checking a channel made by the peer ([`attach`]) and the checked view of
//! the areas ([`ChannelView`]). It must not interpret the slots' words (that
//! is [`super::slots`]) nor wait on or ring the doorbells.
//!
//! # Layout (version [`LAYOUT_VERSION`])
//!
//! Every area starts on a [`LINE`] (128-byte) boundary. Offsets are those
//! [`ChannelLayout::new`] computes; [`attach`] accepts any offsets that pass
//! its checks. `n` is the slot count, `s` the inline slot payload size.
//!
//! | offset | size | content | written by | read by |
//! |--------|------|---------|------------|---------|
//! | 0 | 128 | [`Header`]: magic (written last, Release), version, total size, `n`, `s`, the areas' offsets | server, once, in [`init`] | client, once, in [`attach`] |
//! | 128 | `q` = `bytes_needed::<u32>(n)` rounded to 128 | call queue: `ferry_queue` MP-SC of `u32` slot indices | client (push) | server (pop) |
//! | 128 + `q` | `q` | reply queue: MP-SC of `u32` slot indices | server (push) | client (pop) |
//! | 128 + 2`q` | 256 | doorbells: a `u32` futex word at the start of each 128-byte line, the client's then the server's; a side sleeps on its own word, the peer rings it | both | both |
//! | 384 + 2`q` | 256 | liveness: per side (client's line, then server's) a heartbeat/epoch `u64` at +0, a closed flag `u64` at +8 and a signal count `u64` at +16 (bumped after each signal written into a slot) | that side | the peer |
//! | 640 + 2`q` | `n` × [`slot_stride`]`(s)` | slot arena (see [`super::slots`]) | both | both |
//! | after the arena, on a [`LINE`] | `n` × `x` | extents: slot `i`'s large arguments or result, when they do not fit inline, in extent `i` (`x` = the extent size, a multiple of [`LINE`], 0 for none) | both | both |
//!
//! Why MP-SC for both queues (the cheapest kind that is correct, per
//! frugality): a client's calls are pushed by its user-level threads on
//! whichever of its processors they run, so the call queue has several
//! producers; the server drains it from one poller at a time (the channel
//! lets one processor poll it at once), so one consumer. Replies are pushed
//! by the server's threads on any of its processors and drained by the
//! client's one poller: MP-SC again. SP-SC would be wrong as soon as either
//! side has two processors; MP-MC would pay for consumers that never race.
//! Each queue has `n` places and holds slot indices, and a slot is in at
//! most one queue at a time, so an honest peer never finds one full.
//!
//! # Trust rules
//!
//! Nothing in the region is trusted: the peer may write any byte at any
//! time. Every access to the region is atomic (8-byte words; the doorbells
//! 4-byte words, never touched as 8-byte ones), so a racing peer gives
//! garbage values, never undefined behaviour. [`attach`] reads the header
//! exactly once, into a local copy, checks every field (magic, version,
//! sizes within the limits, each area aligned, inside the region, clear of
//! the header and of every other area, the total equal to the region's
//! length) and returns a [`ChannelLayout`] kept locally: sizes and offsets
//! are never read from shared memory again. Queue headers are checked again
//! by `ferry_queue::shm` when an endpoint attaches.

use core::mem::size_of;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU32, AtomicU64};

pub(crate) use super::region::{ChannelRegion, ChannelView};

mod error;

pub(crate) use error::{Area, AreaName, LayoutError};

use ferry_queue::mpsc::Mpsc;
use ferry_queue::shm;

/// The alignment of every area, and the size of a doorbell or liveness line.
pub(crate) const LINE: usize = 128;
/// `"FRYCHAN"` then a zero byte: the header's first word once [`init`] is done.
pub(crate) const MAGIC: u64 = 0x4652_5943_4841_4e00;
/// The layout version this module writes and accepts.
pub(crate) const LAYOUT_VERSION: u64 = 3;
/// The most slots a channel may have.
pub(crate) const MAX_SLOTS: u32 = 1 << 16;
/// The largest inline slot payload, in bytes.
pub(crate) const MAX_SLOT_SIZE: usize = 1 << 16;
/// The largest extent (a slot's out-of-line area), in bytes: 16 MiB.
pub(crate) const MAX_EXTENT_SIZE: usize = 1 << 24;
/// Bytes of a slot's header words (control word, op/length word, signal
/// word).
pub(crate) const SLOT_HEADER: usize = 24;

/// The channel header, the first [`LINE`] bytes of the region. Every field is
/// an atomic word because the peer may write any of them at any time; the
/// fields are read once, by [`attach`].
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Header {
    /// [`MAGIC`]; written last by [`init`] (Release).
    pub(crate) magic: AtomicU64,
    /// [`LAYOUT_VERSION`].
    pub(crate) version: AtomicU64,
    /// Bytes of the whole channel: must equal the region's length.
    pub(crate) total_size: AtomicU64,
    /// Slots in the arena, a power of two in `1..=`[`MAX_SLOTS`].
    pub(crate) slot_count: AtomicU64,
    /// Inline payload bytes per slot, a multiple of 8 in `8..=`[`MAX_SLOT_SIZE`].
    pub(crate) slot_size: AtomicU64,
    /// Offset of the call queue.
    pub(crate) call_queue: AtomicU64,
    /// Offset of the reply queue.
    pub(crate) reply_queue: AtomicU64,
    /// Offset of the slot arena.
    pub(crate) slots: AtomicU64,
    /// Offset of the two doorbell lines.
    pub(crate) doorbells: AtomicU64,
    /// Offset of the two liveness lines.
    pub(crate) liveness: AtomicU64,
    /// Bytes of each slot's extent, a multiple of [`LINE`] up to
    /// [`MAX_EXTENT_SIZE`] (0: no extents).
    pub(crate) extent_size: AtomicU64,
    /// Offset of the extents.
    pub(crate) extents: AtomicU64,
    _pad: [AtomicU64; 4],
}

pub(super) const HEADER_SIZE: usize = size_of::<Header>();
const _: () = assert!(HEADER_SIZE == LINE && align_of::<Header>() == 8);
const _: () = assert!(size_of::<AtomicU32>() <= 8 && align_of::<AtomicU32>() <= 8);

/// The two ends of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The process that makes calls.
    Client,
    /// The process that serves them and creates the channel.
    Server,
}

impl Side {
    pub(super) fn line(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }
}

/// Bytes between the starts of two slots with `slot_size` payload bytes:
/// the header words and the payload, rounded up to a [`LINE`] so that calls
/// in flight on neighbouring slots do not share a cache line.
pub(crate) fn slot_stride(slot_size: usize) -> usize {
    (SLOT_HEADER + slot_size).next_multiple_of(LINE)
}

fn check_extent_size(found: u64) -> Result<usize, LayoutError> {
    match usize::try_from(found) {
        Ok(x) if x <= MAX_EXTENT_SIZE && x.is_multiple_of(LINE) => Ok(x),
        _ => Err(LayoutError::BadExtentSize { found }),
    }
}

fn check_slot_count(found: u64) -> Result<u32, LayoutError> {
    match u32::try_from(found) {
        Ok(n) if n.is_power_of_two() && n <= MAX_SLOTS => Ok(n),
        _ => Err(LayoutError::BadSlotCount { found }),
    }
}

fn check_slot_size(found: u64) -> Result<usize, LayoutError> {
    match usize::try_from(found) {
        Ok(s) if (8..=MAX_SLOT_SIZE).contains(&s) && s.is_multiple_of(8) => Ok(s),
        _ => Err(LayoutError::BadSlotSize { found }),
    }
}

/// Bytes of one queue area for `slot_count` slots (never fails for a
/// checked count: `MAX_SLOTS` is far below the queue's maximum).
fn queue_len(slot_count: u32) -> Result<usize, LayoutError> {
    shm::bytes_needed::<u32>(slot_count as usize)
        .map(|b| b.next_multiple_of(LINE))
        .map_err(LayoutError::Queue)
}

/// A channel's geometry, computed locally ([`ChannelLayout::new`]) or
/// checked once from a peer's header ([`attach`]), and never re-read from
/// shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChannelLayout {
    slot_count: u32,
    slot_size: usize,
    total: usize,
    call_queue: Area,
    reply_queue: Area,
    doorbells: Area,
    liveness: Area,
    slots: Area,
    extent_size: usize,
    extents: Area,
}

impl ChannelLayout {
    /// The layout of a channel with `slot_count` slots (a power of two in
    /// `1..=`[`MAX_SLOTS`]) of `slot_size` inline payload bytes (a multiple
    /// of 8 in `8..=`[`MAX_SLOT_SIZE`]).
    ///
    /// # Errors
    /// [`LayoutError::BadSlotCount`] or [`LayoutError::BadSlotSize`].
    pub(crate) fn new(slot_count: usize, slot_size: usize) -> Result<ChannelLayout, LayoutError> {
        ChannelLayout::with_extents(slot_count, slot_size, 0)
    }

    /// [`ChannelLayout::new`] with an extent of `extent_size` bytes per
    /// slot (a multiple of [`LINE`] up to [`MAX_EXTENT_SIZE`]) for what does
    /// not fit inline.
    ///
    /// # Errors
    /// As [`ChannelLayout::new`], and [`LayoutError::BadExtentSize`].
    pub(crate) fn with_extents(
        slot_count: usize,
        slot_size: usize,
        extent_size: usize,
    ) -> Result<ChannelLayout, LayoutError> {
        let extent_size = check_extent_size(extent_size as u64)?;
        let slot_count = check_slot_count(slot_count as u64)?;
        let slot_size = check_slot_size(slot_size as u64)?;
        let q = queue_len(slot_count)?;
        let call_queue = Area {
            offset: HEADER_SIZE,
            len: q,
        };
        let reply_queue = Area {
            offset: call_queue.end(),
            len: q,
        };
        let doorbells = Area {
            offset: reply_queue.end(),
            len: 2 * LINE,
        };
        let liveness = Area {
            offset: doorbells.end(),
            len: 2 * LINE,
        };
        let slots = Area {
            offset: liveness.end(),
            len: slot_count as usize * slot_stride(slot_size),
        };
        let extents = Area {
            offset: slots.end(),
            len: slot_count as usize * extent_size,
        };
        Ok(ChannelLayout {
            slot_count,
            slot_size,
            total: extents.end(),
            call_queue,
            reply_queue,
            doorbells,
            liveness,
            slots,
            extent_size,
            extents,
        })
    }

    /// Slots in the arena (a power of two).
    pub(crate) fn slot_count(&self) -> u32 {
        self.slot_count
    }

    /// Inline payload bytes per slot.
    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Bytes of the whole channel: the size of the memfd to create.
    pub(crate) fn total_size(&self) -> usize {
        self.total
    }

    /// The call queue's area.
    pub(crate) fn call_queue(&self) -> Area {
        self.call_queue
    }

    /// The reply queue's area.
    pub(crate) fn reply_queue(&self) -> Area {
        self.reply_queue
    }

    /// The doorbells' area (two lines: client, server).
    pub(crate) fn doorbells(&self) -> Area {
        self.doorbells
    }

    /// The liveness area (two lines: client, server).
    pub(crate) fn liveness(&self) -> Area {
        self.liveness
    }

    /// The slot arena's area.
    pub(crate) fn slots(&self) -> Area {
        self.slots
    }

    /// Bytes of each slot's extent (0: none).
    pub(crate) fn extent_size(&self) -> usize {
        self.extent_size
    }

    /// The extents' area.
    pub(crate) fn extents(&self) -> Area {
        self.extents
    }

    fn areas(&self) -> [(AreaName, Area); 6] {
        [
            (AreaName::Extents, self.extents),
            (AreaName::CallQueue, self.call_queue),
            (AreaName::ReplyQueue, self.reply_queue),
            (AreaName::Slots, self.slots),
            (AreaName::Doorbells, self.doorbells),
            (AreaName::Liveness, self.liveness),
        ]
    }
}
/// Writes a fresh channel of `layout` over `region`: the server does this
/// once, before sending the memfd. The magic is written last (Release), so a
/// side that attaches too early gets [`LayoutError::BadMagic`].
///
/// # Errors
/// [`LayoutError::SizeMismatch`] if the region's length is not the layout's
/// total; [`LayoutError::Queue`] if a queue cannot be laid out.
pub(crate) fn init<'r>(
    region: ChannelRegion<'r>,
    layout: &ChannelLayout,
) -> Result<ChannelView<'r>, LayoutError> {
    let view = ChannelView::new(region, layout)?;
    let header = region.header()?;
    header.magic.store(0, Relaxed);
    header.version.store(LAYOUT_VERSION, Relaxed);
    header.total_size.store(layout.total as u64, Relaxed);
    header
        .slot_count
        .store(u64::from(layout.slot_count), Relaxed);
    header.slot_size.store(layout.slot_size as u64, Relaxed);
    header
        .call_queue
        .store(layout.call_queue.offset as u64, Relaxed);
    header
        .reply_queue
        .store(layout.reply_queue.offset as u64, Relaxed);
    header.slots.store(layout.slots.offset as u64, Relaxed);
    header
        .doorbells
        .store(layout.doorbells.offset as u64, Relaxed);
    header
        .liveness
        .store(layout.liveness.offset as u64, Relaxed);
    header.extent_size.store(layout.extent_size as u64, Relaxed);
    header.extents.store(layout.extents.offset as u64, Relaxed);
    for w in &header._pad {
        w.store(0, Relaxed);
    }
    shm::init::<u32, Mpsc>(view.call_queue(), layout.slot_count as usize)
        .map_err(LayoutError::Queue)?;
    shm::init::<u32, Mpsc>(view.reply_queue(), layout.slot_count as usize)
        .map_err(LayoutError::Queue)?;
    for side in [Side::Client, Side::Server] {
        view.doorbell(side).store(0, Relaxed);
        view.heartbeat(side).store(0, Relaxed);
        view.closed(side).store(0, Relaxed);
    }
    // Every slot FREE with generation 0, no op, no payload.
    for w in view.slot_words() {
        w.store(0, Relaxed);
    }
    // Release: all of the above is visible to whoever reads the magic with
    // Acquire in `attach`.
    header.magic.store(MAGIC, Release);
    Ok(view)
}

/// The header's fields, copied out of shared memory once.
#[derive(Debug, Clone, Copy)]
struct HeaderCopy {
    magic: u64,
    version: u64,
    total_size: u64,
    slot_count: u64,
    slot_size: u64,
    call_queue: u64,
    reply_queue: u64,
    slots: u64,
    doorbells: u64,
    liveness: u64,
    extent_size: u64,
    extents: u64,
}

/// Reads the header of the channel in `region` once, checks every field,
/// and returns the layout to keep locally.
///
/// # Errors
/// The first check that fails, in this order: [`LayoutError::RegionTooSmall`],
/// [`LayoutError::BadMagic`], [`LayoutError::BadVersion`],
/// [`LayoutError::BadSlotCount`], [`LayoutError::BadSlotSize`],
/// [`LayoutError::SizeMismatch`], then per area (call queue, reply queue,
/// slots, doorbells, liveness) [`LayoutError::Misaligned`] or
/// [`LayoutError::OutOfBounds`], then [`LayoutError::Overlap`].
pub(crate) fn attach(region: ChannelRegion<'_>) -> Result<ChannelLayout, LayoutError> {
    let header = region.header()?;
    let h = HeaderCopy {
        magic: header.magic.load(Acquire),
        version: header.version.load(Relaxed),
        total_size: header.total_size.load(Relaxed),
        slot_count: header.slot_count.load(Relaxed),
        slot_size: header.slot_size.load(Relaxed),
        call_queue: header.call_queue.load(Relaxed),
        reply_queue: header.reply_queue.load(Relaxed),
        slots: header.slots.load(Relaxed),
        doorbells: header.doorbells.load(Relaxed),
        liveness: header.liveness.load(Relaxed),
        extent_size: header.extent_size.load(Relaxed),
        extents: header.extents.load(Relaxed),
    };
    check(&h, region.len_bytes())
}

fn check(h: &HeaderCopy, region_len: usize) -> Result<ChannelLayout, LayoutError> {
    if h.magic != MAGIC {
        return Err(LayoutError::BadMagic { found: h.magic });
    }
    if h.version != LAYOUT_VERSION {
        return Err(LayoutError::BadVersion { found: h.version });
    }
    let slot_count = check_slot_count(h.slot_count)?;
    let slot_size = check_slot_size(h.slot_size)?;
    let extent_size = check_extent_size(h.extent_size)?;
    if h.total_size != region_len as u64 {
        return Err(LayoutError::SizeMismatch {
            header: h.total_size,
            region: region_len,
        });
    }
    let total = region_len;
    let q = queue_len(slot_count)?;
    let area = |name: AreaName, offset: u64, len: usize| -> Result<Area, LayoutError> {
        if !offset.is_multiple_of(LINE as u64) {
            return Err(LayoutError::Misaligned { area: name, offset });
        }
        match usize::try_from(offset) {
            Ok(o) if o >= HEADER_SIZE && o.checked_add(len).is_some_and(|end| end <= total) => {
                Ok(Area { offset: o, len })
            }
            _ => Err(LayoutError::OutOfBounds {
                area: name,
                offset,
                len,
                total,
            }),
        }
    };
    let layout = ChannelLayout {
        slot_count,
        slot_size,
        total,
        call_queue: area(AreaName::CallQueue, h.call_queue, q)?,
        reply_queue: area(AreaName::ReplyQueue, h.reply_queue, q)?,
        slots: area(
            AreaName::Slots,
            h.slots,
            slot_count as usize * slot_stride(slot_size),
        )?,
        doorbells: area(AreaName::Doorbells, h.doorbells, 2 * LINE)?,
        liveness: area(AreaName::Liveness, h.liveness, 2 * LINE)?,
        extent_size,
        extents: area(
            AreaName::Extents,
            h.extents,
            slot_count as usize * extent_size,
        )?,
    };
    let areas = layout.areas();
    for (i, (first, a)) in areas.iter().enumerate() {
        for (second, b) in &areas[i + 1..] {
            if a.overlaps(b) {
                return Err(LayoutError::Overlap {
                    first: *first,
                    second: *second,
                });
            }
        }
    }
    Ok(layout)
}
