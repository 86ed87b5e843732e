//! The shared-memory form of each queue kind, for plain-old-data items.
//!
//! A queue is laid over a caller-provided [`Region`] (typically a `memfd`
//! mapped by two processes) as `u64` words: a header with a layout version,
//! then `head` and `tail` on their own cache lines, then the slots. There are
//! no pointers in the region, only positions that are masked before use, and
//! every word is read and written with atomic operations, so a peer that
//! writes anything anywhere at any time can make this side read garbage items
//! or get a [`Corrupt`] error, but never panic, read or write out of bounds,
//! or loop without bound. This module must never trust a value it did not
//! write itself: the capacity and item size are read once, checked, and kept
//! locally. (So a peer that rewrites the header's capacity between `init` and
//! another side's `attach` can make the two sides disagree on it: that side
//! reads garbage, within its own checked bounds.)
//!
//! What each side can notice: SP-SC checks `head` against `tail` and the
//! multi sides check that an index they found stale has moved, reporting
//! [`Corrupt`]; the MP-SC consumer reads only the valid flags, so a hostile
//! producer can feed it garbage items but never an error.
//!
//! # Layout (version [`LAYOUT_VERSION`]), in 8-byte words
//!
//! The fixed part is the `#[repr(C)]` [`Header`]; the slots follow it.
//!
//! | word | content |
//! |------|---------|
//! | 0 | [`Header::version`]: magic `"FRYQ"` in the high half, layout version in the low half; written last by [`init`] (Release) |
//! | 1 | [`Header::kind`]: 1 SP-SC, 2 MP-SC, 3 SP-MC, 4 MP-MC |
//! | 2 | [`Header::capacity`] (a power of two) |
//! | 3 | [`Header::item_size`] in bytes |
//! | 16 | [`Header::head`] (own 128-byte line) |
//! | 32 | [`Header::tail`] (own 128-byte line) |
//! | 48 + i·(1 + w) | slot `i`: stamp word, then `w = ceil(size / 8)` item words (native byte order) |
//!
//! The words' protocols are those of the in-process kinds ([`crate::spsc`],
//! [`crate::mpsc`], [`crate::spmc`], [`crate::mpmc`]).
//!
//! Waiting across processes needs a futex word both sides know, which is the
//! channel's business (ferry's RPC channels put doorbells next to their
//! queues), so this form offers the non-blocking operations only.
//!
//! ```
//! use ferry_queue::shm::{self, Region};
//! use ferry_queue::spsc::{ShmConsumer, ShmProducer, Spsc};
//! use std::sync::atomic::AtomicU64;
//!
//! let words: Vec<AtomicU64> = (0..shm::words_needed::<u32>(8).unwrap())
//!     .map(|_| AtomicU64::new(0))
//!     .collect();
//! let region = Region::new(&words);
//! shm::init::<u32, Spsc>(region, 8).unwrap();
//! let tx = ShmProducer::<u32>::attach(region).unwrap();
//! let rx = ShmConsumer::<u32>::attach(region).unwrap();
//! tx.try_push(7).unwrap();
//! assert_eq!(rx.try_pop(), Ok(Some(7)));
//! assert_eq!(rx.try_pop(), Ok(None));
//! ```

use core::marker::PhantomData;
use core::mem::size_of;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use bytemuck::Pod;

use crate::local::MAX_CAPACITY;
use crate::ring::{MultiConsumer, MultiProducer, Ring, Side, Step};
use crate::{Corrupt, Kind};

mod error;

pub use error::{LayoutError, PushError};

/// The layout version this crate writes and accepts.
pub const LAYOUT_VERSION: u64 = 1;
const MAGIC: u64 = 0x4652_5951; // "FRYQ"
const VERSION_WORD: u64 = (MAGIC << 32) | LAYOUT_VERSION;

/// The fixed part of a shared-memory queue: the first 384 bytes of its
/// region, followed by the slots. Every field is an atomic word, because the
/// other process may write any of them at any time.
#[repr(C)]
#[derive(Debug)]
pub struct Header {
    /// Magic `"FRYQ"` in the high half, [`LAYOUT_VERSION`] in the low half;
    /// written last by [`init`].
    pub version: AtomicU64,
    /// Kind tag: 1 SP-SC, 2 MP-SC, 3 SP-MC, 4 MP-MC.
    pub kind: AtomicU64,
    /// Number of slots, a power of two.
    pub capacity: AtomicU64,
    /// `size_of` the item type, in bytes.
    pub item_size: AtomicU64,
    _pad0: [AtomicU64; 12],
    /// The producers' index, on its own 128 bytes.
    pub head: AtomicU64,
    _pad1: [AtomicU64; 15],
    /// The consumers' index, on its own 128 bytes.
    pub tail: AtomicU64,
    _pad2: [AtomicU64; 15],
}

/// Words in the [`Header`]; the slots start at this word.
const HEADER_WORDS: usize = size_of::<Header>() / 8;
const _: () = assert!(size_of::<Header>() == 384 && align_of::<Header>() == 8);
const _: () = assert!(core::mem::offset_of!(Header, head) == 128);
const _: () = assert!(core::mem::offset_of!(Header, tail) == 256);

/// The memory a shared-memory queue lives in: a run of 8-byte words that
/// only atomic operations touch.
#[derive(Debug, Clone, Copy)]
pub struct Region<'r> {
    words: &'r [AtomicU64],
}

impl<'r> Region<'r> {
    /// A region over words of this process (tests, or memory already typed).
    pub fn new(words: &'r [AtomicU64]) -> Self {
        Region { words }
    }

    /// A region over `len` bytes at `ptr`, e.g. a shared mapping. Trailing
    /// bytes beyond a multiple of 8 are not used.
    ///
    /// # Errors
    /// [`LayoutError::Misaligned`] if `ptr` is not 8-byte aligned.
    ///
    /// # Safety
    /// For all of `'r`, the `len` bytes at `ptr` must stay mapped, readable
    /// and writable, and every access to them, by this process or any other,
    /// must be an atomic operation (other processes: naturally aligned
    /// machine-word accesses, which is what this crate does).
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Result<Self, LayoutError> {
        if ptr.align_offset(align_of::<AtomicU64>()) != 0 {
            return Err(LayoutError::Misaligned);
        }
        // SAFETY: the pointer is aligned (checked) and, by the caller's
        // contract, valid for `len` bytes for `'r` and only accessed
        // atomically, which is what `[AtomicU64]` allows.
        let words = unsafe { core::slice::from_raw_parts(ptr.cast::<AtomicU64>(), len / 8) };
        Ok(Region { words })
    }

    /// The region's size in bytes.
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The header and the words after it, or `None` if the region is
    /// smaller than a header.
    fn split(&self) -> Option<(&'r Header, &'r [AtomicU64])> {
        if self.words.len() < HEADER_WORDS {
            return None;
        }
        let (head, slots) = self.words.split_at(HEADER_WORDS);
        // SAFETY: `Header` is `repr(C)`, made only of `AtomicU64`s (size 384,
        // align 8, checked at compile time), and `head` is exactly
        // `HEADER_WORDS` 8-aligned `AtomicU64`s that live for `'r`.
        let header = unsafe { &*head.as_ptr().cast::<Header>() };
        Some((header, slots))
    }
}

fn item_words<T>() -> usize {
    size_of::<T>().div_ceil(8)
}

/// Words a queue of `capacity` items of type `T` needs.
///
/// # Errors
/// [`LayoutError::BadCapacity`] if `capacity` is not a power of two in
/// `1..=`[`MAX_CAPACITY`], or the queue's size in bytes
/// would not fit in a `usize`.
pub fn words_needed<T: Pod>(capacity: usize) -> Result<usize, LayoutError> {
    if !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
        return Err(LayoutError::BadCapacity(capacity as u64));
    }
    capacity
        .checked_mul(1 + item_words::<T>())
        .and_then(|slots| slots.checked_add(HEADER_WORDS))
        .filter(|words| words.checked_mul(8).is_some())
        .ok_or(LayoutError::BadCapacity(capacity as u64))
}

/// Bytes a queue of `capacity` items of type `T` needs: the size of the
/// region (e.g. memfd) to create.
///
/// # Errors
/// As [`words_needed`].
pub fn bytes_needed<T: Pod>(capacity: usize) -> Result<usize, LayoutError> {
    Ok(words_needed::<T>(capacity)? * 8)
}

/// Lays out an empty queue of kind `K` with `capacity` slots of `T` over
/// `region`. The creating process calls this once, before either side
/// attaches; the version word is written last, so a side that attaches too
/// early gets [`LayoutError::Version`] rather than a half-made queue.
///
/// # Errors
/// [`LayoutError::BadCapacity`] or [`LayoutError::TooSmall`].
pub fn init<T: Pod, K: Kind>(region: Region<'_>, capacity: usize) -> Result<(), LayoutError> {
    let needed = words_needed::<T>(capacity)?;
    if region.words.len() < needed {
        return Err(LayoutError::TooSmall {
            needed: needed * 8,
            got: region.len_bytes(),
        });
    }
    let (header, slots) = region.split().expect("the size was checked above");
    header.version.store(0, Relaxed);
    header.kind.store(K::TAG, Relaxed);
    header.capacity.store(capacity as u64, Relaxed);
    header.item_size.store(size_of::<T>() as u64, Relaxed);
    header.head.store(0, Relaxed);
    header.tail.store(0, Relaxed);
    let stride = 1 + item_words::<T>();
    for i in 0..capacity {
        slots[i * stride].store(K::initial_stamp(i as u64), Relaxed);
    }
    // Release: everything above is visible to whoever reads the version word
    // with Acquire in `attach`.
    header.version.store(VERSION_WORD, Release);
    Ok(())
}

/// A checked view of one queue in a region: the `Ring` the protocols run on.
/// Capacity and item size come from the header once, at attach, and are never
/// re-read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShmRing<'r, T> {
    header: &'r Header,
    slots: &'r [AtomicU64],
    pub(crate) capacity: u64,
    stride: usize,
    item: PhantomData<T>,
}

impl<'r, T: Pod> ShmRing<'r, T> {
    fn attach<K: Kind>(region: Region<'r>) -> Result<Self, LayoutError> {
        let Some((header, slots)) = region.split() else {
            return Err(LayoutError::TooSmall {
                needed: size_of::<Header>(),
                got: region.len_bytes(),
            });
        };
        let version = header.version.load(Acquire);
        if version != VERSION_WORD {
            return Err(LayoutError::Version { found: version });
        }
        let kind = header.kind.load(Relaxed);
        if kind != K::TAG {
            return Err(LayoutError::WrongKind {
                found: kind,
                expected: K::TAG,
            });
        }
        let item_size = header.item_size.load(Relaxed);
        if item_size != size_of::<T>() as u64 {
            return Err(LayoutError::WrongItemSize {
                found: item_size,
                expected: size_of::<T>() as u64,
            });
        }
        let capacity = header.capacity.load(Relaxed);
        let needed = usize::try_from(capacity)
            .map_err(|_| LayoutError::BadCapacity(capacity))
            .and_then(words_needed::<T>)?;
        if region.words.len() < needed {
            return Err(LayoutError::TooSmall {
                needed: needed * 8,
                got: region.len_bytes(),
            });
        }
        Ok(ShmRing {
            header,
            slots,
            capacity,
            stride: 1 + item_words::<T>(),
            item: PhantomData,
        })
    }

    /// The current `head` and `tail`, checked against each other.
    fn indices(&self) -> Result<(u64, u64), Corrupt> {
        let tail = self.tail().load(Acquire);
        let head = self.head().load(Acquire);
        if head.wrapping_sub(tail) > self.capacity {
            return Err(Corrupt);
        }
        Ok((head, tail))
    }

    fn item_word(&self, slot: usize, i: usize) -> &AtomicU64 {
        &self.slots[slot * self.stride + 1 + i]
    }
}

// SAFETY: `attach` checked that the words after the header hold
// `capacity * stride` words, so every slot below `capacity` (a checked power
// of two, kept locally) is in bounds (and indexing checks it again); all accesses are atomic, so any concurrent write by a peer is
// a race on values, never undefined behaviour.
unsafe impl<T: Pod> Ring for ShmRing<'_, T> {
    type Item = T;
    const HOSTILE: bool = true;

    fn head(&self) -> &AtomicU64 {
        &self.header.head
    }

    fn tail(&self) -> &AtomicU64 {
        &self.header.tail
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn stamp(&self, slot: usize) -> &AtomicU64 {
        &self.slots[slot * self.stride]
    }

    unsafe fn write(&self, slot: usize, item: T) {
        let bytes = bytemuck::bytes_of(&item);
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.item_word(slot, i)
                .store(u64::from_ne_bytes(word), Relaxed);
        }
    }

    unsafe fn read(&self, slot: usize) -> T {
        let mut item = T::zeroed();
        let bytes = bytemuck::bytes_of_mut(&mut item);
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let word = self.item_word(slot, i).load(Relaxed).to_ne_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        item
    }
}

/// The producing side of a shared-memory queue of kind `K` (named per kind:
/// [`crate::spsc::ShmProducer`], …).
///
/// `Send`, not `Sync`. Multi-producer kinds are `Clone`; that a single-producer
/// kind has one producer across processes is the processes' contract, which
/// the queue cannot check (breaking it yields garbage, not a crash).
#[derive(Debug)]
pub struct Producer<'r, T, K: Kind> {
    pub(crate) ring: ShmRing<'r, T>,
    pub(crate) side: Side,
    kind: PhantomData<fn() -> K>,
}

/// The consuming side of a shared-memory queue of kind `K`; see [`Producer`].
#[derive(Debug)]
pub struct Consumer<'r, T, K: Kind> {
    ring: ShmRing<'r, T>,
    side: Side,
    kind: PhantomData<fn() -> K>,
}

impl<'r, T: Pod, K: Kind> Producer<'r, T, K> {
    /// Attaches to the queue that [`init`] laid out in `region`.
    ///
    /// # Errors
    /// A [`LayoutError`] if the region does not hold a queue of this kind and
    /// item type, or its indices are already inconsistent.
    pub fn attach(region: Region<'r>) -> Result<Self, LayoutError> {
        let ring = ShmRing::attach::<K>(region)?;
        let (head, tail) = ring.indices().map_err(|_| LayoutError::Corrupt)?;
        Ok(Producer {
            ring,
            side: Side::new(head, tail),
            kind: PhantomData,
        })
    }

    /// Pushes `item` if there is room.
    ///
    /// # Errors
    /// [`PushError::Full`], or [`PushError::Corrupt`] if the peer broke the
    /// protocol.
    pub fn try_push(&self, item: T) -> Result<(), PushError> {
        match K::push(&self.ring, &self.side, false, item) {
            Ok(()) => Ok(()),
            Err((Step::Corrupt, _)) => Err(PushError::Corrupt),
            Err(_) => Err(PushError::Full),
        }
    }

    /// Slots in the queue.
    pub fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }

    /// Items in the queue now, as far as the shared indices say.
    ///
    /// # Errors
    /// [`Corrupt`] if the indices contradict each other.
    pub fn len(&self) -> Result<usize, Corrupt> {
        self.ring.indices().map(|(h, t)| h.wrapping_sub(t) as usize)
    }

    /// True if the shared indices say the queue is empty.
    ///
    /// # Errors
    /// [`Corrupt`] if the indices contradict each other.
    pub fn is_empty(&self) -> Result<bool, Corrupt> {
        self.len().map(|n| n == 0)
    }
}

impl<'r, T: Pod, K: Kind> Consumer<'r, T, K> {
    /// Attaches to the queue that [`init`] laid out in `region`.
    ///
    /// # Errors
    /// As [`Producer::attach`].
    pub fn attach(region: Region<'r>) -> Result<Self, LayoutError> {
        let ring = ShmRing::attach::<K>(region)?;
        let (head, tail) = ring.indices().map_err(|_| LayoutError::Corrupt)?;
        Ok(Consumer {
            ring,
            side: Side::new(tail, head),
            kind: PhantomData,
        })
    }

    /// Takes the oldest item, or `None` if the queue is empty.
    ///
    /// # Errors
    /// [`Corrupt`] if the peer broke the protocol.
    pub fn try_pop(&self) -> Result<Option<T>, Corrupt> {
        match K::pop(&self.ring, &self.side, false) {
            Step::Done(item) => Ok(Some(item)),
            Step::NotNow => Ok(None),
            Step::Corrupt => Err(Corrupt),
        }
    }

    /// Slots in the queue.
    pub fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }

    /// Items in the queue now, as far as the shared indices say.
    ///
    /// # Errors
    /// [`Corrupt`] if the indices contradict each other.
    pub fn len(&self) -> Result<usize, Corrupt> {
        self.ring.indices().map(|(h, t)| h.wrapping_sub(t) as usize)
    }

    /// True if the shared indices say the queue is empty.
    ///
    /// # Errors
    /// [`Corrupt`] if the indices contradict each other.
    pub fn is_empty(&self) -> Result<bool, Corrupt> {
        self.len().map(|n| n == 0)
    }
}

/// A look at a shared-memory queue's fill from any thread: only the shared
/// indices are read (atomically), so unlike the endpoints it is `Sync`. A
/// poller asks it whether to take its consumer's lock.
#[derive(Debug, Clone, Copy)]
pub struct Observer<'r, T> {
    ring: ShmRing<'r, T>,
}

impl<T: Pod> Observer<'_, T> {
    /// Items in the queue now, as far as the shared indices say.
    ///
    /// # Errors
    /// [`Corrupt`] if the indices contradict each other.
    #[inline]
    pub fn len(&self) -> Result<usize, Corrupt> {
        self.ring.indices().map(|(h, t)| h.wrapping_sub(t) as usize)
    }

    /// True if the shared indices say the queue is empty; a corrupt queue
    /// is not empty (there is something for its consumer to find out).
    #[inline]
    pub fn is_empty(&self) -> bool {
        matches!(self.len(), Ok(0))
    }
}

impl<'r, T: Pod, K: Kind> Consumer<'r, T, K> {
    /// An [`Observer`] of this queue.
    pub fn observer(&self) -> Observer<'r, T> {
        Observer { ring: self.ring }
    }
}

impl<T: Pod, K: Kind + MultiProducer> Clone for Producer<'_, T, K> {
    fn clone(&self) -> Self {
        Producer {
            ring: self.ring,
            side: self.side.clone(),
            kind: PhantomData,
        }
    }
}

impl<T: Pod, K: Kind + MultiConsumer> Clone for Consumer<'_, T, K> {
    fn clone(&self) -> Self {
        Consumer {
            ring: self.ring,
            side: self.side.clone(),
            kind: PhantomData,
        }
    }
}
