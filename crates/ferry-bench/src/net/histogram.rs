//! A log-linear latency histogram ([`Histogram`]): values below
//! [`LINEAR`] ns each have a bucket of their own; above, every power of two
//! is cut into [`LINEAR`] / 2 equal buckets, so a bucket is at most 1/32
//! of its values wide and a quantile read from it is within about 3% of
//! the true one. Recording is an index computation and an increment, with
//! no allocation after [`Histogram::new`].
//!
//! This module owns the buckets and their quantiles; what is recorded and
//! when is the loader's.

/// Values below this have one bucket each; a power of two above it is cut
/// into `LINEAR / 2` buckets.
pub const LINEAR: u64 = 64;
/// `log2(LINEAR)`.
const LINEAR_BITS: u32 = LINEAR.trailing_zeros();
/// Sub-buckets per power of two above [`LINEAR`].
const SUB: u64 = LINEAR / 2;
/// Buckets in all: the linear ones, then `SUB` per power of two from
/// `2^LINEAR_BITS` to `2^63`.
const BUCKETS: usize = (LINEAR + SUB * (64 - LINEAR_BITS as u64)) as usize;

/// Counts of values (ns) by log-linear bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

/// The bucket of `v`.
fn index(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    // The highest set bit is at `exp` >= LINEAR_BITS; the next
    // `LINEAR_BITS - 1` bits pick one of SUB sub-buckets.
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - (LINEAR_BITS - 1))) & (SUB - 1);
    (LINEAR + SUB * u64::from(exp - LINEAR_BITS) + sub) as usize
}

/// The smallest and largest value of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < LINEAR {
        return (i, i);
    }
    let exp = LINEAR_BITS + ((i - LINEAR) / SUB) as u32;
    let sub = (i - LINEAR) % SUB;
    let width = 1u64 << (exp - (LINEAR_BITS - 1));
    let low = (1u64 << exp) + sub * width;
    (low, low + (width - 1))
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }

    /// Counts one value.
    pub fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.total += 1;
    }

    /// Values counted.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Adds `other`'s counts to this one's.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile (`0 < q <= 1`): the middle of the bucket holding
    /// the value of rank `ceil(q × len)`; `None` when empty or `q` is out
    /// of range.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 || !(q > 0.0 && q <= 1.0) {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, high) = bounds(i);
                return Some(low + (high - low) / 2);
            }
        }
        unreachable!("the counts add up to total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values_in_order() {
        assert_eq!(bounds(0), (0, 0));
        assert_eq!(bounds(63), (63, 63));
        assert_eq!(bounds(64), (64, 65));
        assert_eq!(bounds(BUCKETS - 1).1, u64::MAX);
        for i in 1..BUCKETS {
            assert_eq!(bounds(i).0, bounds(i - 1).1 + 1, "bucket {i}");
        }
        for v in [0, 1, 63, 64, 65, 66, 127, 128, 1000, 123_456_789, u64::MAX] {
            let (low, high) = bounds(index(v));
            assert!(low <= v && v <= high, "{v} in [{low}, {high}]");
            // A bucket is at most 1/32 of its values wide.
            assert!((high - low) <= low / 32, "{v}: [{low}, {high}]");
        }
    }

    #[test]
    fn quantiles_are_within_three_percent() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        assert_eq!(h.len(), 100_000);
        for (q, exact) in [(0.5, 500_000.0), (0.99, 990_000.0), (1.0, 1_000_000.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                (got - exact).abs() / exact < 0.03,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile(0.0), None);
        assert_eq!(h.quantile(1.5), None);
        assert_eq!(Histogram::new().quantile(0.5), None);
    }

    #[test]
    fn small_values_are_exact_and_merge_adds() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..10 {
            a.record(v);
        }
        for _ in 0..90 {
            b.record(40);
        }
        a.merge(&b);
        assert_eq!(a.len(), 100);
        assert_eq!(a.quantile(0.05), Some(4));
        assert_eq!(a.quantile(0.11), Some(40));
        assert_eq!(a.quantile(1.0), Some(40));
    }
}
