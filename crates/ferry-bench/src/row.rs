//! The one result type of every experiment: a [`Row`] per measured
//! (case, system) pair, holding one sample per run, summarised on demand
//! (median, min, max) and written as one JSON line.
//!
//! This module owns the row and its JSON form. The leading keys of a JSON
//! line (`experiment`, `case`, `system`, `ns_per_op`, `runs`) are the
//! project's output contract; then come `min`, `max`, `items`, `unit`,
//! `value`, the row's extra quantities, and `absent` for a row without
//! samples. It knows nothing about tables ([`crate::report`]) or about any
//! experiment.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::measure::Stats;
use ferry_report::round2;

/// The unit of a row's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds (per operation, or a latency).
    Ns,
    /// A count (events, calls), or a ratio of counts.
    Count,
    /// Bytes (of memory).
    Bytes,
    /// Something per second; the name says what (e.g. `"round trips/s"`).
    Rate(&'static str),
}

impl Unit {
    /// The unit's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Count => "count",
            Unit::Bytes => "bytes",
            Unit::Rate(name) => name,
        }
    }

    /// A number in this unit for a table: ns with 2 decimals below 1000,
    /// else whole; counts whole (2 decimals if fractional); rates and
    /// bytes whole.
    pub fn format(self, x: f64) -> String {
        match self {
            Unit::Ns if x >= 1000.0 => format!("{x:.0}"),
            Unit::Ns => format!("{x:.2}"),
            Unit::Count if x.fract() == 0.0 => format!("{x:.0}"),
            Unit::Count => format!("{x:.2}"),
            Unit::Rate(_) | Unit::Bytes => format!("{x:.0}"),
        }
    }
}

/// The result of one (case, system) pair of an experiment over its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Experiment name, the subcommand (e.g. `"queues"`).
    pub experiment: &'static str,
    /// Which scenario (e.g. `"2-thread"`, `"FORK;JOIN"`).
    pub case: String,
    /// Which implementation or quantity (e.g. `"ferry spsc"`).
    pub system: String,
    /// The unit of the samples.
    pub unit: Unit,
    /// One sample per run, in run order (sample `k` was taken in round `k`).
    pub samples: Vec<f64>,
    /// Operations timed in each run (the last run's, where runs differ).
    pub items: u64,
    /// Further quantities of the row, each already reduced to one number,
    /// printed as extra columns and JSON keys in this order.
    pub extra: Vec<(&'static str, f64)>,
    /// Why a row without samples has none.
    pub absent: Option<String>,
}

impl Row {
    /// A row of `samples` (one per run) of `items` operations each.
    pub fn new(
        experiment: &'static str,
        case: impl Into<String>,
        system: impl Into<String>,
        unit: Unit,
        samples: Vec<f64>,
        items: u64,
    ) -> Row {
        Row {
            experiment,
            case: case.into(),
            system: system.into(),
            unit,
            samples,
            items,
            extra: Vec::new(),
            absent: None,
        }
    }

    /// A row that could not be measured, and why.
    pub fn absent(
        experiment: &'static str,
        case: impl Into<String>,
        system: impl Into<String>,
        unit: Unit,
        reason: impl Into<String>,
    ) -> Row {
        Row {
            absent: Some(reason.into()),
            ..Row::new(experiment, case, system, unit, Vec::new(), 0)
        }
    }

    /// This row with one more extra quantity.
    pub fn with(mut self, key: &'static str, value: f64) -> Row {
        self.extra.push((key, value));
        self
    }

    /// The summary of the samples; `None` if there are none (or a NaN).
    pub fn stats(&self) -> Option<Stats> {
        Stats::from_samples(&self.samples)
    }

    /// The median of the samples, if any.
    pub fn median(&self) -> Option<f64> {
        self.stats().map(|s| s.median)
    }

    /// Why the row has no summary, if it has none.
    pub fn absent_reason(&self) -> Option<&str> {
        match self.stats() {
            Some(_) => None,
            None => Some(self.absent.as_deref().unwrap_or("no samples")),
        }
    }

    /// The median as ns per operation: the median itself for ns, its
    /// reciprocal for a rate, none for a count.
    fn ns_per_op(&self, s: &Stats) -> Option<f64> {
        match self.unit {
            Unit::Ns => Some(s.median),
            Unit::Rate(_) if s.median > 0.0 => Some(1e9 / s.median),
            _ => None,
        }
    }

    /// This row as one line of JSON, without the trailing newline. Numbers
    /// are rounded to 0.01, far below run-to-run noise.
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("a Row always serialises")
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let stats = self.stats();
        let r = |x: f64| round2(x);
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("experiment", self.experiment)?;
        m.serialize_entry("case", &self.case)?;
        m.serialize_entry("system", &self.system)?;
        m.serialize_entry("ns_per_op", &stats.and_then(|s| self.ns_per_op(&s)).map(r))?;
        m.serialize_entry("runs", &stats.map_or(0, |s| s.runs))?;
        m.serialize_entry("min", &stats.map(|s| r(s.min)))?;
        m.serialize_entry("max", &stats.map(|s| r(s.max)))?;
        m.serialize_entry("items", &self.items)?;
        m.serialize_entry("unit", self.unit.name())?;
        m.serialize_entry("value", &stats.map(|s| r(s.median)))?;
        for (key, value) in &self.extra {
            m.serialize_entry(key, &r(*value))?;
        }
        if let Some(reason) = self.absent_reason() {
            m.serialize_entry("absent", reason)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_the_stable_keys_first_in_order() {
        let r = Row::new(
            "queues",
            "2-thread",
            "ferry spsc",
            Unit::Ns,
            vec![12.3, 11.0, 14.5, 12.0, 13.0, 12.5, 12.1],
            1000,
        );
        let line = r.json_line();
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with(
                r#"{"experiment":"queues","case":"2-thread","system":"ferry spsc","ns_per_op":12.3,"runs":7,"min":11.0,"max":14.5,"items":1000,"unit":"ns","value":12.3"#
            ),
            "{line}"
        );
        assert!(!line.contains("absent"), "{line}");
    }

    #[test]
    fn json_line_rounds_to_hundredths() {
        let r = Row::new("queues", "c", "s", Unit::Ns, vec![1.23456; 5], 1);
        assert!(r.json_line().contains(r#""ns_per_op":1.23,"#));
    }

    #[test]
    fn an_absent_row_has_null_numbers_and_a_reason() {
        let r = Row::absent("threads", "YIELD", "go GOMAXPROCS=1", Unit::Ns, "no go");
        let v: serde_json::Value = serde_json::from_str(&r.json_line()).unwrap();
        assert_eq!(v["ns_per_op"], serde_json::Value::Null);
        assert_eq!(v["runs"], 0);
        assert_eq!(v["absent"], "no go");
        let empty = Row::new("x", "c", "s", Unit::Ns, vec![], 0);
        assert_eq!(empty.absent_reason(), Some("no samples"));
    }

    #[test]
    fn counts_have_no_ns_and_rates_give_their_reciprocal() {
        let c = Row::new("u", "c", "events", Unit::Count, vec![200.0; 3], 200);
        let v: serde_json::Value = serde_json::from_str(&c.json_line()).unwrap();
        assert_eq!(v["ns_per_op"], serde_json::Value::Null);
        assert_eq!(v["value"], 200.0);
        let rate = Row::new("u", "c", "r", Unit::Rate("round trips/s"), vec![1e6; 3], 0)
            .with("elapsed_ms", 100.004);
        let line = rate.json_line();
        assert!(
            line.ends_with(r#""unit":"round trips/s","value":1000000.0,"elapsed_ms":100.0}"#),
            "{line}"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ns_per_op"], 1000.0);
    }

    #[test]
    fn summary_is_median_min_max() {
        let r = Row::new("x", "c", "s", Unit::Ns, vec![9.0, 1.0, 5.0, 3.0, 7.0], 1);
        let s = r.stats().unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (5.0, 1.0, 9.0, 5));
        assert_eq!(Unit::Ns.format(1234.4), "1234");
        assert_eq!(Unit::Ns.format(12.345), "12.35");
        assert_eq!(Unit::Count.format(3.0), "3");
        assert_eq!(Unit::Count.format(0.5), "0.50");
    }
}
