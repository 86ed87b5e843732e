//! `ferry`: the command of the ferry runtime.
//!
//! Each subcommand is a module with a `clap::Args` struct and a `run`
//! function, and a variant of [`Command`]. Today there is `tour`; `top`,
//! the live view of every ferry process ([`top`]); the processor
//! allocation daemon `allocd` ([`allocd`], with the hidden `alloc-probe`
//! its tests run); and the hidden `serve` that the tour starts as its
//! other processes (the echo of its `rpc` stop, the chain interface of its
//! `migrating` stop, [`chain`], the typed interface of its `grpc` stop,
//! [`greeter`], served locally and over gRPC at once). `bench` and `sim`
//! come later. What
//! subcommands share
//! lives in [`measure`] (repeated runs, medians, CPU pinning) and [`report`]
//! (tables, JSON lines).
//!
//! The library crates must not depend on this one (nor on clap or serde).

mod allocd;
mod chain;
mod greeter;
mod measure;
mod report;
mod serve;
mod top;
mod tour;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ferry: user-level threads that cost a few procedure calls.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// A short guided tour of what ferry can do, measured beside std threads
    Tour(tour::Args),
    /// Serves the tour's interfaces until killed (the tour's other processes)
    #[command(hide = true)]
    Serve(serve::Args),
    /// A live view of every ferry process of the user (--once --json: one snapshot)
    #[command(long_about = top::LONG_ABOUT)]
    Top(top::Args),
    /// The processor allocation daemon: shares the cores among ferry processes
    Allocd(allocd::Args),
    /// A busy ferry process that reports its processors (for allocd's tests)
    #[command(hide = true)]
    AllocProbe(allocd::probe::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Tour(args) => tour::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Top(args) => top::run(args),
        Command::Allocd(args) => allocd::run(args),
        Command::AllocProbe(args) => allocd::probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`ferry tour --json | head`): not our error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry: error: {e}");
            ExitCode::FAILURE
        }
    }
}
