//! The fine-grain policy's rule (rate to quantum, a pure function) and its
//! decisions on real queues: a woken thread goes to the front, a thread
//! woken off the processors goes before the ring, and the quantum of the
//! thread picked is published in the processor's quantum word from the
//! stream bytes in its header. The threads are never run (see `tests`).

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::fine_grain::{
    BYTES_PER_SECOND_PER_MICROSECOND, MAX_QUANTUM, MIN_QUANTUM, NEXT_STREAK_MAX, RATE_WINDOW_MIN,
    RING_FIRST_EVERY, quantum_for, rate,
};
use super::tests::{id, normal, thread};
use super::{Cx, Event, FineGrain, Injector, NextSlot, Policy, Priority, Ready, RunQueue};
use crate::header::Thread;

/// One processor with the fine-grain policy, and its runtime's injector.
struct One {
    queue: RunQueue,
    next: NextSlot,
    injector: Injector,
    quantum: AtomicU32,
    policy: FineGrain,
}

impl One {
    fn new() -> One {
        One {
            queue: RunQueue::build(1).pop().expect("one queue"),
            next: NextSlot::new(),
            injector: Injector::new(),
            quantum: AtomicU32::new(0),
            policy: FineGrain::default(),
        }
    }

    fn with<R>(&mut self, f: impl FnOnce(&mut FineGrain, &Cx<'_>) -> R) -> R {
        let cx = Cx {
            queue: &self.queue,
            next: &self.next,
            injector: &self.injector,
            quantum: &self.quantum,
        };
        f(&mut self.policy, &cx)
    }

    fn ready(&mut self, t: Thread, why: Ready) {
        self.with(|p, cx| p.ready(cx, t, why));
    }

    fn next(&mut self) -> Option<u64> {
        id(self.with(|p, cx| p.next(cx)))
    }

    fn drain(&mut self) -> Vec<u64> {
        std::iter::from_fn(|| self.next()).collect()
    }

    fn quantum(&self) -> Duration {
        Duration::from_micros(u64::from(self.quantum.load(Relaxed)))
    }
}

#[test]
fn a_thread_that_moves_no_stream_data_gets_the_minimum_quantum() {
    assert_eq!(quantum_for(0), MIN_QUANTUM);
    assert_eq!(quantum_for(rate(0, Duration::from_secs(1))), MIN_QUANTUM);
    assert_eq!(
        quantum_for(BYTES_PER_SECOND_PER_MICROSECOND - 1),
        MIN_QUANTUM
    );
}

#[test]
fn the_quantum_grows_with_the_rate_up_to_the_maximum() {
    // 1 µs more per `BYTES_PER_SECOND_PER_MICROSECOND` bytes per second.
    assert_eq!(
        quantum_for(300 * BYTES_PER_SECOND_PER_MICROSECOND),
        MIN_QUANTUM + Duration::from_micros(300)
    );
    // 44.1 kHz of 8-byte samples, read and written: 705,600 B/s.
    assert_eq!(
        quantum_for(705_600),
        MIN_QUANTUM + Duration::from_micros(705)
    );
    let top = (MAX_QUANTUM - MIN_QUANTUM).as_micros() as u64 * BYTES_PER_SECOND_PER_MICROSECOND;
    assert_eq!(quantum_for(top), MAX_QUANTUM);
    assert_eq!(quantum_for(top + 1), MAX_QUANTUM);
    assert_eq!(quantum_for(u64::MAX), MAX_QUANTUM);
    let mut last = Duration::ZERO;
    for r in (0..4_000_000).step_by(50_000) {
        let q = quantum_for(r);
        assert!(q >= last, "the quantum never shrinks as the rate grows");
        assert!((MIN_QUANTUM..=MAX_QUANTUM).contains(&q));
        last = q;
    }
}

#[test]
fn the_rate_is_bytes_per_second_over_at_least_the_window() {
    assert_eq!(rate(1000, Duration::from_millis(1)), 1_000_000);
    assert_eq!(rate(1000, Duration::from_secs(2)), 500);
    // A burst in a moment counts over the window, not over the moment.
    assert_eq!(rate(200, Duration::ZERO), rate(200, RATE_WINDOW_MIN));
    assert_eq!(rate(200, Duration::from_nanos(1)), 1_000_000);
    assert_eq!(rate(u64::MAX, RATE_WINDOW_MIN), u64::MAX);
}

#[test]
fn fine_grain_puts_a_woken_thread_at_the_front() {
    let mut p = One::new();
    p.ready(normal(1), Ready::Spawned);
    p.ready(normal(2), Ready::Yielded);
    p.ready(normal(3), Ready::Woken);
    assert!(
        !p.next.is_empty(),
        "a woken thread waits in the next-to-run slot"
    );
    // A second wakeup takes the front; the first goes to the back.
    p.ready(normal(4), Ready::Woken);
    assert_eq!(p.drain(), [4, 1, 2, 3]);
}

#[test]
fn fine_grain_queues_preempted_spawned_expired_and_other_levels_at_the_back() {
    let mut p = One::new();
    p.ready(normal(1), Ready::Spawned);
    p.with(|pol, cx| pol.event(cx, Event::Preempted(normal(2))));
    p.ready(normal(3), Ready::Expired);
    p.ready(thread(4, Priority::Low), Ready::Woken);
    p.ready(thread(5, Priority::High), Ready::Woken);
    p.with(|pol, cx| pol.event(cx, Event::Unblocked(normal(6))));
    // High first, then the unblocked one from the front, then FIFO, Low last.
    assert_eq!(p.drain(), [5, 6, 1, 2, 3, 4]);
}

#[test]
fn fine_grain_runs_a_thread_woken_off_the_processors_before_the_ring() {
    let mut p = One::new();
    p.ready(normal(1), Ready::Spawned);
    p.ready(normal(2), Ready::Yielded);
    p.injector.push(normal(3)).unwrap();
    assert_eq!(p.drain(), [3, 1, 2]);
}

#[test]
fn fine_grain_bounds_the_slot_and_the_injector_so_the_ring_runs() {
    // A pair that keeps waking each other through the slot: the ring's
    // thread still runs once the streak bound is passed.
    let mut p = One::new();
    p.ready(normal(100), Ready::Yielded);
    let mut ran_ring = None;
    for i in 0..=NEXT_STREAK_MAX + 1 {
        p.ready(normal(u64::from(i)), Ready::Woken);
        if p.next() == Some(100) {
            ran_ring = Some(i);
            break;
        }
    }
    assert!(ran_ring.is_some(), "the ring's thread never ran");

    // Threads keep arriving in the injector: the ring still runs within
    // `RING_FIRST_EVERY` picks.
    let mut p = One::new();
    p.ready(normal(100), Ready::Yielded);
    let mut picks = 0;
    loop {
        p.injector.push(normal(1)).unwrap();
        picks += 1;
        if p.next() == Some(100) {
            break;
        }
        assert!(
            picks <= RING_FIRST_EVERY,
            "the ring starved behind the injector"
        );
    }
}

#[test]
fn fine_grain_publishes_the_picked_threads_quantum_from_its_stream_bytes() {
    let mut p = One::new();
    // Never picked, no bytes: the minimum.
    let idle = normal(1);
    p.ready(idle.clone(), Ready::Yielded);
    assert_eq!(p.next(), Some(1));
    assert_eq!(p.quantum(), MIN_QUANTUM);

    // A thread that moved 1,000 bytes since its last pick, over less than
    // the window: 5,000,000 B/s at most, so the maximum.
    let busy = normal(2);
    p.ready(busy.clone(), Ready::Yielded);
    assert_eq!(p.next(), Some(2));
    busy.header().add_stream_bytes(1000);
    p.ready(busy.clone(), Ready::Woken);
    assert_eq!(p.next(), Some(2));
    assert_eq!(p.quantum(), MAX_QUANTUM);
    assert_eq!(
        busy.header().take_stream_bytes(),
        0,
        "the pick reset the count"
    );

    // Picked again having moved nothing: back to the minimum.
    p.ready(busy, Ready::Woken);
    assert_eq!(p.next(), Some(2));
    assert_eq!(p.quantum(), MIN_QUANTUM);

    // A counter that saturates does not wrap to a small rate.
    let flood = normal(3);
    flood.header().add_stream_bytes(usize::MAX);
    flood.header().add_stream_bytes(1);
    p.ready(flood, Ready::Yielded);
    assert_eq!(p.next(), Some(3));
    assert_eq!(p.quantum(), MAX_QUANTUM);
    drop(idle);
}

#[test]
fn fine_grain_gives_a_thread_run_without_a_pick_its_quantum_as_a_pick_would() {
    let mut p = One::new();
    let busy = normal(1);
    p.ready(busy.clone(), Ready::Yielded);
    assert_eq!(p.next(), Some(1));
    assert_eq!(p.quantum(), MIN_QUANTUM);
    // An activation switched to straight from the poll, having moved
    // stream data since it last ran: its quantum is published and its
    // count taken, as at a pick.
    busy.header().add_stream_bytes(1000);
    p.with(|policy, cx| policy.runs_unpicked(cx, &busy));
    assert_eq!(p.quantum(), MAX_QUANTUM);
    assert_eq!(busy.header().take_stream_bytes(), 0);
}
