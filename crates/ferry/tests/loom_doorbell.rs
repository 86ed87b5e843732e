#![cfg(ferry_loom)]
//! Loom model of the doorbell handshake (`src/event/doorbell.rs`, included
//! as it is and compiled against loom's atomics and fences) between a
//! process's last processor going to sleep and a peer process publishing a
//! call or a reply for it. Under every interleaving loom explores, a
//! published item is never left while the sleeper sleeps with nobody to
//! wake it.
//!
//! The sleeper arms its doorbell, looks at the queue once more, and if it
//! is empty "waits": a loop that yields while the doorbell holds `ASLEEP`
//! and the peer is not done (a peer that is done and left it `ASLEEP` would
//! never ring again: the sleeper would sleep for ever, and the model fails
//! if an item is still queued). The peer pushes, then rings. A third actor,
//! a second peer, makes the case of two publishers racing for one ring.

use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// What `doorbell` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, Ordering, fence};
}

#[path = "../src/event/doorbell.rs"]
#[allow(dead_code)]
mod doorbell;

use atomic::AtomicU32;
use doorbell::{ASLEEP, arm, disarm, ring};

struct World {
    bell: AtomicU32,
    /// Items published and not taken.
    queued: AtomicUsize,
    /// Wake calls made (`FUTEX_WAKE`).
    wakes: AtomicUsize,
    /// Peers done publishing and ringing.
    done: AtomicUsize,
    peers: usize,
}

fn model(peers: usize, urgent: bool) {
    let mut builder = loom::model::Builder::new();
    // Three preemptions, as the other models (more take minutes).
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let w = Arc::new(World {
            bell: AtomicU32::new(doorbell::AWAKE),
            queued: AtomicUsize::new(0),
            wakes: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            peers,
        });
        let handles: Vec<_> = (0..peers)
            .map(|_| {
                let w = w.clone();
                loom::thread::spawn(move || {
                    w.queued.fetch_add(1, Release);
                    ring(&w.bell, urgent, |_| {
                        w.wakes.fetch_add(1, Relaxed);
                    });
                    w.done.fetch_add(1, Release);
                })
            })
            .collect();
        // The sleeper: takes what it finds; sleeps only on an empty queue.
        let mut taken = 0;
        while taken < w.peers {
            arm([&w.bell]);
            if w.queued.load(Acquire) == 0 {
                // The futex wait: returns when the doorbell no longer holds
                // ASLEEP (rung); with every peer done and the doorbell still
                // ASLEEP nobody will ring: the sleeper would sleep for ever.
                loop {
                    if w.bell.load(Acquire) != ASLEEP {
                        break;
                    }
                    // Every peer done (Acquire: their rings are seen now)
                    // and the doorbell still ASLEEP: nobody will ring.
                    if w.done.load(Acquire) == w.peers && w.bell.load(Acquire) == ASLEEP {
                        assert_eq!(
                            w.queued.load(Acquire),
                            0,
                            "an item is queued while its sleeper sleeps unrung"
                        );
                        return;
                    }
                    loom::thread::yield_now();
                }
            }
            disarm([&w.bell]);
            let n = w.queued.swap(0, Acquire);
            taken += n;
        }
        for h in handles {
            h.join().unwrap();
        }
        // Each item was taken; no ring was lost.
        assert_eq!(w.queued.load(Acquire), 0);
    });
}

#[test]
fn one_peer_never_leaves_its_item_unrung() {
    model(1, false);
}

#[test]
fn two_peers_racing_for_one_ring_leave_nothing_unrung() {
    model(2, false);
}

#[test]
fn an_urgent_ring_always_makes_the_wake_call() {
    model(1, true);
}
