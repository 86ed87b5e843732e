//! Where a processor lives: the core its driver is pinned to — one named
//! with `processor_on`, or its home, the `index`-th CPU of the process's
//! mask unless a takeover settled it where it was taken or an unpaid spin
//! moved it.
//!
//! This file owns the `core` and `home` words' meaning and changes; it
//! must not pin a kernel thread (drivers and stand-ins pin themselves to
//! what [`Processor::core`] says, at their next pass).

use std::sync::atomic::Ordering::Relaxed;

use super::{NO_CORE, Processor, STOPPED, Set, cpus};

impl Processor {
    /// The core this processor's driver is pinned to: the one named with
    /// `processor_on`, else (with several processors) its home, which is
    /// the `index`-th CPU of the process's mask unless a takeover or an
    /// unpaid spin moved it,
    /// else the process's only CPU if its mask has one (a lone processor
    /// then has a core, and so a stand-in, as pinned ones do), else none.
    pub(crate) fn core(&self, shared: &Set) -> Option<usize> {
        match self.core.load(Relaxed) {
            NO_CORE if shared.processors.len() > 1 => match self.home.load(Relaxed) {
                NO_CORE => cpus::default_core(self.index),
                home => Some(home),
            },
            NO_CORE => cpus::only_cpu(),
            c => Some(c),
        }
    }

    /// Makes the calling CPU this processor's home, if no core is named
    /// for it and no other processor in the set lives there: the watcher,
    /// taking it over, runs it where it is instead of moving to the blocked
    /// driver's core, which went idle (on a VM, waking an idle core for
    /// the move cost 50-100 µs, most of such a takeover).
    pub(crate) fn settle_where_taken(&self, shared: &Set) {
        if self.core.load(Relaxed) != NO_CORE || shared.processors.len() < 2 {
            return;
        }
        let Some(cpu) = crate::sys::current_cpu() else {
            return;
        };
        if self.core(shared) == Some(cpu) {
            return;
        }
        if !self.another_lives_on(shared, cpu) {
            self.home.store(cpu, Relaxed);
        }
    }

    /// Whether another processor of the set (not stopped) lives on `cpu`.
    fn another_lives_on(&self, shared: &Set, cpu: usize) -> bool {
        shared.processors.iter().any(|q| {
            !std::ptr::eq(q.as_static(), self)
                && q.membership.load(Relaxed) != STOPPED
                && q.core(shared) == Some(cpu)
        })
    }

    /// A probe of the polled entries' spin found that spinning does not pay
    /// here (`event::polled`): the peer this processor waits for may share
    /// its core and be unable to run while it spins — two one-processor
    /// processes that the kernel first ran on one CPU, each at home there.
    /// With even odds (both sides probe in step, and were both to move
    /// they would only swap), moves its home to the next CPU of the
    /// process's mask that no other processor of the set lives on; it goes
    /// there at its next pass through the scheduler loop. Not for a
    /// processor with a core named, nor one without a home.
    pub(crate) fn move_home_by_chance(&self, shared: &Set) {
        // The top bit of a mixed time stamp: the two sides read theirs at
        // different moments.
        if crate::sys::cycles().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 63 == 1 {
            self.move_home(shared);
        }
    }

    /// [`move_home_by_chance`](Self::move_home_by_chance) once the odds
    /// said so.
    pub(super) fn move_home(&self, shared: &Set) {
        if self.core.load(Relaxed) != NO_CORE {
            return;
        }
        let Some(now) = self.core(shared) else {
            return;
        };
        let cpus = cpus::allowed_cpus();
        let Some(at) = cpus.iter().position(|&c| c == now) else {
            return;
        };
        let next = (1..cpus.len())
            .map(|step| cpus[(at + step) % cpus.len()])
            .find(|&cpu| !self.another_lives_on(shared, cpu));
        if let Some(cpu) = next {
            self.home.store(cpu, Relaxed);
        }
    }

    /// Sends the processor back to its default home (the set grew: every
    /// processor's default core may be wanted again).
    pub(crate) fn reset_home(&self) {
        self.home.store(NO_CORE, Relaxed);
    }

    /// Names the core this processor's driver runs on (it moves there at
    /// its next pass through the scheduler loop).
    pub(crate) fn set_core(&self, core: usize) {
        self.core.store(core, Relaxed);
    }
}
