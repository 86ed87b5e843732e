#![cfg(ferry_loom)]
//! A loom model of the stats page's sequence lock
//! (`src/stats/seqlock.rs`, compiled here against loom's atomics): one
//! writer publishes snapshots whose words all hold the same value; a reader
//! that accepts a copy never holds a mix of two writes, and a copy taken
//! with no write under way is accepted.

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;

/// The atomics `seqlock` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering, fence};
}

#[allow(dead_code)] // `read` spins, which a model must not
#[path = "../src/stats/seqlock.rs"]
mod seqlock;

const WORDS: usize = 2;

#[test]
fn a_reader_never_accepts_a_mix_of_two_writes() {
    loom::model(|| {
        let seq = Arc::new(AtomicU64::new(0));
        let words: Arc<Vec<AtomicU64>> = Arc::new((0..WORDS).map(|_| AtomicU64::new(0)).collect());
        let (s, w) = (Arc::clone(&seq), Arc::clone(&words));
        let writer = loom::thread::spawn(move || {
            for v in 1..=2u64 {
                seqlock::write(&s, &w, &[v; WORDS]);
            }
        });
        let mut dst = [u64::MAX; WORDS];
        if seqlock::try_read(&seq, &words, &mut dst, &mut || {}) {
            assert!(dst.iter().all(|&x| x == dst[0]), "a torn copy: {dst:?}");
        }
        writer.join().unwrap();
        // With the writer done, a read succeeds and sees its last write.
        let mut dst = [0; WORDS];
        assert!(seqlock::try_read(&seq, &words, &mut dst, &mut || {}));
        assert_eq!(dst, [2; WORDS]);
    });
}
