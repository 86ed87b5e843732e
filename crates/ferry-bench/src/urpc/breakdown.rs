//! 001 Table II, the breakdown of a call, measured on the real path
//! without instrumenting ferry: the client reads CLOCK_MONOTONIC just
//! before `Client::call` and just after it returns, and the server's
//! handler ([`super::ferry::OP_STAMP`]) reads the same clock as its first
//! and its last act and answers with both readings (16 bytes). One clock
//! serves both processes, so each call splits into client -> handler
//! entry, the handler, and handler exit -> client. A spin-floor exchange
//! made in the same run (two processes bouncing one cache line) gives
//! what moving the line one way costs by itself; what is left of each
//! half is ferry's own software.
//!
//! This module owns that loop, the split and its rows; the server is
//! [`super::ferry`]'s and the spin floor [`super::systems`]'.

use std::fmt::Write as _;

use super::calls::{self, Budget};
use super::ferry::{self, OP_STAMP};
use super::sys::mono_ns;
use super::systems::{Connection, System};
use crate::affinity;
use crate::error::Error;
use crate::report::Section;
use crate::row::{Row, Unit};

/// The rows' (part, quantity) names, in table order.
pub const ROWS: [(&str, &str); 9] = [
    ("round trip", "stamped null call"),
    ("client -> server", "call to handler entry"),
    ("client -> server", "of which cache line (spin floor / 2)"),
    ("client -> server", "of which ferry's own"),
    ("server", "handler (two clock reads)"),
    ("server -> client", "handler exit to return"),
    ("server -> client", "of which cache line (spin floor / 2)"),
    ("server -> client", "of which ferry's own"),
    ("clock", "one CLOCK_MONOTONIC read"),
];

/// Sums of the parts of stamped calls, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Split {
    /// Calls summed.
    pub calls: u64,
    /// Client's reading before the call to the handler's entry.
    pub to_entry: f64,
    /// Handler's entry to its exit.
    pub handler: f64,
    /// Handler's exit to the client's reading after the call.
    pub from_exit: f64,
    /// Calls whose four readings were not in order (clocks of the two
    /// CPUs disagreeing); counted in the sums all the same.
    pub disordered: u64,
}

impl Split {
    /// Adds one call: client readings `before` and `after`, handler
    /// readings `entry` and `exit`.
    pub fn add(&mut self, before: u64, entry: u64, exit: u64, after: u64) {
        let d = |a: u64, b: u64| b as f64 - a as f64;
        self.calls += 1;
        self.to_entry += d(before, entry);
        self.handler += d(entry, exit);
        self.from_exit += d(exit, after);
        if !(before <= entry && entry <= exit && exit <= after) {
            self.disordered += 1;
        }
    }

    /// The means per call, in [`ROWS`] order, given the spin floor's round
    /// trip and one clock read (ns).
    pub fn means(&self, spin_floor: f64, clock: f64) -> [f64; 9] {
        let n = self.calls.max(1) as f64;
        let (a, h, b) = (self.to_entry / n, self.handler / n, self.from_exit / n);
        let line = spin_floor / 2.0;
        [a + h + b, a, line, a - line, h, b, line, b - line, clock]
    }
}

/// One run's numbers: the means in [`ROWS`] order and the split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunResult {
    /// The means per call.
    pub means: [f64; 9],
    /// The sums they come from.
    pub split: Split,
}

/// The mean cost of one [`mono_ns`] read, over 1000.
fn clock_read() -> f64 {
    const N: u64 = 1000;
    let start = mono_ns();
    let mut last = start;
    for _ in 0..N {
        last = std::hint::black_box(mono_ns());
    }
    (last - start) as f64 / N as f64
}

/// One run on the calling thread: a spin-floor exchange of null calls,
/// then stamped ferry null calls, each for `budget`.
pub fn run_once(budget: &Budget, cpus: (Option<usize>, Option<usize>)) -> Result<RunResult, Error> {
    affinity::pin_or_warn(cpus.0, "urpc client");
    let mut conn = Connection::open(System::SpinFloor, 0, cpus.1)?;
    let spin = calls::time_calls(budget, 0, |args, result| {
        conn.call(args, result.as_mut_slice())
    })?;
    conn.close()?;
    let budget = *budget;
    let split = ferry::with_server(cpus, 1, move |client, _| {
        let mut split = Split::default();
        let one = || -> Result<(u64, u64, u64, u64), Error> {
            let before = mono_ns();
            let r = client.call(OP_STAMP, &[]);
            let after = mono_ns();
            let r = r.map_err(|e| Error(format!("ferry call: {e}")))?;
            let (entry, exit) =
                ferry::stamps(&r).ok_or_else(|| Error("a stamp answer of a wrong size".into()))?;
            Ok((before, entry, exit, after))
        };
        let warm = mono_ns();
        while mono_ns() - warm < budget.warmup.as_nanos() as u64 {
            one()?;
        }
        let start = mono_ns();
        while split.calls < budget.min_calls
            || (mono_ns() - start < budget.timed.as_nanos() as u64
                && split.calls < budget.max_calls)
        {
            let (b, e, x, a) = one()?;
            split.add(b, e, x, a);
        }
        Ok(split)
    })?;
    Ok(RunResult {
        means: split.means(spin.ns_per_call, clock_read()),
        split,
    })
}

/// The section: one row per [`ROWS`] entry, samples one per run.
pub fn section(runs: &[RunResult], failures: &[String]) -> Section {
    let mut rows = Vec::new();
    for (i, (part, what)) in ROWS.iter().enumerate() {
        let samples: Vec<f64> = runs.iter().map(|r| r.means[i]).collect();
        let items = runs.last().map_or(0, |r| r.split.calls);
        rows.push(if samples.is_empty() {
            let why = failures
                .first()
                .cloned()
                .unwrap_or_else(|| "no runs".into());
            Row::absent(super::EXPERIMENT, *part, *what, Unit::Ns, why)
        } else {
            Row::new(super::EXPERIMENT, *part, *what, Unit::Ns, samples, items)
        });
    }
    let mut notes = String::new();
    let calls: u64 = runs.iter().map(|r| r.split.calls).sum();
    let disordered: u64 = runs.iter().map(|r| r.split.disordered).sum();
    let _ = writeln!(
        notes,
        "clock readings out of order (client before > handler entry, or handler exit > client \
         after): {disordered} of {calls} calls"
    );
    for f in failures {
        let _ = writeln!(notes, "failed run: {f}");
    }
    Section {
        title: "Table II (001): where a null call's time goes, ns per call (means of each run's \
                calls; client and handler read one clock)"
            .to_owned(),
        headers: ("part", "quantity"),
        rows,
        ratios: Vec::new(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_sums_the_parts_and_subtracts_the_line() {
        let mut s = Split::default();
        s.add(100, 400, 450, 700);
        s.add(1000, 1200, 1260, 1600);
        assert_eq!(s.calls, 2);
        assert_eq!(s.disordered, 0);
        let m = s.means(200.0, 20.0);
        assert_eq!(
            m,
            [600.0, 250.0, 100.0, 150.0, 55.0, 295.0, 100.0, 195.0, 20.0]
        );
        assert_eq!(m[0], m[1] + m[4] + m[5], "the parts make the round trip");
    }

    #[test]
    fn clocks_out_of_order_are_counted_not_hidden() {
        let mut s = Split::default();
        s.add(500, 400, 450, 700);
        s.add(100, 200, 300, 250);
        s.add(100, 200, 300, 400);
        assert_eq!((s.calls, s.disordered), (3, 2));
        assert_eq!(s.to_entry, -100.0 + 100.0 + 100.0);
    }

    #[test]
    fn the_section_has_every_row_and_says_why_one_is_absent() {
        let r = RunResult {
            means: [1.0; 9],
            split: Split {
                calls: 5,
                ..Split::default()
            },
        };
        let s = section(&[r, r], &[]);
        assert_eq!(s.rows.len(), ROWS.len());
        assert!(s.rows.iter().all(|r| r.samples.len() == 2 && r.items == 5));
        assert!(s.notes.contains("0 of 10 calls"), "{}", s.notes);
        let empty = section(&[], &["boom".into()]);
        assert_eq!(empty.rows[0].absent_reason(), Some("boom"));
        assert!(empty.notes.contains("failed run: boom"));
    }

    #[test]
    fn a_clock_read_costs_something_finite() {
        let c = clock_read();
        assert!(c.is_finite() && c >= 0.0);
    }
}
