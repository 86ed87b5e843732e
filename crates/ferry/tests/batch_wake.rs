//! Waking many threads at once (a condition variable's `notify_all`, a
//! barrier's release): every waiter is woken exactly once, a batch runs in
//! the order its threads waited, terminating waiters or the waker in the
//! middle of a batch loses and doubles no wake, and a batch wakes at most
//! one sleeping processor per chunk of waiters, not one per waiter.
//!
//! Every test runs under a watchdog: a lost wakeup shows as a failure, not
//! as a hung test binary. No test measures time.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use ferry::Runtime;
use ferry::sync::{Barrier, Condvar, Mutex};

mod common;
use common::WATCHDOG;

/// Waiters queued under one entry by a batch wake (the size of a
/// processor's ring).
const CHUNK: usize = 256;

/// The gate of the condvar tests: the waiters' count and whether it is open.
struct Gate {
    m: Mutex<(usize, bool)>,
    cv: Condvar,
    /// Wakes seen, by waiter.
    woken: Vec<AtomicUsize>,
}

impl Gate {
    fn new(n: usize) -> Arc<Gate> {
        Arc::new(Gate {
            m: Mutex::new((0, false)),
            cv: Condvar::new(),
            woken: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Waiter `i`: counts itself in, waits until the gate opens, counts
    /// its wake.
    fn wait(&self, i: usize) {
        let mut g = self.m.lock();
        g.0 += 1;
        while !g.1 {
            g = self.cv.wait(g);
        }
        drop(g);
        self.woken[i].fetch_add(1, SeqCst);
    }

    /// Yields until `n` waiters are inside `wait` (each counted itself in
    /// under the mutex its wait releases, so it is queued once we hold it).
    fn await_waiters(&self, n: usize) {
        while self.m.lock().0 < n {
            ferry::yield_now();
        }
    }
}

fn run_on(processors: usize, what: &str, f: impl FnOnce() + Send + 'static) {
    common::within(WATCHDOG, what, move || {
        let mut b = Runtime::builder();
        b.processors(processors).time_slice(None);
        b.run(f).unwrap();
    });
}

/// A gate released to thousands of ferry threads and a few kernel
/// threads waiting among them (each of those ends a chunk early) wakes
/// each exactly once; with the mutex held across `notify_all`, so that no
/// woken thread can wake anyone, the release wakes at most one sleeping
/// processor per chunk on two processors (none on one).
#[test]
fn a_gate_released_to_many_waiters_wakes_each_once_and_few_processors() {
    const N: usize = 3_000;
    const KERNEL: [usize; 3] = [10, 700, 2_999];
    for p in [1, 2] {
        run_on(p, "a batch lost a wakeup", move || {
            let gate = Gate::new(N);
            let mut ferry_threads = Vec::new();
            let mut kernel_threads = Vec::new();
            for i in 0..N {
                let g = Arc::clone(&gate);
                if KERNEL.contains(&i) {
                    kernel_threads.push(std::thread::spawn(move || g.wait(i)));
                    // Queued in this place of the list before the next.
                    gate.await_waiters(i + 1);
                } else {
                    ferry_threads.push(ferry::spawn(move || g.wait(i)));
                }
            }
            gate.await_waiters(N);
            let handle = ferry::Handle::current();
            let mut g = gate.m.lock();
            g.1 = true;
            let before = handle.upcall_stats().processor_wakes;
            gate.cv.notify_all();
            let wakes = handle.upcall_stats().processor_wakes - before;
            drop(g);
            let bound = if p == 1 { 0 } else { N.div_ceil(CHUNK) };
            assert!(
                wakes <= bound as u64,
                "P={p}: {wakes} processor wakes for one release of {N} waiters (at most {bound})"
            );
            for h in ferry_threads {
                h.join().unwrap();
            }
            for k in kernel_threads {
                k.join().unwrap();
            }
            for (i, w) in gate.woken.iter().enumerate() {
                assert_eq!(
                    w.load(SeqCst),
                    1,
                    "waiter {i} woken {} times",
                    w.load(SeqCst)
                );
            }
        });
    }
}

/// On one processor, a barrier's release of fewer threads than a ring
/// holds runs them in the order they arrived (the batch goes to the back
/// of the ring in order, none of it to the next-to-run slot, where the
/// last woken would run first).
#[test]
fn a_batch_runs_in_the_order_its_threads_waited() {
    const N: usize = 200;
    run_on(1, "a barrier's release lost a wakeup", || {
        let barrier = Arc::new(Barrier::new(N + 1));
        let arrived = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(Mutex::new(Vec::with_capacity(N)));
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let (b, a, r) = (Arc::clone(&barrier), Arc::clone(&arrived), Arc::clone(&ran));
                ferry::spawn(move || {
                    a.fetch_add(1, SeqCst);
                    assert!(!b.wait().is_leader());
                    r.lock().push(i);
                })
            })
            .collect();
        // One processor, no time slice: each spawned thread runs until it
        // blocks in the barrier, in spawn order.
        while arrived.load(SeqCst) < N {
            ferry::yield_now();
        }
        assert!(barrier.wait().is_leader());
        for h in hs {
            h.join().unwrap();
        }
        let ran = ran.lock();
        assert_eq!(*ran, (0..N).collect::<Vec<_>>());
    });
}

/// The thread waking a batch is terminated while it wakes: its terminator
/// wakes the rest, so every waiter is woken exactly once.
#[test]
fn terminating_the_waker_of_a_batch_wakes_the_rest() {
    const N: usize = 3_000;
    run_on(2, "a terminated waker's batch lost a wakeup", || {
        let gate = Gate::new(N);
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let g = Arc::clone(&gate);
                ferry::spawn(move || g.wait(i))
            })
            .collect();
        gate.await_waiters(N);
        gate.m.lock().1 = true;
        let g = Arc::clone(&gate);
        let waker = ferry::spawn(move || {
            g.cv.notify_all();
            1u32
        });
        let t = waker.thread();
        // Wherever it lands (before, during or after the release), the
        // release completes.
        // SAFETY: the waker holds nothing whose destructor matters.
        let _ = unsafe { t.terminate(2u32) };
        let v = waker.join().unwrap();
        assert!(v == 1 || v == 2);
        // Terminated before it took the batch, it left every waiter
        // queued: release them here (a batch it took is no longer in the
        // list, so this reaches nobody it took).
        gate.cv.notify_all();
        for h in hs {
            h.join().unwrap();
        }
        for (i, w) in gate.woken.iter().enumerate() {
            assert_eq!(
                w.load(SeqCst),
                1,
                "waiter {i} woken {} times",
                w.load(SeqCst)
            );
        }
    });
}
