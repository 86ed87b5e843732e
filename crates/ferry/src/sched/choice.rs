//! Which policy a runtime's processors use: the public [`SchedPolicy`]
//! (chosen with `Builder::policy` or `FERRY_SCHED`), and [`Chosen`], the
//! policy a processor holds, which hands each call to the chosen one.
//!
//! This room owns the choice and its spelling; it must not decide anything
//! itself. [`Chosen`] is an enum, not a trait object: each call is one
//! predictable branch, and the default policy's code stays inlined.

use std::fmt;
use std::str::FromStr;

use super::{Chain, Cx, Event, FineGrain, Policy, Ready, WorkStealing};
use crate::header::Thread;

/// A runtime's scheduling policy (`Builder::policy`; the environment
/// variable `FERRY_SCHED` sets the default: `work-stealing` or
/// `fine-grain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedPolicy {
    /// The default: per-processor FIFO rings by priority, a next-to-run
    /// slot for woken and just-spawned threads, a global injector and work
    /// stealing; every thread gets the runtime's one time slice
    /// (`Builder::time_slice`, 10 ms by default).
    #[default]
    WorkStealing,
    /// Synthesis's fine-grain scheduling: each thread's quantum follows the
    /// rate of bytes it moves through streams (from 200 µs for a thread
    /// that moves none to 2 ms), and a thread that was woken runs next on
    /// its processor (a thread woken off the processors goes before the
    /// rings, too). The quantum replaces `Builder::time_slice`, which this
    /// policy does not use. The rule and its parameters are in the
    /// architecture document's scheduling part.
    FineGrain,
}

impl SchedPolicy {
    /// The name `FERRY_SCHED` and [`FromStr`] take.
    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::WorkStealing => "work-stealing",
            SchedPolicy::FineGrain => "fine-grain",
        }
    }

    /// The default from `FERRY_SCHED` if it is set and names a policy,
    /// else [`SchedPolicy::WorkStealing`] (as `FERRY_TIME_SLICE`, a value
    /// it cannot read leaves the default).
    pub(crate) fn from_env() -> SchedPolicy {
        std::env::var("FERRY_SCHED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }
}

impl fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`SchedPolicy`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown scheduling policy {:?} (expected \"work-stealing\" or \"fine-grain\")",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for SchedPolicy {
    type Err = UnknownPolicy;

    /// `work-stealing` or `fine-grain` (case and surrounding blanks
    /// ignored; `_` for `-` accepted).
    fn from_str(s: &str) -> Result<SchedPolicy, UnknownPolicy> {
        let v = s.trim().to_ascii_lowercase().replace('_', "-");
        match v.as_str() {
            "work-stealing" => Ok(SchedPolicy::WorkStealing),
            "fine-grain" => Ok(SchedPolicy::FineGrain),
            _ => Err(UnknownPolicy(s.to_owned())),
        }
    }
}

/// The policy a processor holds: the one its runtime chose.
#[derive(Debug)]
pub(crate) enum Chosen {
    WorkStealing(WorkStealing),
    FineGrain(FineGrain),
}

impl Chosen {
    pub(crate) fn new(policy: SchedPolicy) -> Chosen {
        match policy {
            SchedPolicy::WorkStealing => Chosen::WorkStealing(WorkStealing::default()),
            SchedPolicy::FineGrain => Chosen::FineGrain(FineGrain::default()),
        }
    }
}

impl Policy for Chosen {
    #[inline]
    fn ready(&mut self, cx: &Cx<'_>, t: Thread, why: Ready) {
        match self {
            Chosen::WorkStealing(p) => p.ready(cx, t, why),
            Chosen::FineGrain(p) => p.ready(cx, t, why),
        }
    }

    #[inline]
    fn ready_batch(&mut self, cx: &Cx<'_>, batch: Chain) {
        match self {
            Chosen::WorkStealing(p) => p.ready_batch(cx, batch),
            Chosen::FineGrain(p) => p.ready_batch(cx, batch),
        }
    }

    #[inline]
    fn next(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        match self {
            Chosen::WorkStealing(p) => p.next(cx),
            Chosen::FineGrain(p) => p.next(cx),
        }
    }

    #[inline]
    fn next_local(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        match self {
            Chosen::WorkStealing(p) => p.next_local(cx),
            Chosen::FineGrain(p) => p.next_local(cx),
        }
    }

    #[inline]
    fn has_ready(&self, cx: &Cx<'_>) -> bool {
        match self {
            Chosen::WorkStealing(p) => p.has_ready(cx),
            Chosen::FineGrain(p) => p.has_ready(cx),
        }
    }

    #[inline]
    fn event(&mut self, cx: &Cx<'_>, event: Event<'_>) {
        match self {
            Chosen::WorkStealing(p) => p.event(cx, event),
            Chosen::FineGrain(p) => p.event(cx, event),
        }
    }

    #[inline]
    fn runs_unpicked(&mut self, cx: &Cx<'_>, t: &Thread) {
        match self {
            Chosen::WorkStealing(p) => p.runs_unpicked(cx, t),
            Chosen::FineGrain(p) => p.runs_unpicked(cx, t),
        }
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    #[test]
    fn sched_policy_names_parse_and_print() {
        for p in [SchedPolicy::WorkStealing, SchedPolicy::FineGrain] {
            assert_eq!(p.name().parse::<SchedPolicy>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(" Fine_Grain ".parse(), Ok(SchedPolicy::FineGrain));
        assert_eq!(SchedPolicy::default(), SchedPolicy::WorkStealing);
    }

    #[test]
    fn sched_policy_unknown_names_are_an_error() {
        for bad in ["", "fifo", "finegrain", "work stealing"] {
            let e = bad.parse::<SchedPolicy>().unwrap_err();
            assert_eq!(e, UnknownPolicy(bad.to_owned()));
            assert!(e.to_string().contains("fine-grain"), "{e}");
        }
    }
}
