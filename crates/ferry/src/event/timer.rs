//! Timers: the sleeping threads of one runtime, ordered by deadline; an
//! event source (see the parent module).
//!
//! This file owns the deadline heap and the "is anything due?" check the
//! processors make while scheduling; it must not switch contexts (a
//! sleeper parks itself, see `thread::sleep`) and must not hold its lock
//! while waking anyone.
//!
//! # The `next_due` word
//!
//! | value | meaning | written by |
//! |-------|---------|------------|
//! | `u64::MAX` | no timer pending | whoever pops the last entry (under the heap lock) |
//! | `n` | the earliest deadline, in nanoseconds since the runtime's `epoch` | whoever pushes or pops (under the heap lock) |
//!
//! Readers compare it with the clock without the lock; a stale value only
//! delays a check to the next scheduling point, and it is re-read under the
//! lock before anything is popped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Deliver, Every, Source};
use crate::header::Unparker;
use crate::sched::Ready;

/// One sleeping thread.
struct Entry {
    due: u64,
    seq: u64,
    fired: Arc<AtomicBool>,
    who: Unparker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// The sleeping threads of one runtime.
pub(crate) struct Timers {
    epoch: Instant,
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    next_due: AtomicU64,
}

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers {
            epoch: Instant::now(),
            heap: Mutex::new((BinaryHeap::new(), 0)),
            next_due: AtomicU64::new(u64::MAX),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Registers `who` to be woken (its flag set, then unparked) at `due`.
    pub(crate) fn add(&self, due: Instant, who: Unparker) -> Arc<AtomicBool> {
        let due = u64::try_from(due.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1);
        let fired = Arc::new(AtomicBool::new(false));
        let mut heap = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = heap.1;
        heap.1 += 1;
        heap.0.push(Reverse(Entry {
            due,
            seq,
            fired: Arc::clone(&fired),
            who,
        }));
        let first = heap.0.peek().map_or(u64::MAX, |e| e.0.due);
        self.next_due.store(first, Release);
        fired
    }

    /// How long until the earliest deadline, if any timer is pending.
    pub(crate) fn until_next(&self) -> Option<Duration> {
        let due = self.next_due.load(Acquire);
        (due != u64::MAX).then(|| Duration::from_nanos(due.saturating_sub(self.now())))
    }

    /// Whether the earliest deadline has passed: one load when no timer is
    /// pending (the clock is read out of line, only when one is).
    #[inline]
    pub(crate) fn is_due(&self) -> bool {
        self.next_due.load(Acquire) != u64::MAX && self.is_due_slow()
    }

    #[cold]
    #[inline(never)]
    fn is_due_slow(&self) -> bool {
        let due = self.next_due.load(Acquire);
        due != u64::MAX && self.now() >= due
    }

    /// Wakes every thread whose deadline has passed; returns how many.
    #[inline]
    pub(crate) fn fire_due(&self) -> usize {
        if self.next_due.load(Acquire) == u64::MAX {
            return 0;
        }
        self.fire_due_slow()
    }

    #[cold]
    fn fire_due_slow(&self) -> usize {
        let due = self.next_due.load(Acquire);
        let now = self.now();
        if now < due {
            return 0;
        }
        // One entry at a time, each woken after the lock is dropped: waking
        // allocates nothing, so it never fails for want of memory.
        let mut n = 0;
        loop {
            let e = {
                let mut heap = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
                let e = match heap.0.peek() {
                    Some(e) if e.0.due <= now => heap.0.pop().map(|Reverse(e)| e),
                    _ => None,
                };
                let first = heap.0.peek().map_or(u64::MAX, |e| e.0.due);
                self.next_due.store(first, Release);
                e
            };
            let Some(e) = e else {
                return n;
            };
            n += 1;
            e.fired.store(true, Release);
            // Not `Woken`: the default policy would put each in the
            // next-to-run slot, displacing the one before, and run the
            // latest deadline first. (A thread still on its way to park
            // when its timer fires is requeued by its processor as
            // `Woken`: a rare race, which can reorder only that thread.)
            e.who.unpark_as(Ready::Expired);
        }
    }
}

/// A timer is due when the clock passes its deadline: a busy processor
/// reads the clock only every few switches.
impl Source for Timers {
    const EVERY: Every = Every::Ticks;

    #[inline]
    fn is_ready(&self) -> bool {
        self.is_due()
    }

    #[inline]
    fn deliver(&self, _to: &mut dyn Deliver) {
        // The woken threads reach their processors through their own
        // scheduler (`Unparker::unpark_as`), not through `to`.
        self.fire_due();
    }

    #[inline]
    fn until_next(&self) -> Option<Duration> {
        Timers::until_next(self)
    }
}
