//! The timed loop every system of `urpc` runs, given its round trip as a
//! closure: an untimed warm-up, then a count of calls sized from the
//! warm-up's pace so that the timed part lasts about the budget, timed as
//! one stretch. Each call's arguments carry its number in their first
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
    /// The timed calls take about this long...
    pub timed: Duration,
    /// ...but are at least this many...
    pub min_calls: u64,
    /// ...and at most this many.
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

/// How many calls to time: `timed` at the pace of `warm_calls` calls in
/// `warm_time`, within the budget's bounds.
pub fn timed_count(budget: &Budget, warm_calls: u64, warm_time: Duration) -> u64 {
    let per_call = warm_time.as_nanos() as f64 / warm_calls.max(1) as f64;
    let want = if per_call > 0.0 {
        budget.timed.as_nanos() as f64 / per_call
    } else {
        budget.max_calls as f64
    };
    (want as u64).clamp(budget.min_calls, budget.max_calls.max(budget.min_calls))
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
    let count = timed_count(budget, n, warm.elapsed());
    let start = Instant::now();
    for _ in 0..count {
        n += 1;
        one(n)?;
    }
    Ok(Sample {
        ns_per_call: start.elapsed().as_nanos() as f64 / count as f64,
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
    fn the_count_follows_the_pace_within_bounds() {
        assert_eq!(timed_count(&B, 100, Duration::from_millis(1)), 1000);
        assert_eq!(timed_count(&B, 10, Duration::from_millis(1)), 100);
        assert_eq!(timed_count(&B, 1, Duration::from_secs(1)), 5);
        assert_eq!(timed_count(&B, 0, Duration::ZERO), 1000);
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
