//! A running thread's run time, read and charged by the thread itself: its
//! turns on processors (counted by the processor at each switch) plus the
//! time servers spent on its calls (charged back with each reply).
//!
//! This file owns those two steps on the running thread; the counting at a
//! switch is the processor's (`processor::switch`).

use std::time::{Duration, Instant};

use crate::sys;

/// The running thread's run time in time stamp counter ticks, with its
/// current turn; `None` off a ferry thread or without accounting. Takes no
/// reference (for measuring a span: read twice, convert once).
///
/// The counter is read after the entry into the runtime: an entry may
/// switch (back from a blocking call whose processor was taken, the thread
/// is handed back and resumes on another), and a turn begun after the
/// reading would count nothing of itself.
pub(crate) fn current_cpu_ticks() -> Option<u64> {
    let mut e = crate::upcall::enter()?;
    let h = e.p.current_ref(&e.tok)?.as_ptr();
    let now = sys::cycles();
    // SAFETY: the running thread's block, alive while it runs (we are it).
    e.p.running_cpu_ticks_at(e.tok.rb(), unsafe { h.as_ref() }, now)
}

/// [`current_cpu_ticks`] with the counter read `now` by the caller (who
/// needs that reading for something else too: one read, not two). If the
/// entry switched after `now`, the turn in progress counts nothing.
pub(crate) fn current_cpu_ticks_at(now: u64) -> Option<u64> {
    let mut e = crate::upcall::enter()?;
    let h = e.p.current_ref(&e.tok)?.as_ptr();
    // SAFETY: the running thread's block, alive while it runs (we are it).
    e.p.running_cpu_ticks_at(e.tok.rb(), unsafe { h.as_ref() }, now)
}

/// [`current_cpu_ticks`] as time.
pub(crate) fn current_cpu_time() -> Option<Duration> {
    current_cpu_ticks().map(sys::cycles_to_duration)
}

/// Charges `d`, run on the running thread's behalf by a server, to its run
/// time (nothing off a ferry thread or without accounting).
pub(crate) fn charge_current(d: Duration) {
    charge_current_ticks(sys::duration_to_cycles(d));
}

/// [`charge_current`] of `ticks` of the time stamp counter.
pub(crate) fn charge_current_ticks(ticks: u64) {
    let Some(mut e) = crate::upcall::enter() else {
        return;
    };
    let Some(h) = e.p.current_ref(&e.tok).map(|t| t.as_ptr()) else {
        return;
    };
    // SAFETY: as above.
    e.p.charge_running(e.tok.rb(), unsafe { h.as_ref() }, ticks);
}

/// How long a span of the running thread ran: its run time between
/// [`RunSpan::start`] and [`RunSpan::spent`] when the runtime accounts it,
/// else the wall time between them (what an activation charges back for a
/// call it served).
pub(crate) struct RunSpan {
    cpu0: Option<u64>,
    wall0: Option<Instant>,
}

impl RunSpan {
    /// Starts the span now.
    pub(crate) fn start() -> RunSpan {
        let cpu0 = current_cpu_ticks();
        RunSpan {
            cpu0,
            wall0: cpu0.is_none().then(Instant::now),
        }
    }

    /// The span's length so far.
    pub(crate) fn spent(&self) -> Duration {
        match (self.cpu0, current_cpu_ticks(), self.wall0) {
            (Some(a), Some(b), _) => sys::cycles_to_duration(b.wrapping_sub(a)),
            // Without accounting: the time the span took.
            (_, _, Some(w)) => w.elapsed(),
            _ => Duration::ZERO,
        }
    }
}
