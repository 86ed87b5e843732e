//! What the `threads` experiment measures, shared by ferry and its peers:
//! the paper's rows ([`Op`]), the kinds of timed run that yield them
//! ([`Kind`]), what a system hands back for one run ([`Outcome`]), and the
//! loops every system runs alike (the null procedure call, the `FORK`
//! batch arithmetic).
//!
//! This module owns these definitions only; each system's operations are
//! in `threads::ferry` and `peers`.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Threads forked per batch in the `FORK` / `create` / `destroy` loop.
pub const FORK_BATCH: u64 = 32;

/// The rows of the report, in report order: URPC's Table I, then Synthesis's
/// Table 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    ProcedureCall,
    Fork,
    ForkJoin,
    Yield,
    AcquireRelease,
    PingPong,
    Create,
    Destroy,
}

impl Op {
    /// Every row, in report order.
    pub const ALL: [Op; 8] = [
        Op::ProcedureCall,
        Op::Fork,
        Op::ForkJoin,
        Op::Yield,
        Op::AcquireRelease,
        Op::PingPong,
        Op::Create,
        Op::Destroy,
    ];

    /// The row's name, as the papers print it; the `case` of JSON records.
    pub fn name(self) -> &'static str {
        match self {
            Op::ProcedureCall => "PROCEDURE CALL",
            Op::Fork => "FORK",
            Op::ForkJoin => "FORK;JOIN",
            Op::Yield => "YIELD",
            Op::AcquireRelease => "ACQUIRE;RELEASE",
            Op::PingPong => "PINGPONG",
            Op::Create => "create",
            Op::Destroy => "destroy",
        }
    }
}

/// What one timed run measures; `Fork` yields three rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ProcedureCall,
    Fork,
    ForkJoin,
    Yield,
    AcquireRelease,
    PingPong,
}

impl Kind {
    /// Every kind, in run order.
    pub const ALL: [Kind; 6] = [
        Kind::ProcedureCall,
        Kind::Fork,
        Kind::ForkJoin,
        Kind::Yield,
        Kind::AcquireRelease,
        Kind::PingPong,
    ];

    /// The rows one run of the kind yields.
    pub fn rows(self) -> &'static [Op] {
        match self {
            Kind::ProcedureCall => &[Op::ProcedureCall],
            Kind::Fork => &[Op::Fork, Op::Create, Op::Destroy],
            Kind::ForkJoin => &[Op::ForkJoin],
            Kind::Yield => &[Op::Yield],
            Kind::AcquireRelease => &[Op::AcquireRelease],
            Kind::PingPong => &[Op::PingPong],
        }
    }

    /// `n` of the warm-up run that sizes the timed ones.
    pub fn warmup_n(self) -> u64 {
        match self {
            Kind::ProcedureCall | Kind::AcquireRelease => 100_000,
            Kind::Fork => 20 * FORK_BATCH,
            Kind::ForkJoin => 500,
            Kind::Yield => 5_000,
            Kind::PingPong => 1_000,
        }
    }

    /// The name the Go program knows the kind by.
    pub fn go_name(self) -> &'static str {
        match self {
            Kind::ProcedureCall => "proc-call",
            Kind::Fork => "fork",
            Kind::ForkJoin => "fork-join",
            Kind::Yield => "yield",
            Kind::AcquireRelease => "acquire-release",
            Kind::PingPong => "pingpong",
        }
    }
}

/// One row's result of one timed run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The row.
    pub row: Op,
    /// The system as the report names it for this row.
    pub label: String,
    /// ns per operation.
    pub ns: f64,
}

impl Sample {
    pub fn new(row: Op, label: impl Into<String>, ns: f64) -> Sample {
        Sample {
            row,
            label: label.into(),
            ns,
        }
    }
}

/// What a system did with one kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Measured: one sample per row of the kind (more than one per row if the
    /// system measures variants, e.g. ferry's two ping-pongs).
    Measured(Vec<Sample>),
    /// Not measured on this system, and why; `label` names the system in the
    /// absent rows.
    Absent { label: String, reason: String },
    /// The kind does not apply to this system; no rows at all.
    NotApplicable,
}

/// Per-operation time of `n` operations taking `d`.
pub fn per_op(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// The null procedure of `PROCEDURE CALL`.
#[inline(never)]
fn null_procedure() {
    // SAFETY: an empty instruction sequence; it touches no memory, no stack
    // and no flags. It is there so the call is not deleted as side-effect
    // free.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) };
}

/// `n` null calls; per call.
pub fn procedure_calls(n: u64) -> f64 {
    let f = black_box(null_procedure as fn());
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    per_op(start.elapsed(), n)
}

/// Accumulates the two halves of the `FORK` loop and turns them into the
/// three rows.
#[derive(Debug, Default)]
pub struct ForkTimes {
    /// The fork calls.
    pub create: Duration,
    /// From the end of the fork calls to every thread reclaimed.
    pub destroy: Duration,
}

impl ForkTimes {
    /// The three rows of `n` forks labelled `label`.
    pub fn samples(&self, n: u64, label: &str) -> Vec<Sample> {
        vec![
            Sample::new(Op::Fork, label, per_op(self.create + self.destroy, n)),
            Sample::new(Op::Create, label, per_op(self.create, n)),
            Sample::new(Op::Destroy, label, per_op(self.destroy, n)),
        ]
    }
}

/// Rounds `n` up to whole fork batches.
pub fn whole_batches(n: u64) -> u64 {
    n.div_ceil(FORK_BATCH).max(1) * FORK_BATCH
}
