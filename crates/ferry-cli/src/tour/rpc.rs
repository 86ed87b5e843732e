//! Stop 6: calls into another process. The tour starts a real second
//! process (this binary's hidden `ferry serve`), calls its echo interface
//! over a shared-memory channel (`ferry::rpc`) and, in the same run, makes
//! the same round trips over a Unix socket to the same process. The child
//! dies with the tour (PR_SET_PDEATHSIG) and is killed and reaped when the
//! stop ends.

use std::io::{self, BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferry::rpc::{Client, RuntimeDir};

use super::{Row, Scale, Stop, Visit};
use crate::measure::{self, Measured};
use crate::report::fmt_ns;
use crate::serve::{
    ECHO_NAME, ECHO_VERSION, FRAME_HEADER, OP_ECHO, frame, read_frame, unix_path, write_frame,
};

pub const STOP: Stop = Stop {
    name: "rpc",
    title: "calls into another process",
    run,
};

/// How long the server process may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Payload sizes of the rows: a null call, and 1 KiB.
const SIZES: [usize; 2] = [0, 1024];

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let ferry_calls = scale.pick(20_000, 5_000, 50);
    let unix_calls = scale.pick(2_000, 500, 20);
    let peer = Peer::start()?;

    let mut unix = UnixStream::connect(unix_path(peer.dir.path(), ECHO_NAME))?;
    let mut std_rows = Vec::new();
    for size in SIZES {
        let payload = payload(size);
        unix_round_trips(&mut unix, &payload, unix_calls.min(20))?;
        std_rows.push(measure::repeat(runs, unix_calls, || {
            unix_round_trips(&mut unix, &payload, unix_calls)
        })?);
    }
    drop(unix);

    let dir = RuntimeDir::open(peer.dir.path(), rustix::process::getuid().as_raw())
        .map_err(io::Error::other)?;
    let ferry_rows =
        ferry::Runtime::builder()
            .processors(1)
            .run(move || -> io::Result<Vec<Measured>> {
                let client =
                    Client::connect_in(&dir, ECHO_NAME, ECHO_VERSION).map_err(io::Error::other)?;
                let mut rows = Vec::new();
                for size in SIZES {
                    let payload = payload(size);
                    ferry_calls_of(&client, &payload, ferry_calls.min(100))?;
                    rows.push(measure::repeat(runs, ferry_calls, || {
                        ferry_calls_of(&client, &payload, ferry_calls)
                    })?);
                }
                Ok(rows)
            })??;
    let server_pid = peer.pid;
    drop(peer);

    let null_ferry = ferry_rows[0].stats.median;
    let null_unix = std_rows[0].stats.median;
    let rows = SIZES
        .iter()
        .zip(ferry_rows.into_iter().zip(std_rows))
        .map(|(&size, (ferry, std))| Row {
            case: if size == 0 {
                "null call round trip".into()
            } else {
                format!("call {size} B round trip")
            },
            label: if size == 0 {
                "null call round trip (std: Unix socket)".into()
            } else {
                format!("call of {size} B each way (std: Unix socket)")
            },
            ferry,
            std,
        })
        .collect();
    Ok(Visit {
        lines: vec![
            format!(
                "The tour started a second process, `ferry serve` (pid {server_pid}), which \
                 serves an echo interface with ferry::rpc on 1 processor and the same echo on a \
                 Unix socket answered by a kernel thread. Binding went through a socket once; \
                 after it, a call is a slot and a queue entry in a shared memfd, found by a \
                 processor that polls while idle, and the kernel is off the call path."
            ),
            format!(
                "Here, 1 processor calling 1 processor: a null call took {} against {} for a \
                 Unix-socket round trip of the same (empty) payload to the same process, every \
                 reply checked. std is the Unix socket: a write and a blocking read on each side, \
                 two kernel wake-ups per round trip. ferry: {} calls per run, the socket {}.",
                fmt_ns(null_ferry),
                fmt_ns(null_unix),
                ferry_calls,
                unix_calls
            ),
        ],
        rows,
        pending: None,
    })
}

/// Deterministic bytes to echo.
fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + 7) as u8).collect()
}

/// Makes `n` echo calls of `payload` and checks each reply.
fn ferry_calls_of(client: &Client, payload: &[u8], n: u64) -> io::Result<Duration> {
    let start = Instant::now();
    for _ in 0..n {
        let got = client.call(OP_ECHO, payload).map_err(io::Error::other)?;
        if got != payload {
            return Err(io::Error::other("the echo answered other bytes"));
        }
    }
    Ok(start.elapsed())
}

/// Makes `n` round trips of `payload` over `stream` and checks each reply.
fn unix_round_trips(stream: &mut UnixStream, payload: &[u8], n: u64) -> io::Result<Duration> {
    let f = frame(payload)?;
    let mut buf = Vec::with_capacity(f.len());
    let start = Instant::now();
    for _ in 0..n {
        write_frame(stream, &f)?;
        let len = read_frame(stream, &mut buf)?;
        if buf[FRAME_HEADER..FRAME_HEADER + len] != *payload {
            return Err(io::Error::other("the Unix echo answered other bytes"));
        }
    }
    Ok(start.elapsed())
}

/// The `ferry` binary: this process, or next to the test binary in tests
/// (`target/<profile>/deps/..`, where cargo builds it for them).
fn ferry_exe() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    if cfg!(test) {
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        return Ok(dir.join("ferry"));
    }
    Ok(exe)
}

/// The running `ferry serve` of the echo and its runtime directory;
/// dropping it kills and reaps the process, then removes the directory.
pub struct Peer {
    _served: Served,
    /// The runtime directory it serves in.
    pub dir: TempDir,
    /// Its pid.
    pub pid: u32,
}

impl Peer {
    /// Starts `ferry serve` in a new temporary runtime directory and waits
    /// until it is ready.
    pub fn start() -> io::Result<Peer> {
        let dir = TempDir::new()?;
        let served = Served::start(dir.path(), &["--name", ECHO_NAME])?;
        let pid = served.pid;
        Ok(Peer {
            _served: served,
            dir,
            pid,
        })
    }
}

/// A running `ferry serve` (a child that dies with the tour); dropping it
/// kills and reaps the process.
pub struct Served {
    child: Child,
    /// Its pid.
    pub pid: u32,
    /// Its ready line (`ready <pid>`, and what it serves at, if it says).
    pub ready: String,
}

impl Served {
    /// Starts `ferry serve --dir dir --processors 1` with `args` (its name,
    /// what it serves) and waits until it is ready.
    pub fn start(dir: &Path, args: &[&str]) -> io::Result<Served> {
        let mut child = Command::new(ferry_exe()?)
            .arg("serve")
            .arg("--dir")
            .arg(dir)
            .args(["--processors", "1"])
            .args(args)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start `ferry serve`: {e}")))?;
        let pid = child.id();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut served = Served {
            child,
            pid,
            ready: String::new(),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let r = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(r);
        });
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok(line)) if line.starts_with("ready") => {
                served.ready = line.trim_end().to_owned();
                Ok(served)
            }
            Ok(Ok(line)) => {
                let status = served.child.wait()?;
                Err(io::Error::other(format!(
                    "`ferry serve` did not start ({status}, said {line:?})"
                )))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("`ferry serve` was not ready in time")),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A runtime directory of its own under the temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `ferry-tour-<pid>-<n>` under the temp dir, mode 0700.
    pub fn new() -> io::Result<TempDir> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "ferry-tour-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        RuntimeDir::open(&path, rustix::process::getuid().as_raw()).map_err(io::Error::other)?;
        Ok(TempDir(path))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
