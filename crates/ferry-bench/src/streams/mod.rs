//! The `streams` experiment: 002 Table 1's pipe rows (2-4) and open/close
//! row (6) with a `ferry::stream` against the kernel, and two threads on
//! two processors moving bytes through a stream against a pipe.
//!
//! | case | what one operation is | systems |
//! |------|-----------------------|---------|
//! | `rw 1B`, `rw 1KB`, `rw 4KB` | one thread writes that many bytes, then reads them back | `ferry` (a stream in a one-processor runtime, [`ferry`]), `pipe`, `unix socket` ([`kernel`]) |
//! | `open/close` | make a stream and drop both ends; open `/dev/null` and close it | `ferry`, `open /dev/null` |
//! | `2 threads 4KB` | a producer writes in 4 KB writes, a consumer on another core reads: MB/s | `ferry` (two ferry threads, two processors), `ferry (try + yield)` (the same with ends that never park), `pipe` (two kernel threads) |
//! | `ping-pong 1B, 1 cpu`, `ping-pong 1B, 2 cpus` | one thread writes one byte, another reads it and writes it back, the first reads it: mean ns per round trip, the two threads on one CPU or on two | `ferry` (two ferry threads, two streams; one processor, or two), `pipe` (two kernel threads, two pipes) |
//! | `2 processes 4KB`, `ping-pong 1B` | between two processes ([`remote`]) | `ferry` (a cross-process stream), `pipe` |
//! | the adaptive-quantum experiment ([`adaptive`]) | a 44.1 kHz device feeding a pipeline beside CPU-bound threads: dropped samples, latency p50/p99 | `fine-grain`, `work-stealing (10 ms slice)`, each in a child process |
//!
//! The loops are one generic code over `std::io::{Read, Write}`
//! ([`harness`]). A one-thread run repeats its operation for a time
//! budget after a warm-up and gives the mean ns per operation; a flow run
//! moves a fixed number of bytes. Every number is the median over the runs,
//! with min and max; runs are interleaved and rotated ([`interleaved`]).
//! Goals are ratios of medians of this run ([`goals`]); nothing fails the
//! program.
//!
//! This module owns the cases, the plan and the rows.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::affinity;
use crate::common::{Common, Defaults, MEDIAN_OF_FIVE};
use crate::measure::interleaved;
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};
use crate::urpc::on_thread;
use crate::watchdog::hang;

pub mod adaptive;
mod ferry;
mod goals;
mod harness;
mod kernel;
mod remote;

use harness::{Budget, Flow};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "streams";

/// Runs per pair: 7, with `--quick` 5; at least 5.
pub const DEFAULTS: Defaults = MEDIAN_OF_FIVE;

/// The write-then-read-back cases: name and bytes.
pub const RW: [(&str, usize); 3] = [("rw 1B", 1), ("rw 1KB", 1024), ("rw 4KB", 4096)];
/// The open/close case.
pub const OPEN_CLOSE: &str = "open/close";
/// The two-thread case.
pub const FLOW: &str = "2 threads 4KB";
/// The ping-pong between two threads on one CPU.
pub const PING_ONE: &str = "ping-pong 1B, 1 cpu";
/// The ping-pong between two threads on two CPUs.
pub const PING_TWO: &str = "ping-pong 1B, 2 cpus";
/// The flow's write and read size.
const FLOW_CHUNK: usize = 4096;

/// ferry's rows, the baseline of the ratio columns.
pub const FERRY: &str = "ferry";
/// A Linux pipe.
pub const PIPE: &str = "pipe";
/// A Unix stream socket pair.
pub const SOCKET: &str = "unix socket";
/// `open("/dev/null")` + `close`.
pub const DEV_NULL: &str = "open /dev/null";
/// The flow through a stream whose ends never park ([`ferry::Spinning`]).
pub const FERRY_SPINNING: &str = "ferry (try + yield)";

/// What one row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Write then read back this many bytes, on one thread.
    Rw(usize),
    /// Open and close.
    OpenClose,
    /// Two threads, MB/s.
    Flow,
    /// Two threads, one byte there and back; on two CPUs if true.
    PingPong(bool),
}

/// Every (case, system) pair, in table order.
const PAIRS: [(Case, &str, &str); 18] = [
    (Case::Rw(RW[0].1), RW[0].0, FERRY),
    (Case::Rw(RW[0].1), RW[0].0, PIPE),
    (Case::Rw(RW[0].1), RW[0].0, SOCKET),
    (Case::Rw(RW[1].1), RW[1].0, FERRY),
    (Case::Rw(RW[1].1), RW[1].0, PIPE),
    (Case::Rw(RW[1].1), RW[1].0, SOCKET),
    (Case::Rw(RW[2].1), RW[2].0, FERRY),
    (Case::Rw(RW[2].1), RW[2].0, PIPE),
    (Case::Rw(RW[2].1), RW[2].0, SOCKET),
    (Case::OpenClose, OPEN_CLOSE, FERRY),
    (Case::OpenClose, OPEN_CLOSE, DEV_NULL),
    (Case::Flow, FLOW, FERRY),
    (Case::Flow, FLOW, FERRY_SPINNING),
    (Case::Flow, FLOW, PIPE),
    (Case::PingPong(false), PING_ONE, FERRY),
    (Case::PingPong(false), PING_ONE, PIPE),
    (Case::PingPong(true), PING_TWO, FERRY),
    (Case::PingPong(true), PING_TWO, PIPE),
];

/// The row's unit.
fn unit(case: Case) -> Unit {
    match case {
        Case::Flow => Unit::Rate("MB/s"),
        _ => Unit::Ns,
    }
}

/// Command-line arguments of `ferry-bench streams`. `--quick` means
/// shorter runs (2 ms warm-up and 10 ms timed per one-thread run, 16 MiB
/// per flow) and 5 of them.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
}

/// The sizes of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Timed runs per pair.
    pub runs: u32,
    /// How long each one-thread run lasts.
    pub budget: Budget,
    /// Bytes each flow run moves.
    pub flow_bytes: u64,
}

impl Plan {
    /// The plan `common` asks for.
    pub fn new(common: &Common) -> Result<Plan, Error> {
        let runs = common.runs(DEFAULTS)?;
        let ms = Duration::from_millis;
        let (warmup, timed, flow_bytes) = if common.quick {
            (ms(2), ms(10), 64 << 20)
        } else {
            (ms(5), ms(40), 256 << 20)
        };
        Ok(Plan {
            runs,
            budget: Budget { warmup, timed },
            flow_bytes,
        })
    }
}

/// What one run gives: its number, the operations (or bytes) behind it,
/// and for a flow whether the two sides were seen most on two CPUs.
struct Sample {
    value: f64,
    items: u64,
    apart: Option<bool>,
}

impl Sample {
    fn timed(t: harness::Timed) -> Sample {
        Sample {
            value: t.ns_per_op,
            items: t.ops,
            apart: None,
        }
    }

    fn flow((flow, producer_cpu): (Flow, Option<usize>)) -> Sample {
        Sample {
            value: flow.mb_per_s(),
            items: flow.bytes,
            apart: producer_cpu.zip(flow.cpu).map(|(p, c)| p != c),
        }
    }
}

/// One run of `case` on `system`.
fn one_run(
    case: Case,
    system: &str,
    plan: &Plan,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Sample, Error> {
    let budget = plan.budget;
    let kernel_side = |f: &(dyn Fn() -> Result<harness::Timed, Error> + Sync)| {
        on_thread(|| {
            affinity::pin_or_warn(cpus.0, "streams");
            f()
        })
    };
    Ok(match (case, system) {
        (Case::Rw(n), FERRY) => Sample::timed(ferry::rw(n, budget, cpus.0)?),
        (Case::Rw(n), PIPE) => Sample::timed(kernel_side(&|| kernel::rw_pipe(n, budget))?),
        (Case::Rw(n), SOCKET) => Sample::timed(kernel_side(&|| kernel::rw_socket(n, budget))?),
        (Case::OpenClose, FERRY) => Sample::timed(ferry::open_close(budget, cpus.0)?),
        (Case::OpenClose, DEV_NULL) => Sample::timed(kernel_side(&|| kernel::open_close(budget))?),
        (Case::Flow, FERRY) => Sample::flow(ferry::flow(plan.flow_bytes, FLOW_CHUNK, false)?),
        (Case::Flow, FERRY_SPINNING) => {
            Sample::flow(ferry::flow(plan.flow_bytes, FLOW_CHUNK, true)?)
        }
        (Case::Flow, PIPE) => Sample::flow(kernel::flow_pipe(plan.flow_bytes, FLOW_CHUNK, cpus)?),
        (Case::PingPong(two), FERRY) => Sample::timed(ferry::ping_pong(two, budget, cpus.0)?),
        (Case::PingPong(two), PIPE) => {
            let on = if two { cpus } else { (cpus.0, cpus.0) };
            Sample::timed(kernel::ping_pong_pipes(budget, on)?)
        }
        (case, system) => return Err(Error(format!("no system {system} for {case:?}"))),
    })
}

/// Samples of one pair over the runs, and the first failure.
#[derive(Debug, Clone, Default)]
struct Pair {
    samples: Vec<f64>,
    items: u64,
    apart: Vec<f64>,
    failures: u32,
    first_error: Option<String>,
}

impl Pair {
    fn fail(&mut self, e: Error) {
        self.failures += 1;
        self.first_error.get_or_insert(e.0);
    }

    /// The row of `case` and `system`; a flow's with the share of its runs
    /// whose two sides were seen most on two different CPUs.
    fn row(self, case: Case, name: &str, system: &str, failed: &mut String) -> Row {
        let reason = self.first_error.unwrap_or_else(|| "no samples".to_owned());
        if self.failures > 0 {
            let _ = writeln!(
                failed,
                "failed: {name} / {system}: {} run(s): {reason}",
                self.failures
            );
        }
        if self.samples.is_empty() {
            return Row::absent(EXPERIMENT, name, system, unit(case), reason);
        }
        let runs = self.apart.len();
        let row = Row::new(
            EXPERIMENT,
            name,
            system,
            unit(case),
            self.samples,
            self.items,
        );
        if runs == 0 {
            return row;
        }
        row.with(
            "runs on 2 cpus %",
            100.0 * self.apart.iter().sum::<f64>() / runs as f64,
        )
    }
}

/// At each turn: a line on stderr as a round begins, and the hang watch
/// for the pair (`what`) about to run.
fn begin_turn(t: &crate::measure::Turn, part: &str, runs: u32, started: Instant, what: &str) {
    if t.system == 0 {
        eprintln!(
            "ferry-bench streams: {part}round {}/{runs} ({:.1} s so far)",
            t.round,
            started.elapsed().as_secs_f64()
        );
    }
    hang::watch(&format!("streams {what}"), Duration::from_secs(60));
}

/// Runs the experiment.
///
/// # Errors
/// A bad `--runs`; never a failed run (its row says so).
pub fn run(common: &Common, _args: &Args) -> Result<Report, Error> {
    remote::peer_if_asked();
    let plan = Plan::new(common)?;
    let cpus = affinity::two_cores();
    let started = Instant::now();
    let mut pairs: Vec<Pair> = vec![Pair::default(); PAIRS.len()];
    interleaved(plan.runs, 1, PAIRS.len(), |t| {
        let (case, name, system) = PAIRS[t.system];
        begin_turn(&t, "", plan.runs, started, &format!("{name} / {system}"));
        let pair = &mut pairs[t.system];
        match one_run(case, system, &plan, cpus) {
            Ok(s) if !t.warmup() => {
                pair.samples.push(s.value);
                pair.items = s.items;
                if let Some(apart) = s.apart {
                    pair.apart.push(if apart { 1.0 } else { 0.0 });
                }
            }
            Ok(_) => {}
            Err(e) => pair.fail(e),
        }
        Ok(())
    })?;
    hang::unwatch();
    let mut sections = sections(pairs, &plan);
    sections.push(remote::section(&plan, cpus)?);
    let adaptive_ms = if common.quick { 1000 } else { 2000 };
    sections.push(adaptive::section(EXPERIMENT, plan.runs, adaptive_ms));
    Ok(Report {
        doc: EXPERIMENT,
        title: format!(
            "streams: medians of {} runs{}, first thread on cpu {}, the flow's second on cpu {}",
            plan.runs,
            if common.quick { " (--quick)" } else { "" },
            affinity::name(cpus.0),
            affinity::name(cpus.1)
        ),
        sections,
    })
}

/// The three tables (one thread; two threads' flow; two threads'
/// ping-pong), the goals and 002 Table 1 after the flow's.
fn sections(pairs: Vec<Pair>, plan: &Plan) -> Vec<Section> {
    let (mut one, mut two, mut ping) = (Vec::new(), Vec::new(), Vec::new());
    let mut failed = String::new();
    for ((case, name, system), pair) in PAIRS.into_iter().zip(pairs) {
        let row = pair.row(case, name, system, &mut failed);
        match case {
            Case::Flow => two.push(row),
            Case::PingPong(_) => ping.push(row),
            _ => one.push(row),
        }
    }
    let all: Vec<Row> = one.iter().chain(&two).cloned().collect();
    let mut notes = failed;
    notes.push_str(&goals::goals(&all));
    notes.push('\n');
    notes.push_str(&goals::beside_table1(&all));
    vec![
        Section {
            title: format!(
                "One thread (002 Table 1 rows 2-4, 6): mean ns per write+read of N bytes, per \
                 open+close; {:?} timed per run",
                plan.budget.timed
            ),
            headers: ("case", "system"),
            rows: one,
            ratios: vec![Ratio::to_system("vs ferry", FERRY)],
            notes: String::new(),
        },
        Section {
            title: format!(
                "Two threads on two cores: MB/s (10^6 bytes) from producer to consumer, {} MiB \
                 per run in {FLOW_CHUNK}-byte writes and reads",
                plan.flow_bytes >> 20
            ),
            headers: ("case", "system"),
            rows: two,
            ratios: vec![Ratio::to_system("vs ferry", FERRY)],
            notes,
        },
        Section {
            title: format!(
                "Two threads, one byte there and back through two streams (two pipes): mean ns \
                 per round trip, the threads on one CPU or on two; {:?} timed per run",
                plan.budget.timed
            ),
            headers: ("case", "system"),
            rows: ping,
            ratios: vec![Ratio::to_system("vs ferry", FERRY)],
            notes: String::new(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_runs_and_say_why_one_is_absent() {
        let mut good = Pair {
            samples: vec![3.0, 1.0, 2.0],
            items: 9,
            apart: vec![1.0, 0.0, 1.0, 1.0],
            ..Pair::default()
        };
        good.fail(Error("slow".into()));
        let mut failed = String::new();
        let r = good.row(Case::Flow, FLOW, FERRY, &mut failed);
        assert_eq!(
            (r.median(), r.items, r.unit),
            (Some(2.0), 9, unit(Case::Flow))
        );
        assert_eq!(r.extra, vec![("runs on 2 cpus %", 75.0)]);
        assert_eq!(failed, "failed: 2 threads 4KB / ferry: 1 run(s): slow\n");
        let r = Pair::default().row(Case::Rw(1), RW[0].0, PIPE, &mut failed);
        assert_eq!(r.absent_reason(), Some("no samples"));
        assert!(r.extra.is_empty());
    }

    #[test]
    fn sections_split_one_and_two_threads_and_carry_the_goals() {
        let plan = Plan::new(&Common::default()).unwrap();
        let s = sections(vec![Pair::default(); PAIRS.len()], &plan);
        assert_eq!(
            (s[0].rows.len(), s[1].rows.len(), s[2].rows.len()),
            (11, 3, 4)
        );
        assert!(s[0].rows.iter().all(|r| r.unit == Unit::Ns));
        assert!(s[2].rows.iter().all(|r| r.unit == Unit::Ns));
        assert!(s[1].notes.contains("goals"), "{}", s[1].notes);
        assert!(s[1].notes.contains("002 Table 1"), "{}", s[1].notes);
    }

    #[test]
    fn every_pair_has_a_system_and_quick_runs_are_shorter() {
        let quick = Plan::new(&Common {
            quick: true,
            ..Common::default()
        })
        .unwrap();
        let full = Plan::new(&Common::default()).unwrap();
        assert_eq!((quick.runs, full.runs), (5, 7));
        assert!(quick.budget.timed < full.budget.timed && quick.flow_bytes < full.flow_bytes);
        let e = one_run(Case::OpenClose, PIPE, &quick, (None, None)).err();
        assert_eq!(e, Some(Error("no system pipe for OpenClose".into())));
    }
}
