//! The goals of `grpc`, as ratios of this run's medians: ferry over gRPC
//! within 10% of plain tonic, and the local ferry call at least 100x
//! faster than either gRPC path, for every case. Each line ends `met`,
//! `MISSED` or `not measured`.
//!
//! This module owns those lines; it measures nothing.

use std::fmt::Write as _;

use super::{CASES, LOCAL, OVER_GRPC, TONIC};
use crate::report::row_median;
use crate::row::Row;

/// The most ferry over gRPC may take, as a multiple of plain tonic.
pub const BRIDGE_MAX: f64 = 1.10;
/// How many times faster the local call must be than either gRPC path.
pub const LOCAL_MIN: f64 = 100.0;

/// `x / base` and whether `met(x / base)`; `not measured` without both.
fn verdict(x: Option<f64>, base: Option<f64>, met: fn(f64) -> bool) -> String {
    match (x, base) {
        (Some(x), Some(b)) if b > 0.0 => {
            let r = x / b;
            format!("{r:.2}x: {}", if met(r) { "met" } else { "MISSED" })
        }
        _ => "not measured".to_owned(),
    }
}

/// The goal lines.
pub fn goals(rows: &[Row]) -> String {
    let mut out = String::from("goals (ratios of medians of this run):\n");
    for (case, _) in CASES {
        let m = |system: &str| row_median(rows, case, system);
        let _ = writeln!(
            out,
            "  {case}: {OVER_GRPC} / {TONIC} <= {BRIDGE_MAX:.2}: {}",
            verdict(m(OVER_GRPC), m(TONIC), |r| r <= BRIDGE_MAX)
        );
        for slow in [TONIC, OVER_GRPC] {
            let _ = writeln!(
                out,
                "  {case}: {slow} / {LOCAL} >= {LOCAL_MIN:.0}: {}",
                verdict(m(slow), m(LOCAL), |r| r >= LOCAL_MIN)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Unit;

    fn row(case: &str, system: &str, ns: f64) -> Row {
        Row::new("grpc", case, system, Unit::Ns, vec![ns; 5], 100)
    }

    #[test]
    fn goals_are_ratios_of_this_run_met_missed_or_not_measured() {
        let (null, kb) = (CASES[0].0, CASES[1].0);
        let rows = vec![
            row(null, LOCAL, 500.0),
            row(null, OVER_GRPC, 55_000.0),
            row(null, TONIC, 50_000.0),
            row(kb, LOCAL, 1_000.0),
            row(kb, OVER_GRPC, 66_000.0),
            row(kb, TONIC, 60_000.0),
        ];
        let g = goals(&rows);
        let line = |prefix: &str| {
            g.lines()
                .find(|l| l.trim_start().starts_with(prefix))
                .unwrap_or_else(|| panic!("no line {prefix}: {g}"))
                .to_owned()
        };
        // 55/50 = 1.10: on the line, met; 66/60 = 1.10 too.
        assert!(
            line(&format!("{null}: {OVER_GRPC} / {TONIC}")).ends_with("1.10x: met"),
            "{g}"
        );
        assert!(
            line(&format!("{null}: {TONIC} / {LOCAL}")).ends_with("100.00x: met"),
            "{g}"
        );
        assert!(
            line(&format!("{null}: {OVER_GRPC} / {LOCAL}")).ends_with("110.00x: met"),
            "{g}"
        );
        assert!(
            line(&format!("{kb}: {TONIC} / {LOCAL}")).ends_with("60.00x: MISSED"),
            "{g}"
        );
        let slow = vec![row(null, OVER_GRPC, 56_000.0), row(null, TONIC, 50_000.0)];
        let g = goals(&slow);
        assert!(
            g.contains(&format!(
                "{null}: {OVER_GRPC} / {TONIC} <= 1.10: 1.12x: MISSED"
            )),
            "{g}"
        );
        assert!(
            g.contains(&format!("{null}: {TONIC} / {LOCAL} >= 100: not measured")),
            "{g}"
        );
        assert_eq!(goals(&[]).matches("not measured").count(), 3 * CASES.len());
    }
}
