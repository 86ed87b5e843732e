#![cfg(ferry_loom)]
//! A loom model of the race between an alert and a blocking call's entry
//! (`src/thread/alert.rs`, "Alerts and blocking calls"): the entry
//! publishes its call, issues a SeqCst fence and reads the alert word;
//! `Thread::alert` sets `PENDING` with a read-modify-write, issues a
//! SeqCst fence and looks for the call (the abort), unless it found
//! `BLOCKED`. A thread that blocks alerts lets them wait, and allows them
//! again (a read-modify-write) before it enters.
//!
//! Under every interleaving loom explores, an alert that the thread
//! allows before it enters the call aborts the call: the entry sees it,
//! or the alert's abort finds the call (model 1 for the call word of
//! `upcall::blocking`, model 2 for the maps of `net` and the ring, which
//! are read and written under a lock), and an alert that came while
//! alerts were blocked is seen by an entry after they are allowed again
//! (model 3). Loom treats SeqCst loads and stores as AcqRel but models
//! SeqCst fences, which is what the code relies on.

use loom::sync::atomic::Ordering::{AcqRel, Acquire, Release, SeqCst};
use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, fence};
use loom::sync::{Arc, Mutex};

/// `thread::alert`'s bits.
const PENDING: u8 = 1;
const BLOCKED: u8 = 2;

/// The thread's block address in the call word.
const H: usize = 8;

/// One thread's alert word, its call as the aborter finds it (a call word,
/// or a map entry under a lock), and what each side decided.
#[derive(Default)]
struct World {
    alert: AtomicU8,
    call: AtomicUsize,
    parked: Mutex<bool>,
    /// The alert's abort found the call.
    found: AtomicBool,
    /// The entry found the alert.
    seen: AtomicBool,
}

impl World {
    /// `Thread::alert`: set `PENDING`, fence, and abort unless `BLOCKED`.
    fn alert(&self, in_map: bool) {
        let before = self.alert.fetch_or(PENDING, AcqRel);
        fence(SeqCst);
        if before & BLOCKED == 0 {
            let found = if in_map {
                *self.parked.lock().unwrap()
            } else {
                self.call.load(SeqCst) == H
            };
            self.found.store(found, Release);
        }
    }

    /// A blocking call's entry: publish, fence, read the alert word.
    fn enter(&self, in_map: bool) {
        if in_map {
            *self.parked.lock().unwrap() = true;
        } else {
            self.call.store(H, Release);
        }
        fence(SeqCst);
        let w = self.alert.load(Acquire);
        self.seen.store(w & (PENDING | BLOCKED) == PENDING, Release);
    }

    fn aborted(&self) -> bool {
        self.found.load(Acquire) || self.seen.load(Acquire)
    }
}

/// Runs `f` under loom, over every interleaving with at most three
/// preemptions.
fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

fn entry_against_alert(in_map: bool) {
    check(move || {
        let w = Arc::new(World::default());
        let a = Arc::clone(&w);
        let alerter = loom::thread::spawn(move || a.alert(in_map));
        w.enter(in_map);
        alerter.join().unwrap();
        assert!(w.aborted(), "an allowed alert and a call, and no abort");
    });
}

#[test]
fn model_1_call_word_entry_against_an_alert() {
    entry_against_alert(false);
}

#[test]
fn model_2_locked_map_entry_against_an_alert() {
    entry_against_alert(true);
}

#[test]
fn model_3_a_blocked_alert_is_seen_by_an_entry_after_allowing() {
    check(|| {
        let w = Arc::new(World::default());
        w.alert.store(BLOCKED, Release);
        let a = Arc::clone(&w);
        let alerter = loom::thread::spawn(move || a.alert(false));
        // The thread allows alerts (`allow_alerts(true)`), then enters.
        let before = w.alert.fetch_and(!BLOCKED, AcqRel);
        w.enter(false);
        alerter.join().unwrap();
        // The alert came before the allow (it found BLOCKED and aborted
        // nothing) or after it: either way the call is aborted.
        let alert_first = before & PENDING != 0;
        if alert_first {
            assert!(!w.found.load(Acquire), "a blocked alert aborted");
        }
        assert!(w.aborted(), "the alert was lost");
    });
}
