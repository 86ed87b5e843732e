//! The `ferry` rows of `urpc`: ferry's cross-process calls, timed by the
//! same loop as every peer. The server process (this binary again,
//! `urpc-serve --system ferry`) runs `ferry::run` on one processor with a
//! `ferry::rpc::Server` whose handler answers [`OP_ECHO`] with its
//! arguments; the client, in `ferry::run` on one processor of its own,
//! binds with `Client::connect_in` and makes each call with
//! `Client::call`. Both sides bind in a runtime directory made for the run
//! and removed after it.
//!
//! This module owns both sides of that and how a ferry round trip is fed
//! to the timed loop ([`measure`]). The server exits when its stdin
//! closes (the client's [`ServerProcess::finish`] closes it).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use ferry::rpc::{Client, Fault, RuntimeDir, Server};

use super::calls::{self, Budget, Sample};
use super::child::ServerProcess;
use super::sys;
use crate::affinity;
use crate::error::Error;

/// The row's system name.
pub const SYSTEM: &str = "ferry";

/// The interface's version hash (`"urpc"`).
pub const VERSION: u64 = 0x7572_7063;

/// Answer with the arguments.
pub const OP_ECHO: u32 = 1;

/// Answer with two CLOCK_MONOTONIC readings in ns, little-endian `u64`s:
/// the handler's first and last act (the breakdown of a call).
pub const OP_STAMP: u32 = 2;

/// How long the server process may take to be ready, and to exit.
const START_LIMIT: Duration = Duration::from_secs(10);
const EXIT_LIMIT: Duration = Duration::from_secs(5);

/// How often the server's first thread looks whether to stop.
const STOP_POLL: Duration = Duration::from_millis(20);

fn rpc(what: &str, e: impl std::fmt::Display) -> Error {
    Error(format!("ferry {what}: {e}"))
}

/// Times ferry calls of `size` bytes each way made by `call(args) ->
/// result` under `budget`, as every peer is timed (the result must echo
/// the arguments).
///
/// # Errors
/// The first error of `call`, or a result that does not echo.
pub fn measure(
    budget: &Budget,
    size: usize,
    mut call: impl FnMut(&[u8]) -> Result<Vec<u8>, Error>,
) -> Result<Sample, Error> {
    calls::time_calls(budget, size, |args, result| {
        *result = call(args)?;
        Ok(())
    })
}

/// The handler of the server: [`OP_ECHO`] answers with a copy of its
/// arguments, [`OP_STAMP`] with the clock at its entry and at its exit
/// (16 bytes), any other operation is unknown.
pub fn echo(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        OP_ECHO => Ok(args.to_vec()),
        OP_STAMP => {
            let entry = sys::mono_ns();
            let mut out = Vec::with_capacity(16);
            out.extend_from_slice(&entry.to_le_bytes());
            out.extend_from_slice(&sys::mono_ns().to_le_bytes());
            Ok(out)
        }
        _ => Err(Fault::UnknownOp),
    }
}

/// The two readings of an [`OP_STAMP`] answer; `None` unless it is
/// exactly 16 bytes.
pub fn stamps(result: &[u8]) -> Option<(u64, u64)> {
    let entry = u64::from_le_bytes(result.get(..8)?.try_into().ok()?);
    let exit = u64::from_le_bytes(result.get(8..16)?.try_into().ok()?);
    (result.len() == 16).then_some((entry, exit))
}

/// A runtime directory of its own for one run, and an interface name.
fn fresh_dir() -> (PathBuf, String) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("ferry-bench-urpc-{}-{n}", std::process::id()));
    (path, format!("urpc-{n}"))
}

fn open_dir(path: &Path) -> Result<RuntimeDir, Error> {
    let uid = rustix::process::getuid().as_raw();
    RuntimeDir::open(path, uid).map_err(|e| rpc(&format!("runtime dir {}", path.display()), e))
}

/// One run on the calling (client) thread, pinned to `cpus.0`: starts the
/// server process on `cpus.1`, times calls of `size` bytes, ends it.
pub fn run_once(
    size: usize,
    budget: &Budget,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Sample, Error> {
    let budget = *budget;
    with_server(cpus, 1, move |client, _| {
        measure(&budget, size, |args| {
            client.call(OP_ECHO, args).map_err(|e| rpc("call", e))
        })
    })
}

/// Pins the calling thread to `cpus.0`, starts a ferry server process on
/// `cpus.1` (one processor, [`echo`]), and runs `client` in a client
/// runtime of `processors` processors (on the calling thread's CPU), given
/// a bound [`Client`] and the server's process id; then ends the server.
pub fn with_server<T: Send + 'static>(
    cpus: (Option<usize>, Option<usize>),
    processors: usize,
    client: impl FnOnce(&Client, u32) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    affinity::pin_or_warn(cpus.0, "urpc client");
    let (path, name) = fresh_dir();
    let dir = open_dir(&path)?;
    let result = (|| {
        let mut args = vec![
            "--system".to_owned(),
            SYSTEM.to_owned(),
            "--size".to_owned(),
            "0".to_owned(),
            "--name".to_owned(),
            name.clone(),
            "--dir".to_owned(),
            path.display().to_string(),
        ];
        if let Some(cpu) = cpus.1 {
            args.extend(["--cpu".to_owned(), cpu.to_string()]);
        }
        let mut server = ServerProcess::spawn(&args, &[])?;
        server.wait_ready(START_LIMIT)?;
        let pid = server
            .id()
            .ok_or_else(|| Error("the server process is gone".into()))?;
        let out = ferry::Runtime::builder()
            .processors(processors)
            .run(move || {
                let c = Client::connect_in(&dir, &name, VERSION).map_err(|e| rpc("connect", e))?;
                client(&c, pid)
            })
            .map_err(|e| rpc("runtime", e))??;
        server.finish(EXIT_LIMIT)?;
        Ok(out)
    })();
    let _ = std::fs::remove_dir_all(&path);
    result
}

/// The server process's side: serves [`echo`] as `name` in `dir` on a
/// one-processor runtime, says ready on stdout, and stops when stdin
/// closes.
///
/// The first ferry thread waits for that in `ferry::sleep` steps of
/// [`STOP_POLL`], while a plain kernel thread reads stdin: with the first
/// thread asleep in a kernel call (`ferry::blocking(read)`) instead, a
/// one-processor server runtime at times left every call unserved (its
/// processor, lent to the blocked thread, did not answer the doorbell).
pub fn serve(dir: &Path, name: &str) -> Result<(), Error> {
    let dir = open_dir(dir)?;
    let name = name.to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("urpc-stdin".into())
        .spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stopper.store(true, Ordering::Release);
        })
        .map_err(|e| Error(format!("stdin thread: {e}")))?;
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let server =
                Server::serve_in(&dir, &name, VERSION, echo).map_err(|e| rpc("serve", e))?;
            let mut out = std::io::stdout().lock();
            out.write_all(b"R")
                .and_then(|()| out.flush())
                .map_err(|e| Error(format!("writing the ready byte: {e}")))?;
            while !stop.load(Ordering::Acquire) {
                ferry::sleep(STOP_POLL);
            }
            drop(server);
            Ok(())
        })
        .map_err(|e| rpc("runtime", e))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vec_returning_call_is_timed_and_checked() {
        let b = Budget {
            warmup: Duration::from_micros(100),
            timed: Duration::from_millis(1),
            min_calls: 3,
            max_calls: 100,
        };
        let s = measure(&b, 32, |args| Ok(args.to_vec())).unwrap();
        assert!(s.calls >= 3);
        assert!(measure(&b, 32, |_| Ok(vec![0; 32])).is_err());
    }

    #[test]
    fn the_handler_echoes_its_one_operation() {
        assert_eq!(echo(OP_ECHO, b"abc"), Ok(b"abc".to_vec()));
        assert_eq!(echo(OP_ECHO + 7, b"abc"), Err(Fault::UnknownOp));
        let r = echo(OP_STAMP, b"").unwrap();
        let (entry, exit) = stamps(&r).unwrap();
        assert!(entry <= exit && entry > 0);
        assert_eq!(stamps(&r[..15]), None);
        assert_eq!(stamps(&[r.clone(), vec![0]].concat()), None);
    }

    #[test]
    fn ferry_calls_echo_between_two_runtimes() {
        let (path, name) = fresh_dir();
        let dir = open_dir(&path).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = Arc::clone(&stop);
        let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
        let server_dir = dir.clone();
        let server_name = name.clone();
        let server = std::thread::spawn(move || {
            ferry::Runtime::builder()
                .processors(1)
                .run(move || {
                    let s = Server::serve_in(&server_dir, &server_name, VERSION, echo).unwrap();
                    ready_tx.send(()).unwrap();
                    // Not ferry::blocking: see `serve`.
                    while !stopper.load(Ordering::Acquire) {
                        ferry::sleep(Duration::from_millis(1));
                    }
                    drop(s);
                })
                .unwrap();
        });
        ready.recv().unwrap();
        let b = Budget {
            warmup: Duration::from_millis(1),
            timed: Duration::from_millis(2),
            min_calls: 3,
            max_calls: 1000,
        };
        let s = ferry::Runtime::builder()
            .processors(1)
            .run(move || {
                let c = Client::connect_in(&dir, &name, VERSION).unwrap();
                for size in [0, 32, 100_000] {
                    measure(&b, size, |a| c.call(OP_ECHO, a).map_err(|e| rpc("call", e))).unwrap();
                }
                let (entry, exit) = stamps(&c.call(OP_STAMP, b"").unwrap()).unwrap();
                assert!(entry <= exit);
                c.call(OP_ECHO + 7, b"").unwrap_err()
            })
            .unwrap();
        assert!(matches!(s, ferry::rpc::Error::UnknownOp { .. }), "{s:?}");
        stop.store(true, Ordering::Release);
        server.join().unwrap();
        std::fs::remove_dir_all(&path).unwrap();
    }
}
