//! `ferry serve` (hidden): the second process of the tour's `rpc` stop. It
//! serves an echo interface with [`ferry::rpc::Server`] inside a ferry
//! runtime and, for the baseline, the same echo over a Unix socket
//! answered by a kernel thread, both in one runtime directory; prints
//! `ready <pid>` once both listen, and serves until it is killed.
//!
//! This module owns the echo interface (its name, version hash and
//! operation) and the Unix-socket framing both ends use ([`write_frame`],
//! [`read_frame`]). It must not measure anything: the tour does.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry::rpc::{Fault, MAX_CALL_LEN, RuntimeDir, Server};

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
    std::thread::Builder::new()
        .name("unix-echo".into())
        .spawn(move || unix_echo(listener))?;
    let name = args.name.clone();
    ferry::Runtime::builder()
        .processors(args.processors)
        .run(move || -> io::Result<()> {
            let _server =
                Server::serve_in(&dir, &name, ECHO_VERSION, echo).map_err(io::Error::other)?;
            let mut out = io::stdout().lock();
            writeln!(out, "ready {}", std::process::id())?;
            out.flush()?;
            drop(out);
            loop {
                ferry::sleep(Duration::from_secs(3600));
            }
        })?
}

/// Accepts Unix-socket clients; each gets a kernel thread that echoes its
/// frames until it hangs up.
fn unix_echo(listener: UnixListener) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = std::thread::Builder::new()
            .name("unix-echo-conn".into())
            .spawn(move || {
                let _ = echo_frames(stream);
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
