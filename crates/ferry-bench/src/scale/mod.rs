//! The `scale` experiment: what a blocked thread costs when there are many
//! of them. `N` threads (goroutines, tasks) are spawned and each blocks on
//! one gate; the time from the first spawn until all are blocked is
//! `spawn+block`, the time from opening the gate until all are joined is
//! `wake+join`, both per thread; and the resident memory plus page tables
//! (`VmRSS` + `VmPTE` of `/proc/self/status`) gained while they are blocked,
//! per thread.
//!
//! | system | the threads | the gate |
//! |--------|-------------|----------|
//! | `ferry P=1`, `ferry P=2` | `ferry::thread::Builder::spawn` on a runtime of 1 or 2 processors | `ferry::sync::Mutex` + `Condvar` (`notify_all`), joined by handle ([`ferry`]) |
//! | `go P=1`, `go P=2` | goroutines, `GOMAXPROCS` 1 or 2 | a channel that is closed; `sync.WaitGroup`s count them in and out ([`peers`]) |
//! | `tokio` | tasks on a multi-thread runtime of 2 workers | `tokio::sync::Notify::notify_waiters`, joined by handle ([`peers`]) |
//!
//! `N` = 1,000,000 is measured with `--million` only (see [`LEFT_OUT`]).
//! A plot draws each system's time per thread (spawn+block plus
//! wake+join) against `N`. Then the idle case
//! ([`idle`]): the CPU a process uses while its threads and sockets all
//! wait. Then the timers case ([`sleepers`]): how late N sleepers with
//! random deadlines wake. This module owns the schedule, the rows and the
//! goal lines; the systems' runs are in [`ferry`], [`peers`], [`idle`]
//! and [`sleepers`].

mod ferry;
pub use ferry::{OnceArgs, once_main};
mod idle;
mod peers;
pub mod sleepers;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use plotters::style::RGBColor;

use crate::common::{Common, MEDIAN_OF_FIVE};
use crate::measure::interleaved;
use crate::plot;
use crate::report::{Error, Ratio, Report, Section, ratio_verdict, row_median};
use crate::row::{Row, Unit};

/// The experiment's name.
const EXPERIMENT: &str = "scale";

/// The thread counts measured by default.
pub const COUNTS: [usize; 2] = [10_000, 100_000];

/// The count `--million` adds.
pub const MILLION: usize = 1_000_000;

/// Why `N` = 1,000,000 is not measured without `--million`.
pub const LEFT_OUT: &str = "N=1M left out (run with --million to measure it): one ferry run of \
     1M threads takes about 12 s on one processor and 30 s on two (spawn+block plus wake+join) \
     and 5 GB resident, Go's about 3 s and 2.8 GB; 8 rounds of 5 systems would not keep the \
     default run under a minute";

/// `scale` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// Also measure N = 1,000,000 threads (about 50 s more per round, and
    /// up to 5 GB resident at once)
    #[arg(long)]
    pub million: bool,
}

impl Args {
    /// The thread counts this run measures.
    pub fn counts(&self) -> Vec<usize> {
        let mut counts = COUNTS.to_vec();
        if self.million {
            counts.push(MILLION);
        }
        counts
    }
}

/// One run of one system at one `N`: per-thread times and, where measured,
/// resident bytes per blocked thread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Threads in the run.
    pub n: usize,
    /// ns per thread from the first spawn to all blocked.
    pub spawn_ns: f64,
    /// ns per thread from opening the gate to all joined.
    pub join_ns: f64,
    /// Resident bytes plus page tables gained per blocked thread.
    pub bytes: Option<f64>,
}

impl Sample {
    /// A sample of `n` threads from the two durations and the
    /// `(before, after)` resident bytes.
    pub fn new(n: usize, spawn: Duration, join: Duration, rss: Option<(u64, u64)>) -> Sample {
        let per = |d: Duration| d.as_nanos() as f64 / n as f64;
        Sample {
            n,
            spawn_ns: per(spawn),
            join_ns: per(join),
            bytes: rss.map(|(before, after)| (after as f64 - before as f64) / n as f64),
        }
    }
}

/// A system of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum System {
    /// ferry on this many processors.
    Ferry(usize),
    /// Go with this `GOMAXPROCS`.
    Go(usize),
    /// Tokio, [`peers::TOKIO_WORKERS`] workers.
    Tokio,
}

/// The systems, in print order.
pub const SYSTEMS: [System; 5] = [
    System::Ferry(1),
    System::Ferry(2),
    System::Go(1),
    System::Go(2),
    System::Tokio,
];

impl System {
    /// The row label.
    pub fn label(self) -> String {
        match self {
            System::Ferry(p) => format!("ferry P={p}"),
            System::Go(p) => format!("go P={p}"),
            System::Tokio => "tokio".to_owned(),
        }
    }
}

/// `10k`, `100k`, `1M`.
pub fn count_label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// What runs found: the results of each (N, system) in run order, or why
/// a pair has none (its first error).
pub type Runs<S> = HashMap<(usize, System), Result<Vec<S>, String>>;

/// What the runs found: the samples of each (N, system), and why a pair
/// has none (its first error).
pub type Found = Runs<Sample>;

/// What the idle runs found: CPU microseconds per idle second of each
/// system's runs, or why it has none.
pub type IdleFound = HashMap<System, Result<Vec<f64>, String>>;

/// What the timers runs found: each run's lateness per (N, system), or
/// why a pair has none.
pub type SleepFound = Runs<sleepers::Lateness>;

/// The systems of the idle case.
pub const IDLE_SYSTEMS: [System; 2] = [System::Ferry(2), System::Go(2)];

/// Runs the experiment.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let runs = common.runs(MEDIAN_OF_FIVE)?;
    let counts = args.counts();
    let go = peers::build_go();
    let go = go.as_ref().map_err(Clone::clone);
    let found: Found = collect(runs, &counts, |n, system| match system {
        System::Ferry(p) => ferry::run(n, p),
        System::Go(p) => peers::run_go(go.clone()?, n, p),
        System::Tokio => peers::run_tokio(n),
    })?;
    let sleep_found: SleepFound = collect(runs, &counts, |n, system| match system {
        System::Ferry(p) => sleepers::run_ferry(n, p),
        System::Go(p) => sleepers::run_go(go.clone()?, n, p),
        System::Tokio => sleepers::run_tokio(n),
    })?;
    let (idle_runs, window) = if common.quick {
        (idle::QUICK_RUNS, idle::QUICK_WINDOW)
    } else {
        (idle::RUNS, idle::WINDOW)
    };
    let mut idle_found: IdleFound = HashMap::new();
    for round in 0..idle_runs as usize {
        for k in 0..IDLE_SYSTEMS.len() {
            let system = IDLE_SYSTEMS[(k + round) % IDLE_SYSTEMS.len()];
            let slot = idle_found.entry(system).or_insert_with(|| Ok(Vec::new()));
            let Ok(values) = slot else { continue };
            let value = match system {
                System::Ferry(p) => idle::run_ferry(p, window),
                System::Go(p) => go
                    .clone()
                    .and_then(|program| idle::run_go(program, p, window)),
                System::Tokio => Err("not measured".into()),
            };
            match value {
                Ok(v) => values.push(v),
                Err(why) => *slot = Err(why),
            }
        }
    }
    let plot_dir = if common.write_docs {
        crate::docs::results_dir()
    } else {
        std::env::temp_dir()
    };
    let mut report = report(&counts, &found, &idle_found, &plot_dir);
    report
        .sections
        .push(sleepers::section(&counts, &sleep_found));
    Ok(report)
}

/// Runs `one` for every (N, system) pair of `counts` and [`SYSTEMS`],
/// `runs` times after a warm-up round, interleaved: each pair's results in
/// run order, or its first error (after which the pair is not run again).
fn collect<S>(
    runs: u32,
    counts: &[usize],
    mut one: impl FnMut(usize, System) -> Result<S, String>,
) -> Result<Runs<S>, Error> {
    let mut found = HashMap::new();
    interleaved(runs, counts.len(), SYSTEMS.len(), |turn| {
        let (n, system) = (counts[turn.case], SYSTEMS[turn.system]);
        let slot = found.entry((n, system)).or_insert_with(|| Ok(Vec::new()));
        let Ok(samples) = slot else {
            return Ok(());
        };
        match one(n, system) {
            Ok(s) if !turn.warmup() => samples.push(s),
            Ok(_) => {}
            Err(why) => *slot = Err(why),
        }
        Ok(())
    })?;
    Ok(found)
}

/// The report of what the runs at `counts` found: a time section (two
/// cases per N, ratios to Go, the plot drawn into `plot_dir`), a memory
/// section (ferry and Go) and the idle section, with goal lines.
pub fn report(counts: &[usize], found: &Found, idle_found: &IdleFound, plot_dir: &Path) -> Report {
    let mut time = Vec::new();
    let mut memory = Vec::new();
    for &n in counts {
        let label = count_label(n);
        for (case, pick) in [
            (
                "spawn+block",
                (|s: &Sample| Some(s.spawn_ns)) as fn(&Sample) -> Option<f64>,
            ),
            ("wake+join", |s: &Sample| Some(s.join_ns)),
        ] {
            for system in SYSTEMS {
                time.push(row(
                    found,
                    n,
                    system,
                    format!("{case} N={label}"),
                    Unit::Ns,
                    pick,
                ));
            }
        }
        for system in SYSTEMS.into_iter().filter(|s| *s != System::Tokio) {
            memory.push(row(
                found,
                n,
                system,
                format!("blocked N={label}"),
                Unit::Bytes,
                |s| s.bytes,
            ));
        }
    }
    let mut time_notes = goals(&time, "time per thread");
    time_notes.push_str(&draw(&plot_dir.join("scale-threads.png"), counts, &time));
    let mut memory_notes = goals(&memory, "resident + page tables per blocked thread");
    if !counts.contains(&MILLION) {
        let _ = writeln!(memory_notes, "{LEFT_OUT}");
    }
    Report {
        doc: EXPERIMENT,
        title: String::new(),
        sections: vec![
            Section {
                title: "ns per thread: spawn N threads that each block on one gate; open it and join all"
                    .into(),
                rows: time,
                ratios: vec![
                    Ratio::to_system("vs go P=1", "go P=1"),
                    Ratio::to_system("vs go P=2", "go P=2"),
                ],
                notes: time_notes,
                ..Section::default()
            },
            Section {
                title: "resident bytes + page tables per blocked thread (VmRSS + VmPTE growth)"
                    .into(),
                rows: memory,
                ratios: vec![
                    Ratio::to_system("vs go P=1", "go P=1"),
                    Ratio::to_system("vs go P=2", "go P=2"),
                ],
                notes: memory_notes,
                ..Section::default()
            },
            idle_section(idle_found),
        ],
    }
}

/// The idle section: CPU per idle second of ferry and Go, and the goal.
fn idle_section(idle_found: &IdleFound) -> Section {
    let case = format!(
        "idle {}k threads + {}k sockets",
        idle::IDLE_THREADS / 1000,
        idle::IDLE_SOCKETS / 1000
    );
    let unit = Unit::Rate("cpu us/s");
    let rows: Vec<Row> = IDLE_SYSTEMS
        .iter()
        .map(|&system| {
            let label = system.label();
            match idle_found.get(&system) {
                Some(Ok(v)) if !v.is_empty() => {
                    Row::new(EXPERIMENT, case.clone(), label, unit, v.clone(), 1)
                }
                Some(Err(why)) => Row::absent(EXPERIMENT, case.clone(), label, unit, why.clone()),
                _ => Row::absent(EXPERIMENT, case.clone(), label, unit, "not run"),
            }
        })
        .collect();
    let mut notes = String::new();
    let ferry = System::Ferry(2).label();
    let verdict = match row_median(&rows, &case, &ferry) {
        Some(m) if m <= idle::GOAL_US_PER_S => format!("{m:.0} (met)"),
        Some(m) => format!("{m:.0} (not met)"),
        None => "absent".to_owned(),
    };
    let _ = writeln!(
        notes,
        "goal: CPU per idle second, {case}: {ferry} <= {:.0} us/s (0.1% of one CPU): {verdict}",
        idle::GOAL_US_PER_S
    );
    Section {
        title: format!(
            "CPU used per second of an idle window (user + system, every kernel thread), {} threads blocked on a gate and {} idle TCP connections",
            idle::IDLE_THREADS,
            idle::IDLE_SOCKETS
        ),
        rows,
        // Go's idle process runs nothing at all: no ratio to it.
        ratios: Vec::new(),
        notes,
        ..Section::default()
    }
}

/// The row of `system` at `n`: `pick` of each sample, or absent.
fn row(
    found: &Found,
    n: usize,
    system: System,
    case: String,
    unit: Unit,
    pick: fn(&Sample) -> Option<f64>,
) -> Row {
    let label = system.label();
    match found.get(&(n, system)) {
        Some(Ok(samples)) => {
            let values: Option<Vec<f64>> = samples.iter().map(pick).collect();
            match values {
                Some(v) if !v.is_empty() => Row::new(EXPERIMENT, case, label, unit, v, n as u64),
                _ => Row::absent(EXPERIMENT, case, label, unit, "not measured"),
            }
        }
        Some(Err(why)) => Row::absent(EXPERIMENT, case, label, unit, why.clone()),
        None => Row::absent(EXPERIMENT, case, label, unit, "not run"),
    }
}

/// One goal line per (case, P): ferry's median over Go's, at most 1 met.
fn goals(rows: &[Row], what: &str) -> String {
    let mut out = String::new();
    let mut cases: Vec<&str> = rows.iter().map(|r| r.case.as_str()).collect();
    cases.dedup();
    for case in cases {
        for p in [1, 2] {
            let (ferry, go) = (System::Ferry(p).label(), System::Go(p).label());
            let verdict = ratio_verdict(
                row_median(rows, case, &ferry),
                row_median(rows, case, &go),
                |f, g| f <= g,
            );
            let _ = writeln!(out, "goal: {what}, {case}: {ferry} <= {go}: {verdict}");
        }
    }
    out
}

/// Draws each system's median time per thread (spawn+block plus
/// wake+join, from the `time` rows) against log10 N into `path`; a note
/// saying where.
fn draw(path: &Path, counts: &[usize], time: &[Row]) -> String {
    const COLORS: [(RGBColor, &str); 5] = [
        (RGBColor(31, 119, 180), "blue"),
        (RGBColor(174, 199, 232), "light blue"),
        (RGBColor(214, 39, 40), "red"),
        (RGBColor(255, 152, 150), "pink"),
        (RGBColor(44, 160, 44), "green"),
    ];
    let mut series = Vec::new();
    for (system, (color, color_name)) in SYSTEMS.into_iter().zip(COLORS) {
        let name = system.label();
        let points: Vec<(f64, f64)> = counts
            .iter()
            .filter_map(|&n| {
                let label = count_label(n);
                let spawn = row_median(time, &format!("spawn+block N={label}"), &name)?;
                let join = row_median(time, &format!("wake+join N={label}"), &name)?;
                Some(((n as f64).log10(), spawn + join))
            })
            .collect();
        if !points.is_empty() {
            series.push(plot::Series {
                name,
                color,
                color_name,
                points,
            });
        }
    }
    let labels = plot::Labels {
        title: "N threads each block on one gate, then all are woken and joined: ns per thread",
        x: "threads N, log10 (4 = 10,000, 6 = 1,000,000)",
        y: "ns per thread, spawn+block + wake+join (log scale)",
        y_format: &|y: &f64| format!("{y:.0}"),
    };
    plot::caption(
        path,
        &labels,
        &series,
        "x = log10 N, y log scale",
        "x = log10 N from 0, y on a log scale, a grey line at each power of ten",
    )
}

/// One ferry run in a fresh process: this benchmark started again as the
/// hidden `scale-ferry` with `n` threads on `processors` processors and
/// `extra` arguments; its standard output.
fn ferry_child(n: usize, processors: usize, extra: &[&str]) -> Result<String, String> {
    let me =
        std::env::current_exe().map_err(|e| format!("cannot find the benchmark's binary: {e}"))?;
    let mut cmd = std::process::Command::new(me);
    cmd.args(["scale-ferry", "--n", &n.to_string()])
        .args(["--processors", &processors.to_string()])
        .args(extra);
    stdout_of(&mut cmd, "a ferry run", "the ferry run")
}

/// One run of the Go program with `GOMAXPROCS=procs` and `args`; its
/// standard output.
fn go_child(
    program: &crate::peers::go::Program,
    procs: usize,
    args: &[&str],
) -> Result<String, String> {
    let mut cmd = std::process::Command::new(program.path());
    cmd.args(args).env("GOMAXPROCS", procs.to_string());
    stdout_of(&mut cmd, "the Go program", "the Go program")
}

/// Runs `cmd` to its end: its standard output, or why it could not start
/// (`start` names it) or failed (`who`, with its standard error).
fn stdout_of(cmd: &mut std::process::Command, start: &str, who: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start {start}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{who} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Resident bytes plus page tables of this process.
pub fn resident_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    parse_status(&status)
}

/// `VmRSS` + `VmPTE` (kB) of a `/proc/<pid>/status` text, in bytes.
pub fn parse_status(status: &str) -> Result<u64, String> {
    let field = |key: &str| -> Result<u64, String> {
        let line = status
            .lines()
            .find(|l| l.starts_with(key))
            .ok_or_else(|| format!("no {key} in /proc/self/status"))?;
        match line[key.len()..].split_whitespace().collect::<Vec<_>>()[..] {
            [kb, "kB"] => kb
                .parse::<u64>()
                .ok()
                .and_then(|kb| kb.checked_mul(1024))
                .ok_or_else(|| format!("bad {key} line: {line:?}")),
            _ => Err(format!("bad {key} line: {line:?}")),
        }
    };
    Ok(field("VmRSS:")? + field("VmPTE:")?)
}

#[cfg(test)]
mod tests;
