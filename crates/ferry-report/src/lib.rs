//! How ferry's experiments reduce and print their numbers: [`Stats`] of
//! repeated runs (median, min, max) and aligned text [`Table`]s. Shared by
//! `ferry-bench` and the `ferry` command so that both report alike.
//!
//! This crate owns number reduction and text layout only; each tool keeps
//! its own JSON record (whose first five keys, `experiment`, `case`,
//! `system`, `ns_per_op`, `runs`, are the project's output contract).

#![deny(missing_docs)]

/// Summary of the samples (for example ns per operation) of repeated runs of one
/// measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Median of the samples; for an even count, the mean of the two middle ones.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub runs: usize,
}

impl Stats {
    /// Summarises `samples`. Returns `None` for an empty slice or if any
    /// sample is NaN, since neither has a meaningful median.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Stats {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            runs: n,
        })
    }
}

/// How a table column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right (text).
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A plain-text table whose columns are padded to their widest cell.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers and alignments (same length).
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; it must have one cell per column.
    pub fn push_row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.headers.len(),
            "row has {} cells, table has {} columns",
            cells.len(),
            self.headers.len()
        );
        self.rows.push(cells);
    }

    /// Renders header, a dashed rule and the rows, each line ending in `\n`.
    /// Columns are separated by two spaces; trailing spaces are trimmed.
    pub fn render(&self) -> String {
        self.render_indented("")
    }

    /// As [`render`](Self::render), with every line starting with `indent`.
    pub fn render_indented(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .zip(&self.align)
                .map(|((cell, &w), align)| match align {
                    Align::Left => format!("{cell:<w$}"),
                    Align::Right => format!("{cell:>w$}"),
                })
                .collect();
            format!("{indent}{}\n", padded.join("  ").trim_end())
        };
        let mut out = line(&self.headers);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&line(&rule));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// `x` rounded to 0.01, far below run-to-run noise of a nanosecond figure.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(Stats::from_samples(&[9.0, 1.0, 5.0]).unwrap().median, 5.0);
        assert_eq!(Stats::from_samples(&[1.0, 4.0]).unwrap().median, 2.5);
        assert_eq!(Stats::from_samples(&[]), None);
    }

    #[test]
    fn indented_table() {
        let mut t = Table::new(&[("a", Align::Left), ("ns", Align::Right)]);
        t.push_row(vec!["x".into(), "1 µs".into()]);
        assert_eq!(t.render_indented("  "), "  a    ns\n  -  ----\n  x  1 µs\n");
        assert_eq!(t.render(), "a    ns\n-  ----\nx  1 µs\n");
    }
}
