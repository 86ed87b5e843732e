//! The monitor: the watch one spare activation of the runtime keeps, looking
//! at every processor every [`TICK`] while any of them is busy, and parking
//! (with no timeout) while all sleep.
//!
//! It owns the decisions that need a clock: a lent processor whose call
//! outlasts the handoff wait goes to a spare; a processor whose thread has
//! run for [`BLOCKED_AFTER`] and whose kernel thread sleeps in the kernel is
//! taken over as if the call had been announced; a thread past its time
//! slice, or on a processor that is leaving, is sent the preemption signal;
//! an lost_processor kernel thread running again is pushed off its thread. It
//! must not touch a processor's owner part: it only moves driver words (by
//! the protocol in `activation`) and sends signals.
//!
//! # Who watches
//!
//! The watch is a role, not a kernel thread of its own: one activation of
//! the pool runs [`watch`] (assigned `Assignment::Watch`). When it finds a
//! processor to take over (a thread asleep in the kernel, or a lend that
//! outlasted the handoff wait), it takes the processor *itself*: it is
//! awake and on a core already, where a pooled spare would first have to
//! be woken, which costs a cross-core kernel wakeup (10-70 µs on a loaded
//! 2-core VM, most of an unannounced block's stall before). Once the
//! policy has its `Blocked`, it hands the watch to a pooled spare (or a new
//! one), put in the normal class so that it runs at once even on a busy
//! core (it unpins itself). That wakeup still comes before the taken
//! processor runs its next thread (4-16 µs of the stall): handed on any
//! later, nobody would watch while that thread runs. So the paper's fresh
//! activation for a blocked processor is the one that noticed.
//!
//! The watcher takes a processor only when someone can watch after it (a
//! spare in the pool, or room under the bound for a new one); else it
//! hands the processor to a spare as before (which, with the bound
//! reached, leaves it to its lender). Should no successor be found after
//! all (another handoff took the last spare, or the kernel refuses a
//! thread), the watch is left *vacant* and the next activation that would
//! enter the pool takes it instead. Both happen under the pool's lock, so
//! an activation on its way into the pool is either found there or finds
//! the watch vacant.
//!
//! | `Monitor::vacant` | written by | meaning |
//! |---|---|---|
//! | `false` | start; an activation about to enter the pool (`swap`, under the pool's lock) that then watches | an activation watches, or is on its way to |
//! | `true` | a watcher that took a processor and found no successor (under the pool's lock) | nobody watches; the next activation done driving watches |
//!
//! # Telling a block from a short sleep, at the first look
//!
//! A kernel thread asleep for a moment (a page fault served from the page
//! cache, a contended libc lock) should be left alone; one asleep for
//! [`BLOCKED_AFTER`] or more is taken over. The monitor tells them apart
//! by the driver's own CPU clock, read at the looks at a busy processor
//! (one `clock_gettime` of that kernel thread's clock; not at every look,
//! see below): the time between two looks that the clock did *not* advance is time the kernel thread
//! spent off its core, asleep or waiting for it. When that is
//! `BLOCKED_AFTER` or more, the monitor asks the kernel what the thread
//! is doing now (its `/proc` state), and takes a processor whose driver
//! sleeps. So a block is found at the first look at least
//! `BLOCKED_AFTER` after it began, whichever thread it is and however new
//! its dispatch; the clocks only decide *when* to ask, and whether the
//! thread sleeps is always the kernel's word, so a computing thread is
//! never taken. (The drivers pay nothing for this: an earlier design had
//! them stamp the cycle counter at every switch, 5 ns of every switch's
//! 40 on this VM.)
//!
//! How long a thread has had its processor (for its time slice) is
//! counted from the first look that saw its dispatch, so a slice is
//! enforced to within a look. Under the fine-grain policy the slice is
//! the running thread's own quantum, read from its processor's quantum
//! word after the dispatch word (`sched::fine_grain`), and the monitor
//! keeps to the tick (every quantum is shorter than [`SLICE_AT_TICK`]).
//!
//! Its cost while nothing blocks: per look, a wakeup from a timed sleep
//! (which dominates: about 25 µs of CPU per wakeup on a 2-core VM, so
//! about 30% of a core at one look a tick, because a 20 µs sleep lasts
//! about 50 µs there), a few atomic loads and one `clock_gettime` per busy
//! processor, and a `/proc` read when a driver was off its core for
//! `BLOCKED_AFTER` (asleep, or the kernel ran another process there).
//!
//! So it looks less often while looking finds nothing only it would
//! notice (a *quiet* look, as Go's sysmon backs off): every busy processor
//! has a stand-in standing by, which notices a lend or a sleeping driver
//! by itself, and nothing is lent, starting, stopping, preempted or asleep
//! in the kernel. After [`QUIET_LOOKS_PER_DOUBLING`] quiet looks in a row the sleep
//! doubles, up to [`LONGEST_NAP`]; any other look brings it back to
//! [`TICK`]. It naps on its park word (`park`), so a change of the set or a
//! shutdown (`unpark`) ends the nap at once; a sleeping processor that
//! wakes (`woke`) ends only the park of an all-idle runtime, not a nap (a
//! socket server's processors sleep and wake once per request, and each
//! wake would cost a futex wake and a look). What a long nap delays: the
//! takeover of a sleeping driver whose stand-in cannot run (other
//! processes keep its core busy), and the first look at a processor that
//! woke, by up to a nap. With a time slice
//! shorter than [`SLICE_AT_TICK`] the monitor keeps to the tick; a longer
//! one (the default 10 ms) does not stop it napping, and is enforced to
//! within a nap (at most [`LONGEST_NAP`]: 640 µs of the default 10 ms).
//!
//! It keeps off the cores the processors live on while a CPU without one
//! exists ([`keep_off_processors`]).
//!
//! It leaves a driver's CPU clock unread when the driver switched threads
//! since the last look and a stand-in stands by on its core. Reading the
//! clock of a thread running on another core makes the kernel bring that
//! thread's run time up to date from here, and with a second task queued
//! on that core (the stand-in) it then asks the core to
//! reschedule: one interprocessor interrupt and one pass through the
//! kernel's scheduler on the driver's core per read, which the driver
//! picks right up again. At a look every tick that took 12,000 interrupts
//! a second from a fork+join loop's core and 10-15% of its speed, and
//! 8,000-10,000 and as much from one long computing thread's under a time
//! slice. So with a stand-in standing by: a driver that switched threads
//! since the last look ran meanwhile, and a block since is for the
//! stand-in to find, so its clock is not read; one that did not (one
//! thread runs on, or the driver sleeps) is read once
//! [`COVERED_READ_EVERY`] has passed since its last read, or at once if
//! its thread's time slice is over or its processor is leaving (which
//! need the kernel's word that it runs; a leaving processor is read at
//! every look, switched or not). A sleeping driver whose stand-in other
//! processes keep off the core is so found up to that much (and two
//! looks) later than at the tick.

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};

use super::Takeover;
use super::Words;
use super::activation::{Activation, FLAGS, LENT};
use super::per_processor::PROBED_BY_MONITOR;
use super::preempt;
use crate::processor::{ACTIVE, Processor, STOPPING};
use crate::sys::{self, TaskState};
use crate::upcall::Shared;

mod park;
mod unannounced;

pub(crate) use park::Monitor;
pub(super) use unannounced::take_unannounced;

/// The kernel-thread name of the activation that keeps the watch, while
/// it does.
const WATCHER_NAME: &str = "ferry-monitor";

/// How often the monitor looks while processors are busy.
pub(crate) const TICK: Duration = Duration::from_micros(20);

/// How long a driver must have been off its core since the monitor's last
/// look before the monitor asks whether it sleeps in the kernel: shorter
/// sleeps are left to end by themselves. Half a tick: a block is then
/// found at the first look at least 10 µs after it began.
pub(crate) const BLOCKED_AFTER: Duration = Duration::from_micros(10);

/// Consecutive all-idle looks after which the monitor parks.
const IDLE_LOOKS_BEFORE_PARK: u32 = 25;

/// Consecutive quiet looks (see [`watch`]) after which the monitor's
/// sleep between looks doubles, up to [`LONGEST_NAP`].
const QUIET_LOOKS_PER_DOUBLING: u32 = 50;

/// The longest sleep between two looks while processors are busy.
pub(super) const LONGEST_NAP: Duration = Duration::from_micros(640);

/// Time slices shorter than this keep the monitor at [`TICK`]; longer
/// ones let it nap (see the module docs).
const SLICE_AT_TICK: Duration = Duration::from_micros(640 * 8);

/// How often the monitor reads the CPU clock of a driver that runs one
/// thread on while a stand-in stands by on its core (each read interrupts
/// that core; see the module docs): as often as its longest nap, so that
/// looking at the tick (a time slice, a busy runtime's first looks) costs
/// such a thread no more than napping does.
const COVERED_READ_EVERY: Duration = LONGEST_NAP;

/// What the monitor publishes while it watches: at most every
/// [`PUBLISH_EVERY`] while processors are busy, and once before it parks. Implemented above this room (the stats
/// page), installed in `Shared::publish` by the runtime at its start; only
/// the watcher calls it, holding the watch's state.
pub(crate) trait Publish: Send + Sync {
    /// Publishes what `shared` holds and does now. Must not block for long:
    /// the watch waits meanwhile.
    fn publish(&self, shared: &Shared);
}

/// How often the monitor publishes while it looks (see [`Publish`]).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The watch's memory: what it saw of each processor, and how long
/// everything has been idle.
struct WatchState {
    seen: Vec<Seen>,
    idle_looks: u32,
    /// Consecutive quiet looks (see [`watch`]).
    quiet_looks: u32,
    /// The CPUs the watcher keeps to: those no processor lives on (all if
    /// every one has a processor), as last pinned, and a buffer for the
    /// next count.
    cpus: Option<Vec<usize>>,
    cpus_now: Vec<usize>,
    /// When it last published (`None`: not yet).
    published: Option<Instant>,
}

/// What the monitor remembers of one processor between looks.
#[derive(Clone, Copy)]
struct Seen {
    /// The processor's `dispatch` word, and the look that first saw it.
    dispatch: u32,
    since: Instant,
    /// The driver's CPU clock at the last look, whose driver word (without
    /// flags) and time it was: `None` when that look read none.
    clock: Option<(usize, Instant, u64)>,
}

/// Keeps the watch on the calling activation's kernel thread until the
/// runtime shuts down (`None`) or it finds a lent processor to take over
/// itself (`Some`): the processor's word is then `LENT` and its `standby`
/// raised for the caller, which takes it as an urgent spare would and
/// hands the watch on (see the module docs).
pub(crate) fn watch(shared: &Arc<Shared>) -> Option<&'static Processor> {
    sys::set_thread_name(WATCHER_NAME);
    let monitor = &shared.monitor;
    let mut state = monitor.state.lock().unwrap_or_else(PoisonError::into_inner);
    let state = state.get_or_insert_with(|| WatchState {
        seen: vec![
            Seen {
                dispatch: u32::MAX,
                since: Instant::now(),
                clock: None,
            };
            shared.processors.len()
        ],
        idle_looks: 0,
        quiet_looks: 0,
        cpus: None,
        cpus_now: Vec::new(),
        published: None,
    });
    // A new watcher runs where it was woken (a spare's core): move first.
    state.cpus = None;
    while !shared.is_shut_down() {
        keep_off_processors(shared, state);
        if shared.all_idle() {
            state.idle_looks += 1;
            if state.idle_looks >= IDLE_LOOKS_BEFORE_PARK {
                if let Some(p) = shared.publish.get() {
                    p.publish(shared);
                    state.published = Some(Instant::now());
                }
                monitor.park(shared);
                state.idle_looks = 0;
                continue;
            }
        } else {
            state.idle_looks = 0;
        }
        let nap = nap_after(state.quiet_looks);
        if nap > TICK {
            monitor.nap(nap);
        } else {
            std::thread::sleep(TICK);
        }
        if let Some(p) = shared.publish.get() {
            let now = Instant::now();
            if state
                .published
                .is_none_or(|at| now.duration_since(at) >= PUBLISH_EVERY)
            {
                p.publish(shared);
                state.published = Some(now);
            }
        }
        let mut quiet = true;
        let found = look(shared, &mut state.seen, &mut quiet);
        state.quiet_looks = if quiet { state.quiet_looks + 1 } else { 0 };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The sleep before the next look after `quiet_looks` quiet looks in a
/// row: [`TICK`], doubled every [`QUIET_LOOKS_PER_DOUBLING`], at most
/// [`LONGEST_NAP`].
fn nap_after(quiet_looks: u32) -> Duration {
    let doublings = (quiet_looks / QUIET_LOOKS_PER_DOUBLING).min(16);
    (TICK * (1 << doublings)).min(LONGEST_NAP)
}

/// Pins the watcher to the CPUs no processor lives on, if there are any
/// (else to all), when that set changed: its looks then never take time
/// from a busy processor's core, nor stand between a driver that went to
/// sleep and the stand-in waiting there (a timed wakeup is placed on the
/// core it was armed on, so a watcher that ran once beside a processor
/// stayed there, with a free core idle).
fn keep_off_processors(shared: &Shared, state: &mut WatchState) {
    crate::processor::cpus_without_processors(shared, &mut state.cpus_now);
    if state.cpus.as_ref() != Some(&state.cpus_now) {
        if let Some(me) = super::activation::local() {
            me.pin_to_cpus(&state.cpus_now);
        }
        state.cpus = Some(state.cpus_now.clone());
    }
}

/// One look at every processor and every lost_processor activation; stops at a
/// lent processor the watcher should take itself (see [`claim`]).
///
/// `quiet` is cleared unless the look found nothing to do nor anything
/// only the monitor would notice soon enough: no short time slice to keep
/// (shorter than [`SLICE_AT_TICK`]), no
/// processor lent, starting or stopping, every busy one with a stand-in
/// standing by (which notices its driver sleeping by itself), no driver
/// asleep for `BLOCKED_AFTER`, no signal sent but for a time slice that
/// ran out (the next is a slice away), no stand-in handed out. (A
/// driver merely kept off its core, by the monitor itself or another
/// process, does not count.)
fn look(shared: &Arc<Shared>, seen: &mut [Seen], quiet: &mut bool) -> Option<&'static Processor> {
    let now = Instant::now();
    let mut provided = false;
    if shared.fine_grain || shared.time_slice.is_some_and(|slice| slice < SLICE_AT_TICK) {
        *quiet = false;
    }
    for (i, p) in shared.processors.iter().enumerate() {
        let p = p.as_static();
        if !provided {
            provided = super::stand_in::provide(shared, p);
            if provided {
                *quiet = false;
            }
        }
        let d = p.upcall().driver.load(Acquire);
        let membership = p.membership.load(Relaxed);
        let covered = super::stand_in::standing_by(p);
        if d != 0
            && (membership != ACTIVE || d & FLAGS != 0 || (!p.is_willing_to_yield() && !covered))
        {
            *quiet = false;
        }
        let dispatch = p.dispatch.load(Acquire);
        let s = &mut seen[i];
        let switched = dispatch != s.dispatch;
        if switched {
            s.dispatch = dispatch;
            s.since = now;
        }
        let last_clock = s.clock.take();
        if d == 0 {
            continue;
        }
        if d & LENT != 0 {
            let lent_for =
                now.saturating_duration_since(shared.instant_of(p.upcall().lent_at.load(Relaxed)));
            if lent_for >= shared.handoff_after.max(TICK) || p.is_stopping() {
                let by = p.upcall().standby.load(Relaxed);
                // SAFETY: `by` names an activation of this live runtime (or
                // is `0` or `ON_WAY`, which name none).
                match unsafe { Activation::from_word(by) } {
                    // A when-idle spare still waits for the core (others run
                    // there): let it compete now. (A stand-in that let the
                    // lend wait this long is kept off its core by others:
                    // the watcher takes over instead, below.)
                    Some(spare) if !super::stand_in::attached(p) => spare.take_at_once(),
                    _ => {
                        if let Some(p) = claim(shared, p) {
                            return Some(p);
                        }
                    }
                }
            }
            continue;
        }
        if dispatch & 1 == 0 {
            continue;
        }
        // With a stand-in standing by on its core, each read of the
        // driver's CPU clock interrupts that core (see the module docs):
        // read it only when it matters.
        let leaving = membership == STOPPING;
        if covered && switched && !leaving {
            // It switched threads since the last look, so it ran; a block
            // since is for the stand-in to find. (A leaving processor is
            // pushed off at every look until it stops: threads that hand
            // it among themselves never look at its membership.)
            continue;
        }
        let held = now.saturating_duration_since(s.since);
        let slice_over = slice_of(shared, p).is_some_and(|slice| held >= slice);
        if covered
            && !slice_over
            && !leaving
            && let Some((_, last_at, _)) = last_clock
            && now.saturating_duration_since(last_at) < COVERED_READ_EVERY
        {
            // One thread runs on (or its driver sleeps, which the stand-in
            // finds unless other processes keep it off the core): look at
            // the clock again once `COVERED_READ_EVERY` has passed since
            // the last read, against that read.
            s.clock = last_clock;
            continue;
        }
        // SAFETY: `d` is a driver word of this live runtime.
        let Some(a) = (unsafe { Activation::from_word(d) }) else {
            continue;
        };
        // A thread runs here: was its driver off its core for
        // `BLOCKED_AFTER` since the last look (see the module docs)?
        let Some(cpu) = sys::thread_cpu_ns(a.tid.load(Relaxed) as i32) else {
            continue;
        };
        // Timed right at the read (earlier processors' `/proc` reads must
        // not count as this driver's time off its core).
        let at = Instant::now();
        let driver = d & !FLAGS;
        s.clock = Some((driver, at, cpu));
        let Some((last_driver, last_at, last_cpu)) = last_clock else {
            continue;
        };
        if last_driver != driver {
            continue;
        }
        let on_core = Duration::from_nanos(cpu.saturating_sub(last_cpu));
        let off_core = at
            .saturating_duration_since(last_at)
            .saturating_sub(on_core);
        let state = if off_core >= BLOCKED_AFTER {
            a.task_state()
        } else {
            TaskState::Running
        };
        match state {
            TaskState::Blocked if shared.take_over_unannounced => {
                *quiet = false;
                if take_unannounced(p, a, d, PROBED_BY_MONITOR)
                    && let Some(p) = claim(shared, p)
                {
                    crate::probe_mark!(crate::probe::WATCHER_CLAIMED);
                    return Some(p);
                }
            }
            TaskState::Running => {
                if slice_over || leaving {
                    // A slice that ran out keeps the monitor napping: the
                    // next is a whole slice away, and a signal that did not
                    // take is sent again at the next look. A leaving
                    // processor is pushed at every tick until it stops.
                    if leaving {
                        *quiet = false;
                    }
                    p.upcall().ask_preempt(dispatch);
                    preempt::signal(a);
                }
            }
            TaskState::Blocked | TaskState::Other => {}
        }
    }
    // Kernel threads whose processor was taken while they slept,
    // running their thread again on no processor. Push the thread off.
    shared.activations.for_each(|a| {
        if a.lost_processor.load(Relaxed) && a.task_state() == TaskState::Running {
            *quiet = false;
            preempt::signal(a);
        }
    });
    None
}

/// How long the thread running on `p` may hold it: the runtime's time
/// slice, or under the fine-grain policy the quantum that policy gave it
/// (`p.quantum`, read after `p.dispatch`: that dispatch's or a later one;
/// see `sched::fine_grain`).
#[inline]
fn slice_of(shared: &Shared, p: &Processor) -> Option<Duration> {
    if shared.fine_grain {
        let us = crate::sched::quantum_word::read(&p.quantum).max(1);
        Some(Duration::from_micros(u64::from(us)))
    } else {
        shared.time_slice
    }
}

/// Lent processor `p` needs a new driver now: the watcher's own kernel
/// thread (returned) if someone can watch after it and no spare is on its
/// way already; else a spare, as any lend gets.
///
/// A stand-in holding the `standby` word does not count: the watcher found
/// the block or the long lend itself, so the stand-in is kept off its core
/// (other threads run there) or asleep, and the watcher is awake. Both
/// may then try to take `p`; the driver-word CAS picks one. (The word stays
/// the stand-in's: only its holder lowers it.)
fn claim(shared: &Arc<Shared>, p: &'static Processor) -> Option<&'static Processor> {
    if !shared.activations.has_successor() {
        shared.hand_lent(p, Takeover::AtOnce);
        return None;
    }
    if super::stand_in::attached(p) {
        return Some(p);
    }
    // The `standby` protocol of `hand_lent`: at most one taker on its way,
    // here the watcher's own kernel thread.
    let me = super::activation::local()?.word();
    p.upcall().raise_standby(me).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naps_double_after_quiet_looks_up_to_the_longest() {
        assert_eq!(nap_after(0), TICK);
        assert_eq!(nap_after(QUIET_LOOKS_PER_DOUBLING - 1), TICK);
        assert_eq!(nap_after(QUIET_LOOKS_PER_DOUBLING), TICK * 2);
        assert_eq!(nap_after(3 * QUIET_LOOKS_PER_DOUBLING), TICK * 8);
        assert_eq!(nap_after(u32::MAX), LONGEST_NAP);
        assert!(
            LONGEST_NAP < Duration::from_secs(1),
            "a nap is a subsecond futex wait"
        );
    }
}
