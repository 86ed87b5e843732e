//! Terminating waiters on one processor while the other wakes their batch
//! (a condition variable's `notify_all`): each terminated waiter ends with
//! its termination value, every other waiter is woken exactly once, and
//! no wake is lost.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use ferry::Runtime;
use ferry::sync::{Condvar, Mutex};

mod common;
use common::WATCHDOG;

/// Waiters of the batch.
const N: usize = 2_000;

/// Waiters terminated on one processor while the other wakes their batch:
/// each terminated waiter ends with its termination value, every other
/// waiter is woken exactly once, and no wake is lost. Each waiter relocks
/// a mutex of its own (a condvar may serve waiters of different mutexes),
/// so that a waiter terminated after its wake, wherever it stops, holds
/// nothing another thread needs.
#[test]
fn terminating_waiters_while_their_batch_is_woken_loses_no_wake() {
    common::within(
        WATCHDOG,
        "a terminated waiter's batch lost a wakeup",
        || {
            let mut b = Runtime::builder();
            b.processors(2).time_slice(None);
            b.run(run).unwrap();
        },
    );
}

/// The scenario, as the runtime's first thread.
fn run() {
    let cv = Arc::new(Condvar::new());
    let open = Arc::new(AtomicBool::new(false));
    let locks: Arc<Vec<Mutex<()>>> = Arc::new((0..N).map(|_| Mutex::new(())).collect());
    let counted = Arc::new(AtomicUsize::new(0));
    let woken: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let (cv, open, locks) = (Arc::clone(&cv), Arc::clone(&open), Arc::clone(&locks));
            let (counted, woken) = (Arc::clone(&counted), Arc::clone(&woken));
            ferry::spawn(move || {
                let mut g = locks[i].lock();
                counted.fetch_add(1, SeqCst);
                while !open.load(SeqCst) {
                    g = cv.wait(g);
                }
                woken[i].fetch_add(1, SeqCst);
                drop(g);
                0u32
            })
        })
        .collect();
    while counted.load(SeqCst) < N {
        ferry::yield_now();
    }
    // Each waiter holds its lock from its count until its wait has
    // queued it: once we have held every lock, all are queued.
    for l in locks.iter() {
        drop(l.lock());
    }
    let victims: Vec<ferry::Thread> = hs.iter().step_by(7).map(|h| h.thread()).collect();
    let killer = ferry::spawn(move || {
        for t in victims {
            // SAFETY: a waiter holds nothing another thread needs (its
            // own lock at most) and nothing whose drop matters.
            let _ = unsafe { t.terminate(7u32) };
        }
    });
    open.store(true, SeqCst);
    cv.notify_all();
    killer.join().unwrap();
    for (i, h) in hs.into_iter().enumerate() {
        let v = h.join().unwrap();
        let w = woken[i].load(SeqCst);
        if v == 7 {
            assert!(w <= 1, "terminated waiter {i} woken {w} times");
        } else {
            assert_eq!(w, 1, "waiter {i} woken {w} times");
        }
    }
}
