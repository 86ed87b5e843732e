//! Output: one [`Record`] per measured (case, system) pair as a JSON line,
//! and aligned text [`Table`]s for people.
//!
//! The first five keys of a JSON line (`experiment`, `case`, `system`,
//! `ns_per_op`, `runs`) are the project's output contract, shared with
//! `ferry-bench`; scripts may parse them.

use serde::Serialize;

use crate::measure::Measured;
use ferry_report::round2;
pub use ferry_report::{Align, Table};

/// The result of one (case, system) pair.
///
/// Field order is the key order of the JSON line: keep the first five first.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// The subcommand (`"tour"`).
    pub experiment: &'static str,
    /// Which scenario (unique within the experiment).
    pub case: String,
    /// Which implementation (`"ferry"` or `"std"`).
    pub system: &'static str,
    /// Median over the runs of nanoseconds per operation.
    pub ns_per_op: f64,
    /// Number of runs the median is taken over.
    pub runs: usize,
    /// Fastest run, ns per operation.
    pub min: f64,
    /// Slowest run, ns per operation.
    pub max: f64,
    /// Operations timed in each run.
    pub items: u64,
    /// The tour stop (or other grouping) the case belongs to.
    pub stop: &'static str,
}

impl Record {
    /// A record from a measurement; ns figures rounded to 0.01 ns.
    pub fn new(
        experiment: &'static str,
        stop: &'static str,
        case: &str,
        system: &'static str,
        m: &Measured,
    ) -> Record {
        Record {
            experiment,
            case: case.to_owned(),
            system,
            ns_per_op: round2(m.stats.median),
            runs: m.stats.runs,
            min: round2(m.stats.min),
            max: round2(m.stats.max),
            items: m.items,
            stop,
        }
    }

    /// This record as one line of JSON, without the trailing newline.
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("a Record always serialises")
    }
}

/// A duration in ns, in the unit that keeps it readable.
pub fn fmt_ns(ns: f64) -> String {
    if ns < 10.0 {
        format!("{ns:.2} ns")
    } else if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

/// A count with thousands separators: `10000` → `10,000`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Stats;

    #[test]
    fn json_line_keeps_the_contract_keys_first() {
        let m = Measured {
            stats: Stats {
                median: 12.345,
                min: 11.0,
                max: 14.5,
                runs: 5,
            },
            items: 100,
        };
        let line = Record::new("tour", "threads", "spawn+join", "ferry", &m).json_line();
        assert!(
            line.starts_with(
                r#"{"experiment":"tour","case":"spawn+join","system":"ferry","ns_per_op":12.35,"runs":5,"#
            ),
            "{line}"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(10000), "10,000");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1_000_000), "1,000,000");
        assert_eq!(fmt_ns(1.234), "1.23 ns");
        assert_eq!(fmt_ns(123.4), "123 ns");
        assert_eq!(fmt_ns(12_345.0), "12.35 µs");
        assert_eq!(fmt_ns(12_345_678.0), "12.35 ms");
    }

    #[test]
    fn table_aligns_with_wide_chars() {
        let mut t = Table::new(&[("a", Align::Left), ("ns", Align::Right)]);
        t.push_row(vec!["x".into(), "1 µs".into()]);
        assert_eq!(t.render_indented("  "), "  a    ns\n  -  ----\n  x  1 µs\n");
    }
}
