//! Stand-ins: for each busy processor pinned to a core, one activation
//! that waits *runnable* on that core, yielding it whenever the kernel
//! picks it, so that the kernel itself runs it the moment the core has
//! nothing else to run. While the processor is busy, that moment is when
//! its driver went to sleep in the kernel: the stand-in is there already,
//! on the right core, and takes the processor over without anyone waking
//! anybody.
//!
//! This room owns the stand-in's loop and the `Processor::stand_in` word. It
//! must not run a ferry thread while standing in, nor take a processor
//! except through the driver-word protocol of `activation` (a lend, or the
//! monitor's unannounced handshake, `monitor::take_unannounced`).
//!
//! # Why
//!
//! Without it, a lend wakes a pooled spare (`FUTEX_WAKE`, 2-3 µs on the
//! lender's way into its call) that the kernel runs once the lender
//! sleeps, and an unannounced block waits for the monitor's next look (a
//! timed sleep that an idle virtual CPU ends 50-150 µs late). A stand-in
//! needs neither: the kernel switches from the sleeping driver straight to
//! it, as the paper's kernel makes a fresh activation on the processor
//! whose thread blocked (004 §3.1).
//!
//! # The class
//!
//! `SCHED_BATCH`: a fair-share class that never preempts the thread
//! running on its core when it wakes, so the kernel picks the stand-in
//! about once a scheduler slice of a busy core (about 700 times a second
//! here), each pick costing one `sched_yield` round trip. The stand-in
//! yields the core whenever it has nothing to take, and a yield that comes
//! back at once means the core has nothing else to run.
//!
//! Not `SCHED_IDLE`, although that class would run it only on an idle
//! core: a process dies only once each of its kernel threads has run its
//! own exit, and the kernel gives an idle-class thread a tiny share of a
//! core other processes keep busy. A process whose stand-ins waited in it
//! took from a second to a minute to die beside a busy parent (a forked
//! ferry child's `_exit`, reaped by a parent whose processors computed:
//! `tests/c/fork_child.c` in `ferry-capi`), and the parent's `wait`, spun
//! in the kernel meanwhile on the dying thread's `/proc` entries, kept a
//! core busy for it. Every waiter on such a death (a `wait`, a peer's
//! pidfd) waited as long. In `SCHED_BATCH` the same program takes a
//! fraction of a second, and the stand-in's takeovers are as quick
//! (`ferry-bench upcalls`). (Those `/proc` entries were the stat files
//! the activations keep open; they now live outside the tree a reaping
//! parent walks, see `sys::open_own_stat`.)
//!
//! # The loop
//!
//! At each pass the stand-in reads the driver word (`activation`'s table):
//!
//! | word | what the stand-in does |
//! |------|------------------------|
//! | `0` | leaves: nobody drives the processor (stopped) |
//! | `A\|LENT` with `UNANNOUNCED`, or asked to be handed at once (`Processor::lent_hand_now`), or lent for the handoff wait, or stopping | takes it (through `Activation::take`, as a when-idle spare would) |
//! | `A\|LENT`, none of the above | sleeps until the handoff wait is over |
//! | `A`, the processor parked (`is_willing_to_yield`) | sleeps until the monitor or shutdown wakes it (`ASLEEP`) |
//! | `A`, running a thread, and a `sched_yield` came back at once | asks the kernel whether `A` sleeps; if it does, watches for [`BLOCKED_AFTER`] that `A`'s CPU clock stays still, then lends the processor for `A` (`take_unannounced`) and takes it |
//! | anything else | yields the core; after [`QUIET_PASSES`] passes in a row on an idle core with nothing to take, naps ([`quiet_nap`]: a tick, doubling up to [`LONGEST_NAP`] while the passes stay quiet) |
//!
//! # The stand-in word (`Processor::stand_in`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | start; a stand-in leaving (before it goes through `take`); a provided spare that is not needed after all; the monitor when no spare could be handed | nobody stands in |
//! | `COMING` | the monitor, before it hands a pooled spare the role (CAS from `0`), then raising `standby` for it | a stand-in is on its way: nobody else attaches, the monitor provides no other, and a lend wakes nobody |
//! | `S` | an activation attaching (CAS from `0`, or from `COMING` if it was provided); the stand-in waking; the monitor waking it (CAS from `S\|ASLEEP`) | `S` waits on the processor's core |
//! | `S\|ASLEEP` | the stand-in, before it sleeps while its processor is parked | `S` sleeps on its `wake` word: the monitor wakes it once the processor is busy again (or leaves the set), shutdown wakes it |
//!
//! While `S` stands in, it holds the processor's `standby` word (its own
//! word there: it is the taker "on its way" of `activation`'s handoff
//! protocol, for good), so a lend wakes nobody. It raises the word only if
//! it was down (else a spare is on its way and the would-be stand-in goes
//! to the pool); for a provided stand-in the monitor raised it and `hand`
//! put `S`'s word in. Only the holder lowers the word, so `S` holds it
//! until it leaves through `Activation::take`, which lowers it and then
//! looks for a lend: either the stand-in sees the lend, or the lender sees
//! the word down and wakes a spare.
//!
//! Stand-ins come from the monitor (each look gives a busy pinned
//! processor without one a pooled spare, [`provide`]), and from the
//! kernel thread whose processor was taken while it slept: when its call
//! returns, it is on that processor's core, and stands in for it.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::time::{Duration, Instant};

use super::Words;
use super::activation::{Activation, Assignment, FLAGS, LENT, ON_WAY, UNANNOUNCED};
use super::monitor::{BLOCKED_AFTER, LONGEST_NAP, TICK, take_unannounced};
use super::per_processor::PROBED_BY_STAND_IN;
use super::{StandInBy, Takeover};
use crate::processor::{ACTIVE, Processor};
use crate::sys::{self, SchedClass, TaskState};
use crate::upcall::Shared;

/// `Processor::stand_in` flag: the stand-in sleeps (its processor parked).
pub(crate) const ASLEEP: usize = 1;

/// `Processor::stand_in` value: the monitor handed a spare the processor's
/// stand-in role and it has not arrived yet.
const COMING: usize = 2;

/// Passes in a row with an idle core and nothing to take (the driver
/// sleeps inside the runtime, or briefly) after which the stand-in sleeps
/// a tick instead of spinning on the idle core.
const QUIET_PASSES: u32 = 64;

/// A `sched_yield` that took longer than this ran someone else meanwhile.
const YIELD_RAN_OTHERS: Duration = Duration::from_micros(5);

/// The class stand-ins wait in (see the module docs).
pub(crate) const CLASS: SchedClass = SchedClass::Batch;

/// Runs the calling activation `a` as processor `p`'s stand-in until it
/// leaves: `true` if it held `p`'s `standby` word (the caller then goes
/// through `Take(p, true)`, which lowers the word and takes a lend it
/// finds), `false` if it never did (`p` needs no stand-in or has one; the
/// caller goes to the pool).
///
/// `provided`: the monitor handed `a` the role ([`provide`]); `p`'s
/// `stand_in` word is `COMING` and its `standby` word holds `a`'s already.
pub(crate) fn stand_in(
    a: &Activation,
    shared: &Arc<Shared>,
    p: &'static Processor,
    by: StandInBy,
) -> bool {
    if by == StandInBy::Monitor {
        // The monitor put us on standby (`standby` holds our word).
        if !wants_one(shared, p) {
            p.upcall().stand_in.store(0, SeqCst);
            return true;
        }
        p.upcall().stand_in.store(a.word(), SeqCst);
    } else {
        if !wants_one(shared, p)
            || p.upcall()
                .stand_in
                .compare_exchange(0, a.word(), SeqCst, Relaxed)
                .is_err()
        {
            return false;
        }
        if !p.upcall().raise_standby(a.word()) {
            // A taker is on its way: it will take the next lend; we are
            // not needed (and the word is its to lower).
            p.upcall().stand_in.store(0, SeqCst);
            return false;
        }
    }
    crate::probe_mark!(crate::probe::STAND_IN_BEGINS);
    stand_by(a, shared, p);
    p.upcall().stand_in.store(0, SeqCst);
    true
}

/// Whether `p` should have a stand-in: stand-ins are on, `p` is in the set
/// and pinned to a core.
fn wants_one(shared: &Shared, p: &Processor) -> bool {
    shared.stand_ins
        && !shared.is_shut_down()
        && p.membership.load(Acquire) == ACTIVE
        && p.core(shared).is_some()
}

/// The loop of the module docs; returns when the stand-in should leave
/// (through `take`).
fn stand_by(a: &Activation, shared: &Shared, p: &'static Processor) {
    let mut quiet = 0u32;
    // Quiet naps in a row (see `quiet_nap`).
    let mut naps = 0u32;
    loop {
        if !wants_one(shared, p) {
            return;
        }
        a.pin_to(p.core(shared));
        // Only the holder lowers the word: ours until we leave.
        debug_assert_eq!(p.upcall().standby.load(Relaxed), a.word());
        let d = p.upcall().driver.load(SeqCst);
        if d == 0 {
            return;
        }
        if d & LENT != 0 {
            if d & UNANNOUNCED != 0 || p.upcall().lent_hand_now.load(Relaxed) || p.is_stopping() {
                return;
            }
            let due = shared.instant_of(p.upcall().lent_at.load(Relaxed))
                + shared.handoff_after.max(TICK);
            match due.checked_duration_since(Instant::now()) {
                Some(wait) if !wait.is_zero() => {
                    crate::probe_mark!(crate::probe::STAND_IN_HANDOFF_WAIT);
                    std::thread::sleep(wait);
                    crate::probe_mark!(crate::probe::STAND_IN_SLEPT);
                }
                _ => return,
            }
            continue;
        }
        // A stand-in moved back goes back (not before a lend: moved back, it is
        // to take that lend in the normal class).
        a.set_class(CLASS);
        if p.is_willing_to_yield() {
            crate::probe_mark!(crate::probe::STAND_IN_PARKED_SLEEP);
            sleep_while_parked(a, shared, p);
            quiet = 0;
            naps = 0;
            continue;
        }
        let yielded = Instant::now();
        sys::yield_core();
        crate::probe_mark!(crate::probe::STAND_IN_YIELDED);
        if yielded.elapsed() >= YIELD_RAN_OTHERS {
            // The driver (or another thread) had the core meanwhile.
            quiet = 0;
            naps = 0;
            continue;
        }
        // The core has nothing else to run.
        if d & FLAGS == 0
            && shared.take_over_unannounced
            && p.dispatch.load(Acquire) & 1 == 1
            // SAFETY: `d` is a driver word of this live runtime.
            && let Some(driver) = unsafe { Activation::from_word(d) }
            && asleep_for_good(driver, p, d)
        {
            // Into a driver's class before the takeover: it is one from
            // here on.
            a.set_class(SchedClass::Normal);
            if take_unannounced(p, driver, d, PROBED_BY_STAND_IN) {
                crate::probe_mark!(crate::probe::WATCHER_CLAIMED);
                return;
            }
        }
        quiet += 1;
        if quiet >= QUIET_PASSES {
            crate::probe_mark!(crate::probe::STAND_IN_QUIET_TICK);
            std::thread::sleep(quiet_nap(naps));
            crate::probe_mark!(crate::probe::STAND_IN_SLEPT);
            naps = naps.saturating_add(1);
            quiet = 0;
        }
    }
}

/// The sleep after the `naps`-th run of [`QUIET_PASSES`] quiet passes in a
/// row: [`TICK`], doubled each time, at most [`LONGEST_NAP`]. A stand-in
/// beside a busy processor whose core stays idle (its driver waits inside
/// the runtime) so wakes a few thousand times a second at most, not every
/// tick; what it delays is its own takeover of an unannounced block, by up
/// to a nap, which the monitor's looks bound as well.
fn quiet_nap(naps: u32) -> Duration {
    (TICK * (1 << naps.min(16))).min(LONGEST_NAP)
}

/// Whether `driver` (driver word `d` of `p`, running a thread) sleeps in
/// the kernel and stays asleep for [`BLOCKED_AFTER`]: the kernel says it
/// sleeps, then its CPU clock does not move for that long (the stand-in
/// yields meanwhile, so a driver that wakes gets its core at once), then
/// the kernel still says it sleeps, and `p` did not switch.
fn asleep_for_good(driver: &Activation, p: &Processor, d: usize) -> bool {
    if driver.task_state() != TaskState::Blocked {
        return false;
    }
    let tid = driver.tid.load(Relaxed) as i32;
    let Some(clock) = sys::thread_cpu_ns(tid) else {
        return false;
    };
    let dispatch = p.dispatch.load(Acquire);
    let start = Instant::now();
    while start.elapsed() < BLOCKED_AFTER {
        sys::yield_core();
        if p.upcall().driver.load(Relaxed) != d || p.dispatch.load(Relaxed) != dispatch {
            return false;
        }
    }
    sys::thread_cpu_ns(tid) == Some(clock) && driver.task_state() == TaskState::Blocked
}

/// Sleeps while `p` is parked, until the monitor (or shutdown, or `p`
/// leaving the set) wakes the stand-in: no timeout, so a parked processor's
/// stand-in costs nothing. Nothing is missed, because each waker changes
/// its word before it reads the stand-in word ([`wake`], `SeqCst`), and the
/// stand-in publishes `ASLEEP` and fences before it reads all three:
///
/// - a processor leaving `idle` clears `willing_to_yield` before it unparks
///   the monitor (`Host::woke`, fenced), whose looks then find the stand-in
///   asleep beside a busy processor (`provide`);
/// - shutdown marks the runtime shut down (`SeqCst`) before it wakes every
///   stand-in (`Shared::shut_down`);
/// - a processor leaving the set changes its membership before
///   `nudge_stopping` wakes its stand-in.
fn sleep_while_parked(a: &Activation, shared: &Shared, p: &Processor) {
    a.prepare_sleep();
    p.upcall().stand_in.store(a.word() | ASLEEP, SeqCst);
    std::sync::atomic::fence(SeqCst);
    if p.is_willing_to_yield() && !shared.is_shut_down() && p.membership.load(SeqCst) == ACTIVE {
        a.sleep(None);
    }
    // Back to plain `S`, unless a waker did it already.
    let _ = p
        .upcall()
        .stand_in
        .compare_exchange(a.word() | ASLEEP, a.word(), SeqCst, Relaxed);
}

/// Whether an activation stands in for `p` (not one on its way).
pub(crate) fn attached(p: &Processor) -> bool {
    let s = p.upcall().stand_in.load(Relaxed);
    s != 0 && s != COMING
}

/// Whether a stand-in stands by for `p`, awake (the monitor may look
/// less often: that stand-in notices its driver sleeping by itself).
pub(crate) fn standing_by(p: &Processor) -> bool {
    let s = p.upcall().stand_in.load(Relaxed);
    s != 0 && s != COMING && s & ASLEEP == 0
}

/// Wakes `p`'s stand-in if it sleeps (the monitor, once `p` is busy again
/// or leaves the set; shutdown).
pub(crate) fn wake(p: &Processor) {
    // Fenced: the waker's change (shutdown, membership) comes first; see
    // `sleep_while_parked`.
    std::sync::atomic::fence(SeqCst);
    let s = p.upcall().stand_in.load(Relaxed);
    if s & ASLEEP != 0
        && p.upcall()
            .stand_in
            .compare_exchange(s, s & !ASLEEP, SeqCst, Relaxed)
            .is_ok()
    {
        // SAFETY: `s` names an activation of this live runtime.
        if let Some(a) = unsafe { Activation::from_word(s & !ASLEEP) } {
            a.wake_up();
        }
    }
}

/// The monitor's part, at each look at processor `p`: wakes its sleeping
/// stand-in if `p` is busy again (or leaving the set), and gives a busy
/// pinned `p` without one a stand-in from the pool. Whether it handed one
/// out (the monitor hands at most one per look: making a kernel thread
/// takes a while).
pub(crate) fn provide(shared: &Arc<Shared>, p: &'static Processor) -> bool {
    let busy = !p.is_willing_to_yield();
    let s = p.upcall().stand_in.load(Relaxed);
    if s & ASLEEP != 0 {
        if busy || p.membership.load(Relaxed) != ACTIVE {
            wake(p);
        }
        return false;
    }
    if s != 0 || !busy || !wants_one(shared, p) || p.upcall().standby.load(Relaxed) != 0 {
        return false;
    }
    if p.upcall()
        .stand_in
        .compare_exchange(0, COMING, SeqCst, Relaxed)
        .is_err()
    {
        return false;
    }
    // The spare counts as on its way from now: a lend wakes nobody else
    // (`hand` names the spare in the word).
    if !p.upcall().raise_standby(ON_WAY) {
        p.upcall().stand_in.store(0, SeqCst);
        return false;
    }
    let handed = shared
        .activations
        .hand(shared, Assignment::StandIn(p, StandInBy::Monitor));
    if !handed {
        p.upcall().stand_in.store(0, SeqCst);
        // The word's protocol (`Activation::take`): down (nobody was
        // started, it is still ours), then look for a lend that counted on
        // it.
        if p.upcall().drop_standby() {
            shared.hand_lent(p, Takeover::WhenIdle);
        }
    }
    handed
}
