//! Sockets that wait without stopping the runtime: [`TcpStream`],
//! [`TcpListener`], [`UdpSocket`], [`UnixStream`] and [`UnixListener`],
//! mirroring `std::net` and `std::os::unix::net`. A `connect`, `accept`,
//! `read`, `write`, `send` or `recv` that would block parks only the
//! calling ferry thread until its runtime's reactor (one edge-triggered
//! epoll instance per runtime, `event::readiness`) reports the socket
//! ready; its processor runs other threads meanwhile, and no kernel
//! thread is spent per waiting socket.
//!
//! This module owns the socket types and their waiting (`net/io.rs`); it must
//! not block a processor in the kernel: every socket is non-blocking
//! (accepted ones with `SOCK_NONBLOCK`, reads and writes with
//! `MSG_DONTWAIT`), and the only blocking calls left (resolving a host
//! name, binding, connecting a Unix socket) run through
//! [`crate::blocking`]. Outside a ferry thread (a plain kernel thread, or
//! a socket whose runtime ended) a call that would block waits in
//! `poll(2)` on the one descriptor, as std would block.
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
//! # What differs from std
//!
//! - A listener listens with the system's largest backlog (`somaxconn`),
//!   not std's 128, which drops connections under a burst of thousands.
//! - Read and write timeouts ([`TcpStream::set_read_timeout`], ...) are
//!   kept here, not in `SO_RCVTIMEO` (which non-blocking sockets ignore);
//!   a timed-out call fails with [`std::io::ErrorKind::WouldBlock`], as std's.
//! - [`Thread::abort`](crate::Thread::abort) of a thread waiting here
//!   makes its call fail with [`std::io::ErrorKind::Interrupted`].
//! - [`TcpStream::shutdown`] wakes threads waiting on the socket: a
//!   read then returns `Ok(0)`, a write fails.
//! - When a runtime ends ([`crate::run`] returns) with threads parked on
//!   sockets, those threads never run again and their sockets are closed.
//! - `as_std` gives the std socket, which is non-blocking here: its own
//!   calls fail with `WouldBlock` instead of waiting; `into_std` hands it
//!   back blocking.
//!
//! A single call interrupted by a signal is retried inside the wrapper;
//! `read_exact` and `write_all` are std's loops over single calls.

pub(crate) mod io;
mod tcp;
mod udp;
mod unix;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixIncoming, UnixListener, UnixStream};

/// `Read` and `Write` for a stream type with fields `sock` (a std socket
/// in a `ManuallyDrop`) and `io` ([`io::Io`]), and for a reference
/// to it: `recv`/`send` with `MSG_DONTWAIT` (and `MSG_NOSIGNAL`) through
/// [`io::Io::op_stream`]. `drains` says whether a short `recv` or `send`
/// means the socket's queue is empty or full (TCP); a Unix stream's
/// `recv` also stops short after a message that carried descriptors.
macro_rules! stream_read_write {
    ($ty:ty, drains: $drains:expr) => {
        impl ::std::io::Read for &$ty {
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                let fd = ::std::os::fd::AsFd::as_fd(&*self.sock);
                let len = if $drains { buf.len() } else { 0 };
                self.io.op_stream(fd, $crate::net::io::Dir::Read, len, || {
                    rustix::net::recv(fd, &mut *buf, rustix::net::RecvFlags::DONTWAIT)
                        .map(|(n, _)| n)
                        .map_err(::std::io::Error::from)
                })
            }
        }

        impl ::std::io::Write for &$ty {
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                let fd = ::std::os::fd::AsFd::as_fd(&*self.sock);
                let len = if $drains { buf.len() } else { 0 };
                self.io.op_stream(fd, $crate::net::io::Dir::Write, len, || {
                    rustix::net::send(
                        fd,
                        buf,
                        rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
                    )
                    .map_err(::std::io::Error::from)
                })
            }

            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }

        impl ::std::io::Read for $ty {
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                ::std::io::Read::read(&mut &*self, buf)
            }
        }

        impl ::std::io::Write for $ty {
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                ::std::io::Write::write(&mut &*self, buf)
            }

            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }
    };
}

/// `Drop`, `AsFd`, `AsRawFd` and `From` both ways between a socket type
/// (fields `sock: ManuallyDrop<$std>` and `io`) and its std type; `Drop`
/// deregisters before the descriptor is closed.
macro_rules! socket_plumbing {
    ($ty:ident($std:ty)) => {
        impl Drop for $ty {
            fn drop(&mut self) {
                let fd = ::std::os::fd::AsFd::as_fd(&*self.sock);
                match self.io.release(fd) {
                    $crate::net::io::Released::Open => {
                        // SAFETY: dropped once, here; not used after.
                        unsafe { ::std::mem::ManuallyDrop::drop(&mut self.sock) };
                    }
                    $crate::net::io::Released::ClosedByRuntime => {
                        // Closed already: let go of the number only.
                        // SAFETY: taken once, here; not used after.
                        let sock = unsafe { ::std::mem::ManuallyDrop::take(&mut self.sock) };
                        let _ = ::std::os::fd::IntoRawFd::into_raw_fd(sock);
                    }
                }
            }
        }

        impl ::std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> ::std::os::fd::BorrowedFd<'_> {
                self.sock.as_fd()
            }
        }

        impl ::std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> ::std::os::fd::RawFd {
                ::std::os::fd::AsRawFd::as_raw_fd(&*self.sock)
            }
        }

        impl From<$std> for $ty {
            fn from(socket: $std) -> $ty {
                $ty::from_std(socket)
            }
        }

        impl From<$ty> for $std {
            fn from(socket: $ty) -> $std {
                socket.into_std()
            }
        }

        impl $ty {
            /// Deregisters, and takes the std socket out (blocking again
            /// when `blocking`).
            fn take_std(mut self, blocking: bool) -> $std {
                let fd = ::std::os::fd::AsFd::as_fd(&*self.sock);
                let released = self.io.release(fd);
                // SAFETY: taken once; `self` is forgotten right after, so
                // its drop does not touch the field again.
                let sock = unsafe { ::std::mem::ManuallyDrop::take(&mut self.sock) };
                // SAFETY: `io` is dropped once, here (forgotten with `self`).
                unsafe { ::std::ptr::drop_in_place(&mut self.io) };
                ::std::mem::forget(self);
                debug_assert_eq!(released, $crate::net::io::Released::Open);
                if blocking {
                    let _ = sock.set_nonblocking(false);
                }
                sock
            }
        }
    };
}

pub(crate) use {socket_plumbing, stream_read_write};
