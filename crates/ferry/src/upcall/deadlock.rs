//! Deadlock detection: when every thread of a runtime is blocked and
//! nothing could ever wake one, say which threads wait on what, then abort
//! or end [`run`](crate::Builder::run) with an error, as
//! [`Builder::on_deadlock`](crate::Builder::on_deadlock) says (Go's "all
//! goroutines are asleep - deadlock!").
//!
//! This room owns the decision and the report; it must not wake, queue or
//! run threads, and it costs the hot paths nothing: it is asked only by the
//! last processor about to sleep with no timer pending, and reads counters
//! and flags the runtime keeps anyway.
//!
//! # When it is certain
//!
//! A parked ferry thread is woken only by running code: a ferry thread of
//! its runtime, a timer, a kernel call's return (a thread away in
//! [`blocking`](crate::blocking)), or a kernel thread outside the runtime
//! (one holding a [`Handle`](crate::Handle), a `Thread` or a ferry lock;
//! another runtime's processor). A deadlock is declared only when none of
//! them can act, twice [`processor::DEADLOCK_GRACE`] apart with no switch on any processor in
//! between:
//!
//! - every processor of the set sleeps in `idle` (none is starting,
//!   stopping or lent), so no ferry thread runs and none is runnable (the
//!   injector and the pending upcalls are empty too);
//! - no timer is pending (a sleep, a timed wait);
//! - no activation is away in a kernel call or lost_processor by a takeover;
//! - every kernel thread of the process is an activation of this runtime
//!   (the process has as many kernel threads as the runtime has
//!   activations, `num_threads` of `/proc/self/stat`), so no outside party
//!   exists at all.
//!
//! Not detected, by design (a miss, never a false report): a deadlock in a
//! process with any other kernel thread (a thread of the program's, another
//! runtime, a runtime run from a test harness's thread); threads that block
//! one another while others still run or sleep on timers (a partial
//! deadlock); a thread spinning on a condition no one will set. Not taken
//! into account: a signal handler that wakes a ferry thread (ferry's
//! primitives are not async-signal-safe).

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::{Mutex, PoisonError};

use super::Words;
#[cfg(doc)]
use crate::processor;
use crate::processor::{ACTIVE, STOPPED};
use crate::upcall::Shared;

/// What a runtime does when every thread is blocked for good; see
/// [`Builder::on_deadlock`](crate::Builder::on_deadlock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadlock {
    /// Print which threads wait on what to standard error, then abort the
    /// process.
    Abort,
    /// End the runtime: [`run`](crate::Builder::run) returns an error of
    /// kind [`io::ErrorKind::Deadlock`] whose message lists which threads
    /// wait on what. A runtime started with
    /// [`adopt`](crate::Builder::adopt), which has no `run` to return
    /// from, aborts as with [`Deadlock::Abort`].
    Error,
    /// Do nothing: the runtime sleeps for ever, as a process of blocked
    /// threads does.
    Ignore,
}

impl Deadlock {
    /// The mode `FERRY_DEADLOCK` names (`abort`, `error`, `ignore`), if set
    /// to one of them.
    pub(crate) fn from_env() -> Option<Deadlock> {
        let v = std::env::var("FERRY_DEADLOCK").ok()?;
        match v.trim().to_ascii_lowercase().as_str() {
            "abort" => Some(Deadlock::Abort),
            "error" => Some(Deadlock::Error),
            "ignore" | "off" | "0" => Some(Deadlock::Ignore),
            _ => None,
        }
    }
}

/// A runtime's detector: its mode and, once declared, the report.
pub(crate) struct Detector {
    mode: Deadlock,
    /// `run` waits for this runtime's end and can return an error.
    to_caller: AtomicBool,
    /// Set once, by the processor that declares the deadlock.
    declared: AtomicBool,
    report: Mutex<Option<String>>,
}

impl Detector {
    pub(crate) fn new(mode: Deadlock) -> Detector {
        Detector {
            mode,
            to_caller: AtomicBool::new(false),
            declared: AtomicBool::new(false),
            report: Mutex::new(None),
        }
    }

    /// Whether the detector looks at all.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.mode != Deadlock::Ignore
    }

    /// `run` will return the error ([`Deadlock::Error`]).
    pub(crate) fn report_to_caller(&self) {
        self.to_caller.store(true, Relaxed);
    }

    /// The report of a deadlock that ended the runtime, as `run`'s error.
    pub(crate) fn take_error(&self) -> Option<io::Error> {
        let report = self
            .report
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(io::Error::new(io::ErrorKind::Deadlock, report))
    }
}

/// The first look, by a processor about to sleep with no timer pending:
/// if the runtime looks quiet (see the module docs, all but the kernel
/// threads), a fingerprint of every processor's switch count, for
/// [`confirm`] after [`processor::DEADLOCK_GRACE`].
pub(crate) fn quiet(shared: &Shared) -> Option<u64> {
    // The activations first: one that hands its thread back posts the
    // event before it clears `away` (Release), so a look that finds
    // `away` clear (Acquire) then finds the event pending.
    let mut away = false;
    shared.activations.for_each(|a| {
        away |= a.away.load(Acquire) || a.lost_processor.load(Acquire);
    });
    if away {
        return None;
    }
    if shared.is_shut_down()
        || shared.sources.until_next().is_some()
        || shared.sources.ready_or_external()
        || shared.injector.has_work()
    {
        return None;
    }
    let mut members = 0;
    let mut seen = 0u64;
    for p in shared.processors.iter() {
        match p.membership.load(Acquire) {
            STOPPED => {}
            ACTIVE if p.upcall().driver.load(Acquire) & super::LENT == 0 => {
                members += 1;
                seen = seen
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(u64::from(p.dispatch.load(Acquire)));
            }
            _ => return None,
        }
    }
    if members == 0 || shared.sleepers() != members {
        return None;
    }
    Some(seen)
}

/// The second look, [`processor::DEADLOCK_GRACE`] after [`quiet`] gave `seen`: still quiet, no
/// processor switched meanwhile, and no kernel thread of the process is
/// outside the runtime. Then declares the deadlock (once).
pub(crate) fn confirm(shared: &Shared, seen: u64) {
    if quiet(shared) != Some(seen) || !only_own_kernel_threads(shared) {
        return;
    }
    let d = &shared.deadlock;
    if d.declared.swap(true, Relaxed) {
        return;
    }
    let threads = crate::waits::describe_threads(std::ptr::from_ref(shared) as usize);
    let mut report = format!(
        "ferry: deadlock: all {} threads of the runtime are blocked and nothing can wake one",
        threads.len()
    );
    for line in &threads {
        report.push_str("\n  ");
        report.push_str(line);
    }
    if d.mode == Deadlock::Error && d.to_caller.load(Relaxed) {
        *d.report.lock().unwrap_or_else(PoisonError::into_inner) = Some(report);
        shared.shut_down();
    } else {
        eprintln!("fatal error: {report}");
        std::process::abort();
    }
}

/// Whether every kernel thread of the process is one of `shared`'s
/// activations; `false` if that cannot be known.
///
/// Every registered activation has its kernel thread (the caller's is the
/// thread `run` waits on; a retiring one is unregistered before its thread
/// ends, a new one registered after its thread starts), so the process has
/// at least as many kernel threads as there are activations, and exactly
/// as many only when none is another party's (nor an activation's on its
/// way out). The count of activations is read before and after the
/// kernel's count of threads and must not have moved meanwhile.
fn only_own_kernel_threads(shared: &Shared) -> bool {
    let before = shared.activations.count();
    let threads = crate::sys::thread_count();
    let after = shared.activations.count();
    before == after && threads == Some(after)
}
