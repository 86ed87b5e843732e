//! The client's side of binding: connecting to a server's socket, sending
//! the request and checking the reply and the memory that comes with it
//! (steps 2 and 4 of the exchange in the parent's docs).
//!
//! This file owns [`connect_raw`] and the reading of a reply; it must not
//! trust a byte or a descriptor the server sends before it is checked.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

use super::deadline::{io_error, remaining, send_all_by};
use super::wire::{self, REPLY_LEN, Status};
use super::{Binding, Credentials, DEFAULT_HANDSHAKE_TIMEOUT, Mapping};
use crate::rpc::dir::{RuntimeDir, check_name};
use crate::rpc::error::{Error, Result};
use crate::upcall::blocking;

/// Binds to the server of interface `name` at `version_hash` in the user's
/// runtime directory ([`RuntimeDir::user`]).
pub fn connect_raw(name: &str, version_hash: u64) -> Result<Binding> {
    connect_raw_in(&RuntimeDir::user()?, name, version_hash)
}

/// Binds to the server of interface `name` at `version_hash` in `dir`,
/// waiting at most [`DEFAULT_HANDSHAKE_TIMEOUT`] for its answer (see
/// [`connect_raw_with`]).
pub fn connect_raw_in(dir: &RuntimeDir, name: &str, version_hash: u64) -> Result<Binding> {
    connect_raw_with(dir, name, version_hash, DEFAULT_HANDSHAKE_TIMEOUT)
}

/// Binds to the server of interface `name` at `version_hash` in `dir`,
/// waiting at most `timeout` for the whole handshake ([`Error::TimedOut`]
/// after it). No socket there, or one nobody listens on, is
/// [`Error::UnknownName`].
pub fn connect_raw_with(
    dir: &RuntimeDir,
    name: &str,
    version_hash: u64,
    timeout: Duration,
) -> Result<Binding> {
    check_name(name)?;
    let path = dir.socket_path(name)?;
    blocking(|| {
        let socket = UnixStream::connect(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => Error::UnknownName,
            _ => Error::Io(e),
        })?;
        let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
        let peer = Credentials::of(&socket)?;
        send_all_by(&socket, &wire::encode_request(name, version_hash), deadline)?;
        let (reply, fd) = recv_reply_by(&socket, deadline)?;
        let reply = wire::decode_reply(&reply)?;
        match reply.status {
            Status::Ok => {}
            Status::UnknownName => return Err(Error::UnknownName),
            Status::VersionMismatch => {
                return Err(Error::VersionMismatch {
                    ours: version_hash,
                    theirs: reply.version_hash,
                });
            }
            Status::Refused => return Err(Error::Refused),
            Status::BadRequest => {
                return Err(Error::BadHandshake("the server rejected the request"));
            }
            Status::ServerFailed => {
                return Err(Error::Io(io::Error::other(
                    "the server could not create the channel memory",
                )));
            }
        }
        let fd = fd.ok_or(Error::BadReply)?;
        let mapping = Mapping::from_peer(fd, reply.channel_len)?;
        Ok(Binding {
            mapping,
            peer,
            socket,
            name: name.into(),
            version_hash,
        })
    })
}

/// Receives the reply's [`REPLY_LEN`] bytes and at most one descriptor
/// before `deadline`. More than one descriptor, or one the kernel had to
/// drop, is [`Error::BadReply`] (every one received is closed).
fn recv_reply_by(
    socket: &UnixStream,
    deadline: Instant,
) -> Result<([u8; REPLY_LEN], Option<OwnedFd>)> {
    let mut reply = [0u8; REPLY_LEN];
    let mut got = 0;
    let mut fd = None;
    let mut bad = false;
    while got < REPLY_LEN {
        socket.set_read_timeout(Some(remaining(deadline)?))?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let r = rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut reply[got..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let r = match r {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(io_error(e.into())),
            Ok(r) => r,
        };
        bad |= r.flags.contains(ReturnFlags::CTRUNC);
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                for f in fds {
                    bad |= fd.is_some();
                    fd.get_or_insert(f);
                }
            }
        }
        if r.bytes == 0 {
            return Err(Error::PeerDied);
        }
        got += r.bytes;
    }
    if bad {
        return Err(Error::BadReply);
    }
    Ok((reply, fd))
}
