//! The run queues: each processor's next-to-run slot and its rings (one
//! SP-MC ring from `ferry_queue` per priority level: the owner pushes and
//! pops, other processors steal), and the runtime's injector for threads
//! made runnable off the processors.
//!
//! This room owns how threads are stored and moved between queues; it must
//! not decide which queue a thread goes to (the policy does) and must not
//! wake processors (the processor mechanism does, after a push).
//!
//! # The next-to-run slot
//!
//! | `NextSlot::thread` | written by | meaning |
//! |--------------------|------------|---------|
//! | null | the owner (`take`, swap) or a thief (`steal`, swap) | empty |
//! | a `Thread` given up with `into_raw` | the owner (`replace`, swap) | the thread this processor runs at its next switch; whoever swaps it out owns the reference |
//!
//! Every change is a swap, so exactly one side gets each thread. Thieves
//! take from the slot only after the same thread has sat there for
//! [`NEXT_STEAL_AFTER`]: in a wake-then-block handoff, or a fork followed by
//! its join, the owner runs it within nanoseconds, and stealing it would
//! only split the pair across cores.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ferry_queue::spmc;
use ferry_queue::wait::Spin;

use super::LEVELS;
use crate::thread::{Header, Thread};

/// Slots in each of a processor's rings; a full ring overflows to the
/// injector.
pub(crate) const RING_SLOTS: usize = 256;

/// How long a thread must sit in a next-to-run slot before an idle
/// processor steals it (Go waits about 3 µs for the same reason).
pub(crate) const NEXT_STEAL_AFTER: Duration = Duration::from_micros(5);

type Producer = spmc::Producer<Thread, Spin>;
type Consumer = spmc::Consumer<Thread, Spin>;

/// A processor's next-to-run slot: see the module docs.
pub(crate) struct NextSlot {
    thread: AtomicPtr<Header>,
}

impl NextSlot {
    pub(crate) fn new() -> NextSlot {
        NextSlot {
            thread: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Puts `t` in the slot; returns the thread it displaced. Owner only.
    pub(crate) fn replace(&self, t: Thread) -> Option<Thread> {
        let old = self.thread.swap(t.into_raw(), AcqRel);
        // SAFETY: a non-null slot value came from `into_raw`, and the swap
        // gave it to us alone.
        (!old.is_null()).then(|| unsafe { Thread::from_raw(old) })
    }

    /// Takes the slot's thread. Owner, or a thief (see the module docs).
    pub(crate) fn take(&self) -> Option<Thread> {
        if self.thread.load(Relaxed).is_null() {
            return None;
        }
        let old = self.thread.swap(ptr::null_mut(), AcqRel);
        // SAFETY: as in `replace`.
        (!old.is_null()).then(|| unsafe { Thread::from_raw(old) })
    }

    /// Who sits in the slot, as an address to compare (never dereferenced).
    pub(crate) fn peek(&self) -> *const Header {
        self.thread.load(Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.thread.load(Relaxed).is_null()
    }
}

impl Drop for NextSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// One processor's rings, and its stealing handles on every other
/// processor's rings. Owner only (it holds the single producer handles).
pub(crate) struct RunQueue {
    /// Bit `l` clear means ring `l` is empty: only the owner pushes, and it
    /// sets the bit when it does; it clears the bit when it finds the ring
    /// empty. Thieves only take, so a clear bit stays true until the
    /// owner's next push. Saves the owner a look at empty rings.
    maybe_nonempty: Cell<u8>,
    tx: [Producer; LEVELS],
    rx: [Consumer; LEVELS],
    /// `(victim processor index, its rings)`, for every other processor.
    victims: Vec<(usize, [Consumer; LEVELS])>,
}

impl RunQueue {
    /// The run queues of `count` processors, each with stealing handles on
    /// all the others.
    pub(crate) fn build(count: usize) -> Vec<RunQueue> {
        let rings: Vec<[(Producer, Consumer); LEVELS]> = (0..count)
            .map(|_| std::array::from_fn(|_| spmc::channel_with::<Thread, Spin>(RING_SLOTS)))
            .collect();
        let victims: Vec<Vec<(usize, [Consumer; LEVELS])>> = (0..count)
            .map(|i| {
                (1..count)
                    .map(|k| {
                        let v = (i + k) % count;
                        (v, std::array::from_fn(|l| rings[v][l].1.clone()))
                    })
                    .collect()
            })
            .collect();
        rings
            .into_iter()
            .zip(victims)
            .map(|(levels, victims)| {
                let [(t0, r0), (t1, r1), (t2, r2)] = levels;
                RunQueue {
                    maybe_nonempty: Cell::new(0),
                    tx: [t0, t1, t2],
                    rx: [r0, r1, r2],
                    victims,
                }
            })
            .collect()
    }

    /// Queues `t` at the back of ring `level`; gives it back when the ring
    /// is full.
    pub(crate) fn push_back(&self, level: usize, t: Thread) -> Result<(), Thread> {
        self.maybe_nonempty
            .set(self.maybe_nonempty.get() | 1 << level);
        self.tx[level].try_push(t)
    }

    /// Takes the front of ring `level`.
    pub(crate) fn pop(&self, level: usize) -> Option<Thread> {
        if self.maybe_nonempty.get() & 1 << level == 0 {
            return None;
        }
        let t = self.rx[level].try_pop();
        if t.is_none() {
            self.maybe_nonempty
                .set(self.maybe_nonempty.get() & !(1 << level));
        }
        t
    }

    pub(crate) fn is_empty(&self, level: usize) -> bool {
        self.maybe_nonempty.get() & 1 << level == 0 || self.rx[level].is_empty()
    }

    /// Steals one thread from another processor's rings, highest level
    /// first, starting at victim `start` (mod the victim count). Returns the
    /// thread and the victim's position in the rotation.
    pub(crate) fn steal(&self, start: usize) -> Option<(Thread, usize)> {
        let n = self.victims.len();
        for level in 0..LEVELS {
            for k in 0..n {
                let i = (start + k) % n;
                let rx = &self.victims[i].1[level];
                if !rx.is_empty()
                    && let Some(t) = rx.try_pop()
                {
                    return Some((t, i));
                }
            }
        }
        None
    }

    /// Whether another processor's rings look non-empty.
    pub(crate) fn others_have_work(&self) -> bool {
        self.victims
            .iter()
            .any(|(_, rings)| rings.iter().any(|r| !r.is_empty()))
    }

    /// Indices of the other processors.
    pub(crate) fn victim_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.victims.iter().map(|(i, _)| *i)
    }

    /// Drops every queued thread. Owner only.
    pub(crate) fn clear(&self) {
        for rx in &self.rx {
            while rx.try_pop().is_some() {}
        }
    }
}

/// Threads made runnable off the processors (by kernel threads, another
/// runtime, timers fired off a processor) and ring overflow: one FIFO per
/// priority level under one lock.
pub(crate) struct Injector {
    levels: Mutex<[VecDeque<Thread>; LEVELS]>,
    /// How many threads wait, readable without the lock (a hint).
    len: AtomicUsize,
}

impl Injector {
    pub(crate) fn new() -> Injector {
        Injector {
            levels: Mutex::new(std::array::from_fn(|_| VecDeque::new())),
            len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn push(&self, t: Thread) {
        let mut levels = self.levels.lock().unwrap_or_else(PoisonError::into_inner);
        levels[t.priority().level()].push_back(t);
        self.len.fetch_add(1, Release);
    }

    /// Takes the oldest thread of the highest level.
    pub(crate) fn pop(&self) -> Option<Thread> {
        self.pop_at_least(LEVELS - 1)
    }

    /// Takes the oldest thread of level `level` or above (more urgent).
    pub(crate) fn pop_at_least(&self, level: usize) -> Option<Thread> {
        if self.len.load(Acquire) == 0 {
            return None;
        }
        let mut levels = self.levels.lock().unwrap_or_else(PoisonError::into_inner);
        let t = levels[..=level].iter_mut().find_map(VecDeque::pop_front)?;
        self.len.fetch_sub(1, Release);
        Some(t)
    }

    /// Whether threads look queued.
    pub(crate) fn has_work(&self) -> bool {
        self.len.load(Ordering::Acquire) != 0
    }

    /// Drops every queued thread.
    pub(crate) fn clear(&self) {
        let mut levels = self.levels.lock().unwrap_or_else(PoisonError::into_inner);
        for l in levels.iter_mut() {
            l.clear();
        }
        self.len.store(0, Release);
    }
}
