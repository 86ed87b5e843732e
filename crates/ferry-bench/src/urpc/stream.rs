//! The two byte-stream peers: `unix socket` (a `SOCK_STREAM` socketpair)
//! and `pipe` (one pipe each way). A message is an 8-byte header (the call
//! number, little-endian; [`STOP`] tells the server to exit) followed by
//! `size` bytes; the client writes header and arguments with one
//! `writev` and reads header and result with `readv`.
//!
//! This module owns that framing, the client's side of a call and the
//! server's loop. It measures nothing. Nothing read is trusted: a header
//! that is not the call expected is an error, end of stream ends the
//! server.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};

use crate::error::Error;

/// The header that tells the server to exit.
pub const STOP: u64 = u64::MAX;

/// Bytes of a message's header.
const HEADER: usize = 8;

/// Writes all of `bufs`, however the kernel splits the writes.
fn write_all_vectored(w: &mut impl Write, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills all of `bufs`; `Ok(false)` on end of stream before the first
/// byte, an error on end of stream within.
fn read_exact_vectored(r: &mut impl Read, mut bufs: &mut [IoSliceMut<'_>]) -> io::Result<bool> {
    let mut first = true;
    while !bufs.is_empty() {
        match r.read_vectored(bufs) {
            Ok(0) if first => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                first = false;
                IoSliceMut::advance_slices(&mut bufs, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The client's side: where it writes calls and reads replies.
#[derive(Debug)]
pub struct Client<R, W> {
    rx: R,
    tx: W,
    calls: u64,
}

impl<R: Read, W: Write> Client<R, W> {
    /// A client reading replies from `rx` and writing calls to `tx`.
    pub fn new(rx: R, tx: W) -> Client<R, W> {
        Client { rx, tx, calls: 0 }
    }

    /// One call: `args` out, the reply's payload into `result` (both the
    /// call's size).
    pub fn call(&mut self, args: &[u8], result: &mut [u8]) -> Result<(), Error> {
        self.calls += 1;
        let header = self.calls.to_le_bytes();
        write_all_vectored(
            &mut self.tx,
            &mut [IoSlice::new(&header), IoSlice::new(args)],
        )
        .map_err(|e| Error(format!("writing call {}: {e}", self.calls)))?;
        let mut got = [0u8; HEADER];
        let full = read_exact_vectored(
            &mut self.rx,
            &mut [IoSliceMut::new(&mut got), IoSliceMut::new(result)],
        )
        .map_err(|e| Error(format!("reading reply {}: {e}", self.calls)))?;
        if !full {
            return Err(Error(format!("server gone before reply {}", self.calls)));
        }
        let seq = u64::from_le_bytes(got);
        if seq != self.calls {
            return Err(Error(format!("reply {seq} to call {}", self.calls)));
        }
        Ok(())
    }

    /// Tells the server to exit.
    pub fn stop(&mut self) -> Result<(), Error> {
        self.tx
            .write_all(&STOP.to_le_bytes())
            .map_err(|e| Error(format!("writing stop: {e}")))
    }
}

/// The server's loop: reads each call into private memory and writes it
/// back as the reply, until `STOP` or end of stream.
///
/// # Errors
/// A read or write failing, a call number out of order, or a stream
/// ending inside a message.
pub fn serve(mut rx: impl Read, mut tx: impl Write, size: usize) -> Result<(), Error> {
    let mut msg = vec![0u8; HEADER + size];
    let mut expect: u64 = 1;
    loop {
        let (header, payload) = msg.split_at_mut(HEADER);
        match read_exact_vectored(&mut rx, &mut [IoSliceMut::new(header)]) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => return Err(Error(format!("reading call {expect}: {e}"))),
        }
        let seq = u64::from_le_bytes(header.try_into().expect("8 bytes"));
        if seq == STOP {
            return Ok(());
        }
        if seq != expect {
            return Err(Error(format!("call {seq}: expected {expect}")));
        }
        rx.read_exact(payload)
            .map_err(|e| Error(format!("reading call {expect}: {e}")))?;
        tx.write_all(&msg)
            .map_err(|e| Error(format!("replying to call {expect}: {e}")))?;
        expect += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn socketpair_and_pipes_echo_every_size() {
        for size in [0, 32, 1024, 200_000] {
            let (c, s) = UnixStream::pair().unwrap();
            let server = std::thread::spawn(move || serve(&s, &s, size));
            let mut client = Client::new(&c, &c);
            let mut result = vec![0u8; size];
            for i in 0..20u8 {
                let args = vec![i; size];
                client.call(&args, &mut result).unwrap();
                assert_eq!(result, args);
            }
            client.stop().unwrap();
            server.join().unwrap().unwrap();

            let (req_r, req_w) = io::pipe().unwrap();
            let (rep_r, rep_w) = io::pipe().unwrap();
            let server = std::thread::spawn(move || serve(req_r, rep_w, size));
            let mut client = Client::new(rep_r, req_w);
            client.call(&vec![9; size], &mut result).unwrap();
            assert_eq!(result, vec![9; size]);
            drop(client);
            server.join().unwrap().unwrap();
        }
    }

    #[test]
    fn out_of_order_calls_and_torn_messages_are_errors() {
        let (c, s) = UnixStream::pair().unwrap();
        (&c).write_all(&7u64.to_le_bytes()).unwrap();
        let err = serve(&s, &s, 4).unwrap_err();
        assert!(err.0.contains("expected 1"), "{err}");

        let (c, s) = UnixStream::pair().unwrap();
        (&c).write_all(&1u64.to_le_bytes()).unwrap();
        (&c).write_all(&[1, 2]).unwrap();
        drop(c);
        assert!(serve(&s, &s, 4).is_err(), "a message cut short");

        let (c, s) = UnixStream::pair().unwrap();
        (&s).write_all(&5u64.to_le_bytes()).unwrap();
        (&s).write_all(&[0; 4]).unwrap();
        let mut client = Client::new(&c, &c);
        let err = client.call(&[0; 4], &mut [0; 4]).unwrap_err();
        assert!(err.0.contains("reply 5 to call 1"), "{err}");
    }
}
