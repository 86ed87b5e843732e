#![cfg(ferry_loom)]
//! Loom model of a timer entry's state word (`src/event/timer/entry.rs`,
//! over the real wheel, `src/event/timer/wheel.rs`, both included as they
//! are and compiled against loom's atomics and cells): an owner that arms
//! an entry and then waits for it to fire or takes it out, a firer that
//! advances the wheel and fires what is due, and a terminator that takes
//! the entry out for a thread that will never run again, all at once.
//! Under every interleaving loom explores, whom the entry wakes is handed
//! out exactly once (woken by the firer or given back to a canceller),
//! never both, and once the owner sees the entry settled its reads of the
//! entry do not race the firer's last writes (loom checks the cell).

use ferry_queue::lock::SpinLock;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::SeqCst;

/// What `entry` reaches through `super::shim`.
mod shim {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicU8, Ordering};
}

#[path = "../src/event/timer/wheel.rs"]
#[allow(dead_code)]
mod wheel;

#[path = "../src/event/timer/entry.rs"]
#[allow(dead_code)]
mod entry;

use entry::{CANCELLED, Entry, FIRED, TimerWheel};

/// Whom an entry wakes: counts where it ended up.
struct Who(Arc<World>);

struct World {
    /// Under the runtime's lock kind (loom's atomics inside, in this model).
    wheel: SpinLock<TimerWheel<Who>>,
    /// Wakes made by the firer.
    woken: AtomicUsize,
    /// Wakers given back to a canceller.
    taken_back: AtomicUsize,
}

fn world() -> Arc<World> {
    Arc::new(World {
        wheel: SpinLock::new(TimerWheel::new()),
        woken: AtomicUsize::new(0),
        taken_back: AtomicUsize::new(0),
    })
}

fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

/// The firer: advances the wheel to `now`, fires what is due, and wakes
/// it after letting go of the lock.
fn fire(w: &World, now: u64) {
    let mut fired = Vec::new();
    {
        let mut wheel = w.wheel.lock();
        wheel.advance(now);
        while let Some(who) = wheel.fire_one() {
            fired.push(who);
        }
    }
    for who in fired {
        who.0.woken.fetch_add(1, SeqCst);
    }
}

/// A canceller (the owner, or the terminator): takes the entry out if it
/// is still armed; true if it got the waker back.
fn cancel(w: &World, e: &Entry<Who>) -> bool {
    // SAFETY: `e` is live (an `Arc` the caller holds) and armed only in
    // this wheel.
    let got = unsafe { w.wheel.lock().cancel(e) };
    match got {
        Some(who) => {
            who.0.taken_back.fetch_add(1, SeqCst);
            true
        }
        None => false,
    }
}

/// Arms `e` in the world's wheel at tick `due`.
fn arm(w: &Arc<World>, e: &Entry<Who>, due: u64) {
    // SAFETY: the entry is new, and the `Arc` holding it outlives the
    // wheel's use of it (every model ends with the entry out).
    unsafe { w.wheel.lock().arm(e, due, Who(Arc::clone(w))) };
}

/// The end of every model: the waker went to exactly one place, and the
/// wheel is empty.
fn settled(w: &World, e: &Entry<Who>) {
    let (woken, back) = (w.woken.load(SeqCst), w.taken_back.load(SeqCst));
    assert_eq!(woken + back, 1, "woken {woken}, given back {back}");
    assert_eq!(e.fired(), woken == 1);
    if back == 1 {
        assert_eq!(e.state(), CANCELLED);
    }
    assert!(e.is_spent());
    assert_eq!(w.wheel.lock().len(), 0);
}

/// The owner waits (lock-free) until its armed entry fires, then reads it:
/// the read must come after the firer's last write to it.
#[test]
fn the_owner_sees_a_fired_entry_only_after_the_firer_is_done() {
    check(|| {
        let w = world();
        let e = Arc::new(Entry::new());
        arm(&w, &e, 3);
        let firer = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || fire(&w, 5))
        };
        while !e.fired() {
            loom::thread::yield_now();
        }
        // The owner's frame is done with the entry: this read races the
        // firer's `take` of the waker unless the Release/Acquire pair on
        // the state word orders them.
        assert!(e.is_spent());
        assert_eq!(e.state(), FIRED);
        firer.join().unwrap();
        settled(&w, &e);
    });
}

/// The owner arms and takes the entry out (its wait ended) while the
/// firer advances past its tick: one of them gets the waker.
#[test]
fn a_cancel_racing_the_firing_hands_the_waker_out_once() {
    check(|| {
        let w = world();
        let e = Arc::new(Entry::new());
        let owner = {
            let (w, e) = (Arc::clone(&w), Arc::clone(&e));
            loom::thread::spawn(move || {
                arm(&w, &e, 2);
                let back = cancel(&w, &e);
                // Settled either way: it was taken out here, or it fired
                // (a cancel that finds it fired takes nothing).
                assert!(back || e.fired());
                assert!(e.is_spent());
            })
        };
        fire(&w, 4);
        owner.join().unwrap();
        // A firing before the arm found nothing: fire once more.
        fire(&w, 4);
        settled(&w, &e);
    });
}

/// A terminator takes the entry out for a thread stopped for good, while
/// the firer fires and the thread's own disarm (which would run if it
/// were resumed) also tries: the waker is handed out once.
#[test]
fn a_terminator_the_owner_and_the_firer_hand_the_waker_out_once() {
    check(|| {
        let w = world();
        let e = Arc::new(Entry::new());
        arm(&w, &e, 1);
        let terminator = {
            let (w, e) = (Arc::clone(&w), Arc::clone(&e));
            loom::thread::spawn(move || cancel(&w, &e))
        };
        let firer = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || fire(&w, 1))
        };
        let own = cancel(&w, &e);
        let term = terminator.join().unwrap();
        firer.join().unwrap();
        assert!(!(own && term), "given back twice");
        settled(&w, &e);
    });
}

/// An entry not yet due stays armed through a firing, and a cancel then
/// takes it out; a firing after that finds nothing.
#[test]
fn an_entry_not_due_survives_a_firing_and_is_cancelled() {
    check(|| {
        let w = world();
        let e = Arc::new(Entry::new());
        arm(&w, &e, 70);
        let firer = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || fire(&w, 64))
        };
        assert!(cancel(&w, &e));
        firer.join().unwrap();
        fire(&w, 200);
        settled(&w, &e);
        assert_eq!(w.woken.load(SeqCst), 0);
    });
}
