//! The fine-grain policy (Synthesis, 002 §4.4): each thread's CPU quantum
//! follows the rate of data it moves through its streams, and a thread an
//! event unblocked goes to the front of its processor's queue.
//!
//! This room owns the rule (rate to quantum, [`quantum_for`]) and where
//! this policy puts runnable threads. It must not preempt anybody itself:
//! it publishes the quantum of the thread it picks in the processor's
//! quantum word ([`Cx::quantum`]), and the monitor (`upcall::monitor`)
//! sends the preemption signal when that thread has held its processor
//! that long, as it does for the runtime's time slice under the default
//! policy. Nor does it count bytes: streams do, on the running thread
//! (`thread::stream_bytes`, into the header).
//!
//! # The rule
//!
//! When a processor picks a thread to run, the policy takes the bytes the
//! thread moved through streams since it was last picked (the header's
//! count, reset here) and the time since then (the header's `picked_at`,
//! written here), and turns them into a rate and a quantum:
//!
//! - `rate = bytes / max(elapsed, RATE_WINDOW_MIN)`, in bytes per second
//!   ([`RATE_WINDOW_MIN`] = 200 µs keeps a thread picked twice in a row
//!   from reading a burst as a huge rate; a thread never picked before
//!   counts `RATE_WINDOW_MIN` too);
//! - `quantum = MIN_QUANTUM + rate / BYTES_PER_SECOND_PER_MICROSECOND`
//!   microseconds, at most [`MAX_QUANTUM`]: 200 µs for a thread that
//!   moves no stream data, 1 µs more per 1,000 bytes/s, up to 2 ms (a
//!   thread moving 1.8 MB/s or more).
//!
//! A thread that moves no stream data so gets the minimum quantum: when
//! others wait, it gives way every 200 µs (alone, it is preempted and
//! picked again, a signal and a switch). The monitor enforces a quantum to
//! within a look (20 µs, about 50 µs as the kernel wakes it).
//!
//! # Where threads go
//!
//! - a woken `Normal` thread (an unpark, a blocking call that came back)
//!   goes to the next-to-run slot, the front of the processor's queue; a
//!   thread that sat there goes to the back of its ring;
//! - spawned, yielding and preempted threads, threads a timer woke (several
//!   due at once keep their deadlines' order), `High` and `Low` threads go
//!   to the back of their priority's ring (the injector when it is full);
//!   a batch goes to the back of the rings as under the default policy;
//! - the next thread is, in order: the `High` ring, the injector's `High`
//!   threads, the next-to-run slot, the injector's `Normal` threads
//!   (threads woken off the processors, by a kernel thread or a device,
//!   are unblocked threads too: they go before the rings), the `Normal`
//!   ring, the rest of the injector, the `Low` ring, then one stolen from
//!   another processor. Two bounds keep that from starving the ring:
//!   after [`NEXT_STREAK_MAX`] picks since they last did, the ring and the
//!   injector go before a full slot once (a pair of threads that wake
//!   each other would otherwise keep it for ever), and every
//!   [`RING_FIRST_EVERY`]th pick the ring goes before the injector.
//!
//! # Who writes what
//!
//! | word | written by | read by |
//! |------|------------|---------|
//! | header `stream_bytes` | the thread (adds, while it runs); this policy (reset, when it picks the thread) | this policy |
//! | header `picked_at` | this policy, when it picks the thread | this policy |
//! | processor's quantum word ([`Cx::quantum`]) | this policy, before the processor switches to the thread it picked (so before the `dispatch` word's Release store) | the monitor, after an Acquire load of `dispatch`: it sees that dispatch's quantum or a later one (`tests/loom_quantum.rs`) |
//!
//! The header's words change hands with the thread through the run queues
//! (a push's Release, a pop's Acquire), as its saved context does: they
//! are never written by two kernel threads at once.

use std::time::Duration;

use super::work_stealing::{push_back, queue_batch};
use super::{Chain, Cx, Event, LEVELS, Policy, Priority, Ready};
use crate::header::Thread;

/// The quantum of a thread that moves no stream data.
pub(crate) const MIN_QUANTUM: Duration = Duration::from_micros(200);

/// The largest quantum, whatever the rate.
pub(crate) const MAX_QUANTUM: Duration = Duration::from_millis(2);

/// The rate that earns one more microsecond of quantum, in bytes per
/// second.
pub(crate) const BYTES_PER_SECOND_PER_MICROSECOND: u64 = 1000;

/// The shortest time a rate is taken over.
pub(crate) const RATE_WINDOW_MIN: Duration = Duration::from_micros(200);

/// Picks since the ring and the injector last went before a full
/// next-to-run slot after which they go first once (as the default
/// policy's bound of the same name).
pub(crate) const NEXT_STREAK_MAX: u32 = 8;

/// The `Normal` ring goes before the injector once per this many picks.
pub(crate) const RING_FIRST_EVERY: u32 = 61;

/// The rate of `bytes` moved in `elapsed` (at least [`RATE_WINDOW_MIN`]),
/// in bytes per second.
pub(crate) fn rate(bytes: u64, elapsed: Duration) -> u64 {
    let us = elapsed.max(RATE_WINDOW_MIN).as_micros();
    let r = u128::from(bytes) * 1_000_000 / us;
    u64::try_from(r).unwrap_or(u64::MAX)
}

/// The quantum for a thread that moves `rate` bytes per second through its
/// streams (see the module docs).
pub(crate) fn quantum_for(rate: u64) -> Duration {
    let extra = Duration::from_micros(rate / BYTES_PER_SECOND_PER_MICROSECOND);
    (MIN_QUANTUM + extra.min(MAX_QUANTUM)).min(MAX_QUANTUM)
}

/// The monotonic clock in microseconds, low 32 bits (wraps every 71
/// minutes; only differences are used), never `0` (which means "never").
fn now_us() -> u32 {
    ((crate::sys::monotonic_ns() / 1000) as u32).max(1)
}

/// The fine-grain [`Policy`]; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct FineGrain {
    picks: u32,
    /// `picks` when the ring and the injector last went before a full
    /// next-to-run slot.
    fair_at: u32,
    next_victim: usize,
}

impl FineGrain {
    /// Sets the quantum of `t`, which this processor is about to run,
    /// from the stream bytes it moved since it was last picked.
    fn start(cx: &Cx<'_>, t: &Thread) {
        let h = t.header();
        let now = now_us();
        let bytes = h.take_stream_bytes();
        let last = h.swap_picked_at(now);
        let elapsed = if last == 0 {
            RATE_WINDOW_MIN
        } else {
            Duration::from_micros(u64::from(now.wrapping_sub(last)))
        };
        let q = quantum_for(rate(u64::from(bytes), elapsed));
        super::quantum_word::publish(cx.quantum, q.as_micros() as u32);
    }

    fn pick(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        self.picks = self.picks.wrapping_add(1);
        let high = Priority::High.level();
        let normal = Priority::Normal.level();
        let low = Priority::Low.level();
        if let Some(t) = cx.queue.pop(high) {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop_at_least(high) {
            return Some(t);
        }
        let full = !cx.next.is_empty();
        let defer = full && self.picks.wrapping_sub(self.fair_at) > NEXT_STREAK_MAX;
        if defer {
            self.fair_at = self.picks;
        } else if full && let Some(t) = cx.next.take() {
            return Some(t);
        }
        let ring_first = defer || self.picks.is_multiple_of(RING_FIRST_EVERY);
        if ring_first && let Some(t) = cx.queue.pop(normal) {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop_at_least(normal) {
            return Some(t);
        }
        if let Some(t) = cx.queue.pop(normal) {
            return Some(t);
        }
        if let Some(t) = cx.next.take() {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop() {
            return Some(t);
        }
        cx.queue.pop(low)
    }
}

impl Policy for FineGrain {
    fn ready(&mut self, cx: &Cx<'_>, t: Thread, why: Ready) {
        if why == Ready::Woken && t.priority() == Priority::Normal {
            if let Some(displaced) = cx.next.replace(t) {
                push_back(cx, displaced);
            }
            return;
        }
        push_back(cx, t);
    }

    fn ready_batch(&mut self, cx: &Cx<'_>, batch: Chain) {
        queue_batch(cx, batch);
    }

    fn next(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        let t = match self.pick(cx) {
            Some(t) => t,
            None => {
                let (t, victim) = cx.queue.steal(self.next_victim)?;
                self.next_victim = victim + 1;
                t
            }
        };
        Self::start(cx, &t);
        Some(t)
    }

    fn next_local(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        let t = self.pick(cx)?;
        Self::start(cx, &t);
        Some(t)
    }

    fn has_ready(&self, cx: &Cx<'_>) -> bool {
        !cx.next.is_empty() || (0..LEVELS).any(|l| !cx.queue.is_empty(l)) || cx.injector.has_work()
    }

    /// Starts its quantum, as a pick does.
    fn runs_unpicked(&mut self, cx: &Cx<'_>, t: &Thread) {
        Self::start(cx, t);
    }

    fn event(&mut self, cx: &Cx<'_>, event: Event<'_>) {
        match event {
            Event::Unblocked(t) => self.ready(cx, t, Ready::Woken),
            Event::Preempted(t) => push_back(cx, t),
            Event::Blocked(_) | Event::ProcessorAdded(_) | Event::ProcessorRemoved(_) => {}
        }
    }
}
