//! `ferry serve` (hidden): the second process of the tour's `rpc` stop. It
//! serves an echo interface with [`ferry::rpc::Server`] inside a ferry
//! runtime and, for the baseline, the same echo over a Unix socket
//! answered by a kernel thread, both in one runtime directory; prints
//! `ready <pid>` once both listen, and serves until it is killed.
//!
//! With `--grpc ADDR` it serves the tour's typed interface
//! ([`crate::greeter`]) instead of the echo, on both paths at once: locally
//! under its name and over gRPC at `ADDR` (port 0: one the kernel picks),
//! and its ready line ends with the URL to call (`ready <pid>
//! grpc://<addr>/<name>`).
//!
//! With `--chain` it serves the chain interface of the tour's `migrating`
//! stop instead ([`crate::chain`], migrating calls), as its far end or,
//! with `--next`, as a relay to the next process: calls over `ferry::rpc`
//! go on over `ferry::rpc`, frames on its Unix socket go on over the
//! next's Unix socket.
//!
//! This module owns the echo interface (its name, version hash and
//! operation) and the Unix-socket framing both ends use ([`write_frame`],
//! [`read_frame`]). It must not measure anything: the tour does.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry::rpc::{Client, Fault, MAX_CALL_LEN, RuntimeDir, ServeMode, Server};

use crate::chain::{self, CHAIN_VERSION};
use crate::greeter::{GreeterGrpc, GreeterServer, Greetings};

/// The interface name the tour serves under by default.
pub const ECHO_NAME: &str = "tour-echo";

/// The echo interface's version hash (any change of its operations gets a
/// new one).
pub const ECHO_VERSION: u64 = 0x6665_7272_7945_6301;

/// The echo interface's one operation: the result is the arguments.
pub const OP_ECHO: u32 = 0;

/// Options of `ferry serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The runtime directory to serve in (created with mode 0700 if missing,
    /// refused if it is someone else's or open to others)
    #[arg(long)]
    dir: PathBuf,
    /// The interface name
    #[arg(long, default_value = ECHO_NAME)]
    name: String,
    /// Processors of the serving ferry runtime
    #[arg(long, default_value_t = 1)]
    processors: usize,
    /// Die with the process of this pid: SIGKILL when the parent exits, and
    /// refuse to start if the parent is no longer this pid
    #[arg(long)]
    parent: Option<u32>,
    /// Serve the tour's chain interface (migrating calls) instead of the echo
    #[arg(long)]
    chain: bool,
    /// With --chain: pass every call on to the chain interface served under
    /// this name in the same directory, and every Unix-socket frame on to
    /// its Unix socket
    #[arg(long, requires = "chain")]
    next: Option<String>,
    /// Serve the tour's typed interface (greeter) instead of the echo,
    /// locally and over gRPC at this address (port 0: any free port)
    #[arg(long, conflicts_with = "chain")]
    grpc: Option<SocketAddr>,
}

/// The echo interface's handler.
pub fn echo(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        OP_ECHO => Ok(args.to_vec()),
        _ => Err(Fault::UnknownOp),
    }
}

/// Where the Unix-socket echo of interface `name` listens in `dir`.
pub fn unix_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.unix"))
}

/// Runs `ferry serve`: returns only on an error (it serves until killed).
pub fn run(args: &Args) -> io::Result<()> {
    if let Some(parent) = args.parent {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        // The parent may have died before the line above: then we were
        // adopted by another process and no signal will come.
        let now = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if now != i32::try_from(parent).ok() {
            return Err(io::Error::other(format!(
                "the parent {parent} is gone (now {now:?})"
            )));
        }
    }
    let uid = rustix::process::getuid().as_raw();
    let dir = RuntimeDir::open(&args.dir, uid).map_err(io::Error::other)?;
    ferry::rpc::check_name(&args.name).map_err(io::Error::other)?;
    let unix = unix_path(dir.path(), &args.name);
    let _ = std::fs::remove_file(&unix);
    let listener = UnixListener::bind(&unix)?;
    let next_unix = match &args.next {
        Some(next) => {
            ferry::rpc::check_name(next).map_err(io::Error::other)?;
            Some(unix_path(dir.path(), next))
        }
        None => None,
    };
    std::thread::Builder::new()
        .name("unix-echo".into())
        .spawn(move || unix_echo(listener, next_unix))?;
    let name = args.name.clone();
    let (chain, next, grpc) = (args.chain, args.next.clone(), args.grpc);
    ferry::Runtime::builder()
        .processors(args.processors)
        .run(move || -> io::Result<()> {
            let migrating = Server::builder().mode(ServeMode::Migrating);
            let _server = match (chain, next, grpc) {
                (false, _, Some(_)) => GreeterServer::serve_in(&dir, &name, Greetings),
                (false, _, None) => Server::serve_in(&dir, &name, ECHO_VERSION, echo),
                (true, None, _) => migrating.serve_in(&dir, &name, CHAIN_VERSION, chain::far_end),
                (true, Some(next), _) => {
                    let client =
                        Client::connect_in(&dir, &next, CHAIN_VERSION).map_err(io::Error::other)?;
                    migrating.serve_in(&dir, &name, CHAIN_VERSION, chain::relay(client))
                }
            }
            .map_err(io::Error::other)?;
            // The same server, over gRPC too.
            let remote = match grpc {
                Some(addr) => Some(
                    ferry_grpc::Server::builder()
                        .dir(dir.clone())
                        .serve::<GreeterGrpc>(addr, &name)
                        .map_err(io::Error::other)?,
                ),
                None => None,
            };
            let mut out = io::stdout().lock();
            match &remote {
                Some(r) => writeln!(
                    out,
                    "ready {} grpc://{}/{name}",
                    std::process::id(),
                    r.local_addr()
                )?,
                None => writeln!(out, "ready {}", std::process::id())?,
            }
            out.flush()?;
            drop(out);
            loop {
                ferry::sleep(Duration::from_secs(3600));
            }
        })?
}

/// Accepts Unix-socket clients; each gets a kernel thread that echoes its
/// frames (or, with `next`, passes each on to the Unix socket at `next`
/// and answers with its reply) until it hangs up.
fn unix_echo(listener: UnixListener, next: Option<PathBuf>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let next = next.clone();
        let _ = std::thread::Builder::new()
            .name("unix-echo-conn".into())
            .spawn(move || {
                let _ = match next {
                    Some(next) => relay_frames(stream, &next),
                    None => echo_frames(stream),
                };
            });
    }
}

/// Echoes frames on `stream` until the peer hangs up or breaks the framing.
fn echo_frames(mut stream: UnixStream) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let len = match read_frame(&mut stream, &mut buf) {
            Ok(len) => len,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        stream.write_all(&buf[..FRAME_HEADER + len])?;
    }
}

/// Passes each frame on `stream` on to the Unix socket at `next` and sends
/// its reply back, until the peer hangs up or either breaks the framing.
fn relay_frames(mut stream: UnixStream, next: &Path) -> io::Result<()> {
    let mut onward = UnixStream::connect(next)?;
    let mut buf = Vec::new();
    loop {
        let len = match read_frame(&mut stream, &mut buf) {
            Ok(len) => len,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        onward.write_all(&buf[..FRAME_HEADER + len])?;
        let len = read_frame(&mut onward, &mut buf)?;
        stream.write_all(&buf[..FRAME_HEADER + len])?;
    }
}

/// Bytes of a frame's header: the payload's length, u32 little-endian.
pub const FRAME_HEADER: usize = 4;

/// `payload` as one frame, ready for [`write_frame`].
pub fn frame(payload: &[u8]) -> io::Result<Vec<u8>> {
    if payload.len() > MAX_CALL_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a frame carries at most MAX_CALL_LEN bytes",
        ));
    }
    let mut f = Vec::with_capacity(FRAME_HEADER + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    Ok(f)
}

/// Sends a frame made by [`frame`] in one write.
pub fn write_frame(stream: &mut UnixStream, frame: &[u8]) -> io::Result<()> {
    stream.write_all(frame)
}

/// Reads one frame into `buf` (header included, as few reads as the kernel
/// allows) and returns its payload's length: the payload is
/// `buf[FRAME_HEADER..FRAME_HEADER + len]`. A length over
/// [`MAX_CALL_LEN`] is an `InvalidData` error; a hang-up before a whole
/// frame is `UnexpectedEof`.
pub fn read_frame(stream: &mut UnixStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut have = 0;
    let mut want = FRAME_HEADER;
    let mut len = None;
    loop {
        if buf.len() < want {
            buf.resize(want, 0);
        }
        while have < want {
            let n = stream.read(&mut buf[have..want])?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            have += n;
        }
        if let Some(len) = len {
            return Ok(len);
        }
        let header: [u8; FRAME_HEADER] = buf[..FRAME_HEADER].try_into().expect("4 bytes");
        let n = u32::from_le_bytes(header) as usize;
        if n > MAX_CALL_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {n} bytes is over the maximum"),
            ));
        }
        len = Some(n);
        want = FRAME_HEADER + n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversized_lengths_are_refused() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let mut buf = Vec::new();
        for payload in [&b""[..], b"x", &[7u8; 5000][..]] {
            write_frame(&mut a, &frame(payload).unwrap()).unwrap();
            let len = read_frame(&mut b, &mut buf).unwrap();
            assert_eq!(&buf[FRAME_HEADER..FRAME_HEADER + len], payload);
        }
        a.write_all(&(MAX_CALL_LEN as u32 + 1).to_le_bytes())
            .unwrap();
        let err = read_frame(&mut b, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(frame(&vec![0; MAX_CALL_LEN + 1]).is_err());
        a.write_all(&[3, 0]).unwrap();
        drop(a);
        let err = read_frame(&mut b, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn echo_answers_its_op_and_refuses_others() {
        assert_eq!(echo(OP_ECHO, b"abc"), Ok(b"abc".to_vec()));
        assert_eq!(echo(OP_ECHO + 1, b"abc"), Err(Fault::UnknownOp));
    }
}
