#![cfg(ferry_loom)]
//! Loom models of the idle handshake between processors that park and
//! whoever publishes work (`processor`'s module docs, "Idling and waking"),
//! over the idle bookkeeping of `src/processor/idle_set.rs`, included as it
//! is and compiled against loom's atomics, lock and fences. Under every
//! interleaving loom explores, no published work waits while the processor
//! that could run it stays parked with nobody to wake it: neither against
//! notifiers on processors and off them (model 1), nor when the last
//! spinner finds work while another processor sleeps (model 2).
//!
//! Each model keeps the steps `Processor::idle` takes around the words
//! (spin and look, join the sleepers, stop spinning, `heavy_fence`, look
//! once more, park on the `sleep` word) and `Set::notify_work`'s (publish,
//! ask [`IdleSet`], wake the processor it names). Work is a count of
//! queued items; the futex wait is a loop that yields until the `sleep`
//! word is 1, or until every other actor (notifier, spinner) is done: then
//! nobody is left to wake the processor, it would sleep for ever, and the
//! model fails if an item is still queued. Loom treats
//! SeqCst loads and stores as AcqRel but models SeqCst fences, which stand
//! here for both `heavy_fence` and `light_fence` (`ferry_queue::wait`).

use loom::sync::Arc;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use loom::sync::atomic::{AtomicU32, AtomicUsize};

/// What `idle_set` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::Mutex;
    pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};
    pub(crate) use std::sync::PoisonError;

    /// `ferry_queue::wait::light_fence`: a compiler fence only, where
    /// `heavy_fence` forces a full barrier on every running thread; the
    /// pair orders as two SeqCst fences.
    pub(crate) fn light_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    /// `ferry_queue::wait::heavy_fence`, as above.
    pub(crate) fn heavy_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

#[path = "../src/processor/idle_set.rs"]
#[allow(dead_code)]
mod idle_set;

use idle_set::IdleSet;

/// Runs `f` under loom, over every interleaving with at most three
/// preemptions (whatever `LOOM_MAX_PREEMPTIONS` says; four take minutes).
fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

/// The runtime's processors as the handshake sees them.
struct World {
    idle: IdleSet,
    /// Each processor's futex word (`Processor::sleep`).
    sleep: Vec<AtomicU32>,
    /// Actors (notifiers, spinners) done publishing and waking.
    done: AtomicUsize,
    /// How many there are.
    actors: usize,
    /// Items queued and not taken yet (a ring or the injector).
    queued: AtomicUsize,
    /// Items taken (run) so far.
    taken: AtomicUsize,
}

impl World {
    /// `processors` processors, one of which parks, and `actors` threads
    /// that publish or wake.
    fn new(processors: usize, actors: usize) -> World {
        World {
            idle: IdleSet::new(processors),
            sleep: (0..processors).map(|_| AtomicU32::new(0)).collect(),
            queued: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            actors,
        }
    }

    /// An actor is done: it publishes and wakes nothing more.
    fn finish(&self) {
        self.done.fetch_add(1, Release);
    }

    /// Queues an item (`make_ready` on a processor or off one).
    fn publish(&self) {
        self.queued.fetch_add(1, Release);
    }

    /// `Set::notify_work` (`anywhere`: `notify_work_anywhere`).
    fn notify(&self, anywhere: bool) {
        let wake = if anywhere {
            self.idle.notify_work_anywhere()
        } else {
            self.idle.notify_work()
        };
        if wake {
            self.wake_sleeper();
        }
    }

    /// `Set::wake_sleeper`, with `Processor::wake` (its futex wake is the
    /// parked loop's next look at the word).
    fn wake_sleeper(&self) {
        if let Some(i) = self.idle.take_sleeper() {
            self.sleep[i].store(1, Release);
        }
    }

    /// The run loop's pick: takes a queued item, if any.
    fn take(&self) -> bool {
        let took = self
            .queued
            .fetch_update(Acquire, Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if took {
            self.taken.fetch_add(1, Release);
        }
        took
    }

    /// `sees_work`: a plain look, which may read a stale count.
    fn sees_work(&self) -> bool {
        self.queued.load(Relaxed) != 0
    }

    /// A spinner found work: it stops spinning (and, the last spinner,
    /// wakes a sleeper to spin in its place).
    fn found_work(&self) {
        if self.idle.spinning_exit_found_work() {
            self.wake_sleeper();
        }
    }

    /// `Processor::idle` of processor `i`: spins (one look), then sleeps
    /// until woken, unless its last look sees work. False if it sleeps for
    /// ever.
    fn idle(&self, i: usize) -> bool {
        self.idle.spinning_enter();
        if self.sees_work() {
            self.found_work();
            return true;
        }
        self.sleep[i].store(0, Relaxed);
        self.idle.sleeper_enter(i);
        self.idle.spinning_exit();
        // `heavy_fence`: pairs with the notifier's fence.
        loom::sync::atomic::fence(atomic::Ordering::SeqCst);
        if self.sees_work() {
            self.idle.sleeper_exit(i);
            return true;
        }
        self.park(i)
    }

    /// Processor `i`, among the sleepers, waits on its `sleep` word (the
    /// futex wait): true once woken, false if it sleeps for ever (every
    /// actor is done and the word is still 0).
    fn park(&self, i: usize) -> bool {
        let woken = loop {
            if self.sleep[i].load(Acquire) == 1 {
                break true;
            }
            if self.done.load(Acquire) == self.actors {
                break self.sleep[i].load(Acquire) == 1;
            }
            loom::thread::yield_now();
        };
        self.idle.sleeper_exit(i);
        woken
    }

    /// Processor `i`'s run loop until every one of `items` was taken (by
    /// it or by another); fails the model if it sleeps for ever with an
    /// item queued.
    fn run(&self, i: usize, items: usize) {
        while self.taken.load(Acquire) < items {
            if !self.take() && !self.idle(i) {
                assert_eq!(
                    self.queued.load(Acquire),
                    0,
                    "processor {i} sleeps for ever with work queued"
                );
                return;
            }
        }
    }
}

/// Model 1: the only processor idles while two notifiers each publish an
/// item, one on a processor (`light_fence`), one off the processors
/// (`heavy_fence`). The processor runs both: it is never left asleep with
/// an item queued.
#[test]
fn a_notifier_never_leaves_the_only_processor_asleep() {
    check(|| {
        let w = Arc::new(World::new(1, 2));
        let notifiers: Vec<_> = [false, true]
            .into_iter()
            .map(|anywhere| {
                let w = Arc::clone(&w);
                loom::thread::spawn(move || {
                    w.publish();
                    w.notify(anywhere);
                    w.finish();
                })
            })
            .collect();
        w.run(0, 2);
        for n in notifiers {
            n.join().unwrap();
        }
        assert_eq!(w.taken.load(Acquire), 2);
    });
}

/// Model 2: processor 1 sleeps and processor 0 spins while a notifier
/// publishes two items. Processor 0 looks once the first is queued, stops
/// spinning and takes one if it is still there (then it stays busy with
/// it). Processor 1 runs the rest: woken by the notifier if processor 0 had
/// stopped spinning, else by processor 0 as the last spinner to find work.
#[test]
fn the_last_spinner_to_find_work_wakes_a_sleeper() {
    check(|| {
        let w = Arc::new(World::new(2, 2));
        w.idle.sleeper_enter(1);
        w.idle.spinning_enter();
        let notifier = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || {
                w.publish();
                w.notify(false);
                let spinner = {
                    let w = Arc::clone(&w);
                    loom::thread::spawn(move || {
                        assert!(w.sees_work(), "nobody else can take the first item yet");
                        w.found_work();
                        w.take();
                        w.finish();
                    })
                };
                w.publish();
                w.notify(false);
                w.finish();
                spinner
            })
        };
        if w.park(1) {
            w.run(1, 2);
        }
        notifier.join().unwrap().join().unwrap();
        assert_eq!(
            w.taken.load(Acquire),
            2,
            "an item waits for a busy processor"
        );
    });
}
