//! The `migrating` experiment: a cross-process call served by a
//! migrating activation against the same call served by a static pool of
//! service threads, as Ford and Lepreau measured Mach 3.0 (seed `000`,
//! §8.4 and Table 3), beside the Linux form of Mach's static RPC.
//!
//! | system | server |
//! |--------|--------|
//! | `migrating` | a ferry `rpc::Server` in another process, `ServeMode::Migrating`, one processor ([`served`]) |
//! | `static` | the same, `ServeMode::Static` |
//! | `kernel static` | a fixed pool of kernel threads blocking in `recv` on a `SOCK_SEQPACKET` Unix socket ([`kernel`]) |
//!
//! Cases `null`, `32B`, `1KB`, `32KB`: arguments of that size in, the
//! call's 8-byte number (nothing for `null`) back ([`proto`]), each
//! measured twice, in runs of their own: the **server-side path** (the
//! server's own sums of call seen → handler entry and handler return →
//! reply posted, read by a stats call before and after the timed calls:
//! Table 3's left columns) and the **round trip** at the client, with
//! path measuring off (its right columns). Then `priority p99`
//! ([`priority`]): a high-priority caller's p99 under a saturating
//! low-priority load, static against migrating.
//!
//! A run: the client thread pins to the first allowed CPU, starts the
//! server process (this binary again, `migrating-serve`, [`serve`]) on the
//! second, calls, and ends it. Every number is the median over the runs
//! of a run's mean (p99 for the priority case), with min and max; runs are
//! interleaved and rotated ([`interleaved`]). Goals are ratios of medians
//! of this run; nothing fails the program.
//!
//! This module owns the cases, the plan and the rows; the goal lines are
//! [`goals`]'s.

use std::fmt::Write as _;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ferry::rpc::ServeMode;

use crate::affinity;
use crate::common::{Common, Defaults, MEDIAN_OF_FIVE};
use crate::measure::interleaved;
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};
use crate::urpc::calls::Budget;
use crate::urpc::on_thread;
use crate::watchdog::hang;

mod goals;
mod kernel;
mod priority;
mod proto;
mod serve;
mod served;
mod timed;

pub use serve::{ServeArgs, serve_main};

use priority::Load;
use serve::KERNEL_STATIC;
use timed::Timed;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "migrating";

/// Runs per pair: 7, with `--quick` 5; at least 5.
pub const DEFAULTS: Defaults = MEDIAN_OF_FIVE;

/// The cases: name and argument bytes.
pub const CASES: [(&str, usize); 4] =
    [("null", 0), ("32B", 32), ("1KB", 1024), ("32KB", 32 * 1024)];

/// The priority case's name.
const PRIORITY: &str = "priority p99";

/// The identity row's case name: the steps carrying the logical thread adds
/// to a call, timed alone (`ferry::rpc::identity_steps`).
const IDENTITY: &str = "identity steps";

/// Least calls the identity steps are timed over per run (more when the
/// run's round trips were more).
const IDENTITY_CALLS: u64 = 100_000;

/// Who serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Ferry(ServeMode),
    Kernel,
}

impl System {
    /// Every system, in table order.
    const ALL: [System; 3] = [
        System::Ferry(ServeMode::Migrating),
        System::Ferry(ServeMode::Static),
        System::Kernel,
    ];

    fn name(self) -> &'static str {
        match self {
            System::Ferry(mode) => served::system_name(mode),
            System::Kernel => KERNEL_STATIC,
        }
    }
}

/// The baseline of the ratio columns.
const MIGRATING: &str = "migrating";
/// The static ferry server's row name.
const STATIC: &str = "static";

/// What a Table 3 run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The server-side path (path measuring on).
    Path,
    /// The round trip at the client (path measuring off).
    RoundTrip,
}

const KINDS: [Kind; 2] = [Kind::Path, Kind::RoundTrip];

impl Kind {
    /// The row's case name: `path null`, `round trip 32B`, ...
    fn case(self, case: &str) -> String {
        match self {
            Kind::Path => format!("path {case}"),
            Kind::RoundTrip => format!("round trip {case}"),
        }
    }
}

/// Command-line arguments of `ferry-bench migrating`. `--quick` means
/// shorter runs (2 ms warm-up and 5 ms timed per Table 3 run; 100 ms and
/// 400 ms per priority run) and 5 of them.
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
    /// How long each Table 3 run lasts.
    pub budget: Budget,
    /// The priority case's load.
    pub load: Load,
}

impl Plan {
    /// The plan `common` asks for.
    pub fn new(common: &Common) -> Result<Plan, Error> {
        let runs = common.runs(DEFAULTS)?;
        let ms = Duration::from_millis;
        let (warmup, timed, load_warm, load_timed) = if common.quick {
            (ms(2), ms(5), ms(100), ms(400))
        } else {
            (ms(5), ms(20), ms(200), ms(1000))
        };
        Ok(Plan {
            runs,
            budget: Budget {
                warmup,
                timed,
                min_calls: 20,
                max_calls: 10_000_000,
            },
            load: Load {
                low_clients: 16,
                burn: Duration::from_micros(50),
                gap: Duration::from_micros(100),
                warmup: load_warm,
                timed: load_timed,
            },
        })
    }
}

/// One Table 3 run of `system` with `size` bytes of arguments.
fn one_run(
    system: System,
    size: usize,
    kind: Kind,
    budget: Budget,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Timed, Error> {
    let path = kind == Kind::Path;
    on_thread(move || {
        affinity::pin_or_warn(cpus.0, "migrating client");
        match system {
            System::Ferry(mode) => served::with_server(mode, path, cpus.1, move |c| {
                let mut timed =
                    timed::run(&budget, size, path, |op, args| served::call(c, op, args))?;
                if kind == Kind::RoundTrip && size == 0 && mode == ServeMode::Migrating {
                    let steps = ferry::rpc::identity_steps(timed.calls.max(IDENTITY_CALLS))
                        .ok_or_else(|| Error("identity steps: not on a ferry thread".into()))?;
                    timed.identity_ns = Some(steps.as_nanos() as f64);
                }
                Ok(timed)
            }),
            System::Kernel => {
                let (mine, theirs) = kernel::pair()?;
                let fd = theirs.as_raw_fd();
                let mut args = serve::args(KERNEL_STATIC, path, cpus.1);
                args.extend(["--fd".to_owned(), fd.to_string()]);
                let mut server = serve::spawn(&args, &[fd])?;
                drop(theirs);
                server.wait_ready(served::START_LIMIT)?;
                let mut client = kernel::Client::new(mine);
                let timed = timed::run(&budget, size, path, |op, args| client.call(op, args))?;
                drop(client);
                server.finish(served::EXIT_LIMIT)?;
                Ok(timed)
            }
        }
    })
}

/// Samples of one pair over the runs, and the first failure.
#[derive(Debug, Clone, Default)]
struct Pair {
    samples: Vec<f64>,
    items: u64,
    extra: Vec<Vec<f64>>,
    failures: u32,
    first_error: Option<String>,
}

impl Pair {
    fn fail(&mut self, e: Error) {
        self.failures += 1;
        self.first_error.get_or_insert(e.0);
    }

    /// The row of `case` and `system`, with each extra as the median of
    /// its runs.
    fn row(self, case: &str, system: &str, extras: &[&'static str], failed: &mut String) -> Row {
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
        let mut row = Row::new(EXPERIMENT, case, system, Unit::Ns, self.samples, self.items);
        for (key, values) in extras.iter().zip(self.extra) {
            if let Some(s) = crate::measure::Stats::from_samples(&values) {
                row = row.with(key, s.median);
            }
        }
        row
    }
}

/// Runs the experiment.
///
/// # Errors
/// A bad `--runs`; never a failed run (its row says so).
pub fn run(common: &Common, _args: &Args) -> Result<Report, Error> {
    let plan = Plan::new(common)?;
    let cpus = affinity::two_cores();
    let started = Instant::now();
    // pairs[kind][case][system]
    let mut pairs = vec![vec![vec![Pair::default(); System::ALL.len()]; CASES.len()]; 2];
    let mut identity = Pair::default();
    interleaved(
        plan.runs,
        KINDS.len() * CASES.len(),
        System::ALL.len(),
        |t| {
            let (kind, case) = (t.case / CASES.len(), t.case % CASES.len());
            if t.case == 0 && t.system == t.round as usize % System::ALL.len() {
                eprintln!(
                    "ferry-bench migrating: round {}/{} ({:.1} s so far)",
                    t.round,
                    plan.runs,
                    started.elapsed().as_secs_f64()
                );
            }
            let (name, size) = CASES[case];
            let system = System::ALL[t.system];
            hang::watch(
                &format!("migrating {name} / {}", system.name()),
                Duration::from_secs(60),
            );
            let pair = &mut pairs[kind][case][t.system];
            match one_run(system, size, KINDS[kind], plan.budget, cpus) {
                Ok(timed) if !t.warmup() => {
                    let value = match KINDS[kind] {
                        Kind::Path => timed.path_ns,
                        Kind::RoundTrip => Some(timed.round_trip_ns),
                    };
                    match value {
                        Some(v) => pair.samples.push(v),
                        None => pair.fail(Error("no path measured".into())),
                    }
                    pair.items = timed.calls;
                    if let Some(ns) = timed.identity_ns {
                        identity.samples.push(ns);
                        identity.items = timed.calls.max(IDENTITY_CALLS);
                    }
                }
                Ok(_) => {}
                Err(e) => pair.fail(e),
            }
            Ok(())
        },
    )?;
    let mut priority = vec![Pair::default(), Pair::default()];
    let modes = [ServeMode::Migrating, ServeMode::Static];
    interleaved(plan.runs, 1, modes.len(), |t| {
        let mode = modes[t.system];
        hang::watch(
            &format!("migrating {PRIORITY} / {}", served::system_name(mode)),
            Duration::from_secs(60),
        );
        let pair = &mut priority[t.system];
        match on_thread(|| priority::run_once(mode, plan.load, cpus)) {
            Ok(o) if !t.warmup() => {
                pair.samples.push(o.p99_ns);
                pair.items = o.high_calls;
                pair.extra.resize(3, Vec::new());
                pair.extra[0].push(o.p50_ns);
                pair.extra[1].push(o.high_calls as f64);
                pair.extra[2].push(o.low_calls_per_s);
            }
            Ok(_) => {}
            Err(e) => pair.fail(e),
        }
        Ok(())
    })?;
    hang::unwatch();
    let mut sections = table3_sections(pairs);
    sections.push(identity_section(identity));
    sections.push(priority_section(priority, modes, &plan.load));
    let all: Vec<Row> = sections.iter().flat_map(|s| s.rows.clone()).collect();
    if let Some(last) = sections.last_mut() {
        last.notes.push_str(&goals::goals(&all));
        last.notes.push('\n');
        last.notes.push_str(&goals::beside_table3(&all));
    }
    Ok(Report {
        doc: EXPERIMENT,
        title: format!(
            "migrating: medians of {} runs{}, client on cpu {}, server process on cpu {}",
            plan.runs,
            if common.quick { " (--quick)" } else { "" },
            affinity::name(cpus.0),
            affinity::name(cpus.1)
        ),
        sections,
    })
}

/// The two Table 3 tables: server-side path, then round trip.
fn table3_sections(pairs: Vec<Vec<Vec<Pair>>>) -> Vec<Section> {
    let titles = [
        "Server-side path (000 Table 3, left): mean ns per call from call seen to handler \
         entry plus handler return to reply posted, as the server measures it",
        "Round trip (000 Table 3, right): mean ns per call at the client, path measuring off",
    ];
    pairs
        .into_iter()
        .zip(KINDS.into_iter().zip(titles))
        .map(|(by_case, (kind, title))| {
            let (mut rows, mut failed) = (Vec::new(), String::new());
            for ((case, _), by_system) in CASES.iter().zip(by_case) {
                for (system, pair) in System::ALL.iter().zip(by_system) {
                    rows.push(pair.row(&kind.case(case), system.name(), &[], &mut failed));
                }
            }
            Section {
                title: title.to_owned(),
                headers: ("case", "system"),
                rows,
                ratios: vec![Ratio::to_system("vs migrating", MIGRATING)],
                notes: failed,
            }
        })
        .collect()
}

/// The identity table: one row, the steps timed after each migrating
/// null round-trip run.
fn identity_section(pair: Pair) -> Section {
    let mut failed = String::new();
    let row = pair.row(IDENTITY, MIGRATING, &[], &mut failed);
    Section {
        title: "Carrying the logical thread: mean ns per call of the steps it adds to a call \
                (context encoded and decoded, frames, run time read and charged back), timed \
                alone on the client's thread after each migrating null round-trip run"
            .to_owned(),
        headers: ("case", "system"),
        rows: vec![row],
        ratios: Vec::new(),
        notes: failed,
    }
}

/// The priority table.
fn priority_section(pairs: Vec<Pair>, modes: [ServeMode; 2], load: &Load) -> Section {
    let mut failed = String::new();
    let rows = pairs
        .into_iter()
        .zip(modes)
        .map(|(p, mode)| {
            p.row(
                PRIORITY,
                served::system_name(mode),
                &["p50 ns", "high calls", "low calls/s"],
                &mut failed,
            )
        })
        .collect();
    Section {
        title: format!(
            "Priority: p99 ns of a high-priority caller's null calls (one every {} us) while \
             {} low-priority callers keep a one-processor server busy with calls of {} us of \
             work each",
            load.gap.as_micros(),
            load.low_clients,
            load.burn.as_micros()
        ),
        headers: ("case", "system"),
        rows,
        ratios: vec![Ratio::to_system("vs migrating", MIGRATING)],
        notes: failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_runs_and_say_why_one_is_absent() {
        let mut good = Pair {
            samples: vec![3.0, 1.0, 2.0],
            items: 9,
            extra: vec![vec![10.0, 30.0, 20.0], vec![]],
            ..Pair::default()
        };
        good.fail(Error("slow".into()));
        let mut failed = String::new();
        let r = good.row("c", "s", &["a", "b"], &mut failed);
        assert_eq!((r.median(), r.items), (Some(2.0), 9));
        assert_eq!(
            r.extra,
            vec![("a", 20.0)],
            "an extra without runs is left out"
        );
        assert_eq!(failed, "failed: c / s: 1 run(s): slow\n");
        let r = Pair::default().row("c", "t", &[], &mut failed);
        assert_eq!(r.absent_reason(), Some("no samples"));
        let sections = table3_sections(vec![
            vec![
                vec![Pair::default(); System::ALL.len()];
                CASES.len()
            ];
            2
        ]);
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].rows[0].case, "path null");
        assert_eq!(sections[1].rows[3].case, "round trip 32B");
        assert_eq!(sections[1].rows[5].system, KERNEL_STATIC);
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
        assert!(quick.load.timed < full.load.timed);
        assert_eq!(full.load.low_clients, 16);
    }
}
