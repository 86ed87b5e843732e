//! The ferry systems of `migrating`: a `ferry::rpc::Server` in another
//! process serving [`proto::handle`] on one processor, in
//! [`ServeMode::Migrating`] (each call on an activation from the server's
//! pool, at the caller's priority) or [`ServeMode::Static`] (a pool of
//! service threads that wait for work), with
//! [`ServerBuilder::measure_path`](ferry::rpc::ServerBuilder::measure_path)
//! on for path runs; and the client's side, a `ferry::run` of one
//! processor bound to it.
//!
//! This module owns both ends of that; the server process's entry is
//! [`super::serve`]'s. The handler answers [`proto::OP_STATS`] from
//! `Server::path_stats()` (zero sums if the server does not measure), so
//! it reaches the server through a shared cell that the server's own stop
//! empties (the server holds the handler).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::rpc::{Client, Fault, PathStats, RuntimeDir, ServeMode, Server};

use super::proto::{self, Burner, PathSums, Refusal};
use crate::error::Error;

/// The interface's version hash (`"migr"`).
pub const VERSION: u64 = 0x6d69_6772;

/// How often the server's first thread looks whether to stop.
const STOP_POLL: Duration = Duration::from_millis(20);

/// How long a server process may take to be ready, and to exit.
pub const START_LIMIT: Duration = Duration::from_secs(10);
/// See [`START_LIMIT`].
pub const EXIT_LIMIT: Duration = Duration::from_secs(5);

/// The row name of a mode.
pub fn system_name(mode: ServeMode) -> &'static str {
    match mode {
        ServeMode::Migrating => "migrating",
        ServeMode::Static => "static",
    }
}

/// The mode of a row name.
///
/// # Errors
/// Neither `migrating` nor `static`.
pub fn mode_of(name: &str) -> Result<ServeMode, Error> {
    match name {
        "migrating" => Ok(ServeMode::Migrating),
        "static" => Ok(ServeMode::Static),
        _ => Err(Error(format!("no ferry serve mode {name:?}"))),
    }
}

fn rpc(what: &str, e: impl std::fmt::Display) -> Error {
    Error(format!("ferry {what}: {e}"))
}

/// The sums of ferry's path statistics, in ns.
pub fn sums(s: PathStats) -> PathSums {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    PathSums {
        calls: s.calls,
        to_handler_ns: ns(s.to_handler),
        to_reply_ns: ns(s.to_reply),
    }
}

/// A runtime directory of its own for one run, and an interface name.
fn fresh_dir() -> (PathBuf, String) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("ferry-bench-migrating-{}-{n}", std::process::id()));
    (path, format!("migrating-{n}"))
}

fn open_dir(path: &Path) -> Result<RuntimeDir, Error> {
    let uid = rustix::process::getuid().as_raw();
    RuntimeDir::open(path, uid).map_err(|e| rpc(&format!("runtime dir {}", path.display()), e))
}

/// Starts a ferry server process in `mode` (measuring its path if
/// `measure`) on `cpu`, and runs `client` in a client runtime of one
/// processor on the calling thread's CPU, given a bound [`Client`]; then
/// ends the server. The caller pins itself first.
pub fn with_server<T: Send + 'static>(
    mode: ServeMode,
    measure: bool,
    cpu: Option<usize>,
    client: impl FnOnce(&Client) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let (path, name) = fresh_dir();
    let dir = open_dir(&path)?;
    let result = (|| {
        let mut args = super::serve::args(system_name(mode), measure, cpu);
        args.extend([
            "--name".to_owned(),
            name.clone(),
            "--dir".to_owned(),
            path.display().to_string(),
        ]);
        let mut server = super::serve::spawn(&args, &[])?;
        server.wait_ready(START_LIMIT)?;
        let out = ferry::Runtime::builder()
            .processors(1)
            .run(move || {
                let c = Client::connect_in(&dir, &name, VERSION).map_err(|e| rpc("connect", e))?;
                client(&c)
            })
            .map_err(|e| rpc("runtime", e))??;
        server.finish(EXIT_LIMIT)?;
        Ok(out)
    })();
    let _ = std::fs::remove_dir_all(&path);
    result
}

/// A call through `client`, its error as the bench's.
pub fn call(client: &Client, op: u32, args: &[u8]) -> Result<Vec<u8>, Error> {
    client.call(op, args).map_err(|e| rpc("call", e))
}

/// The server process's side: serves [`proto::handle`] as `name` in
/// `dir` on a one-processor runtime in `mode`, says ready with `ready`,
/// and stops once `stop` is set (the first ferry thread looks every
/// [`STOP_POLL`], as `urpc`'s server does).
pub fn serve(
    dir: &Path,
    name: &str,
    mode: ServeMode,
    measure: bool,
    stop: Arc<AtomicBool>,
    ready: impl FnOnce() -> Result<(), Error> + Send + 'static,
) -> Result<(), Error> {
    let dir = open_dir(dir)?;
    let name = name.to_owned();
    let burner = Burner::calibrate();
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let cell: Arc<Mutex<Option<Server>>> = Arc::new(Mutex::new(None));
            let reach = Arc::clone(&cell);
            let handler = move |op: u32, args: &[u8]| -> Result<Vec<u8>, Fault> {
                let stats = || {
                    let server = reach.lock().unwrap_or_else(|p| p.into_inner());
                    server
                        .as_ref()
                        .and_then(Server::path_stats)
                        .map_or_else(PathSums::default, sums)
                };
                proto::handle(op, args, &burner, stats).map_err(|r| match r {
                    Refusal::UnknownOp => Fault::UnknownOp,
                    Refusal::BadArgs => Fault::BadArgs,
                })
            };
            let server = Server::builder()
                .mode(mode)
                .measure_path(measure)
                .serve_in(&dir, &name, VERSION, handler)
                .map_err(|e| rpc("serve", e))?;
            *cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(server);
            ready()?;
            while !stop.load(Ordering::Acquire) {
                ferry::sleep(STOP_POLL);
            }
            let server = cell.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(server);
            Ok(())
        })
        .map_err(|e| rpc("runtime", e))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrating::proto::{OP_BURN, OP_STATS};
    use crate::migrating::timed;
    use crate::urpc::calls::Budget;

    #[test]
    fn modes_have_row_names_and_back() {
        for mode in [ServeMode::Migrating, ServeMode::Static] {
            assert_eq!(mode_of(system_name(mode)), Ok(mode));
        }
        assert!(mode_of("kernel static").is_err());
    }

    #[test]
    fn both_modes_answer_and_count_their_path() {
        for mode in [ServeMode::Migrating, ServeMode::Static] {
            let (path, name) = fresh_dir();
            let dir = open_dir(&path).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            let server = {
                let (path, name, stop) = (path.clone(), name.clone(), Arc::clone(&stop));
                std::thread::spawn(move || {
                    serve(&path, &name, mode, true, stop, move || {
                        tx.send(()).map_err(|e| Error(e.to_string()))
                    })
                })
            };
            rx.recv().unwrap();
            let (t, sums, unknown) = ferry::Runtime::builder()
                .processors(1)
                .run(move || {
                    let c = Client::connect_in(&dir, &name, VERSION).unwrap();
                    let b = Budget {
                        warmup: Duration::from_millis(1),
                        timed: Duration::from_millis(5),
                        min_calls: 20,
                        max_calls: 10_000,
                    };
                    let t = timed::run(&b, 32, true, |op, a| call(&c, op, a)).unwrap();
                    let burnt = call(&c, OP_BURN, &10u64.to_le_bytes()).unwrap();
                    assert!(burnt.is_empty());
                    let sums = PathSums::decode(&call(&c, OP_STATS, &[]).unwrap()).unwrap();
                    (t, sums, call(&c, 99, &[]).unwrap_err())
                })
                .unwrap();
            assert!(t.calls >= 20, "{mode:?}: {t:?}");
            assert!(t.path_ns.is_some_and(|ns| ns > 0.0), "{mode:?}: {t:?}");
            assert!(sums.calls >= t.calls, "{mode:?}: {sums:?}");
            assert!(unknown.0.contains("no operation 99"), "{mode:?}: {unknown}");
            stop.store(true, Ordering::Release);
            server.join().unwrap().unwrap();
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
}
