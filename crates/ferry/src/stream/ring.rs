//! The ring: how bytes go from a stream's write end to its read end, and
//! how each end learns that the other has gone.
//!
//! This room owns the ring's positions, the two ends' cached copies of
//! each other's position and the counts of live handles; it must not wait
//! or wake (the handles do, through `ParkWait`), nor decide who holds an
//! end (a lone handle holds its end; several hold it in turn under the
//! end's lock, `handle.rs`). Every operation that moves a position is
//! `unsafe`: its caller holds that end.
//!
//! # Protocol
//!
//! Positions are unbounded byte counts (`u64`, wrapping): `head` is every
//! byte ever written, `tail` every byte ever taken, and `head - tail` the
//! bytes in the ring, always in `0..=capacity`. This is Synthesis' SP-SC
//! queue (002 Figure 1) over bytes: the holder of the write end alone
//! stores `head`, the holder of the read end alone stores `tail`, each
//! with the last store of its operation, so neither sees half of the
//! other's. Each end keeps a private copy of the other's position and
//! reloads it only when the copy says the ring is too full (or too empty)
//! for the call: in the steady state a write touches its bytes and `head`.
//!
//! | word | written by | when | orderings |
//! |------|------------|------|-----------|
//! | `head` | the holder of the write end | after copying bytes into positions `head..head + n` | store Release / the reader loads Acquire: the bytes are there before their position is |
//! | `tail` | the holder of the read end | after copying bytes out of positions `tail..tail + n` (or after the program read them in place, `consume`) | store Release / the writer loads Acquire: the bytes were read before they are overwritten |
//! | `writers` | `Writer` handles: `+1` on clone (Relaxed), `-1` on drop (AcqRel) | | live writers; `0` = no byte will ever be written again (read Acquire, then `head` once more: the last writer may have written just before it went) |
//! | `readers` | `Reader` handles: as `writers` | | live readers; `0` = a write fails with `BrokenPipe` |
//!
//! The cached copies (`tail_seen` of the write end, `head_seen` of the
//! read end) are plain cells that only the holder of their end touches;
//! when the end changes hands under its lock, the lock orders them.

use std::cell::Cell;

use super::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use super::atomic::{AtomicU64, AtomicUsize};
use super::bytes::Bytes;

/// The write end's words, on a cache line of their own.
#[repr(align(128))]
struct WriteEnd {
    head: AtomicU64,
    tail_seen: Cell<u64>,
}

/// The read end's words, on a cache line of their own.
#[repr(align(128))]
struct ReadEnd {
    tail: AtomicU64,
    head_seen: Cell<u64>,
}

/// The handle counts, read by both ends, written only on clone and drop.
#[repr(align(128))]
struct Ends {
    writers: AtomicUsize,
    readers: AtomicUsize,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Put {
    /// This many bytes went in (at least the `need` asked for).
    Done(usize),
    /// Less room than `need` right now.
    Full,
    /// Every reader is gone.
    Broken,
}

/// What a read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    /// This many bytes (at least one) came out.
    Done(usize),
    /// Nothing to read right now.
    Empty,
    /// Nothing to read, ever again: every writer is gone.
    Eof,
}

/// One stream's ring of bytes, with its ends' words.
pub(super) struct Ring {
    w: WriteEnd,
    r: ReadEnd,
    ends: Ends,
    bytes: Bytes,
}

// SAFETY: the `Cell`s are touched only by the holder of their end (the
// `unsafe` methods' contract), one thread at a time, and handed from one
// holder to the next through the end's lock, which orders the accesses;
// the bytes are shared under the protocol above.
unsafe impl Sync for Ring {}

impl Ring {
    /// A ring of `capacity` bytes (a power of two) with one writer and one
    /// reader.
    pub(super) fn new(capacity: usize) -> Ring {
        Ring {
            w: WriteEnd {
                head: AtomicU64::new(0),
                tail_seen: Cell::new(0),
            },
            r: ReadEnd {
                tail: AtomicU64::new(0),
                head_seen: Cell::new(0),
            },
            ends: Ends {
                writers: AtomicUsize::new(1),
                readers: AtomicUsize::new(1),
            },
            bytes: Bytes::new(capacity),
        }
    }

    /// Makes the ring as [`new`](Ring::new) made it, keeping its bytes
    /// (never read again before they are written: the positions start
    /// over).
    pub(super) fn reset(&mut self) {
        self.w.head.store(0, Relaxed);
        self.w.tail_seen.set(0);
        self.r.tail.store(0, Relaxed);
        self.r.head_seen.set(0);
        self.ends.writers.store(1, Relaxed);
        self.ends.readers.store(1, Relaxed);
    }

    /// How many bytes the ring holds at most.
    #[inline(always)]
    pub(super) fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes themselves (for reading them in place).
    #[inline(always)]
    pub(super) fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Every byte written so far (at some moment during the call).
    pub(super) fn written(&self) -> u64 {
        self.w.head.load(Relaxed)
    }

    /// Every byte taken out so far (at some moment during the call).
    pub(super) fn taken(&self) -> u64 {
        self.r.tail.load(Relaxed)
    }

    /// Writes as much of `src` as fits, if at least `need` bytes fit
    /// (`1 <= need <= src.len()`, `need <= capacity`).
    ///
    /// # Safety
    /// The caller holds the write end.
    #[inline(always)]
    pub(super) unsafe fn put(&self, src: &[u8], need: usize) -> Put {
        debug_assert!(need >= 1 && need <= src.len() && need <= self.capacity());
        if self.ends.readers.load(Acquire) == 0 {
            return Put::Broken;
        }
        let cap = self.capacity() as u64;
        let head = self.w.head.load(Relaxed);
        let mut room = cap - head.wrapping_sub(self.w.tail_seen.get());
        if room < src.len() as u64 {
            // Acquire: the reader copied out of the positions below `tail`
            // before storing it, so they may be overwritten.
            let tail = self.r.tail.load(Acquire);
            self.w.tail_seen.set(tail);
            room = cap - head.wrapping_sub(tail);
        }
        if room < need as u64 {
            return Put::Full;
        }
        let n = (room as usize).min(src.len());
        // SAFETY: positions `head..head + n` are free (`head + n - tail <=
        // capacity`, and the reader is done with everything below `tail`),
        // and only the write end's holder (us, the contract) writes them
        // until `head` moves past them below.
        unsafe { self.bytes.write(head, &src[..n]) };
        self.w.head.store(head.wrapping_add(n as u64), Release);
        Put::Done(n)
    }

    /// A lone writer's inline try ([`Writer`](super::Writer)'s fast
    /// path): all of `src` (not empty) if it fits in the room the write
    /// end last saw, before the end of the array, while a reader is left.
    /// False changes nothing and leaves the call to [`put`](Ring::put),
    /// which reloads `tail`, wraps, and answers `Full` or `Broken`.
    ///
    /// # Safety
    /// The caller holds the write end.
    #[inline(always)]
    pub(super) unsafe fn put_all_seen(&self, src: &[u8]) -> bool {
        let head = self.w.head.load(Relaxed);
        let room = self.capacity() as u64 - head.wrapping_sub(self.w.tail_seen.get());
        if room < src.len() as u64 || self.ends.readers.load(Acquire) == 0 {
            return false;
        }
        // SAFETY: as in `put`: positions `head..head + src.len()` are free
        // and ours until `head` moves past them.
        if !unsafe { self.bytes.write_unwrapped(head, src) } {
            return false;
        }
        self.w
            .head
            .store(head.wrapping_add(src.len() as u64), Release);
        true
    }

    /// A lone reader's inline try ([`Reader`](super::Reader)'s fast path):
    /// up to `dst.len()` (at least 1) bytes if some are readable and those
    /// taken lie before the end of the array. `None` changes nothing but
    /// the cached copy of `head`, and leaves the call to
    /// [`take`](Ring::take), which wraps and answers `Empty` or `Eof`.
    ///
    /// # Safety
    /// The caller holds the read end.
    #[inline(always)]
    pub(super) unsafe fn take_seen(&self, dst: &mut [u8]) -> Option<usize> {
        // Not `available`: its end-of-file check, inlined here, took the
        // one-byte write+read of `ferry-bench streams` from 8 ns to 11-12.
        let tail = self.r.tail.load(Relaxed);
        let mut avail = self.r.head_seen.get().wrapping_sub(tail);
        if avail < dst.len() as u64 {
            // Acquire: as in `available`.
            let head = self.w.head.load(Acquire);
            self.r.head_seen.set(head);
            avail = head.wrapping_sub(tail);
        }
        let n = (avail as usize).min(dst.len());
        // SAFETY: as in `take`: positions `tail..tail + n` were written and
        // published, and the writer leaves them alone until `tail` moves.
        if n == 0 || !unsafe { self.bytes.read_unwrapped(tail, &mut dst[..n]) } {
            return None;
        }
        self.r.tail.store(tail.wrapping_add(n as u64), Release);
        Some(n)
    }

    /// Where the readable bytes start and how many there are, reloading
    /// `head` if the cached copy shows fewer than `want`; `Empty` or `Eof`
    /// if there are none.
    ///
    /// # Safety
    /// The caller holds the read end.
    #[inline(always)]
    pub(super) unsafe fn available(&self, want: usize) -> Result<(u64, usize), Take> {
        let tail = self.r.tail.load(Relaxed);
        let mut avail = self.r.head_seen.get().wrapping_sub(tail);
        if avail < want as u64 {
            // Acquire: the writer copied the bytes below `head` in before
            // storing it.
            let head = self.w.head.load(Acquire);
            self.r.head_seen.set(head);
            avail = head.wrapping_sub(tail);
            if avail == 0 {
                if self.ends.writers.load(Acquire) != 0 {
                    return Err(Take::Empty);
                }
                // The last writer may have written just before it went
                // (its drop's Release orders that write before our load).
                let head = self.w.head.load(Acquire);
                self.r.head_seen.set(head);
                avail = head.wrapping_sub(tail);
                if avail == 0 {
                    return Err(Take::Eof);
                }
            }
        }
        Ok((tail, avail as usize))
    }

    /// Copies up to `dst.len()` (at least 1) readable bytes into `dst`.
    ///
    /// # Safety
    /// The caller holds the read end.
    #[inline(always)]
    pub(super) unsafe fn take(&self, dst: &mut [u8]) -> Take {
        debug_assert!(!dst.is_empty());
        // SAFETY: forwarded (we hold the read end).
        let (tail, avail) = match unsafe { self.available(dst.len()) } {
            Ok(a) => a,
            Err(t) => return t,
        };
        let n = avail.min(dst.len());
        // SAFETY: positions `tail..tail + n` were written and published by
        // `head` (loaded Acquire, now or earlier by this end), and the
        // writer does not touch them until `tail` moves past them below.
        unsafe { self.bytes.read(tail, &mut dst[..n]) };
        self.r.tail.store(tail.wrapping_add(n as u64), Release);
        Take::Done(n)
    }

    /// Frees the first `n` readable bytes, which the caller read in place.
    ///
    /// # Safety
    /// The caller holds the read end, and `available` showed at least `n`
    /// bytes since it last moved `tail`.
    #[inline(always)]
    pub(super) unsafe fn consume(&self, n: usize) {
        let tail = self.r.tail.load(Relaxed);
        debug_assert!(n as u64 <= self.r.head_seen.get().wrapping_sub(tail));
        self.r.tail.store(tail.wrapping_add(n as u64), Release);
    }

    /// The readable bytes as the read end last saw them (its cached copy
    /// of `head`).
    ///
    /// # Safety
    /// The caller holds the read end.
    #[inline(always)]
    pub(super) unsafe fn seen(&self) -> usize {
        let tail = self.r.tail.load(Relaxed);
        self.r.head_seen.get().wrapping_sub(tail) as usize
    }

    /// Whether bytes are left to read (at some moment during the call).
    pub(super) fn has_bytes(&self) -> bool {
        let tail = self.r.tail.load(Acquire);
        self.w.head.load(Acquire) != tail
    }

    /// Counts one more writer (a clone of a live one).
    pub(super) fn add_writer(&self) {
        self.ends.writers.fetch_add(1, Relaxed);
    }

    /// Counts one more reader (a clone of a live one).
    pub(super) fn add_reader(&self) {
        self.ends.readers.fetch_add(1, Relaxed);
    }

    /// Counts a writer gone; true if it was the last.
    pub(super) fn drop_writer(&self) -> bool {
        self.ends.writers.fetch_sub(1, AcqRel) == 1
    }

    /// Counts a reader gone; true if it was the last.
    pub(super) fn drop_reader(&self) -> bool {
        self.ends.readers.fetch_sub(1, AcqRel) == 1
    }
}
