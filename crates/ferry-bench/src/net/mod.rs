//! The `net` experiment: a TCP echo server under a closed-loop load of `C`
//! connections, C = 1, 10, 100, 1,000 and 10,000, for three servers that
//! each give every connection a thread of their kind.
//!
//! | system | per connection | scheduler |
//! |--------|----------------|-----------|
//! | `ferry P=2` | a ferry thread, blocking `ferry::net` calls | `ferry::Runtime`, [`PROCESSORS`] processors ([`serve`]) |
//! | `go P=2` | a goroutine, `net.Conn` | Go's, `GOMAXPROCS` = the 2 CPUs (`go/echo/`) |
//! | `tokio 2 workers` | a task, `tokio::net::TcpStream` | multi-thread runtime, [`PROCESSORS`] workers ([`serve`]) |
//!
//! # What a run is
//!
//! One run of one (system, C) pair ([`run()`]): a fresh listening socket on
//! 127.0.0.1 with backlog [`BACKLOG`], a fresh server process serving it,
//! and a fresh load process ([`load`]) that opens the `C` connections in
//! batches of 512 (each connection's first round trip checked before the
//! next batch), then keeps one 64-byte request outstanding on every
//! connection (closed loop) for [`Plan::warmup`] untimed and
//! [`Plan::window`] timed, checking every echoed byte. Both processes share
//! the machine's two CPUs; neither is pinned. Every number is the median of
//! [`Plan::runs`] runs (min and max beside it); runs are interleaved (run
//! *k* of every pair before run *k+1* of any, systems rotated), with no
//! warm-up round, as every run warms up by itself.
//!
//! Per (system, C): requests/s (echoes completed in the window over its
//! length); p99 and p50 latency (send to last byte of the echo, from a
//! log-linear histogram, [`histogram`]); server CPU per request (`utime` +
//! `stime` of `/proc/<pid>/stat` over the window, over the requests); the
//! server's kernel threads (`Threads:` of `/proc/<pid>/status` every 10 ms
//! from the first connection to the window's end, the most seen). A pair
//! that fails (a time limit, a server that dies, a wrong byte) is an absent
//! row with the reason, and is not run again.
//!
//! Goals: ferry's requests/s at least Go's and Tokio's at every C, its p99
//! no worse, its kernel threads about its processors (at most
//! [`PROCESSORS`] + [`THREAD_SLACK`]). Missed goals are printed as such;
//! nothing fails the program.
//!
//! This module owns the cases, the schedule, the rows, the goals and the
//! plot; the servers are [`serve`]'s (and Go's), the load [`load`]'s and
//! [`conn`]'s, a run's processes [`run()`]'s.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use plotters::style::RGBColor;

use crate::common::{Common, Defaults};
use crate::measure::{Stats, interleaved};
use crate::plot;
use crate::report::{Error, Ratio, Report, Section, ratio_verdict, row_median};
use crate::row::{Row, Unit};
use crate::watchdog::hang;

pub mod conn;
pub mod histogram;
pub mod load;
pub mod procfs;
pub mod run;
pub mod serve;
pub mod systems;

pub use load::{LoadArgs, load_main};
pub use serve::{ServeArgs, serve_main};

use load::Outcome;
use systems::{SYSTEMS, System};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "net";
/// The listen backlog of every server's socket (`somaxconn` here): below
/// the 512 connections of a batch it would never overflow either.
pub const BACKLOG: i32 = 4096;
/// Processors (ferry), `GOMAXPROCS` (Go) and workers (Tokio): the CPUs.
pub const PROCESSORS: usize = 2;
/// Kernel threads beyond its processors a server may have and still meet
/// the "about its processors" goal.
pub const THREAD_SLACK: u64 = 8;
/// The connection counts.
pub const CONNECTIONS: [usize; 5] = [1, 10, 100, 1_000, 10_000];
/// Medians of 3 runs (the full experiment must stay within minutes).
pub const DEFAULTS: Defaults = Defaults {
    runs: 3,
    quick_runs: 3,
    min_runs: 3,
};
/// Warm-up and window, ms: default, and with `--quick`.
const WINDOWS: [(u64, u64); 2] = [(1000, 2000), (300, 500)];
/// Rate unit of the throughput rows.
const RATE: Unit = Unit::Rate("requests/s");

/// Command-line arguments of `ferry-bench net`. `--quick` means a 300 ms
/// warm-up and a 500 ms window.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// Connection counts to run, comma-separated [default: 1,10,100,1000,10000]
    #[arg(long, value_delimiter = ',')]
    pub connections: Vec<usize>,
    /// Servers to run, comma-separated: ferry, go, tokio [default: all]
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// Untimed load before each window, ms [default: 1000, 300 with --quick]
    #[arg(long)]
    pub warmup_ms: Option<u64>,
    /// The measured window of each run, ms [default: 2000, 500 with --quick]
    #[arg(long)]
    pub window_ms: Option<u64>,
}

/// The sizes of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Runs per pair.
    pub runs: u32,
    /// Untimed load at the start of each run.
    pub warmup: Duration,
    /// The measured window of each run.
    pub window: Duration,
    /// Connection counts, in order.
    pub connections: Vec<usize>,
    /// Servers, in order.
    pub systems: Vec<System>,
}

impl Plan {
    /// The plan `args` ask for.
    pub fn new(args: &Args) -> Result<Plan, Error> {
        let runs = args.common.runs(DEFAULTS)?;
        let (warmup, window) = WINDOWS[usize::from(args.common.quick)];
        let warmup = args.warmup_ms.unwrap_or(warmup);
        let window = args.window_ms.unwrap_or(window);
        if window < 100 {
            return Err(Error(format!("--window-ms {window}: at least 100 ms")));
        }
        let connections = if args.connections.is_empty() {
            CONNECTIONS.to_vec()
        } else {
            args.connections.clone()
        };
        if let Some(&c) = connections.iter().find(|&&c| c == 0 || c > 15_000) {
            return Err(Error(format!(
                "--connections {c}: from 1 to 15000 (each process holds one descriptor per \
                 connection)"
            )));
        }
        let systems = if args.systems.is_empty() {
            SYSTEMS.to_vec()
        } else {
            let s: Result<Vec<System>, Error> =
                args.systems.iter().map(|a| System::from_arg(a)).collect();
            s?
        };
        Ok(Plan {
            runs,
            warmup: Duration::from_millis(warmup),
            window: Duration::from_millis(window),
            connections,
            systems,
        })
    }

    /// The time limit of one load run of `c` connections: the warm-up and
    /// window, plus 20 s, plus 2 ms per connection for opening them.
    pub fn limit(&self, c: usize) -> Duration {
        self.warmup + self.window + Duration::from_secs(20) + Duration::from_millis(2 * c as u64)
    }
}

/// `C=1`, `C=1k`, `C=10k`.
pub fn case(c: usize) -> String {
    match c {
        c if c >= 1000 && c % 1000 == 0 => format!("C={}k", c / 1000),
        c => format!("C={c}"),
    }
}

/// What the runs found: the outcomes of each (C, system), or why it has
/// none.
pub type Found = HashMap<(usize, System), Result<Vec<Outcome>, String>>;

/// Runs the experiment.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let plan = Plan::new(args)?;
    let go = if plan.systems.contains(&System::Go) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/echo");
        Some(crate::peers::go::build_in(&dir, "net-echo"))
    } else {
        None
    };
    let mut found: Found = HashMap::new();
    let (cases, systems) = (plan.connections.len(), plan.systems.len());
    interleaved(plan.runs, cases, systems, |turn| {
        if turn.warmup() {
            return Ok(());
        }
        let (c, system) = (plan.connections[turn.case], plan.systems[turn.system]);
        let slot = found.entry((c, system)).or_insert_with(|| Ok(Vec::new()));
        let Ok(outcomes) = slot else {
            return Ok(());
        };
        let what = format!("net {} {} run {}", case(c), system.label(), turn.round);
        hang::watch(&what, plan.limit(c) + run::READY + Duration::from_secs(30));
        let outcome = match (system, &go) {
            (System::Go, Some(Err(why))) => Err(why.clone()),
            (_, go) => run::once(system, go.as_ref().and_then(|g| g.as_ref().ok()), c, &plan),
        };
        hang::unwatch();
        match outcome {
            Ok(o) => {
                eprintln!(
                    "{what}: {:.0} requests/s, p99 {} us",
                    rate(&o),
                    o.p99_ns / 1000
                );
                outcomes.push(o);
            }
            Err(why) => {
                eprintln!("{what}: failed: {why}");
                *slot = Err(why);
            }
        }
        Ok(())
    })?;
    let plot_dir = if common.write_docs {
        crate::docs::results_dir()
    } else {
        std::env::temp_dir()
    };
    Ok(report(&plan, &found, &plot_dir))
}

/// Requests per second of one outcome.
fn rate(o: &Outcome) -> f64 {
    o.requests as f64 / (o.window_ns.max(1) as f64 / 1e9)
}

/// Server CPU ns per request of one outcome.
fn cpu_per_request(o: &Outcome) -> Option<f64> {
    o.server_cpu_ns
        .map(|ns| ns as f64 / o.requests.max(1) as f64)
}

/// The report: requests/s, latency, CPU per request and kernel threads,
/// each a section with ratios to Go and Tokio, and the goal lines; the plot
/// drawn into `plot_dir`.
pub fn report(plan: &Plan, found: &Found, plot_dir: &Path) -> Report {
    type Pick = fn(&Outcome) -> Option<f64>;
    let table = |quantity: &str, unit: Unit, pick: Pick, extra: Option<(&'static str, Pick)>| {
        let mut rows = Vec::new();
        for &c in &plan.connections {
            for &s in &plan.systems {
                let mut r = row(found, quantity, c, s, unit, pick);
                if let Some((key, pick)) = extra
                    && let Some(x) = median_of(found, c, s, pick)
                {
                    r.extra.push((key, x));
                }
                rows.push(r);
            }
        }
        rows
    };
    let rates = table("", RATE, |o| Some(rate(o)), None);
    let latency = table(
        "p99 ",
        Unit::Ns,
        |o| Some(o.p99_ns as f64),
        Some(("p50 ns", |o| Some(o.p50_ns as f64))),
    );
    let cpu = table("CPU/request ", Unit::Ns, cpu_per_request, None);
    let threads = table(
        "threads ",
        Unit::Count,
        |o| o.server_threads.map(|t| t as f64),
        None,
    );
    let ratios = || {
        vec![
            Ratio::to_system("vs go", System::Go.label()),
            Ratio::to_system("vs tokio", System::Tokio.label()),
        ]
    };
    let plot_note = draw(&plot_dir.join("net-requests.png"), &rates);
    let rate_notes = format!(
        "{}{plot_note}",
        goals(&rates, "requests/s", |f, peer| f >= peer, ">=")
    );
    Report {
        doc: EXPERIMENT,
        title: format!(
            "net: echo of 64-byte messages, closed loop, medians of {} runs \
             ({} ms warm-up, {} ms window each)",
            plan.runs,
            plan.warmup.as_millis(),
            plan.window.as_millis()
        ),
        sections: vec![
            Section {
                title: "requests/s (echoes completed in the window, all connections)".into(),
                rows: rates,
                ratios: ratios(),
                notes: rate_notes,
                ..Section::default()
            },
            Section {
                title: "p99 latency, ns (request sent to its echo's last byte read; p50 beside)"
                    .into(),
                notes: goals(&latency, "p99 latency", |f, peer| f <= peer, "<="),
                rows: latency,
                ratios: ratios(),
                ..Section::default()
            },
            Section {
                title: "server CPU per request, ns (utime + stime over the window)".into(),
                rows: cpu,
                ratios: ratios(),
                ..Section::default()
            },
            Section {
                title: "server kernel threads (the most seen, sampled every 10 ms)".into(),
                notes: thread_goals(&threads),
                rows: threads,
                ratios: Vec::new(),
                ..Section::default()
            },
        ],
    }
}

/// The median over the runs of `pick` at `c` for `system`.
fn median_of(
    found: &Found,
    c: usize,
    system: System,
    pick: fn(&Outcome) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = found
        .get(&(c, system))?
        .as_ref()
        .ok()?
        .iter()
        .filter_map(pick)
        .collect();
    Stats::from_samples(&values).map(|s| s.median)
}

/// The row of `system` at `c` for `quantity` (the case's prefix, so that
/// a JSON line names what it holds): `pick` of each outcome, or absent.
fn row(
    found: &Found,
    quantity: &str,
    c: usize,
    system: System,
    unit: Unit,
    pick: fn(&Outcome) -> Option<f64>,
) -> Row {
    let (case, label) = (format!("{quantity}{}", case(c)), system.label());
    match found.get(&(c, system)) {
        Some(Ok(outcomes)) => {
            let values: Option<Vec<f64>> = outcomes.iter().map(pick).collect();
            let items = outcomes.last().map_or(0, |o| o.requests);
            match values {
                Some(v) if !v.is_empty() => Row::new(EXPERIMENT, case, label, unit, v, items),
                _ => Row::absent(EXPERIMENT, case, label, unit, "not measured"),
            }
        }
        Some(Err(why)) => Row::absent(EXPERIMENT, case, label, unit, why.clone()),
        None => Row::absent(EXPERIMENT, case, label, unit, "not run"),
    }
}

/// The `C=...` part of a row's case.
fn connections_of(case: &str) -> &str {
    case.rsplit(' ').next().unwrap_or(case)
}

/// One goal line per (case, peer): ferry's median over the peer's, met
/// when `met(ferry, peer)`.
fn goals(rows: &[Row], what: &str, met: fn(f64, f64) -> bool, sign: &str) -> String {
    let mut out = String::new();
    let mut cases: Vec<&str> = rows.iter().map(|r| r.case.as_str()).collect();
    cases.dedup();
    let ferry = System::Ferry.label();
    for case in cases {
        for peer in [System::Go.label(), System::Tokio.label()] {
            let has = |system: &str| rows.iter().any(|r| r.case == case && r.system == system);
            if !has(peer) || !has(ferry) {
                continue;
            }
            let verdict = ratio_verdict(
                row_median(rows, case, ferry),
                row_median(rows, case, peer),
                met,
            );
            let c = connections_of(case);
            let _ = writeln!(out, "goal: {what}, {c}: {ferry} {sign} {peer}: {verdict}");
        }
    }
    out
}

/// One goal line per case: ferry's most kernel threads at most
/// [`PROCESSORS`] + [`THREAD_SLACK`].
fn thread_goals(rows: &[Row]) -> String {
    let bound = PROCESSORS as u64 + THREAD_SLACK;
    let mut out = String::new();
    for r in rows.iter().filter(|r| r.system == System::Ferry.label()) {
        let verdict = match r.median() {
            Some(t) => format!(
                "{t:.0} ({})",
                if t <= bound as f64 { "met" } else { "not met" }
            ),
            None => "not measured (not met)".to_owned(),
        };
        let _ = writeln!(
            out,
            "goal: kernel threads, {}: {} <= processors + {THREAD_SLACK} = {bound}: {verdict}",
            connections_of(&r.case),
            r.system
        );
    }
    out
}

/// Draws requests/s against log10 C, a line per system, into `path`; a
/// note saying where.
fn draw(path: &Path, rates: &[Row]) -> String {
    const COLORS: [(RGBColor, &str); 3] = [
        (RGBColor(31, 119, 180), "blue"),
        (RGBColor(214, 39, 40), "red"),
        (RGBColor(44, 160, 44), "green"),
    ];
    let mut series = Vec::new();
    for (system, (color, color_name)) in SYSTEMS.into_iter().zip(COLORS) {
        let points: Vec<(f64, f64)> = rates
            .iter()
            .filter(|r| r.system == system.label())
            .filter_map(|r| {
                let c: f64 = r
                    .case
                    .strip_prefix("C=")?
                    .replace('k', "000")
                    .parse()
                    .ok()?;
                Some((c.log10(), r.median()?))
            })
            .collect();
        if !points.is_empty() {
            series.push(plot::Series {
                name: system.label().into(),
                color,
                color_name,
                points,
            });
        }
    }
    let labels = plot::Labels {
        title: "TCP echo, 64-byte messages, closed loop: requests/s against connections",
        x: "connections C, log10 (0 = 1, 4 = 10,000)",
        y: "requests/s (log scale)",
        y_format: &plot::fmt_rate,
    };
    plot::caption(
        path,
        &labels,
        &series,
        "x = log10 C, y log scale",
        "x = log10 C from 0 to 4, y on a log scale, a grey line at each power of ten",
    )
}

#[cfg(test)]
mod tests;
