//! `scale`'s idle case: what a process costs while nothing in it is
//! runnable. [`IDLE_THREADS`] threads (goroutines) block on one gate and
//! [`IDLE_SOCKETS`] loopback TCP connections each have a thread
//! (goroutine) blocked reading its server end; after a settling second,
//! the CPU time the process's kernel threads run over an idle window of
//! [`WINDOW`] ([`QUICK_WINDOW`] with `--quick`), per second of the
//! window. Goal: about nothing ([`GOAL_US_PER_S`]).
//!
//! Each run is a fresh process (ferry's: the benchmark started again as
//! `scale-ferry --idle`; Go's: its `scale` program with `-idle`). It
//! listens on 127.0.0.1 and prints `listening PORT`; the benchmark opens
//! the connections and holds their client ends (both ends would not fit
//! under one process's descriptor limit here). Once every thread waits the
//! child prints `ready` and waits for ever. The benchmark reads the run
//! time of each of the child's kernel threads (`/proc/PID/task/*/schedstat`,
//! in ns) before and after the window, from outside, so that measuring
//! wakes nothing in the child, and then kills it.
//!
//! This module owns the idle case's runs, both sides of ferry's and the
//! benchmark's side of Go's; it prints only the child's lines.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::peers::go::Program;

/// Threads blocked on the gate.
pub const IDLE_THREADS: usize = 10_000;

/// Idle connections, each with a blocked reader.
pub const IDLE_SOCKETS: usize = 10_000;

/// The idle window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// The idle window with `--quick`.
pub const QUICK_WINDOW: Duration = Duration::from_secs(2);

/// Runs per system (each a window long; no warm-up run).
pub const RUNS: u32 = 3;

/// Runs per system with `--quick`.
pub const QUICK_RUNS: u32 = 2;

/// The goal: at most this much CPU per idle second (0.1% of one CPU).
pub const GOAL_US_PER_S: f64 = 1000.0;

/// How long settling takes before the window opens.
const SETTLE: Duration = Duration::from_secs(1);

/// One run of ferry on `processors` processors: the CPU microseconds used
/// per idle second.
pub fn run_ferry(processors: usize, window: Duration) -> Result<f64, String> {
    let me =
        std::env::current_exe().map_err(|e| format!("cannot find the benchmark's binary: {e}"))?;
    let mut cmd = Command::new(me);
    cmd.args([
        "scale-ferry",
        "--n",
        &IDLE_THREADS.to_string(),
        "--processors",
        &processors.to_string(),
        "--idle",
        "--sockets",
        &IDLE_SOCKETS.to_string(),
    ]);
    drive(cmd, "ferry", window)
}

/// One run of Go with `GOMAXPROCS=procs`.
pub fn run_go(program: &Program, procs: usize, window: Duration) -> Result<f64, String> {
    let mut cmd = Command::new(program.path());
    cmd.args([
        "-n",
        &IDLE_THREADS.to_string(),
        "-idle",
        "-sockets",
        &IDLE_SOCKETS.to_string(),
    ])
    .env("GOMAXPROCS", procs.to_string());
    drive(cmd, "Go", window)
}

/// Starts the child, opens its connections once it listens, measures it
/// once it is ready, and returns its CPU microseconds per idle second.
fn drive(mut cmd: Command, who: &str, window: Duration) -> Result<f64, String> {
    let limit = crate::net::procfs::raise_nofile()?;
    crate::net::procfs::check_room(IDLE_SOCKETS, limit)?;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the {who} run: {e}"))?;
    let outcome = talk(&mut child, who, window);
    // It waits for ever once measured.
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    match outcome {
        Err(why) if !err.trim().is_empty() => Err(format!("{why}: {}", err.trim())),
        other => other,
    }
}

/// The benchmark's side of one run: the connections, held while the
/// child's run time is read across the window.
fn talk(child: &mut Child, who: &str, window: Duration) -> Result<f64, String> {
    let out = child.stdout.take().ok_or("no stdout from the child")?;
    let mut lines = BufReader::new(out).lines();
    let mut next = |what: &str| -> Result<String, String> {
        match lines.next() {
            Some(Ok(l)) => Ok(l),
            Some(Err(e)) => Err(format!("reading the {who} run's {what}: {e}")),
            None => Err(format!("the {who} run ended before its {what}")),
        }
    };
    let port: u16 = next("port")?
        .strip_prefix("listening ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("the {who} run printed no port"))?;
    let mut conns = Vec::with_capacity(IDLE_SOCKETS);
    for i in 0..IDLE_SOCKETS {
        let c = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("connection {} of {IDLE_SOCKETS}: {e}", i + 1))?;
        conns.push(c);
    }
    let line = next("ready line")?;
    if line.trim() != "ready" {
        return Err(format!("unexpected line from the {who} run: {line:?}"));
    }
    std::thread::sleep(SETTLE);
    let pid = child.id();
    let (r0, t0) = (run_ns(pid)?, Instant::now());
    std::thread::sleep(window);
    let (r1, t1) = (run_ns(pid)?, Instant::now());
    drop(conns);
    Ok(r1.saturating_sub(r0) as f64 / 1e3 / (t1 - t0).as_secs_f64())
}

/// The run time, in ns, of every kernel thread of process `pid` (the
/// first field of each `/proc/PID/task/TID/schedstat`).
fn run_ns(pid: u32) -> Result<u64, String> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|e| format!("reading {dir}: {e}"))?;
    let mut total = 0;
    for t in tasks {
        let t = t.map_err(|e| format!("reading {dir}: {e}"))?;
        // A thread that ended meanwhile has no file any more.
        let Ok(stat) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        total += parse_schedstat(&stat)?;
    }
    Ok(total)
}

/// The run time (ns) of a `schedstat` line: `run_ns wait_ns timeslices`.
pub fn parse_schedstat(line: &str) -> Result<u64, String> {
    line.split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("unexpected schedstat line: {line:?}"))
}

/// The child's side of ferry's run (`scale-ferry --idle`): prints
/// `listening PORT`, then `ready` once every thread waits, and waits for
/// ever (the benchmark kills it).
pub fn ferry_child(n: usize, sockets: usize, processors: usize) -> ExitCode {
    let outcome = ferry::Runtime::builder()
        .processors(processors)
        .run(move || idle_here(n, sockets))
        .map_err(|e| format!("cannot start a ferry runtime: {e}"))
        .and_then(|r| r);
    match outcome {
        Ok(never) => match never {},
        Err(why) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
    }
}

/// The gate: how many threads wait on it (it never opens).
type Gate = (ferry::sync::Mutex<usize>, ferry::sync::Condvar);

/// Waits on `gate` for ever, counted in.
fn wait_at(gate: &Gate) -> ! {
    let mut s = gate.0.lock();
    *s += 1;
    loop {
        s = gate.1.wait(s);
    }
}

/// Sets the idle case up and waits for ever; returns only if it cannot.
fn idle_here(n: usize, sockets: usize) -> Result<std::convert::Infallible, String> {
    let gate: Arc<Gate> = Arc::new((ferry::sync::Mutex::new(0), ferry::sync::Condvar::new()));
    for _ in 0..n {
        let g = Arc::clone(&gate);
        ferry::thread::Builder::new()
            .spawn(move || wait_at(&g))
            .map_err(|e| format!("spawning a gate thread: {e}"))?;
    }
    let listener = ferry::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("the listener's address: {e}"))?
        .port();
    println!("listening {port}");
    std::io::stdout()
        .flush()
        .map_err(|e| format!("printing the port: {e}"))?;
    let reading = Arc::new(AtomicUsize::new(0));
    for i in 0..sockets {
        let (mut s, _) = listener
            .accept()
            .map_err(|e| format!("accepting connection {} of {sockets}: {e}", i + 1))?;
        let reading = Arc::clone(&reading);
        ferry::thread::Builder::new()
            .spawn(move || {
                reading.fetch_add(1, Ordering::Relaxed);
                let mut b = [0u8; 64];
                // Until the benchmark closes its end.
                while matches!(s.read(&mut b), Ok(k) if k > 0) {}
            })
            .map_err(|e| format!("spawning a reader: {e}"))?;
    }
    // Every thread in its wait; then this one waits too.
    while *gate.0.lock() < n || reading.load(Ordering::Relaxed) < sockets {
        ferry::sleep(Duration::from_millis(1));
    }
    println!("ready");
    std::io::stdout()
        .flush()
        .map_err(|e| format!("printing ready: {e}"))?;
    wait_at(&gate)
}
