//! The command-line block every experiment shares ([`Common`]: runs,
//! `--quick`, `--json`, `--write-docs`) and the one for experiments with a
//! fixed operation count per run ([`Counted`]), with the per-experiment
//! defaults they resolve against ([`Defaults`]).
//!
//! This module owns argument parsing and defaults only; it measures
//! nothing and prints nothing.

use crate::report::Error;

/// Arguments of every experiment.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Common {
    /// Timed runs per measured pair; the median is reported
    /// [default and least accepted: per experiment, see its help]
    #[arg(long)]
    pub runs: Option<u32>,

    /// Shorter runs and fewer of them, for a fast look; an explicit --runs
    /// (or --items) still wins
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON object per line per measured pair instead of tables
    /// (targets and notes go to stderr)
    #[arg(long)]
    pub json: bool,

    /// Also rewrite the experiment's docs/results/EXPERIMENT.md from this
    /// run: its tables, the command, the machine, what they mean
    #[arg(long)]
    pub write_docs: bool,
}

/// The arguments of experiments that time a fixed number of operations
/// per run (`queues`: items transferred; `switch`: round trips).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Counted {
    /// What every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// Operations per run [default: 2000000, or 200000 with --quick]
    #[arg(long)]
    pub items: Option<u64>,
}

/// An experiment's defaults for [`Common`].
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    /// Runs without `--quick`.
    pub runs: u32,
    /// Runs with `--quick`.
    pub quick_runs: u32,
    /// Fewest runs accepted.
    pub min_runs: u32,
}

/// The defaults of the experiments that report medians of at least 5 runs.
pub const MEDIAN_OF_FIVE: Defaults = Defaults {
    runs: 7,
    quick_runs: 5,
    min_runs: 5,
};

/// Operations per run by default, and with `--quick`.
const ITEMS: (u64, u64) = (2_000_000, 200_000);
/// Fewest operations per run accepted.
const MIN_ITEMS: u64 = 1_000;

impl Common {
    /// The runs asked for, or the default; an error below the minimum.
    pub fn runs(&self, d: Defaults) -> Result<u32, Error> {
        let runs = self
            .runs
            .unwrap_or(if self.quick { d.quick_runs } else { d.runs });
        if runs < d.min_runs {
            return Err(Error(format!(
                "--runs {runs}: at least {} runs are needed",
                d.min_runs
            )));
        }
        Ok(runs)
    }

    /// The operations per run asked for, or the default; an error below
    /// the minimum.
    pub fn items(&self, counted: &Counted) -> Result<u64, Error> {
        let n = counted
            .items
            .unwrap_or(if self.quick { ITEMS.1 } else { ITEMS.0 });
        if n < MIN_ITEMS {
            return Err(Error(format!(
                "--items {n}: at least {MIN_ITEMS} are needed"
            )));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_quick_and_explicit_values() {
        let mut c = Common::default();
        assert_eq!(c.runs(MEDIAN_OF_FIVE), Ok(7));
        assert_eq!(c.items(&Counted::default()), Ok(2_000_000));
        c.quick = true;
        assert_eq!(c.runs(MEDIAN_OF_FIVE), Ok(5));
        assert_eq!(c.items(&Counted::default()), Ok(200_000));
        c.runs = Some(11);
        assert_eq!(c.runs(MEDIAN_OF_FIVE), Ok(11));
        c.runs = Some(3);
        assert!(c.runs(MEDIAN_OF_FIVE).is_err());
        assert!(
            c.items(&Counted {
                items: Some(10),
                ..Counted::default()
            })
            .is_err()
        );
    }
}
