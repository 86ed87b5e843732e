//! `sleeping server`: a null call to a server whose processors are all
//! parked, so that the call must ring the doorbell (a futex wake) and the
//! server's processor must come back from the kernel before it sees the
//! call. The client waits [`GAP`] before each call, ten times the longest
//! adaptive spin of an idle processor (`event::polled::MAX_SPIN`, 200 µs),
//! so the server's processor has given up spinning and sleeps on its
//! doorbell when the call comes. Each call is timed on its own (the gap is
//! not), and the run counts the voluntary context switches of the
//! server's processor (its main thread, which drives the one-processor
//! runtime `ferry::Runtime::run` starts there; `/proc/<pid>/task/<pid>/status`)
//! to show that it did sleep: per call, and per [`GAP`] without a call
//! (its idle wake-ups: the 20 ms stop poll of the server's first thread);
//! the difference is one per call if every call found the processor
//! asleep. The runtime's other kernel threads (its monitor wakes on its
//! own about every millisecond) are not counted.
//!
//! Beside it, `futex shm` with the same gap: its server sleeps in
//! `FUTEX_WAIT` on a shared word, and each call wakes it with
//! `FUTEX_WAKE` (the kernel's own sleeping round trip).
//!
//! This module owns both loops, the switch count and the rows.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::calls;
use super::ferry::{self, OP_ECHO};
use super::systems::{Connection, System};
use crate::affinity;
use crate::error::Error;
use crate::report::{Ratio, Section};
use crate::row::{Row, Unit};

/// The case name.
pub const CASE: &str = "sleeping server";

/// The wait before each call.
pub const GAP: Duration = Duration::from_millis(2);

/// Untimed calls first.
const WARMUP_CALLS: u64 = 3;

/// One run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slept {
    /// Mean ns per timed call.
    pub ns_per_call: f64,
    /// Timed calls.
    pub calls: u64,
    /// The server processor's voluntary context switches per timed call
    /// and per [`GAP`] without a call, if known.
    pub switches: Option<(f64, f64)>,
}

impl Slept {
    /// Calls that found the processor asleep, per call: switches per call
    /// less those of an idle gap.
    pub fn parked_per_call(&self) -> Option<f64> {
        self.switches.map(|(call, idle)| call - idle)
    }
}

/// The voluntary context switches in one `/proc/.../status` text.
pub fn voluntary_switches(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The voluntary context switches of thread `tid` of process `pid`.
fn thread_switches(pid: u32, tid: u32) -> Option<u64> {
    voluntary_switches(&std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?)
}

/// Idle gaps counted after the calls.
const IDLE_GAPS: u32 = 10;

/// Times `calls` calls made by `call(n)`, each after `wait()` (and
/// [`WARMUP_CALLS`] untimed first); the mean ns per timed call.
fn spaced(
    calls: u64,
    mut wait: impl FnMut(),
    mut call: impl FnMut(u64) -> Result<(), Error>,
) -> Result<f64, Error> {
    for n in 1..=WARMUP_CALLS {
        wait();
        call(n)?;
    }
    let mut total = Duration::ZERO;
    for n in 1..=calls {
        wait();
        let t = Instant::now();
        call(WARMUP_CALLS + n)?;
        total += t.elapsed();
    }
    Ok(total.as_nanos() as f64 / calls.max(1) as f64)
}

/// One ferry run: `calls` null calls, each after [`GAP`] in
/// `ferry::sleep`.
pub fn ferry_run(calls: u64, cpus: (Option<usize>, Option<usize>)) -> Result<Slept, Error> {
    ferry::with_server(cpus, 1, move |client, pid| {
        let one = |n: u64| -> Result<(), Error> {
            let r = client
                .call(OP_ECHO, &[])
                .map_err(|e| Error(format!("ferry call: {e}")))?;
            calls::check(&r, 0, n)
        };
        let mut before = None;
        let mut warm = 0;
        let ns = spaced(
            calls,
            || {
                ::ferry::sleep(GAP);
                // The count starts after the warm-up calls.
                warm += 1;
                if warm == WARMUP_CALLS + 1 {
                    before = thread_switches(pid, pid);
                }
            },
            one,
        )?;
        let after = thread_switches(pid, pid);
        ::ferry::sleep(GAP * IDLE_GAPS);
        let idle = thread_switches(pid, pid);
        let per =
            |from: Option<u64>, to: Option<u64>, n: f64| Some(to?.saturating_sub(from?) as f64 / n);
        let switches =
            per(before, after, calls.max(1) as f64).zip(per(after, idle, f64::from(IDLE_GAPS)));
        Ok(Slept {
            ns_per_call: ns,
            calls,
            switches,
        })
    })
}

/// One futex-shm run: `calls` null calls, each after [`GAP`] in
/// `std::thread::sleep`.
pub fn futex_run(calls: u64, cpus: (Option<usize>, Option<usize>)) -> Result<Slept, Error> {
    affinity::pin_or_warn(cpus.0, "urpc client");
    let mut conn = Connection::open(System::FutexShm, 0, cpus.1)?;
    let ns = spaced(
        calls,
        || std::thread::sleep(GAP),
        |_| conn.call(&[], &mut []),
    )?;
    conn.close()?;
    Ok(Slept {
        ns_per_call: ns,
        calls,
        switches: None,
    })
}

/// The systems of the section, in table order.
pub const SYSTEMS: [&str; 2] = [ferry::SYSTEM, "futex shm"];

/// The section: a row per system (samples per run) and the switch count.
pub fn section(results: &[Vec<Slept>; 2], failures: &[String]) -> Section {
    let why = failures.first().map_or("no runs", String::as_str);
    let rows = SYSTEMS
        .iter()
        .zip(results)
        .map(|(system, runs)| {
            let samples: Vec<f64> = runs.iter().map(|s| s.ns_per_call).collect();
            let calls = runs.last().map_or(0, |s| s.calls);
            if samples.is_empty() {
                Row::absent(super::EXPERIMENT, CASE, *system, Unit::Ns, why)
            } else {
                Row::new(super::EXPERIMENT, CASE, *system, Unit::Ns, samples, calls)
            }
        })
        .collect();
    let mut notes = String::new();
    let runs: Vec<(f64, f64)> = results[0].iter().filter_map(|s| s.switches).collect();
    let parked: Vec<f64> = results[0]
        .iter()
        .filter_map(Slept::parked_per_call)
        .collect();
    if runs.is_empty() {
        notes.push_str("ferry server processor's voluntary context switches: not read\n");
    } else {
        let range = |v: &mut dyn Iterator<Item = f64>| {
            v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            })
        };
        let (c0, c1) = range(&mut runs.iter().map(|r| r.0));
        let (i0, i1) = range(&mut runs.iter().map(|r| r.1));
        let (p0, p1) = range(&mut parked.iter().copied());
        let _ = writeln!(
            notes,
            "ferry server processor's voluntary context switches: {c0:.2} to {c1:.2} per call, \
             {i0:.2} to {i1:.2} per {} ms without a call; the difference, calls that found it \
             asleep, {p0:.2} to {p1:.2} per call over the runs ({})",
            GAP.as_millis(),
            if p0 >= 0.95 {
                "it parked before each call"
            } else {
                "NOT every call found it parked"
            }
        );
    }
    for f in failures {
        let _ = writeln!(notes, "failed run: {f}");
    }
    Section {
        title: format!(
            "Sleeping server: a null call {} ms after the last, the server's processors parked \
             (ns per call, each call timed alone)",
            GAP.as_millis()
        ),
        headers: ("case", "system"),
        rows,
        ratios: vec![Ratio::to_system("vs futex shm", "futex shm")],
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid() -> u32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }

    #[test]
    fn switches_are_read_from_a_status_text() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(voluntary_switches(status), Some(42));
        assert_eq!(voluntary_switches("nonvoluntary_ctxt_switches:\t7\n"), None);
        assert_eq!(voluntary_switches("voluntary_ctxt_switches:\tmany\n"), None);
        let (pid, tid) = (std::process::id(), tid());
        let me = thread_switches(pid, tid).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        assert!(thread_switches(pid, tid).unwrap() > me);
        assert_eq!(thread_switches(pid, u32::MAX), None);
    }

    #[test]
    fn spaced_calls_wait_before_each_and_time_only_the_calls() {
        let mut waits = 0;
        let mut seen = Vec::new();
        let ns = spaced(
            4,
            || waits += 1,
            |n| {
                seen.push(n);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(waits, 7);
        assert_eq!(seen, (1..=7).collect::<Vec<_>>());
        assert!(ns.is_finite());
        let failing = spaced(4, || {}, |n| Err(Error(format!("{n}"))));
        assert_eq!(failing, Err(Error("1".into())));
    }

    #[test]
    fn the_section_names_both_systems_and_whether_it_parked() {
        let s = |ns, sw| Slept {
            ns_per_call: ns,
            calls: 10,
            switches: sw,
        };
        let sec = section(&[vec![s(30.0, Some((1.1, 0.1)))], vec![s(20.0, None)]], &[]);
        assert_eq!(sec.rows[0].system, "ferry");
        assert_eq!(sec.rows[1].median(), Some(20.0));
        assert!(sec.notes.contains("it parked before each"), "{}", sec.notes);
        assert!(sec.notes.contains("1.10 to 1.10 per call"), "{}", sec.notes);
        let sec = section(&[vec![s(30.0, Some((0.5, 0.1)))], vec![]], &["x".into()]);
        assert!(sec.notes.contains("NOT every call"), "{}", sec.notes);
        assert_eq!(sec.rows[1].absent_reason(), Some("x"));
    }
}
