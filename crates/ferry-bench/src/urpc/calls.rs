//! The timed loop every system of `urpc` runs, given its round trip as a
//! closure: an untimed warm-up, then calls in growing batches, the clock
//! read between batches only, until the timed part has lasted the budget
//! (and made its fewest calls); the sample is its time over its calls. Each call's arguments carry its number in their first
//! bytes and the result must echo them, so a system that drops, mixes up
//! or truncates a call fails the run rather than looking fast.
//!
//! This module owns the loop and the echo check; it knows no system.

use std::time::{Duration, Instant};

use crate::error::Error;

/// How long one run of one (case, system) pair lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Untimed calls first, for about this long (at least one call).
    pub warmup: Duration,
    /// The timed calls last at least this long (up to a quarter more)...
    pub timed: Duration,
    /// ...and are at least this many...
    pub min_calls: u64,
    /// ...but stop at this many.
    pub max_calls: u64,
}

/// One run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Mean ns per round trip over the timed calls.
    pub ns_per_call: f64,
    /// How many calls were timed.
    pub calls: u64,
}

/// Writes call number `n` into the first (up to 8) bytes of `args`.
pub fn stamp(args: &mut [u8], n: u64) {
    let k = args.len().min(8);
    args[..k].copy_from_slice(&n.to_le_bytes()[..k]);
}

/// Checks that `result` is `size` bytes and echoes call `n`'s stamp.
pub fn check(result: &[u8], size: usize, n: u64) -> Result<(), Error> {
    if result.len() != size {
        return Err(Error(format!(
            "call {n}: result of {} bytes, {size} expected",
            result.len()
        )));
    }
    let k = size.min(8);
    if result[..k] != n.to_le_bytes()[..k] {
        return Err(Error(format!(
            "call {n}: the result does not echo the call"
        )));
    }
    Ok(())
}

/// The size of the next batch of timed calls after `done` calls: a
/// quarter of those done (at least 1), so that the clock is read a few
/// dozen times per run and the run overshoots its time by at most a
/// quarter; never past `max` calls in all.
pub fn next_batch(done: u64, max: u64) -> u64 {
    (done / 4).max(1).min(max.saturating_sub(done))
}

/// Whether a run of `done` calls in `elapsed` is long enough.
pub fn enough(budget: &Budget, done: u64, elapsed: Duration) -> bool {
    done >= budget.max_calls || (done >= budget.min_calls && elapsed >= budget.timed)
}

/// Runs calls of `size` bytes each way through `call(args, result)` (which
/// leaves the result in `result`, resized or replaced as it likes) under
/// `budget`; returns the timed part's mean.
///
/// # Errors
/// The first error of `call`, or a result that fails [`check`].
pub fn time_calls(
    budget: &Budget,
    size: usize,
    mut call: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), Error>,
) -> Result<Sample, Error> {
    let mut args = vec![0xa5u8; size];
    let mut result = vec![0u8; size];
    let mut n = 0u64;
    let mut one = |n: u64| -> Result<(), Error> {
        stamp(&mut args, n);
        call(&args, &mut result)?;
        check(&result, size, n)
    };
    let warm = Instant::now();
    while n == 0 || warm.elapsed() < budget.warmup {
        n += 1;
        one(n)?;
    }
    let start = Instant::now();
    let mut count = 0u64;
    while !enough(budget, count, start.elapsed()) {
        let batch = next_batch(count, budget.max_calls);
        for _ in 0..batch {
            n += 1;
            one(n)?;
        }
        count += batch;
    }
    let elapsed = start.elapsed();
    Ok(Sample {
        ns_per_call: elapsed.as_nanos() as f64 / count as f64,
        calls: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Budget = Budget {
        warmup: Duration::from_millis(1),
        timed: Duration::from_millis(10),
        min_calls: 5,
        max_calls: 1000,
    };

    #[test]
    fn batches_grow_and_stop_at_the_budget() {
        assert_eq!(next_batch(0, 1000), 1);
        assert_eq!(next_batch(3, 1000), 1);
        assert_eq!(next_batch(400, 1000), 100);
        assert_eq!(next_batch(990, 1000), 10);
        let ms = Duration::from_millis;
        assert!(!enough(&B, 4, ms(50)), "too few calls");
        assert!(!enough(&B, 500, ms(9)), "too short");
        assert!(enough(&B, 5, ms(10)));
        assert!(enough(&B, 1000, ms(0)), "the most calls");
    }

    #[test]
    fn an_echo_passes_and_counts_its_calls() {
        for size in [0, 3, 8, 100] {
            let mut calls = 0;
            let s = time_calls(&B, size, |args, result| {
                calls += 1;
                result.clear();
                result.extend_from_slice(args);
                Ok(())
            })
            .unwrap();
            assert!(s.calls >= B.min_calls && s.calls <= B.max_calls);
            assert!(calls > s.calls, "warm-up calls come first");
            assert!(s.ns_per_call.is_finite());
        }
    }

    #[test]
    fn a_stale_short_or_failing_reply_is_an_error() {
        let stale = time_calls(&B, 16, |_, result| {
            result.fill(0);
            Ok(())
        });
        assert!(stale.unwrap_err().0.contains("does not echo"));
        let short = time_calls(&B, 16, |_, result| {
            result.truncate(4);
            Ok(())
        });
        assert!(short.unwrap_err().0.contains("4 bytes"));
        let failing = time_calls(&B, 0, |_, _| Err(Error("gone".into())));
        assert_eq!(failing, Err(Error("gone".into())));
    }

    #[test]
    fn stamps_are_little_endian_call_numbers() {
        let mut a = [0u8; 10];
        stamp(&mut a, 0x0102);
        assert_eq!(a[..3], [2, 1, 0]);
        assert!(check(&a, 10, 0x0102).is_ok());
        assert!(check(&a, 10, 0x0103).is_err());
        let mut b = [0u8; 1];
        stamp(&mut b, 0x0102);
        assert_eq!(b, [2]);
    }
}
