//! One connection of the load generator ([`Conn`]): a TCP stream with one
//! 64-byte request outstanding at a time, the request's bytes kept to
//! check the echo against, byte for byte, and the instant it was sent.
//! And [`open`], which opens connections in batches, each confirmed by a
//! first checked round trip before the next batch is opened.
//!
//! This module owns the message format, the echo check and the opening;
//! it works on blocking sockets (opening) and non-blocking ones (the
//! loader's threads) alike and knows nothing of phases or timing windows.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Bytes of every request (and of its echo).
pub const MESSAGE: usize = 64;
/// Connections opened before their first round trips are awaited.
pub const BATCH: usize = 512;
/// How long one `connect`, or a first echo while opening, may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The bytes of request `seq` on connection `id`: the id and the number,
/// then a pattern of both, so that an echo from another connection or of
/// another request, or with one byte changed, differs.
pub fn message(id: u32, seq: u64) -> [u8; MESSAGE] {
    let mut m = [0u8; MESSAGE];
    m[..4].copy_from_slice(&id.to_le_bytes());
    m[4..12].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in m.iter_mut().enumerate().skip(12) {
        *b = (i as u64)
            .wrapping_mul(131)
            .wrapping_add(seq.wrapping_mul(7))
            .wrapping_add(u64::from(id)) as u8;
    }
    m
}

/// A connection with at most one request outstanding.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    id: u32,
    seq: u64,
    sent: [u8; MESSAGE],
    got: [u8; MESSAGE],
    filled: usize,
    at: Instant,
}

impl Conn {
    /// Connection `id` over `stream`, nothing sent yet.
    pub fn new(stream: TcpStream, id: u32) -> Conn {
        Conn {
            stream,
            id,
            seq: 0,
            sent: [0; MESSAGE],
            got: [0; MESSAGE],
            filled: 0,
            at: Instant::now(),
        }
    }

    /// The stream.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends the next request and notes when. One write of 64 bytes into a
    /// send buffer that holds no other data of ours (a request is sent only
    /// once the previous one is echoed): a short write cannot happen, and
    /// if it did the run fails rather than measure something else.
    pub fn send(&mut self) -> Result<(), String> {
        self.seq += 1;
        self.sent = message(self.id, self.seq);
        self.filled = 0;
        self.at = Instant::now();
        loop {
            return match (&self.stream).write(&self.sent) {
                Ok(MESSAGE) => Ok(()),
                Ok(n) => Err(format!(
                    "connection {}: short write of {n} of {MESSAGE} bytes",
                    self.id
                )),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => Err(format!("connection {}: write: {e}", self.id)),
            };
        }
    }

    /// Reads what has arrived of the echo. `Some(latency)` once all 64
    /// bytes are in and equal to the request; `None` while some are
    /// missing (would block, or a read timeout on a blocking socket).
    pub fn receive(&mut self) -> Result<Option<Duration>, String> {
        loop {
            match (&self.stream).read(&mut self.got[self.filled..]) {
                Ok(0) => {
                    return Err(format!(
                        "connection {}: closed by the server with {} of {MESSAGE} bytes of \
                         echo {} in",
                        self.id, self.filled, self.seq
                    ));
                }
                Ok(n) => {
                    self.filled += n;
                    if self.filled == MESSAGE {
                        let latency = self.at.elapsed();
                        self.check()?;
                        return Ok(Some(latency));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None);
                }
                Err(e) => return Err(format!("connection {}: read: {e}", self.id)),
            }
        }
    }

    /// An error naming the first byte where the echo differs.
    fn check(&self) -> Result<(), String> {
        match self.sent.iter().zip(&self.got).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!(
                "connection {}: echo of request {} differs at byte {i}: sent {:#04x}, got {:#04x}",
                self.id, self.seq, self.sent[i], self.got[i]
            )),
        }
    }
}

impl Drop for Conn {
    /// Closes with a reset (`SO_LINGER` 0), so that no `TIME_WAIT` entry
    /// holds the port: runs of 10,000 connections follow each other within
    /// seconds, and the local port range has about 28,000 ports.
    fn drop(&mut self) {
        let _ = rustix::net::sockopt::set_socket_linger(&self.stream, Some(Duration::ZERO));
    }
}

/// Opens `n` connections to `addr` in batches of [`BATCH`]: each batch is
/// connected, then each of its connections makes one checked round trip,
/// before the next batch. `between` runs after each batch.
pub fn open(addr: SocketAddr, n: usize, mut between: impl FnMut()) -> Result<Vec<Conn>, String> {
    let id = |i: usize| u32::try_from(i).map_err(|_| format!("{n} connections are too many"));
    let mut conns: Vec<Conn> = Vec::with_capacity(n);
    while conns.len() < n {
        let start = conns.len();
        let end = n.min(start + BATCH);
        for i in start..end {
            let stream = TcpStream::connect_timeout(&addr, OPEN_TIMEOUT)
                .map_err(|e| format!("connect {} of {n}: {e}", i + 1))?;
            stream
                .set_nodelay(true)
                .and_then(|()| stream.set_read_timeout(Some(OPEN_TIMEOUT)))
                .map_err(|e| format!("connection {i}: options: {e}"))?;
            let mut conn = Conn::new(stream, id(i)?);
            conn.send()?;
            conns.push(conn);
        }
        for (i, conn) in conns[start..end].iter_mut().enumerate() {
            if conn.receive()?.is_none() {
                return Err(format!(
                    "connection {}: no first echo within {OPEN_TIMEOUT:?} ({} connections \
                     answered)",
                    start + i,
                    start + i
                ));
            }
        }
        between();
    }
    Ok(conns)
}
