//! [`Writer`]: the write end's handle, `std::io::Write` over the ring.
//!
//! This room owns the write path of both ways of holding the end (see
//! `path.rs`) and the switch between them at a clone; it must not touch
//! the read end's words, and never holds the end's lock while it waits.

use std::fmt;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use ferry_queue::wait::Wait;

use super::Shared;
use super::counted::Counted;
use super::path::{Alone, Path, TURN_BYTES, Turns};
#[cfg(not(ferry_loom))]
use super::remote::ends::RemoteWriter;
use super::ring::Put;

/// The writing end of a stream ([`pipe`](super::pipe)): `std::io::Write`,
/// `Clone` and `Send`.
///
/// A write copies as many bytes as there is room for (at least one) and
/// returns how many; when the stream is full it blocks the calling ferry
/// thread (not its processor; a plain kernel thread blocks in the kernel)
/// until a reader makes room. Once every [`Reader`](super::Reader) is
/// gone, a write fails with [`BrokenPipe`](io::ErrorKind::BrokenPipe).
/// Dropping the last `Writer` ends the stream: readers get the bytes left
/// and then end-of-file.
///
/// The lone writer of a stream writes with no synchronisation but the
/// ring's two stores; cloning it switches the stream's writers (this
/// handle and every clone) to taking turns under a lock, where a write of
/// up to [`ATOMIC_WRITE`](super::ATOMIC_WRITE) bytes (or the capacity, if
/// smaller) goes in whole, never interleaved with another writer's (see the
/// module docs).
///
/// A writer opened on a binding ([`connect`](super::connect),
/// [`Listener::accept`](super::Listener::accept)) writes to a stream read
/// in another process; it behaves the same, and says what happened to
/// that process as the remote module's docs table.
pub struct Writer(End);

/// What a writer holds, fixed when it is made (a clone keeps it).
enum End {
    /// An end of a stream inside this process.
    Local(Local),
    /// The writing end of a connection to another process.
    #[cfg(not(ferry_loom))]
    Remote(RemoteWriter),
}

/// A writer of a stream inside this process.
struct Local {
    s: Counted<Shared>,
    /// Whether this handle takes turns with others (see the module docs'
    /// path table): written by `clone` on this handle, read once per
    /// call; never shared between handles.
    turns: AtomicBool,
}

impl Writer {
    /// The lone writer of a new stream.
    pub(super) fn new(s: Counted<Shared>) -> Writer {
        Writer(End::Local(Local {
            s,
            turns: AtomicBool::new(false),
        }))
    }

    /// The writer of a new connection to another process.
    #[cfg(not(ferry_loom))]
    pub(super) fn remote(w: RemoteWriter) -> Writer {
        Writer(End::Remote(w))
    }

    /// Writes what fits of `buf` without blocking.
    ///
    /// # Errors
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) when there is no room (or,
    /// with several writers, less room than a write of up to the atomic
    /// size needs); [`BrokenPipe`](io::ErrorKind::BrokenPipe) when every
    /// reader is gone. An empty `buf` gives `Ok(0)`.
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match &mut self.0 {
            End::Local(l) => l.try_write(buf),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.write(buf, false),
        }
    }

    /// Every byte written to the stream so far, by any of its writers
    /// (read at some moment during the call); across processes, by the
    /// writers of this process.
    pub fn bytes_written(&self) -> u64 {
        match &self.0 {
            End::Local(l) => l.s.ring.written(),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.bytes_written(),
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

    /// Whether this handle writes on the shared path (it, or the handle it
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
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = if self.turns.load(Relaxed) {
            try_put::<Turns>(&self.s, buf)
        } else {
            try_put::<Alone>(&self.s, buf)
        };
        match r {
            Put::Done(n) => Ok(n),
            Put::Full => Err(io::ErrorKind::WouldBlock.into()),
            Put::Broken => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }
}

/// One try at writing `buf` (not empty) on path `P`; wakes a reader if
/// bytes went in.
#[inline(always)]
fn try_put<P: Path>(s: &Shared, buf: &[u8]) -> Put {
    let (buf, need) = if P::SHARED {
        let buf = &buf[..buf.len().min(TURN_BYTES)];
        // A write of up to the atomic size goes in whole or waits.
        let need = if buf.len() <= s.atomic { buf.len() } else { 1 };
        (buf, need)
    } else {
        (buf, 1)
    };
    // SAFETY: on `Alone` this handle is its stream's only writer (every
    // writer made by a clone is on `Turns`, and cloning a writer moves it
    // to `Turns`), and it writes through `&mut self`, so no other call holds
    // the write end; on `Turns` every writer holds the end under `wlock`.
    let r = P::hold(
        &s.wlock,
        #[inline(always)]
        || unsafe { s.ring.put(buf, need) },
    );
    if let Put::Done(n) = r {
        put_done(s, n);
    }
    r
}

/// After `n` bytes went in: counts them and wakes a reader.
#[inline(always)]
fn put_done(s: &Shared, n: usize) {
    crate::thread::moved_stream_bytes(n);
    s.readable.notify_one();
}

/// Writes `buf` (not empty) on path `P`, waiting while it does not fit.
#[inline(always)]
fn write_on<P: Path>(s: &Shared, buf: &[u8]) -> io::Result<usize> {
    match try_put::<P>(s, buf) {
        Put::Done(n) => Ok(n),
        Put::Broken => Err(io::ErrorKind::BrokenPipe.into()),
        Put::Full => write_slow::<P>(s, buf),
    }
}

#[cold]
#[inline(never)]
fn write_slow<P: Path>(s: &Shared, buf: &[u8]) -> io::Result<usize> {
    s.writable.wait_until(|| match try_put::<P>(s, buf) {
        Put::Done(n) => Some(Ok(n)),
        Put::Broken => Some(Err(io::ErrorKind::BrokenPipe.into())),
        Put::Full => None,
    })
}

impl io::Write for Writer {
    /// Writes what fits of `buf` (at least one byte, or with several
    /// writers all of a `buf` of up to the atomic size), blocking while the
    /// stream is full.
    ///
    /// # Errors
    /// [`BrokenPipe`](io::ErrorKind::BrokenPipe) once every reader is gone.
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The fast path, small enough to inline into the caller's loop: a
        // lone writer whose bytes fit in the room it last saw, before the
        // end of the ring. Everything else (and an empty `buf`) goes out
        // of line.
        if let End::Local(l) = &self.0
            && !l.turns.load(Relaxed)
            && !buf.is_empty()
            // SAFETY: on `Alone` this handle is the stream's only writer
            // (as in `try_put`), writing through `&mut self`.
            && unsafe { l.s.ring.put_all_seen(buf) }
        {
            put_done(&l.s, buf.len());
            return Ok(buf.len());
        }
        self.write_general(buf)
    }

    /// Nothing to do: a write is visible to readers when it returns.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Writer {
    /// `write` beyond its fast path: every kind of end and path, wrapping,
    /// reloading the reader's position, blocking.
    #[inline(never)]
    fn write_general(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match &mut self.0 {
            End::Local(l) if l.turns.load(Relaxed) => write_on::<Turns>(&l.s, buf),
            End::Local(l) => write_on::<Alone>(&l.s, buf),
            #[cfg(not(ferry_loom))]
            End::Remote(r) => r.write(buf, true),
        }
    }
}

impl Clone for Writer {
    /// Another writer of the same stream. From now on this handle and the
    /// new one (and every later clone) take turns at the write end.
    fn clone(&self) -> Writer {
        let l = match &self.0 {
            End::Local(l) => l,
            #[cfg(not(ferry_loom))]
            End::Remote(r) => return Writer(End::Remote(r.clone())),
        };
        l.s.ring.add_writer();
        // This handle is not inside a write (those take `&mut self`), so it
        // takes the lock from its next call on; the new handle reaches
        // another thread only through a hand-over that orders this
        // handle's earlier writes before it.
        l.turns.store(true, Relaxed);
        Writer(End::Local(Local {
            s: l.s.clone(),
            turns: AtomicBool::new(true),
        }))
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if self.s.ring.drop_writer() {
            self.s.readable.notify_all();
        }
    }
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("remote", &!matches!(self.0, End::Local(_)))
            .field("capacity", &self.capacity())
            .field("bytes_written", &self.bytes_written())
            .field("shared", &self.is_shared())
            .finish()
    }
}
