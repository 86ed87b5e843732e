//! The handles' paths across processes: [`RemoteWriter`] and
//! [`RemoteReader`], the ends that a [`Writer`](crate::stream::Writer) or
//! [`Reader`](crate::stream::Reader) opened on a binding holds.
//!
//! This room owns the write and read paths over the shared rings, generic
//! over the in-process paths' [`Path`] (a lone handle holds its end with
//! no lock, clones take turns under the end's lock), the mapping of ring
//! outcomes and of the peer's state to `io` results, and the waits; it
//! must not touch the rings' words itself (`ring.rs` does).
//!
//! | the peer | a read | a write |
//! |----------|--------|---------|
//! | wrote bytes | the bytes | (room) |
//! | dropped its last writer | the bytes left, then `Ok(0)` (end-of-file) | |
//! | dropped its last reader | | `BrokenPipe` |
//! | died (or hung up without closing) | the bytes left, then `ConnectionReset` | `BrokenPipe` |
//! | broke the protocol | `InvalidData`, for good, on every handle | the same |

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use super::conn::Conn;
use super::wait;
use super::{Put, Take};
use crate::stream::path::{Alone, Path, TURN_BYTES, Turns};

/// A writer's end on a cross-process connection.
pub(crate) struct RemoteWriter {
    c: Arc<Conn>,
    /// Whether this handle takes turns with others (as the in-process
    /// writer's).
    turns: AtomicBool,
}

/// A reader's end on a cross-process connection.
pub(crate) struct RemoteReader {
    c: Arc<Conn>,
    turns: AtomicBool,
    /// The handle's own buffer for `fill_buf` (the ring's bytes are the
    /// peer's to scribble on, so they are never lent out in place).
    own: Vec<u8>,
    /// How much of `own` has been consumed.
    pos: usize,
}

/// The two ends of a new connection, one handle each.
pub(super) fn ends(c: Arc<Conn>) -> (RemoteWriter, RemoteReader) {
    let w = RemoteWriter {
        c: c.clone(),
        turns: AtomicBool::new(false),
    };
    let r = RemoteReader {
        c,
        turns: AtomicBool::new(false),
        own: Vec::new(),
        pos: 0,
    };
    (w, r)
}

/// One try at writing `buf` (not empty) on path `P`: `Ok(None)` if full.
#[inline(always)]
fn try_put<P: Path>(c: &Conn, buf: &[u8]) -> io::Result<Option<usize>> {
    c.poisoned()?;
    if c.dead() {
        return Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            format!("stream {}: the peer process is gone", c.name()),
        ));
    }
    let (buf, need) = if P::SHARED {
        let buf = &buf[..buf.len().min(TURN_BYTES)];
        (buf, if buf.len() <= c.atomic { buf.len() } else { 1 })
    } else {
        (buf, 1)
    };
    // SAFETY: as the in-process writer's: on `Alone` this handle is the
    // side's only writer and writes through `&mut self`; on `Turns` every
    // writer holds the end under `wlock`.
    match P::hold(&c.wlock, || unsafe { c.out.put(buf, need) }) {
        Ok(Put::Done(n)) => {
            wait::ring(&c.out.words().rbell);
            Ok(Some(n))
        }
        Ok(Put::Full) => Ok(None),
        Ok(Put::Broken) => Err(io::ErrorKind::BrokenPipe.into()),
        Err(bad) => Err(c.broken(bad)),
    }
}

#[inline(always)]
fn write_on<P: Path>(c: &Conn, buf: &[u8]) -> io::Result<usize> {
    match try_put::<P>(c, buf)? {
        Some(n) => Ok(n),
        None => write_slow::<P>(c, buf),
    }
}

#[cold]
#[inline(never)]
fn write_slow<P: Path>(c: &Conn, buf: &[u8]) -> io::Result<usize> {
    wait::until(&c.out.words().wbell, || try_put::<P>(c, buf).transpose())
}

/// One try at reading into `buf` (not empty) on path `P`: `Ok(None)` if
/// there is nothing yet.
#[inline(always)]
fn try_take<P: Path>(c: &Conn, buf: &mut [u8]) -> io::Result<Option<usize>> {
    c.poisoned()?;
    let buf = if P::SHARED {
        let n = buf.len().min(TURN_BYTES);
        &mut buf[..n]
    } else {
        buf
    };
    // Dead before the look: whatever the peer published before it went
    // is there to read, so an empty ring now is empty for good.
    let dead = c.dead();
    // SAFETY: as in `try_put`, for the read end and `rlock`.
    match P::hold(&c.rlock, || unsafe { c.inn.take(buf) }) {
        Ok(Take::Done(n)) => {
            wait::ring(&c.inn.words().wbell);
            Ok(Some(n))
        }
        Ok(Take::Eof) => Ok(Some(0)),
        Ok(Take::Empty) if dead => Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!(
                "stream {}: the peer process is gone without closing the stream",
                c.name()
            ),
        )),
        Ok(Take::Empty) => Ok(None),
        Err(bad) => Err(c.broken(bad)),
    }
}

#[inline(always)]
fn read_on<P: Path>(c: &Conn, buf: &mut [u8]) -> io::Result<usize> {
    match try_take::<P>(c, buf)? {
        Some(n) => Ok(n),
        None => read_slow::<P>(c, buf),
    }
}

#[cold]
#[inline(never)]
fn read_slow<P: Path>(c: &Conn, buf: &mut [u8]) -> io::Result<usize> {
    wait::until(&c.inn.words().rbell, || try_take::<P>(c, buf).transpose())
}

impl RemoteWriter {
    /// Writes what fits of `buf` (not empty), without blocking if `block`
    /// is false (`WouldBlock` when full).
    #[inline]
    pub(crate) fn write(&mut self, buf: &[u8], block: bool) -> io::Result<usize> {
        let shared = self.turns.load(Relaxed);
        match (shared, block) {
            (false, true) => write_on::<Alone>(&self.c, buf),
            (true, true) => write_on::<Turns>(&self.c, buf),
            (false, false) => try_put::<Alone>(&self.c, buf)?.ok_or_else(would_block),
            (true, false) => try_put::<Turns>(&self.c, buf)?.ok_or_else(would_block),
        }
    }

    /// Every byte this process has written to the connection.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.c.out.written()
    }

    /// The capacity of the connection's rings.
    pub(crate) fn capacity(&self) -> usize {
        self.c.out.capacity()
    }

    /// Whether this handle writes on the shared path.
    pub(crate) fn is_shared(&self) -> bool {
        self.turns.load(Relaxed)
    }
}

impl RemoteReader {
    /// Reads the bytes there are into `buf` (not empty), without blocking
    /// if `block` is false (`WouldBlock` when there are none).
    #[inline]
    pub(crate) fn read(&mut self, buf: &mut [u8], block: bool) -> io::Result<usize> {
        if let Some(n) = self.serve_own(buf) {
            return Ok(n);
        }
        let shared = self.turns.load(Relaxed);
        match (shared, block) {
            (false, true) => read_on::<Alone>(&self.c, buf),
            (true, true) => read_on::<Turns>(&self.c, buf),
            (false, false) => try_take::<Alone>(&self.c, buf)?.ok_or_else(would_block),
            (true, false) => try_take::<Turns>(&self.c, buf)?.ok_or_else(would_block),
        }
    }

    /// `BufRead::fill_buf`: the handle's own buffer, refilled (blocking)
    /// from the ring when it is used up.
    pub(crate) fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.own.len() {
            self.own.resize(TURN_BYTES, 0);
            let mut own = std::mem::take(&mut self.own);
            let r = if self.turns.load(Relaxed) {
                read_on::<Turns>(&self.c, &mut own)
            } else {
                read_on::<Alone>(&self.c, &mut own)
            };
            own.truncate(*r.as_ref().unwrap_or(&0));
            self.own = own;
            self.pos = 0;
            r?;
        }
        Ok(&self.own[self.pos..])
    }

    /// `BufRead::consume`.
    pub(crate) fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.own.len());
    }

    fn serve_own(&mut self, buf: &mut [u8]) -> Option<usize> {
        crate::stream::serve_from(&self.own, &mut self.pos, buf)
    }

    /// Every byte this process has read from the connection.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.c.inn.taken()
    }

    /// The capacity of the connection's rings.
    pub(crate) fn capacity(&self) -> usize {
        self.c.inn.capacity()
    }

    /// Whether this handle reads on the shared path.
    pub(crate) fn is_shared(&self) -> bool {
        self.turns.load(Relaxed)
    }

    /// Bytes in the handle's own buffer, not yet consumed.
    pub(crate) fn buffered(&self) -> usize {
        self.own.len() - self.pos
    }
}

fn would_block() -> io::Error {
    io::ErrorKind::WouldBlock.into()
}

impl Clone for RemoteWriter {
    /// Another writer of the connection; both (and every later clone)
    /// take turns at the write end from now on.
    fn clone(&self) -> RemoteWriter {
        self.c.add_writer();
        self.turns.store(true, Relaxed);
        RemoteWriter {
            c: self.c.clone(),
            turns: AtomicBool::new(true),
        }
    }
}

impl Clone for RemoteReader {
    /// Another reader of the connection; bytes this handle has in its own
    /// buffer stay its own.
    fn clone(&self) -> RemoteReader {
        self.c.add_reader();
        self.turns.store(true, Relaxed);
        RemoteReader {
            c: self.c.clone(),
            turns: AtomicBool::new(true),
            own: Vec::new(),
            pos: 0,
        }
    }
}

impl Drop for RemoteWriter {
    fn drop(&mut self) {
        self.c.drop_writer();
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        self.c.drop_reader();
    }
}

impl fmt::Debug for RemoteWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteWriter")
            .field("name", &self.c.name())
            .finish()
    }
}
