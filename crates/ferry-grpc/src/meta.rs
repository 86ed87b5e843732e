//! The call's identity on the wire: a logical thread's chain as request
//! metadata, its deadline as `grpc-timeout`, the run time spent remotely
//! as a trailer, and ferry's errors as gRPC statuses (and back).
//!
//! | key | where | content |
//! |-----|-------|---------|
//! | `grpc-timeout` | request | the deadline, as gRPC carries it (set by tonic from the call's deadline) |
//! | `ferry-logical` | request | the logical thread: `<origin pid>.<origin start>.<thread id>` |
//! | `ferry-priority` | request | `low`, `normal` or `high` |
//! | `ferry-hops` | request | the processes visited so far, origin first: pids joined by `,` |
//! | `ferry-cpu-ns` | request | the logical thread's run time so far |
//! | `ferry-cpu-ns` | response trailer | the run time the server spent on this call (charged to the caller, never more than the call took) |
//! | `ferry-error` | response trailer | the ferry error a non-OK status stands for (exact where the code alone is ambiguous) |
//!
//! This module owns the keys and the mappings; it must not trust what it
//! reads: a malformed key is ignored (a call from a client that is not
//! ferry has none of them and starts a chain of its own), and hops beyond
//! what a chain may hold are an error.

use std::time::{Duration, Instant};

use ferry::rpc::{Chain, Error, LogicalId, MAX_CHAIN_DEPTH};
use ferry::thread::Priority;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

const LOGICAL: &str = "ferry-logical";
const PRIORITY: &str = "ferry-priority";
const HOPS: &str = "ferry-hops";
/// The run time key, in requests and in response trailers.
pub(crate) const CPU: &str = "ferry-cpu-ns";
const ERROR: &str = "ferry-error";

fn put(map: &mut MetadataMap, key: &'static str, value: String) {
    if let Ok(v) = MetadataValue::try_from(value) {
        map.insert(key, v);
    }
}

fn get<'a>(map: &'a MetadataMap, key: &str) -> Option<&'a str> {
    map.get(key)?.to_str().ok()
}

/// Writes `chain` (less its deadline: `grpc-timeout` carries that).
pub(crate) fn write_chain(map: &mut MetadataMap, chain: &Chain) {
    let id = chain.id;
    put(
        map,
        LOGICAL,
        format!("{}.{}.{}", id.pid, id.start, id.thread),
    );
    put(map, PRIORITY, priority_name(chain.priority).to_owned());
    let hops: Vec<String> = chain.hops.iter().map(u32::to_string).collect();
    put(map, HOPS, hops.join(","));
    put(map, CPU, chain.cpu.as_nanos().to_string());
}

fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::Low => "low",
        Priority::High => "high",
        _ => "normal",
    }
}

/// The chain a request carries, with `deadline`; `None` when it carries
/// none that reads (a client that is not ferry).
///
/// # Errors
/// [`Error::ChainTooDeep`] for more hops than a chain may hold.
pub(crate) fn read_chain(
    map: &MetadataMap,
    deadline: Option<Instant>,
) -> Result<Option<Chain>, Error> {
    let Some(logical) = get(map, LOGICAL) else {
        return Ok(None);
    };
    let mut parts = logical.split('.');
    let (Some(pid), Some(start), Some(thread), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    let (Ok(pid), Ok(start), Ok(thread)) = (pid.parse(), start.parse(), thread.parse()) else {
        return Ok(None);
    };
    let hops: Vec<u32> = match get(map, HOPS) {
        Some(h) => match h
            .split(',')
            .map(str::parse)
            .collect::<Result<Vec<u32>, _>>()
        {
            Ok(h) if !h.is_empty() => h,
            _ => return Ok(None),
        },
        None => return Ok(None),
    };
    if hops.len() >= MAX_CHAIN_DEPTH {
        return Err(Error::ChainTooDeep {
            depth: hops.len() + 1,
        });
    }
    let priority = match get(map, PRIORITY) {
        Some("low") => Priority::Low,
        Some("high") => Priority::High,
        _ => Priority::Normal,
    };
    let cpu = get(map, CPU)
        .and_then(|c| c.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos);
    Ok(Some(Chain {
        id: LogicalId { pid, start, thread },
        priority,
        deadline,
        cpu,
        hops,
    }))
}

/// The run time a trailer (or header) map reports, if any.
pub(crate) fn read_cpu(map: &MetadataMap) -> Option<Duration> {
    get(map, CPU)?.parse().ok().map(Duration::from_nanos)
}

/// The deadline a `grpc-timeout` value names: digits and a unit.
pub(crate) fn read_timeout(map: &MetadataMap) -> Option<Instant> {
    let v = get(map, "grpc-timeout")?;
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    let d = match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    };
    Instant::now().checked_add(d)
}

/// The status a ferry call error becomes (with `ferry-error` naming it).
pub(crate) fn status_of(e: &Error) -> Status {
    let (code, name) = match e {
        Error::UnknownOp { .. } => (Code::Unimplemented, "unknown-op"),
        Error::BadArgs => (Code::InvalidArgument, "bad-args"),
        Error::ServerPanicked => (Code::Internal, "server-panicked"),
        Error::TooLarge => (Code::ResourceExhausted, "too-large"),
        Error::Busy => (Code::ResourceExhausted, "busy"),
        Error::DeadlineExceeded => (Code::DeadlineExceeded, "deadline-exceeded"),
        Error::Aborted => (Code::Cancelled, "aborted"),
        Error::ChainTooDeep { .. } => (Code::FailedPrecondition, "chain-too-deep"),
        Error::PeerDied | Error::UnknownName | Error::Closed => (Code::Unavailable, "peer-died"),
        _ => (Code::Internal, "internal"),
    };
    let mut s = Status::new(code, e.to_string());
    put(s.metadata_mut(), ERROR, name.to_owned());
    s
}

/// The ferry error a status stands for, for a call of `op`.
pub(crate) fn error_of(s: &Status, op: u32) -> Error {
    if connection_failed(s) {
        return Error::PeerDied;
    }
    match (get(s.metadata(), ERROR), s.code()) {
        (Some("unknown-op"), _) | (None, Code::Unimplemented) => Error::UnknownOp { op },
        (Some("bad-args"), _) | (None, Code::InvalidArgument) => Error::BadArgs,
        (Some("server-panicked"), _) => Error::ServerPanicked,
        (Some("too-large"), _) => Error::TooLarge,
        (Some("busy"), _) => Error::Busy,
        (Some("chain-too-deep"), _) => Error::ChainTooDeep {
            depth: MAX_CHAIN_DEPTH + 1,
        },
        (_, Code::DeadlineExceeded) => Error::DeadlineExceeded,
        (_, Code::Cancelled) => Error::Aborted,
        (_, Code::Unavailable) => Error::PeerDied,
        (_, code) => Error::Transport(format!("{code:?}: {}", s.message())),
    }
}

/// Whether `s` was made on this side because the connection ended under
/// the call, whatever the code tonic gave it: the transport's error (or
/// the socket's) is in its source chain. tonic reports a connection the
/// peer reset or closed as `Unknown: transport error`, one it closed with
/// a GOAWAY as `Internal: h2 protocol error`, and a request the closing
/// connection never sent as `Cancelled`. A status the peer sent has no
/// source.
fn connection_failed(s: &Status) -> bool {
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        if e.is::<tonic::transport::Error>() || e.is::<std::io::Error>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(hops: Vec<u32>) -> Chain {
        Chain {
            id: LogicalId {
                pid: 7,
                start: 99,
                thread: 3,
            },
            priority: Priority::High,
            deadline: None,
            cpu: Duration::from_nanos(1234),
            hops,
        }
    }

    #[test]
    fn a_chain_round_trips_through_metadata() {
        let mut m = MetadataMap::new();
        write_chain(&mut m, &chain(vec![7, 8]));
        assert_eq!(read_chain(&m, None).unwrap(), Some(chain(vec![7, 8])));
    }

    #[test]
    fn foreign_or_malformed_metadata_starts_no_chain_and_too_deep_is_an_error() {
        assert_eq!(read_chain(&MetadataMap::new(), None).unwrap(), None);
        let mut m = MetadataMap::new();
        write_chain(&mut m, &chain(vec![7]));
        put(&mut m, LOGICAL, "7.x.3".into());
        assert_eq!(read_chain(&m, None).unwrap(), None);
        let mut m = MetadataMap::new();
        write_chain(&mut m, &chain(vec![7]));
        put(&mut m, HOPS, "1,,2".into());
        assert_eq!(read_chain(&m, None).unwrap(), None);
        let mut m = MetadataMap::new();
        write_chain(&mut m, &chain((0..MAX_CHAIN_DEPTH as u32).collect()));
        assert!(matches!(
            read_chain(&m, None),
            Err(Error::ChainTooDeep { .. })
        ));
    }

    #[test]
    fn timeouts_parse_as_grpc_writes_them() {
        let mut m = MetadataMap::new();
        put(&mut m, "grpc-timeout", "250m".into());
        let d = read_timeout(&m).unwrap() - Instant::now();
        assert!(d <= Duration::from_millis(250) && d > Duration::ZERO);
        for bad in ["", "m", "12x", "1234567890S", "-5S"] {
            put(&mut m, "grpc-timeout", bad.into());
            assert_eq!(read_timeout(&m), None, "{bad}");
        }
    }

    #[test]
    fn errors_survive_the_status_round_trip() {
        for e in [
            Error::UnknownOp { op: 4 },
            Error::BadArgs,
            Error::ServerPanicked,
            Error::TooLarge,
            Error::Busy,
            Error::DeadlineExceeded,
            Error::Aborted,
            Error::PeerDied,
        ] {
            let back = error_of(&status_of(&e), 4);
            assert_eq!(format!("{back:?}"), format!("{e:?}"));
        }
    }

    #[test]
    fn a_connection_that_fails_under_a_call_is_peer_died_and_a_sent_unknown_is_not() {
        let broken = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "closed");
        let local = Status::from_error(Box::new(broken));
        assert_eq!(local.code(), Code::Unknown);
        assert!(matches!(error_of(&local, 0), Error::PeerDied));
        let sent = Status::unknown("the peer's own failure");
        assert!(matches!(error_of(&sent, 0), Error::Transport(_)));
    }
}
