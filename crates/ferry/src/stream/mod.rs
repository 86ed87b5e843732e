//! Streams: byte pipes between threads of one process, with the
//! `std::io::Read`/`Write`/`BufRead` face of a pipe, built at open for the
//! case at hand (Synthesis' streams, 002 §2.3, §5).
//!
//! [`pipe`] (or [`Builder`]) opens a stream and returns its [`Writer`] and
//! [`Reader`]. A full stream blocks a writer, an empty one a reader: the
//! ferry thread parks and its processor runs others; a plain kernel thread
//! blocks in the kernel; both kinds may share a stream. Semantics are a
//! Linux pipe's: a read returns what is there (0 only at end-of-file,
//! once every writer is gone and the bytes are drained), a write may be
//! partial, a write with every reader gone fails with
//! [`BrokenPipe`](std::io::ErrorKind::BrokenPipe), and
//! [`Writer::try_write`] / [`Reader::try_read`] give
//! [`WouldBlock`](std::io::ErrorKind::WouldBlock) where the blocking
//! forms would wait. [`pump()`] moves a stream (any `BufRead`) into a writer
//! until end-of-file; [`filter`] does the same through a function, to make
//! a stage of a pipeline of threads.
//!
//! [`listen`] / [`Listener::accept`] and [`connect`] open a stream between
//! two processes instead, duplex like a socket, with the same [`Writer`]
//! and [`Reader`] (see `remote/`): a handle's kind, in process or across
//! processes, is fixed when it is made.
//!
//! This room owns the stream's ring of bytes (`ring.rs`, `bytes.rs`), the
//! handles and their paths (`writer.rs`, `reader.rs`, `path.rs`), the
//! count of the handles and the shelf of closed streams kept for the next
//! open (`counted.rs`, `spares.rs`: opening a stream of a capacity up to
//! 256 KiB that was open and closed before allocates nothing), and the
//! pump and filter (`pump.rs`). It must not schedule (it waits and wakes
//! only through [`crate::sync::ParkWait`] and holds an end only under a
//! [`crate::sync::SpinLock`]), and, but for `remote/` (which uses rpc's
//! binding and watcher), it knows nothing of other processes (`rpc`); it
//! knows nothing of the scheduler (`sched`).
//!
//! ```
//! use std::io::{BufRead, BufReader, Read, Write};
//!
//! ferry::run(|| {
//!     let (mut w, r) = ferry::stream::pipe();
//!     let reader = ferry::spawn(move || {
//!         let lines: Vec<String> = BufReader::new(r).lines().map(Result::unwrap).collect();
//!         lines
//!     });
//!     writeln!(w, "one").unwrap();
//!     writeln!(w, "two").unwrap();
//!     drop(w); // end-of-file for the reader
//!     assert_eq!(reader.join().unwrap(), ["one", "two"]);
//! })
//! .unwrap();
//! ```
//!
//! # Specialised at open, switched at clone
//!
//! The bytes live in one ring per stream, Synthesis' SP-SC queue over
//! bytes (`ring.rs` tables its words): the holder of the write end alone
//! moves `head`, the holder of the read end alone moves `tail`. A write or
//! read of `n` bytes is one copy and one store of a position: the ring is
//! the limit case of 002 §5.4's buffered queue, every write packed into
//! the ring at byte granularity, so a one-byte write costs no more than
//! the position it publishes.
//!
//! Who holds an end is decided per handle, when the case changes, never
//! per byte. Each handle has a *path* word of its own (never shared with
//! another handle), read once per call to pick one of two monomorphised
//! paths (`path.rs`):
//!
//! | handle's path (`turns`) | set by | the handle's calls |
//! |----------------|--------|--------------------|
//! | `false`, `Alone` | `pipe` (both handles) | hold the end with no synchronisation: SP-SC, a one-byte write is a copy, a load and a store (plus the wakeup check) |
//! | `true`, `Turns` | `clone` of this handle (Relaxed), or a handle made by a clone | take the end's spinlock for one copy (at most 4 KiB), then drop it: MP-SC, SP-MC or MP-MC by which ends are shared |
//!
//! On `Alone`, `Write::write` and `Read::read` are split in two so that
//! the common call costs no call: an inline fast path (the bytes fit in
//! the room the end last saw, or are there to read, and do not wrap past
//! the end of the ring: `Ring::put_all_seen`, `Ring::take_seen`) small
//! enough to be inlined into the caller's loop, and everything else
//! (reloading the other end's position, wrapping, `Turns`, ends in other
//! processes, waiting) out of line.
//!
//! A handle leaves `Alone` only when it is cloned and never comes back.
//! The switch is safe with bytes in flight because it changes who holds
//! the end, not the ring: a handle on `Alone` is the only handle of its
//! side (every other was made by a clone, which moved its source and
//! itself to `Turns`), its calls take `&mut self` so none runs while it is
//! cloned (`&self`), and the new handle reaches another thread only
//! through a hand-over that orders the old handle's unlocked calls before
//! any call of the new one. Bytes already in the ring stay where they
//! are, in order; the next holder of the end goes on from the same
//! positions. `tests/loom_stream.rs` models the ring, the switch and the
//! ends' counts.
//!
//! # Several writers, several readers
//!
//! With several writers, the bytes of one `write` call stay together when
//! the call is at most [`ATOMIC_WRITE`] bytes (or the capacity, if that is
//! smaller), as `PIPE_BUF` is for a Linux pipe: such a write waits (without
//! holding the lock) until there is room for all of it. A longer write
//! moves at most 4 KiB per call, and its pieces may be interleaved with
//! other writers'. Bytes from one writer are read in the order it wrote
//! them; none is lost or doubled. With several readers, each byte goes to
//! exactly one of them.
//!
//! # Waiting, and threads that are terminated
//!
//! A writer waits on the stream's "writable" [`ParkWait`], a reader on
//! its "readable" one; a write that moved bytes notifies one reader, a read
//! that made room notifies every waiting writer (they may need different
//! amounts of room), and a shared reader that left bytes behind passes the
//! wakeup on. The last writer to go wakes every reader, the last reader
//! every writer. An end's lock is held only for a copy, never across a
//! wait, and a thread holding it is never preempted nor stopped there.
//! So a thread terminated ([`Thread::terminate`](crate::Thread::terminate))
//! while it waits on a stream leaves the wait, and a wakeup it had been
//! given goes to the next waiter: no other handle waits forever for it.
//! Its handles, like everything a terminated thread held, are never
//! dropped: the stream stays open on that side.
//!
//! The counters [`Writer::bytes_written`] and [`Reader::bytes_read`] are
//! the ring's positions: every byte that has gone in and come out. Each
//! read and write that moved bytes also counts them on the running ferry
//! thread, for the fine-grain scheduling policy (one relaxed load while no
//! runtime uses that policy; see `thread::stream_bytes`).

mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
}
mod bytes;
#[cfg(all(test, not(ferry_loom)))]
mod count_tests;
mod counted;
mod path;
mod pump;
mod reader;
// Across processes, over rpc's binding (which loom builds leave out).
#[cfg(not(ferry_loom))]
mod remote;
mod ring;
mod spares;
#[cfg(all(test, not(ferry_loom)))]
mod spares_tests;
mod writer;

use std::fmt;

pub use pump::{filter, pump};
pub use reader::Reader;
#[cfg(not(ferry_loom))]
pub use remote::{Listener, MAX_REMOTE_CAPACITY, connect, listen};
pub use writer::Writer;

use crate::sync::{ParkWait, SpinLock};
use counted::{Counted, Recycle, Spare};
use ring::Ring;

/// Bytes a stream holds unless [`Builder::capacity`] says otherwise (a
/// Linux pipe's default).
pub const DEFAULT_CAPACITY: usize = 64 * 1024;

/// The largest capacity a stream may have (1 GiB).
pub const MAX_CAPACITY: usize = 1 << 30;

/// With several writers, a write of at most this many bytes (or of at most
/// the stream's capacity, if smaller) goes into the stream whole, never
/// interleaved with another writer's (a Linux pipe's `PIPE_BUF`).
pub const ATOMIC_WRITE: usize = 4096;

/// What the handles of one stream share.
struct Shared {
    ring: Ring,
    /// Readers wait here; writes notify.
    readable: Padded<ParkWait>,
    /// Writers wait here; reads notify.
    writable: Padded<ParkWait>,
    /// Held by shared writers for one copy.
    wlock: Padded<SpinLock<()>>,
    /// Held by shared readers for one copy.
    rlock: Padded<SpinLock<()>>,
    /// The size of an atomic write: `min(ATOMIC_WRITE, capacity)`.
    atomic: usize,
}

impl Shared {
    /// What a new stream of `capacity` bytes (a power of two) shares.
    fn new(capacity: usize) -> Shared {
        Shared {
            ring: Ring::new(capacity),
            readable: Padded::default(),
            writable: Padded::default(),
            wlock: Padded::default(),
            rlock: Padded::default(),
            atomic: ATOMIC_WRITE.min(capacity),
        }
    }
}

impl Recycle for Shared {
    /// A closed stream goes on the shelf of spares (`spares.rs`), made as
    /// [`Shared::new`] makes it but for its bytes: no handle is left, so
    /// nobody waits, holds an end or reads the bytes (and its waits are
    /// as new: never waited on).
    fn recycle(mut spare: Spare<Shared>) {
        let s = spare.value_mut();
        s.ring.reset();
        s.readable.0.reset();
        s.writable.0.reset();
        debug_assert!(s.wlock.0.try_lock().is_some() && s.rlock.0.try_lock().is_some());
        spares::keep(spare);
    }
}

/// A value on cache lines of its own.
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Serves `buf` from `own[*pos..]`, if bytes are left there.
pub(super) fn serve_from(own: &[u8], pos: &mut usize, buf: &mut [u8]) -> Option<usize> {
    let left = &own[*pos..];
    if left.is_empty() {
        return None;
    }
    let n = left.len().min(buf.len());
    buf[..n].copy_from_slice(&left[..n]);
    *pos += n;
    Some(n)
}

/// Opens a stream of [`DEFAULT_CAPACITY`] bytes and returns its two ends.
///
/// ```
/// use std::io::{Read, Write};
///
/// let (mut w, mut r) = ferry::stream::pipe();
/// w.write_all(b"hello").unwrap();
/// let mut buf = [0; 8];
/// assert_eq!(r.read(&mut buf).unwrap(), 5);
/// assert_eq!(&buf[..5], b"hello");
/// ```
pub fn pipe() -> (Writer, Reader) {
    Builder::new().pipe()
}

/// Opens streams with a chosen capacity.
///
/// ```
/// let (w, r) = ferry::stream::Builder::new().capacity(1000).pipe();
/// assert_eq!(w.capacity(), 1024); // rounded up to a power of two
/// assert_eq!(r.capacity(), 1024);
/// assert!(ferry::stream::Builder::new().capacity(0).try_pipe().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    capacity: usize,
}

/// A capacity that [`Builder::try_pipe`] refuses: 0, or more than
/// [`MAX_CAPACITY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityError {
    /// The capacity asked for.
    pub requested: usize,
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a stream's capacity must be between 1 and {MAX_CAPACITY} bytes, not {}",
            self.requested
        )
    }
}

impl std::error::Error for CapacityError {}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// A builder for streams of [`DEFAULT_CAPACITY`] bytes.
    pub fn new() -> Builder {
        Builder {
            capacity: DEFAULT_CAPACITY,
        }
    }

    /// Streams of `bytes` bytes, rounded up to a power of two; must be in
    /// `1..=`[`MAX_CAPACITY`] (checked when the stream is opened).
    pub fn capacity(mut self, bytes: usize) -> Builder {
        self.capacity = bytes;
        self
    }

    /// Opens a stream and returns its two ends.
    ///
    /// # Errors
    /// [`CapacityError`] if the capacity is 0 or above [`MAX_CAPACITY`].
    pub fn try_pipe(&self) -> Result<(Writer, Reader), CapacityError> {
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(CapacityError {
                requested: self.capacity,
            });
        }
        let capacity = self.capacity.next_power_of_two();
        let shared = spares::take(capacity).unwrap_or_else(|| Counted::new(Shared::new(capacity)));
        Ok((Writer::new(shared.clone()), Reader::new(shared)))
    }

    /// Opens a stream and returns its two ends.
    ///
    /// # Panics
    /// If the capacity is 0 or above [`MAX_CAPACITY`] (see
    /// [`try_pipe`](Builder::try_pipe)).
    pub fn pipe(&self) -> (Writer, Reader) {
        match self.try_pipe() {
            Ok(ends) => ends,
            Err(e) => panic!("ferry::stream::Builder::pipe: {e}"),
        }
    }
}
