#![cfg(ferry_loom)]
//! A loom model of how a terminated waiter leaves a wait list
//! (`src/sync/waiter.rs`, "Where a waiter is" and "Termination"): a
//! terminator, holding the list's lock, removes a waiter that is still
//! queued, passes on a wake the waiter was already given, and leaves a
//! waiter alone while a batch waker (which pops without the lock) still
//! owns it, asking again until that waker has marked it woken.
//!
//! Under every interleaving loom explores: the live waiter gets exactly
//! one wake (none is lost, none doubled), and the terminator never writes
//! a waiter's links while a batch waker may (loom's `UnsafeCell` reports
//! such a race). The model keeps the protocol's fields as `waiter.rs` has
//! them (links, the list it was pushed on and its epoch, `woken`) with
//! indices for pointers and loom's `Mutex` for the spinlock.

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicBool;
use loom::sync::atomic::Ordering::{Acquire, Release};
use loom::sync::{Arc, Mutex};

/// One waiter: its links (written by whoever owns them: the lock holder,
/// or a batch's waker), the epoch of the list it was pushed on (written
/// under the lock), and `woken`.
struct Waiter {
    next: UnsafeCell<Option<usize>>,
    epoch: UnsafeCell<usize>,
    woken: AtomicBool,
}

/// The list behind the lock: its first waiter and its epoch.
struct List {
    head: Option<usize>,
    epoch: usize,
}

struct Model {
    list: Mutex<List>,
    waiters: [Waiter; 2],
    /// Wakes each waiter got (unparks).
    wakes: [loom::sync::atomic::AtomicUsize; 2],
}

/// Waiter 0 is the one terminated; waiter 1 lives.
const DEAD: usize = 0;
const LIVE: usize = 1;

impl Model {
    /// Both waiters queued, the dead one first.
    fn new() -> Model {
        let w = |next| Waiter {
            next: UnsafeCell::new(next),
            epoch: UnsafeCell::new(0),
            woken: AtomicBool::new(false),
        };
        Model {
            list: Mutex::new(List {
                head: Some(DEAD),
                epoch: 0,
            }),
            waiters: [w(Some(LIVE)), w(None)],
            wakes: Default::default(),
        }
    }

    /// `pop_front` under the lock: unlink, mark woken, unpark.
    fn pop(&self, list: &mut List) -> bool {
        let Some(i) = list.head else { return false };
        let w = &self.waiters[i];
        list.head = w.next.with(|n| unsafe { *n });
        w.woken.store(true, Release);
        self.wakes[i].fetch_add(1, Release);
        true
    }

    /// `WaitList::holds`: queued here, not woken, not in a batch.
    fn holds(&self, list: &List, i: usize) -> bool {
        let w = &self.waiters[i];
        !w.woken.load(Acquire) && w.epoch.with(|e| unsafe { *e }) == list.epoch
    }

    /// The terminator's site for a mutex or condvar: remove if queued,
    /// pass the wake on if woken, else (in a batch) ask again.
    fn abandon(&self, i: usize) {
        loop {
            let mut list = self.list.lock().unwrap();
            if self.holds(&list, i) {
                // `remove`: the dead waiter is first in this model.
                assert_eq!(list.head, Some(i));
                let next = self.waiters[i].next.with(|n| unsafe { *n });
                list.head = next;
                self.waiters[i].next.with_mut(|n| unsafe { *n = None });
                return;
            }
            if self.waiters[i].woken.load(Acquire) {
                self.pop(&mut list);
                return;
            }
            drop(list);
            loom::thread::yield_now();
        }
    }
}

/// A single wake (an unlock's, a `notify_one`) against the terminator.
#[test]
fn a_single_wake_reaches_the_live_waiter() {
    loom::model(|| {
        let m = Arc::new(Model::new());
        let waker = {
            let m = Arc::clone(&m);
            loom::thread::spawn(move || {
                let mut list = m.list.lock().unwrap();
                m.pop(&mut list);
            })
        };
        m.abandon(DEAD);
        waker.join().unwrap();
        assert_eq!(m.wakes[LIVE].load(Acquire), 1, "the live waiter's wake");
    });
}

/// A batch wake (a `notify_all`, a barrier's release) against the
/// terminator: the batch's pops happen without the lock.
#[test]
fn a_batch_wake_and_the_terminator_never_share_a_waiter() {
    loom::model(|| {
        let m = Arc::new(Model::new());
        let waker = {
            let m = Arc::clone(&m);
            loom::thread::spawn(move || {
                let mut batch = {
                    let mut list = m.list.lock().unwrap();
                    let batch = List {
                        head: list.head.take(),
                        epoch: list.epoch,
                    };
                    list.epoch += 1;
                    batch
                };
                // `wake_all`, outside the lock: each pop writes the links.
                while let Some(i) = batch.head {
                    let w = &m.waiters[i];
                    batch.head = w.next.with_mut(|n| unsafe { (*n).take() });
                    w.woken.store(true, Release);
                    m.wakes[i].fetch_add(1, Release);
                }
            })
        };
        m.abandon(DEAD);
        waker.join().unwrap();
        // A `notify_all` woke both; the terminator's pass-on found the
        // list empty (no wake doubled).
        assert_eq!(m.wakes[LIVE].load(Acquire), 1, "the live waiter's wake");
    });
}
