#![cfg(ferry_loom)]
//! Loom model of the completion word of a ring operation record
//! (`src/event/ring/state.rs`, included as it is and compiled against
//! loom's atomics): the reaper stores the result and swaps `DONE` in; an
//! owner that runs waits for `DONE`, takes the result and frees; an owner
//! terminated while parked is abandoned by its terminator, who swaps
//! `ABANDONED` in. Under every interleaving loom explores, the record is
//! freed exactly once, and never before the last user is done with it.
//!
//! The record's memory is a `loom::cell::UnsafeCell`: the reaper writes
//! the result into it, the owner reads it, and a free writes it (a poison
//! value). Loom reports any of these accesses that is not ordered after
//! the free's predecessor (a free while the reaper may still write, a read
//! of freed memory), and a count of frees checks that there is one.
//!
//! The cancel (`src/event/ring/cancel.rs`) adds the watch lock: an
//! aborter names the record in a cancel only under the lock and while
//! the owner is watched; the owner unwatches under the lock before it
//! frees; a terminator unwatches and cancels under the lock, then
//! abandons. The cancel's naming of the record reads a second cell,
//! which a free writes, so loom reports a cancel that may name a freed
//! record; a variant whose owner frees before it unwatches must fail.

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::Relaxed;
use loom::sync::{Arc, Mutex};

/// What `state` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
}

#[path = "../src/event/ring/state.rs"]
#[allow(dead_code)]
mod state;

use atomic::AtomicU32;

/// What a freed record holds.
const FREED: i32 = -1;
/// The result the kernel gives.
const RESULT: i32 = 4096;

/// One operation record.
struct Record {
    word: AtomicU32,
    /// The record's memory: the result, or `FREED`.
    memory: UnsafeCell<i32>,
    /// Frees made.
    frees: AtomicUsize,
    /// Whether the record is freed: written by a free, read by a cancel
    /// that names the record.
    freed: UnsafeCell<bool>,
    /// The watch lock's entry for the owner: whether it is watched.
    watched: Mutex<bool>,
}

impl Record {
    fn new() -> Record {
        Record {
            word: state::new(),
            memory: UnsafeCell::new(0),
            frees: AtomicUsize::new(0),
            freed: UnsafeCell::new(false),
            watched: Mutex::new(true),
        }
    }

    fn free(&self) {
        self.frees.fetch_add(1, Relaxed);
        // SAFETY: the model's claim: whoever frees is the last user.
        self.memory.with_mut(|m| unsafe {
            assert_ne!(*m, FREED, "freed twice");
            *m = FREED;
        });
        // SAFETY: as above.
        self.freed.with_mut(|f| unsafe { *f = true });
    }

    /// A cancel naming the record, under the watch lock.
    fn name_in_cancel(&self) {
        // SAFETY: the model's claim: a cancel names a live record.
        self.freed
            .with(|f| assert!(!unsafe { *f }, "a cancel named a freed record"));
    }

    /// An aborter: cancels the operation if the owner is watched.
    fn abort(&self) {
        let watched = self.watched.lock().unwrap();
        if *watched {
            self.name_in_cancel();
        }
        drop(watched);
    }

    /// The owner that runs: waits for DONE, unwatches (after the free if
    /// `broken`), takes the result and frees.
    fn own(&self, broken: bool) {
        while !state::is_done(&self.word) {
            loom::thread::yield_now();
        }
        if !broken {
            *self.watched.lock().unwrap() = false;
        }
        // SAFETY: done: the reaper's write is visible and it let go.
        let got = self.memory.with(|m| unsafe { *m });
        assert_eq!(got, RESULT);
        self.free();
        if broken {
            *self.watched.lock().unwrap() = false;
        }
    }

    /// The reaper: stores the result, completes, frees if abandoned.
    fn reap(&self) {
        // SAFETY: the record is alive until the reaper's swap (nobody frees
        // a record whose word still says WAITING).
        self.memory.with_mut(|m| unsafe {
            assert_ne!(*m, FREED, "the reaper wrote a freed record");
            *m = RESULT;
        });
        if state::complete(&self.word) {
            self.free();
        }
    }
}

#[test]
fn an_owner_that_runs_takes_the_result_and_frees_once() {
    loom::model(|| {
        let r = Arc::new(Record::new());
        let reaper = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.reap())
        };
        // The owner, parked until it sees DONE.
        while !state::is_done(&r.word) {
            loom::thread::yield_now();
        }
        // SAFETY: done: the reaper's write is visible and it let go.
        let got = r.memory.with(|m| unsafe { *m });
        assert_eq!(got, RESULT);
        r.free();
        reaper.join().unwrap();
        assert_eq!(r.frees.load(Relaxed), 1);
    });
}

#[test]
fn a_terminated_owner_s_record_is_freed_once_by_whoever_comes_second() {
    loom::model(|| {
        let r = Arc::new(Record::new());
        let reaper = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.reap())
        };
        let terminator = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || {
                if state::abandon(&r.word) {
                    r.free();
                }
            })
        };
        reaper.join().unwrap();
        terminator.join().unwrap();
        assert_eq!(
            r.frees.load(Relaxed),
            1,
            "freed {} times",
            r.frees.load(Relaxed)
        );
    });
}

/// Runs an owner (correct, or freeing before it unwatches), a reaper and
/// an aborter.
fn owner_reaper_aborter(broken: bool) {
    loom::model(move || {
        let r = Arc::new(Record::new());
        let reaper = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.reap())
        };
        let aborter = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.abort())
        };
        r.own(broken);
        reaper.join().unwrap();
        aborter.join().unwrap();
        assert_eq!(r.frees.load(Relaxed), 1);
    });
}

#[test]
fn an_abort_names_a_live_record_whatever_the_completion_does() {
    owner_reaper_aborter(false);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn an_owner_that_frees_before_it_unwatches_lets_a_cancel_name_a_freed_record() {
    owner_reaper_aborter(true);
}

#[test]
fn a_terminator_cancels_a_live_record_and_it_is_freed_once() {
    loom::model(|| {
        let r = Arc::new(Record::new());
        let reaper = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.reap())
        };
        let aborter = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.abort())
        };
        // The terminator: unwatch and cancel under the lock, then abandon.
        {
            let mut watched = r.watched.lock().unwrap();
            *watched = false;
            r.name_in_cancel();
        }
        if state::abandon(&r.word) {
            r.free();
        }
        reaper.join().unwrap();
        aborter.join().unwrap();
        assert_eq!(r.frees.load(Relaxed), 1);
    });
}
