//! The default policy: per-processor FIFO rings by priority, a next-to-run
//! slot for woken and just-spawned threads, a global injector and work
//! stealing (the design of FastThreads' per-processor ready lists, Go's and
//! Tokio's schedulers).
//!
//! This room owns the decisions only; the queues are [`super::queue`]'s.

use super::{Chain, Cx, Event, LEVELS, Policy, Priority, RING_SLOTS, Ready};
use crate::header::Thread;

/// A processor looks at the injector before its own `Normal` threads once
/// per this many picks (Go uses 61 for its global queue), so that threads
/// woken from outside are not starved by local threads that keep each
/// other busy. Not before its own `High` ones, and it takes no `Low` one
/// there: the order between levels stays strict.
const INJECTOR_FIRST_EVERY: u32 = 61;

/// Picks the next-to-run slot may win over the `Normal` ring and the
/// injector before they go first once. A pair of threads that wake each
/// other and block would otherwise hand the processor between them through
/// the slot for ever, and without a time slice (`time_slice(None)`) a thread
/// waiting in the ring would never run. Once this many picks have passed
/// since the bound last let the ring and the injector go first, the next
/// pick that finds the slot full looks at them before it (Tokio bounds its
/// LIFO slot the same way; Go makes its `runnext` inherit the time slice).
const NEXT_STREAK_MAX: u32 = 8;

/// The most threads a processor moves from the injector to its ring in one
/// take, beyond the one it runs (half a ring).
const INJECTOR_SHARE_MAX: usize = RING_SLOTS / 2;

/// The default [`Policy`]:
///
/// - a woken `Normal` thread goes to the next-to-run slot, so a thread that
///   wakes another and then blocks hands its processor straight over (a
///   ping-pong pair runs back to back); whatever sat in the slot moves to
///   the back of its ring, unless it is a spawned thread that has not run
///   yet, which keeps the slot (the woken one goes to the ring);
/// - a spawned `Normal` thread goes to the slot if the slot and the
///   `Normal` ring are empty: it is next in FIFO order anyway, and a fork
///   followed by its join then runs the child from the slot, where an idle
///   processor does not steal it for [`super::NEXT_STEAL_AFTER`] (Go puts a
///   new goroutine in `runnext` for the same reason); later spawns queue
///   behind it in the ring, so spawned threads of one level keep their
///   order on one processor (across processors a thief may start a later
///   one first, as before);
/// - other spawned threads, yielding, `High` and `Low` threads, and threads
///   a timer woke (no thread hands over to them, and several due at once
///   keep their deadlines' order), go to the back of their priority's ring
///   (the injector when the ring is full, or while the injector holds
///   threads of that level: they queue behind those, which drain into the
///   rings in order as the rings empty);
/// - a batch of threads woken together (a condition variable's
///   `notify_all`, a barrier) goes to the back of the rings in the batch's
///   order, never to the slot (one slot cannot hold a batch, and the last
///   of it would run first), and what the rings have no room for is
///   spliced into the injector in one piece, still in order;
/// - scheduler-activation events (004 §4.2): an `Unblocked` thread is
///   queued as a woken one, a `Preempted` one goes to the back of its ring
///   (it had its turn); `Blocked` and processor changes need no queue work
///   (a leaving processor's threads were moved to the injector);
/// - the next thread is, in order: the `High` ring, the next-to-run slot,
///   the `Normal` ring, the injector, the `Low` ring, then one stolen from
///   another processor's rings (highest level first); every
///   [`INJECTOR_FIRST_EVERY`]th pick looks at the injector's `High` and
///   `Normal` threads right after the `High` ring, and
///   the `Normal` ring and the injector go before a full slot once every
///   [`NEXT_STREAK_MAX`] picks or more (not before a spawned thread's,
///   which would break their order; it was put there only when the slot and
///   its level's ring were empty, and holds it for one run); the injector
///   gives a `Normal` or `High` thread there, never a `Low` one; a
///   processor that finds its `Normal` ring empty takes, with the
///   injector's thread it runs, an even share of the threads queued
///   behind it (at most half a ring) into its ring, in order, under one
///   lock.
#[derive(Debug, Default)]
pub(crate) struct WorkStealing {
    picks: u32,
    /// `picks` when the `Normal` ring and the injector last went before a
    /// full next-to-run slot.
    fair_at: u32,
    /// Whether the thread this processor last put in its next-to-run slot
    /// was spawned there (it has not run; a thief may have taken it since,
    /// so this is only meaningful while the slot is full).
    next_is_spawned: bool,
    next_victim: usize,
}

impl WorkStealing {
    /// Puts `t` in the next-to-run slot (`spawned`: it was just spawned);
    /// whatever sat there goes to the back of its ring.
    fn put_next(&mut self, cx: &Cx<'_>, t: Thread, spawned: bool) {
        self.next_is_spawned = spawned;
        if let Some(displaced) = cx.next.replace(t) {
            Self::push_back(cx, displaced);
        }
    }

    /// How many threads beyond the one it runs a processor whose ring is
    /// empty takes from the injector at once: an even share among the
    /// processors (Go's `globrunqget`: `len / gomaxprocs + 1`), at most
    /// half a ring, so that a later overflow still finds room.
    fn share(cx: &Cx<'_>) -> usize {
        (cx.injector.len() / cx.queue.processors()).min(INJECTOR_SHARE_MAX)
    }

    fn push_back(cx: &Cx<'_>, t: Thread) {
        push_back(cx, t);
    }
}

/// Puts `t` at the back of its priority's ring, or in the injector when
/// the ring is full or the injector holds threads of its level: a thread
/// never overtakes one that overflowed before it. (Were later threads to
/// take the ring's room as it drains, those in the injector would wait for
/// the one pick in [`INJECTOR_FIRST_EVERY`] while newer ones went first: a
/// server with more connections ready than its rings hold served some of
/// them several rounds late, its p99 three to four times Go's.)
#[inline]
pub(super) fn push_back(cx: &Cx<'_>, t: Thread) {
    let level = t.priority().level();
    // Behind the injector's threads of its level, if it holds any.
    if cx.injector.holds(level) {
        // Closed only once every processor stopped (as below).
        drop(cx.injector.push(t));
        return;
    }
    if let Err(t) = cx.queue.push_back(level, t)
        && let Err(t) = cx.injector.push(t)
    {
        // Closed only once every processor stopped: not while one
        // decides. Should it be, the thread is abandoned as at the end.
        drop(t);
    }
}

/// Puts every thread of `batch` at the back of its priority's ring, in
/// the batch's order; from the first thread a level's ring has no room
/// for, the rest of that level goes to the injector in one piece.
#[inline]
pub(super) fn queue_batch(cx: &Cx<'_>, mut batch: Chain) {
    // Each level's ring first, while it has room; from the first
    // thread it has none for, the rest of that level, in order, is
    // spliced into the injector under one lock (a thief may free ring
    // slots meanwhile: taking them would reorder the batch).
    // A level the injector holds threads of goes there whole, behind
    // them (see `push_back`).
    let mut rest = Chain::new();
    let mut full: [bool; LEVELS] = std::array::from_fn(|l| cx.injector.holds(l));
    while let Some(t) = batch.pop() {
        let level = t.priority().level();
        if full[level] {
            rest.push(t);
        } else if let Err(t) = cx.queue.push_back(level, t) {
            full[level] = true;
            rest.push(t);
        }
    }
    // Closed only once every processor stopped (see `push_back`): the
    // chain's threads are then abandoned, as at the end.
    drop(cx.injector.push_chain(rest));
}

impl Policy for WorkStealing {
    fn ready(&mut self, cx: &Cx<'_>, t: Thread, why: Ready) {
        if t.priority() == Priority::Normal {
            let normal = Priority::Normal.level();
            match why {
                // To the slot, unless a spawned thread waits there: it
                // keeps the slot, and this one goes to the ring below.
                Ready::Woken if !self.next_is_spawned || cx.next.is_empty() => {
                    return self.put_next(cx, t, false);
                }
                // Only the owner fills the slot (thieves only empty it), so
                // an empty slot and ring stay so until this `replace`.
                Ready::Spawned if cx.next.is_empty() && cx.queue.is_empty(normal) => {
                    return self.put_next(cx, t, true);
                }
                _ => {}
            }
        }
        if why == Ready::Expired {
            // Ahead of the backlog of its level, in the order the timers
            // fired (Go runs a goroutine whose timer fired next, Tokio a
            // task woken from its timer wheel in its LIFO slot): a sleeper
            // must not wait behind every thread made runnable meanwhile.
            // Closed only once every processor stopped (as in `push_back`).
            drop(cx.injector.push_express(t));
            return;
        }
        Self::push_back(cx, t);
    }

    fn ready_batch(&mut self, cx: &Cx<'_>, batch: Chain) {
        queue_batch(cx, batch);
    }

    fn next(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        if let Some(t) = self.next_local(cx) {
            return Some(t);
        }
        let (t, victim) = cx.queue.steal(self.next_victim)?;
        self.next_victim = victim + 1;
        Some(t)
    }

    fn next_local(&mut self, cx: &Cx<'_>) -> Option<Thread> {
        self.picks = self.picks.wrapping_add(1);
        let high = Priority::High.level();
        let normal = Priority::Normal.level();
        let low = Priority::Low.level();
        // Threads whose timers fired go first in their level (the
        // injector's express lane).
        if let Some(t) = cx.injector.pop_express(high) {
            return Some(t);
        }
        if let Some(t) = cx.queue.pop(high) {
            return Some(t);
        }
        if self.picks.is_multiple_of(INJECTOR_FIRST_EVERY)
            && let Some(t) = cx.injector.pop_at_least(normal)
        {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop_at_least(high) {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop_express(normal) {
            return Some(t);
        }
        // The slot goes before the `Normal` ring and the injector, unless
        // its streak bound lets them go first this once.
        let full = !cx.next.is_empty();
        let defer = full
            && !self.next_is_spawned
            && self.picks.wrapping_sub(self.fair_at) > NEXT_STREAK_MAX;
        if defer {
            self.fair_at = self.picks;
        } else if full && let Some(t) = cx.next.take() {
            return Some(t);
        }
        if let Some(t) = cx.queue.pop(normal) {
            return Some(t);
        }
        // The `Normal` ring is empty: take this processor's share of the
        // injector's level at once, into the ring, in order.
        if let Some(t) = cx.injector.pop_share(normal, Self::share(cx), |t| {
            let level = t.priority().level();
            cx.queue.push_back(level, t)
        }) {
            return Some(t);
        }
        // Deferred, the slot's `Normal` thread still goes before any `Low`.
        if let Some(t) = cx.next.take() {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop_express(low) {
            return Some(t);
        }
        if let Some(t) = cx.injector.pop() {
            return Some(t);
        }
        cx.queue.pop(low)
    }

    fn event(&mut self, cx: &Cx<'_>, event: Event<'_>) {
        match event {
            Event::Unblocked(t) => self.ready(cx, t, Ready::Woken),
            Event::Preempted(t) => Self::push_back(cx, t),
            Event::Blocked(_) | Event::ProcessorAdded(_) | Event::ProcessorRemoved(_) => {}
        }
    }

    fn has_ready(&self, cx: &Cx<'_>) -> bool {
        !cx.next.is_empty() || (0..LEVELS).any(|l| !cx.queue.is_empty(l)) || cx.injector.has_work()
    }

    /// Nothing: a pick keeps no state of the thread picked.
    fn runs_unpicked(&mut self, _cx: &Cx<'_>, _t: &Thread) {}
}
