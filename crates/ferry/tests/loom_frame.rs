#![cfg(ferry_loom)]
//! Loom model of the frame word (`src/rpc/frame_word.rs`, included as it is
//! and compiled against loom's atomics): a thread installs the frame on its
//! stack, changes the call it makes under a hold, then clears the word and
//! lets its frame go; an alerter on another thread holds the word and reads
//! the frame meanwhile. Under every interleaving loom explores, the alerter
//! reads the frame only while it is alive, and reads either no call or the
//! one the thread set.

use loom::sync::Arc;
use loom::sync::atomic::Ordering::{Acquire, Release};
use loom::sync::atomic::{AtomicBool, AtomicUsize};

/// What `frame_word` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};
}

#[path = "../src/rpc/frame_word.rs"]
#[allow(dead_code)]
mod frame_word;

/// The frame's address, as the word holds it (8-aligned).
const FRAME: usize = 0x1000;

struct World {
    word: AtomicUsize,
    /// The frame's outgoing call (0: none), changed only under a hold.
    outgoing: AtomicUsize,
    /// The frame is gone (its stack frame returned).
    gone: AtomicBool,
}

#[test]
fn an_alerter_never_reads_a_frame_that_is_gone() {
    loom::model(|| {
        let w = Arc::new(World {
            word: AtomicUsize::new(0),
            outgoing: AtomicUsize::new(0),
            gone: AtomicBool::new(false),
        });
        frame_word::install(&w.word, FRAME);
        let a = {
            let w = w.clone();
            loom::thread::spawn(move || {
                if let Some(f) = frame_word::hold(&w.word) {
                    assert_eq!(f, FRAME);
                    assert!(!w.gone.load(Acquire), "the frame was read after it went");
                    let call = w.outgoing.load(Acquire);
                    assert!(
                        call == 0 || call == 7,
                        "a call the thread never set: {call}"
                    );
                    frame_word::release(&w.word, f);
                }
            })
        };
        // The thread: set its call under a hold, clear it, leave.
        let f = frame_word::hold(&w.word).expect("its own frame");
        w.outgoing.store(7, Release);
        frame_word::release(&w.word, f);
        let f = frame_word::hold(&w.word).expect("its own frame");
        w.outgoing.store(0, Release);
        frame_word::release(&w.word, f);
        frame_word::clear(&w.word);
        w.gone.store(true, Release);
        a.join().unwrap();
        assert_eq!(w.word.load(Acquire), 0);
    });
}
