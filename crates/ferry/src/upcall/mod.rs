//! Scheduler activations in user space: the events a processor's scheduling
//! policy is told about when the kernel would otherwise stall it (a thread
//! blocks in the kernel or comes back, a thread is preempted, a processor is
//! added or taken away), and their sources.
//!
//! This room owns the activations (kernel threads that drive processors and
//! the pool of spare ones), the announced blocking call, the monitor that
//! notices unannounced blocking and expired time slices, the preemption
//! signal and the processor set's changes. It must not choose which thread
//! runs (the policy does, through its `event` method) and never
//! hands an event to application code.
//!
//! # The seed's design, in user space
//!
//! In the paper's kernel (`004`), an activation is a kernel-provided context
//! that runs a processor; when its thread blocks in the kernel, the kernel
//! makes a fresh activation on the same processor and upcalls `Blocked`;
//! when the call finishes, it upcalls `Unblocked` on some processor. Linux
//! offers none of this, so ferry keeps a pool of spare kernel threads
//! (activations) and moves *processors* between them:
//!
//! | event | cause | who delivers it to which policy |
//! |-------|-------|---------------------------------|
//! | `Blocked(t)` | `t` entered [`blocking`](crate::blocking) and its processor had work, or the monitor found its kernel thread asleep in the kernel | the activation that takes the processor over (the processor's stand-in, which the kernel runs as soon as the core goes idle; else a woken spare, or, for the monitor's findings, the spare that kept the watch and found it), to that processor's policy |
//! | `Unblocked(t)` | `t`'s call returned and its processor was gone | any processor, through the runtime's upcall queue |
//! | `Preempted(t)` | `t`'s time slice ran out, or its processor is being removed | the processor `t` was preempted on, once the switch landed |
//! | `ProcessorAdded(i)` | `Handle::set_processors` grew the set | processor `i`'s own policy, first thing |
//! | `ProcessorRemoved(i)` | `Handle::set_processors` shrank the set | any remaining processor, through the upcall queue |
//!
//! The count of kernel threads running user code never exceeds the
//! processors held, but for one window: a kernel thread whose processor was
//! taken while it slept unannounced runs its thread on until its next call
//! into ferry, or until the monitor sees it running and pushes the thread
//! off with the preemption signal, whichever comes first.

mod activation;
mod blocking;
mod handover;
mod monitor;
mod per_processor;
mod preempt;
mod stand_in;

/// The atomics `per_processor` reaches through `super::atomic` (loom's, in
/// its models).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

pub(crate) use crate::event::Posted;
pub(crate) use activation::{
    Activation, Activations, Assignment, Critical, critical_depth, critical_enter,
    critical_release_inherited, forget_local, resumed_processor,
};
pub use blocking::blocking;
pub(crate) use blocking::{AbortStep, abort_step, call_aborted, thread_in_call};
pub(crate) use handover::lend;
pub(crate) use monitor::Monitor;
pub(crate) use per_processor::{LENT, ON_WAY, PROBING, PerProcessor, Reclaim};
pub use preempt::{PreemptionOff, preemption_off, without_preemption};
pub(crate) use preempt::{install as install_preemption, signal, signal_driver};
pub(crate) use stand_in::wake as wake_stand_in;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

pub(crate) use crate::sched::Event;

/// Kinds of event, for [`UpcallStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Blocked = 0,
    Unblocked = 1,
    Preempted = 2,
    ProcessorAdded = 3,
    ProcessorRemoved = 4,
}

/// Counts and latencies of delivered events, kept by the runtime.
pub(crate) struct Counters {
    count: [AtomicU64; 5],
    total_ns: [AtomicU64; 5],
    max_ns: [AtomicU64; 5],
    /// Preemptions that waited for a lock count to reach zero.
    pub(crate) chained: AtomicU64,
    /// Blocking calls that came back to their processor before anyone took it.
    pub(crate) reclaimed: AtomicU64,
    /// Takeovers of a processor whose kernel thread slept unannounced.
    pub(crate) unannounced: AtomicU64,
    /// Takeovers (of either kind) made by the processor's stand-in.
    pub(crate) by_stand_in: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            count: Default::default(),
            total_ns: Default::default(),
            max_ns: Default::default(),
            chained: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            unannounced: AtomicU64::new(0),
            by_stand_in: AtomicU64::new(0),
        }
    }

    /// Records one event of `kind` whose cause happened at `cause`.
    pub(crate) fn record(&self, kind: Kind, cause: Instant) {
        let ns = u64::try_from(cause.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let k = kind as usize;
        self.count[k].fetch_add(1, Relaxed);
        self.total_ns[k].fetch_add(ns, Relaxed);
        self.max_ns[k].fetch_max(ns, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> UpcallStats {
        let latency = |k: Kind| {
            let k = k as usize;
            let count = self.count[k].load(Relaxed);
            EventLatency {
                count,
                mean: Duration::from_nanos(self.total_ns[k].load(Relaxed) / count.max(1)),
                max: Duration::from_nanos(self.max_ns[k].load(Relaxed)),
            }
        };
        UpcallStats {
            blocked: latency(Kind::Blocked),
            unblocked: latency(Kind::Unblocked),
            preempted: latency(Kind::Preempted),
            processor_added: latency(Kind::ProcessorAdded),
            processor_removed: latency(Kind::ProcessorRemoved),
            chained_preemptions: self.chained.load(Relaxed),
            reclaimed_blocking_calls: self.reclaimed.load(Relaxed),
            unannounced_blocks: self.unannounced.load(Relaxed),
            stand_in_takeovers: self.by_stand_in.load(Relaxed),
        }
    }
}

/// How many events of one kind the scheduling policy received, and how long
/// each took from its cause to the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventLatency {
    /// Events delivered.
    pub count: u64,
    /// Mean time from the cause to the policy seeing the event.
    pub mean: Duration,
    /// Longest such time.
    pub max: Duration,
}

/// What the runtime's scheduler activations did so far; see
/// [`Handle::upcall_stats`](crate::Handle::upcall_stats).
///
/// The cause of each event is: for `blocked`, the moment the thread's call
/// was announced (or the moment the monitor found the kernel thread asleep);
/// for `unblocked`, the moment the call returned; for `preempted`, the
/// moment the signal reached the thread (or its lock count reached zero);
/// for processor changes, the call to `set_processors`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpcallStats {
    /// Threads that blocked in the kernel while their processor went on.
    pub blocked: EventLatency,
    /// Threads handed back after their processor was taken.
    pub unblocked: EventLatency,
    /// Threads preempted (time slice, or processor removal).
    pub preempted: EventLatency,
    /// Processors added.
    pub processor_added: EventLatency,
    /// Processors removed.
    pub processor_removed: EventLatency,
    /// Preemptions deferred until the thread released its last spinlock.
    pub chained_preemptions: u64,
    /// Announced blocking calls that returned before a spare took their
    /// processor (the thread went on without any event).
    pub reclaimed_blocking_calls: u64,
    /// Processors taken over from a kernel thread that slept in the kernel
    /// without announcing it.
    pub unannounced_blocks: u64,
    /// Takeovers (announced or not) made by the processor's stand-in, the
    /// spare kernel thread that waits on its core (see
    /// [`Builder::stand_ins`](crate::Builder::stand_ins)).
    pub stand_in_takeovers: u64,
}
