//! [`Reader`]: the read end's handle, `std::io::Read` and `BufRead` over
//! the ring.
//!
//! This room owns the read path of both ways of holding the end (see
//! `path.rs`), the switch between them at a clone, and a shared reader's
//! own buffer for `BufRead`; it must not touch the write end's words, and
//! never holds the end's lock while it waits.

use std::fmt;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use ferry_queue::wait::Wait;

use super::Shared;
use super::counted::Counted;
use super::path::{Alone, Path, TURN_BYTES, Turns};
#[cfg(not(ferry_loom))]
use super::remote::ends::RemoteReader;
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
///
/// A reader opened on a binding ([`connect`](super::connect),
/// [`Listener::accept`](super::Listener::accept)) reads a stream written
/// in another process; it behaves as a shared reader (its `fill_buf`
/// copies into its own buffer) and says what happened to that process as
/// the remote module's docs table.
pub struct Reader(End);

/// What a reader holds, fixed when it is made (a clone keeps it).
enum End {
    /// An end of a stream inside this process.
    Local(Local),
    /// The reading end of a connection to another process.
    #[cfg(not(ferry_loom))]
    Remote(RemoteReader),
}

/// A reader of a stream inside this process.
struct Local {
    s: Counted<Shared>,
    /// Whether this handle takes turns with others: as `Writer::turns`.
    turns: AtomicBool,
    /// A shared reader's buffer for `fill_buf` (empty for a lone reader).
    own: Vec<u8>,
    /// How much of `own` has been consumed.
    pos: usize,
}

impl Reader {
    /// The lone reader of a new stream.
    pub(super) fn new(s: Counted<Shared>) -> Reader {
        Reader(End::Local(Local {
            s,
            turns: AtomicBool::new(false),
            own: Vec::new(),
            pos: 0,
        }))
    }

    /// The reader of a new connection to another process.
    #[cfg(not(ferry_loom))]
    pub(super) fn remote(r: RemoteReader) -> Reader {
        Reader(End::Remote(r))
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
        match &mut self.0 {
            End::Local(l) => l.try_read(buf),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.read(buf, false),
        }
    }

    /// Every byte taken out of the stream so far, by any of its readers
    /// (read at some moment during the call); across processes, by the
    /// readers of this process.
    pub fn bytes_read(&self) -> u64 {
        match &self.0 {
            End::Local(l) => l.s.ring.taken(),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.bytes_read(),
        }
    }

    /// How many bytes the stream holds at most.
    pub fn capacity(&self) -> usize {
        match &self.0 {
            End::Local(l) => l.s.ring.capacity(),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.capacity(),
        }
    }

    /// Whether this handle reads on the shared path (it, or the handle it
    /// was cloned from, has been cloned).
    pub fn is_shared(&self) -> bool {
        match &self.0 {
            End::Local(l) => l.turns.load(Relaxed),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.is_shared(),
        }
    }
}

impl Local {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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

    /// Serves `buf` from this handle's own buffer, if it has bytes left.
    fn serve_own(&mut self, buf: &mut [u8]) -> Option<usize> {
        super::serve_from(&self.own, &mut self.pos, buf)
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
    let r = P::hold(
        &s.rlock,
        #[inline(always)]
        || unsafe { s.ring.take(buf) },
    );
    if let Take::Done(n) = r {
        take_done::<P>(s, n);
    }
    r
}

/// After `n` bytes came out on path `P`: counts them and wakes writers
/// (and, with several readers, another reader if bytes are left).
#[inline(always)]
fn take_done<P: Path>(s: &Shared, n: usize) {
    crate::thread::moved_stream_bytes(n);
    s.writable.notify_all();
    if P::SHARED && s.ring.has_bytes() {
        // One write wakes one reader; if it left bytes, another may be
        // asleep with them there.
        s.readable.notify_one();
    }
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
        // The fast path, small enough to inline into the caller's loop: a
        // lone reader that finds bytes before the end of the ring.
        // Everything else (and an empty `buf`) goes out of line.
        if let End::Local(l) = &self.0
            && !l.turns.load(Relaxed)
            && !buf.is_empty()
            // SAFETY: on `Alone` this handle is the stream's only reader
            // (as in `try_take`), reading through `&mut self`.
            && let Some(n) = unsafe { l.s.ring.take_seen(buf) }
        {
            take_done::<Alone>(&l.s, n);
            return Ok(n);
        }
        self.read_general(buf)
    }
}

impl Reader {
    /// `read` beyond its fast path: every kind of end and path, wrapping,
    /// end-of-file, blocking.
    #[inline(never)]
    fn read_general(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let l = match &mut self.0 {
            End::Local(l) => l,
            #[cfg(not(ferry_loom))]
            End::Remote(r) => return r.read(buf, true),
        };
        if l.turns.load(Relaxed) {
            if let Some(n) = l.serve_own(buf) {
                return Ok(n);
            }
            read_on::<Turns>(&l.s, buf)
        } else {
            read_on::<Alone>(&l.s, buf)
        }
    }
}

impl io::BufRead for Reader {
    /// The bytes there are (blocking while there are none); empty only at
    /// end-of-file. A lone reader inside one process gets the stream's
    /// bytes in place (up to the end of its array; the rest comes at the
    /// next call).
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match &mut self.0 {
            End::Local(l) => l.fill_buf(),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.fill_buf(),
        }
    }

    /// Marks `amt` bytes of the last `fill_buf` as read (more than it
    /// returned counts as all of it).
    fn consume(&mut self, amt: usize) {
        match &mut self.0 {
            End::Local(l) => l.consume(amt),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.consume(amt),
        }
    }
}

impl Local {
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
        let l = match &self.0 {
            End::Local(l) => l,
            #[cfg(not(ferry_loom))]
            End::Remote(r) => return Reader(End::Remote(r.clone())),
        };
        l.s.ring.add_reader();
        // As `Writer::clone`: no read of this handle runs now.
        l.turns.store(true, Relaxed);
        Reader(End::Local(Local {
            s: l.s.clone(),
            turns: AtomicBool::new(true),
            own: Vec::new(),
            pos: 0,
        }))
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if self.s.ring.drop_reader() {
            self.s.writable.notify_all();
        }
    }
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buffered = match &self.0 {
            End::Local(l) => l.own.len() - l.pos,
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.buffered(),
        };
        f.debug_struct("Reader")
            .field("remote", &!matches!(self.0, End::Local(_)))
            .field("capacity", &self.capacity())
            .field("bytes_read", &self.bytes_read())
            .field("shared", &self.is_shared())
            .field("buffered", &buffered)
            .finish()
    }
}
