#![cfg(ferry_loom)]
//! Loom model of a wait's `Quiet` word (`src/sync/quiet.rs`, included as
//! it is and compiled against loom's atomics, with both of ferry-queue's
//! fences as full fences, its symmetric mode): notifiers publish a change
//! and skip the look for waiters while the wait was never waited on;
//! waiters arm it, queue, fence and look at the change once more. Under
//! every interleaving loom explores, each waiter either finds the change
//! or is seen queued by the notifier: no wakeup is lost, whether a waiter
//! arms the word itself or finds it armed by another.

use loom::sync::Arc;
use loom::sync::atomic::Ordering::{Relaxed, SeqCst};
use loom::sync::atomic::{AtomicBool, AtomicUsize, fence};
use loom::thread;

/// What `quiet` reaches through `super::quiet_atomic`.
mod quiet_atomic {
    pub(crate) use loom::sync::atomic::{AtomicU8, Ordering};

    pub(crate) fn light_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    pub(crate) fn heavy_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

#[path = "../src/sync/quiet.rs"]
#[allow(dead_code)]
mod quiet;

use quiet::Quiet;

/// A wait (the `Quiet` word and a count of queued waiters) and the
/// change its notifier publishes.
struct Wait {
    quiet: Quiet,
    queued: AtomicUsize,
    change: AtomicBool,
    /// How many waiters the notifier saw queued when it looked (all of
    /// them it would wake, as `notify_all`).
    seen: AtomicUsize,
}

/// Publishes the change, then looks for waiters as `ParkWait::notify_one`
/// does.
fn notify(w: &Wait) {
    w.change.store(true, Relaxed);
    if w.quiet.never_waited() {
        return;
    }
    fence(SeqCst);
    w.seen.store(w.queued.load(Relaxed), Relaxed);
}

/// Waits as `ParkWait::wait_until` does, up to the last look: whether
/// the change was found there, and the waiter's place in the queue.
fn wait(w: &Wait) -> (bool, usize) {
    w.quiet.arm();
    let place = w.queued.fetch_add(1, SeqCst);
    fence(SeqCst);
    (w.change.load(Relaxed), place)
}

fn check(waiters: usize) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(move || {
        let w = Arc::new(Wait {
            quiet: Quiet::new(),
            queued: AtomicUsize::new(0),
            change: AtomicBool::new(false),
            seen: AtomicUsize::new(0),
        });
        let ws: Vec<_> = (0..waiters)
            .map(|_| {
                let w = Arc::clone(&w);
                thread::spawn(move || wait(&w))
            })
            .collect();
        notify(&w);
        for t in ws {
            let (found, place) = t.join().unwrap();
            assert!(
                found || place < w.seen.load(Relaxed),
                "a waiter missed the change and the notifier missed the waiter"
            );
        }
    });
}

#[test]
fn one_waiter_and_a_notifier_never_miss_each_other() {
    check(1);
}

#[test]
fn a_waiter_that_finds_the_wait_armed_by_another_is_not_missed() {
    check(2);
}
