//! The `priority p99` case: does a high-priority caller get ahead of a
//! saturating low-priority load? A ferry server process of one processor
//! in static or migrating mode; a client process (the bench) of one
//! processor with [`Load::low_clients`] ferry threads at
//! `Priority::Low`, each calling [`OP_BURN`] back to back (each call's
//! handler does [`Load::burn`] of work, so the server's processor is
//! never idle), and one thread at `Priority::High` that makes a null call
//! every [`Load::gap`] and times it. The result is the high caller's p99
//! over the timed part (and its median), and how many burning calls the
//! server answered per second meanwhile.
//!
//! This module owns the load and its reduction; the server is
//! [`super::served`]'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{Client, ServeMode};
use ferry::thread::{Builder, JoinHandle, Priority};

use super::proto::{OP_BURN, OP_CALL};
use super::served;
use crate::affinity;
use crate::error::Error;

/// The shape of the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Low-priority callers.
    pub low_clients: usize,
    /// Work of each low-priority call.
    pub burn: Duration,
    /// Pause of the high-priority caller between its calls.
    pub gap: Duration,
    /// Untimed, then timed part.
    pub warmup: Duration,
    /// See [`Load::warmup`].
    pub timed: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The high-priority caller's p99 round trip, ns.
    pub p99_ns: f64,
    /// Its median round trip, ns.
    pub p50_ns: f64,
    /// Its timed calls.
    pub high_calls: u64,
    /// Burning calls answered per second in the timed part.
    pub low_calls_per_s: f64,
}

/// Phases of the low-priority callers.
const WARM: u32 = 0;
const TIMED: u32 = 1;
const STOP: u32 = 2;

/// The `q` quantile (0 < q <= 1) of `ns` by nearest rank: the smallest
/// value with at least `q` of the values at or below it.
pub fn quantile(ns: &mut [u64], q: f64) -> Option<u64> {
    if ns.is_empty() || !(q > 0.0 && q <= 1.0) {
        return None;
    }
    ns.sort_unstable();
    let rank = (q * ns.len() as f64).ceil() as usize;
    Some(ns[rank.clamp(1, ns.len()) - 1])
}

/// One run: pins to `cpus.0`, starts the server in `mode` on `cpus.1`,
/// loads it, times the high caller, ends it.
///
/// # Errors
/// A call failed, a thread could not start, or the high caller timed no
/// call.
pub fn run_once(
    mode: ServeMode,
    load: Load,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Outcome, Error> {
    affinity::pin_or_warn(cpus.0, "migrating client");
    served::with_server(mode, false, cpus.1, move |client| drive(client, load))
}

/// The load on a bound client, inside the client's runtime.
fn drive(client: &Client, load: Load) -> Result<Outcome, Error> {
    let phase = Arc::new(AtomicU32::new(WARM));
    let burn = u64::try_from(load.burn.as_micros())
        .unwrap_or(u64::MAX)
        .to_le_bytes();
    let mut low: Vec<JoinHandle<Result<u64, Error>>> = Vec::new();
    for i in 0..load.low_clients {
        let (c, mine) = (client.clone(), Arc::clone(&phase));
        let spawned = Builder::new()
            .name(format!("low-{i}"))
            .priority(Priority::Low)
            .spawn(move || {
                let mut n = 0u64;
                loop {
                    served::call(&c, OP_BURN, &burn)?;
                    match mine.load(Ordering::Acquire) {
                        WARM => {}
                        TIMED => n += 1,
                        _ => return Ok(n),
                    }
                }
            });
        match spawned {
            Ok(t) => low.push(t),
            Err(e) => {
                phase.store(STOP, Ordering::Release);
                return Err(Error(format!("low-priority caller: {e}")));
            }
        }
    }
    let (c, high_phase) = (client.clone(), Arc::clone(&phase));
    let high = Builder::new().name("high").priority(Priority::High).spawn(
        move || -> Result<(Vec<u64>, Duration), Error> {
            ferry::sleep(load.warmup);
            high_phase.store(TIMED, Ordering::Release);
            let start = Instant::now();
            let mut ns = Vec::new();
            let outcome = loop {
                if start.elapsed() >= load.timed {
                    break Ok(());
                }
                let t0 = Instant::now();
                if let Err(e) = served::call(&c, OP_CALL, &[]) {
                    break Err(e);
                }
                ns.push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
                ferry::sleep(load.gap);
            };
            let window = start.elapsed();
            high_phase.store(STOP, Ordering::Release);
            outcome.map(|()| (ns, window))
        },
    );
    let high = match high {
        Ok(h) => h.join(),
        Err(e) => {
            phase.store(STOP, Ordering::Release);
            return Err(Error(format!("high-priority caller: {e}")));
        }
    };
    let mut low_calls = 0;
    let mut failed = None;
    for t in low {
        match t.join() {
            Ok(Ok(n)) => low_calls += n,
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some(Error("a low-priority caller panicked".into())),
        }
    }
    let (mut ns, window) =
        high.map_err(|_| Error("the high-priority caller panicked".into()))??;
    if let Some(e) = failed {
        return Err(e);
    }
    let p99 = quantile(&mut ns, 0.99)
        .ok_or_else(|| Error("the high-priority caller timed no call".into()))?;
    let p50 = quantile(&mut ns, 0.5).unwrap_or(p99);
    Ok(Outcome {
        p99_ns: p99 as f64,
        p50_ns: p50 as f64,
        high_calls: ns.len() as u64,
        low_calls_per_s: low_calls as f64 / window.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_is_the_nearest_rank() {
        let mut hundred: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(quantile(&mut hundred, 0.99), Some(99));
        assert_eq!(quantile(&mut hundred, 1.0), Some(100));
        assert_eq!(quantile(&mut hundred, 0.5), Some(50));
        let mut few = vec![5, 1, 9];
        assert_eq!(quantile(&mut few, 0.99), Some(9));
        assert_eq!(quantile(&mut few, 0.01), Some(1));
        assert_eq!(quantile(&mut [], 0.99), None);
        assert_eq!(quantile(&mut few, 0.0), None);
        assert_eq!(quantile(&mut few, 1.5), None);
    }
}
