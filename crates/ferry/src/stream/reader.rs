//! [`Reader`]: the read end's handle, `std::io::Read` and `BufRead` over
//! the ring.
//!
//! This room owns the read path of both ways of holding the end (see
//! `path.rs`), the switch between them at a clone, and a shared reader's
//! own buffer for `BufRead`; it must not touch the write end's words, and
//! never holds the end's lock while it waits.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use ferry_queue::wait::Wait;

use super::Shared;
use super::path::{Alone, Path, TURN_BYTES, Turns};
use super::ring::Take;

/// The reading end of a stream ([`pipe`](super::pipe)): `std::io::Read`,
/// `std::io::BufRead`, `Clone` and `Send`.
///
/// A read returns the bytes there are, up to the buffer's length, and
/// blocks the calling ferry thread (not its processor; a plain kernel
/// thread blocks in the kernel) while there are none. It returns 0 only
/// at end-of-file: once every [`Writer`](super::Writer) is gone and every
/// byte has been read. Dropping the last `Reader` makes writes fail with
/// [`BrokenPipe`](io::ErrorKind::BrokenPipe).
///
/// The lone reader reads with no synchronisation but the ring's two
/// stores, and its `fill_buf` hands out the stream's own bytes, in place.
/// Cloning it switches the stream's readers to taking turns under a lock;
/// each byte goes to exactly one of them. A shared reader's `fill_buf`
/// takes up to 4 KiB out of the stream into the handle's own buffer:
/// bytes taken there and not consumed are lost with the handle, as with
/// `std::io::BufReader`.
pub struct Reader {
    s: Arc<Shared>,
    /// Whether this handle takes turns with others: as `Writer::turns`.
    turns: AtomicBool,
    /// A shared reader's buffer for `fill_buf` (empty for a lone reader).
    own: Vec<u8>,
    /// How much of `own` has been consumed.
    pos: usize,
}

impl Reader {
    /// The lone reader of a new stream.
    pub(super) fn new(s: Arc<Shared>) -> Reader {
        Reader {
            s,
            turns: AtomicBool::new(false),
            own: Vec::new(),
            pos: 0,
        }
    }

    /// Reads the bytes there are, up to `buf.len()`, without blocking.
    /// `Ok(0)` at end-of-file (or for an empty `buf`).
    ///
    /// # Errors
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) when there is nothing to
    /// read right now and some writer is still there.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let r = if self.turns.load(Relaxed) {
            if let Some(n) = self.serve_own(buf) {
                return Ok(n);
            }
            try_take::<Turns>(&self.s, buf)
        } else {
            try_take::<Alone>(&self.s, buf)
        };
        match r {
            Take::Done(n) => Ok(n),
            Take::Eof => Ok(0),
            Take::Empty => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Every byte taken out of the stream so far, by any of its readers
    /// (read at some moment during the call).
    pub fn bytes_read(&self) -> u64 {
        self.s.ring.taken()
    }

    /// How many bytes the stream holds at most.
    pub fn capacity(&self) -> usize {
        self.s.ring.capacity()
    }

    /// Whether this handle reads on the shared path (it, or the handle it
    /// was cloned from, has been cloned).
    pub fn is_shared(&self) -> bool {
        self.turns.load(Relaxed)
    }

    /// Serves `buf` from this handle's own buffer, if it has bytes left.
    fn serve_own(&mut self, buf: &mut [u8]) -> Option<usize> {
        let left = &self.own[self.pos..];
        if left.is_empty() {
            return None;
        }
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.pos += n;
        Some(n)
    }
}

/// One try at reading into `buf` (not empty) on path `P`; wakes the
/// writers if room was made, and on a shared read end passes the wakeup
/// on to another reader if bytes are left.
#[inline(always)]
fn try_take<P: Path>(s: &Shared, buf: &mut [u8]) -> Take {
    let buf = if P::SHARED {
        let n = buf.len().min(TURN_BYTES);
        &mut buf[..n]
    } else {
        buf
    };
    // SAFETY: as in `writer::try_put`, for the read end: a reader on
    // `Alone` is the only reader and reads through `&mut self`; readers on
    // `Turns` hold the end under `rlock`.
    let r = P::hold(&s.rlock, || unsafe { s.ring.take(buf) });
    if let Take::Done(n) = r {
        crate::thread::moved_stream_bytes(n);
        s.writable.notify_all();
        if P::SHARED && s.ring.has_bytes() {
            // One write wakes one reader; if it left bytes, another may
            // be asleep with them there.
            s.readable.notify_one();
        }
    }
    r
}

/// Reads into `buf` (not empty) on path `P`, waiting while there is
/// nothing to read.
#[inline(always)]
fn read_on<P: Path>(s: &Shared, buf: &mut [u8]) -> io::Result<usize> {
    match try_take::<P>(s, buf) {
        Take::Done(n) => Ok(n),
        Take::Eof => Ok(0),
        Take::Empty => Ok(read_slow::<P>(s, buf)),
    }
}

#[cold]
#[inline(never)]
fn read_slow<P: Path>(s: &Shared, buf: &mut [u8]) -> usize {
    s.readable.wait_until(|| match try_take::<P>(s, buf) {
        Take::Done(n) => Some(n),
        Take::Eof => Some(0),
        Take::Empty => None,
    })
}

impl io::Read for Reader {
    /// Reads the bytes there are, up to `buf.len()`, blocking while there
    /// are none; 0 only at end-of-file (or for an empty `buf`).
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.turns.load(Relaxed) {
            if let Some(n) = self.serve_own(buf) {
                return Ok(n);
            }
            read_on::<Turns>(&self.s, buf)
        } else {
            read_on::<Alone>(&self.s, buf)
        }
    }
}

impl io::BufRead for Reader {
    /// The bytes there are (blocking while there are none); empty only at
    /// end-of-file. A lone reader gets the stream's bytes in place (up to
    /// the end of its array; the rest comes at the next call).
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.turns.load(Relaxed) {
            if self.pos == self.own.len() {
                self.own.resize(TURN_BYTES, 0);
                let n = read_on::<Turns>(&self.s, &mut self.own)?;
                self.own.truncate(n);
                self.pos = 0;
            }
            return Ok(&self.own[self.pos..]);
        }
        let s = &*self.s;
        // SAFETY: this reader is alone (as in `try_take`).
        let ready = || match unsafe { s.ring.available(1) } {
            Ok(a) => Some(Some(a)),
            Err(Take::Eof) => Some(None),
            Err(_) => None,
        };
        let found = match ready() {
            Some(found) => found,
            None => s.readable.wait_until(ready),
        };
        Ok(match found {
            // SAFETY: `available` showed `n` written bytes from `tail`,
            // which the writer leaves alone until this reader moves `tail`
            // (in `consume`, through `&mut self`, so after the slice is
            // gone).
            Some((tail, n)) => unsafe { s.ring.bytes().slice(tail, n) },
            None => &[],
        })
    }

    /// Marks `amt` bytes of the last `fill_buf` as read (more than it
    /// returned counts as all of it).
    fn consume(&mut self, amt: usize) {
        if self.turns.load(Relaxed) {
            self.pos = (self.pos + amt).min(self.own.len());
            return;
        }
        if amt == 0 {
            return;
        }
        let s = &*self.s;
        // SAFETY: this reader is alone (as in `try_take`), and `seen` is
        // what `available` last showed it.
        unsafe {
            let n = amt.min(s.ring.seen());
            s.ring.consume(n);
            crate::thread::moved_stream_bytes(n);
        }
        s.writable.notify_all();
    }
}

impl Clone for Reader {
    /// Another reader of the same stream. From now on this handle and the
    /// new one (and every later clone) take turns at the read end; bytes
    /// this handle has in its own buffer stay its own.
    fn clone(&self) -> Reader {
        self.s.ring.add_reader();
        // As `Writer::clone`: no read of this handle runs now.
        self.turns.store(true, Relaxed);
        Reader {
            s: Arc::clone(&self.s),
            turns: AtomicBool::new(true),
            own: Vec::new(),
            pos: 0,
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if self.s.ring.drop_reader() {
            self.s.writable.notify_all();
        }
    }
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("capacity", &self.capacity())
            .field("bytes_read", &self.bytes_read())
            .field("shared", &self.is_shared())
            .field("buffered", &(self.own.len() - self.pos))
            .finish()
    }
}
