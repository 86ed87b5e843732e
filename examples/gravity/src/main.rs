//! The `gravity` command: one Gravity job of a given size and length, on
//! ferry threads or plain threads, reporting its elapsed time and energy
//! drift (as text, or as one JSON line for scripts).
//!
//! This file owns the command line only: parsing, running
//! [`gravity::simulate`] once, printing. It must not hold simulation code.
//!
//! ```sh
//! cargo run --release -p gravity -- --bodies 20000 --steps 10 --workers 2
//! cargo run --release -p gravity -- --threads std --json
//! ```

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use gravity::{Config, Ferry, Report, Std, Threads, simulate};

/// The kind of threads the workers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// User-level threads of a ferry runtime.
    Ferry,
    /// Plain kernel threads (std::thread).
    Std,
}

/// One Gravity job: a Barnes-Hut N-body simulation of a Plummer sphere.
#[derive(Debug, Parser)]
#[command(name = "gravity", version)]
struct Cli {
    /// Threads the workers run on.
    #[arg(long, value_enum, default_value_t = Kind::Ferry)]
    threads: Kind,
    /// Worker threads (default: the CPUs this process may use).
    #[arg(long)]
    workers: Option<usize>,
    /// Processors of the ferry runtime (default: the CPUs this process may
    /// use); ignored with --threads std.
    #[arg(long)]
    processors: Option<usize>,
    /// Bodies.
    #[arg(long, default_value_t = 16384)]
    bodies: usize,
    /// Time steps.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Opening angle (0: direct summation).
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Time step.
    #[arg(long, default_value_t = 1.0 / 128.0)]
    dt: f64,
    /// Plummer softening length.
    #[arg(long, default_value_t = 0.05)]
    softening: f64,
    /// Seed of the initial conditions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON line instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let workers = cli
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cfg = Config {
        bodies: cli.bodies,
        steps: cli.steps,
        workers,
        theta: cli.theta,
        dt: cli.dt,
        softening: cli.softening,
        seed: cli.seed,
    };
    let ran = match cli.threads {
        Kind::Ferry => run(
            &cfg,
            &Ferry {
                processors: cli.processors,
            },
        ),
        Kind::Std => run(&cfg, &Std),
    };
    match ran {
        Ok((kind, report)) => {
            print(&cli, &cfg, kind, &report);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gravity: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the job on threads of `kind`.
fn run<K: Threads>(cfg: &Config, kind: &K) -> Result<(&'static str, Report), gravity::Error> {
    Ok((kind.name(), simulate(cfg, kind)?))
}

/// Prints the report, as text or as one JSON line.
fn print(cli: &Cli, cfg: &Config, threads: &str, r: &Report) {
    if cli.json {
        let line = serde_json::json!({
            "bodies": cfg.bodies,
            "steps": cfg.steps,
            "workers": cfg.workers,
            "threads": threads,
            "theta": cfg.theta,
            "elapsed_s": r.elapsed.as_secs_f64(),
            "energy_start": r.start.energy(),
            "energy_end": r.end.energy(),
            "drift": r.drift(),
            "phase_s": r.phases.map(|d| d.as_secs_f64()),
        });
        println!("{line}");
    } else {
        println!(
            "gravity: {} bodies, {} steps, {} {} workers, theta {}: {:.3} s",
            cfg.bodies,
            cfg.steps,
            cfg.workers,
            threads,
            cfg.theta,
            r.elapsed.as_secs_f64()
        );
        println!(
            "energy {:.9} -> {:.9} (drift {:.2e})",
            r.start.energy(),
            r.end.energy(),
            r.drift()
        );
        let phases = r.phases.map(|d| format!("{:.3}", d.as_secs_f64()));
        println!(
            "phases 1-5 (s, worker 0, barrier waits included): {}",
            phases.join(" ")
        );
    }
}
