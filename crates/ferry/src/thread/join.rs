//! [`JoinHandle`]: the right to a thread's result, and joining it.
//!
//! This file owns the join side of the block's `join` word (see
//! `header::raw`); it must not touch the thread's stage before the thread
//! completed.

use std::fmt;

use super::park;
use crate::header::raw::RawJoin;
use crate::header::wait_record::{
    WaitRecord, register as register_wait, unregister as unregister_wait,
};
use crate::header::{Panic, Thread, Unparker};

/// Owns the right to join a thread. Dropping it detaches the thread (its
/// result, when it comes, is dropped).
pub struct JoinHandle<T> {
    pub(super) raw: RawJoin<T>,
}

impl<T> JoinHandle<T> {
    /// The thread.
    pub fn thread(&self) -> Thread {
        self.raw.thread()
    }

    /// Waits for the thread to finish and returns what it returned, or the
    /// panic that ended it. From a ferry thread this blocks only the caller's
    /// user-level thread; from a plain kernel thread, that kernel thread.
    ///
    /// # Panics
    /// If the thread is the caller's own (it would wait forever).
    pub fn join(self) -> Result<T, Panic> {
        match self.join_unless_current() {
            Ok(r) => r,
            Err(_) => panic!("ferry: a thread cannot join itself"),
        }
    }

    /// As [`join`](JoinHandle::join), but gives the handle back instead of
    /// waiting forever when the thread is the caller's own.
    pub fn join_unless_current(self) -> Result<Result<T, Panic>, JoinHandle<T>> {
        if !self.raw.is_complete() && self.raw.never_ran() {
            // A thread that has not run yet usually waits in the caller's
            // own queue (a fork followed by its join): give way once, so
            // that it runs, and most often finishes, before we look again.
            // That spares both sides the park/unpark round; if it did not
            // finish, we wait as usual below. (It cannot be the caller,
            // which is running.) A plain kernel thread just waits.
            if let Some(mut e) = crate::upcall::enter().filter(|e| e.p.in_thread(&e.tok)) {
                e.p.yield_current(e.tok.rb());
            }
        }
        if !self.raw.is_complete() {
            let me = Unparker::current();
            if matches!(&me, Unparker::Ferry(t) if t.as_ptr() == self.raw.thread_ptr()) {
                return Err(self);
            }
            // For the deadlock report: what this thread waits on.
            let mine = match &me {
                Unparker::Ferry(t) => Some(t.as_ptr()),
                Unparker::Kernel(_) => None,
            };
            if self.raw.register(me) {
                let id = usize::try_from(self.thread().id().as_u64()).unwrap_or(usize::MAX);
                let record = WaitRecord::nothing_to_undo(crate::waits::WaitsOn::Join as u32, id);
                if let Some(h) = mine {
                    // SAFETY: `h` is the calling thread's own block (it is
                    // running), and `record` stays in place until it is
                    // unregistered below.
                    unsafe { register_wait(&h.as_ref().waits, &record) };
                }
                // Spurious returns from `park` are possible; `COMPLETE` is
                // the truth. A token left behind only makes a later `park`
                // return once, which every caller of `park` tolerates.
                while !self.raw.is_complete() {
                    park();
                }
                if let Some(h) = mine {
                    // SAFETY: as above; the calling thread's own block.
                    unsafe { unregister_wait(&h.as_ref().waits, &record) };
                }
            }
        }
        Ok(self
            .raw
            .into_output()
            .expect("ferry: a completed thread's result is taken only by its one join"))
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.raw.is_complete()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread())
            .finish()
    }
}
