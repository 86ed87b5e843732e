//! The samples of an `upcalls` invocation as they are gathered: a
//! [`Row`] per (case, quantity), one sample per run, the first reason a
//! run had no sample, and the scenarios that failed in a run.
//!
//! This module owns the gathering; summaries and printing are
//! [`crate::row`]'s and [`crate::report`]'s.

use super::EXPERIMENT;
use super::sys::Delta;
use crate::row::{Row, Unit};

/// All quantities of an invocation, in the order first reported.
#[derive(Debug, Default)]
pub(super) struct Collector {
    /// A row per (case, quantity); the quantity is the row's system.
    pub rows: Vec<Row>,
    /// Scenarios that failed in a run: (case, reason).
    pub failures: Vec<(&'static str, String)>,
}

impl Collector {
    /// The row `(case, quantity)`, made if new.
    fn entry(&mut self, case: &'static str, quantity: &str, unit: Unit) -> &mut Row {
        let i = match self
            .rows
            .iter()
            .position(|m| m.case == case && m.system == quantity)
        {
            Some(i) => i,
            None => {
                self.rows
                    .push(Row::new(EXPERIMENT, case, quantity, unit, Vec::new(), 0));
                self.rows.len() - 1
            }
        };
        &mut self.rows[i]
    }

    /// Adds one run's sample.
    pub fn push(&mut self, case: &'static str, quantity: &str, unit: Unit, items: u64, value: f64) {
        let m = self.entry(case, quantity, unit);
        if value.is_finite() {
            m.samples.push(value);
            m.items = items;
        } else if m.absent.is_none() {
            m.absent = Some("not a finite number".to_owned());
        }
    }

    /// Notes that a run had no sample for the quantity, and why.
    pub fn miss(&mut self, case: &'static str, quantity: &str, unit: Unit, reason: &str) {
        let m = self.entry(case, quantity, unit);
        if m.absent.is_none() {
            m.absent = Some(reason.to_owned());
        }
    }

    /// Adds an event latency's mean (and max) with its count, or notes that
    /// no event was delivered.
    pub fn push_latency(&mut self, case: &'static str, name: &str, d: &Delta, with_max: bool) {
        let mean = format!("stats.{name}.mean");
        if d.count == 0 {
            self.miss(case, &mean, Unit::Ns, "no event delivered");
        } else {
            self.push(case, &mean, Unit::Ns, d.count, d.mean_ns);
            if with_max {
                self.push(
                    case,
                    &format!("stats.{name}.max"),
                    Unit::Ns,
                    d.count,
                    d.max_ns,
                );
            }
        }
        self.push(
            case,
            &format!("stats.{name}.count"),
            Unit::Count,
            d.count,
            d.count as f64,
        );
    }

    /// Records that a scenario failed in a run.
    pub fn fail(&mut self, case: &'static str, reason: String) {
        if !self
            .failures
            .iter()
            .any(|(c, r)| *c == case && *r == reason)
        {
            self.failures.push((case, reason));
        }
    }

    /// The median of `(case, quantity)`'s samples, if any.
    pub fn median(&self, case: &str, quantity: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|m| m.case == case && m.system == quantity)
            .and_then(Row::median)
    }

    /// The rows of the cases starting with `prefix`, and a line per failed
    /// run of those cases.
    pub fn take(&mut self, prefix: &str) -> (Vec<Row>, String) {
        let (mine, rest) = std::mem::take(&mut self.rows)
            .into_iter()
            .partition(|r| r.case.starts_with(prefix));
        self.rows = rest;
        let failed = self
            .failures
            .iter()
            .filter(|(c, _)| c.starts_with(prefix))
            .map(|(c, reason)| format!("failed run: {c}: {reason}\n"))
            .collect();
        (mine, failed)
    }
}
