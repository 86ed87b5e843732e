//! The shared ring: one direction of a cross-process stream, a byte ring
//! in the memfd whose other side is another process. [`Out`] is this
//! process's writing side of a ring, [`In`] its reading side.
//!
//! This room owns the moves of the positions and the checks of every
//! value the peer could have written; it must not wait or wake (`wait.rs`
//! does, through the bells) nor decide who holds an end (the handles do,
//! `ends.rs`). Every operation that moves a position is `unsafe`: its
//! caller holds that end.
//!
//! # Protocol
//!
//! As the in-process ring (`../ring.rs`, Synthesis' SP-SC queue over
//! bytes): positions are unbounded byte counts (`u64`, wrapping), the
//! writing side alone stores `head`, the reading side alone stores
//! `tail`, each as the last store of its operation. What is new is that
//! the peer is not trusted: each side keeps its own position in its own
//! memory and only ever stores it to the shared word (a peer that
//! overwrites it changes nothing here), and every position loaded from
//! the peer is checked against what this side knows before it is used:
//!
//! | word | stored by | states | a value that does not check out |
//! |------|-----------|--------|--------------------------|
//! | `head` | the writing side, Release, after copying its bytes in | moves forward only; `head - tail` in `0..=capacity` | behind the last `head` seen, or more than a capacity past `tail`: [`Bad`] |
//! | `tail` | the reading side, Release, after copying bytes out | moves forward only; between the last `tail` seen and `head` | outside that range: [`Bad`] |
//! | `wclosed` | the writing side, Release, once every writer is gone (after its last `head`) | 0 open, nonzero closed | (any nonzero is closed; bytes after it are read as bytes) |
//! | `rclosed` | the reading side, Release, once every reader is gone | 0 open, nonzero closed | (any nonzero is closed) |
//! | `rbell`, `wbell` (a flag and a count each) | see `wait.rs` | flag `AWAKE` / `ASLEEP`; count bumped by each ring | (a scribble costs a wakeup, never a lost one: waits are bounded) |
//!
//! A checked position bounds every copy to the ring's bytes: no value in
//! the memory can make this side touch memory outside it.

use std::fmt;

use super::atomic::Ordering::{Acquire, Relaxed, Release};
use super::atomic::{AtomicU32, AtomicU64};
use super::{Bytes, Put, Take};

/// The words of one ring, in the shared memory.
#[derive(Clone, Copy)]
pub(crate) struct RingWords<'r> {
    /// Every byte the writing side has written (it stores; the reader loads).
    pub head: &'r AtomicU64,
    /// Nonzero once every writer of the writing side is gone.
    pub wclosed: &'r AtomicU64,
    /// Every byte the reading side has taken.
    pub tail: &'r AtomicU64,
    /// Nonzero once every reader of the reading side is gone.
    pub rclosed: &'r AtomicU64,
    /// The reading side sleeps here; the writing side rings it.
    pub rbell: Bell<'r>,
    /// The writing side sleeps here; the reading side rings it.
    pub wbell: Bell<'r>,
}

/// A bell in the shared memory (see `wait.rs`): whether a side may sleep,
/// and the futex word it sleeps on.
#[derive(Clone, Copy)]
pub(crate) struct Bell<'r> {
    /// `AWAKE`, or `ASLEEP` while a handle of the side may sleep.
    pub flag: &'r AtomicU32,
    /// Bumped by every ring; the sleepers' futex word.
    pub seq: &'r AtomicU32,
}

/// A position loaded from the peer that breaks the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// The peer's `head` moved back (from `seen` to `head`).
    HeadBack { seen: u64, head: u64 },
    /// The peer's `head` is more than a capacity past this side's `tail`.
    HeadAhead { head: u64, tail: u64, capacity: u64 },
    /// The peer's `tail` is not between the last one seen and this
    /// side's `head`.
    TailOut { tail: u64, seen: u64, head: u64 },
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Bad::HeadBack { seen, head } => write!(
                f,
                "the peer's write position moved back from {seen} to {head}"
            ),
            Bad::HeadAhead {
                head,
                tail,
                capacity,
            } => write!(
                f,
                "the peer's write position {head} is {} bytes past the read position {tail}, more than the capacity {capacity}",
                head.wrapping_sub(tail)
            ),
            Bad::TailOut { tail, seen, head } => write!(
                f,
                "the peer's read position {tail} is not between {seen} and the write position {head}"
            ),
        }
    }
}

/// This process's writing side of a ring.
pub(crate) struct Out<'r> {
    w: RingWords<'r>,
    bytes: Bytes,
    /// Our `head`, in our own memory (the shared copy is only stored).
    head: AtomicU64,
    /// The peer's `tail` as last checked.
    tail_seen: AtomicU64,
}

/// This process's reading side of a ring.
pub(crate) struct In<'r> {
    w: RingWords<'r>,
    bytes: Bytes,
    /// Our `tail`, in our own memory.
    tail: AtomicU64,
    /// The peer's `head` as last checked.
    head_seen: AtomicU64,
}

impl<'r> Out<'r> {
    /// The writing side of the ring of `words` over `bytes`, positions 0.
    pub(crate) fn new(w: RingWords<'r>, bytes: Bytes) -> Out<'r> {
        Out {
            w,
            bytes,
            head: AtomicU64::new(0),
            tail_seen: AtomicU64::new(0),
        }
    }

    /// The ring's words.
    pub(crate) fn words(&self) -> &RingWords<'r> {
        &self.w
    }

    /// How many bytes the ring holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Every byte this side has written.
    pub(crate) fn written(&self) -> u64 {
        self.head.load(Relaxed)
    }

    /// Whether the peer's readers are all gone.
    pub(crate) fn peer_closed(&self) -> bool {
        self.w.rclosed.load(Acquire) != 0
    }

    /// Tells the peer that every writer of this side is gone (after the
    /// last `head`).
    pub(crate) fn close(&self) {
        self.w.wclosed.store(1, Release);
    }

    /// Writes as much of `src` as fits, if at least `need` bytes fit
    /// (`1 <= need <= src.len()`, `need <= capacity`).
    ///
    /// # Errors
    /// [`Bad`] if the peer's `tail` does not check out.
    ///
    /// # Safety
    /// The caller holds the write end.
    #[inline(always)]
    pub(crate) unsafe fn put(&self, src: &[u8], need: usize) -> Result<Put, Bad> {
        if self.peer_closed() {
            return Ok(Put::Broken);
        }
        let cap = self.capacity() as u64;
        let head = self.head.load(Relaxed);
        let mut tail = self.tail_seen.load(Relaxed);
        if cap - head.wrapping_sub(tail) < src.len() as u64 {
            // Acquire: the peer copied out of the positions below `tail`
            // before storing it.
            let t = self.w.tail.load(Acquire);
            if t.wrapping_sub(tail) > head.wrapping_sub(tail) {
                return Err(Bad::TailOut {
                    tail: t,
                    seen: tail,
                    head,
                });
            }
            tail = t;
            self.tail_seen.store(t, Relaxed);
        }
        let room = cap - head.wrapping_sub(tail);
        if room < need as u64 {
            return Ok(Put::Full);
        }
        let n = (room as usize).min(src.len());
        // SAFETY: `n <= room <= capacity`; positions `head..head + n` are
        // free by the checked `tail`, and in this process only the write
        // end's holder (us, the contract) touches them.
        unsafe { self.bytes.write(head, &src[..n]) };
        let head = head.wrapping_add(n as u64);
        self.head.store(head, Relaxed);
        self.w.head.store(head, Release);
        Ok(Put::Done(n))
    }
}

impl<'r> In<'r> {
    /// The reading side of the ring of `words` over `bytes`, positions 0.
    pub(crate) fn new(w: RingWords<'r>, bytes: Bytes) -> In<'r> {
        In {
            w,
            bytes,
            tail: AtomicU64::new(0),
            head_seen: AtomicU64::new(0),
        }
    }

    /// The ring's words.
    pub(crate) fn words(&self) -> &RingWords<'r> {
        &self.w
    }

    /// How many bytes the ring holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Every byte this side has taken.
    pub(crate) fn taken(&self) -> u64 {
        self.tail.load(Relaxed)
    }

    /// Tells the peer that every reader of this side is gone.
    pub(crate) fn close(&self) {
        self.w.rclosed.store(1, Release);
    }

    /// Loads the peer's `head` and checks it against our `tail` and the
    /// last one seen.
    fn load_head(&self, tail: u64) -> Result<u64, Bad> {
        let cap = self.capacity() as u64;
        let seen = self.head_seen.load(Relaxed);
        // Acquire: the peer copied the bytes below `head` in first.
        let head = self.w.head.load(Acquire);
        if head.wrapping_sub(seen) > cap {
            return Err(Bad::HeadBack { seen, head });
        }
        if head.wrapping_sub(tail) > cap {
            return Err(Bad::HeadAhead {
                head,
                tail,
                capacity: cap,
            });
        }
        self.head_seen.store(head, Relaxed);
        Ok(head)
    }

    /// Copies up to `dst.len()` (at least 1) readable bytes into `dst`.
    ///
    /// # Errors
    /// [`Bad`] if the peer's `head` does not check out.
    ///
    /// # Safety
    /// The caller holds the read end.
    #[inline(always)]
    pub(crate) unsafe fn take(&self, dst: &mut [u8]) -> Result<Take, Bad> {
        debug_assert!(!dst.is_empty());
        let tail = self.tail.load(Relaxed);
        let mut avail = self.head_seen.load(Relaxed).wrapping_sub(tail);
        if avail < dst.len() as u64 {
            avail = self.load_head(tail)?.wrapping_sub(tail);
            if avail == 0 {
                if self.w.wclosed.load(Acquire) == 0 {
                    return Ok(Take::Empty);
                }
                // The writers may have written just before they went.
                avail = self.load_head(tail)?.wrapping_sub(tail);
                if avail == 0 {
                    return Ok(Take::Eof);
                }
            }
        }
        let n = (avail as usize).min(dst.len());
        // SAFETY: `n <= avail <= capacity` (checked in `load_head`); the
        // positions were published by the checked `head`, and in this
        // process only the read end's holder (us) touches them.
        unsafe { self.bytes.read(tail, &mut dst[..n]) };
        let tail = tail.wrapping_add(n as u64);
        self.tail.store(tail, Relaxed);
        self.w.tail.store(tail, Release);
        Ok(Take::Done(n))
    }
}
