#![cfg(ferry_loom)]
//! Loom model of the last look at the ring's completions before a
//! processor sleeps (`Uring::has_completions` and `Uring::reap` in
//! `src/event/ring.rs`, the ring's `Source::is_ready` and `deliver`).
//!
//! The completion queue's head is kept under the completion lock, which
//! both the look and the reap only *try* to take (a processor never waits
//! for another's reap). The kernel posts a completion (the queue's tail)
//! and then signals the ring's eventfd, whose epoll registration is
//! edge-triggered: one edge wakes the poller once. The poller harvests
//! the edge, then, as every processor does before it sleeps, reaps and
//! looks until the look says there is nothing; another processor does the
//! same at the same time.
//!
//! The property: when both have gone to sleep, the completion was reaped,
//! or its edge is still there to wake the poller. With the look's rule
//! that a contended lock means "look again", it holds in every
//! interleaving. With a contended lock taken as "nothing" it does not:
//! the other processor may hold the lock for a look taken before the
//! completion was posted, while the poller spends the edge and sleeps;
//! then nobody reaps the completion and its owner stays parked. The second
//! test checks that loom finds that trace.

use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use loom::sync::{Arc, Mutex};

/// What the model shares: the queue, the lock over its head, the edge.
struct Ring {
    /// Completions posted (the queue's tail), written by the kernel.
    tail: AtomicUsize,
    /// The queue's head: completions taken by a reap.
    cq: Mutex<usize>,
    /// An edge of the eventfd that no harvest has taken yet (epoll's
    /// ready list, under its lock).
    edge: Mutex<bool>,
    /// Completions whose owners were woken.
    reaped: AtomicUsize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            tail: AtomicUsize::new(0),
            cq: Mutex::new(0),
            edge: Mutex::new(false),
            reaped: AtomicUsize::new(0),
        }
    }

    /// The kernel completes the operation: posts, then signals.
    fn complete(&self) {
        self.tail.fetch_add(1, Release);
        *self.edge.lock().unwrap() = true;
    }

    /// `has_completions`: whether to look again. `contended` is what a
    /// lock held by another processor answers.
    fn look(&self, contended: bool) -> bool {
        match self.cq.try_lock() {
            Ok(head) => *head != self.tail.load(Acquire),
            Err(_) => contended,
        }
    }

    /// `reap`: takes what was posted, unless another processor reaps.
    fn reap(&self) {
        if let Ok(mut head) = self.cq.try_lock() {
            let tail = self.tail.load(Acquire);
            let new = tail.checked_sub(*head).expect("the tail never goes back");
            self.reaped.fetch_add(new, Relaxed);
            *head = tail;
        }
    }

    /// A processor's way to sleep: reap, then reap as long as the look
    /// says to look again.
    fn until_asleep(&self, contended: bool) {
        self.reap();
        while self.look(contended) {
            self.reap();
            loom::thread::yield_now();
        }
    }
}

/// The kernel, a poller that harvests the edge if it came, and another
/// processor going to sleep at the same time; checks the property.
fn model(contended: bool) {
    // Three preemptions are enough for the trace above (the other
    // processor preempted inside its look, the poller inside its reap).
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(move || {
        let r = Arc::new(Ring::new());
        let kernel = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || r.complete())
        };
        let poller = {
            let r = Arc::clone(&r);
            loom::thread::spawn(move || {
                // The harvest: an edge taken ends the `epoll_wait`.
                let _woke = std::mem::take(&mut *r.edge.lock().unwrap());
                r.until_asleep(contended);
            })
        };
        r.until_asleep(contended);
        kernel.join().unwrap();
        poller.join().unwrap();
        let (reaped, edge) = (r.reaped.load(Relaxed), *r.edge.lock().unwrap());
        assert!(
            reaped == 1 || edge,
            "both processors sleep, the edge is spent and the completion unreaped ({reaped} reaped)"
        );
    });
}

#[test]
fn a_contended_look_looks_again_and_no_completion_is_left_unreaped() {
    model(true);
}

#[test]
#[should_panic(expected = "the completion unreaped")]
fn a_contended_look_taken_as_nothing_can_leave_a_completion_unreaped() {
    model(false);
}
