//! Gravity: a Barnes–Hut N-body simulation (Barnes and Hut 1986) with the
//! phase structure of the Gravity program of 004 §5.3: five phases per time
//! step, the first sequential and the last four parallel, with a barrier
//! between phases.
//!
//! This crate root owns the public surface only; the rooms are
//! [`body`] (bodies and initial conditions), [`tree`] (the octree, its
//! moments and its force walk), [`threads`] (the two kinds of worker
//! threads), `phased` (the cells the workers share) and `sim` (the phases,
//! the time loop, the settings and the report). It must not hold
//! simulation code itself.
//!
//! The same code runs on ferry threads or on plain kernel threads, chosen
//! by a [`Threads`] value, and gives bit-identical results whatever the
//! kind of threads and the number of workers.
//!
//! ```
//! use gravity::{Config, Std, simulate};
//!
//! let cfg = Config { bodies: 256, steps: 4, workers: 2, ..Config::default() };
//! let report = simulate(&cfg, &Std).unwrap();
//! assert_eq!(report.bodies.len(), 256);
//! assert!(report.drift() < 1e-2);
//! ```

pub mod body;
mod phased;
mod sim;
pub mod threads;
pub mod tree;

pub use body::Body;
pub use sim::{Config, ConfigError, Error, MAX_BODIES, Report, Totals, simulate};
pub use threads::{Failed, Ferry, Std, Team, Threads, run_team};
