//! 001 Figures 3 and 4: latency and throughput of null calls against the
//! number T of client threads, with C = 1 client processor and S = 1
//! server processor (C + S = 2, the cores here).
//!
//! One run: a ferry server process (one processor) and a client runtime
//! of one processor; for each T, T ferry threads on the client's
//! processor each make null calls back to back through one shared
//! `Client` (so up to T calls are in flight on the channel). A plain
//! kernel thread keeps time: it lets the calls run untimed for the
//! warm-up, opens the timed window, closes it after the timed part; a
//! call is counted if it returns inside the window. Throughput is the
//! calls counted over the window; latency is the mean round trip a thread
//! sees, T x window / calls (each thread is always in a call).
//!
//! `pipelined T=n` names the same C = S = 1 setup with n threads: while
//! one thread's call is in the server, another's is being made or
//! answered on the client, so the two processors work as a two-stage
//! pipeline (the paper's T = 2 case: 1.73x the calls per second of T = 1).
//!
//! This module owns the sweep, its rows and its plots.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use plotters::style::RGBColor;

use super::ferry::{self, OP_ECHO};
use crate::error::Error;
use crate::plot;
use crate::report::Section;
use crate::row::{Row, Unit};

/// The thread counts T swept.
pub const THREADS: std::ops::RangeInclusive<usize> = 1..=16;

/// The system name of every row: the processors of each side.
pub const SETUP: &str = "ferry C=1 S=1";

/// The unit of throughput rows.
pub const RATE: Unit = Unit::Rate("calls/s");

const WARM: u32 = 0;
const TIMED: u32 = 1;
const STOP: u32 = 2;

/// One point of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Client threads.
    pub threads: usize,
    /// Calls that returned inside the window.
    pub calls: u64,
    /// The window, in ns.
    pub window_ns: f64,
}

impl Point {
    /// Mean round trip a thread sees, ns: T x window / calls.
    pub fn latency_ns(&self) -> f64 {
        self.threads as f64 * self.window_ns / self.calls.max(1) as f64
    }

    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.calls as f64 * 1e9 / self.window_ns
    }
}

/// The order of the T values in run `round`: rotated by the round, so that
/// no T always comes first after the server starts.
pub fn order(round: u32) -> Vec<usize> {
    let all: Vec<usize> = THREADS.collect();
    let k = round as usize % all.len();
    all[k..].iter().chain(&all[..k]).copied().collect()
}

/// One run: every T in `order`, each for `warmup` then `timed`.
pub fn run_once(
    order: Vec<usize>,
    warmup: Duration,
    timed: Duration,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Vec<Point>, Error> {
    ferry::with_server(cpus, 1, move |client, _| {
        let mut points = Vec::new();
        for threads in order {
            let phase = Arc::new(AtomicU32::new(WARM));
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let c = client.clone();
                    let phase = Arc::clone(&phase);
                    ::ferry::spawn(move || -> Result<u64, Error> {
                        let mut n = 0;
                        loop {
                            c.call(OP_ECHO, &[])
                                .map_err(|e| Error(format!("ferry call: {e}")))?;
                            match phase.load(Ordering::Acquire) {
                                WARM => {}
                                TIMED => n += 1,
                                _ => return Ok(n),
                            }
                        }
                    })
                })
                .collect();
            let keeper_phase = Arc::clone(&phase);
            let keeper = std::thread::spawn(move || {
                std::thread::sleep(warmup);
                keeper_phase.store(TIMED, Ordering::Release);
                let start = Instant::now();
                std::thread::sleep(timed);
                let window = start.elapsed();
                keeper_phase.store(STOP, Ordering::Release);
                window
            });
            let mut calls = 0;
            let mut failed = None;
            for w in workers {
                match w.join() {
                    Ok(Ok(n)) => calls += n,
                    Ok(Err(e)) => failed = Some(e),
                    Err(_) => failed = Some(Error("a calling thread panicked".into())),
                }
                // A failed thread returned early: stop the others.
                if failed.is_some() {
                    phase.store(STOP, Ordering::Release);
                }
            }
            let window = keeper
                .join()
                .map_err(|_| Error("the time keeper panicked".into()))?;
            if let Some(e) = failed {
                return Err(e);
            }
            points.push(Point {
                threads,
                calls,
                window_ns: window.as_nanos() as f64,
            });
        }
        Ok(points)
    })
}

/// The samples per T over the runs: (latency ns, calls/s, last calls).
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    /// Per T (index T-1): latencies, rates, calls of the last run.
    pub by_t: Vec<(Vec<f64>, Vec<f64>, u64)>,
    /// Runs that failed, and why.
    pub failures: Vec<String>,
}

impl Sweep {
    /// An empty sweep over [`THREADS`].
    pub fn new() -> Sweep {
        Sweep {
            by_t: vec![Default::default(); *THREADS.end()],
            failures: Vec::new(),
        }
    }

    /// Adds one run's points.
    pub fn add(&mut self, points: &[Point]) {
        for p in points {
            if let Some((lat, rate, calls)) = self.by_t.get_mut(p.threads - 1) {
                lat.push(p.latency_ns());
                rate.push(p.rate());
                *calls = p.calls;
            }
        }
    }
}

/// The case name of T threads in the figures.
pub fn case(t: usize) -> String {
    format!("T={t}")
}

/// The case name of the pipelined rows.
pub fn pipelined(t: usize) -> String {
    format!("pipelined T={t}")
}

fn row(case: String, unit: Unit, samples: &[f64], calls: u64, why: &str) -> Row {
    if samples.is_empty() {
        Row::absent(super::EXPERIMENT, case, SETUP, unit, why)
    } else {
        Row::new(
            super::EXPERIMENT,
            case,
            SETUP,
            unit,
            samples.to_vec(),
            calls,
        )
    }
}

/// The sections: Figure 3 (latency), Figure 4 (throughput) and the
/// pipelined rows; plots drawn into `dir`.
pub fn sections(sweep: &Sweep, dir: &Path) -> Vec<Section> {
    let why = sweep.failures.first().map_or("no runs", String::as_str);
    let mut lat_rows = Vec::new();
    let mut rate_rows = Vec::new();
    for (i, (lat, rate, calls)) in sweep.by_t.iter().enumerate() {
        lat_rows.push(row(case(i + 1), Unit::Ns, lat, *calls, why));
        rate_rows.push(row(case(i + 1), RATE, rate, *calls, why));
    }
    let mut pipe_rows = Vec::new();
    for t in [1, 2] {
        let (lat, rate, calls) = &sweep.by_t[t - 1];
        pipe_rows.push(row(pipelined(t), RATE, rate, *calls, why));
        pipe_rows.push(row(pipelined(t), Unit::Ns, lat, *calls, why));
    }
    let mut failed = String::new();
    for f in &sweep.failures {
        let _ = writeln!(failed, "failed run: {f}");
    }
    let lat_note = draw(
        &dir.join("urpc-figure3.png"),
        "null call latency against client threads T, C=1 S=1 (001 Figure 3)",
        "mean round trip per call (ns, log scale)",
        &lat_rows,
        &|y| format!("{y:.0}"),
    );
    let rate_note = draw(
        &dir.join("urpc-figure4.png"),
        "null call throughput against client threads T, C=1 S=1 (001 Figure 4)",
        "calls per second (log scale)",
        &rate_rows,
        &plot::fmt_rate,
    );
    vec![
        Section {
            title: "Figure 3 (001): null call latency against T client threads, C=1 client \
                    processor, S=1 server processor (mean round trip per call, ns)"
                .to_owned(),
            headers: ("threads", "setup"),
            rows: lat_rows,
            ratios: Vec::new(),
            notes: format!("{lat_note}{failed}"),
        },
        Section {
            title: "Figure 4 (001): null call throughput against T client threads, C=1, S=1 \
                    (calls per second, all threads)"
                .to_owned(),
            headers: ("threads", "setup"),
            rows: rate_rows,
            ratios: Vec::new(),
            notes: rate_note,
        },
        Section {
            title: "Pipelined calls, C=1, S=1: n client threads on the one client processor, \
                    each calling back to back (the T=1 and T=2 points above)"
                .to_owned(),
            headers: ("case", "setup"),
            rows: pipe_rows,
            ratios: Vec::new(),
            notes: String::new(),
        },
    ]
}

/// Draws one figure's rows (x = T) into `path`; a note saying where.
fn draw(path: &Path, title: &str, y: &str, rows: &[Row], fmt: &dyn Fn(&f64) -> String) -> String {
    let points: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some(((i + 1) as f64, r.median()?)))
        .collect();
    if points.is_empty() {
        return "plot: not drawn (no points)\n".to_owned();
    }
    let series = [plot::Series {
        name: SETUP.into(),
        color: RGBColor(31, 119, 180),
        color_name: "blue",
        points,
    }];
    let labels = plot::Labels {
        title,
        x: "client threads T",
        y,
        y_format: fmt,
    };
    // Where the page lives, said relative to the workspace.
    let shown = path
        .strip_prefix(crate::docs::workspace_root())
        .unwrap_or(path)
        .display();
    match plot::log_y_lines(path, &labels, &series) {
        Ok(true) => format!("plot: {shown} (x = T, y log scale)\n"),
        Ok(false) => format!(
            "plot: {shown} drawn WITHOUT text (no font found): x = T from 0 to 16, y on a log \
             scale, a grey line at each power of ten, blue = {SETUP}\n"
        ),
        Err(e) => format!("plot: not written: {e}\n"),
    }
}

/// The goal line's ratio: T=2 throughput over T=1, and whether >= 1.7.
pub fn pipeline_ratio(t1: f64, t2: f64) -> (f64, bool) {
    let r = t2 / t1;
    (r, r >= 1.7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_and_rate_of_a_point() {
        let p = Point {
            threads: 2,
            calls: 1000,
            window_ns: 1e6,
        };
        assert_eq!(p.latency_ns(), 2000.0);
        assert_eq!(p.rate(), 1e6);
    }

    #[test]
    fn orders_rotate_and_cover_every_t() {
        assert_eq!(order(0), THREADS.collect::<Vec<_>>());
        let o = order(3);
        assert_eq!(o[0], 4);
        assert_eq!(o.len(), 16);
        let mut sorted = o.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, THREADS.collect::<Vec<_>>());
        assert_eq!(order(16), order(0));
    }

    #[test]
    fn sweeps_gather_rows_and_pipelined_rows_repeat_t1_t2() {
        let mut s = Sweep::new();
        let pt = |threads, calls| Point {
            threads,
            calls,
            window_ns: 1e9,
        };
        s.add(&[pt(1, 100), pt(2, 180), pt(16, 200)]);
        s.add(&[pt(2, 170)]);
        let dir = std::env::temp_dir().join(format!("urpc-fig-test-{}", std::process::id()));
        let secs = sections(&s, &dir);
        assert_eq!(secs.len(), 3);
        assert_eq!(secs[0].rows.len(), 16);
        assert_eq!(secs[1].rows[1].median(), Some(175.0));
        assert_eq!(secs[0].rows[0].median(), Some(1e7));
        assert_eq!(secs[0].rows[2].absent_reason(), Some("no runs"));
        let p = &secs[2].rows;
        assert_eq!(
            (p[0].case.as_str(), p[0].median()),
            ("pipelined T=1", Some(100.0))
        );
        assert_eq!(
            (p[2].case.as_str(), p[2].median()),
            ("pipelined T=2", Some(175.0))
        );
        assert_eq!(p[2].unit, RATE);
        assert!(dir.join("urpc-figure3.png").exists());
        assert!(dir.join("urpc-figure4.png").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_pipeline_goal_is_met_at_1_7() {
        assert_eq!(pipeline_ratio(100.0, 170.0), (1.7, true));
        assert!(!pipeline_ratio(100.0, 169.0).1);
    }
}
