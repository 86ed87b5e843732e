//! The default policy's decisions, through the [`Policy`] interface, on
//! real queues: where each kind of runnable thread waits, the order the
//! processor gets them back in, what it steals and what it never does.
//! The threads are never run: a test makes control blocks with no stack
//! and a scheduler that must never be asked to queue one.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use super::queue::RING_SLOTS;
use super::{
    Chain, Cx, Event, Injector, NextSlot, Policy, Priority, Ready, RunQueue, WorkStealing,
};
use crate::arch::Context;
use crate::header::raw::{self, Block, Spec};
use crate::header::{Schedule, Thread, ThreadId};

/// The scheduler of the test threads: they are queued by hand, never
/// unparked or stopped.
struct ByHand;

impl Schedule for ByHand {
    fn schedule(&self, t: Thread, why: Ready) {
        panic!("thread {:?} unparked ({why:?}) in a policy test", t.id());
    }

    fn stop_terminated(&self) -> ! {
        panic!("a policy test's thread never runs");
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A thread that never runs, with id `id`.
pub(super) fn thread(id: u64, priority: Priority) -> Thread {
    let block = Block::alloc(|| None).expect("memory for a thread block");
    let (t, join) = raw::new(
        block,
        Spec {
            id: ThreadId(id),
            name: None,
            priority,
            context: Context::empty(),
            stack: None,
            scheduler: Arc::new(ByHand),
            keep_block: drop,
            tag: 0,
        },
        || (),
    );
    drop(join);
    t
}

pub(super) fn normal(id: u64) -> Thread {
    thread(id, Priority::Normal)
}

pub(super) fn id(t: Option<Thread>) -> Option<u64> {
    t.map(|t| t.id().as_u64())
}

/// The queues of `n` processors and their runtime's injector, each
/// processor with its own policy.
struct Runtime {
    queues: Vec<RunQueue>,
    next: Vec<NextSlot>,
    injector: Injector,
    policies: Vec<WorkStealing>,
    /// The processors' quantum word (the default policy never writes it).
    quantum: AtomicU32,
}

impl Runtime {
    fn new(n: usize) -> Runtime {
        Runtime {
            queues: RunQueue::build(n),
            next: (0..n).map(|_| NextSlot::new()).collect(),
            injector: Injector::new(),
            policies: (0..n).map(|_| WorkStealing::default()).collect(),
            quantum: AtomicU32::new(0),
        }
    }

    /// Processor `p`'s policy and its view.
    fn on(&mut self, p: usize) -> (&mut WorkStealing, Cx<'_>) {
        let cx = Cx {
            queue: &self.queues[p],
            next: &self.next[p],
            injector: &self.injector,
            quantum: &self.quantum,
        };
        (&mut self.policies[p], cx)
    }

    fn ready(&mut self, p: usize, t: Thread, why: Ready) {
        let (policy, cx) = self.on(p);
        policy.ready(&cx, t, why);
    }

    fn event(&mut self, p: usize, event: Event<'_>) {
        let (policy, cx) = self.on(p);
        policy.event(&cx, event);
    }

    fn next(&mut self, p: usize) -> Option<u64> {
        let (policy, cx) = self.on(p);
        id(policy.next(&cx))
    }

    fn next_local(&mut self, p: usize) -> Option<u64> {
        let (policy, cx) = self.on(p);
        id(policy.next_local(&cx))
    }

    fn has_ready(&mut self, p: usize) -> bool {
        let (policy, cx) = self.on(p);
        policy.has_ready(&cx)
    }

    /// What processor `p` runs, in order, until it finds nothing.
    fn drain(&mut self, p: usize) -> Vec<u64> {
        std::iter::from_fn(|| self.next(p)).collect()
    }
}

#[test]
fn a_woken_thread_takes_the_slot_and_moves_the_one_there_to_the_ring() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(1), Ready::Yielded);
    rt.ready(0, normal(2), Ready::Woken);
    assert!(!rt.next[0].is_empty(), "a woken thread waits in the slot");
    rt.ready(0, normal(3), Ready::Woken);
    assert_eq!(rt.drain(0), [3, 1, 2]);
}

#[test]
fn a_spawned_thread_takes_an_empty_slot_and_keeps_it_from_a_woken_one() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(1), Ready::Spawned);
    assert!(!rt.next[0].is_empty(), "the first spawn waits in the slot");
    rt.ready(0, normal(2), Ready::Woken);
    rt.ready(0, normal(3), Ready::Spawned);
    assert_eq!(rt.drain(0), [1, 2, 3]);
}

#[test]
fn a_spawned_thread_queues_behind_a_full_ring() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(1), Ready::Yielded);
    rt.ready(0, normal(2), Ready::Spawned);
    assert!(rt.next[0].is_empty(), "the ring was not empty");
    assert_eq!(rt.drain(0), [1, 2]);
}

#[test]
fn yielded_threads_go_to_the_back_of_the_ring_and_expired_ones_ahead_of_their_level() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(1), Ready::Yielded);
    rt.ready(0, normal(2), Ready::Expired);
    rt.ready(0, normal(3), Ready::Yielded);
    rt.ready(0, normal(4), Ready::Expired);
    rt.ready(0, thread(5, Priority::High), Ready::Yielded);
    rt.ready(0, thread(6, Priority::Low), Ready::Expired);
    assert!(rt.next[0].is_empty());
    // High first; then the expired `Normal` ones in the order their timers
    // fired, ahead of the `Normal` ring; the expired `Low` one last.
    assert_eq!(rt.drain(0), [5, 2, 4, 1, 3, 6]);
}

#[test]
fn expired_threads_stay_ahead_of_a_backlog_that_overflowed_to_the_injector() {
    let mut rt = Runtime::new(1);
    let backlog = RING_SLOTS as u64 + 10;
    for i in 0..backlog {
        rt.ready(0, normal(100 + i), Ready::Yielded);
    }
    rt.ready(0, normal(1), Ready::Expired);
    rt.ready(0, normal(2), Ready::Expired);
    let order = rt.drain(0);
    assert_eq!(order[..2], [1, 2], "the expired threads run first");
    assert_eq!(order.len() as u64, backlog + 2);
}

#[test]
fn high_runs_before_normal_before_low_whatever_the_order_queued() {
    let mut rt = Runtime::new(1);
    rt.ready(0, thread(1, Priority::Low), Ready::Woken);
    rt.ready(0, normal(2), Ready::Woken);
    rt.ready(0, thread(3, Priority::High), Ready::Woken);
    rt.ready(0, normal(4), Ready::Yielded);
    rt.ready(0, thread(5, Priority::High), Ready::Spawned);
    // Only a `Normal` thread takes the slot.
    assert_eq!(rt.drain(0), [3, 5, 2, 4, 1]);
}

#[test]
fn the_injector_goes_after_the_local_ring_of_its_level_and_before_low() {
    let mut rt = Runtime::new(1);
    rt.ready(0, thread(1, Priority::Low), Ready::Yielded);
    rt.ready(0, normal(5), Ready::Yielded);
    assert!(rt.injector.push(normal(2)).is_ok());
    assert!(rt.injector.push(thread(3, Priority::High)).is_ok());
    assert!(rt.injector.push(thread(4, Priority::Low)).is_ok());
    rt.ready(0, normal(6), Ready::Woken);
    // The injector's High first; then slot, Normal ring, injector's
    // Normal; the injector's Low before the local Low ring.
    assert_eq!(rt.drain(0), [3, 6, 5, 2, 4, 1]);
}

#[test]
fn the_injector_goes_first_once_in_a_while() {
    let mut rt = Runtime::new(1);
    let local = 70;
    for i in 0..local {
        rt.ready(0, normal(i), Ready::Yielded);
    }
    assert!(rt.injector.push(normal(1000)).is_ok());
    let order = rt.drain(0);
    let at = order.iter().position(|&i| i == 1000);
    assert_eq!(at, Some(60), "the 61st pick takes the injector's thread");
    assert_eq!(order.len(), 71);
}

#[test]
fn a_woken_streak_in_the_slot_lets_the_ring_go_first_once() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(0), Ready::Yielded);
    let mut picks = Vec::new();
    for i in 1..=12 {
        rt.ready(0, normal(i), Ready::Woken);
        picks.push(rt.next(0).unwrap());
        if picks.last() == Some(&0) {
            break;
        }
    }
    // Eight picks from the slot, then the ring's thread; the woken one
    // still waits in the slot.
    assert_eq!(picks, [1, 2, 3, 4, 5, 6, 7, 8, 0]);
    assert_eq!(rt.drain(0), [9]);
}

#[test]
fn a_full_ring_overflows_to_the_injector() {
    let mut rt = Runtime::new(1);
    let total = RING_SLOTS as u64 + 2;
    for i in 0..total {
        rt.ready(0, normal(i), Ready::Yielded);
    }
    assert!(
        rt.injector.has_work(),
        "the last threads went to the injector"
    );
    let mut ran = rt.drain(0);
    ran.sort_unstable();
    assert_eq!(ran, (0..total).collect::<Vec<_>>(), "each ran once");
    assert!(!rt.injector.has_work());
}

#[test]
fn nothing_overtakes_the_threads_that_overflowed_to_the_injector() {
    let mut rt = Runtime::new(1);
    let full = RING_SLOTS as u64;
    for i in 0..=full {
        rt.ready(0, normal(i), Ready::Yielded);
    }
    // The ring is full and `full` went to the injector; the ring drains
    // by one, and later threads still queue behind `full`: one alone, and
    // a batch.
    assert_eq!(rt.next_local(0), Some(0));
    rt.ready(0, normal(1000), Ready::Yielded);
    let (policy, cx) = rt.on(0);
    policy.ready_batch(&cx, chain([normal(1001), normal(1002)]));
    // A woken thread still takes the slot (one thread, bounded by the
    // slot's streak).
    rt.ready(0, normal(2000), Ready::Woken);
    let order = rt.drain(0);
    assert_eq!(order[0], 2000);
    // The injector's threads in the order they came (interleaved with the
    // ring's at every 61st pick), the ring's in theirs.
    let injected: Vec<u64> = order
        .iter()
        .copied()
        .filter(|&i| i >= full && i < 2000)
        .collect();
    assert_eq!(injected, [full, 1000, 1001, 1002]);
    let ring: Vec<u64> = order.iter().copied().filter(|&i| i < full).collect();
    assert_eq!(ring, (1..full).collect::<Vec<_>>());
}

/// A chain of `ids`, in order.
fn chain(ids: impl IntoIterator<Item = Thread>) -> Chain {
    let mut c = Chain::new();
    for t in ids {
        c.push(t);
    }
    c
}

#[test]
fn a_batch_fills_the_ring_in_order_then_the_injector_and_never_the_slot() {
    let mut rt = Runtime::new(2);
    // A thread already in the ring takes one slot of it.
    rt.ready(0, normal(1000), Ready::Yielded);
    let total = RING_SLOTS as u64 + 10;
    let (policy, cx) = rt.on(0);
    policy.ready_batch(&cx, chain((0..total).map(normal)));
    assert!(rt.next[0].is_empty(), "a batch never takes the slot");
    // What did not fit went to the injector, whole and in order.
    let spilled: Vec<u64> = std::iter::from_fn(|| id(rt.injector.pop())).collect();
    assert_eq!(spilled, (RING_SLOTS as u64 - 1..total).collect::<Vec<_>>());
    let mut expect = vec![1000];
    expect.extend(0..RING_SLOTS as u64 - 1);
    assert_eq!(rt.drain(0), expect, "the ring holds the rest, in order");
}

#[test]
fn a_batch_keeps_each_level_in_order_and_high_first() {
    let mut rt = Runtime::new(1);
    let threads = [
        normal(1),
        thread(2, Priority::High),
        normal(3),
        thread(4, Priority::Low),
        thread(5, Priority::High),
    ];
    let (policy, cx) = rt.on(0);
    policy.ready_batch(&cx, chain(threads));
    assert_eq!(rt.drain(0), [2, 5, 1, 3, 4]);
}

#[test]
fn a_closed_injector_gives_a_chain_back_and_an_open_one_takes_it_whole() {
    let injector = Injector::new();
    assert!(injector.push_chain(Chain::new()).is_ok(), "an empty chain");
    assert!(!injector.has_work());
    injector
        .push_chain(chain([normal(1), thread(2, Priority::High), normal(3)]))
        .unwrap_or_else(|_| panic!("an open injector takes a chain"));
    injector
        .push_chain(chain([normal(4)]))
        .unwrap_or_else(|_| panic!("and another after it"));
    let mut seen = Vec::new();
    injector.close(|t| seen.push(t.id().as_u64()));
    assert_eq!(seen, [2, 1, 3, 4], "levels first, each in order");
    let back = injector
        .push_chain(chain([normal(5), normal(6)]))
        .expect_err("a closed injector gives the chain back");
    assert_eq!(back.len(), 2);
    assert!(!injector.has_work());
}

#[test]
fn a_processor_with_an_empty_ring_takes_its_share_of_the_injector_in_order() {
    let mut rt = Runtime::new(2);
    for i in 0..101 {
        rt.injector
            .push(normal(i))
            .unwrap_or_else(|_| panic!("open"));
    }
    // Two processors: one runs, and half the injector moves to its ring.
    assert_eq!(rt.next(0), Some(0));
    assert_eq!(rt.injector.len(), 50);
    assert!(!rt.queues[0].is_empty(Priority::Normal.level()));
    // The other one, its ring empty too, takes the next thread and half
    // of what is left (25 of 50) without stealing...
    assert_eq!(rt.next_local(1), Some(51), "its own share first");
    assert_eq!(rt.injector.len(), 24);
    let mut ran = rt.drain(0);
    // ...and the first one, with the injector's rest after the ring.
    assert_eq!(ran[..50], (1..51).collect::<Vec<_>>());
    ran.extend(rt.drain(1));
    ran.sort_unstable();
    let mut expect: Vec<u64> = (1..101).collect();
    expect.retain(|&i| i != 51);
    assert_eq!(ran, expect, "each ran once");
    // A full ring leaves the share in the injector.
    let mut rt = Runtime::new(1);
    for i in 0..RING_SLOTS as u64 {
        rt.ready(0, normal(i), Ready::Yielded);
    }
    for i in 0..10 {
        rt.injector
            .push(normal(1000 + i))
            .unwrap_or_else(|_| panic!("open"));
    }
    let ran = rt.drain(0);
    assert_eq!(ran.len(), RING_SLOTS + 10, "each ran once");
}

#[test]
fn next_local_never_steals_and_next_does() {
    let mut rt = Runtime::new(2);
    rt.ready(1, normal(1), Ready::Yielded);
    rt.ready(1, thread(2, Priority::High), Ready::Yielded);
    rt.ready(1, normal(3), Ready::Woken);
    assert!(
        !rt.has_ready(0),
        "another processor's threads are not ready here"
    );
    assert_eq!(rt.next_local(0), None);
    // Stolen from the rings, highest level first; never the slot.
    assert_eq!(rt.next(0), Some(2));
    assert_eq!(rt.next(0), Some(1));
    assert_eq!(rt.next(0), None);
    assert_eq!(rt.drain(1), [3]);
}

#[test]
fn stealing_goes_round_the_victims() {
    let mut rt = Runtime::new(3);
    rt.ready(1, normal(10), Ready::Yielded);
    rt.ready(1, normal(11), Ready::Yielded);
    rt.ready(2, normal(20), Ready::Yielded);
    rt.ready(2, normal(21), Ready::Yielded);
    // Processor 0's victims are 1 then 2; after a steal it starts at the
    // one after its last victim.
    assert_eq!(rt.drain(0), [10, 20, 11, 21]);
}

#[test]
fn unblocked_is_queued_as_woken_and_preempted_at_the_back_of_the_ring() {
    let mut rt = Runtime::new(1);
    rt.ready(0, normal(1), Ready::Yielded);
    rt.event(0, Event::Preempted(normal(2)));
    assert!(rt.next[0].is_empty(), "a preempted thread had its turn");
    rt.event(0, Event::Unblocked(normal(3)));
    assert!(!rt.next[0].is_empty(), "an unblocked thread is woken");
    assert_eq!(rt.drain(0), [3, 1, 2]);
}

#[test]
fn blocked_and_processor_events_queue_nothing() {
    let mut rt = Runtime::new(2);
    let blocked = normal(1);
    rt.event(0, Event::Blocked(&blocked));
    rt.event(0, Event::ProcessorAdded(1));
    rt.event(0, Event::ProcessorRemoved(1));
    assert!(!rt.has_ready(0));
    assert_eq!(rt.next(0), None);
    assert_eq!(blocked.ref_count(), 1, "the policy kept no reference");
}

#[test]
fn has_ready_sees_the_slot_each_ring_and_the_injector() {
    let mut rt = Runtime::new(1);
    assert!(!rt.has_ready(0));
    rt.ready(0, normal(1), Ready::Woken);
    assert!(rt.has_ready(0), "the slot");
    assert_eq!(rt.next(0), Some(1));
    assert!(!rt.has_ready(0));
    for (i, priority) in [Priority::High, Priority::Normal, Priority::Low]
        .into_iter()
        .enumerate()
    {
        rt.ready(0, thread(i as u64, priority), Ready::Yielded);
        assert!(rt.has_ready(0), "the {priority:?} ring");
        assert_eq!(rt.next(0), Some(i as u64));
        assert!(!rt.has_ready(0));
    }
    assert!(rt.injector.push(thread(9, Priority::Low)).is_ok());
    assert!(rt.has_ready(0), "the injector");
    assert_eq!(rt.next(0), Some(9));
    assert!(!rt.has_ready(0));
}

#[test]
fn a_queued_thread_is_held_once_and_given_back_once() {
    let mut rt = Runtime::new(2);
    let t = normal(1);
    let witness = t.clone();
    rt.ready(0, t, Ready::Woken);
    assert_eq!(witness.ref_count(), 2, "the slot holds one reference");
    rt.ready(0, normal(2), Ready::Woken);
    assert_eq!(witness.ref_count(), 2, "moved to the ring, not copied");
    let (policy, cx) = rt.on(1);
    let stolen = policy.next(&cx).expect("processor 1 steals it");
    assert_eq!(stolen.id(), witness.id());
    drop(stolen);
    assert_eq!(witness.ref_count(), 1);
}

#[test]
fn the_express_lane_is_a_prefix_of_its_level_and_survives_a_share_given_back() {
    let injector = Injector::new();
    for i in [1, 2, 3] {
        injector.push(normal(i)).unwrap_or_else(|_| panic!("open"));
    }
    assert!(!injector.has_express(Priority::Normal.level()));
    for i in [10, 11, 12] {
        injector
            .push_express(normal(i))
            .unwrap_or_else(|_| panic!("open"));
    }
    injector.push(normal(4)).unwrap_or_else(|_| panic!("open"));
    assert!(injector.has_express(Priority::Normal.level()));
    assert!(!injector.has_express(Priority::High.level()));
    // A share that keeps one thread and gives the next back: the one given
    // back stays first, still in the lane.
    let mut kept = Vec::new();
    let first = injector
        .pop_share(Priority::Normal.level(), 5, |t| {
            if kept.is_empty() {
                kept.push(t.id().as_u64());
                Ok(())
            } else {
                Err(t)
            }
        })
        .map(|t| t.id().as_u64());
    assert_eq!((first, kept.as_slice()), (Some(10), &[11][..]));
    assert_eq!(id(injector.pop_express(Priority::Normal.level())), Some(12));
    assert!(!injector.has_express(Priority::Normal.level()));
    assert_eq!(id(injector.pop_express(Priority::Normal.level())), None);
    // A lane made again after it emptied goes before the rest.
    injector
        .push_express(normal(13))
        .unwrap_or_else(|_| panic!("open"));
    assert_eq!(injector.len(), 5);
    let mut seen = Vec::new();
    injector.close(|t| seen.push(t.id().as_u64()));
    assert_eq!(seen, [13, 1, 2, 3, 4]);
    assert!(!injector.has_express(Priority::Normal.level()));
    assert!(injector.push_express(normal(14)).is_err(), "closed");
}
