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

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::Relaxed;

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
}

impl Record {
    fn new() -> Record {
        Record {
            word: state::new(),
            memory: UnsafeCell::new(0),
            frees: AtomicUsize::new(0),
        }
    }

    fn free(&self) {
        self.frees.fetch_add(1, Relaxed);
        // SAFETY: the model's claim: whoever frees is the last user.
        self.memory.with_mut(|m| unsafe {
            assert_ne!(*m, FREED, "freed twice");
            *m = FREED;
        });
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
