//! Reading and writing a binding socket under a deadline, for both sides
//! of the handshake: every step sets the socket's timeout to the time left,
//! and a timeout or a hang-up becomes the rpc error it means.
//!
//! This file owns those steps; it must not interpret what is read.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::net::SendFlags;

use crate::rpc::error::{Error, Result};

/// Sends all of `bytes` before `deadline`, without SIGPIPE.
pub(super) fn send_all_by(socket: &UnixStream, mut bytes: &[u8], deadline: Instant) -> Result<()> {
    while !bytes.is_empty() {
        socket.set_write_timeout(Some(remaining(deadline)?))?;
        match rustix::net::send(socket, bytes, SendFlags::NOSIGNAL) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io_error(e.into())),
        }
    }
    Ok(())
}

/// Fills `buf` from `socket` before `deadline`.
pub(super) fn read_exact_by(
    mut socket: &UnixStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        socket.set_read_timeout(Some(remaining(deadline)?))?;
        match socket.read(&mut buf[got..]) {
            Ok(0) => return Err(Error::PeerDied),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
    Ok(())
}

/// The time left before `deadline` (never zero), or [`Error::TimedOut`].
pub(super) fn remaining(deadline: Instant) -> Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(Error::TimedOut)
    } else {
        Ok(left)
    }
}

/// A socket error as the rpc error it means: a receive or send timeout is
/// [`Error::TimedOut`], a peer's hang-up [`Error::PeerDied`].
pub(super) fn io_error(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::TimedOut,
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => Error::PeerDied,
        _ => Error::Io(e),
    }
}
