//! One run of `net`: a fresh listening socket (127.0.0.1, an ephemeral
//! port, backlog [`super::BACKLOG`]), a fresh server process serving it
//! (`net-serve`, or Go's program), a fresh load process (`net-load`), the
//! load's outcome read back, both processes ended.
//!
//! This module owns the processes of a run and its time limit: the server
//! must be ready within [`READY`], and the load must report within
//! [`Plan::limit`] or it is killed and the run failed. The server is
//! killed when the run ends (and dies with the thread that started it).
//! A run that failed says why, and whether the server had died.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::net::{AddressFamily, SocketType, bind, listen, socket_with};

use super::Plan;
use super::load::Outcome;
use super::systems::System;
use crate::peers::go::Program;
use crate::urpc::child::ServerProcess;

/// How long a server may take to say ready.
pub const READY: Duration = Duration::from_secs(10);

/// A listening TCP socket on 127.0.0.1 with `backlog`, close-on-exec
/// (the server's copy is kept open across its exec alone); and its address.
pub fn listener(backlog: i32) -> Result<(OwnedFd, SocketAddr), String> {
    let fd = socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("socket: {e}"))?;
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    bind(&fd, &any).map_err(|e| format!("bind: {e}"))?;
    listen(&fd, backlog).map_err(|e| format!("listen: {e}"))?;
    let listener = std::net::TcpListener::from(fd);
    let addr = listener
        .local_addr()
        .map_err(|e| format!("local address: {e}"))?;
    let fd = OwnedFd::from(listener);
    Ok((fd, addr))
}

/// One run of `system` with `connections`; `go` is Go's built server.
pub fn once(
    system: System,
    go: Option<&Program>,
    connections: usize,
    plan: &Plan,
) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let (fd, addr) = listener(super::BACKLOG)?;
    let raw = fd.as_raw_fd().to_string();
    let mut server = match (system, go) {
        (System::Go, Some(program)) => {
            ServerProcess::spawn_program(program.path(), &["-fd".into(), raw], &[fd.as_raw_fd()])
        }
        (System::Go, None) => return Err("Go's server was not built".into()),
        (System::Ferry | System::Tokio, _) => {
            let args: Vec<String> = vec![
                "net-serve".into(),
                "--system".into(),
                system.arg().into(),
                "--fd".into(),
                raw,
            ];
            ServerProcess::spawn_program(&exe, &args, &[fd.as_raw_fd()])
        }
    }
    .map_err(|e| e.0)?;
    drop(fd);
    server.wait_ready(READY).map_err(|e| e.0)?;
    let pid = server.id().ok_or("the server is gone")?;
    let outcome = load(&exe, addr, pid, connections, plan);
    match (outcome, server.exited()) {
        (Ok(o), None) => Ok(o),
        (Ok(_), Some(status)) => Err(format!("the server exited during the run ({status})")),
        (Err(why), Some(status)) => Err(format!("{why} (the server exited: {status})")),
        (Err(why), None) => Err(why),
    }
}

/// Runs the load process against `addr` and reads its outcome.
fn load(
    exe: &Path,
    addr: SocketAddr,
    server: u32,
    connections: usize,
    plan: &Plan,
) -> Result<Outcome, String> {
    let mut child = Command::new(exe)
        .arg("net-load")
        .args(["--addr", &addr.to_string()])
        .args(["--connections", &connections.to_string()])
        .args(["--warmup-ms", &plan.warmup.as_millis().to_string()])
        .args(["--window-ms", &plan.window.as_millis().to_string()])
        .args(["--server-pid", &server.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting the load: {e}"))?;
    let limit = plan.limit(connections);
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no outcome within {limit:?} (timed out)"));
            }
            Err(e) => return Err(format!("waiting for the load: {e}")),
        }
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout was piped")
        .read_to_string(&mut out)
        .map_err(|e| format!("reading the load's outcome: {e}"))?;
    if !status.success() {
        return Err(format!("the load failed ({status})"));
    }
    parse(&out)
}

/// The load's one line of outcome.
pub fn parse(stdout: &str) -> Result<Outcome, String> {
    let line = stdout.trim();
    serde_json::from_str::<Result<Outcome, String>>(line)
        .map_err(|e| format!("unexpected outcome from the load ({e}): {line:?}"))?
}
