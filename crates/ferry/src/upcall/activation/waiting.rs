//! An activation as a spare in the runtime's pool: its wait for an
//! assignment (with no timeout, or until the retirement of a spare beyond
//! the reserve), the assignment word a handoff leaves it, and the
//! futex word that puts it to sleep and wakes it (the pool wait's, and a
//! stand-in's).
//!
//! This file owns the activation's side of the pool wait; it must not
//! decide which spare is handed work or which one retires (the pool,
//! `upcall::pool`, does), nor take a processor (the parent does, with the
//! assignment this wait returns).

use std::sync::PoisonError;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use super::{Activation, Assignment};
use crate::upcall::Shared;
use crate::upcall::pool::{RETIRE_AFTER, decode, encode};

impl Activation {
    /// Waits in the pool for an assignment; `None` at shutdown, or when it
    /// retired (a spare beyond the pool's reserve idle for
    /// [`RETIRE_AFTER`]).
    ///
    /// A spare of the reserve waits with no timeout: an idle runtime wakes
    /// none of them. Shutdown is never missed: `Set::mark_shut_down` is a `SeqCst` store
    /// before `wake_pool` takes the pool's lock, and this side arms `wake`
    /// (`SeqCst`), fences, then reads the flag. A spare in the pool when
    /// `wake_pool` looked is woken (or sees the flag, if the wake came
    /// before it armed); one that entered the pool after took the lock
    /// after, and so sees the flag. (A run's end under a short time slice
    /// was once seen to leave a spare asleep all the same; the end of the
    /// run wakes again every activation it has not joined yet,
    /// `Activations::join_all`, so no such sleep can hold it.)
    pub(super) fn wait(&self, shared: &Shared) -> Option<Assignment> {
        let mut idle_since: Option<Instant> = None;
        loop {
            self.prepare_sleep();
            std::sync::atomic::fence(SeqCst);
            let a = self.assigned.swap(0, SeqCst);
            if a != 0 {
                return Some(decode(a));
            }
            if shared.is_shut_down() {
                return None;
            }
            if !shared.activations.beyond_reserve(shared) {
                idle_since = None;
                self.sleep(None);
                crate::probe_mark!(crate::probe::SPARE_AWAKE);
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            match RETIRE_AFTER.checked_sub(since.elapsed()) {
                Some(left) if !left.is_zero() => self.sleep(Some(left)),
                _ => {
                    if shared.activations.retire(shared, self) {
                        // Closed now: the `Activation` itself stays until
                        // the runtime goes (a word may still name it).
                        *self.stat.lock().unwrap_or_else(PoisonError::into_inner) = None;
                        return None;
                    }
                    idle_since = None;
                }
            }
            crate::probe_mark!(crate::probe::SPARE_AWAKE);
        }
    }

    /// Whether an assignment waits for it (read by the pool, under its
    /// lock, before retiring it).
    pub(in crate::upcall) fn has_assignment(&self) -> bool {
        self.assigned.load(SeqCst) != 0
    }

    /// Hands this (pooled) activation an assignment and wakes it.
    pub(crate) fn assign(&self, a: Assignment) {
        self.assigned.store(encode(a), SeqCst);
        self.wake_up();
    }

    /// Arms the `wake` word before a [`sleep`](Self::sleep) that
    /// [`wake_up`](Self::wake_up) ends (the pool wait's, a stand-in's; own
    /// thread only).
    pub(in crate::upcall) fn prepare_sleep(&self) {
        self.wake.store(0, SeqCst);
    }

    /// Sleeps until [`wake_up`](Self::wake_up) (since the last
    /// [`prepare_sleep`](Self::prepare_sleep)), or for `timeout` if given.
    pub(in crate::upcall) fn sleep(&self, timeout: Option<std::time::Duration>) {
        crate::sys::futex_wait(&self.wake, 0, timeout);
    }

    /// Wakes it from the pool wait (for an assignment, or shutdown), or
    /// from a stand-in's sleep.
    pub(crate) fn wake_up(&self) {
        self.wake.store(1, SeqCst);
        crate::sys::futex_wake_one(&self.wake);
    }
}
