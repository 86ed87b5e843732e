//! The binding handshake's wire format: one request, one reply.
//!
//! Owns the byte layout of both messages and their decoding. Decoding works
//! on fixed-size arrays already copied out of the socket, checks every field
//! and never allocates from a length a peer sent; it must not read a socket
//! itself.
//!
//! All integers are little-endian.
//!
//! Request (client to server), [`REQUEST_LEN`] bytes, then the name:
//!
//! | bytes | field |
//! |-------|-------|
//! | 0..8 | magic `ferryRPC` |
//! | 8..12 | protocol version ([`PROTOCOL`]) |
//! | 12..16 | name length `n`, 1..=100 |
//! | 16..24 | the client's interface version hash |
//! | 24..32 | zero |
//! | 32..32+n | the interface name |
//!
//! Reply (server to client), [`REPLY_LEN`] bytes; an `OK` reply carries the
//! channel's memfd with `SCM_RIGHTS`:
//!
//! | bytes | field |
//! |-------|-------|
//! | 0..8 | magic `ferryRPC` |
//! | 8..12 | status ([`Status`]) |
//! | 12..16 | zero |
//! | 16..24 | the server's interface version hash |
//! | 24..32 | the channel memory's length in bytes (`OK` only, else 0) |

use crate::rpc::dir::MAX_NAME_LEN;
use crate::rpc::error::{Error, Result};

/// The first eight bytes of both messages.
pub(super) const MAGIC: [u8; 8] = *b"ferryRPC";
/// The handshake protocol's version.
pub(super) const PROTOCOL: u32 = 1;
/// The request's fixed part, in bytes.
pub(super) const REQUEST_LEN: usize = 32;
/// The reply's length, in bytes.
pub(super) const REPLY_LEN: usize = 32;

/// A reply's status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Status {
    /// Bound: the memfd comes with the reply.
    Ok = 0,
    /// The server serves another name.
    UnknownName = 1,
    /// The version hashes differ (the reply carries the server's).
    VersionMismatch = 2,
    /// The server's policy refused the client's credentials.
    Refused = 3,
    /// The request did not follow the protocol.
    BadRequest = 4,
    /// The server could not create the channel memory.
    ServerFailed = 5,
}

impl Status {
    fn from_word(w: u32) -> Option<Status> {
        Some(match w {
            0 => Status::Ok,
            1 => Status::UnknownName,
            2 => Status::VersionMismatch,
            3 => Status::Refused,
            4 => Status::BadRequest,
            5 => Status::ServerFailed,
            _ => return None,
        })
    }
}

/// A request's fixed part, decoded and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RequestHead {
    /// The name's length, 1..=[`MAX_NAME_LEN`].
    pub name_len: usize,
    /// The client's interface version hash.
    pub version_hash: u64,
}

/// A reply, decoded and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reply {
    /// What the server decided.
    pub status: Status,
    /// The server's interface version hash.
    pub version_hash: u64,
    /// The channel memory's length (0 unless `status` is `Ok`).
    pub channel_len: u64,
}

/// The request for `name` (already checked) at `version_hash`.
pub(super) fn encode_request(name: &str, version_hash: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(REQUEST_LEN + name.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&PROTOCOL.to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&version_hash.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

/// Decodes a request's fixed part; [`Error::BadHandshake`] says what is
/// wrong with it.
pub(super) fn decode_request_head(b: &[u8; REQUEST_LEN]) -> Result<RequestHead> {
    if b[0..8] != MAGIC {
        return Err(Error::BadHandshake("wrong magic"));
    }
    if u32_at(b, 8) != PROTOCOL {
        return Err(Error::BadHandshake("unknown protocol version"));
    }
    let name_len = u32_at(b, 12) as usize;
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(Error::BadHandshake("name length out of range"));
    }
    if u64_at(b, 24) != 0 {
        return Err(Error::BadHandshake("reserved bytes are not zero"));
    }
    Ok(RequestHead {
        name_len,
        version_hash: u64_at(b, 16),
    })
}

/// The reply with `status`, the server's hash and the channel length.
pub(super) fn encode_reply(status: Status, version_hash: u64, channel_len: u64) -> [u8; REPLY_LEN] {
    let mut out = [0u8; REPLY_LEN];
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&(status as u32).to_le_bytes());
    out[16..24].copy_from_slice(&version_hash.to_le_bytes());
    out[24..32].copy_from_slice(&channel_len.to_le_bytes());
    out
}

/// Decodes a reply; anything off the protocol is [`Error::BadReply`].
pub(super) fn decode_reply(b: &[u8; REPLY_LEN]) -> Result<Reply> {
    if b[0..8] != MAGIC || u32_at(b, 12) != 0 {
        return Err(Error::BadReply);
    }
    let status = Status::from_word(u32_at(b, 8)).ok_or(Error::BadReply)?;
    let channel_len = u64_at(b, 24);
    if status != Status::Ok && channel_len != 0 {
        return Err(Error::BadReply);
    }
    Ok(Reply {
        status,
        version_hash: u64_at(b, 16),
        channel_len,
    })
}

fn u32_at<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_every_bad_field_is_named() {
        let req = encode_request("calc", 0xabcd);
        assert_eq!(req.len(), REQUEST_LEN + 4);
        let head: [u8; REQUEST_LEN] = req[..REQUEST_LEN].try_into().unwrap();
        assert_eq!(
            decode_request_head(&head).unwrap(),
            RequestHead {
                name_len: 4,
                version_hash: 0xabcd
            }
        );
        let bad = |at: usize, v: u8| {
            let mut h = head;
            h[at] = v;
            decode_request_head(&h)
        };
        assert!(matches!(
            bad(0, b'X'),
            Err(Error::BadHandshake("wrong magic"))
        ));
        assert!(matches!(
            bad(8, 2),
            Err(Error::BadHandshake("unknown protocol version"))
        ));
        assert!(matches!(
            bad(12, 0),
            Err(Error::BadHandshake("name length out of range"))
        ));
        assert!(matches!(
            bad(15, 0xff),
            Err(Error::BadHandshake("name length out of range"))
        ));
        assert!(matches!(
            bad(12, 101),
            Err(Error::BadHandshake("name length out of range"))
        ));
        assert!(matches!(
            bad(31, 1),
            Err(Error::BadHandshake("reserved bytes are not zero"))
        ));
    }

    #[test]
    fn a_reply_round_trips_and_anything_off_protocol_is_bad() {
        let ok = encode_reply(Status::Ok, 9, 4096);
        assert_eq!(
            decode_reply(&ok).unwrap(),
            Reply {
                status: Status::Ok,
                version_hash: 9,
                channel_len: 4096
            }
        );
        let mism = encode_reply(Status::VersionMismatch, 9, 0);
        assert_eq!(decode_reply(&mism).unwrap().status, Status::VersionMismatch);
        assert!(matches!(
            decode_reply(&encode_reply(Status::Refused, 0, 1)),
            Err(Error::BadReply)
        ));
        let mut bad = ok;
        bad[8] = 6;
        assert!(matches!(decode_reply(&bad), Err(Error::BadReply)));
        let mut bad = ok;
        bad[1] = 0;
        assert!(matches!(decode_reply(&bad), Err(Error::BadReply)));
        let mut bad = ok;
        bad[13] = 1;
        assert!(matches!(decode_reply(&bad), Err(Error::BadReply)));
    }
}
