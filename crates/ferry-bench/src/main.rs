//! `ferry-bench`: the benchmark driver of the ferry runtime.
//!
//! Each experiment is a subcommand with its own module folder (`queues` →
//! [`queues`]) whose entry is `run(&Common, &Args) -> Result<Report, Error>`:
//! it measures and hands back a [`report::Report`] of [`row::Row`]s, and
//! this file prints it (a table, or JSON lines with `--json`), reports how
//! busy the rest of the machine was, and with `--write-docs` rewrites the
//! experiment's results page ([`docs`]).
//!
//! What experiments share: [`common`] (the argument block), [`row`] (the
//! result row, its summary and JSON form), [`report`] (sections and the
//! table printer), [`measure`] (start barriers), [`affinity`] (CPU
//! pinning), [`machine`] (the machine and its noise), [`watchdog`]
//! (watching threads), [`plot`] (charts) and [`peers`] (the systems ferry
//! is compared with).
//!
//! To add an experiment: a module with a `clap::Args` struct that flattens
//! [`common::Common`], a `run` function of the shape above, a variant of
//! [`Command`], and a template in `templates/`.

mod affinity;
mod allocd;
mod common;
mod docs;
mod error;
mod gravity;
mod grpc;
mod machine;
mod measure;
mod migrating;
mod net;
mod peers;
mod plot;
mod queues;
mod report;
mod row;
mod scale;
mod streams;
mod switch;
mod thread_ops;
mod threads;
mod transport;
mod upcalls;
mod urpc;
mod watchdog;

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::common::Common;
use crate::machine::CpuSnapshot;

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
    /// std), on one thread and across two pinned cores [runs: 7, at least 5]
    Queues(queues::Args),
    /// ns per one-way user-level context switch: ferry's switch, variants of
    /// it, corosensei [runs: 7, at least 5]
    Switch(switch::Args),
    /// ns per thread operation (URPC Table I, Synthesis Table 3): ferry
    /// against std::thread, Tokio and Go; with --lang c, from C against
    /// pthreads [runs: 7, at least 5]
    Threads(threads::Args),
    /// Scheduler activations: event latencies (004 Table 1), a ping-pong
    /// under processor disruptions (004 Figure 2, plotted), partial against
    /// full context switch (Synthesis Table 4) [runs: 5, 3 with --quick]
    Upcalls(upcalls::Args),
    /// ns per thread to spawn N threads that block on one gate, and to wake
    /// and join them; resident bytes per blocked thread; ferry against Go
    /// and Tokio at N = 10k and 100k [runs: 7, at least 5]
    Scale(scale::Args),
    /// ns per cross-process round trip (URPC Table I): null call and
    /// calls of 32 B to 1 MB, against a spinning floor, a Unix socket,
    /// pipes, futexes in shared memory and iceoryx2 [runs: 7, at least 5]
    Urpc(urpc::Args),
    /// requests/s, p99 latency, server CPU per request and kernel threads
    /// of a TCP echo server under a closed-loop load of C = 1 to 10,000
    /// connections: ferry against Go and Tokio [runs: 3]
    Net(net::Args),
    /// ns per cross-process call served by a migrating activation, by a
    /// static pool of ferry service threads and by kernel threads on a
    /// Unix socket (000 Table 3): server-side path and round trip, null to
    /// 32 KB; a high-priority caller's p99 under load [runs: 7, at least 5]
    Migrating(migrating::Args),
    /// ns per write+read of 1 B, 1 KB, 4 KB by one thread through a ferry
    /// stream, a pipe and a Unix socket, and per open+close (002 Table 1
    /// rows 2-4, 6); MB/s between two threads on two cores [runs: 7, at
    /// least 5]
    Streams(streams::Args),
    /// Mean job time of 1-4 Gravity jobs at once (004 Figure 3): ferry
    /// oblivious, plain threads, and ferry under `ferry allocd` with
    /// equipartition and Dynamic [runs: 3]
    Gravity(gravity::Args),
    /// ns per round trip of a null call and a 1 KB call to one ferry
    /// interface: a local ferry call, the same interface over gRPC on
    /// loopback (ferry-grpc), and a plain tonic client and server with the
    /// same messages [runs: 7, at least 5]
    Grpc(grpc::Args),
    /// The server process of `migrating` (started by it, not by hand)
    #[command(name = "migrating-serve", hide = true)]
    MigratingServe(migrating::ServeArgs),
    /// The server process of `net` (started by it, not by hand)
    #[command(name = "net-serve", hide = true)]
    NetServe(net::ServeArgs),
    /// The load process of `net` (started by it, not by hand)
    #[command(name = "net-load", hide = true)]
    NetLoad(net::LoadArgs),
    /// The server process of `urpc` (started by it, not by hand)
    #[command(name = "urpc-serve", hide = true)]
    UrpcServe(urpc::ServeArgs),
    /// One ferry run of `scale`, in a process of its own (started by it,
    /// not by hand)
    #[command(name = "scale-ferry", hide = true)]
    ScaleFerry(scale::OnceArgs),
    /// One run of `streams`' adaptive-quantum experiment, in a process of
    /// its own (started by it, not by hand)
    #[command(name = "streams-adaptive", hide = true)]
    StreamsAdaptive(streams::adaptive::OnceArgs),
    /// The runtime of `upcalls`' daemon-ordered processor changes, in a
    /// process of its own (started by it, not by hand)
    #[command(name = "upcalls-ordered", hide = true)]
    UpcallsOrdered(upcalls::ordered::OnceArgs),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Queues(_) => "queues",
            Command::Switch(_) => "switch",
            Command::Threads(_) => "threads",
            Command::Scale(_) => "scale",
            Command::Upcalls(_) => "upcalls",
            Command::Urpc(_) => "urpc",
            Command::UrpcServe(_) => "urpc-serve",
            Command::Net(_) => "net",
            Command::NetServe(_) => "net-serve",
            Command::NetLoad(_) => "net-load",
            Command::ScaleFerry(_) => "scale-ferry",
            Command::StreamsAdaptive(_) => "streams-adaptive",
            Command::UpcallsOrdered(_) => "upcalls-ordered",
            Command::Migrating(_) => "migrating",
            Command::Streams(_) => "streams",
            Command::Gravity(_) => "gravity",
            Command::Grpc(_) => "grpc",
            Command::MigratingServe(_) => "migrating-serve",
        }
    }

    fn common(&self) -> &Common {
        match self {
            Command::Queues(a) => &a.common,
            Command::Switch(a) => &a.common,
            Command::Threads(a) => &a.common,
            Command::Scale(a) => &a.common,
            Command::Upcalls(a) => &a.common,
            Command::Urpc(a) => &a.common,
            Command::UrpcServe(a) => &a.common,
            Command::Net(a) => &a.common,
            Command::NetServe(a) => &a.common,
            Command::NetLoad(a) => &a.common,
            Command::ScaleFerry(a) => &a.common,
            Command::StreamsAdaptive(a) => &a.common,
            Command::UpcallsOrdered(a) => &a.common,
            Command::Migrating(a) => &a.common,
            Command::Streams(a) => &a.common,
            Command::Gravity(a) => &a.common,
            Command::Grpc(a) => &a.common,
            Command::MigratingServe(a) => &a.common,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::UrpcServe(args) => return urpc::serve_main(args),
        Command::NetServe(args) => return net::serve_main(args),
        Command::NetLoad(args) => return net::load_main(args),
        Command::ScaleFerry(args) => return scale::once_main(args),
        Command::StreamsAdaptive(args) => return streams::adaptive::once_main(args),
        Command::MigratingServe(args) => return migrating::serve_main(args),
        Command::UpcallsOrdered(args) => return upcalls::ordered::once_main(args),
        _ => {}
    }
    let (name, common) = (cli.command.name(), cli.command.common());
    let started = Instant::now();
    let before = CpuSnapshot::now();
    let result = match &cli.command {
        Command::Queues(args) => queues::run(common, args),
        Command::Switch(args) => switch::run(common, args),
        Command::Threads(args) => threads::run(common, args),
        Command::Scale(args) => scale::run(common, args),
        Command::Upcalls(args) => upcalls::run(common, args),
        Command::Urpc(args) => urpc::run(common, args),
        Command::Net(args) => net::run(common, args),
        Command::Migrating(args) => migrating::run(common, args),
        Command::Streams(args) => streams::run(common, args),
        Command::Gravity(args) => gravity::run(common, args),
        Command::Grpc(args) => grpc::run(common, args),
        Command::UrpcServe(args) => return urpc::serve_main(args),
        Command::NetServe(args) => return net::serve_main(args),
        Command::NetLoad(args) => return net::load_main(args),
        Command::ScaleFerry(args) => return scale::once_main(args),
        Command::StreamsAdaptive(args) => return streams::adaptive::once_main(args),
        Command::MigratingServe(args) => return migrating::serve_main(args),
        Command::UpcallsOrdered(args) => return upcalls::ordered::once_main(args),
    };
    let during = machine::interference_since(before);
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if common.json {
        print!("{}", report.json_lines());
        eprint!("{}", report.notes());
    } else {
        print!("{}", report.text());
    }
    eprintln!(
        "ferry-bench {name}: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    machine::report_interference(name, during);
    if common.write_docs {
        match docs::write(&report, &machine::describe(during)) {
            Ok(path) => eprintln!("ferry-bench {name}: wrote {}", path.display()),
            Err(e) => {
                eprintln!("ferry-bench: error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
