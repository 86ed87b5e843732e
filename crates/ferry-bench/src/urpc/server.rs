//! The server process's side: `ferry-bench urpc-serve` ([`ServeArgs`]),
//! started by [`super::child`], never by hand. It pins itself, takes the
//! descriptors its parent kept open for it, sets up its system's server,
//! writes one ready byte to stdout and serves until told to stop.
//!
//! This module owns that entry point; the loops are [`super::shm`]'s,
//! [`super::stream`]'s, [`super::iceoryx`]'s and [`super::ferry`]'s.

use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use super::sys;
use super::systems::System;
use super::{ferry, iceoryx, shm, stream};
use crate::affinity;
use crate::common::Common;
use crate::error::Error;

/// Arguments of the hidden `urpc-serve` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: Common,
    /// Which system to serve (`spin-floor`, `unix-socket`, `pipe`,
    /// `futex-shm`, `iceoryx2`, `ferry`).
    #[arg(long)]
    pub system: String,
    /// Bytes of arguments and of results of every call.
    #[arg(long)]
    pub size: usize,
    /// The CPU to pin to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Descriptors the parent kept open for this process, in the order the
    /// system needs them.
    #[arg(long = "fd")]
    pub fds: Vec<i32>,
    /// The iceoryx2 service name, or the ferry interface name.
    #[arg(long)]
    pub name: Option<String>,
    /// The ferry runtime directory.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

/// Runs the server; failure is printed on stderr (which the parent
/// shares) and is the exit status.
pub fn serve_main(args: &ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench urpc-serve ({}): {e}", args.system);
            ExitCode::FAILURE
        }
    }
}

/// Says ready to the parent (a server process of `urpc` or `migrating`).
pub(crate) fn ready() -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(b"R")
        .and_then(|()| out.flush())
        .map_err(|e| Error(format!("writing the ready byte: {e}")))
}

fn serve(a: &ServeArgs) -> Result<(), Error> {
    affinity::pin_or_warn(a.cpu, "urpc server");
    if a.system == ferry::SYSTEM {
        let (Some(dir), Some(name)) = (&a.dir, &a.name) else {
            return Err(Error("--dir and --name are needed".into()));
        };
        return ferry::serve(dir, name);
    }
    let system = System::from_arg(&a.system)?;
    let want = match system {
        System::SpinFloor | System::FutexShm | System::UnixSocket => 1,
        System::Pipe => 2,
        System::Iceoryx2 => 0,
    };
    if a.fds.len() != want {
        return Err(Error(format!(
            "{} descriptors given, {want} needed",
            a.fds.len()
        )));
    }
    let mut fds = Vec::new();
    for &fd in &a.fds {
        fds.push(sys::inherited(fd).map_err(|e| Error(e.to_string()))?);
    }
    let mut fds = fds.into_iter();
    let mut next = move || fds.next().expect("counted above");
    match system {
        System::SpinFloor | System::FutexShm => {
            let kind = if system == System::SpinFloor {
                shm::Kind::Spin
            } else {
                shm::Kind::Futex
            };
            let shared = shm::open(next(), a.size)?;
            ready()?;
            shm::serve(kind, shared, a.size)
        }
        System::UnixSocket => {
            let s = UnixStream::from(next());
            ready()?;
            stream::serve(&s, &s, a.size)
        }
        System::Pipe => {
            let (rx, tx) = (File::from(next()), File::from(next()));
            ready()?;
            stream::serve(rx, tx, a.size)
        }
        System::Iceoryx2 => {
            let name = a
                .name
                .as_deref()
                .ok_or_else(|| Error("--name is needed".into()))?;
            let server = iceoryx::Server::new(name, a.size)?;
            ready()?;
            server.serve()
        }
    }
}
