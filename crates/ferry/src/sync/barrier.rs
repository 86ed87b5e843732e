//! [`Barrier`]: `n` threads wait until all `n` have arrived, generation after
//! generation.
//!
//! This room owns the arrival count and the current generation's waiters; it
//! never parks while holding its spinlock.
//!
//! # Protocol
//!
//! Everything is under one spinlock: `arrived` (threads of the current
//! generation so far) and `waiters` (those of them that block). The `n`-th
//! arrival is the leader: it resets `arrived` to 0 and detaches `waiters`,
//! which ends the generation (later arrivals start the next one in an empty
//! list), then wakes the detached batch after dropping the spinlock. A waiter
//! only leaves when woken, so a generation's batch never mixes with the next.
//!
//! A terminated waiter (see `waiter`'s termination table) still queued is
//! removed and its arrival taken back (`arrived - 1`): the generation waits
//! for `n` arrivals of threads that pass it. One already released (woken,
//! or in the batch being woken) passed the barrier; nothing is given on.

use std::fmt;

use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

struct State {
    arrived: usize,
    waiters: WaitList,
}

/// A reusable barrier for ferry threads and plain kernel threads alike.
///
/// ```
/// use std::sync::Arc;
/// use ferry::sync::Barrier;
///
/// ferry::run(|| {
///     let barrier = Arc::new(Barrier::new(3));
///     let handles: Vec<_> = (0..3)
///         .map(|_| {
///             let b = Arc::clone(&barrier);
///             ferry::spawn(move || b.wait().is_leader())
///         })
///         .collect();
///     let leaders = handles
///         .into_iter()
///         .map(|h| h.join().unwrap())
///         .filter(|&leader| leader)
///         .count();
///     assert_eq!(leaders, 1);
/// })
/// .unwrap();
/// ```
pub struct Barrier {
    n: usize,
    state: SpinLock<State>,
}

/// What [`Barrier::wait`] returns: whether this thread was the leader (the
/// last to arrive) of its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// True for exactly one thread per generation: the one whose arrival
    /// released the others.
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `n` threads (`0` acts as `1`: every wait returns at once
    /// as leader).
    pub const fn new(n: usize) -> Barrier {
        Barrier {
            n,
            state: SpinLock::new(State {
                arrived: 0,
                waiters: WaitList::new(),
            }),
        }
    }

    /// Blocks (only the user-level thread, on a ferry thread) until `n`
    /// threads have called `wait` in this generation, then starts the next
    /// generation.
    pub fn wait(&self) -> BarrierWaitResult {
        let entry = Entry::enter();
        // SAFETY: `abandon` takes a barrier, which outlives its waits.
        let me = entry.waiter(
            unsafe { Site::new(Barrier::abandon, self, None::<&()>) }
                .describing(WaitsOn::Barrier, self),
        );
        {
            let mut st = self.state.lock_entered(&entry);
            st.arrived += 1;
            if st.arrived >= self.n {
                st.arrived = 0;
                let batch = st.waiters.take();
                drop(st);
                // SAFETY: barrier waiters never remove themselves (a
                // terminator leaves a batch's waiter alone until it is
                // woken); the batch is ours.
                unsafe { batch.wake_all(entry) };
                return BarrierWaitResult(true);
            }
            // SAFETY: `me` is in no list and stays on this frame until
            // `entry.wait` returns, which is after the leader took it out
            // (or its terminator did, for a thread that never runs again).
            unsafe { st.waiters.push_back(&me) };
        }
        entry.wait(&me);
        BarrierWaitResult(false)
    }

    /// Leaves the wait of a terminated waiter `w` (see the module docs).
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `b` points at a barrier, `w` is a waiter
    /// of it whose thread has stopped for good.
    unsafe fn abandon(b: *const (), _: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let b = unsafe { &*b.cast::<Barrier>() };
        let entry = Entry::enter();
        let mut st = b.state.lock_entered(&entry);
        if st.waiters.holds(w) {
            // SAFETY: queued in this list (checked under its spinlock).
            unsafe { st.waiters.remove(w) };
            st.arrived -= 1;
            return true;
        }
        // Released (woken), or in the batch being released (wait for it).
        w.is_woken() || w.is_out()
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish()
    }
}
