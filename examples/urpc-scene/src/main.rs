//! The scene of URPC's Figure 1 (seed 001) on `ferry::rpc`: an editor
//! calls a window manager and a file cache, each its own process with its
//! own ferry runtime and its own [`ferry::rpc::Server`]. Several ferry
//! threads of the editor call both servers at once; the editor prints a
//! timeline of every call (thread, server, start and end at the editor,
//! when the server's handler ran) that shows them overlapping.
//!
//! ```sh
//! cargo run --release -p urpc-scene
//! cargo run --release -p urpc-scene -- --threads 4 --rounds 3 --processors 1
//! ```
//!
//! The program runs itself twice more as the servers (`--role wm` and
//! `--role cache`, with `--parent`: they die with the editor), in a fresh
//! runtime directory under the temp dir that it removes at the end. Every
//! reply is checked against what was asked. What it does not show: 001's
//! processor donation. A ferry processor with nothing to run sleeps on its
//! channels' doorbells and the kernel gives the core to whoever runs; no
//! processor moves from one process to another.

mod servers;
mod timeline;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::rpc::{Client, RuntimeDir, Server};

use servers::{CACHE, CACHE_VERSION, FILE_LEN, FILES, OP_DRAW, OP_READ, Stamp, WM, WM_VERSION};
use timeline::Call;

/// Command-line options.
#[derive(Debug)]
struct Options {
    role: Option<String>,
    dir: Option<PathBuf>,
    parent: Option<u32>,
    threads: usize,
    rounds: usize,
    processors: usize,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Options> {
    let mut o = Options {
        role: None,
        dir: None,
        parent: None,
        threads: 4,
        rounds: 3,
        processors: 1,
    };
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--role" => o.role = Some(value()?),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            "--parent" => o.parent = Some(number(value()?)? as u32),
            "--threads" => o.threads = number(value()?)?.clamp(1, 64),
            "--rounds" => o.rounds = number(value()?)?.clamp(1, 1000),
            "--processors" => o.processors = number(value()?)?.max(1),
            "-h" | "--help" => {
                return Err("usage: urpc-scene [--threads N] [--rounds N] [--processors N]".into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("urpc-scene: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match options.role.as_deref() {
        None => editor(&options),
        Some(role) => serve(role, &options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("urpc-scene: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, String>;

fn runtime_dir(path: &Path) -> Result<RuntimeDir> {
    RuntimeDir::open(path, rustix::process::getuid().as_raw()).map_err(|e| e.to_string())
}

/// A server process: serves its interface and says `ready`, until killed.
fn serve(role: &str, o: &Options) -> Result<()> {
    if let Some(parent) = o.parent {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .map_err(|e| e.to_string())?;
        let now = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
        if now != Some(parent) {
            return Err(format!("the editor {parent} is gone"));
        }
    }
    let dir = runtime_dir(o.dir.as_deref().ok_or("--dir is missing")?)?;
    let role = role.to_owned();
    ferry::Runtime::builder()
        .processors(o.processors)
        .run(move || -> Result<()> {
            let _server = match role.as_str() {
                "wm" => Server::serve_in(&dir, WM, WM_VERSION, servers::window_manager),
                "cache" => {
                    let cache = servers::FileCache::new();
                    Server::serve_in(&dir, CACHE, CACHE_VERSION, move |op, args: &[u8]| {
                        cache.call(op, args)
                    })
                }
                other => return Err(format!("unknown role {other}")),
            }
            .map_err(|e| e.to_string())?;
            println!("ready");
            loop {
                ferry::sleep(Duration::from_secs(3600));
            }
        })
        .map_err(|e| e.to_string())?
}

/// A server process the editor started; killed and reaped on drop.
struct Peer {
    child: Child,
    name: &'static str,
}

impl Peer {
    fn start(role: &str, name: &'static str, dir: &Path, o: &Options) -> Result<Peer> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .args(["--role", role, "--processors", &o.processors.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(["--parent", &std::process::id().to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the {name}: {e}"))?;
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the {name} did not start"));
        }
        Ok(Peer { child, name })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The editor: starts the servers, connects, runs the scene, prints it.
fn editor(o: &Options) -> Result<()> {
    let dir_path = std::env::temp_dir().join(format!("urpc-scene-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir_path);
    let dir = runtime_dir(&dir_path)?;
    let result = (|| {
        let wm = Peer::start("wm", "window manager", &dir_path, o)?;
        let cache = Peer::start("cache", "file cache", &dir_path, o)?;
        println!(
            "urpc-scene (001, Figure 1): editor pid {} ({} processor(s), {} threads × {} rounds) \
             calls the window manager pid {} and the file cache pid {}, each its own process \
             with its own ferry runtime ({} processor(s)) and rpc::Server\n",
            std::process::id(),
            o.processors,
            o.threads,
            o.rounds,
            wm.child.id(),
            cache.child.id(),
            o.processors
        );
        let calls = scene(dir, o)?;
        print!("{}", timeline::render(&calls));
        println!("(peers: {} and {}, stopped)", wm.name, cache.name);
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir_path);
    result
}

/// Runs the editor's threads and returns every call they made.
fn scene(dir: RuntimeDir, o: &Options) -> Result<Vec<Call>> {
    let (threads, rounds) = (o.threads, o.rounds);
    ferry::Runtime::builder()
        .processors(o.processors)
        .run(move || -> Result<Vec<Call>> {
            let err = |e: ferry::rpc::Error| e.to_string();
            let wm = Client::connect_in(&dir, WM, WM_VERSION).map_err(err)?;
            let cache = Client::connect_in(&dir, CACHE, CACHE_VERSION).map_err(err)?;
            // One call each first, so that the timeline shows calls, not
            // first touches of the channels' memory.
            draw(&wm, 0, 0)?;
            read(&cache, 0, 0)?;
            let calls = Arc::new(Mutex::new(Vec::new()));
            let start = Arc::new(ferry::sync::Barrier::new(threads));
            let handles: Vec<_> = (1..=threads)
                .map(|t| {
                    let (wm, cache) = (wm.clone(), cache.clone());
                    let (calls, start) = (calls.clone(), start.clone());
                    ferry::spawn(move || -> Result<()> {
                        start.wait();
                        for r in 0..rounds {
                            // As T1 and T2 of Figure 1: odd threads draw
                            // first, even ones read first.
                            let (a, b) = if t % 2 == 1 {
                                (draw(&wm, t, r)?, read(&cache, t, r)?)
                            } else {
                                let b = read(&cache, t, r)?;
                                (draw(&wm, t, r)?, b)
                            };
                            calls.lock().unwrap().extend([a, b]);
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "an editor thread panicked")??;
            }
            let calls = calls.lock().unwrap().clone();
            Ok(calls)
        })
        .map_err(|e| e.to_string())?
}

/// Draws thread `t`'s line `r` and checks the answer.
fn draw(wm: &Client, t: usize, r: usize) -> Result<Call> {
    let text = format!("T{t}: line {r} of the document, typed into the editor");
    let start = servers::now_ns();
    let reply = wm
        .call(OP_DRAW, text.as_bytes())
        .map_err(|e| e.to_string())?;
    let end = servers::now_ns();
    let (stamp, result) = Stamp::split(&reply).ok_or("a short or backwards stamp")?;
    if result != servers::draw(text.as_bytes()).to_le_bytes() {
        return Err("the window manager drew something else".into());
    }
    Ok(call(t, "wm", "draw", start, end, stamp))
}

/// Reads 4 KiB of the file of thread `t` at round `r` and checks them.
fn read(cache: &Client, t: usize, r: usize) -> Result<Call> {
    let (file, len) = (t as u32 % FILES, 4096u32);
    let offset = (r as u32 * len) % (FILE_LEN - len);
    let args = servers::read_args_of(file, offset, len);
    let start = servers::now_ns();
    let reply = cache.call(OP_READ, &args).map_err(|e| e.to_string())?;
    let end = servers::now_ns();
    let (stamp, bytes) = Stamp::split(&reply).ok_or("a short or backwards stamp")?;
    let expected = (offset..offset + len).map(|at| servers::file_byte(file, at));
    if bytes.len() != len as usize || !bytes.iter().copied().eq(expected) {
        return Err("the file cache answered other bytes".into());
    }
    Ok(call(t, "file-cache", "read", start, end, stamp))
}

fn call(t: usize, server: &'static str, op: &'static str, start: u64, end: u64, s: Stamp) -> Call {
    Call {
        thread: t,
        server,
        op,
        start,
        end,
        served_start: s.start,
        served_end: s.end,
        served_by: s.thread,
    }
}
