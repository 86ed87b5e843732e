//! The waiter word of one client slot: who may move a call from state to
//! state, and who counts it off the channel's pending calls. Only the word
//! and the count live here, so that a loom model (`tests/loom_waiter.rs`)
//! checks this very code; the unparking and the slot's memory are the
//! client's (`client.rs`).
//!
//! | from | to | by | counted off `pending` |
//! |------|----|----|----------------------|
//! | IDLE | WAITING | the caller, [`Waiter::arm`], before its index is pushed | (counted on) |
//! | WAITING | REPLIED | a poller, [`Waiter::reply`]: the index came back | by the caller, in [`Waiter::finish`] |
//! | WAITING | ABANDONED | the caller, [`Waiter::abandon`]: its deadline passed | by whoever claims it |
//! | ABANDONED | IDLE | [`Waiter::claim_abandoned`]: the caller that withdraws an unanswered call, or a poller that pops the late reply, or the death sweep; exactly one wins | by the winner |
//! | WAITING | DEAD | the death sweep, [`Waiter::fail`]: the peer is gone | by the sweep |
//! | REPLIED or DEAD | IDLE | the caller, [`Waiter::finish`], after taking its answer or error | REPLIED only |
//!
//! Every move out of WAITING or ABANDONED is a compare-exchange, so each
//! call is counted off exactly once whatever races (a late reply, a
//! deadline and a death at once).

use super::atomic::{AtomicU32, AtomicUsize, Ordering};

const IDLE: u32 = 0;
const WAITING: u32 = 1;
const REPLIED: u32 = 2;
const ABANDONED: u32 = 3;
const DEAD: u32 = 4;

/// What the caller finds when it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No answer yet.
    Waiting,
    /// Its reply came back.
    Replied,
    /// The peer died (or broke the channel).
    Dead,
}

/// What a poller does with a reply index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Its caller waits: wake it.
    Wake,
    /// Its caller gave up: free the slot if this is the late reply, then
    /// [`Waiter::claim_abandoned`].
    Abandoned,
    /// Nobody expects it (forged, repeated): ignore it.
    Refused,
}

/// One slot's waiter word.
#[derive(Debug)]
pub(crate) struct Waiter {
    state: AtomicU32,
}

impl Waiter {
    pub(crate) fn new() -> Waiter {
        Waiter {
            state: AtomicU32::new(IDLE),
        }
    }

    /// The caller, before it pushes its call: IDLE → WAITING, counted on.
    pub(crate) fn arm(&self, pending: &AtomicUsize) {
        pending.fetch_add(1, Ordering::Relaxed);
        self.state.store(WAITING, Ordering::Release);
    }

    /// The caller's look (Acquire: an answer's bytes are visible after
    /// [`Outcome::Replied`]).
    pub(crate) fn outcome(&self) -> Outcome {
        match self.state.load(Ordering::Acquire) {
            REPLIED => Outcome::Replied,
            DEAD => Outcome::Dead,
            _ => Outcome::Waiting,
        }
    }

    /// The caller took its answer or error: back to IDLE; a reply is
    /// counted off here (a death was counted off by the sweep).
    pub(crate) fn finish(&self, pending: &AtomicUsize) {
        if self.state.swap(IDLE, Ordering::AcqRel) == REPLIED {
            pending.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The caller's deadline passed: WAITING → ABANDONED. False if an
    /// answer or a death came first (the caller looks again).
    pub(crate) fn abandon(&self) -> bool {
        self.state
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Frees an abandoned call: ABANDONED → IDLE, counted off. False if
    /// another claimed it first (only the winner frees the slot).
    pub(crate) fn claim_abandoned(&self, pending: &AtomicUsize) -> bool {
        let won = self
            .state
            .compare_exchange(ABANDONED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            pending.fetch_sub(1, Ordering::Relaxed);
        }
        won
    }

    /// A poller popped this slot's index from the reply queue.
    pub(crate) fn reply(&self) -> Reply {
        match self
            .state
            .compare_exchange(WAITING, REPLIED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Reply::Wake,
            Err(ABANDONED) => Reply::Abandoned,
            Err(_) => Reply::Refused,
        }
    }

    /// The death sweep: WAITING → DEAD (true: wake the caller) or an
    /// abandoned call claimed; both counted off.
    pub(crate) fn fail(&self, pending: &AtomicUsize) -> bool {
        if self
            .state
            .compare_exchange(WAITING, DEAD, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            pending.fetch_sub(1, Ordering::Relaxed);
            return true;
        }
        self.claim_abandoned(pending);
        false
    }
}
