//! The timed loop of the Table 3 cases: `urpc`'s budget and batching
//! ([`crate::urpc::calls`]) around one system's call, given as a closure
//! `call(op, args) -> result`, with the reply checked against
//! [`proto::expected_reply`] (the call's number), and, for a path run,
//! the server's [`PathSums`] read by an [`OP_STATS`] call before and
//! after the timed calls.
//!
//! This module owns that loop; it knows no system. The two stats calls
//! bound the timed calls; as the server adds a call to its sums after its
//! reply is posted, the difference may count one call more or less at
//! each end among thousands (the mean divides by the calls counted).

use std::time::Instant;

use super::proto::{self, OP_CALL, OP_STATS, PathSums};
use crate::error::Error;
use crate::urpc::calls::{Budget, enough, next_batch, stamp};

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Mean ns per round trip at the client.
    pub round_trip_ns: f64,
    /// Mean ns per call of the server-side path, for a path run.
    pub path_ns: Option<f64>,
    /// Calls timed.
    pub calls: u64,
    /// Mean ns per call of the steps that carrying the logical thread adds
    /// (`ferry::rpc::identity_steps`), timed on the client's thread right
    /// after a migrating null round-trip run; `None` for other runs.
    pub identity_ns: Option<f64>,
}

/// Runs [`OP_CALL`]s of `size` argument bytes through `call` under
/// `budget`; with `path`, also the server's mean path over the timed
/// calls.
///
/// # Errors
/// The first error of `call`, a reply that is not the call's, or stats
/// that do not decode or count no call.
pub fn run(
    budget: &Budget,
    size: usize,
    path: bool,
    mut call: impl FnMut(u32, &[u8]) -> Result<Vec<u8>, Error>,
) -> Result<Timed, Error> {
    let mut args = vec![0x5au8; size];
    let mut n = 0u64;
    let warm = Instant::now();
    while n == 0 || warm.elapsed() < budget.warmup {
        n += 1;
        echo(&mut call, &mut args, n)?;
    }
    let before = if path { Some(stats(&mut call)?) } else { None };
    let start = Instant::now();
    let mut count = 0u64;
    while !enough(budget, count, start.elapsed()) {
        let batch = next_batch(count, budget.max_calls);
        for _ in 0..batch {
            n += 1;
            echo(&mut call, &mut args, n)?;
        }
        count += batch;
    }
    let elapsed = start.elapsed();
    let path_ns = match before {
        Some(before) => Some(stats(&mut call)?.mean_since(before)?),
        None => None,
    };
    Ok(Timed {
        round_trip_ns: elapsed.as_nanos() as f64 / count as f64,
        path_ns,
        calls: count,
        identity_ns: None,
    })
}

/// Call number `n`: its number stamped into `args`, its reply checked.
fn echo(
    call: &mut impl FnMut(u32, &[u8]) -> Result<Vec<u8>, Error>,
    args: &mut [u8],
    n: u64,
) -> Result<(), Error> {
    stamp(args, n);
    let reply = call(OP_CALL, args)?;
    if reply != proto::expected_reply(args) {
        return Err(Error(format!("call {n}: the reply is not the call's")));
    }
    Ok(())
}

/// The server's sums so far.
fn stats(call: &mut impl FnMut(u32, &[u8]) -> Result<Vec<u8>, Error>) -> Result<PathSums, Error> {
    PathSums::decode(&call(OP_STATS, &[])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrating::proto::Burner;
    use std::time::Duration;

    const B: Budget = Budget {
        warmup: Duration::from_micros(200),
        timed: Duration::from_millis(2),
        min_calls: 5,
        max_calls: 1000,
    };

    /// A server in a closure: answers as [`proto::handle`] does, with
    /// sums of 10 ns to the handler and 20 ns to the reply per call.
    fn fake() -> impl FnMut(u32, &[u8]) -> Result<Vec<u8>, Error> {
        let mut sums = PathSums::default();
        let burner = Burner::calibrate();
        move |op, args| {
            let r =
                proto::handle(op, args, &burner, || sums).map_err(|e| Error(format!("{e:?}")))?;
            sums.calls += 1;
            sums.to_handler_ns += 10;
            sums.to_reply_ns += 20;
            Ok(r)
        }
    }

    #[test]
    fn a_path_run_reads_the_sums_around_the_timed_calls() {
        for size in [0, 32, 1024] {
            let t = run(&B, size, true, fake()).unwrap();
            assert!(t.calls >= 5);
            assert_eq!(t.path_ns, Some(30.0));
            assert!(t.round_trip_ns.is_finite());
            assert_eq!(run(&B, size, false, fake()).unwrap().path_ns, None);
        }
    }

    #[test]
    fn a_wrong_reply_or_bad_stats_fail_the_run() {
        let wrong = run(&B, 16, false, |_, _| Ok(vec![0; 8]));
        assert!(wrong.unwrap_err().0.contains("not the call's"));
        let mut inner = fake();
        let short_stats = run(&B, 0, true, move |op, args| {
            let r = inner(op, args)?;
            Ok(if op == OP_STATS { r[..8].to_vec() } else { r })
        });
        assert!(short_stats.unwrap_err().0.contains("24 expected"));
        let failing = run(&B, 0, false, |_, _| Err(Error("gone".into())));
        assert_eq!(failing, Err(Error("gone".into())));
    }
}
