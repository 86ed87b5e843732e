//! [`ParkWait`]: the `ferry_queue` wait strategy that blocks at user level,
//! so a queue's synchronous `push`/`pop` park a ferry thread instead of its
//! processor.
//!
//! This room owns one waiter list per strategy value and the no-lost-wakeup
//! handshake with the notifying side; it never touches a queue's indices (it
//! only re-runs the `ready` closure), and never parks holding its spinlock.
//!
//! # Protocol
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `list` (under the spinlock) | a waiter pushes itself and removes itself when its re-check succeeds; a notifier pops | who may be asleep |
//! | `queued` | whoever changes `list`, under the spinlock (SeqCst) | `list`'s length, read by notifiers without the spinlock |
//! | `quiet` (`quiet.rs`'s `Quiet`) | the first waiter, before it pushes itself | whether any waiter ever came: until one does, notifiers skip the handshake below |
//!
//! The waiter arms `quiet`, pushes itself (raising `queued`), issues a
//! SeqCst fence, and only then checks `ready` once more before it parks.
//! The notifier has already published its change to the queue; it reads
//! `quiet` (after a compiler fence) and stops there if no waiter ever came;
//! otherwise it issues a SeqCst fence and reads `queued`. The fences order
//! the two one way or the other: either the waiter's last check sees the
//! change, or the notifier sees the waiter queued and pops it. The first
//! waiter's arming is a `membarrier` (`quiet.rs` says why a notifier that
//! skipped is never missed): a wait that never has a waiter costs its
//! notifiers no fence, one that had one costs what it did before.
//!
//! A notifier that pops a waiter whose re-check was already succeeding
//! passes the wakeup on (`notify_one` again), so a wakeup is never absorbed
//! by a thread that does not need it.
//!
//! A terminated waiter (see `waiter`'s termination table) is handled the
//! same way: still queued, it is removed; already popped, it passes the
//! wakeup on (`notify_one`).

use std::fmt;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicUsize, fence};

use ferry_queue::wait::Wait;

use super::quiet::Quiet;
use super::spin::SpinLock;
use super::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

/// Tries of `ready` (with the spin hint between them) before a waiter queues
/// itself and parks.
const SPINS: u32 = 32;

/// A [`ferry_queue::wait::Wait`] strategy that parks the waiting thread: the
/// user-level thread on a ferry thread (its processor runs others), the
/// kernel thread otherwise.
///
/// This is what [`channel`](super::channel()) uses; use it directly to give any
/// `ferry_queue` queue user-level blocking.
///
/// ```
/// use ferry::sync::ParkWait;
///
/// ferry::run(|| {
///     let (tx, rx) = ferry_queue::mpmc::channel_with::<u32, ParkWait>(4);
///     let t = ferry::spawn(move || rx.pop().unwrap()); // parks until pushed
///     tx.push(5).unwrap();
///     assert_eq!(t.join().unwrap(), 5);
/// })
/// .unwrap();
/// ```
#[derive(Default)]
pub struct ParkWait {
    list: SpinLock<WaitList>,
    queued: AtomicUsize,
    quiet: Quiet,
}

impl ParkWait {
    /// Whether no waiter is queued (for assertions by an owner that knows
    /// none can come).
    pub(crate) fn is_idle(&mut self) -> bool {
        *self.queued.get_mut() == 0 && self.list.get_mut().is_empty()
    }

    /// As new: no waiter ever came (notifiers skip the handshake again),
    /// by an owner that holds the wait alone, with nobody queued.
    pub(crate) fn reset(&mut self) {
        debug_assert!(self.is_idle());
        self.quiet.reset();
    }

    /// Wakes the first queued waiter, if there still is one.
    #[cold]
    fn wake_one(&self) {
        let entry = Entry::enter();
        let wake = {
            let mut list = self.list.lock_entered(&entry);
            let wake = list.pop_front();
            self.queued.store(list.len(), SeqCst);
            wake
        };
        if let Some(w) = wake {
            entry.unpark(w);
        }
    }
}

impl ParkWait {
    /// Leaves the wait of a terminated waiter `w` (see the module docs).
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `pw` points at a `ParkWait`, `w` is a
    /// waiter of it whose thread has stopped for good.
    unsafe fn abandon(pw: *const (), _: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let pw = unsafe { &*pw.cast::<ParkWait>() };
        let popped = {
            let entry = Entry::enter();
            let mut list = pw.list.lock_entered(&entry);
            if list.holds(w) {
                // SAFETY: queued in this list (checked under its spinlock).
                unsafe { list.remove(w) };
                pw.queued.store(list.len(), SeqCst);
            }
            w.is_woken()
        };
        if popped {
            pw.notify_one();
        }
        true
    }
}

impl Wait for ParkWait {
    fn wait_until<R>(&self, mut ready: impl FnMut() -> Option<R>) -> R {
        for _ in 0..SPINS {
            if let Some(r) = ready() {
                return r;
            }
            std::hint::spin_loop();
        }
        loop {
            if let Some(r) = ready() {
                return r;
            }
            let me;
            {
                // Left before `ready` runs again: it is the caller's code,
                // which may switch or block.
                self.quiet.arm();
                let entry = Entry::enter();
                // SAFETY: `abandon` takes a strategy, which outlives its
                // waits.
                me = entry.waiter(
                    unsafe { Site::new(ParkWait::abandon, self, None::<&()>) }
                        .describing(WaitsOn::Queue, self),
                );
                let mut list = self.list.lock_entered(&entry);
                // SAFETY: `me` is in no list and stays on this frame until it
                // is out again: either a notifier popped it (then the wait
                // below returns) or we remove it ourselves below, under the
                // lock (or our terminator does, for a thread that never runs
                // again).
                unsafe { list.push_back(&me) };
                self.queued.store(list.len(), SeqCst);
            }
            fence(SeqCst);
            if let Some(r) = ready() {
                let popped = {
                    let mut list = self.list.lock();
                    let popped = me.is_woken();
                    if !popped {
                        // SAFETY: not woken, so still in this list.
                        unsafe { list.remove(&me) };
                        self.queued.store(list.len(), SeqCst);
                    }
                    popped
                };
                if popped {
                    // A notifier chose us, but we did not need it: pass on.
                    self.notify_one();
                }
                return r;
            }
            Entry::enter().wait(&me);
        }
    }

    #[inline]
    fn notify_one(&self) {
        if self.quiet.never_waited() {
            return;
        }
        fence(SeqCst);
        if self.queued.load(Relaxed) != 0 {
            self.wake_one();
        }
    }

    #[inline]
    fn notify_all(&self) {
        if self.quiet.never_waited() {
            return;
        }
        fence(SeqCst);
        let n = self.queued.load(Relaxed);
        if n != 0 {
            // Those queued now are the first `n` (later ones queue behind);
            // each pop marks one woken under the lock.
            for _ in 0..n {
                self.wake_one();
            }
        }
    }
}

impl fmt::Debug for ParkWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParkWait")
            .field("queued", &self.queued.load(Relaxed))
            .finish()
    }
}
