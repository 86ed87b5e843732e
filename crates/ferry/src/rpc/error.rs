//! The typed error of every `rpc` operation.
//!
//! Owns [`Error`] and [`Result`]. Every way a peer, the runtime directory or
//! the kernel can make binding or calling fail has a variant here, so that a
//! caller can match on what happened instead of parsing a message. Details
//! are `&'static str`s: nothing a peer sent is ever copied into an error.

use std::fmt;
use std::io;

use super::layout::LayoutError;

/// What went wrong in binding to or calling another process.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The peer process is gone, or hung up before the exchange was over.
    PeerDied,
    /// The peer did not answer within the time allowed (binding).
    TimedOut,
    /// The call's deadline passed before its reply came: the call was
    /// withdrawn (its slot reclaimed safely) and the server's activation
    /// alerted; a late reply is discarded.
    DeadlineExceeded,
    /// The call was aborted ([`Call::abort`](super::Call::abort)) before
    /// its reply came: the server's activation was alerted and its reply
    /// will be discarded.
    Aborted,
    /// The server's pool of activations is at its maximum and the server
    /// chose to refuse calls then ([`WhenFull::Busy`](super::WhenFull::Busy)),
    /// or its bounded wait line is full.
    Busy,
    /// The call would make its logical thread visit more than
    /// [`MAX_CHAIN_DEPTH`](super::MAX_CHAIN_DEPTH) processes at once.
    ChainTooDeep {
        /// The depth the call would reach.
        depth: usize,
    },
    /// The two sides' interface version hashes differ: `ours` is this
    /// side's, `theirs` the peer's.
    VersionMismatch {
        /// This side's interface version hash.
        ours: u64,
        /// The peer's interface version hash.
        theirs: u64,
    },
    /// The server's policy does not allow this client (its credentials, as
    /// the kernel reports them, were refused).
    Refused,
    /// Nobody serves this interface name (no socket, a stale socket, or a
    /// server that serves another name).
    UnknownName,
    /// A size is above what this side accepts.
    TooLarge,
    /// The peer's answer does not follow the protocol.
    BadReply,
    /// The shared memory the peer handed over is not what the protocol
    /// requires (size, seals or kind of file); the detail says which.
    BadLayout(&'static str),
    /// A client's binding request does not follow the protocol; the detail
    /// says what was wrong.
    BadHandshake(&'static str),
    /// An interface name that cannot be used; the detail says why.
    BadName(&'static str),
    /// A live server already serves this interface name.
    NameInUse,
    /// The runtime directory cannot be trusted (not a directory, a symbolic
    /// link, owned by another user, or open to the group or others); the
    /// detail says which.
    UnsafeDir(&'static str),
    /// The server has no operation of this number.
    UnknownOp {
        /// The operation asked for.
        op: u32,
    },
    /// The server could not decode the call's arguments.
    BadArgs,
    /// The server's handler panicked on this call (the server goes on).
    ServerPanicked,
    /// This side closed the channel or server: nothing more goes through it.
    Closed,
    /// A call was made where no ferry runtime polls the channel: connect
    /// and serve on a ferry thread (inside `ferry::run` or a `Runtime`).
    NoRuntime,
    /// A system call failed.
    Io(io::Error),
    /// A remote transport ([`Remote`](super::remote::Remote)) failed in a
    /// way a local call has no counterpart for; the text says how.
    Transport(String),
}

/// The result of an `rpc` operation.
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::PeerDied => f.write_str("the peer process died or hung up"),
            Error::TimedOut => f.write_str("the peer did not answer in time"),
            Error::DeadlineExceeded => {
                f.write_str("the call's deadline passed before its reply came")
            }
            Error::Aborted => f.write_str("the call was aborted before its reply came"),
            Error::Busy => f.write_str("the server has no activation free and refuses to queue"),
            Error::ChainTooDeep { depth } => write!(
                f,
                "the call would make its chain {depth} processes deep (the most is {})",
                super::MAX_CHAIN_DEPTH
            ),
            Error::VersionMismatch { ours, theirs } => write!(
                f,
                "interface version mismatch: ours is {ours:#018x}, the peer's is {theirs:#018x}"
            ),
            Error::Refused => f.write_str("the server's policy refused this client"),
            Error::UnknownName => f.write_str("nobody serves this interface name"),
            Error::TooLarge => f.write_str("a size is above the allowed maximum"),
            Error::BadReply => f.write_str("the peer's reply does not follow the protocol"),
            Error::BadLayout(what) => write!(f, "bad shared memory from the peer: {what}"),
            Error::BadHandshake(what) => write!(f, "bad binding request: {what}"),
            Error::BadName(what) => write!(f, "bad interface name: {what}"),
            Error::NameInUse => f.write_str("a live server already serves this interface name"),
            Error::UnsafeDir(what) => write!(f, "unsafe runtime directory: {what}"),
            Error::UnknownOp { op } => write!(f, "the server has no operation {op}"),
            Error::BadArgs => f.write_str("the server could not decode the call's arguments"),
            Error::ServerPanicked => f.write_str("the server's handler panicked on this call"),
            Error::Closed => f.write_str("the channel was closed on this side"),
            Error::NoRuntime => {
                f.write_str("not on a ferry thread: channels are polled by a ferry runtime")
            }
            Error::Io(e) => write!(f, "system call failed: {e}"),
            Error::Transport(what) => write!(f, "remote transport: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<LayoutError> for Error {
    /// A channel whose memory does not check out: the detail names the
    /// kind of fault, not the values found (they come from the peer).
    fn from(e: LayoutError) -> Self {
        Error::BadLayout(match e {
            LayoutError::RegionMisaligned | LayoutError::RegionTooSmall { .. } => {
                "the channel memory is too small or misaligned"
            }
            LayoutError::BadMagic { .. } => "the channel memory holds no ferry channel",
            LayoutError::BadVersion { .. } => "the channel's layout version is not this side's",
            LayoutError::Queue(_) => "a queue in the channel does not check out",
            _ => "the channel header's sizes or areas do not check out",
        })
    }
}

impl From<rustix::io::Errno> for Error {
    fn from(e: rustix::io::Errno) -> Self {
        Error::Io(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_both_hashes_and_io_has_a_source() {
        let e = Error::VersionMismatch { ours: 1, theirs: 2 };
        let s = e.to_string();
        assert!(
            s.contains("0x0000000000000001") && s.contains("0x0000000000000002"),
            "{s}"
        );
        let io = Error::from(io::Error::from(io::ErrorKind::NotFound));
        assert!(std::error::Error::source(&io).is_some());
        assert!(std::error::Error::source(&Error::Refused).is_none());
    }
}
