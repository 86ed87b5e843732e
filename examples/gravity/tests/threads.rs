//! The two kinds of worker threads: every worker runs once, the barrier
//! holds each phase's workers until all have arrived, more workers than
//! processors work, and a panicking worker ends the run with an error instead
//! of a hang.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gravity::{Failed, Ferry, Std, Threads, run_team};

/// Runs `workers` workers of `kind` through `phases` phases; each phase
/// every worker bumps a counter, waits, and checks that all bumped it.
fn phases<K: Threads>(kind: &K, workers: usize, phases: usize) {
    let count = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(kind.barrier(workers));
    let (c, r) = (Arc::clone(&count), Arc::clone(&ran));
    kind.run_workers(workers, move |w| {
        assert!(w < workers);
        r.fetch_add(1 << (8 * w), Ordering::Relaxed);
        for phase in 1..=phases {
            c.fetch_add(1, Ordering::Relaxed);
            K::wait(&barrier);
            assert_eq!(
                c.load(Ordering::Relaxed),
                phase * workers,
                "{}: phase {phase}",
                w
            );
            K::wait(&barrier);
        }
    })
    .unwrap();
    assert_eq!(count.load(Ordering::Relaxed), phases * workers);
    // Each worker number ran exactly once.
    let once: usize = (0..workers).map(|w| 1 << (8 * w)).sum();
    assert_eq!(ran.load(Ordering::Relaxed), once);
}

#[test]
fn every_worker_runs_once_and_the_barrier_holds_each_phase() {
    for workers in 1..=5 {
        phases(&Std, workers, 50);
        phases(&Ferry::default(), workers, 50);
        phases(
            &Ferry {
                processors: Some(1),
            },
            workers,
            50,
        );
    }
}

#[test]
fn names() {
    assert_eq!(Std.name(), "std");
    assert_eq!(Ferry::default().name(), "ferry");
}

/// Runs 3 workers of `kind` for 20 phases on a team; worker 1 panics in
/// phase 7. The run must end (not hang) with an error, and the others must
/// have left at the barrier that ends phase 7.
fn panicking_worker<K: Threads>(kind: &K) {
    let left = Arc::new(AtomicUsize::new(0));
    let l = Arc::clone(&left);
    let result = run_team(kind, 3, move |w, team| {
        for phase in 0..20 {
            if w == 1 && phase == 7 {
                panic!("worker 1 fails on purpose");
            }
            if team.wait() == Err(Failed) {
                l.fetch_add(phase, Ordering::Relaxed);
                return;
            }
        }
    });
    let err = result.unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_eq!(left.load(Ordering::Relaxed), 2 * 7);
}

#[test]
fn a_panicking_worker_ends_the_run_with_an_error() {
    panicking_worker(&Std);
    panicking_worker(&Ferry::default());
    panicking_worker(&Ferry {
        processors: Some(1),
    });
}
