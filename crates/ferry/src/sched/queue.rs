//! A processor's run queues: its next-to-run slot and its rings (one
//! SP-MC ring from `ferry_queue` per priority level: the owner pushes and
//! pops, other processors steal). The runtime's injector is `injector`'s.
//!
//! This file owns how threads are stored and moved between these queues; it must
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
use std::ptr;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::time::Duration;

use ferry_queue::spmc;
use ferry_queue::wait::Spin;

use super::LEVELS;
use crate::header::{Header, Thread};

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

/// A look at one processor's rings from any kernel thread: how many
/// threads they hold, as a hint (consumer handles that only count).
pub(crate) struct RingLens([Consumer; LEVELS]);

impl RingLens {
    /// How many threads the rings held at some moment during the call
    /// (each ring's count is exact at its own moment).
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(Consumer::len).sum()
    }
}

impl RunQueue {
    /// A [`RingLens`] on this processor's rings.
    pub(crate) fn lens(&self) -> RingLens {
        RingLens(std::array::from_fn(|l| self.rx[l].clone()))
    }

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

    /// How many processors the run queues were built for.
    pub(crate) fn processors(&self) -> usize {
        self.victims.len() + 1
    }

    /// Indices of the other processors.
    pub(crate) fn victim_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.victims.iter().map(|(i, _)| *i)
    }

    /// Hands every queued thread to `f`. Owner only.
    pub(crate) fn clear(&self, mut f: impl FnMut(Thread)) {
        for rx in &self.rx {
            while let Some(t) = rx.try_pop() {
                f(t);
            }
        }
    }
}
