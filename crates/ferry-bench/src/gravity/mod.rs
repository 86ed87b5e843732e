//! `ferry-bench gravity`: 004's Figure 3 on this machine. Several Gravity
//! jobs (`examples/gravity`, a Barnes–Hut simulation whose threads meet
//! at a barrier between phases) start at once, each wanting every core;
//! the mean time a job takes to finish, for 1 to 4 jobs, under four
//! systems:
//!
//! | system | what runs the jobs' workers |
//! |--------|------------------------------|
//! | `oblivious` | ferry threads; each job runs its own processors on every core, no daemon (`FERRY_ALLOCD=off`): the kernel time-slices the jobs' processors obliviously |
//! | `pthreads` | the same program's plain-thread build (`--threads std`) |
//! | `allocd equipartition` | ferry threads; a `ferry allocd --policy equipartition` daemon space-shares the cores (004 §5.3's policy) |
//! | `allocd dynamic` | the same with the Dynamic policy (004 §3) |
//!
//! This module owns the plan, the rows, the goals and the plot; how a
//! case's processes are started, timed and reaped is [`jobs`]'s. It must
//! not measure anything but whole jobs: a job's time is from its spawn to
//! its exit, as the paper's.

mod jobs;

use std::path::Path;

use clap::Args as ClapArgs;
use plotters::style::RGBColor;

use crate::common::{Common, Defaults};
use crate::plot;
use crate::report::{Error, Ratio, Report, Section, row_median};
use crate::row::{Row, Unit};

pub use jobs::System;

/// The experiment's name in rows and its page's name.
pub const EXPERIMENT: &str = "gravity";

/// Runs of each case: 3 (each one a few seconds of every core).
const DEFAULTS: Defaults = Defaults {
    runs: 3,
    quick_runs: 3,
    min_runs: 3,
};

/// Arguments of `ferry-bench gravity`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// The most jobs at once (cases jobs=1..=N).
    #[arg(long, default_value_t = 4)]
    pub max_jobs: usize,
}

/// The size of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSize {
    /// Bodies simulated.
    pub bodies: u32,
    /// Time steps.
    pub steps: u32,
}

/// Job size without and with `--quick`.
const SIZES: (JobSize, JobSize) = (
    JobSize {
        bodies: 16384,
        steps: 20,
    },
    JobSize {
        bodies: 8192,
        steps: 10,
    },
);

/// Runs the experiment.
///
/// # Errors
/// If the programs cannot be built or a job fails.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let runs = common.runs(DEFAULTS)?;
    if !(1..=16).contains(&args.max_jobs) {
        return Err(Error(format!("--max-jobs {}: 1..=16", args.max_jobs)));
    }
    let size = if common.quick { SIZES.1 } else { SIZES.0 };
    let programs = jobs::Programs::build()?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut rows = Vec::new();
    for system in System::ALL {
        for n in 1..=args.max_jobs {
            let case = format!("jobs={n}");
            let mut samples = Vec::with_capacity(runs as usize);
            let mut failed = None;
            for run in 0..runs {
                eprintln!("gravity: {} {case}, run {}/{runs}", system.label(), run + 1);
                match programs.case(system, n, cores, size) {
                    Ok(mean) => samples.push(mean.as_nanos() as f64),
                    Err(why) => {
                        eprintln!("gravity: {} {case}: {why}", system.label());
                        failed = Some(why);
                        break;
                    }
                }
            }
            rows.push(match failed {
                None => Row::new(EXPERIMENT, case, system.label(), Unit::Ns, samples, 1),
                Some(why) => Row::absent(EXPERIMENT, case, system.label(), Unit::Ns, why),
            });
        }
    }
    let plot_dir = if common.write_docs {
        crate::docs::results_dir()
    } else {
        std::env::temp_dir()
    };
    let notes = format!(
        "{}{}",
        goals(&rows, args.max_jobs),
        draw(&plot_dir.join("gravity-jobs.png"), &rows)
    );
    let section = Section {
        title: format!(
            "Mean Gravity job time, ns (004 Figure 3): {} bodies, {} steps, each job wanting all \
             {cores} cores; medians of {runs} runs",
            size.bodies, size.steps
        ),
        headers: ("case", "system"),
        rows,
        ratios: vec![Ratio::to_system("vs oblivious", System::Oblivious.label())],
        notes,
    };
    Ok(Report::single(EXPERIMENT, section))
}

/// The page's goals: with two jobs or more, allocd's mean job time at
/// least 1.5x better than oblivious; with one, within 5% of it.
fn goals(rows: &[Row], max_jobs: usize) -> String {
    let mut out = String::new();
    let oblivious = System::Oblivious.label();
    for allocd in [System::Equipartition, System::Dynamic] {
        for n in 1..=max_jobs {
            let case = format!("jobs={n}");
            let (a, o) = (
                row_median(rows, &case, allocd.label()),
                row_median(rows, &case, oblivious),
            );
            let (goal, met) = match (a, o) {
                (Some(a), Some(o)) if n == 1 => ("within 5% of oblivious", Some(a <= o * 1.05)),
                (Some(a), Some(o)) => ("1.5x better than oblivious", Some(o >= a * 1.5)),
                _ if n == 1 => ("within 5% of oblivious", None),
                _ => ("1.5x better than oblivious", None),
            };
            let verdict = match (met, a, o) {
                (Some(m), Some(a), Some(o)) => {
                    format!("{} ({:.2}x)", if m { "met" } else { "MISSED" }, o / a)
                }
                _ => "not measured".to_owned(),
            };
            out.push_str(&format!(
                "goal {case}, {}: {goal}: {verdict}\n",
                allocd.label()
            ));
        }
    }
    out
}

/// Draws mean job time against jobs, a line per system; says where.
fn draw(path: &Path, rows: &[Row]) -> String {
    const COLORS: [(RGBColor, &str); 4] = [
        (RGBColor(200, 30, 30), "red"),
        (RGBColor(120, 120, 120), "grey"),
        (RGBColor(30, 90, 200), "blue"),
        (RGBColor(30, 150, 60), "green"),
    ];
    let mut series = Vec::new();
    for (system, (color, color_name)) in System::ALL.iter().zip(COLORS) {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.system == system.label())
            .filter_map(|r| {
                let n: f64 = r.case.strip_prefix("jobs=")?.parse().ok()?;
                Some((n, r.median()? / 1e9))
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
        title: "Gravity jobs at once: mean job time (004 Figure 3)",
        x: "concurrent jobs",
        y: "mean job time, s (log scale)",
        y_format: &|y| format!("{y:.1}"),
    };
    plot::caption(
        path,
        &labels,
        &series,
        "x = jobs, y log scale",
        "x = jobs, y on a log scale",
    )
}
