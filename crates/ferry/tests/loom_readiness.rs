#![cfg(ferry_loom)]
//! Loom models of the readiness word (`src/event/readiness/state.rs`,
//! included as it is and compiled against loom's atomics) against a
//! direction's wait list, as `net` waits on it and a harvest wakes it.
//! Under every interleaving loom explores, an edge the kernel reports
//! after data arrived is never lost: the operation that got `EAGAIN`
//! either sees the edge's flag (or its tick) and retries, or is queued
//! when the harvester takes the list, and is woken.
//!
//! The kernel is a data count and an edge: "data arrives" is a store,
//! "the edge" is the harvester's [`state::set`] followed by taking the
//! list under its lock (the reactor's `Waiters::wake`). The operation
//! reads the word, tries (takes data if there is some), and on `EAGAIN`
//! clears the flag for the tick it read ([`state::clear`]), takes the
//! list lock, reads the word again and queues itself only if neither the
//! flag nor the tick changed. Its park is a loop that yields until it is
//! woken, or until the harvester is done: then nobody is left to wake it,
//! and the model fails if data is still there.

use loom::sync::atomic::Ordering::{Acquire, Release, SeqCst};
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::sync::{Arc, Mutex};

/// What `state` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
}

#[path = "../src/event/readiness/state.rs"]
#[allow(dead_code)]
mod state;

use atomic::AtomicU64;

const GEN: u32 = 3;

struct World {
    word: AtomicU64,
    /// The direction's wait list: whether the operation is queued.
    queued: Mutex<bool>,
    woken: AtomicBool,
    /// Bytes in the socket's buffer.
    data: AtomicUsize,
    harvester_done: AtomicBool,
}

fn world(initial_flags: u64) -> Arc<World> {
    Arc::new(World {
        word: AtomicU64::new(state::fresh(GEN) | initial_flags),
        queued: Mutex::new(false),
        woken: AtomicBool::new(false),
        data: AtomicUsize::new(0),
        harvester_done: AtomicBool::new(false),
    })
}

/// The kernel puts data in, then the harvest reports the edge and wakes
/// the list.
fn kernel_and_harvester(w: &World, bytes: usize) {
    w.data.fetch_add(bytes, SeqCst);
    state::set(&w.word, GEN, state::READABLE).expect("current generation");
    let mut q = w.queued.lock().unwrap();
    if *q {
        *q = false;
        w.woken.store(true, Release);
    }
    drop(q);
    w.harvester_done.store(true, Release);
}

/// `net`'s read: returns the bytes it read.
fn operation(w: &World) -> usize {
    loop {
        let seen = w.word.load(Acquire);
        // Try the read (a recv with MSG_DONTWAIT).
        let got = w.data.swap(0, SeqCst);
        if got != 0 {
            return got;
        }
        state::clear(&w.word, seen, state::READABLE);
        {
            let mut q = w.queued.lock().unwrap();
            let now = w.word.load(Acquire);
            if state::flags(now) & state::READ_INTEREST != 0
                || state::tick(now) != state::tick(seen)
            {
                continue;
            }
            *q = true;
        }
        // Park until woken (the flag stays set: one wake per model).
        loop {
            if w.woken.load(Acquire) {
                break;
            }
            if w.harvester_done.load(Acquire) && !w.woken.load(Acquire) {
                assert_eq!(
                    w.data.load(SeqCst),
                    0,
                    "parked for ever with data in the socket: a lost edge"
                );
                return 0;
            }
            loom::thread::yield_now();
        }
    }
}

fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

/// Model 1: data and its edge arrive while the reader tries, clears and
/// parks; the reader ends with the data.
#[test]
fn an_edge_during_the_read_is_never_lost() {
    check(|| {
        let w = world(0);
        let k = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || kernel_and_harvester(&w, 5))
        };
        let got = operation(&w);
        k.join().unwrap();
        assert_eq!(got, 5);
    });
}

/// Model 2: a stale flag from an earlier edge (the word says readable, the
/// buffer is empty): the reader's clear must not eat the new edge.
#[test]
fn a_stale_flag_cleared_late_does_not_eat_a_new_edge() {
    check(|| {
        let w = world(state::READABLE);
        let k = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || kernel_and_harvester(&w, 7))
        };
        let got = operation(&w);
        k.join().unwrap();
        assert_eq!(got, 7);
    });
}

/// Model 3: the registration ends (the owner's drop, or the runtime's
/// end) while the reader parks: it sees the word closed, or is woken.
#[test]
fn a_retired_registration_ends_the_wait() {
    check(|| {
        let w = world(0);
        let closer = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || {
                state::retire(&w.word, GEN);
                let mut q = w.queued.lock().unwrap();
                if *q {
                    *q = false;
                    w.woken.store(true, Release);
                }
                drop(q);
                w.harvester_done.store(true, Release);
            })
        };
        // The reader: parks unless it sees the generation move on.
        let seen = w.word.load(Acquire);
        if state::generation(seen) == GEN {
            state::clear(&w.word, seen, state::READABLE);
            let parked = {
                let mut q = w.queued.lock().unwrap();
                let now = w.word.load(Acquire);
                let over =
                    state::generation(now) != GEN || state::flags(now) & state::READ_INTEREST != 0;
                if !over {
                    *q = true;
                }
                !over
            };
            if parked {
                while !w.woken.load(Acquire) {
                    assert!(
                        !w.harvester_done.load(Acquire) || w.woken.load(Acquire),
                        "parked on a retired registration with nobody to wake it"
                    );
                    loom::thread::yield_now();
                }
            }
        }
        closer.join().unwrap();
    });
}
