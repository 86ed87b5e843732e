//! The monitor: one kernel thread per runtime that looks at every processor
//! every [`TICK`] while any of them is busy, and parks while all sleep.
//!
//! It owns the decisions that need a clock: a lent processor whose call
//! outlasts the handoff wait goes to a spare; a processor whose thread has
//! not switched for a tick and whose kernel thread sleeps in the kernel is
//! taken over as if the call had been announced; a thread past its time
//! slice, or on a processor that is leaving, is sent the preemption signal;
//! an orphaned kernel thread running again is pushed off its thread. It
//! must not touch a processor's owner part: it only moves driver words (by
//! the protocol in `activation`) and sends signals.
//!
//! Its cost while nothing blocks: per tick, a few atomic loads per
//! processor, and for a processor that has run one thread for a whole tick
//! one `clock_gettime` of that kernel thread's CPU clock (to tell computing
//! from sleeping), plus one `/proc` read the first time it sees that thread
//! run a whole tick and whenever the clock stood still.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::time::{Duration, Instant};

use super::activation::{Activation, FLAGS, LENT, PROBING, UNANNOUNCED};
use super::preempt;
use crate::processor::{ACTIVE, STOPPING};
use crate::runtime::Shared;
use crate::sys::{self, TaskState};

/// How often the monitor looks while processors are busy.
pub(crate) const TICK: Duration = Duration::from_micros(20);

/// Consecutive all-idle looks after which the monitor parks.
const IDLE_LOOKS_BEFORE_PARK: u32 = 25;

/// The monitor's park word.
///
/// | `parked` | written by | meaning |
/// |----------|------------|---------|
/// | `false` | the monitor, when it wakes | it looks every tick |
/// | `true` | the monitor, before it sleeps on `wake` | anyone who makes a processor busy calls `unpark` |
pub(crate) struct Monitor {
    parked: AtomicBool,
    wake: AtomicU32,
}

/// What the monitor remembers of one processor between looks.
#[derive(Clone, Copy)]
struct Seen {
    dispatch: u32,
    since: Instant,
    cpu_ns: u64,
}

impl Monitor {
    pub(crate) fn new() -> Monitor {
        Monitor {
            parked: AtomicBool::new(false),
            wake: AtomicU32::new(0),
        }
    }

    /// Wakes the monitor if it parked.
    #[inline]
    pub(crate) fn unpark(&self) {
        if self.parked.load(Relaxed) {
            self.unpark_slow();
        }
    }

    #[cold]
    fn unpark_slow(&self) {
        self.parked.store(false, SeqCst);
        self.wake.store(1, SeqCst);
        let _ = rustix::thread::futex::wake(&self.wake, rustix::thread::futex::Flags::PRIVATE, 1);
    }

    fn park(&self, shared: &Shared) {
        self.wake.store(0, SeqCst);
        self.parked.store(true, SeqCst);
        if !shared.all_idle() || shared.is_shut_down() {
            self.parked.store(false, SeqCst);
            return;
        }
        let _ = rustix::thread::futex::wait(
            &self.wake,
            rustix::thread::futex::Flags::PRIVATE,
            0,
            Some(&rustix::thread::futex::Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            }),
        );
        self.parked.store(false, SeqCst);
    }

    /// The monitor's kernel thread.
    pub(crate) fn run(shared: &Arc<Shared>) {
        sys::set_timer_slack(1_000);
        let now = Instant::now();
        let mut seen = vec![
            Seen {
                dispatch: u32::MAX,
                since: now,
                cpu_ns: 0,
            };
            shared.processors.len()
        ];
        let mut idle_looks = 0;
        while !shared.is_shut_down() {
            if shared.all_idle() {
                idle_looks += 1;
                if idle_looks >= IDLE_LOOKS_BEFORE_PARK {
                    shared.monitor.park(shared);
                    idle_looks = 0;
                    continue;
                }
            } else {
                idle_looks = 0;
            }
            std::thread::sleep(TICK);
            look(shared, &mut seen);
        }
    }
}

/// One look at every processor and every orphaned activation.
fn look(shared: &Arc<Shared>, seen: &mut [Seen]) {
    let now = Instant::now();
    for (i, p) in shared.processors.iter().enumerate() {
        let p = p.as_static();
        let d = p.driver.load(Acquire);
        let dispatch = p.dispatch.load(Relaxed);
        let s = &mut seen[i];
        if dispatch != s.dispatch {
            *s = Seen {
                dispatch,
                since: now,
                cpu_ns: 0,
            };
        }
        if d == 0 {
            continue;
        }
        if d & LENT != 0 {
            let lent_for =
                now.saturating_duration_since(shared.instant_of(p.lent_at.load(Relaxed)));
            if lent_for >= shared.handoff_after.max(TICK) || p.is_stopping() {
                let by = p.standby_by.load(Relaxed);
                // SAFETY: `by` names an activation of this live runtime.
                match unsafe { Activation::from_word(by) } {
                    // A patient spare still waits for the core (others run
                    // there): let it compete now.
                    Some(spare) => spare.hurry(),
                    None => shared.hand_lent(p, false),
                }
            }
            continue;
        }
        let stale = now.saturating_duration_since(s.since);
        if dispatch & 1 == 0 || stale < TICK {
            continue;
        }
        // SAFETY: `d` is a driver word of this live runtime.
        let Some(a) = (unsafe { Activation::from_word(d) }) else {
            continue;
        };
        // One thread has had the processor for a whole tick: computing, or
        // asleep in the kernel? The first time, ask `/proc` (one read per
        // such dispatch, so that a block is found on the second look);
        // after that its CPU clock tells, cheaply, and only a clock that
        // stood still costs a `/proc` read.
        let first = s.cpu_ns == 0;
        let cpu = sys::thread_cpu_ns(a.tid.load(Relaxed) as i32);
        let advanced = cpu.is_none_or(|c| c != s.cpu_ns);
        s.cpu_ns = cpu.unwrap_or(0);
        let state = if advanced && !first {
            TaskState::Running
        } else {
            a.task_state()
        };
        match state {
            TaskState::Blocked if shared.take_over_unannounced => take_unannounced(shared, p, a, d),
            TaskState::Running => {
                let slice_over = shared.time_slice.is_some_and(|slice| stale >= slice);
                let leaving = p.membership.load(Relaxed) == STOPPING;
                if slice_over || leaving {
                    p.preempt_dispatch.store(dispatch, Relaxed);
                    preempt::signal(a);
                }
            }
            TaskState::Blocked | TaskState::Other => {}
        }
        let _ = ACTIVE;
    }
    // Orphans: kernel threads whose processor was taken while they slept,
    // running their thread again on no processor. Push the thread off.
    shared.activations.for_each(|a| {
        if a.orphaned.load(Relaxed) && a.task_state() == TaskState::Running {
            preempt::signal(a);
        }
    });
}

/// Takes processor `p` from activation `a` (driver word `d`), which sleeps
/// in the kernel, if `a` is outside the runtime: lends it on `a`'s behalf
/// and hands it to a spare. See `activation`'s docs for the handshake.
fn take_unannounced(
    shared: &Arc<Shared>,
    p: &'static crate::processor::Processor,
    a: &Activation,
    d: usize,
) {
    p.lent_at.store(shared.now_ns(), Relaxed);
    // Seen asleep: the spare need not wait for the core to go idle.
    p.lent_cpu.store(crate::processor::NO_CORE, Relaxed);
    let probing = d | PROBING;
    let lent = d | LENT | UNANNOUNCED;
    // Marked before the word moves: `a` clears it when it takes the word
    // back, which can only come after.
    a.away.store(true, SeqCst);
    if let Err(now) = p.driver.compare_exchange(d, probing, SeqCst, Relaxed) {
        // Unless `a` lent it meanwhile (and marked itself away), the mark
        // is ours to undo; `a` cannot lend it after another took it.
        if now & !FLAGS != a.word() {
            a.away.store(false, SeqCst);
        }
        return;
    }
    ferry_queue::wait::heavy_fence();
    if a.critical.load(Acquire) != 0 {
        // Inside the runtime (or holding a spinlock): leave it be. If it
        // took the word back meanwhile, that is fine too.
        if p.driver
            .compare_exchange(probing, d, SeqCst, Relaxed)
            .is_ok()
        {
            a.away.store(false, SeqCst);
        }
        return;
    }
    // Confirmed: only now may a spare take it.
    if p.driver
        .compare_exchange(probing, lent, SeqCst, Relaxed)
        .is_err()
    {
        return;
    }
    shared.hand_lent(p, false);
}
