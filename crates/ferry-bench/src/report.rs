//! Result reporting shared by every experiment: one [`Record`] per measured
//! (case, system) pair, printed either as a JSON line (machine-readable, one
//! object per line) or as rows of an aligned text [`Table`].
//!
//! This module owns the output formats; the leading keys of a JSON line
//! (`experiment`, `case`, `system`, `ns_per_op`, `runs`) are a stable
//! interface that scripts may parse.

use serde::Serialize;

use crate::measure::Stats;
use ferry_report::round2;
pub use ferry_report::{Align, Table};

/// The result of one (case, system) pair of an experiment.
///
/// Field order is the key order of the JSON line: keep the first five first.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Experiment name, the subcommand (e.g. `"queues"`).
    pub experiment: &'static str,
    /// Which scenario (e.g. `"2-thread"`).
    pub case: String,
    /// Which implementation (e.g. `"ferry spsc"`).
    pub system: String,
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
}

impl Record {
    /// Builds a record from the summary of its runs. Nanosecond figures are
    /// rounded to 0.01 ns, far below run-to-run noise.
    pub fn new(
        experiment: &'static str,
        case: &str,
        system: &str,
        stats: &Stats,
        items: u64,
    ) -> Record {
        Record {
            experiment,
            case: case.to_owned(),
            system: system.to_owned(),
            ns_per_op: round2(stats.median),
            runs: stats.runs,
            min: round2(stats.min),
            max: round2(stats.max),
            items,
        }
    }

    /// This record as one line of JSON, without the trailing newline.
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("a Record always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(median: f64, min: f64, max: f64, runs: usize) -> Stats {
        Stats {
            median,
            min,
            max,
            runs,
        }
    }

    #[test]
    fn json_line_has_the_stable_keys_first_in_order() {
        let r = Record::new(
            "queues",
            "2-thread",
            "ferry spsc",
            &stats(12.3, 11.0, 14.5, 7),
            1000,
        );
        let line = r.json_line();
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with(
                r#"{"experiment":"queues","case":"2-thread","system":"ferry spsc","ns_per_op":12.3,"runs":7,"#
            ),
            "{line}"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["min"], 11.0);
        assert_eq!(v["max"], 14.5);
        assert_eq!(v["items"], 1000);
    }

    #[test]
    fn json_line_rounds_to_hundredths() {
        let r = Record::new("queues", "c", "s", &stats(1.23456, 1.0, 2.0, 5), 1);
        assert_eq!(r.ns_per_op, 1.23);
        assert!(r.json_line().contains(r#""ns_per_op":1.23,"#));
    }

    #[test]
    fn table_pads_columns_and_aligns() {
        let mut t = Table::new(&[("name", Align::Left), ("ns", Align::Right)]);
        t.push_row(vec!["a".into(), "1.5".into()]);
        t.push_row(vec!["longer".into(), "12.25".into()]);
        assert_eq!(
            t.render(),
            "name       ns\n\
             ------  -----\n\
             a         1.5\n\
             longer  12.25\n"
        );
    }

    #[test]
    #[should_panic(expected = "row has 1 cells")]
    fn table_rejects_short_rows() {
        let mut t = Table::new(&[("a", Align::Left), ("b", Align::Left)]);
        t.push_row(vec!["x".into()]);
    }
}
