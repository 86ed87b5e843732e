//! What the scheduler activations' events cost: how many of each kind the
//! policies received and how long each took from its cause, and the
//! activations' other counts ([`UpcallStats`], public as
//! `ferry::upcall::UpcallStats`).
//!
//! This file owns the counters; it must not decide anything from them.
//! Every count is a relaxed atomic add, off the switch path.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

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
    /// Sleeping processors woken because work was published.
    pub(crate) processor_wakes: AtomicU64,
    /// Activations switched to straight from the poll that gave them a call.
    pub(crate) direct_calls: AtomicU64,
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
            processor_wakes: AtomicU64::new(0),
            direct_calls: AtomicU64::new(0),
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
            processor_wakes: self.processor_wakes.load(Relaxed),
            direct_calls: self.direct_calls.load(Relaxed),
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
    /// Sleeping processors woken because threads became runnable (a
    /// spawn, a wake, a batch of wakes, or a spinner that found work and
    /// handed its watch on); not counted: wakes to look at new event
    /// sources, or at shutdown.
    pub processor_wakes: u64,
    /// Incoming migrating calls whose activation a processor switched to
    /// straight from the poll that found the call (no run queue, no pick by
    /// the policy); the others found something else ready on the processor
    /// and reached their activation through the policy, at the caller's
    /// priority.
    pub direct_calls: u64,
}
