//! The `urpc` experiment: a call from one process to another, as the URPC
//! paper (Bershad et al., 1991, seed `001`) measured it, beside the ways
//! two Linux processes can talk today.
//!
//! This module owns the cases, the run schedule and sizes ([`Plan`]), the
//! rows and the goals; the systems are in [`systems`] (and [`shm`],
//! [`stream`], [`iceoryx`]), the server process in [`child`] and
//! [`server`], the timed loop in [`calls`], the place of ferry's rows in
//! [`ferry`].
//!
//! # What a run is
//!
//! One run of one (case, system) pair: a client thread pinned to the first
//! allowed CPU starts a server process (this binary again, `urpc-serve`,
//! pinned to the second CPU), waits for it to be ready, makes calls
//! untimed for [`Plan::budget`]'s warm-up, then times calls for at least
//! its timed part (and at least 20 of them), and stops the server. A call sends
//! `size` bytes of arguments and gets `size` bytes of result back: the
//! server copies the arguments out into its own memory and answers with
//! them; the client copies the result into its own memory and checks it
//! echoes the call's number.
//!
//! | case | bytes each way |
//! |------|----------------|
//! | `null call` | 0 |
//! | `call 32B`, `call 1KB`, `call 32KB`, `call 1MB` | 32, 1024, 32768, 1048576 |
//!
//! | system | transport | waiting |
//! |--------|-----------|---------|
//! | `spin floor` | one word in a shared memfd mapping; the payload through the mapping | both spin |
//! | `unix socket` | a `SOCK_STREAM` socketpair, `writev`/`readv` of an 8-byte header and the payload | both block in the kernel |
//! | `pipe` | a pipe each way, framed alike | both block in the kernel |
//! | `futex shm` | a call word and a reply word in a shared mapping, payload through it | both sleep in `FUTEX_WAIT` (process-shared) |
//! | `iceoryx2` | iceoryx2 request-response, `[u8]` slices, call number in a user header | both poll |
//! | `ferry` | `ferry::rpc::Client::call` to a `Server` in the other process ([`ferry`]), each side a one-processor `ferry::run` | the client's thread parks; the processors spin a while, then sleep on the doorbell |
//!
//! Every number is the median over the runs of the mean ns per round
//! trip of a run, with min and max; runs are interleaved (run *k* of every
//! pair before run *k+1* of any, systems rotated from round to round).
//!
//! Then, each in runs of its own (a warm-up run, then [`Plan::runs`]):
//! 001 Table II's breakdown of a null call ([`breakdown`]), Figures 3 and
//! 4's latency and throughput against client threads with the pipelined
//! rows ([`figures`]), and the call to a sleeping server beside a futex
//! round trip ([`sleeping`]).
//!
//! Goals (computed when the `ferry` rows exist): null call at most 2x the
//! spin floor, at least 100x faster than the Unix socket, faster than
//! iceoryx2; pipelined T=2 throughput at least 1.7x T=1; sleeping server
//! within 1.5x the futex round trip.
//! Missed goals are printed as such; nothing fails the program.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::affinity;
use crate::common::{Common, Defaults, MEDIAN_OF_FIVE};
use crate::measure::interleaved;
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};
use crate::watchdog::hang;

mod breakdown;
pub(crate) mod calls;
pub(crate) mod child;
pub mod ferry;
mod figures;
mod iceoryx;
pub(crate) mod server;
mod shm;
mod sleeping;
mod stream;
pub(crate) mod sys;
mod systems;

pub use server::{ServeArgs, serve_main};

use calls::{Budget, Sample};
use systems::{Connection, System};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "urpc";

/// Runs per pair: 7, with `--quick` 5; at least 5.
pub const DEFAULTS: Defaults = MEDIAN_OF_FIVE;

/// The cases: name and bytes of arguments (and of results).
pub const CASES: [(&str, usize); 5] = [
    ("null call", 0),
    ("call 32B", 32),
    ("call 1KB", 1024),
    ("call 32KB", 32 * 1024),
    ("call 1MB", 1024 * 1024),
];

/// The baseline of the ratio column and of the first goal.
const SPIN_FLOOR: &str = "spin floor";

/// Command-line arguments of `ferry-bench urpc`. `--quick` means shorter
/// runs (2 ms warm-up, 5 ms timed; 1 ms and 4 ms per T of the sweep; 25
/// sleeping-server calls) and 5 of them.
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
    /// How long each run lasts.
    pub budget: Budget,
    /// Untimed, then timed part of each T of the Figures 3-4 sweep.
    pub sweep: (Duration, Duration),
    /// Timed calls of each sleeping-server run.
    pub sleeping_calls: u64,
}

impl Plan {
    /// The plan `common` asks for.
    pub fn new(common: &Common) -> Result<Plan, Error> {
        let runs = common.runs(DEFAULTS)?;
        let (warmup, timed) = if common.quick { (2, 5) } else { (5, 20) };
        let ms = Duration::from_millis;
        let (sweep, sleeping_calls) = if common.quick {
            ((ms(1), ms(4)), 25)
        } else {
            ((ms(3), ms(15)), 100)
        };
        Ok(Plan {
            runs,
            budget: Budget {
                warmup: Duration::from_millis(warmup),
                timed: Duration::from_millis(timed),
                min_calls: 20,
                max_calls: 10_000_000,
            },
            sweep,
            sleeping_calls,
        })
    }
}

/// Who is measured: ferry or one of the peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Ferry,
    Peer(System),
}

impl Contender {
    /// Every contender, in table order: ferry, then the peers.
    fn all() -> Vec<Contender> {
        let mut all = vec![Contender::Ferry];
        all.extend(System::ALL.map(Contender::Peer));
        all
    }

    fn name(self) -> &'static str {
        match self {
            Contender::Ferry => ferry::SYSTEM,
            Contender::Peer(s) => s.name(),
        }
    }
}

/// One run: a pinned client thread, a server process, the timed calls.
fn one_run(
    who: Contender,
    size: usize,
    budget: &Budget,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Sample, Error> {
    on_thread(|| match who {
        Contender::Ferry => ferry::run_once(size, budget, cpus),
        Contender::Peer(system) => {
            affinity::pin_or_warn(cpus.0, "urpc client");
            let mut conn = Connection::open(system, size, cpus.1)?;
            let sample = calls::time_calls(budget, size, |args, result| {
                conn.call(args, result.as_mut_slice())
            })?;
            conn.close()?;
            Ok(sample)
        }
    })
}

/// Runs `f` on a client thread of its own: a server process dies with
/// the thread that started it (PR_SET_PDEATHSIG), so it is started from
/// there, and ended before the thread ends; the pinning goes with it.
pub(crate) fn on_thread<T: Send>(f: impl FnOnce() -> Result<T, Error> + Send) -> Result<T, Error> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(Error("the client thread panicked".into())))
    })
}

/// Samples of one pair over the runs.
#[derive(Debug, Clone, Default)]
struct Pair {
    samples: Vec<f64>,
    calls: u64,
    failures: u32,
    first_error: Option<String>,
}

/// Runs the experiment: every case with every peer, the `ferry` rows'
/// place, the goals.
///
/// # Errors
/// A bad `--runs`; never a failed run (its row says so).
pub fn run(common: &Common, _args: &Args) -> Result<Report, Error> {
    let plan = Plan::new(common)?;
    let cpus = affinity::two_cores();
    let started = Instant::now();
    let who = Contender::all();
    let mut pairs = vec![vec![Pair::default(); who.len()]; CASES.len()];
    interleaved(plan.runs, CASES.len(), who.len(), |t| {
        if t.case == 0 && t.system == t.round as usize % who.len() {
            eprintln!(
                "ferry-bench urpc: round {}/{} ({:.1} s so far)",
                t.round,
                plan.runs,
                started.elapsed().as_secs_f64()
            );
        }
        let (case, size) = CASES[t.case];
        let name = who[t.system].name();
        hang::watch(&format!("urpc {case} / {name}"), Duration::from_secs(60));
        let pair = &mut pairs[t.case][t.system];
        match one_run(who[t.system], size, &plan.budget, cpus) {
            Ok(s) if !t.warmup() => {
                pair.samples.push(s.ns_per_call);
                pair.calls = s.calls;
            }
            Ok(_) => {}
            Err(e) => {
                pair.failures += 1;
                pair.first_error.get_or_insert(e.0);
            }
        }
        Ok(())
    })?;
    let (rows, failed) = rows(pairs);
    let mut sections = vec![Section {
        title: "Cross-process round trip (001 Table I's cross-address-space call), ns per \
                call, arguments and result of the case's size"
            .to_owned(),
        headers: ("case", "system"),
        rows,
        ratios: vec![Ratio::to_system("vs spin floor", SPIN_FLOOR)],
        notes: failed,
    }];
    sections.push(table2(&plan, cpus)?);
    let plots = if common.write_docs {
        crate::docs::results_dir()
    } else {
        std::env::temp_dir()
    };
    sections.extend(figures::sections(&sweep(&plan, cpus)?, &plots));
    sections.push(sleeping_server(&plan, cpus)?);
    hang::unwatch();
    let all: Vec<Row> = sections.iter().flat_map(|s| s.rows.clone()).collect();
    if let Some(last) = sections.last_mut() {
        last.notes.push_str(&goals(&all));
    }
    Ok(Report {
        doc: EXPERIMENT,
        title: format!(
            "urpc: medians of {} runs{}, client on cpu {}, server process on cpu {}",
            plan.runs,
            if common.quick { " (--quick)" } else { "" },
            affinity::name(cpus.0),
            affinity::name(cpus.1)
        ),
        sections,
    })
}

/// 001 Table II: a warm-up run, then `plan.runs` of [`breakdown`].
fn table2(plan: &Plan, cpus: (Option<usize>, Option<usize>)) -> Result<Section, Error> {
    let (mut runs, mut failures) = (Vec::new(), Vec::new());
    interleaved(plan.runs, 1, 1, |t| {
        hang::watch("urpc Table II", Duration::from_secs(60));
        match on_thread(|| breakdown::run_once(&plan.budget, cpus)) {
            Ok(r) if !t.warmup() => runs.push(r),
            Ok(_) => {}
            Err(e) => failures.push(e.0),
        }
        Ok(())
    })?;
    Ok(breakdown::section(&runs, &failures))
}

/// 001 Figures 3-4: a warm-up run, then `plan.runs` sweeps of T.
fn sweep(plan: &Plan, cpus: (Option<usize>, Option<usize>)) -> Result<figures::Sweep, Error> {
    let mut sweep = figures::Sweep::new();
    let (warmup, timed) = plan.sweep;
    interleaved(plan.runs, 1, 1, |t| {
        hang::watch("urpc Figures 3-4", Duration::from_secs(60));
        let order = figures::order(t.round);
        match on_thread(|| figures::run_once(order, warmup, timed, cpus)) {
            Ok(points) if !t.warmup() => sweep.add(&points),
            Ok(_) => {}
            Err(e) => sweep.failures.push(e.0),
        }
        Ok(())
    })?;
    Ok(sweep)
}

/// The sleeping server beside futex shm, interleaved run by run.
fn sleeping_server(plan: &Plan, cpus: (Option<usize>, Option<usize>)) -> Result<Section, Error> {
    let mut results: [Vec<sleeping::Slept>; 2] = Default::default();
    let mut failures = Vec::new();
    interleaved(plan.runs, 1, 2, |t| {
        hang::watch("urpc sleeping server", Duration::from_secs(60));
        let n = plan.sleeping_calls;
        let r = on_thread(|| match t.system {
            0 => sleeping::ferry_run(n, cpus),
            _ => sleeping::futex_run(n, cpus),
        });
        match r {
            Ok(s) if !t.warmup() => results[t.system].push(s),
            Ok(_) => {}
            Err(e) => failures.push(format!("{}: {}", sleeping::SYSTEMS[t.system], e.0)),
        }
        Ok(())
    })?;
    Ok(sleeping::section(&results, &failures))
}

/// The rows (per case: `ferry`, then the peers) and a note per pair that
/// failed in some runs.
fn rows(pairs: Vec<Vec<Pair>>) -> (Vec<Row>, String) {
    let mut rows = Vec::new();
    let mut failed = String::new();
    for ((case, _), pairs) in CASES.iter().zip(pairs) {
        for (system, p) in Contender::all().into_iter().zip(pairs) {
            let reason = p.first_error.unwrap_or_else(|| "no samples".to_owned());
            if p.failures > 0 {
                let _ = writeln!(
                    failed,
                    "failed: {case} / {}: {} run(s): {reason}",
                    system.name(),
                    p.failures
                );
            }
            rows.push(if p.samples.is_empty() {
                Row::absent(EXPERIMENT, *case, system.name(), Unit::Ns, reason)
            } else {
                Row::new(
                    EXPERIMENT,
                    *case,
                    system.name(),
                    Unit::Ns,
                    p.samples,
                    p.calls,
                )
            });
        }
    }
    (rows, failed)
}

/// The goals as text: each a ratio of medians of this run, or n/a.
fn goals(rows: &[Row]) -> String {
    let median = |case: &str, system: &str| {
        rows.iter()
            .find(|r| r.case == case && r.system == system)
            .and_then(Row::median)
    };
    let null = CASES[0].0;
    let mut out = String::from("goals (medians of this run):\n");
    let verdict = |met: bool| if met { "met" } else { "missed" };
    let mut line = |goal: &str, ratio: Option<(f64, bool)>| {
        let text = match ratio {
            Some((r, met)) => format!("{} ({r:.2}x)", verdict(met)),
            None => "n/a (no baseline row)".to_owned(),
        };
        let _ = writeln!(out, "  {goal}: {text}");
    };
    if let Some(f) = median(null, ferry::SYSTEM) {
        let spin = median(null, SPIN_FLOOR).map(|s| (f / s, f <= 2.0 * s));
        line("null call: ferry / spin floor <= 2", spin);
        let unix = median(null, "unix socket").map(|u| (u / f, u >= 100.0 * f));
        line("null call: unix socket / ferry >= 100", unix);
        for (case, _) in CASES {
            let ice = match (median(case, ferry::SYSTEM), median(case, "iceoryx2")) {
                (Some(f), Some(i)) => Some((i / f, f < i)),
                _ => None,
            };
            line(
                &format!("{case}: ferry faster than iceoryx2 (iceoryx2 / ferry > 1)"),
                ice,
            );
        }
    } else {
        line(
            "n/a without a ferry null call row: null call <= 2x spin floor, >= 100x faster \
             than unix socket, faster than iceoryx2",
            None,
        );
    }
    let rate = |t| {
        rows.iter()
            .find(|r| r.case == figures::pipelined(t) && r.unit == figures::RATE)
            .and_then(Row::median)
    };
    let pipe = rate(1)
        .zip(rate(2))
        .map(|(t1, t2)| figures::pipeline_ratio(t1, t2));
    line("pipelined: T=2 calls/s / T=1 calls/s >= 1.7", pipe);
    let sleep = median(sleeping::CASE, ferry::SYSTEM)
        .zip(median(sleeping::CASE, "futex shm"))
        .map(|(f, u)| (f / u, f <= 1.5 * u));
    line("sleeping server: ferry / futex shm <= 1.5", sleep);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, system: &str, ns: f64) -> Row {
        Row::new(EXPERIMENT, case, system, Unit::Ns, vec![ns; 5], 100)
    }

    #[test]
    fn goals_wait_for_the_ferry_row() {
        let rows = vec![row("null call", "spin floor", 200.0)];
        assert!(
            goals(&rows).contains("n/a without a ferry"),
            "{}",
            goals(&rows)
        );
        assert!(goals(&rows).contains("T=1 calls/s >= 1.7: n/a"));
    }

    #[test]
    fn goals_are_ratios_of_this_run() {
        let rows = vec![
            row("null call", "spin floor", 200.0),
            row("null call", "unix socket", 30_000.0),
            row("null call", "iceoryx2", 1000.0),
            row("null call", "ferry", 300.0),
            row("call 32B", "iceoryx2", 1000.0),
            row("call 32B", "ferry", 1500.0),
        ];
        let g = goals(&rows);
        assert!(g.contains("ferry / spin floor <= 2: met (1.50x)"), "{g}");
        assert!(
            g.contains("unix socket / ferry >= 100: met (100.00x)"),
            "{g}"
        );
        assert!(
            g.contains("null call: ferry faster than iceoryx2 (iceoryx2 / ferry > 1): met (3.33x)"),
            "{g}"
        );
        assert!(
            g.contains(
                "call 32B: ferry faster than iceoryx2 (iceoryx2 / ferry > 1): missed (0.67x)"
            ),
            "{g}"
        );
        assert!(
            g.contains("call 1MB: ferry faster than iceoryx2 (iceoryx2 / ferry > 1): n/a"),
            "{g}"
        );
        let mut more = rows.clone();
        more.extend([
            Row::new(
                EXPERIMENT,
                "pipelined T=1",
                figures::SETUP,
                figures::RATE,
                vec![1e6; 5],
                1,
            ),
            Row::new(
                EXPERIMENT,
                "pipelined T=2",
                figures::SETUP,
                figures::RATE,
                vec![1.6e6; 5],
                1,
            ),
            Row::new(
                EXPERIMENT,
                "pipelined T=2",
                figures::SETUP,
                Unit::Ns,
                vec![9.0; 5],
                1,
            ),
            row("sleeping server", "ferry", 30_000.0),
            row("sleeping server", "futex shm", 25_000.0),
        ]);
        let g = goals(&more);
        assert!(g.contains("T=1 calls/s >= 1.7: missed (1.60x)"), "{g}");
        assert!(g.contains("futex shm <= 1.5: met (1.20x)"), "{g}");
        assert!(goals(&rows).contains("futex shm <= 1.5: n/a"));
        let slow = vec![
            row("null call", "spin floor", 100.0),
            row("null call", "ferry", 201.0),
        ];
        assert!(
            goals(&slow).contains("<= 2: missed (2.01x)"),
            "{}",
            goals(&slow)
        );
    }

    #[test]
    fn rows_name_every_pair_and_say_why_one_is_absent() {
        let mut pairs = vec![vec![Pair::default(); System::ALL.len() + 1]; CASES.len()];
        pairs[0][0].samples = vec![1.0, 2.0, 3.0];
        pairs[0][0].calls = 7;
        pairs[0][2].failures = 2;
        pairs[0][2].first_error = Some("refused".into());
        pairs[1][1].samples = vec![4.0];
        pairs[1][1].failures = 1;
        pairs[1][1].first_error = Some("lost".into());
        let (rows, failed) = rows(pairs);
        assert_eq!(rows.len(), CASES.len() * (System::ALL.len() + 1));
        let name = |r: &Row| (r.case.clone(), r.system.clone());
        assert_eq!(name(&rows[0]), ("null call".into(), "ferry".into()));
        assert_eq!(name(&rows[1]), ("null call".into(), "spin floor".into()));
        assert_eq!(name(&rows[7]), ("call 32B".into(), "spin floor".into()));
        assert_eq!(rows[0].median(), Some(2.0));
        assert_eq!(rows[0].items, 7);
        assert_eq!(rows[2].absent_reason(), Some("refused"));
        assert_eq!(rows[3].absent_reason(), Some("no samples"));
        assert_eq!(
            rows[7].median(),
            Some(4.0),
            "a row keeps the runs that worked"
        );
        assert_eq!(
            failed,
            "failed: null call / unix socket: 2 run(s): refused\n\
             failed: call 32B / spin floor: 1 run(s): lost\n"
        );
        assert!(rows.iter().all(|r| r.experiment == "urpc"));
    }

    #[test]
    fn quick_runs_are_shorter() {
        let quick = Plan::new(&Common {
            quick: true,
            ..Common::default()
        })
        .unwrap();
        let full = Plan::new(&Common::default()).unwrap();
        assert_eq!((quick.runs, full.runs), (5, 7));
        assert!(quick.budget.timed < full.budget.timed);
        assert!(quick.sweep.1 < full.sweep.1);
        assert!(quick.sleeping_calls < full.sleeping_calls);
    }
}
