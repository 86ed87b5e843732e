//! How numbers are taken: repeated runs reduced to their median, min and max
//! ([`Stats`], [`repeat`]), and pinning kernel threads to CPUs for the
//! baselines that must share or split CPUs the way ferry's processors do.

use std::time::Duration;

pub use ferry_report::Stats;

/// One measured (case, system) pair: its stats and how many operations
/// each run timed.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// ns per operation over the runs.
    pub stats: Stats,
    /// Operations per run.
    pub items: u64,
}

/// Runs `once` `runs` times (at least once); each call returns how long its
/// `items` operations took. Returns ns per operation over the runs.
pub fn repeat(
    runs: usize,
    items: u64,
    once: impl FnMut() -> std::io::Result<Duration>,
) -> std::io::Result<Measured> {
    Ok(per_op(&durations(runs, once)?, items))
}

/// Runs `once` `runs` times (at least once) and keeps what each returned.
pub fn durations(
    runs: usize,
    mut once: impl FnMut() -> std::io::Result<Duration>,
) -> std::io::Result<Vec<Duration>> {
    (0..runs.max(1)).map(|_| once()).collect()
}

/// Runs that each took one of `durations` for `items` operations, as ns per
/// operation.
pub fn per_op(durations: &[Duration], items: u64) -> Measured {
    let samples: Vec<f64> = durations
        .iter()
        .map(|d| d.as_nanos() as f64 / items.max(1) as f64)
        .collect();
    let stats = Stats::from_samples(&samples).expect("at least one run, never NaN");
    Measured { stats, items }
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = rustix::thread::sched_getaffinity(None) else {
        return Vec::new();
    };
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect()
}

/// How many CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling kernel thread to the `index`-th allowed CPU (modulo
/// their number); best effort.
pub fn pin_to(index: usize) {
    let cpus = allowed_cpus();
    if cpus.is_empty() {
        return;
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpus[index % cpus.len()]);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Stats::from_samples(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stats::from_samples(&[1.0, 4.0]).unwrap().median, 2.5);
        assert!(Stats::from_samples(&[]).is_none());
        assert!(Stats::from_samples(&[f64::NAN]).is_none());
    }
}
