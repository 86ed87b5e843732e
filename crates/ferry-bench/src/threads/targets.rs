//! The targets of the `threads` experiment, judged from its rows: ferry
//! against Go, Tokio and kernel threads (ratios of medians), the C API
//! against Rust and pthreads (medians of per-round ratios), and 003
//! Table 8-1 (a Unix process's fork/wait/exit against cthread_fork/join).
//!
//! This module owns the verdict texts; it measures nothing but Table
//! 8-1's process forks.

use crate::measure::Stats;
use crate::peers::{c, pthread, stdlib, tokio};
use crate::row::Row;

use super::ferry;
use crate::thread_ops::Op;

/// The label of Go on one processor, the targets' Go.
const GO_1: &str = "go GOMAXPROCS=1";

/// ferry's median for row `op` (its plain label, the baseline of the
/// ratios).
fn ferry_ns(rows: &[Row], op: Op) -> Option<f64> {
    system_ns(rows, op, ferry::NAME)
}

/// `system`'s median for row `op`.
fn system_ns(rows: &[Row], op: Op, system: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.case == op.name() && r.system == system)
        .and_then(Row::median)
}

/// The targets against Go, Tokio and kernel threads, each a ratio of
/// medians from this run.
pub fn rust(rows: &[Row]) -> String {
    let mut out = String::from(
        "targets (against Go, Tokio and kernel threads), ratios of the medians above:\n",
    );
    let ferry = |row| ferry_ns(rows, row);
    let other = |row, sys| system_ns(rows, row, sys);
    // (description, ferry's row, other system, the factor ferry must beat it by)
    let checks = [
        (
            "FORK;JOIN >= 10x faster than Go (GOMAXPROCS=1)",
            Op::ForkJoin,
            GO_1,
            10.0,
        ),
        (
            "FORK;JOIN >= 5x faster than tokio current-thread spawn+await",
            Op::ForkJoin,
            tokio::CURRENT,
            5.0,
        ),
        (
            "FORK;JOIN >= 5x faster than tokio multi-thread spawn+await",
            Op::ForkJoin,
            &tokio::multi_name(),
            5.0,
        ),
        (
            "YIELD <= 1/20 of Go's Gosched (GOMAXPROCS=1)",
            Op::Yield,
            GO_1,
            20.0,
        ),
        (
            "PINGPONG <= 1/10 of Go's sync.Cond ping-pong (GOMAXPROCS=1)",
            Op::PingPong,
            GO_1,
            10.0,
        ),
        (
            "ACQUIRE;RELEASE no slower than std::sync::Mutex",
            Op::AcquireRelease,
            stdlib::threads::NAME,
            1.0,
        ),
        (
            "ACQUIRE;RELEASE no slower than pthread_mutex_t",
            Op::AcquireRelease,
            pthread::NAME,
            1.0,
        ),
    ];
    for (what, row, sys, factor) in checks {
        let verdict = match (ferry(row), other(row, sys)) {
            (Some(f), Some(o)) if f > 0.0 => {
                let ratio = o / f;
                format!(
                    "{} ({:.1} ns vs {:.1} ns: {:.2}x, needs {factor}x)",
                    if ratio >= factor { "MET" } else { "MISSED" },
                    f,
                    o,
                    ratio
                )
            }
            (None, _) => "n/a (ferry's row is absent)".to_owned(),
            _ => "n/a (the other system's row is absent)".to_owned(),
        };
        out.push_str(&format!("  {what}: {verdict}\n"));
    }
    out
}

/// The samples of `sys`'s plain row `row`, in round order.
fn system_samples<'a>(rows: &'a [Row], op: Op, sys: &str) -> Option<&'a [f64]> {
    rows.iter()
        .find(|r| r.case == op.name() && r.system == sys && r.stats().is_some())
        .map(|r| r.samples.as_slice())
}

/// The median over rounds of `num`'s sample over `den`'s from the same
/// round: the two ran within tens of milliseconds of each other, so the
/// host's slow and fast phases (seconds long on the development VM) mostly
/// cancel out of each ratio, as they do not out of a ratio of two medians
/// taken from different rounds. `None` if either row is absent.
fn paired_ratio(rows: &[Row], row: Op, num: &str, den: &str) -> Option<f64> {
    let (n, d) = (
        system_samples(rows, row, num)?,
        system_samples(rows, row, den)?,
    );
    if n.len() != d.len() {
        return None;
    }
    let ratios: Vec<f64> = n.iter().zip(d).map(|(a, b)| a / b).collect();
    Stats::from_samples(&ratios).map(|s| s.median)
}

/// The C API's targets, from a `--lang c` run: each judged on the median of
/// the per-round ratios ([`paired_ratio`]), with the ratio of the medians
/// above printed beside it.
pub fn c(rows: &[Row]) -> String {
    let mut out = String::from(
        "targets (C API against Rust and pthreads), judged on the median of per-round ratios (each round runs C and Rust, or C-Threads and pthreads, back to back); the ratio of the medians above beside it:\n",
    );
    for row in [
        Op::Fork,
        Op::ForkJoin,
        Op::Yield,
        Op::AcquireRelease,
        Op::PingPong,
    ] {
        let verdict = match (
            ferry_ns(rows, row),
            system_ns(rows, row, c::CTHREADS),
            paired_ratio(rows, row, c::CTHREADS, ferry::NAME),
        ) {
            (Some(rust), Some(c), Some(paired)) if rust > 0.0 => {
                format!(
                    "{} (per round {paired:.2}x; medians {c:.1} ns from C vs {rust:.1} ns from Rust: {:.2}x; needs <= 1.5x)",
                    if paired <= 1.5 { "MET" } else { "MISSED" },
                    c / rust
                )
            }
            _ => "n/a (a row is absent)".to_owned(),
        };
        out.push_str(&format!(
            "  {} C-Threads within 1.5x of Rust: {verdict}\n",
            row.name()
        ));
    }
    let verdict = match (
        system_ns(rows, Op::ForkJoin, c::CTHREADS),
        system_ns(rows, Op::ForkJoin, c::PTHREADS),
        paired_ratio(rows, Op::ForkJoin, c::PTHREADS, c::CTHREADS),
    ) {
        (Some(c), Some(p), Some(paired)) if c > 0.0 => {
            format!(
                "{} (per round {paired:.0}x; medians {c:.1} ns vs pthread_create+join {p:.0} ns: {:.0}x; needs >= 300x)",
                if paired >= 300.0 { "MET" } else { "MISSED" },
                p / c
            )
        }
        _ => "n/a (a row is absent)".to_owned(),
    };
    out.push_str(&format!(
        "  FORK;JOIN C-Threads >= 300x faster than pthreads: {verdict}\n"
    ));
    out
}

/// 003 Table 8-1: a Unix process's fork/wait/exit (`fork`, the child
/// `_exit`s, `waitpid`) against `cthread_fork`/`cthread_join`, the
/// latter the FORK;JOIN median above. `runs` runs of 200 forks each.
pub fn table_8_1(programs: &c::Programs, rows: &[Row], runs: u32) -> Result<String, String> {
    let mut samples = Vec::new();
    for _ in 0..runs {
        let out = programs.run(false, "process-fork", 200)?;
        let ns = out
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("unexpected process-fork output {out:?}"))?;
        samples.push(ns);
    }
    let process = Stats::from_samples(&samples).ok_or("no process-fork samples")?;
    let cthread = system_ns(rows, Op::ForkJoin, c::CTHREADS);
    let mut out = String::from("\n003 Table 8-1 (process vs thread creation), medians:\n");
    out.push_str(&format!(
        "  fork/wait/exit (Unix process)   {:>12.0} ns  ({runs} runs of 200)\n",
        process.median
    ));
    if let Some(c) = cthread {
        out.push_str(&format!(
            "  cthread_fork/cthread_join       {c:>12.1} ns  ({:.0}x faster)\n",
            process.median / c
        ));
    }
    Ok(out)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Unit;

    fn sampled(op: Op, label: &str, samples: &[f64]) -> Row {
        Row::new("threads", op.name(), label, Unit::Ns, samples.to_vec(), 10)
    }

    fn result(op: Op, label: &str, ns: Option<f64>) -> Row {
        match ns {
            Some(x) => sampled(op, label, &[x; 5]),
            None => Row::absent("threads", op.name(), label, Unit::Ns, "not built"),
        }
    }

    #[test]
    fn rust_targets_are_ratios_of_medians() {
        let rows = vec![
            result(Op::Yield, "ferry", Some(10.0)),
            result(Op::Yield, GO_1, Some(150.0)),
            result(Op::AcquireRelease, "ferry", None),
            result(Op::AcquireRelease, stdlib::threads::NAME, Some(5.0)),
        ];
        let t = rust(&rows);
        assert!(
            t.contains("YIELD <= 1/20 of Go's Gosched (GOMAXPROCS=1): MISSED"),
            "{t}"
        );
        assert!(
            t.contains("std::sync::Mutex: n/a (ferry's row is absent)"),
            "{t}"
        );
    }

    #[test]
    fn c_targets_are_judged_on_per_round_ratios() {
        // Rust's rounds 1-3 caught a fast phase, C's rounds 3-5 a slow one:
        // the medians are 2.8x apart, every round but one 1.4x.
        let rust = [100.0, 100.0, 100.0, 200.0, 200.0];
        let cth = [140.0, 140.0, 280.0, 280.0, 280.0];
        let pthreads = [1e5, 1e5, 1e5, 1e5, 1e5];
        let mut rows = vec![
            sampled(Op::PingPong, "ferry", &rust),
            sampled(Op::PingPong, c::CTHREADS, &cth),
            sampled(Op::ForkJoin, "ferry", &rust),
            sampled(Op::ForkJoin, c::CTHREADS, &cth),
            sampled(Op::ForkJoin, c::PTHREADS, &pthreads),
        ];
        let paired = paired_ratio(&rows, Op::PingPong, c::CTHREADS, ferry::NAME);
        assert_eq!(paired, Some(1.4));
        let t = c(&rows);
        assert!(
            t.contains("PINGPONG C-Threads within 1.5x of Rust: MET (per round 1.40x; medians 280.0 ns from C vs 100.0 ns from Rust: 2.80x"),
            "{t}"
        );
        // 1e5 / 280 = 357 in three rounds, 1e5 / 140 = 714 in two.
        assert!(
            t.contains("FORK;JOIN C-Threads >= 300x faster than pthreads: MET (per round 357x"),
            "{t}"
        );
        // A row whose rounds do not pair up is not judged.
        rows[1] = sampled(Op::PingPong, c::CTHREADS, &cth[..4]);
        let t = c(&rows);
        assert!(
            t.contains("PINGPONG C-Threads within 1.5x of Rust: n/a"),
            "{t}"
        );
        assert!(
            t.contains("YIELD C-Threads within 1.5x of Rust: n/a"),
            "{t}"
        );
    }
}
