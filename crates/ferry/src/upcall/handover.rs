//! A processor passing between activations: the driver lends it for a
//! kernel call and takes it back (or finds it gone and hands its thread
//! back), a spare takes it over or starts it, and each handover tells the
//! processor's policy the event it means (`Blocked`, `ProcessorAdded`,
//! and, through the runtime's upcall queue, an event source, `Unblocked`
//! and `ProcessorRemoved`).
//!
//! This file owns the order of those steps; the words themselves are
//! [`PerProcessor`](super::PerProcessor)'s, and which thread runs next is
//! the policy's. It never blocks.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

use super::Shared;
use super::Takeover;
use super::Words;
use super::{Activation, Event, Kind, Reclaim};
use crate::processor::{ACTIVE, NO_CORE, OwnerToken, Processor, STARTING};

/// The running thread of `p` is about to make a call that may block in the
/// kernel: lends `p` (driven by `act`, the calling kernel thread's
/// activation), and hands it to a spare at once if work waits for it and
/// the runtime hands off at once. The caller must not touch the processor
/// again until it got it back through `processor::enter`.
pub(crate) fn lend(p: &'static Processor, mut tok: OwnerToken<'_>, act: &Activation) {
    p.end_turn_for_lend(tok.rb());
    let shared = Shared::of(p);
    let hand_now = shared.handoff_after.is_zero() && p.sees_work(tok.rb(), shared);
    let cpu = if hand_now && p.core(shared).is_none() {
        crate::sys::current_cpu().unwrap_or(NO_CORE)
    } else {
        NO_CORE
    };
    act.away.store(true, Relaxed);
    crate::probe_mark!(crate::probe::LENT);
    #[cfg(ferry_probe)]
    match p.upcall().stand_in.load(Relaxed) {
        0 => {
            crate::probe_mark!(crate::probe::LEND_NO_STAND_IN);
        }
        2 => {
            crate::probe_mark!(crate::probe::LEND_STAND_IN_COMING);
        }
        s if s & 1 != 0 => {
            crate::probe_mark!(crate::probe::LEND_STAND_IN_ASLEEP);
        }
        _ => {}
    }
    p.upcall().lend(act.word(), shared.now_ns(), cpu, hand_now);
    if hand_now {
        // A spare still on its way (waiting for this core to go idle), or
        // the processor's stand-in, will take this lend too: wake nobody
        // else.
        shared.hand_lent(p, Takeover::WhenIdle);
    }
}

/// The driver's side of a lost race: `d`, the word it loaded, is not its
/// own. A lent word of its own is taken back; otherwise the processor is
/// gone and its thread is handed back (see
/// [`Activation::give_back_thread`]). Returns the processor the thread runs
/// on afterwards.
#[cold]
#[inline(never)]
pub(crate) fn reclaim_or_give_back(
    p: &'static Processor,
    act: &Activation,
    d: usize,
) -> &'static Processor {
    // `blocked_at` is read once the word says how this ended: a prober
    // that saw this driver's count still at zero may stamp and confirm
    // while it is here (it found `A|PROBING`), and the stamp comes before
    // the confirming store, which the taker's and then this driver's
    // compare-exchange read after it. A driver that takes its word back
    // clears the stamp (its turn goes on); no new one comes while it is in
    // the runtime (a prober backs off at a raised count).
    match p.upcall().reclaim(act.word(), d) {
        Reclaim::Held => p,
        Reclaim::Reclaimed => {
            // Back on its own processor: the turn went on all along. (A
            // swap rather than a store only so that the loom model of this
            // path, `loom_driver`'s model 5, runs the same operation: loom
            // can let a plain store fall between the read and the write of
            // another thread's compare-exchange, which the memory model
            // forbids — loom issue 254.)
            let _ = act.blocked_at.swap(0, Relaxed);
            act.away.store(false, Relaxed);
            Shared::of(p).counters.reclaimed.fetch_add(1, Relaxed);
            p
        }
        Reclaim::Lost(_) => act.give_back_thread(act.blocked_at.swap(0, Acquire)),
    }
}

/// A spare took lent processor `p`: the thread that was running on it is
/// blocked (its policy is told), and the spare's loop takes over.
pub(crate) fn deliver_blocked(p: &Processor, shared: &Shared) {
    // SAFETY: the caller just took `p`'s driver word (`take_lent`) and runs
    // at one level; nothing holds a reference into its owner part (its
    // blocked thread's kernel thread is away in the kernel, outside it).
    let mut tok = unsafe { OwnerToken::new() };
    if let Some(t) = p.take_blocked(tok.rb()) {
        p.policy_event(tok.rb(), Event::Blocked(&t));
        crate::probe_mark!(crate::probe::POLICY_GOT_BLOCKED);
        shared.counters.record(
            Kind::Blocked,
            shared.instant_of(p.upcall().lent_at.load(Relaxed)),
        );
        // The blocked thread's own kernel thread carries this reference on
        // and gives it back with `Unblocked` (`give_back_thread`).
        std::mem::forget(t);
    }
}

/// A spare started processor `p`: it joins the set.
pub(crate) fn deliver_added(p: &Processor, shared: &Shared) {
    p.membership
        .compare_exchange(STARTING, ACTIVE, AcqRel, Acquire)
        .ok();
    // SAFETY: the caller just took `p`'s driver word (`start`) and runs at
    // one level; nothing holds a reference into its owner part.
    let mut tok = unsafe { OwnerToken::new() };
    p.policy_event(tok.rb(), Event::ProcessorAdded(p.index));
    shared.counters.record(
        Kind::ProcessorAdded,
        shared.instant_of(p.upcall().changed_at.load(Relaxed)),
    );
}
