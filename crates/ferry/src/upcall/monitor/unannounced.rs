//! Taking over from a kernel thread found asleep without a lend: the
//! probe of its driver word, the heavy fence, the look at its critical
//! count, the stamp of when it was found asleep, and the confirmation
//! that makes its processor takeable (the handshake and the driver word's
//! table are in `activation`'s docs; loom: `tests/loom_driver.rs`,
//! models 3 to 5).
//!
//! This file owns the prober's side, shared by the monitor and a
//! stand-in; it must not choose who takes the processor (`claim`,
//! `hand_lent`) nor read the kernel thread's state (the caller did).

use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

use crate::processor::Processor;
use crate::upcall::activation::{Activation, FLAGS};
use crate::upcall::{Shared, Words};

/// Lends processor `p` on behalf of activation `a` (driver word `d`), which
/// sleeps in the kernel, if `a` is outside the runtime; whether it did (the
/// word is then `LENT|UNANNOUNCED`, for a taker). See `activation`'s docs
/// for the handshake.
///
/// `by` is the prober:
/// [`PROBED_BY_MONITOR`](crate::upcall::per_processor::PROBED_BY_MONITOR)
/// or the stand-in's flag. Only a plain word is probed: the monitor and a
/// stand-in may both find the same driver asleep, and the one that loaded
/// `A|PROBING` must not take the other's probe for its own.
pub(in crate::upcall) fn take_unannounced(
    p: &'static Processor,
    a: &Activation,
    d: usize,
    by: usize,
) -> bool {
    if d & FLAGS != 0 {
        return false;
    }
    p.upcall().lent_at.store(Shared::of(p).now_ns(), Relaxed);
    crate::probe_mark!(crate::probe::FOUND_ASLEEP);
    // Seen asleep: the spare need not wait for the core to go idle.
    p.upcall()
        .lent_cpu
        .store(crate::processor::NO_CORE, Relaxed);
    // Marked before the word moves: `a` clears it when it takes the word
    // back, which can only come after.
    a.away.store(true, SeqCst);
    if let Err(now) = p.upcall().probe(d, by) {
        // Unless `a` lent it meanwhile (and marked itself away), the mark
        // is ours to undo; `a` cannot lend it after another took it.
        if now & !FLAGS != a.word() {
            a.away.store(false, SeqCst);
        }
        return false;
    }
    ferry_queue::wait::heavy_fence();
    crate::probe_mark!(crate::probe::PROBE_FENCED);
    // Inside the runtime (or holding a spinlock): leave it be. Else stamp
    // where its thread's turn ends if a spare takes the processor, before
    // the confirming store publishes it, and only where no other prober's
    // stamp is: this probe may be stale (the fence above can take
    // milliseconds, in which `a` took its word back and another prober
    // probed it anew), and a stamp that is there is the other's: let it be
    // and look again at the next pass. Either way the word goes back if
    // the probe is still ours (it names its prober, so a stale one can
    // neither put back nor confirm the other's); if `a` took it back
    // meanwhile, that is fine too.
    let at = crate::sys::cycles();
    if a.critical.load(Acquire) != 0
        || a.blocked_at
            .compare_exchange(0, at, Relaxed, Relaxed)
            .is_err()
    {
        if p.upcall().unprobe(d, by) {
            a.away.store(false, SeqCst);
        }
        return false;
    }
    // Confirmed: only now may a spare take it.
    let confirmed = p.upcall().confirm_unannounced(d, by);
    if !confirmed {
        // `a` took it back: the turn goes on. (Unless a later prober
        // stamped it meanwhile.)
        let _ = a.blocked_at.compare_exchange(at, 0, Relaxed, Relaxed);
    }
    confirmed
}
