//! [`Quiet`]: whether a wait has ever had a waiter, so that its notifiers
//! skip the full fence of the no-lost-wakeup handshake until one comes.
//!
//! A notifier must order its published change before its look for
//! waiters, and a waiter its queueing before its last look at the change
//! (a store then a load on each side: a full fence each). A wait whose
//! waiters never come (a stream whose reader always finds bytes, a channel
//! whose consumer is never starved) would pay the notifier's fence on
//! every operation for nothing. Here the notifier pays only a compiler
//! fence and one load until the first waiter arms the wait with the
//! *heavy* fence of ferry-queue's asymmetric pair
//! ([`ferry_queue::wait::heavy_fence`]: `membarrier`, which runs a full
//! barrier on every running thread of the process); from then on the
//! notifier pays the full fence as before. The first wait costs one
//! system call more; the wait stays armed for its life.
//!
//! This room owns the one word; it must not queue, park or wake (its
//! owner, `park.rs`, does), nor decide when a wait may be disarmed (only
//! its owner, holding it alone, may [`reset`](Quiet::reset) it).
//!
//! # Protocol
//!
//! | `armed` | written by | meaning for a notifier |
//! |---------|------------|------------------------|
//! | `NEVER` | made so (or [`reset`](Quiet::reset) by an owner holding it alone) | no waiter has looked yet: skip the look for waiters |
//! | `ARMING` | a waiter, before its heavy fence | a waiter may be queued: full fence, then look |
//! | `ARMED` | a waiter, after its heavy fence (Release) | as `ARMING`; a later waiter that reads it (Acquire) needs no heavy fence of its own |
//!
//! Why nothing is missed: a notifier that read `NEVER` did so before the
//! heavy fence of the waiter that wrote `ARMING` reached its CPU (after
//! that barrier the store is visible), so the notifier's change, which it
//! stored before that load, was made visible by the same barrier, which
//! completed before `ARMED` was written: any waiter that reads `ARMED`, or
//! that made the heavy fence itself, then finds the change when it looks.
//! A notifier that reads anything else does the full handshake. Where
//! `membarrier` is not available both fences are full fences
//! (ferry-queue's symmetric mode) and the argument is the usual one.
//! `tests/loom_quiet.rs` models it with full fences.

use super::quiet_atomic::Ordering::{Acquire, Relaxed, Release};
use super::quiet_atomic::{AtomicU8, heavy_fence, light_fence};

/// No waiter has ever looked (see the protocol table).
const NEVER: u8 = 0;
/// A waiter is making the heavy fence.
const ARMING: u8 = 1;
/// A waiter made the heavy fence.
const ARMED: u8 = 2;

/// Whether a wait has ever had a waiter (see the module docs).
#[derive(Debug)]
pub(crate) struct Quiet {
    armed: AtomicU8,
}

impl Default for Quiet {
    fn default() -> Quiet {
        Quiet::new()
    }
}

impl Quiet {
    /// A wait nobody has waited on.
    pub(crate) fn new() -> Quiet {
        Quiet {
            armed: AtomicU8::new(NEVER),
        }
    }

    /// The notifier's side, after it published its change: true if no
    /// waiter can have looked, so the look for waiters can be skipped;
    /// false if the caller must make the full handshake (a full fence,
    /// then its look).
    #[inline(always)]
    pub(crate) fn never_waited(&self) -> bool {
        light_fence();
        self.armed.load(Relaxed) == NEVER
    }

    /// The waiter's side, before it queues itself and makes its own
    /// handshake: arms the wait if it is not yet.
    #[inline]
    pub(crate) fn arm(&self) {
        if self.armed.load(Acquire) != ARMED {
            self.arm_slow();
        }
    }

    #[cold]
    fn arm_slow(&self) {
        // Never back from `ARMED` to `ARMING`: a waiter that read `ARMED`
        // skipped the fence, and a later one must not be told otherwise
        // (it would only fence once more, but keep the word monotonic).
        let _ = self.armed.compare_exchange(NEVER, ARMING, Relaxed, Relaxed);
        heavy_fence();
        self.armed.store(ARMED, Release);
    }

    /// Back to `NEVER`, by an owner that holds the wait alone (no waiter,
    /// no notifier can reach it).
    pub(crate) fn reset(&mut self) {
        self.armed = AtomicU8::new(NEVER);
    }
}
