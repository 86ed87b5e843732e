//! `ferry-bench`: the benchmark driver of the ferry runtime.
//!
//! Each experiment is a subcommand with its own module (`queues` →
//! [`queues`]). What experiments share lives in [`measure`] (summarising
//! runs, start barriers), [`report`] (tables and JSON lines), [`affinity`]
//! (CPU pinning) and [`machine`] (how busy the rest of the machine was).
//!
//! To add an experiment: a module with a `clap::Args` struct and a `run`
//! function, and a variant of [`Command`].

mod affinity;
mod machine;
mod measure;
mod queues;
mod report;
mod switch;
mod threads;
mod upcalls;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Benchmarks for the ferry runtime.
#[derive(Debug, Parser)]
#[command(name = "ferry-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The experiments.
#[derive(Debug, Subcommand)]
enum Command {
    /// ns per push+pop of a u64 through ferry's queues and peers (crossbeam,
    /// std), on one thread and across two pinned cores
    Queues(queues::Args),
    /// ns per one-way user-level context switch: ferry's switch, variants of it, corosensei
    Switch(switch::Args),
    /// ns per thread operation (URPC Table I, Synthesis Table 3): ferry
    /// against std::thread, Tokio and Go
    Threads(threads::Args),
    /// Scheduler activations: event latencies (004 Table 1), a ping-pong
    /// under processor disruptions (004 Figure 2, plotted to
    /// docs/results/upcalls-figure2.png), partial against full context
    /// switch (Synthesis Table 4)
    Upcalls(upcalls::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Queues(args) => queues::run(args),
        Command::Switch(args) => return switch::main(args),
        Command::Threads(args) => return threads::main(args),
        Command::Upcalls(args) => return upcalls::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
