//! A running thread's run time, read and charged by the thread itself: its
//! turns on processors (counted by the processor at each switch) plus the
//! time servers spent on its calls (charged back with each reply).
//!
//! This file owns those two steps on the running thread; the counting at a
//! switch is the processor's (`processor::switch`).

use std::time::Duration;

use crate::sys;

/// The running thread's run time in time stamp counter ticks, with its
/// current turn; `None` off a ferry thread or without accounting. Takes no
/// reference (for measuring a span: read twice, convert once).
pub(crate) fn current_cpu_ticks() -> Option<u64> {
    current_cpu_ticks_at(sys::cycles())
}

/// [`current_cpu_ticks`] with the counter read `now` by the caller (who
/// needs that reading for something else too: one read, not two).
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
