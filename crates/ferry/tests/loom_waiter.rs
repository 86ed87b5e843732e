#![cfg(ferry_loom)]
//! Loom model of a client slot's waiter word (`src/rpc/waiter.rs`, included
//! as it is and compiled against loom's atomics): a caller whose deadline
//! passes, a poller that pops the call's (late) reply, and the death sweep
//! of a peer that dies, all at once. Under every interleaving loom
//! explores, the call is counted off the channel's pending calls exactly
//! once, its slot is freed at most once and only by the one that claimed
//! it, and the caller's result agrees with what happened.

use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::Relaxed;

/// What `waiter` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
}

#[path = "../src/rpc/waiter.rs"]
#[allow(dead_code)]
mod waiter;

use waiter::{Outcome, Reply, Waiter};

/// What the caller saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    Answer,
    TimedOut,
    PeerDied,
}

struct World {
    w: Waiter,
    pending: AtomicUsize,
    /// Times the slot was freed (by the caller's withdrawal or a poller).
    freed: AtomicUsize,
}

fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

/// The caller: armed before the others start; looks once, then gives up
/// (its deadline) unless an answer or a death came first.
fn caller(world: &World, reply_in_slot: bool) -> Got {
    loop {
        match world.w.outcome() {
            Outcome::Replied => {
                world.w.finish(&world.pending);
                return Got::Answer;
            }
            Outcome::Dead => {
                world.w.finish(&world.pending);
                return Got::PeerDied;
            }
            Outcome::Waiting => {}
        }
        if world.w.abandon() {
            // Withdraws the call if the server has not answered it.
            if !reply_in_slot && world.w.claim_abandoned(&world.pending) {
                world.freed.fetch_add(1, Relaxed);
            }
            return Got::TimedOut;
        }
    }
}

fn run(with_reply: bool, with_death: bool, reply_in_slot: bool) {
    check(move || {
        let world = Arc::new(World {
            w: Waiter::new(),
            pending: AtomicUsize::new(0),
            freed: AtomicUsize::new(0),
        });
        world.w.arm(&world.pending);
        let poller = with_reply.then(|| {
            let world = world.clone();
            loom::thread::spawn(move || match world.w.reply() {
                Reply::Wake => {}
                Reply::Abandoned => {
                    if world.w.claim_abandoned(&world.pending) {
                        world.freed.fetch_add(1, Relaxed);
                    }
                }
                Reply::Refused => {}
            })
        });
        let sweep = with_death.then(|| {
            let world = world.clone();
            loom::thread::spawn(move || {
                world.w.fail(&world.pending);
            })
        });
        let got = caller(&world, reply_in_slot && with_reply);
        if let Some(p) = poller {
            p.join().unwrap();
        }
        if let Some(s) = sweep {
            s.join().unwrap();
        }
        assert_eq!(
            world.pending.load(Relaxed),
            0,
            "counted off exactly once ({got:?})"
        );
        assert!(world.freed.load(Relaxed) <= 1, "freed twice");
        match got {
            Got::Answer => assert!(with_reply),
            Got::PeerDied => assert!(with_death),
            Got::TimedOut => {}
        }
    });
}

#[test]
fn a_deadline_racing_a_late_reply_counts_the_call_off_once() {
    run(true, false, true);
}

#[test]
fn a_deadline_racing_a_death_counts_the_call_off_once() {
    run(false, true, false);
}

#[test]
fn a_deadline_a_reply_and_a_death_at_once_count_the_call_off_once() {
    run(true, true, true);
}

#[test]
fn an_unanswered_call_withdrawn_while_the_peer_dies_is_freed_at_most_once() {
    run(false, true, false);
    run(true, true, false);
}
