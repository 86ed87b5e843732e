//! What an experiment hands back: a [`Report`] of titled [`Section`]s, each
//! a list of [`Row`]s with the ratio columns to print beside them and notes
//! (targets, verdicts, failed runs) to print after them; and the one table
//! printer and the one JSON form for all of them.
//!
//! This module owns the text layout of every experiment's results; it
//! knows no experiment. How a row reduces its samples is [`crate::row`]'s.

use std::fmt::Write as _;

pub use ferry_report::{Align, Table};

pub use crate::error::Error;
use crate::row::Row;

/// A ratio column: each row's median over another row's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ratio {
    /// Over the median of `system` in the same case.
    ToSystem {
        /// Column header.
        header: &'static str,
        /// The baseline system.
        system: String,
    },
    /// Over the median of the same system in `case`.
    ToCase {
        /// Column header.
        header: &'static str,
        /// The baseline case.
        case: String,
    },
}

impl Ratio {
    /// Against `system` in the same case.
    pub fn to_system(header: &'static str, system: impl Into<String>) -> Ratio {
        Ratio::ToSystem {
            header,
            system: system.into(),
        }
    }

    fn header(&self) -> &'static str {
        match self {
            Ratio::ToSystem { header, .. } | Ratio::ToCase { header, .. } => header,
        }
    }

    /// The cell for `row` among `rows`: `-` without a baseline.
    fn cell(&self, row: &Row, rows: &[Row]) -> String {
        let base = rows.iter().find(|b| {
            b.unit == row.unit
                && match self {
                    Ratio::ToSystem { system, .. } => b.case == row.case && b.system == *system,
                    Ratio::ToCase { case, .. } => b.system == row.system && b.case == *case,
                }
        });
        match (row.median(), base.and_then(Row::median)) {
            (Some(x), Some(b)) if b > 0.0 => format!("{:.2}x", x / b),
            _ => "-".to_owned(),
        }
    }
}

/// The median of the row of `case` and `system` in `rows`, if there is one
/// with samples.
pub fn row_median(rows: &[Row], case: &str, system: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.case == case && r.system == system)
        .and_then(Row::median)
}

/// A goal line's verdict: ferry's median `f` over the peer's `p` as a ratio
/// and whether `met(f, p)`; "not measured (not met)" without both.
pub fn ratio_verdict(f: Option<f64>, p: Option<f64>, met: fn(f64, f64) -> bool) -> String {
    match (f, p) {
        (Some(f), Some(p)) if p > 0.0 => format!(
            "{:.2}x ({})",
            f / p,
            if met(f, p) { "met" } else { "not met" }
        ),
        _ => "not measured (not met)".to_owned(),
    }
}

/// One table of a report.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// A line printed above the table (empty: none).
    pub title: String,
    /// Headers of the case and system columns; `("case", "system")` if empty.
    pub headers: (&'static str, &'static str),
    /// The rows, in print order.
    pub rows: Vec<Row>,
    /// Ratio columns, after the numbers.
    pub ratios: Vec<Ratio>,
    /// Text after the table (each line ending in `\n`).
    pub notes: String,
}

impl Section {
    /// The table, a line per absent (system, reason) naming its cases, and
    /// the notes.
    pub fn render(&self) -> String {
        let (case_h, system_h) = match self.headers {
            ("", "") => ("case", "system"),
            h => h,
        };
        let one_unit = self
            .rows
            .first()
            .map(|r| r.unit)
            .filter(|u| self.rows.iter().all(|r| r.unit == *u));
        let median_h = match one_unit {
            Some(u) => format!("median {}", u.name()),
            None => "median".to_owned(),
        };
        let mut extras: Vec<&'static str> = Vec::new();
        for (key, _) in self.rows.iter().flat_map(|r| &r.extra) {
            if !extras.contains(key) {
                extras.push(key);
            }
        }
        let mut cols = vec![
            (case_h, Align::Left),
            (system_h, Align::Left),
            (median_h.as_str(), Align::Right),
            ("min", Align::Right),
            ("max", Align::Right),
        ];
        if one_unit.is_none() {
            cols.push(("unit", Align::Left));
        }
        cols.extend(extras.iter().map(|k| (*k, Align::Right)));
        cols.extend(self.ratios.iter().map(|r| (r.header(), Align::Right)));
        let mut t = Table::new(&cols);
        // (system, reason, cases) of absent rows.
        let mut absent: Vec<(&str, &str, Vec<&str>)> = Vec::new();
        for row in &self.rows {
            let mut cells = vec![row.case.clone(), row.system.clone()];
            match row.stats() {
                Some(s) => {
                    cells.extend([s.median, s.min, s.max].map(|x| row.unit.format(x)));
                }
                None => {
                    cells.extend(["absent", "-", "-"].map(str::to_owned));
                    let reason = row.absent_reason().unwrap_or_default();
                    match absent
                        .iter_mut()
                        .find(|(s, r, _)| *s == row.system && *r == reason)
                    {
                        Some((_, _, cases)) => cases.push(&row.case),
                        None => absent.push((&row.system, reason, vec![&row.case])),
                    }
                }
            }
            if one_unit.is_none() {
                cells.push(row.unit.name().to_owned());
            }
            for key in &extras {
                cells.push(match row.extra.iter().find(|(k, _)| k == key) {
                    Some((_, v)) if v.fract() == 0.0 => format!("{v:.0}"),
                    Some((_, v)) => format!("{v:.1}"),
                    None => "-".to_owned(),
                });
            }
            cells.extend(self.ratios.iter().map(|r| r.cell(row, &self.rows)));
            t.push_row(cells);
        }
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "{}", self.title);
        }
        out.push_str(&t.render());
        let mut all_cases: Vec<&str> = self.rows.iter().map(|r| r.case.as_str()).collect();
        all_cases.dedup();
        for (system, reason, cases) in absent {
            let which = if cases.len() > 1 && cases.len() == all_cases.len() {
                "all rows".to_owned()
            } else {
                cases.join(", ")
            };
            let _ = writeln!(out, "absent: {which} / {system}: {reason}");
        }
        out.push_str(&self.notes);
        out
    }
}

/// Everything one invocation of an experiment found.
#[derive(Debug, Clone)]
pub struct Report {
    /// Which `docs/results/<doc>.md` (and template) this report regenerates.
    pub doc: &'static str,
    /// A line printed above the sections (empty: none).
    pub title: String,
    /// The tables, in print order.
    pub sections: Vec<Section>,
}

impl Report {
    /// A report of one section without title.
    pub fn single(experiment: &'static str, section: Section) -> Report {
        Report {
            doc: experiment,
            title: String::new(),
            sections: vec![section],
        }
    }

    /// Every row of every section.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.sections.iter().flat_map(|s| &s.rows)
    }

    /// The tables and their notes, as printed without `--json`.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "{}\n", self.title);
        }
        let parts: Vec<String> = self.sections.iter().map(Section::render).collect();
        out.push_str(&parts.join("\n"));
        out
    }

    /// One JSON line per row, as printed with `--json`.
    pub fn json_lines(&self) -> String {
        self.rows().map(|r| r.json_line() + "\n").collect()
    }

    /// The notes of every section (printed on stderr with `--json`).
    pub fn notes(&self) -> String {
        self.sections.iter().map(|s| s.notes.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Unit;

    fn row(case: &str, system: &str, x: f64) -> Row {
        Row::new("t", case, system, Unit::Ns, vec![x; 5], 100)
    }

    #[test]
    fn ratios_are_against_the_same_case_and_dash_without_baseline() {
        let s = Section {
            rows: vec![
                row("1-thread", "base", 10.0),
                row("1-thread", "x", 5.0),
                row("2-thread", "x", 5.0),
            ],
            ratios: vec![Ratio::to_system("vs base", "base")],
            ..Section::default()
        };
        let out = s.render();
        assert_eq!(
            out,
            "case      system  median ns    min    max  vs base\n\
             --------  ------  ---------  -----  -----  -------\n\
             1-thread  base        10.00  10.00  10.00    1.00x\n\
             1-thread  x            5.00   5.00   5.00    0.50x\n\
             2-thread  x            5.00   5.00   5.00        -\n",
            "{out}"
        );
    }

    #[test]
    fn ratio_to_a_case_follows_the_system() {
        let s = Section {
            rows: vec![
                row("undisturbed", "a", 100.0),
                row("M=1", "a", 50.0),
                row("M=1", "b", 50.0),
            ],
            ratios: vec![Ratio::ToCase {
                header: "vs undisturbed",
                case: "undisturbed".into(),
            }],
            ..Section::default()
        };
        let out = s.render();
        let line = |sys: &str| {
            out.lines()
                .find(|l| l.starts_with("M=1") && l.contains(&format!(" {sys} ")))
                .unwrap()
                .to_owned()
        };
        assert!(line("a").ends_with("0.50x"), "{out}");
        assert!(line("b").ends_with('-'), "{out}");
    }

    #[test]
    fn mixed_units_get_a_unit_column_and_absent_rows_a_note() {
        let s = Section {
            headers: ("row", "quantity"),
            rows: vec![
                row("a", "lat", 1500.0),
                Row::new("t", "a", "events", Unit::Count, vec![200.0; 3], 200),
                Row::absent("t", "a", "gone", Unit::Ns, "not built"),
                Row::absent("t", "b", "gone", Unit::Ns, "not built"),
            ],
            notes: "a note\n".into(),
            ..Section::default()
        };
        let out = s.render();
        assert!(out.starts_with("row  quantity  median"), "{out}");
        assert!(out.lines().next().unwrap().ends_with("unit"), "{out}");
        assert!(out.contains("1500"), "{out}");
        assert!(
            out.contains("absent: all rows / gone: not built\n"),
            "{out}"
        );
        assert!(out.ends_with("a note\n"), "{out}");
    }

    #[test]
    fn json_form_is_one_line_per_row_and_notes_apart() {
        let s = Section {
            title: "title".into(),
            rows: vec![row("c", "s", 1.0), row("c", "t", 2.0)],
            notes: "target: met\n".into(),
            ..Section::default()
        };
        let r = Report::single("t", s);
        let json = r.json_lines();
        assert_eq!(json.lines().count(), 2);
        assert!(json.lines().all(|l| l.starts_with(r#"{"experiment":"t","#)));
        assert_eq!(r.notes(), "target: met\n");
        assert!(r.text().starts_with("title\ncase"));
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
}
