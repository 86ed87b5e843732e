//! Measurement helpers shared by every experiment: the summary of repeated
//! runs ([`Stats`]: median, min, max, from `ferry-report`, which
//! [`crate::row::Row`] applies to its samples) and a spinning start barrier
//! for threads that are pinned to their own cores.
//!
//! This module owns how numbers are reduced and how pinned threads start
//! together; it knows nothing about any experiment or about how results
//! are printed (that is [`crate::report`]).

use std::hint;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use ferry_report::Stats;

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
