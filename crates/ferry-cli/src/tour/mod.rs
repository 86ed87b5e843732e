//! `ferry tour`: a short guided tour of what ferry can do so far, each stop
//! measured beside the kernel-thread baseline (std threads, std::sync) in
//! the same run.
//!
//! A stop is a module with a `pub const STOP: Stop` whose `run` measures at
//! a given [`Scale`] and returns a [`Visit`]: a few lines of explanation and
//! rows of "ferry vs std". To add a stop: write the module and append its
//! `STOP` to [`STOPS`]. Measurements are real runs of the real paths,
//! reduced to medians (see [`crate::measure`]); nothing is hard-coded.

mod grpc;
mod migrating;
mod rpc;
mod sleeping;
mod switching;
mod sync;
mod threads;
mod yielding;

use std::io::{self, Write};
use std::time::Instant;

use crate::measure::{self, Measured};
use crate::report::{Align, Record, Table, fmt_ns};

/// Options of `ferry tour`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object per measurement (keys experiment, case, system,
    /// ns_per_op, runs, ...) instead of the guided text
    #[arg(long)]
    json: bool,
    /// A shorter tour: the same as `--scale quick`
    #[arg(long, conflicts_with = "scale")]
    quick: bool,
    /// How big the experiments are: full, quick, or tiny (a smoke test)
    #[arg(long, value_enum, default_value_t = Scale::Full)]
    scale: Scale,
}

/// How big the tour's experiments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// The tour as shown to people (a few seconds in release).
    Full,
    /// Smaller counts and fewer runs (`--quick`).
    Quick,
    /// Just enough to exercise every path (tests, debug builds).
    Tiny,
}

impl Scale {
    /// The value for this scale.
    pub fn pick<T>(self, full: T, quick: T, tiny: T) -> T {
        match self {
            Scale::Full => full,
            Scale::Quick => quick,
            Scale::Tiny => tiny,
        }
    }

    /// Runs per measurement; the median of them is reported.
    pub fn runs(self) -> usize {
        self.pick(5, 3, 2)
    }
}

/// One stop of the tour.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    /// Short stable name, the `stop` key of JSON lines.
    pub name: &'static str,
    /// The heading shown to people.
    pub title: &'static str,
    /// Measures and explains.
    pub run: fn(Scale) -> io::Result<Visit>,
}

/// What a stop found.
#[derive(Debug, Default)]
pub struct Visit {
    /// Plain explanation, one line each (2–4 lines).
    pub lines: Vec<String>,
    /// The measurements, ferry beside std; none for a stop that shows
    /// what it found without a comparison (then no table is drawn).
    pub rows: Vec<Row>,
    /// Set when the stop cannot be measured yet (then `rows` is empty).
    pub pending: Option<&'static str>,
}

/// One comparison: the same case run on ferry and on std.
#[derive(Debug)]
pub struct Row {
    /// Stable name of the case, unique in the tour (the `case` JSON key).
    pub case: String,
    /// What people read in the table.
    pub label: String,
    /// ferry's result.
    pub ferry: Measured,
    /// The kernel-thread baseline's result.
    pub std: Measured,
}

impl Row {
    /// How many times faster ferry was (std ÷ ferry).
    pub fn ratio(&self) -> f64 {
        self.std.stats.median / self.ferry.stats.median
    }
}

/// The stops, in tour order.
pub const STOPS: &[Stop] = &[
    threads::STOP,
    switching::STOP,
    yielding::STOP,
    sleeping::STOP,
    sync::STOP,
    rpc::STOP,
    migrating::STOP,
    grpc::STOP,
];

/// Runs `ferry tour`.
pub fn run(args: &Args) -> io::Result<()> {
    let scale = if args.quick { Scale::Quick } else { args.scale };
    let mut out = io::stdout().lock();
    let began = Instant::now();
    if !args.json {
        writeln!(
            out,
            "ferry tour: what ferry can do so far, beside kernel threads (std::thread, \
             std::sync) in the same run"
        )?;
        writeln!(out, "machine: {}", machine())?;
        let files = ferry::Runtime::builder()
            .processors(1)
            .run(|| ferry::Handle::current().fs_backend())?;
        writeln!(out, "files (ferry::fs): {files}")?;
        writeln!(
            out,
            "each figure is the median of {} runs; std÷ferry above 1 means ferry was faster",
            scale.runs()
        )?;
    }
    let mut rows = Vec::new();
    for (i, stop) in STOPS.iter().enumerate() {
        let visit = (stop.run)(scale)?;
        if args.json {
            for row in &visit.rows {
                for (system, m) in [("ferry", &row.ferry), ("std", &row.std)] {
                    let record = Record::new("tour", stop.name, &row.case, system, m);
                    writeln!(out, "{}", record.json_line())?;
                }
            }
        } else {
            write!(out, "\n{}. {}\n", i + 1, stop.title)?;
            write!(out, "{}", render(&visit))?;
        }
        out.flush()?;
        rows.extend(visit.rows);
    }
    if !args.json {
        writeln!(out, "\n{}", summary(&rows, began.elapsed().as_secs_f64()))?;
    }
    Ok(())
}

/// Runs every stop at `scale`, for tests and other callers.
#[cfg(test)]
pub fn visit_all(scale: Scale) -> io::Result<Vec<(Stop, Visit)>> {
    STOPS
        .iter()
        .map(|stop| Ok((*stop, (stop.run)(scale)?)))
        .collect()
}

/// A stop's text: its explanation and its table.
fn render(visit: &Visit) -> String {
    let mut s = String::new();
    for paragraph in &visit.lines {
        for line in wrap(paragraph, WIDTH) {
            s.push_str("   ");
            s.push_str(&line);
            s.push('\n');
        }
    }
    if let Some(pending) = visit.pending {
        s.push_str(&format!("   TODO: {pending}\n"));
        return s;
    }
    if visit.rows.is_empty() {
        return s;
    }
    let mut table = Table::new(&[
        ("case", Align::Left),
        ("ferry", Align::Right),
        ("std", Align::Right),
        ("std÷ferry", Align::Right),
    ]);
    for row in &visit.rows {
        table.push_row(vec![
            row.label.clone(),
            fmt_ns(row.ferry.stats.median),
            fmt_ns(row.std.stats.median),
            format!("{:.1}×", row.ratio()),
        ]);
    }
    s.push('\n');
    s.push_str(&table.render_indented("   "));
    s
}

/// Columns the explanation is wrapped to (after a 3-space indent).
const WIDTH: usize = 92;

/// Splits `text` into lines of at most `width` characters at spaces (a
/// longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The closing line: how often ferry won, and by how much overall.
fn summary(rows: &[Row], seconds: f64) -> String {
    if rows.is_empty() {
        return format!("summary: nothing measured ({seconds:.1} s)");
    }
    let faster = rows.iter().filter(|r| r.ratio() > 1.0).count();
    let geo = (rows.iter().map(|r| r.ratio().ln()).sum::<f64>() / rows.len() as f64).exp();
    format!(
        "summary: ferry was faster in {faster} of {} comparisons; geometric mean of std÷ferry \
         {geo:.1}×; the tour took {seconds:.1} s on {} CPUs",
        rows.len(),
        measure::cpu_count()
    )
}

/// The CPU count and, where Linux says, the CPU model.
fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        });
    let cpus = measure::cpu_count();
    match model {
        Some(m) => format!("{cpus} CPUs ({m}), {}", std::env::consts::ARCH),
        None => format!("{cpus} CPUs, {}", std::env::consts::ARCH),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("toolongword x", 4), vec!["toolongword", "x"]);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn every_stop_measures_both_systems() {
        let visits = visit_all(Scale::Tiny).expect("the tour runs");
        assert_eq!(visits.len(), STOPS.len());
        let mut cases = std::collections::HashSet::new();
        for (stop, visit) in &visits {
            assert!(!visit.lines.is_empty(), "{}: no explanation", stop.name);
            assert!(!render(visit).is_empty());
            if visit.pending.is_some() {
                // A stop whose subject is not written yet shows no numbers.
                assert!(visit.rows.is_empty(), "{}: pending with rows", stop.name);
                continue;
            }
            if stop.name == grpc::STOP.name {
                // It shows two calls and compares nothing.
                assert!(visit.rows.is_empty(), "grpc: rows");
                assert!(!render(visit).contains("std÷ferry"), "grpc: a table");
                let text = visit.lines.join("\n");
                let answers = text.matches("answered \"hello tour, from pid ").count();
                assert_eq!(answers, 2, "grpc: both answers shown: {text}");
                assert!(text.contains("grpc://127.0.0.1:"), "grpc: the URL: {text}");
                continue;
            }
            assert!(!visit.rows.is_empty(), "{}: no rows", stop.name);
            for row in &visit.rows {
                assert!(
                    cases.insert(row.case.clone()),
                    "duplicate case {}",
                    row.case
                );
                for (system, m) in [("ferry", &row.ferry), ("std", &row.std)] {
                    assert!(
                        m.stats.median > 0.0 && m.stats.median.is_finite(),
                        "{} / {system}: {:?}",
                        row.case,
                        m.stats
                    );
                    assert!(m.items > 0 && m.stats.runs == Scale::Tiny.runs());
                }
            }
        }
        let rows: Vec<Row> = visits.into_iter().flat_map(|(_, v)| v.rows).collect();
        assert!(summary(&rows, 1.0).starts_with("summary: ferry was faster in "));
    }
}
