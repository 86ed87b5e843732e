//! The server process of a `migrating` run: this binary started again as
//! the hidden `migrating-serve` ([`ServeArgs`]) by [`spawn`], never by
//! hand. It pins itself, sets up its system's server, writes one ready
//! byte to stdout and serves until its stdin closes; failure is printed
//! on stderr (shared with the parent) and is its exit status.
//!
//! This module owns that entry point and its arguments; the servers are
//! [`super::served`]'s (ferry) and [`super::kernel`]'s (`kernel static`).
//! Starting, readiness and cleanup are `urpc`'s [`ServerProcess`].

use std::io::Read;
use std::os::fd::RawFd;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::kernel;
use super::proto::Burner;
use super::served;
use crate::affinity;
use crate::common::Common;
use crate::error::Error;
use crate::urpc::child::ServerProcess;
use crate::urpc::server::ready;
use crate::urpc::sys;

/// The hidden subcommand.
pub const SUBCOMMAND: &str = "migrating-serve";

/// The `kernel static` system's name (as a row and as `--system`).
pub const KERNEL_STATIC: &str = "kernel static";

/// Arguments of the hidden `migrating-serve` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: Common,
    /// `migrating`, `static` or `kernel static`.
    #[arg(long)]
    pub system: String,
    /// Measure the server-side path (ferry: `ServerBuilder::measure_path`;
    /// the kernel static server always measures it).
    #[arg(long)]
    pub measure_path: bool,
    /// The CPU to pin to.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// The kernel static server's end of its socket pair.
    #[arg(long)]
    pub fd: Option<i32>,
    /// The ferry interface name.
    #[arg(long)]
    pub name: Option<String>,
    /// The ferry runtime directory.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

/// The arguments every server process gets.
pub fn args(system: &str, measure: bool, cpu: Option<usize>) -> Vec<String> {
    let mut args = vec!["--system".to_owned(), system.to_owned()];
    if measure {
        args.push("--measure-path".to_owned());
    }
    if let Some(cpu) = cpu {
        args.extend(["--cpu".to_owned(), cpu.to_string()]);
    }
    args
}

/// Starts this binary as `ferry-bench migrating-serve ARGS`, keeping
/// `keep` open across exec.
///
/// # Errors
/// The executable is not found or does not start.
pub fn spawn(args: &[String], keep: &[RawFd]) -> Result<ServerProcess, Error> {
    let exe = std::env::current_exe().map_err(|e| Error(format!("own executable: {e}")))?;
    let mut all = vec![SUBCOMMAND.to_owned()];
    all.extend_from_slice(args);
    ServerProcess::spawn_program(&exe, &all, keep)
}

/// Runs the server; failure is printed and is the exit status.
pub fn serve_main(args: &ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench {SUBCOMMAND} ({}): {e}", args.system);
            ExitCode::FAILURE
        }
    }
}

fn serve(a: &ServeArgs) -> Result<(), Error> {
    affinity::pin_or_warn(a.cpu, "migrating server");
    if a.system == KERNEL_STATIC {
        let fd =
            a.fd.ok_or_else(|| Error("--fd is needed".into()))
                .and_then(|fd| sys::inherited(fd).map_err(|e| Error(format!("--fd {fd}: {e}"))))?;
        let server = kernel::Server::start(fd, Burner::calibrate())?;
        ready()?;
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        return server.stop();
    }
    let mode = served::mode_of(&a.system)?;
    let (Some(dir), Some(name)) = (&a.dir, &a.name) else {
        return Err(Error("--dir and --name are needed".into()));
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("migrating-stdin".into())
        .spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stopper.store(true, Ordering::Release);
        })
        .map_err(|e| Error(format!("stdin thread: {e}")))?;
    served::serve(dir, name, mode, a.measure_path, stop, ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_arguments_name_the_system_and_options() {
        assert_eq!(args("static", false, None), ["--system", "static"]);
        assert_eq!(
            args(KERNEL_STATIC, true, Some(3)),
            ["--system", "kernel static", "--measure-path", "--cpu", "3"]
        );
    }

    #[test]
    fn a_server_without_what_it_needs_refuses_to_start() {
        let base = ServeArgs {
            common: Common::default(),
            system: KERNEL_STATIC.into(),
            measure_path: false,
            cpu: None,
            fd: None,
            name: None,
            dir: None,
        };
        assert!(serve(&base).unwrap_err().0.contains("--fd"));
        let ferry = ServeArgs {
            system: "migrating".into(),
            ..base.clone()
        };
        assert!(serve(&ferry).unwrap_err().0.contains("--dir and --name"));
        let odd = ServeArgs {
            system: "dynamic".into(),
            ..base
        };
        assert!(serve(&odd).unwrap_err().0.contains("dynamic"));
    }
}
