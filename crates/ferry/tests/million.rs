//! Many threads alive at once: every one spawns, blocks on one gate (a
//! `Mutex` and a `Condvar`), wakes when it opens, and is joined; exact
//! counts, no timing.
//!
//! The default run keeps 100,000 threads alive, which a debug build does in
//! a second. The full size, 1,000,000 threads, is `#[ignore]`d (it takes
//! about 5 GB and 10 s in a release build):
//!
//! ```text
//! cargo test --release -p ferry --test million -- --ignored --nocapture
//! ```
//!
//! Measured on a 2-CPU, 24 GiB machine: the million spawn, block, wake and
//! join in 10.5-11.2 s with a peak resident set of 4.4 GB (`/usr/bin/time
//! -v` on the test binary), about 4.4 KB a thread, plus page tables (about
//! 1 KiB a thread, `stack/mod.rs`). Each thread also reserves 512 KiB of
//! address space (stack and guard) that is never resident: 512 GiB for the
//! million, well within a 47-bit address space. Stacks are carved
//! from 256 MiB regions, so the million take about 2,000 mappings, under
//! `vm.max_map_count` (65,530 by default).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use ferry::sync::{Condvar, Mutex};

/// The gate: how many threads wait, and whether it is open.
struct Gate {
    state: Mutex<(usize, bool)>,
    opened: Condvar,
    all_in: Condvar,
}

/// Spawns `n` threads on `processors` processors that all block on one
/// gate, checks that all are blocked at once, opens the gate and joins
/// them; each thread counts its wakeup.
fn alive_at_once(n: usize, processors: usize) {
    let woke = ferry::Runtime::builder()
        .processors(processors)
        .run(move || {
            let gate = Arc::new(Gate {
                state: Mutex::new((0, false)),
                opened: Condvar::new(),
                all_in: Condvar::new(),
            });
            let woke = Arc::new(AtomicUsize::new(0));
            let mut handles = Vec::with_capacity(n);
            for _ in 0..n {
                let (gate, woke) = (Arc::clone(&gate), Arc::clone(&woke));
                handles.push(ferry::spawn(move || {
                    let mut s = gate.state.lock();
                    s.0 += 1;
                    if s.0 == n {
                        gate.all_in.notify_one();
                    }
                    while !s.1 {
                        s = gate.opened.wait(s);
                    }
                    drop(s);
                    woke.fetch_add(1, Relaxed);
                }));
            }
            let mut s = gate.state.lock();
            while s.0 < n {
                s = gate.all_in.wait(s);
            }
            // Every thread is inside its wait now, all alive at once.
            assert_eq!(s.0, n);
            assert_eq!(woke.load(Relaxed), 0, "a thread passed the closed gate");
            s.1 = true;
            drop(s);
            gate.opened.notify_all();
            let mut joined = 0;
            for h in handles {
                h.join().unwrap();
                joined += 1;
            }
            assert_eq!(joined, n);
            woke.load(Relaxed)
        })
        .unwrap();
    assert_eq!(woke, n, "every thread woke exactly once");
}

#[test]
fn hundred_thousand_threads_alive_at_once() {
    alive_at_once(100_000, 2);
}

#[test]
#[ignore = "1,000,000 threads: about 5 GB and a release build (see the file's docs)"]
fn a_million_threads_alive_at_once() {
    let start = std::time::Instant::now();
    alive_at_once(1_000_000, 2);
    eprintln!(
        "1,000,000 threads spawned, blocked, woken and joined in {:?}",
        start.elapsed()
    );
}
