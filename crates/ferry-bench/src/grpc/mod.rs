//! The `grpc` experiment: what reaching a ferry interface over gRPC costs,
//! against a plain tonic client and server, and against the local call.
//!
//! | system | path |
//! |--------|------|
//! | `ferry local` | `BenchClient::connect_in` → `BenchServer::serve_in`: a ferry call over a shared-memory channel in one process ([`served`]) |
//! | `ferry over gRPC` | the same client type bound by `grpc://127.0.0.1:PORT/grpc-bench`: ferry-grpc's client, tonic on loopback, ferry-grpc's server, which makes each request a local call to the same server ([`served`]) |
//! | `plain tonic` | a hand-written tonic service and client with the same protobuf messages, no ferry ([`plain`]) |
//!
//! Cases `null` (no arguments, unit result) and `1KB` (a `Vec<u8>` of
//! 1024 bytes in and the same back). Everything runs in this process: a
//! ferry runtime of one processor per allowed CPU (the default) whose
//! first thread makes the ferry calls and, for the tonic rows, hands its
//! kernel thread to the tonic client's loop ([`ferry::blocking`]: the
//! processors go idle meanwhile). Each gRPC side has a tokio runtime of
//! two worker threads. (With a single processor, a call to a server in
//! the same process waits until the caller's spin for its reply gives
//! up, about 100 us: the caller's processor spins on the reply queue
//! while the call sits on the server's queue it would poll next.)
//!
//! A run of a pair: untimed calls for the budget's warm-up, then calls
//! one at a time, timed in growing batches, for at least its timed part;
//! each call carries its number and its result must echo it. Every
//! number is the median over the runs of a run's mean ns per round trip,
//! with min and max; runs are interleaved, systems rotated from round to
//! round. Goals are ratios of medians of this run ([`goals`]); nothing
//! fails the program.
//!
//! This module owns the cases, the plan, the schedule and the rows.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::common::{Common, Defaults, MEDIAN_OF_FIVE};
use crate::measure::interleaved;
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};
use crate::urpc::calls::{Budget, Sample, time_calls};
use crate::watchdog::hang;

mod goals;
mod plain;
mod served;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "grpc";

/// Runs per pair: 7, with `--quick` 5; at least 5.
pub const DEFAULTS: Defaults = MEDIAN_OF_FIVE;

/// The cases: name and bytes each way.
pub const CASES: [(&str, usize); 2] = [("null", 0), ("1KB", 1024)];

/// The local ferry call's row name.
pub const LOCAL: &str = "ferry local";
/// The ferry-over-gRPC row name.
pub const OVER_GRPC: &str = "ferry over gRPC";
/// The plain tonic row name.
pub const TONIC: &str = "plain tonic";

/// The systems, in table order.
const SYSTEMS: [&str; 3] = [LOCAL, OVER_GRPC, TONIC];

/// Command-line arguments of `ferry-bench grpc`. `--quick` means shorter
/// runs (10 ms warm-up and 50 ms timed, against 50 ms and 300 ms) and 5
/// of them.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
}

/// The sizes of one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Timed runs per pair.
    pub runs: u32,
    /// How long each run lasts.
    pub budget: Budget,
}

impl Plan {
    /// The plan `common` asks for.
    pub fn new(common: &Common) -> Result<Plan, Error> {
        let runs = common.runs(DEFAULTS)?;
        let ms = Duration::from_millis;
        let (warmup, timed) = if common.quick {
            (ms(10), ms(50))
        } else {
            (ms(50), ms(300))
        };
        Ok(Plan {
            runs,
            budget: Budget {
                warmup,
                timed,
                min_calls: 20,
                max_calls: 10_000_000,
            },
        })
    }
}

/// Samples of one pair over the runs, and the first failure.
#[derive(Debug, Clone, Default)]
struct Pair {
    samples: Vec<f64>,
    calls: u64,
    failures: u32,
    first_error: Option<String>,
}

impl Pair {
    /// Keeps a timed run's sample (a warm-up's is dropped) or its error.
    fn take(&mut self, outcome: Result<Sample, Error>, warmup: bool) {
        match outcome {
            Ok(_) if warmup => {}
            Ok(s) => {
                self.samples.push(s.ns_per_call);
                self.calls = s.calls;
            }
            Err(e) => {
                self.failures += 1;
                self.first_error.get_or_insert(e.0);
            }
        }
    }

    /// The row of `case` and `system`; a line in `failed` if runs failed.
    fn row(self, case: &str, system: &str, failed: &mut String) -> Row {
        let reason = self.first_error.unwrap_or_else(|| "no samples".to_owned());
        if self.failures > 0 {
            let _ = writeln!(
                failed,
                "failed: {case} / {system}: {} run(s): {reason}",
                self.failures
            );
        }
        if self.samples.is_empty() {
            return Row::absent(EXPERIMENT, case, system, Unit::Ns, reason);
        }
        Row::new(EXPERIMENT, case, system, Unit::Ns, self.samples, self.calls)
    }
}

/// Every pair's runs, `pairs[case][system]`, measured in one ferry
/// runtime of one processor per allowed CPU.
fn measure(plan: Plan) -> Result<Vec<Vec<Pair>>, Error> {
    let mut tonic = plain::Peer::start()?;
    let started = Instant::now();
    ferry::Runtime::builder()
        .run(move || -> Result<Vec<Vec<Pair>>, Error> {
            let paths = served::Paths::start()?;
            eprintln!(
                "ferry-bench grpc: ferry over gRPC at {}, plain tonic at {}",
                paths.url,
                tonic.addr()
            );
            let mut pairs = vec![vec![Pair::default(); SYSTEMS.len()]; CASES.len()];
            interleaved(plan.runs, CASES.len(), SYSTEMS.len(), |t| {
                if t.case == 0 && t.system == t.round as usize % SYSTEMS.len() {
                    eprintln!(
                        "ferry-bench grpc: round {}/{} ({:.1} s so far)",
                        t.round,
                        plan.runs,
                        started.elapsed().as_secs_f64()
                    );
                }
                let (case, size) = CASES[t.case];
                let system = SYSTEMS[t.system];
                hang::watch(&format!("grpc {case} / {system}"), Duration::from_secs(60));
                let budget = &plan.budget;
                let outcome = match system {
                    LOCAL => time_calls(budget, size, |a, r| served::call(&paths.local, a, r)),
                    OVER_GRPC => time_calls(budget, size, |a, r| served::call(&paths.remote, a, r)),
                    _ => ferry::blocking(|| tonic.time_calls(budget, size)),
                };
                pairs[t.case][t.system].take(outcome, t.warmup());
                Ok(())
            })?;
            hang::unwatch();
            Ok(pairs)
        })
        .map_err(|e| Error(format!("the ferry runtime: {e}")))?
}

/// The table: every case with every system.
fn section(pairs: Vec<Vec<Pair>>, runs: u32, quick: bool) -> Section {
    let (mut rows, mut notes) = (Vec::new(), String::new());
    for ((case, _), by_system) in CASES.iter().zip(pairs) {
        for (system, pair) in SYSTEMS.iter().zip(by_system) {
            rows.push(pair.row(case, system, &mut notes));
        }
    }
    notes.push_str(&goals::goals(&rows));
    Section {
        title: format!(
            "Round trip, one call in flight: mean ns per call, medians of {runs} runs{}",
            if quick { " (--quick)" } else { "" }
        ),
        headers: ("case", "system"),
        rows,
        ratios: vec![
            Ratio::to_system("vs tonic", TONIC),
            Ratio::to_system("vs local", LOCAL),
        ],
        notes,
    }
}

/// Runs the experiment.
///
/// # Errors
/// A bad `--runs`, or a path that cannot be set up; never a failed run
/// (its row says so).
pub fn run(common: &Common, _args: &Args) -> Result<Report, Error> {
    let plan = Plan::new(common)?;
    let pairs = measure(plan)?;
    Ok(Report::single(
        EXPERIMENT,
        section(pairs, plan.runs, common.quick),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_runs_are_shorter_and_fewer() {
        let quick = Plan::new(&Common {
            quick: true,
            ..Common::default()
        })
        .unwrap();
        let full = Plan::new(&Common::default()).unwrap();
        assert_eq!((quick.runs, full.runs), (5, 7));
        assert!(quick.budget.timed < full.budget.timed);
        assert!(
            Plan::new(&Common {
                runs: Some(2),
                ..Common::default()
            })
            .is_err()
        );
    }

    #[test]
    fn rows_keep_their_runs_drop_the_warm_up_and_say_why_one_is_absent() {
        let sample = |ns| {
            Ok(Sample {
                ns_per_call: ns,
                calls: 9,
            })
        };
        let mut p = Pair::default();
        p.take(sample(100.0), true);
        p.take(sample(3.0), false);
        p.take(sample(1.0), false);
        p.take(Err(Error("gone".into())), false);
        p.take(sample(2.0), false);
        let mut failed = String::new();
        let r = p.row("null", LOCAL, &mut failed);
        assert_eq!((r.median(), r.items, r.samples.len()), (Some(2.0), 9, 3));
        assert_eq!(failed, "failed: null / ferry local: 1 run(s): gone\n");
        let r = Pair::default().row("1KB", TONIC, &mut failed);
        assert_eq!(r.absent_reason(), Some("no samples"));
        let s = section(
            vec![vec![Pair::default(); SYSTEMS.len()]; CASES.len()],
            7,
            false,
        );
        assert_eq!(s.rows.len(), 6);
        assert_eq!(
            (s.rows[4].case.as_str(), s.rows[4].system.as_str()),
            ("1KB", OVER_GRPC)
        );
        assert!(s.notes.contains("goals"), "{}", s.notes);
    }

    /// Every path answers, through the same timed loop the experiment
    /// runs, and the plain tonic client's messages are the interface's:
    /// it gets the same answers from ferry-grpc's server.
    #[test]
    fn every_path_answers_and_plain_tonic_speaks_the_interfaces_messages() {
        let budget = Budget {
            warmup: Duration::from_millis(1),
            timed: Duration::from_millis(5),
            min_calls: 20,
            max_calls: 1000,
        };
        let mut tonic = plain::Peer::start().unwrap();
        ferry::Runtime::builder()
            .run(move || {
                let paths = served::Paths::start().unwrap();
                for (_, size) in CASES {
                    for client in [&paths.local, &paths.remote] {
                        let s = time_calls(&budget, size, |a, r| served::call(client, a, r));
                        assert!(s.unwrap().calls >= budget.min_calls);
                    }
                    let s = ferry::blocking(|| tonic.time_calls(&budget, size)).unwrap();
                    assert!(s.calls >= budget.min_calls);
                }
                let addr = paths.url["grpc://".len()..]
                    .split('/')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                ferry::blocking(|| {
                    rt.block_on(async {
                        let mut c = plain::Client::connect(addr).await.unwrap();
                        c.null().await.unwrap();
                        let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
                        assert_eq!(c.echo(data.clone()).await.unwrap(), data);
                    })
                });
            })
            .unwrap();
    }
}
