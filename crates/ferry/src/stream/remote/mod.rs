//! Streams across processes: a connection opened on a binding (rpc's Unix
//! socket in the per-user runtime directory and a sealed memfd sent with
//! `SCM_RIGHTS`), duplex like a socket, with the same [`Writer`] and
//! [`Reader`] as a stream inside one process.
//!
//! One process [`listen`]s on a name and [`Listener::accept`]s; another
//! [`connect`]s to the name. The memfd holds two byte rings, one per
//! direction (`layout.rs`); each side gets the [`Writer`] of one and the
//! [`Reader`] of the other. Reads, writes, their try-forms, clones inside
//! the process, end-of-file and `BrokenPipe` are a stream's; what the peer
//! process does adds the cases tabled in `ends.rs` (its death is
//! `ConnectionReset` for a reader, `BrokenPipe` for a writer, never a
//! hang), and nothing the peer writes in the shared memory is trusted: a
//! position that breaks the protocol is `InvalidData`, naming the stream
//! and the value, and poisons the connection (`ring.rs`).
//!
//! This room owns the cross-process case of `stream`: the memory's layout
//! and its check (`layout.rs`), the shared rings (`ring.rs`), the waits on
//! futex bells in the shared memory (`wait.rs`), the connection's life and
//! the peer's death (`conn.rs`), and the handles' paths over them
//! (`ends.rs`). It uses rpc's binding (`rpc::bind`: socket, handshake,
//! peer credentials, sealed memfd), its view of a shared mapping
//! (`rpc::region`) and its watcher (`rpc::watch`: pidfd and socket
//! hang-up); it must not reach into the in-process ring, and the rest of
//! `stream` does not reach into rpc.
//!
//! # Picked once, at open
//!
//! A [`Writer`] or [`Reader`] holds either an in-process end or a remote
//! one ([`ends::RemoteWriter`], [`ends::RemoteReader`]): the kind is fixed
//! when the handle is made (by [`pipe`](super::pipe), or here) and a clone
//! keeps it. A call looks at it once, then runs code compiled for that
//! kind and for the handle's path (alone, or taking turns with clones,
//! as in process): no per-byte test.
//!
//! The binding's name space is rpc's (a socket `<name>.sock` in the
//! runtime directory); a stream's binding announces the layout's version
//! in its handshake (an rpc server, or a stream of another layout
//! version, refuses it: `InvalidData`), and the memory's header carries
//! a magic and the version again, checked at connect.

mod conn;
pub(crate) mod ends;
mod layout;
mod ring;
mod wait;

/// The atomics `ring` and `conn` use.
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

use std::fmt;
use std::io;
use std::time::Duration;

use super::bytes::Bytes;
use super::ring::{Put, Take};
use super::{Builder, Padded, Reader, Writer};
use crate::rpc::RuntimeDir;
use crate::rpc::bind::{self, Mapping, Policy};
use crate::rpc::region::ChannelRegion;
use conn::{Conn, Role};

pub use layout::MAX_CAPACITY as MAX_REMOTE_CAPACITY;

/// How long a connect waits for the listener to answer.
const CONNECT_TIMEOUT: Duration = bind::DEFAULT_HANDSHAKE_TIMEOUT;

/// A named stream endpoint that other processes connect to
/// ([`listen`], [`Builder::listen`]). Dropping it removes the name;
/// connections already made go on.
pub struct Listener {
    inner: bind::Listener,
}

/// Listens on `name` in the user's runtime directory, for connections of
/// [`DEFAULT_CAPACITY`](super::DEFAULT_CAPACITY) bytes each way.
///
/// ```
/// use std::io::{Read, Write};
///
/// let name = format!("doc-stream-{}", std::process::id());
/// let listener = ferry::stream::listen(&name).unwrap();
/// let peer = std::thread::spawn(move || {
///     let (mut w, mut r) = ferry::stream::connect(&name).unwrap();
///     w.write_all(b"ping").unwrap();
///     let mut buf = [0; 4];
///     r.read_exact(&mut buf).unwrap();
///     buf
/// });
/// let (mut w, mut r) = listener.accept().unwrap();
/// let mut buf = [0; 4];
/// r.read_exact(&mut buf).unwrap();
/// assert_eq!(&buf, b"ping");
/// w.write_all(b"pong").unwrap();
/// assert_eq!(&peer.join().unwrap(), b"pong");
/// ```
///
/// # Errors
/// As [`Builder::listen`].
pub fn listen(name: &str) -> io::Result<Listener> {
    Builder::new().listen(name)
}

/// Connects to the stream listening on `name` in the user's runtime
/// directory and returns this side's writer and reader.
///
/// # Errors
/// As [`Builder::connect`].
pub fn connect(name: &str) -> io::Result<(Writer, Reader)> {
    Builder::new().connect(name)
}

impl Builder {
    /// Listens on `name` (ASCII letters, digits, `.`, `_`, `-`, at most
    /// 100 bytes) in the user's runtime directory; each connection gets
    /// two rings of this builder's capacity (rounded up to a power of
    /// two). Processes of the same user may connect.
    ///
    /// # Errors
    /// `InvalidInput` for a bad name or a capacity of 0 or above
    /// [`MAX_REMOTE_CAPACITY`]; `AddrInUse` if a live listener has the
    /// name; other I/O errors of the runtime directory and the socket.
    pub fn listen(&self, name: &str) -> io::Result<Listener> {
        if self.capacity == 0 || self.capacity > MAX_REMOTE_CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a stream across processes has a capacity between 1 and {MAX_REMOTE_CAPACITY} bytes, not {}",
                    self.capacity
                ),
            ));
        }
        let capacity = self.capacity.next_power_of_two();
        let dir = RuntimeDir::user().map_err(|e| error(name, e))?;
        let mut inner = bind::Listener::bind_in(&dir, name, layout::BINDING_HASH)
            .map_err(|e| error(name, e))?;
        inner
            .set_prepare(layout::total_len(capacity), prepare)
            .map_err(|e| error(name, e))?;
        Ok(Listener { inner })
    }

    /// Connects to the stream listening on `name` in the user's runtime
    /// directory (the listener chose the capacity; this builder's is not
    /// used).
    ///
    /// # Errors
    /// `NotFound` if nobody listens on `name`; `InvalidData` if the
    /// listener is not a stream of this layout version, or its memory
    /// does not check out; `PermissionDenied` if it refused this process;
    /// `TimedOut` if it did not answer within 5 s.
    pub fn connect(&self, name: &str) -> io::Result<(Writer, Reader)> {
        let dir = RuntimeDir::user().map_err(|e| error(name, e))?;
        let binding = bind::connect_raw_with(&dir, name, layout::BINDING_HASH, CONNECT_TIMEOUT)
            .map_err(|e| error(name, e))?;
        Ok(handles(Conn::open(binding, Role::Connector)?))
    }
}

impl Listener {
    /// Waits for a process to connect and returns this side's writer and
    /// reader of the new connection. A connection that closes before its
    /// handshake is done (a process that died, or one that only checked
    /// whether the name is live, as a second `listen` on it does) is
    /// passed over; a client that fails the handshake otherwise (another
    /// user, a bad request, another layout version) is this call's error:
    /// call again for the next.
    ///
    /// # Errors
    /// As above, and I/O errors of the socket.
    pub fn accept(&self) -> io::Result<(Writer, Reader)> {
        let accepted = loop {
            match self.inner.accept(&Policy::SameUser) {
                Ok(a) => break a,
                Err(crate::rpc::Error::PeerDied) => {}
                Err(e) => return Err(error(self.inner.name(), e)),
            }
        };
        Ok(handles(Conn::open(accepted.binding, Role::Listener)?))
    }

    /// The name listened on.
    pub fn name(&self) -> &str {
        self.inner.name()
    }
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name())
            .finish()
    }
}

/// The public handles of a new connection.
fn handles(c: std::sync::Arc<Conn>) -> (Writer, Reader) {
    let (w, r) = ends::ends(c);
    (Writer::remote(w), Reader::remote(r))
}

/// Writes a stream's header over a fresh binding's memory, before rpc's
/// listener sends it (`Listener::set_prepare`).
fn prepare(m: &Mapping) {
    // SAFETY: the mapping is live for this call and only accessed
    // atomically through the region.
    if let Ok(region) = unsafe { ChannelRegion::from_raw(m.as_ptr(), m.len()) } {
        layout::init(region.words(), (m.len() - layout::DATA) / 2);
    }
}

/// An rpc binding error as the `io::Error` it means for a stream.
fn error(name: &str, e: crate::rpc::Error) -> io::Error {
    use crate::rpc::Error as E;
    use io::ErrorKind as K;
    let kind = match &e {
        E::Io(io) => io.kind(),
        E::UnknownName => K::NotFound,
        E::VersionMismatch { .. } | E::BadReply | E::BadLayout(_) | E::BadHandshake(_) => {
            K::InvalidData
        }
        E::BadName(_) | E::TooLarge => K::InvalidInput,
        E::Refused | E::UnsafeDir(_) => K::PermissionDenied,
        E::NameInUse => K::AddrInUse,
        E::TimedOut => K::TimedOut,
        E::PeerDied => K::ConnectionReset,
        _ => K::Other,
    };
    let what = match &e {
        E::VersionMismatch { .. } => {
            "the listener is not a ferry stream of this layout version".to_owned()
        }
        _ => e.to_string(),
    };
    io::Error::new(kind, format!("stream {name}: {what}"))
}
