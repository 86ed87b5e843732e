//! [`TcpStream`] and [`TcpListener`]: TCP sockets whose waits park only
//! the calling ferry thread (see the parent module).
//!
//! This file owns the TCP types, the non-blocking connect and the
//! listener's backlog; it must not block in the kernel outside
//! [`crate::blocking`] (name resolution and `bind` run there).

use std::fmt;
use std::io;
use std::iter::FusedIterator;
use std::mem::ManuallyDrop;
use std::net::{self, Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::io::{Dir, Io};
use super::{socket_plumbing, stream_read_write};
use crate::fs::call;

/// A TCP connection, as [`std::net::TcpStream`], whose `connect`, `read`
/// and `write` park only the calling ferry thread.
///
/// [`Read`](std::io::Read) and [`Write`](std::io::Write) are implemented
/// for `TcpStream` and for `&TcpStream`, so one thread may read while
/// another writes; `flush` does nothing (TCP has no user-space buffer
/// here). A `read` that returns `Ok(0)` means the peer shut its side down
/// (or this side's reading side was shut down).
pub struct TcpStream {
    sock: ManuallyDrop<net::TcpStream>,
    io: Io,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("sock", &*self.sock)
            .field("io", &self.io)
            .finish()
    }
}

impl TcpStream {
    /// Connects to `addr`, trying each address it resolves to in turn, as
    /// [`std::net::TcpStream::connect`]; resolving a host name happens
    /// inside [`crate::blocking`], the connection itself parks the thread
    /// until the handshake ends (a non-blocking connect, then `SO_ERROR`).
    ///
    /// # Errors
    /// As [`std::net::TcpStream::connect`]: the last address's error, e.g.
    /// [`io::ErrorKind::ConnectionRefused`] if nothing listens there;
    /// [`io::ErrorKind::InvalidInput`] if it resolves to no address.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let addrs: Vec<SocketAddr> = call(|| addr.to_socket_addrs().map(Iterator::collect))?;
        let mut last = None;
        for a in addrs {
            match TcpStream::connect_one(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "could not resolve to any addresses",
            )
        }))
    }

    fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
        let family = match addr {
            SocketAddr::V4(_) => AddressFamily::INET,
            SocketAddr::V6(_) => AddressFamily::INET6,
        };
        let fd: OwnedFd = rustix::net::socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        let stream = TcpStream {
            sock: ManuallyDrop::new(net::TcpStream::from(fd)),
            io: Io::default(),
        };
        match rustix::net::connect(stream.sock.as_fd(), &addr) {
            Ok(()) => return Ok(stream),
            Err(rustix::io::Errno::INPROGRESS | rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let fd = stream.sock.as_fd();
        stream.io.op(fd, Dir::Write, || connected(fd))?;
        Ok(stream)
    }

    /// The address of the peer.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::peer_addr`], e.g. if not connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }

    /// The local address of this end.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Shuts the reading side, the writing side or both down, as
    /// [`std::net::TcpStream::shutdown`]: after `Shutdown::Write` the peer
    /// reads end of file. A thread waiting on this socket wakes (the
    /// kernel reports the change): its read returns `Ok(0)`.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::shutdown`].
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// Sets `TCP_NODELAY` (send small writes at once, without Nagle's
    /// batching).
    ///
    /// # Errors
    /// As [`std::net::TcpStream::set_nodelay`].
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.sock.set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::nodelay`].
    pub fn nodelay(&self) -> io::Result<bool> {
        self.sock.nodelay()
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
    /// [`set_read_timeout`](TcpStream::set_read_timeout).
    ///
    /// # Errors
    /// As [`set_read_timeout`](TcpStream::set_read_timeout).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(timeout)
    }

    /// The read timeout.
    ///
    /// # Errors
    /// None today; a `Result` as std's.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.read_timeout())
    }

    /// The write timeout.
    ///
    /// # Errors
    /// None today; a `Result` as std's.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.write_timeout())
    }

    /// A second handle on the same connection (a duplicated descriptor,
    /// with its own registration and timeouts).
    ///
    /// # Errors
    /// As [`std::net::TcpStream::try_clone`], e.g. out of descriptors.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        self.sock.try_clone().map(TcpStream::from_std)
    }

    /// Wraps a connected std stream.
    pub fn from_std(stream: net::TcpStream) -> TcpStream {
        TcpStream {
            sock: ManuallyDrop::new(stream),
            io: Io::default(),
        }
    }

    /// The std stream inside, blocking again: its operations block the
    /// whole kernel thread (and the processor with it).
    pub fn into_std(self) -> net::TcpStream {
        self.take_std(true)
    }

    /// The std stream inside, for the options this type does not wrap
    /// (TTL, ...). It may be non-blocking: its own reads and writes fail
    /// with `WouldBlock` rather than wait.
    pub fn as_std(&self) -> &net::TcpStream {
        &self.sock
    }
}

/// Whether a non-blocking connect on `fd` has ended: `Ok` once connected,
/// `WouldBlock` while the handshake runs, the connect's error otherwise.
fn connected(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    if let Err(e) = rustix::net::sockopt::socket_error(fd)? {
        return Err(e.into());
    }
    match rustix::net::getpeername(fd) {
        Ok(_) => Ok(()),
        Err(rustix::io::Errno::NOTCONN) => Err(io::ErrorKind::WouldBlock.into()),
        Err(e) => Err(e.into()),
    }
}

stream_read_write!(TcpStream, drains: true);
socket_plumbing!(TcpStream(net::TcpStream));

/// A listening TCP socket, as [`std::net::TcpListener`], whose `accept`
/// parks only the calling ferry thread. It listens with the system's
/// largest backlog (`somaxconn`).
pub struct TcpListener {
    sock: ManuallyDrop<net::TcpListener>,
    io: Io,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("sock", &*self.sock)
            .field("io", &self.io)
            .finish()
    }
}

impl TcpListener {
    /// Binds to `addr` (the first of its addresses that works) and listens,
    /// as [`std::net::TcpListener::bind`]; port 0 asks for a free port (see
    /// [`TcpListener::local_addr`]). Runs through [`crate::blocking`], as
    /// resolving a host name may block.
    ///
    /// # Errors
    /// As [`std::net::TcpListener::bind`], e.g.
    /// [`io::ErrorKind::AddrInUse`].
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let l = call(|| net::TcpListener::bind(&addr))?;
        // Listen again with the largest backlog (-1: `somaxconn`).
        rustix::net::listen(&l, -1)?;
        l.set_nonblocking(true)?;
        Ok(TcpListener {
            sock: ManuallyDrop::new(l),
            io: Io::default(),
        })
    }

    /// Waits for the next connection and returns it with the peer's
    /// address, as [`std::net::TcpListener::accept`] (`accept4` with
    /// `SOCK_NONBLOCK|SOCK_CLOEXEC`).
    ///
    /// # Errors
    /// As [`std::net::TcpListener::accept`], e.g. out of descriptors.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let fd = self.sock.as_fd();
        let (s, a) = self.io.op(fd, Dir::Read, || {
            rustix::net::acceptfrom_with(fd, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)
                .map_err(io::Error::from)
        })?;
        let stream = TcpStream::from_std(net::TcpStream::from(s));
        let addr = match a.and_then(|a| SocketAddr::try_from(a).ok()) {
            Some(a) => a,
            None => stream.peer_addr()?,
        };
        Ok((stream, addr))
    }

    /// An endless iterator of [`accept`](TcpListener::accept)'s
    /// connections (without their addresses), as
    /// [`std::net::TcpListener::incoming`].
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address this listener is bound to (with the actual port if it
    /// was bound to port 0).
    ///
    /// # Errors
    /// As [`std::net::TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// A second handle on the same listener (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::net::TcpListener::try_clone`].
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        self.sock.try_clone().map(TcpListener::from_std)
    }

    /// Wraps a listening std socket (made non-blocking: the descriptor's
    /// mode is shared with every duplicate of it).
    pub fn from_std(listener: net::TcpListener) -> TcpListener {
        let _ = listener.set_nonblocking(true);
        TcpListener {
            sock: ManuallyDrop::new(listener),
            io: Io::default(),
        }
    }

    /// The std listener inside, blocking again.
    pub fn into_std(self) -> net::TcpListener {
        self.take_std(true)
    }

    /// The std listener inside, for the options this type does not wrap;
    /// it is non-blocking (its own `accept` fails with `WouldBlock`).
    pub fn as_std(&self) -> &net::TcpListener {
        &self.sock
    }
}

socket_plumbing!(TcpListener(net::TcpListener));

/// The connections a [`TcpListener`] accepts, one [`TcpListener::accept`]
/// per item; never ends (an item may be an error).
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

impl FusedIterator for Incoming<'_> {}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("listener", self.listener)
            .finish()
    }
}
