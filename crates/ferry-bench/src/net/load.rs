//! The load generator of `net`: the hidden `net-load` subcommand
//! ([`LoadArgs`]), one process shared by every server. Plain std threads
//! and epoll (through rustix): [`conn::open`] opens the connections in
//! batches, then [`LOAD_THREADS`] threads each drive their share, each
//! over its own level-triggered epoll set, closed loop: a connection sends
//! its next 64-byte request as soon as the echo of the last one is in and
//! checked. The main thread times a warm-up, then the measured window, and
//! meanwhile samples the server's kernel threads every [`SAMPLE`]; the
//! server's CPU time is read at both ends of the window.
//!
//! This module owns the phases, the counting and the [`Outcome`] printed
//! as one JSON line on stdout (`{"Ok":{...}}` or `{"Err":"why"}`); the
//! connections are [`conn`]'s.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{Timespec, epoll};
use serde::{Deserialize, Serialize};

use super::conn::{self, Conn};
use super::histogram::Histogram;
use super::procfs;
use crate::common::Common;

/// Threads driving the connections.
pub const LOAD_THREADS: usize = 2;
/// How often the server's threads are counted while the load runs.
pub const SAMPLE: Duration = Duration::from_millis(10);
/// How long a driving thread waits in `epoll_wait` before it looks at the
/// phase again.
const POLL: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 10_000_000,
};

/// Phase: requests are sent and checked, not counted.
const WARMUP: u8 = 0;
/// Phase: requests are counted and their latency recorded.
const MEASURE: u8 = 1;
/// Phase: the threads stop.
const STOP: u8 = 2;

/// Arguments of the hidden `net-load` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: Common,
    /// The server's address.
    #[arg(long)]
    pub addr: SocketAddr,
    /// Connections to open.
    #[arg(long)]
    pub connections: usize,
    /// Warm-up before the window, in ms.
    #[arg(long)]
    pub warmup_ms: u64,
    /// The measured window, in ms.
    #[arg(long)]
    pub window_ms: u64,
    /// The server's process, whose CPU time and threads are read.
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// What one load run found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Requests whose echo completed in the window.
    pub requests: u64,
    /// The window's measured length, ns.
    pub window_ns: u64,
    /// Median latency of those requests, ns.
    pub p50_ns: u64,
    /// 99th percentile latency of those requests, ns.
    pub p99_ns: u64,
    /// Echoes checked byte for byte over the whole run (opening, warm-up
    /// and window).
    pub checked: u64,
    /// Server CPU time (user + system) over the window, ns.
    pub server_cpu_ns: Option<u64>,
    /// Most server kernel threads seen.
    pub server_threads: Option<u64>,
}

/// One load run's sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// The server's address.
    pub addr: SocketAddr,
    /// Connections.
    pub connections: usize,
    /// Untimed, then timed.
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
    /// The server's process.
    pub server: Option<u32>,
}

/// Runs the load and prints its outcome; fails only if it cannot print.
pub fn load_main(args: &LoadArgs) -> ExitCode {
    let load = Load {
        addr: args.addr,
        connections: args.connections,
        warmup: Duration::from_millis(args.warmup_ms),
        window: Duration::from_millis(args.window_ms),
        server: args.server_pid,
    };
    let outcome = procfs::raise_nofile().and_then(|limit| {
        procfs::check_room(load.connections, limit)?;
        run(&load)
    });
    let line = serde_json::to_string(&outcome).expect("an outcome always serialises");
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench net-load: writing the outcome: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The most threads seen in the server so far, and the first error
/// reading them.
#[derive(Debug, Default)]
struct Threads {
    max: u64,
    error: Option<String>,
}

impl Threads {
    fn sample(&mut self, server: Option<u32>) {
        let Some(pid) = server else { return };
        match procfs::threads(pid) {
            Ok(n) => self.max = self.max.max(n),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
}

/// What one driving thread counted.
#[derive(Debug, Default)]
struct Driven {
    checked: u64,
    latencies: Histogram,
}

/// Opens the connections, drives them through the warm-up and the window,
/// and reports.
pub fn run(load: &Load) -> Result<Outcome, String> {
    let mut threads = Threads::default();
    threads.sample(load.server);
    let conns =
        conn::open(load.addr, load.connections, || threads.sample(load.server)).map_err(|why| {
            threads.sample(load.server);
            match load.server {
                Some(_) if threads.error.is_none() => {
                    format!("{why}; the server had {} kernel threads", threads.max)
                }
                _ => why,
            }
        })?;
    let opened = conns.len() as u64;
    let mut shares: Vec<Vec<Conn>> = (0..LOAD_THREADS).map(|_| Vec::new()).collect();
    for (i, c) in conns.into_iter().enumerate() {
        shares[i % LOAD_THREADS].push(c);
    }
    let phase = AtomicU8::new(WARMUP);
    let (driven, window, cpu) = thread::scope(|s| {
        let drivers: Vec<_> = shares
            .into_iter()
            .map(|share| s.spawn(|| drive(share, &phase)))
            .collect();
        let running = || drivers.iter().all(|d| !d.is_finished());
        let mut watch = |d: Duration| {
            let end = Instant::now() + d;
            while Instant::now() < end && running() {
                threads.sample(load.server);
                thread::sleep(SAMPLE.min(end.saturating_duration_since(Instant::now())));
            }
        };
        watch(load.warmup);
        let cpu_before = load.server.map(procfs::cpu_time);
        let start = Instant::now();
        phase.store(MEASURE, Ordering::Release);
        watch(load.window);
        phase.store(STOP, Ordering::Release);
        let window = start.elapsed();
        let cpu_after = load.server.map(procfs::cpu_time);
        threads.sample(load.server);
        let driven: Result<Vec<Driven>, String> = drivers
            .into_iter()
            .map(|d| {
                d.join()
                    .unwrap_or_else(|_| Err("a load thread panicked".into()))
            })
            .collect();
        let cpu = match (cpu_before, cpu_after) {
            (Some(b), Some(a)) => Some(b.and_then(|b| a.map(|a| a.saturating_sub(b)))),
            _ => None,
        };
        (driven, window, cpu)
    });
    let driven = driven?;
    let mut latencies = Histogram::new();
    let mut checked = opened;
    for d in &driven {
        checked += d.checked;
        latencies.merge(&d.latencies);
    }
    if latencies.is_empty() {
        return Err(format!(
            "no request completed in the {:?} window",
            load.window
        ));
    }
    let server_threads = match (load.server, threads.error) {
        (None, _) => None,
        (Some(_), Some(e)) => return Err(e),
        (Some(_), None) => Some(threads.max),
    };
    Ok(Outcome {
        requests: latencies.len(),
        window_ns: window.as_nanos() as u64,
        p50_ns: latencies.quantile(0.5).unwrap_or(0),
        p99_ns: latencies.quantile(0.99).unwrap_or(0),
        checked,
        server_cpu_ns: cpu.transpose()?.map(|d| d.as_nanos() as u64),
        server_threads,
    })
}

/// One driving thread: its connections made non-blocking and added to an
/// epoll set of its own, a request sent on each, then the closed loop until
/// the phase is [`STOP`].
fn drive(mut conns: Vec<Conn>, phase: &AtomicU8) -> Result<Driven, String> {
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| format!("epoll: {e}"))?;
    for (i, c) in conns.iter().enumerate() {
        c.stream()
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking: {e}"))?;
        epoll::add(
            &epoll,
            c.stream(),
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .map_err(|e| format!("epoll_ctl: {e}"))?;
    }
    for c in &mut conns {
        c.send()?;
    }
    let mut out = Driven::default();
    let mut events = Vec::with_capacity(conns.len().clamp(1, 1024));
    loop {
        events.clear();
        match epoll::wait(
            &epoll,
            rustix::buffer::spare_capacity(&mut events),
            Some(&POLL),
        ) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("epoll_wait: {e}")),
        }
        let now = phase.load(Ordering::Acquire);
        if now == STOP {
            return Ok(out);
        }
        for ev in &events {
            let c = &mut conns[ev.data.u64() as usize];
            if let Some(latency) = c.receive()? {
                out.checked += 1;
                if now == MEASURE {
                    out.latencies.record(latency.as_nanos() as u64);
                }
                c.send()?;
            }
        }
    }
}
