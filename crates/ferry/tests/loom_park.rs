#![cfg(ferry_loom)]
//! A loom model of the park word (`src/header/park_word.rs`, compiled here
//! against loom's atomics): under every interleaving loom explores, a
//! thread that parks until its condition holds is never left parked once
//! the condition holds, and a parked thread is queued once per wakeup.
//!
//! The model keeps what ferry does around the word: a thread that starts
//! parking is "switched out" and the same flow then finishes parking (in
//! ferry the next context on its processor does, before anything else), and
//! a parked thread waits for an `unpark` to queue it (a flag here).

use loom::sync::Arc;
use loom::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use loom::sync::atomic::{AtomicBool, AtomicU64};

/// The atomics `park_word` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
}

#[path = "../src/header/park_word.rs"]
#[allow(dead_code)]
mod park_word;

use park_word::{EMPTY, finish_parking, take_token_or_start_parking, unpark};

/// One thread's park word, and its place in a run queue.
struct Parker {
    state: loom::sync::atomic::AtomicU32,
    queued: AtomicBool,
}

impl Parker {
    fn new() -> Parker {
        Parker {
            state: loom::sync::atomic::AtomicU32::new(EMPTY),
            queued: AtomicBool::new(false),
        }
    }

    /// `Thread::unpark`: queue the thread if the word says so.
    fn unpark(&self) {
        if unpark(&self.state) {
            assert!(
                !self.queued.swap(true, AcqRel),
                "a parked thread queued twice"
            );
        }
    }

    /// `thread::park`, with the switch and its finish; false when the
    /// thread stays parked with every waker done (a lost wakeup).
    fn park(&self, wakers_done: &dyn Fn() -> bool) -> bool {
        if take_token_or_start_parking(&self.state) || !finish_parking(&self.state) {
            return true;
        }
        loop {
            if self.queued.swap(false, Acquire) {
                return true;
            }
            if wakers_done() {
                return self.queued.swap(false, Acquire);
            }
            loom::thread::yield_now();
        }
    }
}

/// A waker posts `rounds` values, unparking after each (twice with
/// `twice`, which leaves tokens behind); the waiter waits for each in turn.
fn post_and_wait(rounds: u64, twice: bool) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(move || {
        let parker = Arc::new(Parker::new());
        let posted = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (p, v, d) = (Arc::clone(&parker), Arc::clone(&posted), Arc::clone(&done));
        let waker = loom::thread::spawn(move || {
            for i in 1..=rounds {
                v.store(i, Release);
                p.unpark();
                if twice {
                    p.unpark();
                }
            }
            d.store(true, Release);
        });
        for i in 1..=rounds {
            while posted.load(Acquire) < i {
                assert!(
                    parker.park(&|| done.load(Acquire)),
                    "parked for ever waiting for {i}"
                );
            }
        }
        waker.join().unwrap();
    });
}

#[test]
fn a_posted_value_is_never_missed() {
    post_and_wait(2, false);
}

#[test]
fn a_token_left_behind_does_not_lose_the_next_wakeup() {
    post_and_wait(2, true);
}

#[test]
fn two_wakers_with_a_token_waiting_wake_the_thread() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let parker = Arc::new(Parker::new());
        // A token from an earlier, unrelated unpark.
        parker.unpark();
        let flags = [
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        ];
        let finished = Arc::new(AtomicU64::new(0));
        let wakers: Vec<_> = flags
            .iter()
            .map(|f| {
                let (p, f, n) = (Arc::clone(&parker), Arc::clone(f), Arc::clone(&finished));
                loom::thread::spawn(move || {
                    f.store(true, Release);
                    p.unpark();
                    n.fetch_add(1, Release);
                })
            })
            .collect();
        while !(flags[0].load(Acquire) && flags[1].load(Acquire)) {
            assert!(
                parker.park(&|| finished.load(Acquire) == 2),
                "parked for ever with both flags set"
            );
        }
        for w in wakers {
            w.join().unwrap();
        }
    });
}
