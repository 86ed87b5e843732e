//! The two-process part of `streams`: bytes between two processes through
//! a ferry stream opened on a binding (`ferry::stream::listen`/`connect`)
//! against a Linux pipe between the same two processes.
//!
//! | case | what one sample is | systems |
//! |------|--------------------|---------|
//! | `2 processes 4KB` | the peer process writes in 4 KB writes, this one reads until end-of-file: MB/s | `ferry` (a cross-process stream), `pipe` (the peer's stdout) |
//! | `ping-pong 1B` | this process writes one byte, the peer reads it and writes it back, this one reads it: mean ns per round trip | `ferry` (both directions of one connection), `pipe` (the peer's stdin and stdout) |
//!
//! The peer is this binary again (`ferry-bench streams` with [`PEER_VAR`]
//! in its environment, which [`peer_if_asked`] catches before anything
//! else runs), pinned to the second core; this side's loop runs on a
//! kernel thread pinned to the first. Both sides of both systems are
//! plain kernel threads, so the two systems differ only in the channel.
//!
//! This module owns the peer's roles, the two cases' loops on this side
//! and their section of the report; the flow's reading loop is
//! [`super::harness::consume`], the peer's writing loop
//! [`super::harness::produce`].

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::harness::{self, Budget, Flow, Timed};
use super::{FERRY, PIPE, Plan};
use crate::affinity;
use crate::measure::interleaved;
use crate::report::{Error, Ratio, Section};
use crate::row::{Row, Unit};
use crate::urpc::on_thread;
use crate::watchdog::hang;

/// The environment variable that makes `ferry-bench streams` a peer: its
/// value is `SYSTEM CASE NAME BYTES CPU`.
pub const PEER_VAR: &str = "FERRY_BENCH_STREAMS_PEER";

/// The flow between two processes.
pub const FLOW: &str = "2 processes 4KB";
/// The round trip of one byte.
pub const PING: &str = "ping-pong 1B";

/// The flow's write and read size.
const CHUNK: usize = 4096;
/// The stream's capacity each way (a pipe's default).
const CAPACITY: usize = 64 * 1024;
/// Round trips before the clock starts.
const PING_WARMUP: u32 = 1000;

/// Every (case, system) pair, in table order.
const PAIRS: [(&str, &str); 4] = [(FLOW, FERRY), (FLOW, PIPE), (PING, FERRY), (PING, PIPE)];

/// If this process was started as a peer, plays its role and exits.
pub fn peer_if_asked() {
    let Ok(role) = std::env::var(PEER_VAR) else {
        return;
    };
    let code = match peer(&role) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ferry-bench streams peer ({role}): {}", e.0);
            1
        }
    };
    std::process::exit(code);
}

/// The peer's side of one run.
fn peer(role: &str) -> Result<(), Error> {
    let w: Vec<&str> = role.split(' ').collect();
    let [system, case, name, bytes, cpu] = w[..] else {
        return Err(Error(format!("bad peer role {role:?}")));
    };
    let bytes: u64 = bytes.parse().map_err(|_| Error("bad byte count".into()))?;
    affinity::pin_or_warn(cpu.parse().ok(), "streams peer");
    let io = |e: io::Error| Error(format!("{system} {case}: {e}"));
    match (system, case) {
        (FERRY, "flow") => {
            let (w, _r) = ferry::stream::connect(name).map_err(io)?;
            harness::produce(w, bytes, CHUNK).map(|_| ())
        }
        (FERRY, "ping") => {
            let (w, r) = ferry::stream::connect(name).map_err(io)?;
            echo(r, w).map_err(io)
        }
        (PIPE, "flow") => {
            harness::produce(raw(io::stdout().as_fd()).map_err(io)?, bytes, CHUNK).map(|_| ())
        }
        (PIPE, "ping") => echo(
            raw(io::stdin().as_fd()).map_err(io)?,
            raw(io::stdout().as_fd()).map_err(io)?,
        )
        .map_err(io),
        _ => Err(Error(format!("no peer role {system} {case}"))),
    }
}

/// A standard stream's descriptor as a file of its own (no buffering).
fn raw(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.try_clone_to_owned()?))
}

/// Sends back every byte read, one at a time, until end-of-file.
fn echo(mut r: impl Read, mut w: impl Write) -> io::Result<()> {
    let mut b = [0u8; 1];
    loop {
        if r.read(&mut b)? == 0 {
            return Ok(());
        }
        w.write_all(&b)?;
    }
}

/// A peer process, killed and reaped on drop unless it was waited for.
struct Peer(Option<Child>);

impl Peer {
    fn start(role: &str, stdin: bool) -> Result<Peer, Error> {
        let exe = std::env::current_exe().map_err(|e| Error(format!("own executable: {e}")))?;
        let child = Command::new(exe)
            .arg("streams")
            .env(PEER_VAR, role)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error(format!("starting the peer: {e}")))?;
        Ok(Peer(Some(child)))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("not yet waited for")
    }

    /// Waits for the peer to exit by itself, successfully.
    fn finish(mut self) -> Result<(), Error> {
        let status = self.0.take().expect("once").wait();
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(Error(format!("the peer failed: {s}"))),
            Err(e) => Err(Error(format!("waiting for the peer: {e}"))),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fresh name for run `k`'s stream.
fn stream_name(k: u64) -> String {
    format!("ferry-bench-streams-{}-{k}", std::process::id())
}

/// One flow: the peer writes `bytes`, this side reads them.
fn flow(system: &str, bytes: u64, peer_cpu: Option<usize>, k: u64) -> Result<Flow, Error> {
    let cpu = peer_cpu.map_or_else(|| "-".to_owned(), |c| c.to_string());
    let io = |e: io::Error| Error(format!("{system} flow: {e}"));
    let flow = if system == FERRY {
        let name = stream_name(k);
        let listener = ferry::stream::Builder::new()
            .capacity(CAPACITY)
            .listen(&name)
            .map_err(io)?;
        let peer = Peer::start(&format!("{FERRY} flow {name} {bytes} {cpu}"), false)?;
        let (_w, r) = listener.accept().map_err(io)?;
        let flow = harness::consume(r, CHUNK)?;
        peer.finish()?;
        flow
    } else {
        let mut peer = Peer::start(&format!("{PIPE} flow - {bytes} {cpu}"), false)?;
        let out = peer.child().stdout.take().expect("piped");
        let flow = harness::consume(out, CHUNK)?;
        peer.finish()?;
        flow
    };
    if flow.bytes != bytes {
        return Err(Error(format!(
            "{system} flow: {} bytes arrived of {bytes}",
            flow.bytes
        )));
    }
    Ok(flow)
}

/// One ping-pong run: round trips of one byte for the budget.
fn ping(system: &str, budget: Budget, peer_cpu: Option<usize>, k: u64) -> Result<Timed, Error> {
    let cpu = peer_cpu.map_or_else(|| "-".to_owned(), |c| c.to_string());
    let io = |e: io::Error| Error(format!("{system} ping-pong: {e}"));
    if system == FERRY {
        let name = stream_name(k);
        let listener = ferry::stream::listen(&name).map_err(io)?;
        let peer = Peer::start(&format!("{FERRY} ping {name} 0 {cpu}"), false)?;
        let (w, r) = listener.accept().map_err(io)?;
        let t = round_trips(w, r, budget)?;
        peer.finish()?;
        Ok(t)
    } else {
        let mut peer = Peer::start(&format!("{PIPE} ping - 0 {cpu}"), true)?;
        let w = peer.child().stdin.take().expect("piped");
        let r = peer.child().stdout.take().expect("piped");
        let t = round_trips(w, r, budget)?;
        peer.finish()?;
        Ok(t)
    }
}

/// Round trips of one byte (its value the trip's number, checked), for
/// `budget` after [`PING_WARMUP`] untimed ones; then `w` is dropped,
/// which ends the peer.
fn round_trips(mut w: impl Write, mut r: impl Read, budget: Budget) -> Result<Timed, Error> {
    let mut k = 0u8;
    let mut trip = || -> Result<(), Error> {
        k = k.wrapping_add(1);
        w.write_all(&[k])
            .map_err(|e| Error(format!("ping write: {e}")))?;
        let mut b = [0u8; 1];
        r.read_exact(&mut b)
            .map_err(|e| Error(format!("ping read: {e}")))?;
        if b[0] != k {
            return Err(Error(format!("ping: got {} back for {k}", b[0])));
        }
        Ok(())
    };
    for _ in 0..PING_WARMUP {
        trip()?;
    }
    harness::timed(
        Budget {
            warmup: Duration::ZERO,
            ..budget
        },
        trip,
    )
}

/// Samples of one pair.
#[derive(Default, Clone)]
struct Pair {
    samples: Vec<f64>,
    items: u64,
    first_error: Option<String>,
}

/// Runs the two-process cases, interleaved, and gives their section.
///
/// # Errors
/// Never for a failed run (its row says why); only as [`interleaved`].
pub fn section(plan: &Plan, cpus: (Option<usize>, Option<usize>)) -> Result<Section, Error> {
    let mut pairs = vec![Pair::default(); PAIRS.len()];
    let started = Instant::now();
    let mut k = 0u64;
    interleaved(plan.runs, 1, PAIRS.len(), |t| {
        let (case, system) = PAIRS[t.system];
        let what = format!("{case} / {system}");
        super::begin_turn(&t, "two processes, ", plan.runs, started, &what);
        k += 1;
        let run = on_thread(|| {
            affinity::pin_or_warn(cpus.0, "streams");
            if case == FLOW {
                flow(system, plan.flow_bytes, cpus.1, k).map(|f| (f.mb_per_s(), f.bytes))
            } else {
                ping(system, plan.budget, cpus.1, k).map(|t| (t.ns_per_op, t.ops))
            }
        });
        let pair = &mut pairs[t.system];
        match run {
            Ok((value, items)) if !t.warmup() => {
                pair.samples.push(value);
                pair.items = items;
            }
            Ok(_) => {}
            Err(e) => {
                pair.first_error.get_or_insert(e.0);
            }
        }
        Ok(())
    })?;
    hang::unwatch();
    let rows = PAIRS
        .into_iter()
        .zip(pairs)
        .map(|((case, system), p)| {
            let unit = if case == FLOW {
                Unit::Rate("MB/s")
            } else {
                Unit::Ns
            };
            match (p.samples.is_empty(), p.first_error) {
                (true, e) => Row::absent(
                    super::EXPERIMENT,
                    case,
                    system,
                    unit,
                    e.unwrap_or_else(|| "no samples".into()),
                ),
                (false, _) => Row::new(super::EXPERIMENT, case, system, unit, p.samples, p.items),
            }
        })
        .collect();
    Ok(Section {
        title: format!(
            "Two processes on two cores: MB/s (10^6 bytes) from the peer process to this one, \
             {} MiB per run in {CHUNK}-byte writes and reads; mean ns per round trip of one \
             byte, {:?} timed per run",
            plan.flow_bytes >> 20,
            plan.budget.timed
        ),
        headers: ("case", "system"),
        rows,
        ratios: vec![Ratio::to_system("vs ferry", FERRY)],
        notes: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_role_is_an_error_and_echo_sends_every_byte_back() {
        assert!(peer("ferry flow").is_err());
        assert!(peer("tcp flow x 1 -").is_err());
        let mut back = Vec::new();
        echo(&b"abc"[..], &mut back).unwrap();
        assert_eq!(back, b"abc");
    }

    #[test]
    fn round_trips_check_the_byte_that_comes_back() {
        let budget = Budget {
            warmup: Duration::ZERO,
            timed: Duration::from_millis(1),
        };
        // A peer that answers with the wrong byte.
        let e = round_trips(io::sink(), &[9u8; 4][..], budget).unwrap_err();
        assert!(e.0.contains("got 9 back for 1"), "{}", e.0);
    }
}
