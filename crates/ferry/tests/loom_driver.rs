#![cfg(ferry_loom)]
//! Loom models of the handshakes on a processor's activation words
//! (`src/upcall/per_processor.rs`, included as it is and compiled against
//! loom's atomics): the driver word between a lender, its takers and its
//! own reclaim (model 1); the standby word between a lender and the taker
//! on its way, or a hander that started nobody (model 2); the monitor's
//! probe against a driver entering the runtime (model 3) and stopping its
//! processor (model 4); the monitor's and the stand-in's probes, with their
//! stamps of when they found the driver asleep (`Activation::blocked_at`),
//! against a driver that enters the runtime and sleeps again (model 5).
//! Under every interleaving, a processor has exactly one driver at a time,
//! only its driver touches its owner part, a lent processor is never left
//! without a taker, and a driver whose processor was taken while it slept
//! finds a stamp.
//!
//! Each model keeps the steps ferry takes around the words
//! (`upcall::handover`, `upcall::activation`, `upcall::monitor::unannounced`,
//! `upcall::stand_in`, `Shared::hand_lent`, `Processor::stop`), with
//! flags and return values for what the runtime does after a transition
//! (starting a spare, handing a thread back). It changes nothing in the
//! protocol it checks.
//!
//! Where loom falls short, the models use:
//! - a SeqCst fence for `heavy_fence` and `light_fence`
//!   (`ferry_queue::wait`);
//! - a SeqCst fence ([`total_order`]) between the SeqCst store and the
//!   SeqCst load of each side of the standby handshake. Loom treats SeqCst
//!   loads and stores as AcqRel (its README, "Unsupported features"), with
//!   no single total order over them, and the handshake relies on that
//!   order. So the standby models check the handshake's steps and cases,
//!   not its orderings;
//! - a swap where the code clears the stamp a driver no longer needs (the
//!   code swaps too): loom can let a plain store fall between the read and
//!   the write of another thread's compare-exchange of the same word,
//!   which the memory model forbids (loom issue 254), and model 5 then
//!   fails on an execution no machine can produce;
//! - a preemption bound of 4 for model 5 (its three threads take 8 s so
//!   bounded; unbounded, more than 5 minutes).

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, fence};

/// The atomics `per_processor` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

#[path = "../src/upcall/per_processor.rs"]
#[allow(dead_code)]
mod per_processor;

use per_processor::{
    FLAGS, LENT, NO_CPU, ON_WAY, PROBED_BY_MONITOR, PROBED_BY_STAND_IN, PROBING, PerProcessor,
    Reclaim, UNANNOUNCED,
};

/// The driver's activation word (activations are aligned beyond the flags).
const A: usize = 64;
/// Spares' and stand-ins' activation words.
const B: usize = 128;
const C: usize = 192;
const S: usize = 256;

/// When a lend happened (`lent_at`), for its taker to read back: the
/// round of the lend in model 1, this in the others.
const LENT_AT: u64 = 7;

/// Runs `f` under loom, over every interleaving (no preemption bound,
/// whatever `LOOM_MAX_PREEMPTIONS` says: the models are small enough).
fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = None;
    model.check(f);
}

/// `heavy_fence` / `light_fence`, and the total order of the standby
/// handshake's SeqCst accesses (see the module docs).
fn total_order() {
    fence(SeqCst);
}

/// The thread running on the model's processor, in its owner part.
const RUNNING: usize = 1;

/// A processor driven by `A`: its words, and its owner part (the slot of
/// the thread running on it, which only its driver touches; loom reports
/// two accesses that the driver word does not order).
struct Processor {
    words: PerProcessor,
    running: UnsafeCell<usize>,
}

impl Processor {
    /// A processor driven by `A`, running a thread.
    fn driven_by_a() -> Arc<Processor> {
        let p = Processor {
            words: PerProcessor::new(),
            running: UnsafeCell::new(RUNNING),
        };
        assert!(p.words.start(A));
        Arc::new(p)
    }

    /// The word now.
    fn driver(&self) -> usize {
        self.words.driver.load(Acquire)
    }

    /// A taker `me` comes for a lend (`Activation::take`): if it takes the
    /// processor, the lent thread is blocked (`deliver_blocked` takes it
    /// out of the owner part). When the lend it took happened, if it took
    /// one.
    fn take(&self, me: usize) -> Option<u64> {
        let d = self.words.take_lent(me)?;
        assert_eq!(d & !(LENT | UNANNOUNCED), A, "only A lends here");
        let at = self.words.lent_at.load(Relaxed);
        // SAFETY: a loom cell: loom fails the model if another access to it
        // is not ordered with this one.
        let t = self
            .running
            .with_mut(|r| unsafe { std::mem::replace(&mut *r, 0) });
        assert_eq!(t, RUNNING, "the taker finds the lent thread");
        Some(at)
    }

    /// [`take`](Processor::take) of a lend made at [`LENT_AT`]: whether it
    /// took it.
    fn take_the_lend(&self, me: usize) -> bool {
        self.take(me)
            .inspect(|&at| assert_eq!(at, LENT_AT, "a stale lend"))
            .is_some()
    }

    /// The driver runs runtime code on its processor: it touches the
    /// owner part, whose thread is still its own.
    fn drive(&self) {
        // SAFETY: a loom cell: loom fails the model if another access to it
        // is not ordered with this one.
        let t = self.running.with_mut(|r| unsafe { *r });
        assert_eq!(t, RUNNING, "the driver's thread was taken from under it");
    }

    /// Driver `A` enters a blocking call (`handover::lend`, without the
    /// handoff) at time `at`.
    fn lend(&self, at: u64) {
        self.drive();
        self.words.lend(A, at, NO_CPU, false);
    }

    /// Driver `A` back from its call (`critical_enter`'s check, then
    /// `reclaim_or_give_back`): unless it lost the processor, its thread
    /// runs on.
    fn back_from_call(&self) -> Reclaim {
        let r = self.words.reclaim(A, self.driver());
        if !matches!(r, Reclaim::Lost(_)) {
            self.drive();
        }
        r
    }
}

/// Model 1: the driver lends and reclaims, `rounds` times, while `takers`
/// spares each try to take a lend. At most one takes one, and exactly one
/// drives at the end: the word is its; the driver's reclaim reports `Lost`
/// with the taker's word in the round whose lend the taker took (it reads
/// that lend's time), and `Reclaimed` in every round before; the owner
/// part is never touched by two at once.
fn lend_reclaim_against(takers: &'static [usize], rounds: u64) {
    check(move || {
        let p = Processor::driven_by_a();
        let spares: Vec<_> = takers
            .iter()
            .map(|&me| {
                let p = Arc::clone(&p);
                loom::thread::spawn(move || p.take(me).map(|at| (me, at)))
            })
            .collect();
        let mut lost = None;
        for round in 1..=rounds {
            p.lend(round);
            match p.back_from_call() {
                Reclaim::Reclaimed => {}
                Reclaim::Lost(now) => {
                    lost = Some((now, round));
                    break;
                }
                Reclaim::Held => panic!("a lend found unlent"),
            }
        }
        let won: Vec<(usize, u64)> = spares
            .into_iter()
            .filter_map(|s| s.join().unwrap())
            .collect();
        match (won.as_slice(), lost) {
            ([], None) => assert_eq!(p.driver(), A),
            (&[won], Some(lost)) => {
                assert_eq!(won, lost, "the driver learns who took which lend");
                assert_eq!(p.driver(), won.0);
            }
            other => panic!("two drivers, or none: {other:?}"),
        }
    });
}

#[test]
fn a_lend_is_reclaimed_or_taken_never_both() {
    lend_reclaim_against(&[B], 2);
}

#[test]
fn two_takers_and_the_lender_leave_one_driver() {
    lend_reclaim_against(&[B, C], 1);
}

/// The standby holder `me` looks for a lend (`Activation::take` of a
/// stand-in or a woken spare): off standby first, then the driver word.
fn holder_takes(p: &Processor, me: usize) -> bool {
    p.words.lower_standby(me);
    total_order();
    p.take_the_lend(me)
}

/// `Shared::hand_lent` with a spare to start: if nobody is on standby, a
/// spare `me` is named (`name_standby`), started, and takes the lend.
/// Whether that spare took it.
fn hand_lent(p: &Processor, me: usize) -> bool {
    if !p.words.raise_standby(ON_WAY) {
        return false;
    }
    p.words.name_standby(me);
    holder_takes(p, me)
}

/// The lender of a lend that wants a taker at once (`handover::lend` with
/// `hand_now`): lends, then hands it unless someone is on standby.
fn lend_and_hand(p: &Processor, spare: usize) -> bool {
    p.lend(LENT_AT);
    total_order();
    hand_lent(p, spare)
}

/// Model 2: `standby` is up (`raised`) when the driver lends with a
/// handoff at once; meanwhile another thread (`other`) lowers it and looks
/// for the lend, taking it as `taker`. Either that thread sees the lend and
/// its taker takes it, or the lender sees `standby` down and hands the lend
/// to spare `C`. The lend is taken, once.
fn lend_while_standby_goes_down(raised: usize, other: fn(&Processor) -> bool, taker: usize) {
    check(move || {
        let p = Processor::driven_by_a();
        assert!(p.words.raise_standby(raised));
        let other = {
            let p = Arc::clone(&p);
            loom::thread::spawn(move || other(&p))
        };
        let by_lender = lend_and_hand(&p, C);
        let by_other = other.join().unwrap();
        assert!(by_lender ^ by_other, "taken twice, or left lent");
        assert_eq!(p.driver(), if by_other { taker } else { C });
    });
}

/// Stand-in `S` holds `standby` and leaves (`Activation::take`).
#[test]
fn a_lend_finds_the_standby_holder_or_a_spare() {
    lend_while_standby_goes_down(S, |p| holder_takes(p, S), S);
}

/// `drop_standby`'s two steps, with the model's total order between them
/// (loom cannot see it in the SeqCst store and load; see the module docs).
fn drop_standby(p: &Processor) -> bool {
    p.words.standby.store(0, SeqCst);
    total_order();
    p.words.is_lent()
}

/// A hander that started nobody (`stand_in::provide` when no spare could
/// be handed) raised `standby`, so a lend meanwhile woke nobody: it lowers
/// the word and then looks, and hands a lend it finds to spare `B`.
#[test]
fn a_hander_that_started_nobody_hands_on_a_lend_that_counted_on_it() {
    lend_while_standby_goes_down(ON_WAY, |p| drop_standby(p) && hand_lent(p, B), B);
}

/// The monitor's `take_unannounced` on `A`, found asleep: marks `A`
/// away, probes the word, then (after its heavy fence) looks at `A`'s
/// critical count: above zero, it puts the word back and the mark off; at
/// zero, it confirms the lend. Whether it did.
fn take_unannounced(p: &Processor, critical: &AtomicU32, away: &AtomicBool) -> bool {
    p.words.lent_at.store(LENT_AT, Relaxed);
    away.store(true, SeqCst);
    if let Err(now) = p.words.probe(A, PROBED_BY_MONITOR) {
        if now & !FLAGS != A {
            away.store(false, SeqCst);
        }
        return false;
    }
    total_order();
    if critical.load(Acquire) != 0 {
        if p.words.unprobe(A, PROBED_BY_MONITOR) {
            away.store(false, SeqCst);
        }
        return false;
    }
    p.words.confirm_unannounced(A, PROBED_BY_MONITOR)
}

/// Driver `A`, running its thread's own code (count zero), enters the
/// runtime `times` times (`critical_enter`: raise the count, light fence,
/// load the word; a word not its own is reclaimed or lost), runs runtime
/// code there, and leaves (`critical_exit`). Inside, it never finds its
/// processor lent. `Lost` ends it (its thread is handed back). With
/// `blocked_at`, it reads the stamp as `reclaim_or_give_back` does: a
/// driver that takes its word back clears it, one that lost its processor
/// takes it (where its thread's turn ends). The last reclaim, and the
/// stamp taken if the processor was lost.
fn enter_runtime(
    p: &Processor,
    critical: &AtomicU32,
    blocked_at: Option<&AtomicU64>,
    times: usize,
) -> (Reclaim, u64) {
    let mut last = Reclaim::Held;
    for _ in 0..times {
        critical.store(1, Relaxed);
        total_order();
        let d = p.driver();
        if d != A {
            last = p.words.reclaim(A, d);
            match (last, blocked_at) {
                (Reclaim::Lost(_), _) => {
                    let at = blocked_at.map_or(0, |b| b.swap(0, Acquire));
                    critical.store(0, Release);
                    return (last, at);
                }
                // A swap, as in the code (see `handover::reclaim_or_give_back`
                // on why not a store).
                (Reclaim::Reclaimed, Some(b)) => {
                    let _ = b.swap(0, Relaxed);
                }
                _ => {}
            }
        }
        p.drive();
        let d = p.driver();
        assert!(
            d & !PROBING == A,
            "A inside the runtime finds its word at {d:#x}"
        );
        critical.store(0, Release);
    }
    (last, 0)
}

/// Model 3: the monitor probes `A` (and, if it confirms the lend, keeps
/// the processor itself as `B`) while `A` enters the runtime twice, and
/// once more afterwards. A confirmed lend is never one whose driver is
/// inside; the driver finds a taken processor lost, and an untaken one its
/// own.
#[test]
fn the_monitor_never_lends_a_processor_whose_driver_is_inside() {
    check(|| {
        let p = Processor::driven_by_a();
        let critical = Arc::new(AtomicU32::new(0));
        let monitor = {
            let (p, critical) = (Arc::clone(&p), Arc::clone(&critical));
            loom::thread::spawn(move || {
                let away = AtomicBool::new(false);
                let confirmed = take_unannounced(&p, &critical, &away);
                let took = confirmed && p.take_the_lend(B);
                (confirmed, took)
            })
        };
        let (mut r, _) = enter_runtime(&p, &critical, None, 2);
        let (confirmed, took) = monitor.join().unwrap();
        if !matches!(r, Reclaim::Lost(_)) {
            (r, _) = enter_runtime(&p, &critical, None, 1);
        }
        assert!(confirmed || !took, "taken without a confirmed lend");
        if took {
            assert_eq!(r, Reclaim::Lost(B));
            assert_eq!(p.driver(), B);
        } else {
            assert!(!matches!(r, Reclaim::Lost(_)), "lost to nobody: {r:?}");
            assert_eq!(p.driver(), A);
        }
    });
}

/// Model 4: driver `A` stops its processor (`Processor::stop`, inside the
/// runtime: its count is one) while the monitor, which found it asleep a
/// moment ago, probes it; the stop is then called off (`restore`) or not.
/// The monitor confirms no lend, the word ends `0` or `A`, and the monitor's
/// mark on `A`'s `away` flag is undone (by the driver if its `release`
/// found the probe, else by the monitor).
#[test]
fn a_stop_during_a_probe_leaves_no_lend_and_no_away_mark() {
    for called_off in [false, true] {
        check(move || {
            let p = Processor::driven_by_a();
            let critical = Arc::new(AtomicU32::new(1));
            let away = Arc::new(AtomicBool::new(false));
            let monitor = {
                let (p, critical, away) =
                    (Arc::clone(&p), Arc::clone(&critical), Arc::clone(&away));
                loom::thread::spawn(move || take_unannounced(&p, &critical, &away))
            };
            let me = p.words.release();
            assert_eq!(me & !PROBING, A, "stopping a processor A does not drive");
            if me & PROBING != 0 {
                away.store(false, Relaxed);
            }
            if called_off {
                p.words.restore(A);
            }
            assert!(
                !monitor.join().unwrap(),
                "a lend confirmed while A was inside"
            );
            assert_eq!(p.driver(), if called_off { A } else { 0 });
            assert!(!away.load(Relaxed), "A left marked away");
        });
    }
}

/// `take_unannounced` of prober `by` with its stamp: after the probe, the
/// fence and the look at the count, it stamps `blocked_at` with `at`, only
/// from `0` (another prober's stamp is left, and its own probe put back),
/// then confirms; a failed confirmation clears its own stamp.
fn take_unannounced_stamped(
    p: &Processor,
    critical: &AtomicU32,
    blocked_at: &AtomicU64,
    by: usize,
    at: u64,
) -> bool {
    p.words.lent_at.store(LENT_AT, Relaxed);
    if p.words.probe(A, by).is_err() {
        return false;
    }
    total_order();
    if critical.load(Acquire) != 0 {
        p.words.unprobe(A, by);
        return false;
    }
    if blocked_at
        .compare_exchange(0, at, Relaxed, Relaxed)
        .is_err()
    {
        p.words.unprobe(A, by);
        return false;
    }
    let confirmed = p.words.confirm_unannounced(A, by);
    if !confirmed {
        let _ = blocked_at.compare_exchange(at, 0, Relaxed, Relaxed);
    }
    confirmed
}

/// Model 5: the monitor and the stand-in each find `A` asleep and try to
/// lend its processor and take it (as `B` and `C`), while `A` enters the
/// runtime twice (asleep before, between and after), and once more
/// afterwards. A probe may be stale by the time it stamps or confirms (`A`
/// took its word back and the other prober probed it anew). Whoever takes
/// the processor, `A` finds it lost with a stamp to end its thread's turn
/// at; if nobody takes it, no stamp is left behind.
#[test]
fn a_processor_taken_from_a_sleeping_driver_leaves_it_a_stamp() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(4);
    model.check(|| {
        let p = Processor::driven_by_a();
        let critical = Arc::new(AtomicU32::new(0));
        let blocked_at = Arc::new(AtomicU64::new(0));
        let prober = |by: usize, me: usize, at: u64| {
            let (p, critical, blocked_at) = (
                Arc::clone(&p),
                Arc::clone(&critical),
                Arc::clone(&blocked_at),
            );
            loom::thread::spawn(move || {
                take_unannounced_stamped(&p, &critical, &blocked_at, by, at) && p.take_the_lend(me)
            })
        };
        let monitor = prober(PROBED_BY_MONITOR, B, 1);
        let stand_in = prober(PROBED_BY_STAND_IN, C, 2);
        let (mut r, mut at) = enter_runtime(&p, &critical, Some(&blocked_at), 2);
        let (by_b, by_c) = (monitor.join().unwrap(), stand_in.join().unwrap());
        assert!(!(by_b && by_c), "two takers");
        if !matches!(r, Reclaim::Lost(_)) {
            (r, at) = enter_runtime(&p, &critical, Some(&blocked_at), 1);
        }
        if by_b || by_c {
            assert!(matches!(r, Reclaim::Lost(_)), "taken, yet {r:?}");
            assert_ne!(at, 0, "the processor was taken and no stamp says when");
        } else {
            assert!(!matches!(r, Reclaim::Lost(_)), "lost to nobody: {r:?}");
            assert_eq!(blocked_at.load(Relaxed), 0, "a stamp left behind");
        }
    });
}
