//! The activation protocols' part of a processor: which kernel thread drives
//! it (the driver word), who takes it when it is lent (the standby word), its
//! stand-in, when it was lent, and which dispatch the monitor asked to
//! preempt. [`PerProcessor`] owns these words and names their transitions;
//! `activation`, `monitor` and `stand_in` decide *when* to make them. The
//! runtime keeps one per processor (`Shared::words`); the processor itself
//! never reads them.
//!
//! This file must not reach anything but its atomics (`super::atomic`): the
//! loom models (`tests/loom_driver.rs`) compile it against loom's atomics to
//! check the handshakes below under every interleaving.
//!
//! # The driver word (`driver`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | the runtime at start; [`release`](PerProcessor::release) (a driver stopping the processor) | nobody drives it: not started, or removed |
//! | `A` | [`start`](PerProcessor::start) (CAS from `0`), [`take_lent`](PerProcessor::take_lent) (CAS from a lent value), [`reclaim`](PerProcessor::reclaim) (`A` itself, CAS from `A\|LENT` or `A\|PROBING`), [`unprobe`](PerProcessor::unprobe) (the monitor putting it back), [`restore`](PerProcessor::restore) (a stop called off) | activation `A` drives it; only `A`'s kernel thread touches the processor's owner part |
//! | `A\|LENT` | [`lend`](PerProcessor::lend): `A` entering an announced blocking call | `A` is off in a kernel call: `A` may reclaim it, a spare may take it |
//! | `A\|PROBING` | [`probe`](PerProcessor::probe): the monitor or the processor's stand-in, having found `A` asleep in the kernel; the flag names which ([`PROBED_BY_MONITOR`], [`PROBED_BY_STAND_IN`]), and only that prober confirms or puts back | being checked: nobody may take it; `A` still drives it and may take it back |
//! | `A\|LENT\|UNANNOUNCED` | [`confirm_unannounced`](PerProcessor::confirm_unannounced): the monitor, from `A\|PROBING`, having seen `A`'s count at zero | as `A\|LENT`; a spare that takes it marks `A` as having lost its processor |
//!
//! Whoever moves the word to its own activation (by CAS) owns the
//! processor's owner part from then on. The probe races with `A` entering
//! the runtime; an asymmetric Dekker handshake settles it (see
//! `activation`'s docs): `A` raises its critical count and then loads the
//! word; the monitor swaps the word, issues a heavy fence and then loads
//! the count.
//!
//! # The standby word (`standby`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | its holder ([`lower_standby`](PerProcessor::lower_standby), SeqCst, before it loads the driver word), or a handoff that started nobody ([`drop_standby`](PerProcessor::drop_standby)) | nobody will take a lend: the lender hands it to a spare |
//! | [`ON_WAY`] | a handoff ([`raise_standby`](PerProcessor::raise_standby) with `ON_WAY`) | a taker is being picked |
//! | `S` | the handoff naming the picked spare ([`name_standby`](PerProcessor::name_standby)); a stand-in or the watcher raising it for itself | `S` will look at the driver word after any lend: a lend wakes nobody else |
//!
//! The lender stores the driver word (SeqCst) and then loads `standby`; the
//! holder lowers `standby` (SeqCst) and then loads the driver word: either
//! the holder sees `LENT`, or the lender sees `0` and hands the lend to
//! another spare. A lent processor is never left without a taker.
//!
//! # Asking for a preemption (`preempt_dispatch`)
//!
//! The processor publishes `n << 1 | running` in its own dispatch word at
//! every switch (`Processor::dispatch`). The monitor reads it twice a slice
//! apart: the same odd value means one thread ran (or blocked) all along.
//! It then writes that value to `preempt_dispatch`
//! ([`ask_preempt`](PerProcessor::ask_preempt)), and the preemption
//! handler acts only if the processor's dispatch word still holds it
//! ([`slice_expired`](PerProcessor::slice_expired)), so that a late signal
//! does not preempt the next thread.

use super::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use super::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

/// Driver-word flag: the driver is off in a kernel call.
pub(crate) const LENT: usize = 1;
/// Driver-word flag: the monitor lent the processor on the driver's behalf.
pub(crate) const UNANNOUNCED: usize = 2;
/// Driver-word flag: the monitor is checking whether the driver is outside
/// the runtime; nobody may take the processor yet, the driver may take the
/// word back.
pub(crate) const PROBED_BY_MONITOR: usize = 4;
/// Driver-word flag: as [`PROBED_BY_MONITOR`], the processor's stand-in is
/// checking. The two probers of a processor each confirm or put back only
/// their own probe: a probe gone stale (the driver took its word back and
/// the other prober probed it anew) fails instead of acting on the other's.
pub(crate) const PROBED_BY_STAND_IN: usize = 8;
/// Either prober's flag: the word is being probed.
pub(crate) const PROBING: usize = PROBED_BY_MONITOR | PROBED_BY_STAND_IN;
/// All driver-word flags (an activation's word is aligned beyond them).
pub(crate) const FLAGS: usize = LENT | UNANNOUNCED | PROBING;

/// `standby` value: a handoff raised the word and is picking the taker,
/// whose own word replaces it before that taker runs (an activation's word
/// is never 1: activations are aligned).
pub(crate) const ON_WAY: usize = 1;

/// `lent_cpu` when the spare need not move.
pub(crate) const NO_CPU: usize = usize::MAX;

/// What [`PerProcessor::reclaim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// The word was ours all along (not lent, or only being probed and put
    /// back).
    Held,
    /// The word was lent (or probed) and is ours again: the call returned
    /// before anyone took the processor.
    Reclaimed,
    /// Someone else drives the processor now (this value), or nobody does
    /// (`0`): the calling thread must be handed back.
    Lost(usize),
}

/// The activation protocols' words of one processor; see the module docs.
pub(crate) struct PerProcessor {
    /// Which activation drives the processor; see the module docs.
    pub(crate) driver: AtomicUsize,
    /// The `dispatch` value a preemption was asked for (by the monitor).
    pub(crate) preempt_dispatch: AtomicU32,
    /// When the processor was lent (ns since the runtime's epoch).
    pub(crate) lent_at: AtomicU64,
    /// The CPU the lender ran on when it lent an unpinned processor (a
    /// spare moves there before it competes for the processor), or
    /// [`NO_CPU`]: the spare need not move.
    pub(crate) lent_cpu: AtomicUsize,
    /// Who takes this processor when it is lent; see the module docs.
    pub(crate) standby: AtomicUsize,
    /// Whether the current lend asked to be handed over at once (work
    /// waited and the runtime hands off at once), for a stand-in; written by
    /// the lender before its driver-word store publishes it.
    pub(crate) lent_hand_now: AtomicBool,
    /// The processor's stand-in: the word of the activation that waits on
    /// its core, `| stand_in::ASLEEP` while it sleeps; `0` if none. See
    /// `stand_in`, which alone writes it.
    pub(crate) stand_in: AtomicUsize,
    /// When the last change of membership was asked for (ns since epoch).
    pub(crate) changed_at: AtomicU64,
}

impl Default for PerProcessor {
    fn default() -> PerProcessor {
        PerProcessor::new()
    }
}

impl PerProcessor {
    /// The words of a processor nobody drives yet.
    pub(crate) fn new() -> PerProcessor {
        PerProcessor {
            driver: AtomicUsize::new(0),
            preempt_dispatch: AtomicU32::new(u32::MAX),
            lent_at: AtomicU64::new(0),
            lent_cpu: AtomicUsize::new(NO_CPU),
            standby: AtomicUsize::new(0),
            lent_hand_now: AtomicBool::new(false),
            stand_in: AtomicUsize::new(0),
            changed_at: AtomicU64::new(0),
        }
    }

    /// Whether the processor is lent (its driver is off in a kernel call,
    /// announced or not).
    #[inline]
    pub(crate) fn is_lent(&self) -> bool {
        self.driver.load(Acquire) & LENT != 0
    }

    /// Starter `me` takes a processor nobody drives: `0 -> me`.
    pub(crate) fn start(&self, me: usize) -> bool {
        self.driver
            .compare_exchange(0, me, Acquire, Acquire)
            .is_ok()
    }

    /// Driver `me` lends the processor for a kernel call: `me -> me|LENT`,
    /// after recording when (`at_ns`), where a spare should run (`cpu`) and
    /// whether the lend wants a taker at once (`hand_now`).
    ///
    /// SeqCst: pairs with a standby holder's [`lower_standby`] and driver
    /// load; one of the two sees the other.
    ///
    /// [`lower_standby`]: PerProcessor::lower_standby
    pub(crate) fn lend(&self, me: usize, at_ns: u64, cpu: usize, hand_now: bool) {
        self.lent_at.store(at_ns, Relaxed);
        self.lent_cpu.store(cpu, Relaxed);
        self.lent_hand_now.store(hand_now, Relaxed);
        self.driver.store(me | LENT, SeqCst);
    }

    /// Driver `me`, back from its call, takes the word back if it is still
    /// its own (lent or being probed).
    /// `d` is the word as the driver last loaded it.
    #[inline]
    pub(crate) fn reclaim(&self, me: usize, mut d: usize) -> Reclaim {
        while d & !FLAGS == me && d & FLAGS != 0 {
            match self.driver.compare_exchange(d, me, Acquire, Acquire) {
                Ok(_) => return Reclaim::Reclaimed,
                Err(now) => d = now,
            }
        }
        if d == me {
            Reclaim::Held
        } else {
            Reclaim::Lost(d)
        }
    }

    /// Taker `me` takes a lent processor, lowering `standby` first if it
    /// holds it: the previous driver word (with its flags), or `None` if the
    /// processor was reclaimed or stopped before it came.
    pub(crate) fn take_lent(&self, me: usize) -> Option<usize> {
        self.lower_standby(me);
        let mut d = self.driver.load(SeqCst);
        loop {
            if d & LENT == 0 {
                return None;
            }
            // AcqRel: the lender's driver, finding its word gone, reads what
            // the lend's confirmer wrote before it (the unannounced lend's
            // `blocked_at` stamp) through this taker, without relying on a
            // release sequence.
            match self.driver.compare_exchange(d, me, AcqRel, Acquire) {
                Ok(_) => return Some(d),
                Err(now) => d = now,
            }
        }
    }

    /// Driver `me` stops driving (the processor leaves the set): the word
    /// goes to `0`. Returns what it was: `me`, or `me|PROBING` if the
    /// monitor was probing (whose mark on the driver's `away` flag is then
    /// the driver's to undo).
    pub(crate) fn release(&self) -> usize {
        self.driver.swap(0, AcqRel)
    }

    /// Driver `me` keeps the processor after all (its stop was called off).
    pub(crate) fn restore(&self, me: usize) {
        self.driver.store(me, Release);
    }

    /// Prober `by` ([`PROBED_BY_MONITOR`] or [`PROBED_BY_STAND_IN`])
    /// starts checking driver word `d` (`A`), found asleep: `A -> A|by`.
    /// `Err` with the current word if it moved.
    pub(crate) fn probe(&self, d: usize, by: usize) -> Result<(), usize> {
        self.driver
            .compare_exchange(d, d | by, SeqCst, Relaxed)
            .map(drop)
    }

    /// Prober `by` saw the driver inside the runtime: puts `A|by` back to
    /// `A`; `false` if the driver took it back itself meanwhile (or the
    /// probe there is not `by`'s).
    pub(crate) fn unprobe(&self, d: usize, by: usize) -> bool {
        self.driver
            .compare_exchange(d | by, d, SeqCst, Relaxed)
            .is_ok()
    }

    /// Prober `by` saw the driver outside the runtime:
    /// `A|by -> A|LENT|UNANNOUNCED`, only now takeable. `false` if the
    /// driver took it back meanwhile (or the probe there is not `by`'s).
    pub(crate) fn confirm_unannounced(&self, d: usize, by: usize) -> bool {
        self.driver
            .compare_exchange(d | by, d | LENT | UNANNOUNCED, SeqCst, Relaxed)
            .is_ok()
    }

    /// Raises `standby` for `holder` (a handoff's [`ON_WAY`], or a taker's
    /// own word); `false` if someone holds it already.
    ///
    /// SeqCst on failure too: a lender that finds the word raised relies
    /// on that load being in the single order with the holder's lowering
    /// (a Relaxed failure could read a stale holder while the holder reads
    /// the driver word from before the lend). Free on x86-64.
    pub(crate) fn raise_standby(&self, holder: usize) -> bool {
        self.standby
            .compare_exchange(0, holder, SeqCst, SeqCst)
            .is_ok()
    }

    /// Names the spare a handoff picked (`ON_WAY -> me`), before the spare
    /// is woken or started.
    pub(crate) fn name_standby(&self, me: usize) {
        let _ = self.standby.compare_exchange(ON_WAY, me, SeqCst, Relaxed);
    }

    /// Holder `me` lowers `standby` (SeqCst, before it loads the driver
    /// word); a taker that does not hold it leaves it to its holder.
    pub(crate) fn lower_standby(&self, me: usize) {
        let _ = self.standby.compare_exchange(me, 0, SeqCst, Relaxed);
    }

    /// A handoff that raised `standby` started nobody: lowers it, and
    /// returns whether a lend counted on it meanwhile (the caller then
    /// hands that lend to another spare).
    pub(crate) fn drop_standby(&self) -> bool {
        self.standby.store(0, SeqCst);
        self.driver.load(SeqCst) & LENT != 0
    }

    /// The monitor asks to preempt the thread of dispatch `dispatch`.
    pub(crate) fn ask_preempt(&self, dispatch: u32) {
        self.preempt_dispatch.store(dispatch, Relaxed);
    }

    /// Whether the monitor asked to preempt the thread running now, whose
    /// dispatch (the processor's dispatch word) is `dispatch`.
    #[inline]
    pub(crate) fn slice_expired(&self, dispatch: u32) -> bool {
        dispatch & 1 != 0 && self.preempt_dispatch.load(Relaxed) == dispatch
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    const A: usize = 64;
    const B: usize = 128;

    #[test]
    fn a_lend_is_reclaimed_by_its_lender_only_while_nobody_took_it() {
        let w = PerProcessor::new();
        assert!(w.start(A));
        assert!(!w.start(B), "a driven processor cannot be started again");
        assert_eq!(w.reclaim(A, w.driver.load(Relaxed)), Reclaim::Held);
        w.lend(A, 7, NO_CPU, false);
        assert!(w.is_lent());
        assert_eq!(w.lent_at.load(Relaxed), 7);
        assert_eq!(w.reclaim(A, w.driver.load(Relaxed)), Reclaim::Reclaimed);
        assert_eq!(w.driver.load(Relaxed), A);
        w.lend(A, 8, NO_CPU, true);
        assert_eq!(w.take_lent(B), Some(A | LENT));
        assert_eq!(w.reclaim(A, w.driver.load(Relaxed)), Reclaim::Lost(B));
        assert_eq!(w.take_lent(A), None, "only a lent word can be taken");
    }

    #[test]
    fn a_probe_blocks_takers_until_confirmed_and_the_driver_may_take_it_back() {
        let w = PerProcessor::new();
        assert!(w.start(A));
        w.probe(A, PROBED_BY_MONITOR).unwrap();
        assert_eq!(w.take_lent(B), None, "a probed word is not takeable");
        // The driver inside the runtime reclaims it.
        assert_eq!(w.reclaim(A, w.driver.load(Relaxed)), Reclaim::Reclaimed);
        assert!(!w.unprobe(A, PROBED_BY_MONITOR) && !w.confirm_unannounced(A, PROBED_BY_MONITOR));
        // Probed anew by the stand-in: the monitor's stale probe can
        // neither confirm nor put back the stand-in's.
        w.probe(A, PROBED_BY_STAND_IN).unwrap();
        assert_eq!(w.probe(A, PROBED_BY_MONITOR), Err(A | PROBED_BY_STAND_IN));
        assert!(!w.confirm_unannounced(A, PROBED_BY_MONITOR));
        assert!(!w.unprobe(A, PROBED_BY_MONITOR));
        // The stand-in confirms: now a taker gets it, with the flag.
        assert!(w.confirm_unannounced(A, PROBED_BY_STAND_IN));
        assert_eq!(w.take_lent(B), Some(A | LENT | UNANNOUNCED));
        // Put back by the monitor when the driver is inside.
        let w = PerProcessor::new();
        assert!(w.start(A));
        w.probe(A, PROBED_BY_MONITOR).unwrap();
        assert!(w.unprobe(A, PROBED_BY_MONITOR));
        assert_eq!(w.driver.load(Relaxed), A);
    }

    #[test]
    fn standby_names_one_holder_and_only_the_holder_lowers_it() {
        let w = PerProcessor::new();
        assert!(w.raise_standby(ON_WAY));
        assert!(!w.raise_standby(B), "one taker on its way at a time");
        w.name_standby(A);
        assert_eq!(w.standby.load(Relaxed), A);
        w.lower_standby(B);
        assert_eq!(w.standby.load(Relaxed), A, "B does not hold it");
        w.lower_standby(A);
        assert_eq!(w.standby.load(Relaxed), 0);
        // A handoff that started nobody learns of a lend that counted on it.
        assert!(w.start(B));
        assert!(w.raise_standby(ON_WAY));
        w.lend(B, 0, NO_CPU, false);
        assert!(w.drop_standby());
    }

    #[test]
    fn a_stopped_driver_leaves_the_word_empty_or_restores_it() {
        let w = PerProcessor::new();
        assert!(w.start(A));
        assert_eq!(w.release(), A);
        assert!(w.start(B));
        w.probe(B, PROBED_BY_MONITOR).unwrap();
        assert_eq!(w.release(), B | PROBED_BY_MONITOR);
        w.restore(A);
        assert_eq!(w.driver.load(Relaxed), A);
    }

    #[test]
    fn a_preemption_is_asked_for_one_dispatch_only() {
        let w = PerProcessor::new();
        let third = (3 << 1) | 1;
        assert!(!w.slice_expired(third));
        w.ask_preempt(third);
        assert!(w.slice_expired(third));
        assert!(
            !w.slice_expired((4 << 1) | 1),
            "the next thread keeps its slice"
        );
        assert!(
            !w.slice_expired(4 << 1),
            "the scheduler loop is never preempted"
        );
    }
}
