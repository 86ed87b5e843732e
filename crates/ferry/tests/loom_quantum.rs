#![cfg(ferry_loom)]
//! A loom model of the processor's quantum word
//! (`src/sched/quantum_word.rs`, compiled here against loom's atomics):
//! the fine-grain policy publishes a thread's quantum, the processor then
//! stores its `dispatch` word (Release); the monitor loads `dispatch`
//! (Acquire) and reads the quantum. Under every interleaving loom
//! explores, the monitor never reads the quantum of a thread dispatched
//! before the one it saw.

use loom::sync::Arc;
use loom::sync::atomic::AtomicU32;
use loom::sync::atomic::Ordering::{Acquire, Release};

/// The atomics `quantum_word` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
}

#[path = "../src/sched/quantum_word.rs"]
mod quantum_word;

/// The quantum (µs) given to the thread of dispatch `n`.
fn quantum_of(n: u32) -> u32 {
    [0, 200, 905, 2000][n as usize]
}

#[test]
fn the_monitor_reads_the_quantum_of_the_dispatch_it_saw_or_a_later_one() {
    loom::model(|| {
        let quantum = Arc::new(AtomicU32::new(0));
        let dispatch = Arc::new(AtomicU32::new(0));
        let (q, d) = (Arc::clone(&quantum), Arc::clone(&dispatch));
        let processor = loom::thread::spawn(move || {
            for n in 1..=3 {
                quantum_word::publish(&q, quantum_of(n));
                d.store(n << 1 | 1, Release);
            }
        });
        for _ in 0..2 {
            let seen = dispatch.load(Acquire) >> 1;
            let q = quantum_word::read(&quantum);
            let later: Vec<u32> = (seen..=3).map(quantum_of).collect();
            assert!(
                later.contains(&q),
                "saw dispatch {seen} but read quantum {q}"
            );
        }
        processor.join().unwrap();
    });
}
