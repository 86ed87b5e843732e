//! `ferry top --once --json`: one JSON document, an array with one object
//! per page: a live process with every field of its page and the rates of
//! this look, or `{"page": name, "error": why}` for a page that does not
//! read back.
//!
//! This file owns the document's shape; it must not look at the pages
//! itself (`scan` does).

use ferry::stats::{ChannelKind, Snapshot};
use serde_json::{Value, json};

use super::scan::{Entry, Process};

/// The document for `entries`.
pub fn document(entries: &[Entry]) -> Value {
    Value::Array(entries.iter().map(entry).collect())
}

fn entry(e: &Entry) -> Value {
    match e {
        Entry::Live(p) => process(p),
        Entry::Bad { page, why } => json!({ "page": page, "error": why }),
    }
}

fn process(p: &Process) -> Value {
    let s: &Snapshot = &p.snap;
    let rates = p.rates.as_ref();
    let channels: Vec<Value> = s
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "kind": match c.kind {
                    ChannelKind::Server => "server",
                    ChannelKind::Client => "client",
                },
                "name": c.name,
                "peers": c.peers,
                "calls": c.calls,
                "calls_per_s": rates.and_then(|r| r.calls.get(i)).copied(),
                "cpu_ns": c.cpu_ns,
            })
        })
        .collect();
    let logical: Vec<Value> = s
        .logical
        .iter()
        .map(|l| {
            json!({
                "origin": l.origin,
                "thread": l.thread,
                "priority": format!("{:?}", l.priority).to_lowercase(),
                "cpu_ns": l.cpu_ns,
                "chain": l.chain,
            })
        })
        .collect();
    let u = &s.upcalls;
    json!({
        "page": s.pid.to_string(),
        "pid": s.pid,
        "start": s.start,
        "command": s.command,
        "processors": s.processors,
        "max_processors": s.max_processors,
        "cores": s.cores,
        "runnable": s.runnable,
        "blocked": s.blocked,
        "kernel_threads": s.kernel_threads,
        "max_kernel_threads": s.max_kernel_threads,
        "upcalls": {
            "blocked": u.blocked,
            "unblocked": u.unblocked,
            "preempted": u.preempted,
            "processor_added": u.processor_added,
            "processor_removed": u.processor_removed,
        },
        "upcalls_per_s": rates.map(|r| r.upcalls),
        "cpu_cores": rates.map(|r| r.cpu),
        "cpu_ticks": p.cpu_ticks,
        "allocation": s.allocation.map(|a| json!({
            "desired": a.desired,
            "cores": a.cores,
            "priority": a.priority,
            "credit": a.credit,
        })),
        "writes": s.writes,
        "channels": channels,
        "channels_not_listed": s.channels_dropped,
        "logical_threads": logical,
        "logical_threads_not_listed": s.logical_dropped,
    })
}
