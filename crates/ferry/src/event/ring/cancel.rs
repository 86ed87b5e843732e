//! Cancelling a waiting owner's operation: [`Thread::abort`] of a thread
//! parked on the ring, and the terminator's abandon of its record.
//!
//! This room owns the map of watched owners (thread id to record) and
//! the cancel entries; it must not park or wake a thread (the cancelled
//! operation's completion wakes its owner, as any completion does) nor
//! free a record other than through the completion word ([`state`]).
//!
//! # Why the watch lock
//!
//! A cancel names its target by `user_data`, the record's address. Once
//! the record is freed that address may name a newer record, whose
//! operation a late cancel would cut short. So a cancel is submitted only
//! while its record cannot be freed:
//!
//! | who | under the watch lock | then |
//! |-----|----------------------|------|
//! | the owner, before it parks ([`Uring::watch`]) | inserts its id and record | parks until `DONE` |
//! | an aborter ([`Uring::abort`]) | finds the record, sets `aborted`, submits the cancel | — |
//! | the owner, after `DONE` ([`Uring::unwatch`]) | removes its id | reads `aborted` and frees (`Pending::finish`) |
//! | the terminator ([`Uring::abandon`]) | removes the id, submits the cancel | the completion word's `abandon` |
//!
//! The owner frees only after its `unwatch`, and the terminator's
//! `abandon` (after which the reaper may free) comes after its cancel;
//! so every cancel is submitted while its record lives. `aborted` is
//! written and read under the lock. A cancel that finds its operation
//! already complete fails (`-ENOENT`, `-EALREADY`): the operation's own
//! result stands. The cancel's own completion carries [`CANCEL_DATA`],
//! which the reaper skips.
//!
//! [`Thread::abort`]: crate::Thread::abort
//! [`state`]: super::state

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::{Mutex, MutexGuard, PoisonError};

use io_uring::opcode;

use super::{Op, Pending, Uring, abandon};

/// The `user_data` of a cancel entry (never a record's address).
pub(super) const CANCEL_DATA: u64 = 0;

/// The watched owners: thread id to record address.
#[derive(Default)]
pub(super) struct Watched(Mutex<HashMap<u64, usize>>);

impl Watched {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Uring {
    /// Watches `pending`, the operation thread `thread` is about to wait
    /// for, for [`Uring::abort`].
    pub(crate) fn watch(&self, thread: u64, pending: &Pending) {
        self.watched
            .lock()
            .insert(thread, pending.as_ptr() as usize);
    }

    /// Stops watching thread `thread`; before its `Pending::finish`.
    pub(crate) fn unwatch(&self, thread: u64) {
        self.watched.lock().remove(&thread);
    }

    /// Aborts the wait of thread `thread` ([`Thread::abort`]): cancels its
    /// operation, which then completes with `EINTR` as its result unless
    /// it completed first. False if the thread waits on no operation.
    ///
    /// [`Thread::abort`]: crate::Thread::abort
    pub(crate) fn abort(&self, thread: u64) -> bool {
        let watched = self.watched.lock();
        let Some(&op) = watched.get(&thread) else {
            return false;
        };
        let op = op as *const Op;
        // SAFETY: a watched record lives until its owner unwatched it (see
        // the module docs), and the lock is held.
        unsafe { (*op).aborted.store(true, Relaxed) };
        // An error leaves the operation to complete on its own: the abort
        // still counts as given (the owner is in a ring wait).
        let _ = self.cancel(op);
        drop(watched);
        true
    }

    /// The terminator's side of the wait of thread `thread` on `op`, which
    /// stopped for good: stops watching it, cancels the operation, and
    /// gives the record to the completion word (freed now if it already
    /// completed, else by the reaper when it does).
    ///
    /// # Safety
    /// `op` is `Pending::as_ptr` of a handle whose thread `thread` has
    /// stopped for good, never finished, and this is called once for it.
    pub(crate) unsafe fn abandon(&self, thread: u64, op: *const ()) {
        let mut watched = self.watched.lock();
        watched.remove(&thread);
        // An error leaves the operation to complete on its own.
        let _ = self.cancel(op.cast());
        drop(watched);
        // SAFETY: the caller's contract.
        unsafe { abandon(op) };
    }

    /// Submits the cancel of `op`'s operation, while `op` lives (the
    /// caller holds the watch lock, see the module docs).
    fn cancel(&self, op: *const Op) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(op as u64)
            .build()
            .user_data(CANCEL_DATA);
        self.in_flight.fetch_add(1, Release);
        if let Err(e) = self.submit(&entry) {
            self.in_flight.fetch_sub(1, Relaxed);
            return Err(e);
        }
        self.cancels.fetch_add(1, Relaxed);
        Ok(())
    }
}
