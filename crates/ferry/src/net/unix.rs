//! [`UnixStream`] and [`UnixListener`]: Unix-domain stream sockets whose
//! waits park only the calling ferry thread (see the parent module).
//!
//! This file owns the Unix-domain types; it must not block in the kernel
//! outside [`crate::blocking`] (`bind` and `connect`, which touch the file
//! system, run there).

use std::fmt;
use std::io;
use std::iter::FusedIterator;
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::os::unix::net as unix;
use std::path::Path;
use std::time::Duration;

use rustix::net::SocketFlags;

use super::io::{Dir, Io};
use super::{socket_plumbing, stream_read_write};
use crate::fs::call;

/// A Unix-domain stream socket, as [`std::os::unix::net::UnixStream`],
/// whose `read` and `write` park only the calling ferry thread.
///
/// [`Read`](std::io::Read) and [`Write`](std::io::Write) are implemented
/// for `UnixStream` and `&UnixStream`; `flush` does nothing.
pub struct UnixStream {
    sock: ManuallyDrop<unix::UnixStream>,
    io: Io,
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("sock", &*self.sock)
            .field("io", &self.io)
            .finish()
    }
}

impl UnixStream {
    /// Connects to the socket bound at `path`, as
    /// [`std::os::unix::net::UnixStream::connect`], inside
    /// [`crate::blocking`].
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::connect`], e.g.
    /// [`io::ErrorKind::NotFound`] or [`io::ErrorKind::ConnectionRefused`].
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let path = path.as_ref();
        call(|| unix::UnixStream::connect(path)).map(UnixStream::from_std)
    }

    /// Two sockets connected to each other (`socketpair`), as
    /// [`std::os::unix::net::UnixStream::pair`].
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::pair`], e.g. out of
    /// descriptors.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        unix::UnixStream::pair().map(|(a, b)| (UnixStream::from_std(a), UnixStream::from_std(b)))
    }

    /// The address of this end.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<unix::SocketAddr> {
        self.sock.local_addr()
    }

    /// The address of the peer.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<unix::SocketAddr> {
        self.sock.peer_addr()
    }

    /// Shuts the reading side, the writing side or both down, as
    /// [`std::os::unix::net::UnixStream::shutdown`]; a thread waiting on
    /// the socket wakes (a read returns `Ok(0)`).
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::shutdown`].
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// Sets how long a `read` waits before it fails with
    /// [`io::ErrorKind::WouldBlock`]; `None` waits for ever.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for `Some(Duration::ZERO)`, as std.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(timeout)
    }

    /// Sets how long a `write` waits, as
    /// [`set_read_timeout`](UnixStream::set_read_timeout).
    ///
    /// # Errors
    /// As [`set_read_timeout`](UnixStream::set_read_timeout).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(timeout)
    }

    /// A second handle on the same socket (a duplicated descriptor, with
    /// its own registration and timeouts).
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::try_clone`].
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        self.sock.try_clone().map(UnixStream::from_std)
    }

    /// Wraps a connected std socket.
    pub fn from_std(stream: unix::UnixStream) -> UnixStream {
        UnixStream {
            sock: ManuallyDrop::new(stream),
            io: Io::default(),
        }
    }

    /// The std socket inside, blocking again.
    pub fn into_std(self) -> unix::UnixStream {
        self.take_std(true)
    }

    /// The std socket inside, for what this type does not wrap
    /// (credentials, ...); it may be non-blocking.
    pub fn as_std(&self) -> &unix::UnixStream {
        &self.sock
    }
}

stream_read_write!(UnixStream, drains: false);
socket_plumbing!(UnixStream(unix::UnixStream));

/// A listening Unix-domain stream socket, as
/// [`std::os::unix::net::UnixListener`], whose `accept` parks only the
/// calling ferry thread.
///
/// As with std, the socket file stays in the file system after the listener
/// is dropped; remove it to bind the path again.
pub struct UnixListener {
    sock: ManuallyDrop<unix::UnixListener>,
    io: Io,
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("sock", &*self.sock)
            .field("io", &self.io)
            .finish()
    }
}

impl UnixListener {
    /// Makes a socket file at `path`, binds to it and listens (with the
    /// largest backlog), as [`std::os::unix::net::UnixListener::bind`];
    /// runs through [`crate::blocking`], as it writes to the file system.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::bind`], e.g.
    /// [`io::ErrorKind::AddrInUse`] if `path` exists.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        let path = path.as_ref();
        let l = call(|| unix::UnixListener::bind(path))?;
        rustix::net::listen(&l, -1)?;
        l.set_nonblocking(true)?;
        Ok(UnixListener {
            sock: ManuallyDrop::new(l),
            io: Io::default(),
        })
    }

    /// Waits for the next connection and returns it with the peer's
    /// address, as [`std::os::unix::net::UnixListener::accept`].
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::accept`].
    pub fn accept(&self) -> io::Result<(UnixStream, unix::SocketAddr)> {
        let fd = self.sock.as_fd();
        let s = self.io.op(fd, Dir::Read, || {
            rustix::net::accept_with(fd, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)
                .map_err(io::Error::from)
        })?;
        let stream = UnixStream::from_std(unix::UnixStream::from(s));
        let addr = stream.peer_addr()?;
        Ok((stream, addr))
    }

    /// An endless iterator of [`accept`](UnixListener::accept)'s
    /// connections (without their addresses), as
    /// [`std::os::unix::net::UnixListener::incoming`].
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }

    /// The address this listener is bound to.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<unix::SocketAddr> {
        self.sock.local_addr()
    }

    /// A second handle on the same listener (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::try_clone`].
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        self.sock.try_clone().map(UnixListener::from_std)
    }

    /// Wraps a listening std socket (made non-blocking).
    pub fn from_std(listener: unix::UnixListener) -> UnixListener {
        let _ = listener.set_nonblocking(true);
        UnixListener {
            sock: ManuallyDrop::new(listener),
            io: Io::default(),
        }
    }

    /// The std listener inside, blocking again.
    pub fn into_std(self) -> unix::UnixListener {
        self.take_std(true)
    }

    /// The std listener inside; it is non-blocking.
    pub fn as_std(&self) -> &unix::UnixListener {
        &self.sock
    }
}

socket_plumbing!(UnixListener(unix::UnixListener));

/// The connections a [`UnixListener`] accepts, one
/// [`UnixListener::accept`] per item; never ends (an item may be an error).
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;

    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

impl FusedIterator for UnixIncoming<'_> {}

impl fmt::Debug for UnixIncoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixIncoming")
            .field("listener", self.listener)
            .finish()
    }
}
