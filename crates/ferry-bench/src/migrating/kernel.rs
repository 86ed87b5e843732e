//! The `kernel static` system: Mach's static RPC in its Linux form. The
//! server is a fixed pool of plain kernel threads that all block in
//! `recv` on one end of a `SOCK_SEQPACKET` Unix socket pair; the kernel
//! hands each call (one record: a header and the arguments) to one of
//! them, which runs [`proto::handle`] and sends the reply record back on
//! the same socket. The client sends a call and blocks in `recv` for its
//! reply.
//!
//! The server measures its own path with the clock ferry's servers use
//! for `measure_path` (the time-stamp counter, [`cycles`], its rate
//! calibrated once against `Instant` over 2 ms as ferry calibrates it):
//! from its `recv` returning the call (the call seen by the server) to the
//! handler's entry, and from the handler's return to its `send` of the
//! reply returning (the reply posted). The kernel's wake-up of a service
//! thread happens before `recv` returns, so it is in the round trip, not
//! in that path.
//!
//! This module owns the record format, both ends and the pool. Nothing
//! read is trusted: a short record, a reply to another call, or a record
//! longer than the buffer is an error.

use std::io::IoSlice;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::net::{
    AddressFamily, RecvFlags, SendAncillaryBuffer, SendFlags, Shutdown, SocketFlags, SocketType,
};

use super::proto::{self, Burner, PathSums, Refusal};
use crate::error::Error;

/// Service threads of the pool.
pub const SERVICE_THREADS: usize = 4;

/// Bytes of a record's header: the operation (a call) or status (a
/// reply) as a `u32`, 4 bytes of padding, the call's number as a `u64`;
/// all little-endian.
const HEADER: usize = 16;

/// The largest arguments or result carried.
pub const MAX_LEN: usize = 64 * 1024;

/// A reply's status: the result follows.
const OK: u32 = 0;

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    Error(format!("kernel static {what}: {e}"))
}

/// A connected pair: the client's end and the server's.
///
/// # Errors
/// `socketpair` failed.
pub fn pair() -> Result<(OwnedFd, OwnedFd), Error> {
    rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| io("socketpair", e))
}

fn header(word: u32, seq: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&word.to_le_bytes());
    h[8..].copy_from_slice(&seq.to_le_bytes());
    h
}

/// The word and call number of a record, and its body.
fn parse(record: &[u8]) -> Result<(u32, u64, &[u8]), Error> {
    if record.len() < HEADER {
        return Err(Error(format!("a record of {} bytes", record.len())));
    }
    let word = u32::from_le_bytes(record[..4].try_into().expect("4 bytes"));
    let seq = u64::from_le_bytes(record[8..HEADER].try_into().expect("8 bytes"));
    Ok((word, seq, &record[HEADER..]))
}

/// Sends one record of `head` and `body`.
fn send(fd: &OwnedFd, head: &[u8], body: &[u8]) -> Result<(), Error> {
    let iov = [IoSlice::new(head), IoSlice::new(body)];
    let n = rustix::net::sendmsg(
        fd,
        &iov,
        &mut SendAncillaryBuffer::default(),
        SendFlags::NOSIGNAL,
    )
    .map_err(|e| io("send", e))?;
    if n != head.len() + body.len() {
        return Err(Error(format!("kernel static: sent {n} bytes of a record")));
    }
    Ok(())
}

/// Receives one record into `buf`; its length, or `None` at the end
/// (the socket shut down or the peer gone).
fn recv(fd: &OwnedFd, buf: &mut [u8]) -> Result<Option<usize>, Error> {
    loop {
        match rustix::net::recv(fd, &mut *buf, RecvFlags::TRUNC) {
            Ok((_, 0)) => return Ok(None),
            Ok((_, len)) if len > buf.len() => {
                return Err(Error(format!("kernel static: a record of {len} bytes")));
            }
            Ok((_, len)) => return Ok(Some(len)),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io("recv", e)),
        }
    }
}

/// The client's end.
#[derive(Debug)]
pub struct Client {
    fd: OwnedFd,
    seq: u64,
    buf: Vec<u8>,
}

impl Client {
    /// A client on its end of [`pair`].
    pub fn new(fd: OwnedFd) -> Client {
        Client {
            fd,
            seq: 0,
            buf: vec![0; HEADER + MAX_LEN],
        }
    }

    /// Calls `op` with `args` and waits for the result.
    ///
    /// # Errors
    /// The socket failed or closed, the reply is for another call, or the
    /// server refused the call.
    pub fn call(&mut self, op: u32, args: &[u8]) -> Result<Vec<u8>, Error> {
        if args.len() > MAX_LEN {
            return Err(Error(format!(
                "kernel static: {} bytes of arguments",
                args.len()
            )));
        }
        self.seq += 1;
        send(&self.fd, &header(op, self.seq), args)?;
        let len = recv(&self.fd, &mut self.buf)?
            .ok_or_else(|| Error("kernel static: the server is gone".into()))?;
        let (status, seq, body) = parse(&self.buf[..len])?;
        if seq != self.seq {
            return Err(Error(format!(
                "kernel static: the reply to call {seq} came for call {}",
                self.seq
            )));
        }
        if status != OK {
            return Err(Error(format!(
                "kernel static: call {op} refused ({status})"
            )));
        }
        Ok(body.to_vec())
    }
}

/// The CPU's time-stamp counter (reference cycles; one rate on every core
/// of a machine with a constant, non-stop counter, which Linux requires to
/// use it as its clock).
#[inline]
fn cycles() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 CPU and has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Nanoseconds per [`cycles`] tick, measured once against `Instant` over
/// 2 ms.
fn ns_per_cycle() -> f64 {
    static NS: OnceLock<f64> = OnceLock::new();
    *NS.get_or_init(|| {
        let (t0, c0) = (Instant::now(), cycles());
        while t0.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let (ns, c) = (t0.elapsed().as_nanos() as f64, cycles().wrapping_sub(c0));
        ns / (c.max(1) as f64)
    })
}

/// A difference of [`cycles`] in whole ns.
fn cycles_to_ns(c: u64) -> u64 {
    (c as f64 * ns_per_cycle()) as u64
}

/// The server's sums (in [`cycles`]), shared by its service threads.
#[derive(Debug, Default)]
struct Sums {
    calls: AtomicU64,
    to_handler: AtomicU64,
    to_reply: AtomicU64,
}

impl Sums {
    fn add(&self, to_handler: u64, to_reply: u64) {
        self.to_handler.fetch_add(to_handler, Ordering::Relaxed);
        self.to_reply.fetch_add(to_reply, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> PathSums {
        PathSums {
            calls: self.calls.load(Ordering::Relaxed),
            to_handler_ns: cycles_to_ns(self.to_handler.load(Ordering::Relaxed)),
            to_reply_ns: cycles_to_ns(self.to_reply.load(Ordering::Relaxed)),
        }
    }
}

/// The server: [`SERVICE_THREADS`] kernel threads serving one socket.
#[derive(Debug)]
pub struct Server {
    fd: Arc<OwnedFd>,
    threads: Vec<JoinHandle<Result<(), Error>>>,
}

impl Server {
    /// Starts the pool on the server's end of [`pair`].
    ///
    /// # Errors
    /// A thread could not be started (those started are stopped).
    pub fn start(fd: OwnedFd, burner: Burner) -> Result<Server, Error> {
        let mut server = Server {
            fd: Arc::new(fd),
            threads: Vec::new(),
        };
        let sums = Arc::new(Sums::default());
        // Calibrated before the first call, not inside a stats call.
        ns_per_cycle();
        for i in 0..SERVICE_THREADS {
            let (fd, sums) = (Arc::clone(&server.fd), Arc::clone(&sums));
            let t = std::thread::Builder::new()
                .name(format!("kernel-static-{i}"))
                .spawn(move || serve(&fd, &sums, &burner));
            match t {
                Ok(t) => server.threads.push(t),
                Err(e) => {
                    let _ = server.stop();
                    return Err(io("service thread", e));
                }
            }
        }
        Ok(server)
    }

    /// Shuts the socket down (every service thread's `recv` returns) and
    /// joins the pool.
    ///
    /// # Errors
    /// The first error a service thread ended with.
    pub fn stop(mut self) -> Result<(), Error> {
        let _ = rustix::net::shutdown(&*self.fd, Shutdown::Both);
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(Error("a service thread panicked".into())));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// One service thread: receive, handle, reply, until the socket ends.
fn serve(fd: &OwnedFd, sums: &Sums, burner: &Burner) -> Result<(), Error> {
    let mut buf = vec![0u8; HEADER + MAX_LEN];
    while let Some(len) = recv(fd, &mut buf)? {
        let seen = cycles();
        let (op, seq, args) = parse(&buf[..len])?;
        let entry = cycles();
        let result = proto::handle(op, args, burner, || sums.snapshot());
        let returned = cycles();
        let (status, body) = match &result {
            Ok(r) => (OK, r.as_slice()),
            Err(Refusal::UnknownOp) => (1, &[][..]),
            Err(Refusal::BadArgs) => (2, &[][..]),
        };
        send(fd, &header(status, seq), body)?;
        let posted = cycles();
        sums.add(entry.wrapping_sub(seen), posted.wrapping_sub(returned));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrating::proto::{OP_CALL, OP_STATS};

    #[test]
    fn calls_are_answered_and_the_path_is_counted() {
        let (c, s) = pair().unwrap();
        let server = Server::start(s, Burner::calibrate()).unwrap();
        let mut client = Client::new(c);
        for size in [0, 8, 32, 1024, 32 * 1024] {
            let args: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let r = client.call(OP_CALL, &args).unwrap();
            assert_eq!(r, proto::expected_reply(&args));
        }
        // A call is added to the sums after its reply is sent, by whichever
        // of the pool's threads served it, so calls may not be counted yet:
        // ask until every call answered before this stats call (the five
        // echoes and the earlier stats calls) is, never more.
        let start = Instant::now();
        for asked in 0u64.. {
            let sums = PathSums::decode(&client.call(OP_STATS, b"").unwrap()).unwrap();
            assert!(sums.calls <= 5 + asked, "{sums:?}");
            if sums.calls == 5 + asked {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{sums:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(client.call(99, b"").unwrap_err().0.contains("refused (1)"));
        assert!(
            client
                .call(proto::OP_BURN, b"x")
                .unwrap_err()
                .0
                .contains("(2)")
        );
        let too_big = vec![0u8; MAX_LEN + 1];
        assert!(client.call(OP_CALL, &too_big).is_err());
        server.stop().unwrap();
        assert!(
            client.call(OP_CALL, b"").is_err(),
            "a stopped server answers nothing"
        );
    }

    #[test]
    fn the_counter_converts_to_ns() {
        let per = ns_per_cycle();
        assert!(per.is_finite() && per > 0.0, "{per}");
        assert_eq!(cycles_to_ns(0), 0);
    }

    #[test]
    fn records_are_checked() {
        assert!(parse(&[0u8; HEADER - 1]).is_err());
        let h = header(7, 42);
        assert_eq!(parse(&h).unwrap(), (7, 42, &[][..]));
        let (a, b) = pair().unwrap();
        send(&a, &header(OK, 9), b"hello").unwrap();
        let mut small = [0u8; HEADER + 2];
        assert!(recv(&b, &mut small).unwrap_err().0.contains("21 bytes"));
        // A reply to another call is refused.
        let mut client = Client::new(a);
        send(&b, &header(OK, 5), b"").unwrap();
        let e = client.call(OP_CALL, b"").unwrap_err();
        assert!(e.0.contains("call 5 came for call 1"), "{e}");
        drop(b);
        let e = client.call(OP_CALL, b"").unwrap_err();
        assert!(e.0.starts_with("kernel static send"), "{e}");
    }
}
