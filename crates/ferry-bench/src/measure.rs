//! Measurement helpers shared by every experiment: the run schedule
//! ([`interleaved`]), the summary of repeated runs ([`Stats`]: median, min,
//! max, from `ferry-report`, which [`crate::row::Row`] applies to its
//! samples) and a spinning start barrier for threads that are pinned to
//! their own cores.
//!
//! This module owns when runs happen, how numbers are reduced and how
//! pinned threads start together; it knows nothing about any experiment or about how results
//! are printed (that is [`crate::report`]).

use std::hint;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use ferry_report::Stats;

use crate::error::Error;

/// One turn of the run schedule: the round (0 is the untimed warm-up), the
/// case and the system, as indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// 0 for the warm-up round, then 1 to `runs`.
    pub round: u32,
    /// Index of the case (or kind of run).
    pub case: usize,
    /// Index of the system.
    pub system: usize,
}

impl Turn {
    /// Whether this turn is in the untimed warm-up round.
    pub fn warmup(self) -> bool {
        self.round == 0
    }
}

/// The schedule every experiment runs: round 0 is an untimed warm-up, then
/// `runs` timed rounds; a round runs every case with every system once,
/// cases in order and systems in an order rotated by one from round to
/// round, so that run *k* of every pair comes before run *k+1* of any and
/// slow drifts of the machine (frequency, a noisy neighbour) hit all
/// systems alike. Stops at the first error `turn` returns.
pub fn interleaved(
    runs: u32,
    cases: usize,
    systems: usize,
    mut turn: impl FnMut(Turn) -> Result<(), Error>,
) -> Result<(), Error> {
    for round in 0..=runs {
        for case in 0..cases {
            for k in 0..systems {
                let system = (k + round as usize) % systems;
                turn(Turn {
                    round,
                    case,
                    system,
                })?;
            }
        }
    }
    Ok(())
}

/// A reusable-once barrier that spins instead of parking, so that threads
/// pinned to different cores leave it within nanoseconds of each other rather
/// than after a futex wake-up (tens of microseconds).
///
/// Meant for a handful of threads that all arrive promptly; a thread that never
/// arrives leaves the others spinning.
#[derive(Debug)]
pub struct SpinBarrier {
    remaining: AtomicUsize,
}

impl SpinBarrier {
    /// A barrier that opens once `parties` threads have called [`SpinBarrier::wait`].
    pub fn new(parties: usize) -> SpinBarrier {
        SpinBarrier {
            remaining: AtomicUsize::new(parties),
        }
    }

    /// Arrives at the barrier and spins until every party has arrived.
    pub fn wait(&self) {
        self.remaining.fetch_sub(1, Ordering::AcqRel);
        while self.remaining.load(Ordering::Acquire) != 0 {
            hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_middle_element() {
        let s = Stats::from_samples(&[9.0, 1.0, 5.0, 3.0, 7.0]).unwrap();
        assert_eq!(s.median, 5.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 9.0);
        assert_eq!(s.runs, 5);
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        let s = Stats::from_samples(&[4.0, 1.0, 3.0, 100.0]).unwrap();
        assert_eq!(s.median, 3.5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
    }

    #[test]
    fn median_is_robust_to_one_outlier() {
        let s = Stats::from_samples(&[10.0, 10.5, 1e9, 9.5, 10.2]).unwrap();
        assert_eq!(s.median, 10.2);
    }

    #[test]
    fn empty_or_nan_has_no_stats() {
        assert_eq!(Stats::from_samples(&[]), None);
        assert_eq!(Stats::from_samples(&[1.0, f64::NAN, 2.0]), None);
    }

    #[test]
    fn the_schedule_warms_up_then_rotates_the_systems() {
        let mut turns = Vec::new();
        interleaved(2, 2, 3, |t| {
            turns.push((t.round, t.case, t.system, t.warmup()));
            Ok(())
        })
        .unwrap();
        let systems = |round: u32, case: usize| -> Vec<usize> {
            turns
                .iter()
                .filter(|t| t.0 == round && t.1 == case)
                .map(|t| t.2)
                .collect()
        };
        assert_eq!(turns.len(), 3 * 2 * 3);
        assert_eq!(systems(0, 0), [0, 1, 2]);
        assert_eq!(systems(1, 1), [1, 2, 0]);
        assert_eq!(systems(2, 0), [2, 0, 1]);
        assert!(turns.iter().all(|t| t.3 == (t.0 == 0)));
        let mut n = 0;
        assert_eq!(
            interleaved(5, 1, 1, |_| {
                n += 1;
                if n == 2 {
                    Err(Error("stop".into()))
                } else {
                    Ok(())
                }
            }),
            Err(Error("stop".into()))
        );
    }

    #[test]
    fn spin_barrier_releases_all_parties() {
        let barrier = SpinBarrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| barrier.wait());
            }
            barrier.wait();
        });
        assert_eq!(barrier.remaining.load(Ordering::Relaxed), 0);
    }
}
