//! Sockets that block in the kernel without stopping the runtime:
//! [`TcpStream`], [`TcpListener`], [`UnixStream`] and [`UnixListener`],
//! mirroring `std::net` and `std::os::unix::net`; `connect`, `accept`,
//! `read` and `write` run through [`crate::blocking`], so the calling
//! thread's processor keeps running other ferry threads meanwhile.
//!
//! This module owns thin wrappers around the std sockets; it must not hold a
//! ferry lock, park, or switch threads inside a blocking call, and keeps no
//! state beside the std socket it wraps. Cheap calls that never wait
//! (addresses, options, `shutdown`, `try_clone`, [`UnixStream::pair`]) call
//! std directly. Outside a ferry runtime every call is just the std call.
//!
//! ```
//! use std::io::{Read, Write};
//!
//! ferry::run(|| {
//!     let listener = ferry::net::TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     // Echoes one message back, while the first thread waits for it.
//!     let server = ferry::spawn(move || {
//!         let (mut stream, _) = listener.accept().unwrap();
//!         let mut message = [0; 5];
//!         stream.read_exact(&mut message).unwrap();
//!         stream.write_all(&message).unwrap();
//!     });
//!     let mut client = ferry::net::TcpStream::connect(addr).unwrap();
//!     client.write_all(b"hello").unwrap();
//!     let mut echo = [0; 5];
//!     client.read_exact(&mut echo).unwrap();
//!     assert_eq!(&echo, b"hello");
//!     server.join().unwrap();
//! })
//! .unwrap();
//! ```
//!
//! A single `connect`, `accept`, `read` or `write` interrupted by a signal
//! ([`io::ErrorKind::Interrupted`]: ferry may preempt with a signal, and
//! `SA_RESTART` does not restart every call) is retried inside the wrapper;
//! `read_to_end`, `read_exact` and `write_all` run once, as std retries
//! inside them. Why errno is read safely is told in [`crate::fs`].

use std::fmt;
use std::iter::FusedIterator;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net as unix;
use std::path::Path;
use std::{io, net};

use crate::fs::{call, read_write_through_blocking};

/// A TCP connection, as [`std::net::TcpStream`], whose `connect`, `read` and
/// `write` block only the calling ferry thread.
///
/// [`Read`](std::io::Read) and [`Write`](std::io::Write) are implemented
/// for `TcpStream` and for `&TcpStream`, so one thread may read while
/// another writes; a single `read` or `write` interrupted by a signal is
/// retried, and `flush` does nothing (TCP has no user-space buffer here).
/// A `read` that returns `Ok(0)` means the peer shut its side down.
#[derive(Debug)]
pub struct TcpStream(net::TcpStream);

impl TcpStream {
    /// Connects to `addr`, trying each address it resolves to in turn, as
    /// [`std::net::TcpStream::connect`]; resolving a host name also happens
    /// inside the blocking call. Retried (on a fresh socket) if interrupted.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::connect`]: the last address's error, e.g.
    /// [`io::ErrorKind::ConnectionRefused`] if nothing listens there.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        call(|| net::TcpStream::connect(&addr)).map(TcpStream)
    }

    /// The address of the peer.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::peer_addr`], e.g. if not connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address of this end.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// Shuts the reading side, the writing side or both down, as
    /// [`std::net::TcpStream::shutdown`]: after `Shutdown::Write` the peer
    /// reads end of file.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::shutdown`].
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.0.shutdown(how)
    }

    /// Sets `TCP_NODELAY` (send small writes at once, without Nagle's
    /// batching).
    ///
    /// # Errors
    /// As [`std::net::TcpStream::set_nodelay`].
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.0.set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// As [`std::net::TcpStream::nodelay`].
    pub fn nodelay(&self) -> io::Result<bool> {
        self.0.nodelay()
    }

    /// A second handle on the same connection (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::net::TcpStream::try_clone`], e.g. out of descriptors.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        self.0.try_clone().map(TcpStream)
    }

    /// Wraps a connected std stream.
    pub fn from_std(stream: net::TcpStream) -> TcpStream {
        TcpStream(stream)
    }

    /// The std stream inside, whose operations block the whole kernel
    /// thread (and the processor with it) again.
    pub fn into_std(self) -> net::TcpStream {
        self.0
    }

    /// The std stream inside, for the options this type does not wrap
    /// (timeouts, TTL, ...); its reads and writes block the processor.
    pub fn as_std(&self) -> &net::TcpStream {
        &self.0
    }
}

read_write_through_blocking!(TcpStream);

/// A listening TCP socket, as [`std::net::TcpListener`], whose `accept`
/// blocks only the calling ferry thread.
#[derive(Debug)]
pub struct TcpListener(net::TcpListener);

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
        call(|| net::TcpListener::bind(&addr)).map(TcpListener)
    }

    /// Waits for the next connection and returns it with the peer's
    /// address, as [`std::net::TcpListener::accept`]; retried if
    /// interrupted.
    ///
    /// # Errors
    /// As [`std::net::TcpListener::accept`], e.g. out of descriptors.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        call(|| self.0.accept()).map(|(s, a)| (TcpStream(s), a))
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
        self.0.local_addr()
    }

    /// A second handle on the same listener (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::net::TcpListener::try_clone`].
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        self.0.try_clone().map(TcpListener)
    }

    /// Wraps a listening std socket.
    pub fn from_std(listener: net::TcpListener) -> TcpListener {
        TcpListener(listener)
    }

    /// The std listener inside, whose `accept` blocks the processor again.
    pub fn into_std(self) -> net::TcpListener {
        self.0
    }

    /// The std listener inside, for the options this type does not wrap;
    /// its `accept` blocks the processor.
    pub fn as_std(&self) -> &net::TcpListener {
        &self.0
    }
}

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

/// A Unix-domain stream socket, as [`std::os::unix::net::UnixStream`],
/// whose `connect`, `read` and `write` block only the calling ferry thread.
///
/// [`Read`](std::io::Read) and [`Write`](std::io::Write) are implemented
/// for `UnixStream` and `&UnixStream`; a single `read` or `write`
/// interrupted by a signal is retried, and `flush` does nothing.
#[derive(Debug)]
pub struct UnixStream(unix::UnixStream);

impl UnixStream {
    /// Connects to the socket bound at `path`, as
    /// [`std::os::unix::net::UnixStream::connect`]; retried (on a fresh
    /// socket) if interrupted.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::connect`], e.g.
    /// [`io::ErrorKind::NotFound`] or [`io::ErrorKind::ConnectionRefused`].
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let path = path.as_ref();
        call(|| unix::UnixStream::connect(path)).map(UnixStream)
    }

    /// Two sockets connected to each other (`socketpair`), as
    /// [`std::os::unix::net::UnixStream::pair`].
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::pair`], e.g. out of
    /// descriptors.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        unix::UnixStream::pair().map(|(a, b)| (UnixStream(a), UnixStream(b)))
    }

    /// The address of this end.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<unix::SocketAddr> {
        self.0.local_addr()
    }

    /// The address of the peer.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<unix::SocketAddr> {
        self.0.peer_addr()
    }

    /// Shuts the reading side, the writing side or both down, as
    /// [`std::os::unix::net::UnixStream::shutdown`].
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::shutdown`].
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.0.shutdown(how)
    }

    /// A second handle on the same socket (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixStream::try_clone`].
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        self.0.try_clone().map(UnixStream)
    }

    /// Wraps a connected std socket.
    pub fn from_std(stream: unix::UnixStream) -> UnixStream {
        UnixStream(stream)
    }

    /// The std socket inside, whose operations block the processor again.
    pub fn into_std(self) -> unix::UnixStream {
        self.0
    }

    /// The std socket inside, for what this type does not wrap (timeouts,
    /// credentials, ...); its reads and writes block the processor.
    pub fn as_std(&self) -> &unix::UnixStream {
        &self.0
    }
}

read_write_through_blocking!(UnixStream);

/// A listening Unix-domain stream socket, as
/// [`std::os::unix::net::UnixListener`], whose `accept` blocks only the
/// calling ferry thread.
///
/// As with std, the socket file stays in the file system after the listener
/// is dropped; remove it to bind the path again.
#[derive(Debug)]
pub struct UnixListener(unix::UnixListener);

impl UnixListener {
    /// Makes a socket file at `path`, binds to it and listens, as
    /// [`std::os::unix::net::UnixListener::bind`]; runs through
    /// [`crate::blocking`], as it writes to the file system.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::bind`], e.g.
    /// [`io::ErrorKind::AddrInUse`] if `path` exists.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        let path = path.as_ref();
        call(|| unix::UnixListener::bind(path)).map(UnixListener)
    }

    /// Waits for the next connection and returns it with the peer's
    /// address, as [`std::os::unix::net::UnixListener::accept`]; retried if
    /// interrupted.
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::accept`].
    pub fn accept(&self) -> io::Result<(UnixStream, unix::SocketAddr)> {
        call(|| self.0.accept()).map(|(s, a)| (UnixStream(s), a))
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
        self.0.local_addr()
    }

    /// A second handle on the same listener (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::os::unix::net::UnixListener::try_clone`].
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        self.0.try_clone().map(UnixListener)
    }

    /// Wraps a listening std socket.
    pub fn from_std(listener: unix::UnixListener) -> UnixListener {
        UnixListener(listener)
    }

    /// The std listener inside, whose `accept` blocks the processor again.
    pub fn into_std(self) -> unix::UnixListener {
        self.0
    }

    /// The std listener inside, for what this type does not wrap; its
    /// `accept` blocks the processor.
    pub fn as_std(&self) -> &unix::UnixListener {
        &self.0
    }
}

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

/// `AsFd`, `AsRawFd` and `From` both ways between each wrapper and its std
/// type.
macro_rules! fd_and_std_conversions {
    ($($ty:ident($std:ty)),* $(,)?) => {$(
        impl AsFd for $ty {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.as_fd()
            }
        }

        impl AsRawFd for $ty {
            fn as_raw_fd(&self) -> RawFd {
                self.0.as_raw_fd()
            }
        }

        impl From<$std> for $ty {
            fn from(socket: $std) -> $ty {
                $ty(socket)
            }
        }

        impl From<$ty> for $std {
            fn from(socket: $ty) -> $std {
                socket.0
            }
        }
    )*};
}

fd_and_std_conversions!(
    TcpStream(net::TcpStream),
    TcpListener(net::TcpListener),
    UnixStream(unix::UnixStream),
    UnixListener(unix::UnixListener),
);
