//! `ferry allocd`: the processor allocation daemon (004 §3). It owns the
//! machine's cores (or the `--cores` given), registers ferry processes
//! through `allocd.sock` in the runtime directory, and tells each, through
//! its shared page, which cores it owns; each process runs as many
//! processors as it owns cores.
//!
//! This module owns the command line and the start: the policy named,
//! the cores, the directory, the log (`tracing`, to stderr) and the
//! refusal to start beside a live daemon. The decisions are `policy`'s
//! (pure functions), the loop over registrations, exits and ticks is
//! `daemon`'s. It must not touch a process other than through its page.

mod daemon;
pub mod policy;
pub mod probe;

use std::io;
use std::path::PathBuf;

use ferry::alloc::{CoreSet, Registrar};
use ferry::rpc::RuntimeDir;

pub use policy::Policy;

/// Options of `ferry allocd`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The allocation policy
    #[arg(long, value_enum, default_value = "dynamic")]
    pub policy: Policy,
    /// The runtime directory to listen in (default: the user's,
    /// `$XDG_RUNTIME_DIR/ferry`)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The cores to share, as a list such as `0-3,6` (default: every CPU
    /// in the daemon's affinity mask)
    #[arg(long)]
    pub cores: Option<CoreSet>,
}

/// Runs the daemon until `SIGTERM`, `SIGINT` or `SIGHUP` (it then removes
/// its socket and returns; its processes keep their cores), SIGKILL, or
/// its socket failing.
pub fn run(args: &Args) -> io::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
    let dir = match &args.dir {
        Some(path) => RuntimeDir::open(path, rustix::process::getuid().as_raw()),
        None => RuntimeDir::user(),
    }
    .map_err(io::Error::other)?;
    let cores = match args.cores {
        Some(c) => c,
        None => affinity_cores()?,
    };
    let registrar = match Registrar::bind_in(&dir) {
        Ok(r) => r,
        Err(ferry::rpc::Error::NameInUse) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "a daemon already answers at {}",
                    dir.path().join("allocd.sock").display()
                ),
            ));
        }
        Err(e) => return Err(io::Error::other(e)),
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&stop))?;
    }
    tracing::info!(
        "listening at {} policy={:?} cores={}",
        registrar.path().display(),
        args.policy,
        cores
    );
    daemon::Daemon::new(registrar, args.policy, cores).run(&stop)?;
    tracing::info!("stopping on a signal; the socket is removed");
    Ok(())
}

/// The CPUs of the daemon's affinity mask.
fn affinity_cores() -> io::Result<CoreSet> {
    let mask = rustix::thread::sched_getaffinity(None)?;
    Ok((0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| mask.is_set(c))
        .collect())
}
