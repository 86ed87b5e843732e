//! The frame word's protocol (`Header::rpc`; the table is in `logical`'s
//! module docs): a thread names the frame on its stack in one word; an
//! alerter on another thread may *hold* the word (a low bit) to read the
//! frame, and the thread clears the word — waiting out a holder — before
//! its frame goes.
//!
//! This file owns only the word's transitions (so that the loom model
//! `tests/loom_frame.rs` checks the code that runs); it must not read a
//! frame.

use super::atomic::AtomicUsize;
use super::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// The hold bit (a frame is 8-byte aligned: the bit is free).
pub(crate) const BUSY: usize = 1;

/// Names the frame at `frame` (the word must be 0; only the owning thread
/// stores a frame).
pub(crate) fn install(word: &AtomicUsize, frame: usize) {
    debug_assert_eq!(frame & BUSY, 0);
    word.store(frame, Release);
}

/// Holds the word: returns the frame it names, or `None` if it names none.
/// Spins while another holds it (a hold is a few instructions).
pub(crate) fn hold(word: &AtomicUsize) -> Option<usize> {
    loop {
        let v = word.load(Acquire);
        if v == 0 {
            return None;
        }
        if v & BUSY != 0 {
            spin();
            continue;
        }
        if word
            .compare_exchange_weak(v, v | BUSY, AcqRel, Relaxed)
            .is_ok()
        {
            return Some(v);
        }
    }
}

/// Lets go of a word held with [`hold`], which returned `frame`.
pub(crate) fn release(word: &AtomicUsize, frame: usize) {
    word.store(frame, Release);
}

/// Clears the word for good, waiting out a holder: after this nobody
/// reaches the frame.
pub(crate) fn clear(word: &AtomicUsize) {
    if hold(word).is_some() {
        word.store(0, Release);
    }
}

#[cfg(not(ferry_loom))]
fn spin() {
    std::hint::spin_loop();
}

#[cfg(ferry_loom)]
fn spin() {
    loom::thread::yield_now();
}
