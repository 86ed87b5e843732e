//! The echo servers of `net` written in Rust, run in a process of their
//! own by the hidden `net-serve` subcommand ([`ServeArgs`]): it takes the
//! listening socket its parent made (backlog [`super::BACKLOG`]) and left
//! open across exec, raises its descriptor limit, writes one ready byte to
//! stdout and serves until it is killed.
//!
//! | system | per connection | runtime |
//! |--------|----------------|---------|
//! | `ferry` | a ferry thread (`ferry::thread::Builder::spawn`) reading and writing a `ferry::net::TcpStream` | `ferry::Runtime` with [`super::PROCESSORS`] processors, other settings default |
//! | `tokio` | a task (`tokio::spawn`) on a `tokio::net::TcpStream` with `AsyncReadExt`/`AsyncWriteExt` | multi-thread runtime of [`super::PROCESSORS`] workers |
//!
//! Every server echoes what one read returns with one `write_all`, from a
//! 4 KiB buffer, with `TCP_NODELAY` set (Go's default). Go's server is
//! `crates/ferry-bench/go/echo/`, the same loop.
//!
//! This module owns the servers and the entry point; it measures nothing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::process::ExitCode;

use super::procfs;
use super::systems::System;
use crate::common::Common;
use crate::error::Error;

/// Bytes each server reads at most at once.
const BUFFER: usize = 4096;

/// Arguments of the hidden `net-serve` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: Common,
    /// Which server (`ferry`, `tokio`; Go's is a program of its own).
    #[arg(long)]
    pub system: String,
    /// The listening socket the parent left open for this process.
    #[arg(long)]
    pub fd: i32,
}

/// Runs the server; failure is printed on stderr (which the parent
/// shares) and is the exit status.
pub fn serve_main(args: &ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench net-serve ({}): {e}", args.system);
            ExitCode::FAILURE
        }
    }
}

fn serve(args: &ServeArgs) -> Result<(), Error> {
    let system = System::from_arg(&args.system)?;
    procfs::raise_nofile()?;
    let fd: OwnedFd = crate::urpc::sys::inherited(args.fd).map_err(|e| Error(e.to_string()))?;
    let listener = TcpListener::from(fd);
    match system {
        System::Ferry => ferry(listener, super::PROCESSORS),
        System::Tokio => tokio(listener, super::PROCESSORS),
        System::Go => Err(Error("Go's server is crates/ferry-bench/go/echo".into())),
    }
}

/// Says ready to the parent.
fn ready() -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(b"R")
        .and_then(|()| out.flush())
        .map_err(|e| Error(format!("writing the ready byte: {e}")))
}

/// ferry's server: a ferry thread per connection on `processors`
/// processors; returns when `accept` fails (the listener was shut down).
pub fn ferry(listener: TcpListener, processors: usize) -> Result<(), Error> {
    ferry::Runtime::builder()
        .processors(processors)
        .run(move || {
            let listener = ferry::net::TcpListener::from_std(listener);
            ready()?;
            loop {
                let Ok((stream, _)) = listener.accept() else {
                    return Ok(());
                };
                stream
                    .set_nodelay(true)
                    .map_err(|e| Error(format!("TCP_NODELAY: {e}")))?;
                // Detached: the thread ends with its connection.
                ferry::thread::Builder::new()
                    .spawn(move || echo(stream))
                    .map_err(|e| Error(format!("spawning a connection's thread: {e}")))?;
            }
        })
        .map_err(|e| Error(format!("ferry runtime: {e}")))?
}

/// Echoes until the peer closes or an error.
fn echo(mut stream: ferry::net::TcpStream) {
    let mut buf = [0u8; BUFFER];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 || stream.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// Tokio's server: a task per connection on `workers` workers.
pub fn tokio(listener: TcpListener, workers: usize) -> Result<(), Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    listener
        .set_nonblocking(true)
        .map_err(|e| Error(format!("non-blocking listener: {e}")))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_io()
        .build()
        .map_err(|e| Error(format!("tokio runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| Error(format!("tokio listener: {e}")))?;
        ready()?;
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return Ok(());
            };
            stream
                .set_nodelay(true)
                .map_err(|e| Error(format!("TCP_NODELAY: {e}")))?;
            tokio::spawn(async move {
                let mut buf = [0u8; BUFFER];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    })
}
