//! Stop 8: one interface, two paths. The tour starts `ferry serve --grpc`,
//! which serves the typed interface [`Greeter`](crate::greeter::Greeter)
//! locally and over gRPC on loopback at once, binds one `GreeterClient`
//! by name and another by the URL the server printed, and makes the same
//! call through each: the stop shows both answers and the time of each
//! call. It compares ferry with nothing, so it has no table. The child dies
//! with the tour and is killed and reaped when the stop ends.

use std::io;
use std::time::{Duration, Instant};

use ferry::rpc::RuntimeDir;

use super::rpc::{Served, TempDir};
use super::{Scale, Stop, Visit};
use crate::greeter::{GreeterClient, greeting};
use crate::report::fmt_ns;

pub const STOP: Stop = Stop {
    name: "grpc",
    title: "one interface, local and over gRPC",
    run,
};

/// The name the interface is served under.
const NAME: &str = "tour-greeter";

/// Who the greeting is for.
const WHO: &str = "tour";

/// One call as the stop shows it.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Its answer.
    pub answer: String,
    /// How long it took.
    pub took: Duration,
}

/// What the calling thread saw.
#[derive(Debug, Clone)]
pub struct Findings {
    /// The calling thread's id.
    pub thread: u64,
    /// The first call over gRPC (it opens the connection).
    pub first_grpc: Duration,
    /// The call made locally.
    pub local: Shown,
    /// The same call over gRPC.
    pub grpc: Shown,
}

/// The URL at the end of a `ready <pid> grpc://...` line.
fn url_of(ready: &str) -> io::Result<String> {
    ready
        .split_whitespace()
        .nth(2)
        .filter(|u| u.starts_with("grpc://"))
        .map(str::to_owned)
        .ok_or_else(|| io::Error::other(format!("`ferry serve --grpc` said {ready:?}")))
}

fn run(_scale: Scale) -> io::Result<Visit> {
    let dir = TempDir::new()?;
    let served = Served::start(dir.path(), &["--name", NAME, "--grpc", "127.0.0.1:0"])?;
    let url = url_of(&served.ready)?;
    let rt_dir = RuntimeDir::open(dir.path(), rustix::process::getuid().as_raw())
        .map_err(io::Error::other)?;
    let target = url.clone();
    let f = ferry::Runtime::builder()
        .processors(1)
        .run(move || calls(&rt_dir, &target))??;
    let (me, pid) = (std::process::id(), served.pid);
    drop(served);
    let expected = greeting(WHO, pid, Some((f.thread, me)));
    for (path, shown) in [("local", &f.local), ("gRPC", &f.grpc)] {
        if shown.answer != expected {
            return Err(io::Error::other(format!(
                "the {path} call answered {:?}, not {expected:?}",
                shown.answer
            )));
        }
    }
    let ratio = f.grpc.took.as_secs_f64() / f.local.took.as_secs_f64().max(1e-9);
    Ok(Visit {
        lines: vec![
            format!(
                "The tour started `ferry serve --grpc` (pid {pid}), which serves one typed \
                 interface, Greeter (#[ferry::interface(grpc)]), on both paths at once: under \
                 the name `{NAME}` in a runtime directory, and over gRPC (ferry-grpc, on tonic) \
                 at {url}, which makes each request a local call to the same server. The tour \
                 bound one GreeterClient by name and another by that URL: the same type, the \
                 same calling code."
            ),
            format!(
                "Local: greet(\"{WHO}\") answered \"{}\" in {}.",
                f.local.answer,
                fmt_ns(f.local.took.as_nanos() as f64)
            ),
            format!(
                "Over gRPC on loopback: greet(\"{WHO}\") answered \"{}\" in {} ({ratio:.0}× the \
                 local call).",
                f.grpc.answer,
                fmt_ns(f.grpc.took.as_nanos() as f64)
            ),
            format!(
                "The same answer both ways: the calling thread's identity went over the wire in \
                 the request's metadata, and the server ran the call for thread {} of pid {me} \
                 on either path. Each time is of one call, made right after another on its path; \
                 the first call over gRPC also opened the HTTP/2 connection and took {}.",
                f.thread,
                fmt_ns(f.first_grpc.as_nanos() as f64)
            ),
        ],
        rows: Vec::new(),
        pending: None,
    })
}

/// On a ferry thread: binds both clients, makes the first call over
/// gRPC (it connects), then on each path a call and, right after it, the
/// call shown.
fn calls(dir: &RuntimeDir, url: &str) -> io::Result<Findings> {
    let local = GreeterClient::connect_in(dir, NAME).map_err(io::Error::other)?;
    let remote = GreeterClient::connect(url).map_err(io::Error::other)?;
    let greet = |client: &GreeterClient| -> io::Result<Shown> {
        let start = Instant::now();
        let answer = client.greet(WHO.to_owned()).map_err(io::Error::other)?;
        Ok(Shown {
            answer,
            took: start.elapsed(),
        })
    };
    let first_grpc = greet(&remote)?.took;
    // Each shown call right after one on its path, so that neither is
    // timed waking a processor that went to sleep while the other ran.
    greet(&local)?;
    let local_shown = greet(&local)?;
    greet(&remote)?;
    let grpc_shown = greet(&remote)?;
    Ok(Findings {
        thread: ferry::current().id().as_u64(),
        first_grpc,
        local: local_shown,
        grpc: grpc_shown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_read_from_the_ready_line() {
        assert_eq!(
            url_of("ready 12 grpc://127.0.0.1:5/x").unwrap(),
            "grpc://127.0.0.1:5/x"
        );
        assert!(url_of("ready 12").is_err());
        assert!(url_of("ready 12 http://a:1/x").is_err());
    }
}
