//! The goals of `streams` (ratios of this run's medians) and 002 Table 1's
//! rows 2-4 and 6 beside ours, as text after the tables.
//!
//! This module owns those lines and the paper's numbers; it measures
//! nothing.

use std::fmt::Write as _;

use super::{DEV_NULL, FERRY, FERRY_SPINNING, FLOW, OPEN_CLOSE, PIPE, RW, SOCKET};
use crate::report::{Align, Table, ratio_verdict, row_median};
use crate::row::Row;

/// A goal on one case: met when the baseline's median is at least so
/// many times ferry's.
struct Goal {
    case: &'static str,
    base: &'static str,
    least: &'static str,
    met: fn(f64, f64) -> bool,
    /// 002's ratio over SunOS.
    paper: &'static str,
}

/// The goal of each one-thread case.
const GOALS: [Goal; 4] = [
    Goal {
        case: RW[0].0,
        base: PIPE,
        least: "50",
        met: |b, f| b >= 50.0 * f,
        paper: "56",
    },
    Goal {
        case: RW[1].0,
        base: PIPE,
        least: "6",
        met: |b, f| b >= 6.0 * f,
        paper: "6.2",
    },
    Goal {
        case: RW[2].0,
        base: PIPE,
        least: "4",
        met: |b, f| b >= 4.0 * f,
        paper: "3.9",
    },
    Goal {
        case: OPEN_CLOSE,
        base: DEV_NULL,
        least: "20",
        met: |b, f| b >= 20.0 * f,
        paper: "26",
    },
];

/// The goal lines: ratios of this run's medians, and the flow's ratio
/// (no goal is set for it).
pub fn goals(rows: &[Row]) -> String {
    let mut out = String::from("goals (ratios of medians of this run):\n");
    for g in GOALS {
        let verdict = ratio_verdict(
            row_median(rows, g.case, g.base),
            row_median(rows, g.case, FERRY),
            g.met,
        );
        let _ = writeln!(
            out,
            "  {}: {} / ferry >= {} (002: {}x over SunOS): {verdict}",
            g.case, g.base, g.least, g.paper
        );
    }
    for system in [FERRY, FERRY_SPINNING] {
        let flow = match (row_median(rows, FLOW, system), row_median(rows, FLOW, PIPE)) {
            (Some(f), Some(p)) if p > 0.0 => format!("{:.2}x", f / p),
            _ => "not measured".to_owned(),
        };
        let _ = writeln!(
            out,
            "  {FLOW}: {system} / pipe throughput (no goal set): {flow}"
        );
    }
    out
}

/// 002 Table 1 (OCR of the seed), the rows taken: number, description,
/// SunOS user+system seconds, Synthesis emulator seconds, the paper's
/// ratio, and our case. Each program loops 10,000 times (002 Appendix A).
const TABLE1: [(u32, &str, f64, f64, &str, &str); 4] = [
    (2, "R/W pipe 1", 10.0, 0.18, "56", RW[0].0),
    (3, "R/W pipe 1024", 15.1, 2.42, "6.2", RW[1].0),
    (4, "R/W pipe 4096", 37.9, 9.64, "3.9", RW[2].0),
    (6, "open null/close", 17.8, 0.69, "26", OPEN_CLOSE),
];

/// The loop count of 002's programs 2-7.
const PAPER_LOOPS: f64 = 10_000.0;

/// 002 Table 1's rows beside this run's medians, as a table.
pub fn beside_table1(rows: &[Row]) -> String {
    let ns = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.0}"));
    let ratio = |case: &str, base: &str| match (
        row_median(rows, case, base),
        row_median(rows, case, FERRY),
    ) {
        (Some(b), Some(f)) if f > 0.0 => format!("{:.1}x", b / f),
        _ => "-".to_owned(),
    };
    let mut t = Table::new(&[
        ("002 row", Align::Left),
        ("SunOS us", Align::Right),
        ("Synthesis us", Align::Right),
        ("002 ratio", Align::Right),
        ("our case", Align::Left),
        ("ferry ns", Align::Right),
        ("kernel ns", Align::Right),
        ("kernel / ferry", Align::Right),
        ("socket / ferry", Align::Right),
    ]);
    for (no, descr, sun, synthesis, paper, case) in TABLE1 {
        let base = if case == OPEN_CLOSE { DEV_NULL } else { PIPE };
        let socket = if case == OPEN_CLOSE {
            "-".to_owned()
        } else {
            ratio(case, SOCKET)
        };
        t.push_row(vec![
            format!("{no} {descr}"),
            format!("{:.0}", sun / PAPER_LOOPS * 1e6),
            format!("{:.0}", synthesis / PAPER_LOOPS * 1e6),
            format!("{paper}x"),
            case.to_owned(),
            ns(row_median(rows, case, FERRY)),
            ns(row_median(rows, case, base)),
            ratio(case, base),
            socket,
        ]);
    }
    format!(
        "002 Table 1 (rows 2-4, 6; seconds for 10,000 loops, here per loop) beside this run \
         (kernel: pipe, or open /dev/null for open/close)\n{}",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Unit;

    fn row(case: &str, system: &str, ns: f64) -> Row {
        Row::new("streams", case, system, Unit::Ns, vec![ns; 5], 100)
    }

    #[test]
    fn goals_are_ratios_of_this_run_or_not_measured() {
        let rows = vec![
            row(RW[0].0, FERRY, 10.0),
            row(RW[0].0, PIPE, 600.0),
            row(RW[0].0, SOCKET, 900.0),
            row(RW[1].0, FERRY, 100.0),
            row(RW[1].0, PIPE, 500.0),
            row(OPEN_CLOSE, FERRY, 50.0),
            row(OPEN_CLOSE, DEV_NULL, 1000.0),
            Row::new(
                "streams",
                FLOW,
                FERRY,
                Unit::Rate("MB/s"),
                vec![3000.0; 5],
                1,
            ),
            Row::new(
                "streams",
                FLOW,
                PIPE,
                Unit::Rate("MB/s"),
                vec![1000.0; 5],
                1,
            ),
        ];
        let g = goals(&rows);
        assert!(
            g.contains("rw 1B: pipe / ferry >= 50 (002: 56x over SunOS): 60.00x (met)"),
            "{g}"
        );
        assert!(
            g.contains("rw 1KB: pipe / ferry >= 6 (002: 6.2x over SunOS): 5.00x (not met)"),
            "{g}"
        );
        assert!(
            g.contains("rw 4KB: pipe / ferry >= 4 (002: 3.9x over SunOS): not measured"),
            "{g}"
        );
        assert!(
            g.contains(
                "open/close: open /dev/null / ferry >= 20 (002: 26x over SunOS): 20.00x (met)"
            ),
            "{g}"
        );
        assert!(
            g.contains("ferry / pipe throughput (no goal set): 3.00x"),
            "{g}"
        );
        assert!(
            g.contains("ferry (try + yield) / pipe throughput (no goal set): not measured"),
            "{g}"
        );
        let side = beside_table1(&rows);
        let first = side.lines().find(|l| l.starts_with("2 R/W")).unwrap();
        assert_eq!(
            first.split_whitespace().collect::<Vec<_>>(),
            [
                "2", "R/W", "pipe", "1", "1000", "18", "56x", "rw", "1B", "10", "600", "60.0x",
                "90.0x"
            ]
        );
        let open = side.lines().find(|l| l.starts_with("6 open")).unwrap();
        let cells: Vec<&str> = open.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 2..], ["20.0x", "-"], "{side}");
        let none = goals(&[]);
        assert_eq!(none.matches("not measured (not met)").count(), 4, "{none}");
        assert_eq!(
            none.matches("(no goal set): not measured").count(),
            2,
            "{none}"
        );
    }
}
