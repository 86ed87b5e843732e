//! Binding: a client and a server meet over a Unix socket in the runtime
//! directory and come away sharing one sealed memfd.
//!
//! Owns [`Listener`] (the server's named socket, its stale-socket recovery
//! and [`Listener::accept`]), [`connect_raw`], the handshake both run, the
//! peer check ([`Policy`] over the kernel's [`Credentials`]) and what a
//! finished binding holds ([`Binding`]). The wire format is in `wire`, the
//! memory in `mapping`, the client's side of the exchange in `connect` and
//! the reads and writes under a deadline in `deadline`.
//!
//! What it must not do: trust anything the peer sends (requests and replies
//! are read into fixed buffers with a bounded size and a deadline, then
//! checked field by field; a received memfd is checked before it is
//! mapped), block without bound on a peer (every read and write of the
//! handshake has a deadline), or leak a descriptor on any path. After
//! binding, the socket carries nothing; it stays open because its hang-up
//! tells that the peer went away.
//!
//! The exchange, from the client's `connect` on:
//!
//! 1. the server accepts and asks the kernel for the client's credentials
//!    (`SO_PEERCRED`), the client likewise for the server's;
//! 2. the client sends its request: the interface name and version hash;
//! 3. the server checks, in order, the policy (else `Refused`), the name
//!    (else `UnknownName`) and the version hash (else `VersionMismatch`
//!    with its own hash), replying with that status, and returns the error;
//! 4. on success it creates the channel memory and replies `OK` with the
//!    memfd attached; the client checks the memfd and maps it.
//!
//! Each blocking step runs inside [`crate::blocking`], so a ferry thread
//! that binds does not hold its processor while it waits.

mod connect;
mod deadline;
mod mapping;
mod wire;

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

pub use connect::{connect_raw, connect_raw_in, connect_raw_with};
pub use mapping::{MAX_CHANNEL_LEN, Mapping};

use super::dir::RuntimeDir;
use super::error::{Error, Result};
use crate::upcall::blocking;
use deadline::{io_error, read_exact_by, remaining};
use wire::{REPLY_LEN, REQUEST_LEN, Status};

/// How long a handshake may take, on either side, unless set otherwise.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The channel memory's length unless the server sets another (1 MiB).
pub const DEFAULT_CHANNEL_LEN: usize = 1 << 20;

/// A peer process's credentials, as the kernel recorded them when the
/// connection was made (`SO_PEERCRED`): they cannot be forged by the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    /// The peer's process id.
    pub pid: i32,
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's effective group id.
    pub gid: u32,
}

impl Credentials {
    fn of(socket: &UnixStream) -> Result<Credentials> {
        let c = rustix::net::sockopt::socket_peercred(socket)?;
        Ok(Credentials {
            pid: c.pid.as_raw_nonzero().get(),
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
        })
    }
}

/// Which clients a server binds.
#[derive(Clone, Copy, Default)]
pub enum Policy<'a> {
    /// Only processes of the server's own (effective) user.
    #[default]
    SameUser,
    /// Exactly the processes for which the function returns true (it sees
    /// every client, of this user or another).
    Custom(&'a dyn Fn(Credentials) -> bool),
}

impl Policy<'_> {
    fn allows(&self, peer: Credentials) -> bool {
        match self {
            Policy::SameUser => peer.uid == rustix::process::geteuid().as_raw(),
            Policy::Custom(f) => f(peer),
        }
    }
}

impl std::fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::SameUser => f.write_str("SameUser"),
            Policy::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// One side of a finished binding: the shared channel memory, who the peer
/// is, and the socket, kept open only as a sign of the peer's life.
#[derive(Debug)]
pub struct Binding {
    mapping: Mapping,
    peer: Credentials,
    socket: UnixStream,
    name: Box<str>,
    version_hash: u64,
}

impl Binding {
    /// The channel memory both sides map.
    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// The peer's credentials (from `SO_PEERCRED`).
    pub fn peer(&self) -> Credentials {
        self.peer
    }

    /// The peer's process id (from `SO_PEERCRED`).
    pub fn peer_pid(&self) -> i32 {
        self.peer.pid
    }

    /// The binding socket. Nothing is sent on it after binding; it becomes
    /// readable (end of file) when the peer closes it or dies.
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Hangs up the binding socket (both directions): the peer's watch sees
    /// it at once, while the memory stays mapped for whoever still uses it.
    pub(crate) fn hang_up(&self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }

    /// The interface name this binding is for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface version hash both sides agreed on.
    pub fn version_hash(&self) -> u64 {
        self.version_hash
    }
}

/// What [`Listener::accept`] returns: the server's side of a binding and
/// the client's credentials.
#[derive(Debug)]
pub struct Accepted {
    /// The server's side of the binding.
    pub binding: Binding,
    /// The client's credentials (as in `binding.peer()`).
    pub peer: Credentials,
}

/// A server's named binding socket in the runtime directory. Dropping it
/// removes the socket file, if it is still this listener's.
#[derive(Debug)]
pub struct Listener {
    socket: UnixListener,
    path: PathBuf,
    name: Box<str>,
    version_hash: u64,
    channel_len: usize,
    timeout: Duration,
    /// The socket file's device and inode, to remove only our own file.
    file: (u64, u64),
    /// The channel laid over each binding's memory before it is sent.
    layout: Option<super::layout::ChannelLayout>,
    /// Or another layout's header, written by this function.
    prepare: Option<fn(&Mapping)>,
}

impl Listener {
    /// Serves interface `name` at `version_hash` in the user's runtime
    /// directory ([`RuntimeDir::user`]).
    pub fn bind(name: &str, version_hash: u64) -> Result<Listener> {
        Listener::bind_in(&RuntimeDir::user()?, name, version_hash)
    }

    /// Serves interface `name` at `version_hash` in `dir`, at
    /// `<dir>/<name>.sock`. A socket file left there by a server that is
    /// gone (a connection to it is refused) is replaced; a live server
    /// there gives [`Error::NameInUse`] (and sees one connection that
    /// closes at once); a file that is not a socket is left alone and gives
    /// an `AlreadyExists` [`Error::Io`].
    pub fn bind_in(dir: &RuntimeDir, name: &str, version_hash: u64) -> Result<Listener> {
        let path = dir.socket_path(name)?;
        let socket = match UnixListener::bind(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                replace_stale(&path)?;
                UnixListener::bind(&path)?
            }
            Err(e) => return Err(Error::Io(e)),
        };
        let meta = std::fs::symlink_metadata(&path)?;
        Ok(Listener {
            socket,
            path,
            name: name.into(),
            version_hash,
            channel_len: DEFAULT_CHANNEL_LEN,
            timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            file: (meta.dev(), meta.ino()),
            layout: None,
            prepare: None,
        })
    }

    /// Sets the length of the channel memory each binding gets: 1 byte to
    /// [`MAX_CHANNEL_LEN`] ([`Error::TooLarge`] above, [`Error::BadLayout`]
    /// for 0).
    pub fn set_channel_len(&mut self, len: usize) -> Result<()> {
        if len == 0 {
            return Err(Error::BadLayout("the memory is empty"));
        }
        if len > MAX_CHANNEL_LEN {
            return Err(Error::TooLarge);
        }
        self.channel_len = len;
        Ok(())
    }

    /// Lays a channel of `layout` over each binding's memory (sized to
    /// fit) before it is handed to the client, so that the client can
    /// attach as soon as it has it.
    pub(crate) fn set_layout(&mut self, layout: super::layout::ChannelLayout) -> Result<()> {
        self.set_channel_len(layout.total_size())?;
        self.layout = Some(layout);
        Ok(())
    }

    /// Gives each binding `len` bytes of memory, over which `prepare`
    /// writes what the client must find there before it is handed over
    /// (a memory that is not a channel: a stream's, `stream/remote`).
    pub(crate) fn set_prepare(&mut self, len: usize, prepare: fn(&Mapping)) -> Result<()> {
        self.set_channel_len(len)?;
        self.prepare = Some(prepare);
        Ok(())
    }

    /// The channel layout laid over each binding, if set.
    pub(crate) fn layout(&self) -> Option<super::layout::ChannelLayout> {
        self.layout
    }

    /// Makes a waiting (and every later) [`accept`](Self::accept) fail at
    /// once: for a server that stops.
    pub(crate) fn shutdown(&self) {
        let _ = rustix::net::shutdown(&self.socket, rustix::net::Shutdown::Read);
    }

    /// Sets how long one handshake may take before [`accept`](Self::accept)
    /// gives up on the client with [`Error::TimedOut`] (not zero).
    pub fn set_handshake_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
    }

    /// The socket file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The interface name served.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for one client and binds it: checks its credentials with
    /// `policy`, reads its request (bounded in size and by the handshake
    /// timeout), checks its name and version hash, creates the channel
    /// memory and hands it over. Every failure is this client's alone and
    /// returned as an error (the client gets a reply saying why, where
    /// there is one): a server loops over `accept`.
    pub fn accept(&self, policy: &Policy<'_>) -> Result<Accepted> {
        blocking(|| {
            let (socket, _) = self.socket.accept()?;
            let deadline = Instant::now() + self.timeout;
            self.handshake(socket, policy, deadline)
        })
    }

    fn handshake(
        &self,
        socket: UnixStream,
        policy: &Policy<'_>,
        deadline: Instant,
    ) -> Result<Accepted> {
        let peer = Credentials::of(&socket)?;
        let mut head = [0u8; REQUEST_LEN];
        read_exact_by(&socket, &mut head, deadline)?;
        let head = match wire::decode_request_head(&head) {
            Ok(h) => h,
            Err(e) => {
                let _ = self.reply(&socket, Status::BadRequest, None, deadline);
                return Err(e);
            }
        };
        let mut name = [0u8; super::dir::MAX_NAME_LEN];
        let name = &mut name[..head.name_len];
        read_exact_by(&socket, name, deadline)?;
        if !policy.allows(peer) {
            let _ = self.reply(&socket, Status::Refused, None, deadline);
            return Err(Error::Refused);
        }
        if *name != *self.name.as_bytes() {
            let _ = self.reply(&socket, Status::UnknownName, None, deadline);
            return Err(Error::UnknownName);
        }
        if head.version_hash != self.version_hash {
            let _ = self.reply(&socket, Status::VersionMismatch, None, deadline);
            return Err(Error::VersionMismatch {
                ours: self.version_hash,
                theirs: head.version_hash,
            });
        }
        let mapping = match Mapping::create(self.channel_len).and_then(|m| self.lay_out(m)) {
            Ok(m) => m,
            Err(e) => {
                let _ = self.reply(&socket, Status::ServerFailed, None, deadline);
                return Err(e);
            }
        };
        self.reply(&socket, Status::Ok, Some(&mapping), deadline)?;
        let binding = Binding {
            mapping,
            peer,
            socket,
            name: self.name.clone(),
            version_hash: self.version_hash,
        };
        Ok(Accepted { binding, peer })
    }

    /// Lays the channel out over `mapping`, if this listener has a layout.
    fn lay_out(&self, mapping: Mapping) -> Result<Mapping> {
        if let Some(layout) = &self.layout {
            // SAFETY: `mapping` is mapped, readable and writable while it
            // lives, which outlasts this region (dropped at the end of this
            // block); the region is accessed as `ChannelRegion` requires.
            let region =
                unsafe { super::layout::ChannelRegion::from_raw(mapping.as_ptr(), mapping.len()) }
                    .map_err(Error::from)?;
            super::layout::init(region, layout).map_err(Error::from)?;
        }
        if let Some(prepare) = self.prepare {
            prepare(&mapping);
        }
        Ok(mapping)
    }

    /// Sends the reply with `status`, with the memfd of `mapping` attached.
    fn reply(
        &self,
        socket: &UnixStream,
        status: Status,
        mapping: Option<&Mapping>,
        deadline: Instant,
    ) -> Result<()> {
        let len = mapping.map_or(0, |m| m.len() as u64);
        let reply = wire::encode_reply(status, self.version_hash, len);
        socket.set_write_timeout(Some(remaining(deadline)?))?;
        let fds;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if let Some(m) = mapping {
            fds = [m.as_fd()];
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return Err(Error::Io(io::Error::other(
                    "no room for the memfd in the control buffer",
                )));
            }
        }
        let sent = loop {
            match rustix::net::sendmsg(
                socket,
                &[IoSlice::new(&reply)],
                &mut control,
                SendFlags::NOSIGNAL,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                r => break r,
            }
        };
        match sent {
            Ok(n) if n == REPLY_LEN => Ok(()),
            // A 32-byte reply on a fresh socket goes whole or not at all.
            Ok(_) => Err(Error::PeerDied),
            Err(e) => Err(io_error(e.into())),
        }
    }
}

impl AsFd for Listener {
    /// The listening socket (readable when a client is waiting).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl Listener {
    /// Removes the socket file if it is still this listener's: nobody can
    /// bind by name any more (dropping does it too).
    pub(crate) fn unlink(&self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.file
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// Removes the socket file at `path` if no server answers on it.
fn replace_stale(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_socket() {
        return Err(Error::Io(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is in the way of the binding socket",
        )));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(Error::NameInUse),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::Io(e)),
                _ => Ok(()),
            }
        }
        Err(e) => Err(Error::Io(e)),
    }
}
