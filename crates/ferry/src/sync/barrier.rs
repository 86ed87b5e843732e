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

use std::fmt;

use super::waiter::{Entry, SpinLock, WaitList};

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
        let me = entry.waiter();
        {
            let mut st = self.state.lock_entered(&entry);
            st.arrived += 1;
            if st.arrived >= self.n {
                st.arrived = 0;
                let batch = st.waiters.take();
                drop(st);
                // Each wake enters on its own: a batch of them is no place
                // to keep preemption off.
                drop(entry);
                // SAFETY: barrier waiters never remove themselves; the batch
                // is ours.
                unsafe { batch.wake_all() };
                return BarrierWaitResult(true);
            }
            // SAFETY: `me` is in no list and stays on this frame until
            // `entry.wait` returns, which is after the leader took it out.
            unsafe { st.waiters.push_back(&me) };
        }
        let _waits = crate::waits::on(crate::waits::WaitsOn::Barrier, self);
        entry.wait(&me);
        BarrierWaitResult(false)
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish()
    }
}
