//! [`UdpSocket`]: a UDP socket whose waits park only the calling ferry
//! thread (see the parent module).
//!
//! This file owns the UDP type; it must not block in the kernel outside
//! [`crate::blocking`] (`bind` and `connect`, which may resolve a name,
//! run there).

use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::net::{self, SocketAddr, ToSocketAddrs};
use std::os::fd::AsFd;
use std::time::Duration;

use super::io::{Dir, Io};
use super::socket_plumbing;
use crate::fs::call;

/// A UDP socket, as [`std::net::UdpSocket`], whose `send`, `recv` and
/// their addressed forms park only the calling ferry thread.
///
/// ```
/// ferry::run(|| {
///     let a = ferry::net::UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b = ferry::net::UdpSocket::bind("127.0.0.1:0").unwrap();
///     b.send_to(b"ping", a.local_addr().unwrap()).unwrap();
///     let mut buf = [0; 8];
///     let (n, from) = a.recv_from(&mut buf).unwrap();
///     assert_eq!((&buf[..n], from), (&b"ping"[..], b.local_addr().unwrap()));
/// })
/// .unwrap();
/// ```
pub struct UdpSocket {
    sock: ManuallyDrop<net::UdpSocket>,
    io: Io,
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("sock", &*self.sock)
            .field("io", &self.io)
            .finish()
    }
}

impl UdpSocket {
    /// Binds a socket to `addr` (the first of its addresses that works),
    /// as [`std::net::UdpSocket::bind`].
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::bind`], e.g. [`io::ErrorKind::AddrInUse`].
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let s = call(|| net::UdpSocket::bind(&addr))?;
        s.set_nonblocking(true)?;
        Ok(UdpSocket {
            sock: ManuallyDrop::new(s),
            io: Io::default(),
        })
    }

    /// Sets the peer `send` and `recv` use (and the only one `recv` takes
    /// datagrams from), as [`std::net::UdpSocket::connect`].
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::connect`].
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        call(|| self.sock.connect(&addr))
    }

    /// Sends `buf` as one datagram to the connected peer.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::send`], e.g. if not connected.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .op(self.sock.as_fd(), Dir::Write, || self.sock.send(buf))
    }

    /// Receives one datagram from the connected peer into `buf` (the rest
    /// of a longer datagram is dropped).
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::recv`].
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .op(self.sock.as_fd(), Dir::Read, || self.sock.recv(buf))
    }

    /// Sends `buf` as one datagram to `addr`.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::send_to`]; resolving `addr` to no address
    /// is [`io::ErrorKind::InvalidInput`].
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let to: SocketAddr =
            call(|| addr.to_socket_addrs().map(|mut i| i.next()))?.ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
            })?;
        self.io
            .op(self.sock.as_fd(), Dir::Write, || self.sock.send_to(buf, to))
    }

    /// Receives one datagram into `buf`, with its sender's address.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::recv_from`].
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .op(self.sock.as_fd(), Dir::Read, || self.sock.recv_from(buf))
    }

    /// As [`recv_from`](UdpSocket::recv_from), leaving the datagram queued.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::peek_from`].
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .op(self.sock.as_fd(), Dir::Read, || self.sock.peek_from(buf))
    }

    /// The address this socket is bound to.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::peer_addr`], e.g. if not connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }

    /// Sets how long a receive waits before it fails with
    /// [`io::ErrorKind::WouldBlock`]; `None` waits for ever.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for `Some(Duration::ZERO)`, as std.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(timeout)
    }

    /// Sets how long a send waits, as
    /// [`set_read_timeout`](UdpSocket::set_read_timeout).
    ///
    /// # Errors
    /// As [`set_read_timeout`](UdpSocket::set_read_timeout).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(timeout)
    }

    /// A second handle on the same socket (a duplicated descriptor).
    ///
    /// # Errors
    /// As [`std::net::UdpSocket::try_clone`].
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        self.sock.try_clone().map(UdpSocket::from_std)
    }

    /// Wraps a std socket (made non-blocking).
    pub fn from_std(socket: net::UdpSocket) -> UdpSocket {
        let _ = socket.set_nonblocking(true);
        UdpSocket {
            sock: ManuallyDrop::new(socket),
            io: Io::default(),
        }
    }

    /// The std socket inside, blocking again.
    pub fn into_std(self) -> net::UdpSocket {
        self.take_std(true)
    }

    /// The std socket inside, for the options this type does not wrap; it
    /// is non-blocking.
    pub fn as_std(&self) -> &net::UdpSocket {
        &self.sock
    }
}

socket_plumbing!(UdpSocket(net::UdpSocket));
