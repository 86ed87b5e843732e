//! The memory of a channel and the checked view of its areas.
//!
//! This module owns the two ways of seeing the region: [`ChannelRegion`], the
//! raw words (atomic accesses, and the slots' assembly copies of long
//! payloads), and [`ChannelView`], the region paired
//! with a [`ChannelLayout`] checked to fit it, which hands out each area's
//! words. It must not read sizes or offsets from shared memory: they come
//! from the local layout (see [`super::layout`] for the table and the trust
//! rules).

use core::sync::atomic::{AtomicU32, AtomicU64};

use ferry_queue::mpsc::{ShmConsumer, ShmProducer};
use ferry_queue::shm::Region;

use super::layout::{Area, ChannelLayout, HEADER_SIZE, Header, LINE, LayoutError, Side};

/// The memory a channel lives in: a run of 8-byte words that this process
/// touches with atomic operations, and with the assembly copy of
/// `arch::shared_copy` for long payloads in the slots and extents (never
/// with plain Rust loads and stores, so nothing written meanwhile races
/// with them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChannelRegion<'r> {
    words: &'r [AtomicU64],
}

impl<'r> ChannelRegion<'r> {
    /// A region over words of this process.
    pub(crate) fn new(words: &'r [AtomicU64]) -> Self {
        ChannelRegion { words }
    }

    /// A region over `len` bytes at `ptr`, e.g. a shared mapping of the
    /// channel's memfd. Trailing bytes beyond a multiple of 8 are not used.
    ///
    /// # Errors
    /// [`LayoutError::RegionMisaligned`] if `ptr` is not 8-byte aligned.
    ///
    /// # Safety
    /// For all of `'r` the `len` bytes at `ptr` must stay mapped, readable and
    /// writable, and every access to them from this process must be atomic
    /// or `arch::shared_copy`'s (other processes may do anything: their
    /// writes are values, not accesses in this process's memory model).
    pub(crate) unsafe fn from_raw(ptr: *mut u8, len: usize) -> Result<Self, LayoutError> {
        if ptr.align_offset(align_of::<AtomicU64>()) != 0 {
            return Err(LayoutError::RegionMisaligned);
        }
        // SAFETY: aligned (checked above); by the caller's contract valid for
        // `len` bytes for `'r` and accessed atomically (or by an assembly
        // copy through the atomics' shared cells), which a slice of
        // `AtomicU64` allows.
        let words = unsafe { core::slice::from_raw_parts(ptr.cast::<AtomicU64>(), len / 8) };
        Ok(ChannelRegion { words })
    }

    /// The region's words, for a layout other than a channel's (a
    /// cross-process stream's, `stream/remote`).
    pub(crate) fn words(&self) -> &'r [AtomicU64] {
        self.words
    }

    /// The region's length in bytes.
    pub(crate) fn len_bytes(&self) -> usize {
        self.words.len() * 8
    }

    pub(super) fn header(&self) -> Result<&'r Header, LayoutError> {
        let words = self
            .words
            .get(..HEADER_SIZE / 8)
            .ok_or(LayoutError::RegionTooSmall {
                len: self.len_bytes(),
            })?;
        // SAFETY: `Header` is `repr(C)` and made only of `AtomicU64`s (size
        // `HEADER_SIZE`, align 8, checked at compile time); `words` is exactly
        // that many aligned `AtomicU64`s living for `'r`.
        Ok(unsafe { &*words.as_ptr().cast::<Header>() })
    }
}

/// A region checked to hold a channel of a given layout: the areas' views.
/// Built only by [`init`](super::layout::init) or [`ChannelView::new`], which check that the
/// region's length is the layout's total, so every view is in bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChannelView<'r> {
    words: &'r [AtomicU64],
    layout: ChannelLayout,
}

impl<'r> ChannelView<'r> {
    /// Pairs `region` with `layout` (from [`attach`](super::layout::attach)
    /// or [`ChannelLayout::new`]).
    ///
    /// # Errors
    /// [`LayoutError::SizeMismatch`] if the region's length is not the
    /// layout's total.
    pub(crate) fn new(
        region: ChannelRegion<'r>,
        layout: &ChannelLayout,
    ) -> Result<Self, LayoutError> {
        if region.len_bytes() != layout.total_size() {
            return Err(LayoutError::SizeMismatch {
                header: layout.total_size() as u64,
                region: region.len_bytes(),
            });
        }
        Ok(ChannelView {
            words: region.words,
            layout: *layout,
        })
    }

    /// The layout, local.
    pub(crate) fn layout(&self) -> &ChannelLayout {
        &self.layout
    }

    fn area(&self, area: Area) -> &'r [AtomicU64] {
        &self.words[area.offset / 8..(area.offset + area.len) / 8]
    }

    /// The call queue's region.
    pub(crate) fn call_queue(&self) -> Region<'r> {
        Region::new(self.area(self.layout.call_queue()))
    }

    /// The reply queue's region.
    pub(crate) fn reply_queue(&self) -> Region<'r> {
        Region::new(self.area(self.layout.reply_queue()))
    }

    /// The slot arena's words.
    pub(crate) fn slot_words(&self) -> &'r [AtomicU64] {
        self.area(self.layout.slots())
    }

    /// The extents' words (empty without extents).
    pub(crate) fn extent_words(&self) -> &'r [AtomicU64] {
        self.area(self.layout.extents())
    }

    /// The futex word `side` sleeps on (the peer rings it).
    pub(crate) fn doorbell(&self, side: Side) -> &'r AtomicU32 {
        let word = &self.area(self.layout.doorbells())[side.line() * LINE / 8];
        // SAFETY: an `AtomicU32` is no larger and no more aligned than the
        // `AtomicU64` it is carved from (checked at compile time), has the
        // representation of a `u32`, and lives as long; this crate touches
        // the doorbell words only through this 4-byte view.
        unsafe { &*core::ptr::from_ref(word).cast::<AtomicU32>() }
    }

    /// `side`'s heartbeat/epoch word (written by `side`, read by the peer).
    pub(crate) fn heartbeat(&self, side: Side) -> &'r AtomicU64 {
        &self.area(self.layout.liveness())[side.line() * LINE / 8]
    }

    /// `side`'s closed flag (nonzero once `side` has closed the channel).
    pub(crate) fn closed(&self, side: Side) -> &'r AtomicU64 {
        &self.area(self.layout.liveness())[side.line() * LINE / 8 + 1]
    }

    /// `side`'s signal count: bumped by `side` each time it signals a call
    /// in flight (an alert or an abort in a slot's signal word), so that the
    /// peer's poller finds signals with one load.
    pub(crate) fn signals(&self, side: Side) -> &'r AtomicU64 {
        &self.area(self.layout.liveness())[side.line() * LINE / 8 + 2]
    }

    /// The client's end of the call queue.
    ///
    /// # Errors
    /// [`LayoutError::Queue`] if the queue's own header is not valid.
    pub(crate) fn call_producer(&self) -> Result<ShmProducer<'r, u32>, LayoutError> {
        ShmProducer::attach(self.call_queue()).map_err(LayoutError::Queue)
    }

    /// The server's end of the call queue (one poller at a time).
    ///
    /// # Errors
    /// As [`ChannelView::call_producer`].
    pub(crate) fn call_consumer(&self) -> Result<ShmConsumer<'r, u32>, LayoutError> {
        ShmConsumer::attach(self.call_queue()).map_err(LayoutError::Queue)
    }

    /// The server's end of the reply queue.
    ///
    /// # Errors
    /// As [`ChannelView::call_producer`].
    pub(crate) fn reply_producer(&self) -> Result<ShmProducer<'r, u32>, LayoutError> {
        ShmProducer::attach(self.reply_queue()).map_err(LayoutError::Queue)
    }

    /// The client's end of the reply queue (one poller at a time).
    ///
    /// # Errors
    /// As [`ChannelView::call_producer`].
    pub(crate) fn reply_consumer(&self) -> Result<ShmConsumer<'r, u32>, LayoutError> {
        ShmConsumer::attach(self.reply_queue()).map_err(LayoutError::Queue)
    }
}
