//! [`sleep`] and [`sleep_until`]: a ferry thread waits on its runtime's
//! timers (an event source), parked, while its processor runs others; and
//! [`with_timer`], the timed wait other waits (an rpc call's deadline)
//! are built on.
//!
//! This file owns only the waiting side: the timer entry in the waiter's
//! frame, its registration with the thread (so that a terminated sleeper's
//! entry leaves the wheel before its stack is freed) and its removal when
//! the wait ends; the wheel and the firing are `event::timer`'s.

use std::marker::PhantomPinned;
use std::pin::pin;
use std::ptr;
use std::time::{Duration, Instant};

use super::{Unparker, park};
use crate::event::timer::{Entry, Timers};
use crate::header::raw::Header;
use crate::header::wait_record::{
    WaitRecord, register as register_wait, unregister as unregister_wait,
};

/// Puts the calling thread to sleep for at least `duration`; its processor
/// runs other threads meanwhile. On a plain kernel thread this is
/// `std::thread::sleep`.
///
/// ```
/// use std::time::{Duration, Instant};
/// ferry::run(|| {
///     let start = Instant::now();
///     ferry::sleep(Duration::from_millis(5));
///     assert!(start.elapsed() >= Duration::from_millis(5));
/// })
/// .unwrap();
/// ```
pub fn sleep(duration: Duration) {
    // A duration past what `Instant` can hold sleeps for 2^40 s (35,000
    // years), which is as good as for ever.
    let now = Instant::now();
    sleep_until(
        now.checked_add(duration)
            .unwrap_or_else(|| now + Duration::from_secs(1 << 40)),
    );
}

/// Puts the calling thread to sleep until `deadline` (not at all if it has
/// passed); its processor runs other threads meanwhile. It wakes at the
/// deadline or after, never before. On a plain kernel thread this is
/// `std::thread::sleep` for the time left.
///
/// ```
/// use std::time::{Duration, Instant};
/// ferry::run(|| {
///     let deadline = Instant::now() + Duration::from_millis(5);
///     ferry::thread::sleep_until(deadline);
///     assert!(Instant::now() >= deadline);
/// })
/// .unwrap();
/// ```
pub fn sleep_until(deadline: Instant) {
    let Some(me) = crate::upcall::enter().and_then(|e| e.p.current_ref(&e.tok).cloned()) else {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        return;
    };
    if Instant::now() >= deadline {
        return;
    }
    // Nothing that owns a reference stays in this frame while it sleeps
    // (a terminated sleeper's frame is freed without being dropped): the
    // runtime lives as long as its running thread's block, which its
    // processor keeps.
    let timers: *const Timers = &me.shared().sources.timers;
    drop(me);
    // SAFETY: as above, the runtime outlives this running thread's wait.
    let timers = unsafe { &*timers };
    with_timer(timers, deadline, |fired| {
        // Spurious returns from `park` are possible; the entry is the
        // truth. A token the timer leaves behind only makes some later
        // `park` return once, which every caller of `park` tolerates.
        while !fired() {
            park();
        }
    });
}

/// A timed wait of the calling thread: its timer entry, in its frame, and
/// the record that lets its terminator take the entry out. `repr(C)` with
/// the record first, so that the record leads back to the rest.
#[repr(C)]
struct TimerWait {
    record: WaitRecord,
    entry: Entry,
    timers: *const Timers,
    /// Linked by address (the record in the thread's list, the entry in
    /// the wheel): must not move while either is.
    _pinned: PhantomPinned,
}

impl TimerWait {
    /// The terminator's side of the record: takes the entry out of the
    /// wheel (whom it would have woken, the terminated thread, is dropped).
    ///
    /// # Safety
    /// `r` is the record of a live `TimerWait` whose thread has stopped for
    /// good.
    unsafe fn abandon_record(r: &WaitRecord) -> bool {
        // SAFETY: `TimerWait` is `repr(C)` with `record` first, and records
        // of this kind are only made by `with_timer`.
        let w = unsafe { &*ptr::from_ref(r).cast::<TimerWait>() };
        // SAFETY: the runtime's timers outlive its threads' waits, and the
        // entry, if armed, is armed there (`with_timer`).
        unsafe { (*w.timers).cancel(&w.entry) };
        true
    }
}

/// Takes the entry out when the wait ends (returned or unwound), then
/// unregisters its record.
struct Disarm<'a> {
    wait: &'a TimerWait,
    thread: Option<&'a Header>,
}

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        let entered = crate::upcall::enter();
        // SAFETY: armed (if still) in these timers, by `with_timer`.
        unsafe { (*self.wait.timers).cancel(&self.wait.entry) };
        debug_assert!(self.wait.entry.is_spent());
        drop(entered);
        if let Some(h) = self.thread {
            // SAFETY: the calling thread's own block: the one that
            // registered the record (a wait does not move between threads'
            // frames).
            unsafe { unregister_wait(&h.waits, &self.wait.record) };
        }
    }
}

/// Runs `wait` with a timer armed in `timers` to wake the calling thread
/// (made ready as expired) at `deadline`; `wait` is given a check of
/// whether the timer has fired, and parks between checks. When `wait`
/// returns (or unwinds) the timer is taken out if it has not fired, so
/// nothing of it lingers in the wheel. Arming and disarming are O(1) and
/// allocate nothing.
pub(crate) fn with_timer<R>(
    timers: &Timers,
    deadline: Instant,
    wait: impl FnOnce(&dyn Fn() -> bool) -> R,
) -> R {
    let w = pin!(TimerWait {
        record: WaitRecord::new(TimerWait::abandon_record),
        entry: Entry::new(),
        timers,
        _pinned: PhantomPinned,
    });
    let w: &TimerWait = &w;
    let entered = crate::upcall::enter();
    let who = Unparker::current_entered(entered.as_ref());
    let thread = match &who {
        // SAFETY: the caller's own block, alive while it runs (its `who`
        // holds a reference too).
        Unparker::Ferry(t) => Some(unsafe { t.as_ptr().as_ref() }),
        Unparker::Kernel(_) => None,
    };
    if let Some(h) = thread {
        // SAFETY: `h` is the running caller's own block, and the record
        // stays in place (pinned) until `Disarm` unregisters it.
        unsafe { register_wait(&h.waits, &w.record) };
    }
    // SAFETY: the entry is new, armed only in `timers`, pinned in this
    // frame, and `Disarm` takes it out (or sees it fired) before the frame
    // goes; a terminator takes it out through the record.
    unsafe { timers.arm(&w.entry, deadline, who) };
    drop(entered);
    let _disarm = Disarm { wait: w, thread };
    wait(&|| w.entry.fired())
}
