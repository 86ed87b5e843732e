//! [`Entry`]: one timer, kept in place by its owner (in a sleeping
//! thread's frame), with its state word; and [`TimerWheel`], the wheel of
//! such entries, whose methods are the protocol of that word.
//!
//! This room owns the state word and the hand-over of `who` (whom to wake)
//! between the owner, the firer and a canceller; it must not lock (the
//! caller holds the wheel's lock: `&mut TimerWheel` is the proof), read a
//! clock or wake anyone (the firer wakes whom [`TimerWheel::fire_one`]
//! returns, after it has let go of the lock). It is compiled as it is
//! against loom in `tests/loom_timer.rs`.
//!
//! # The state word
//!
//! | state | meaning | written by |
//! |-------|---------|------------|
//! | [`IDLE`] | in no wheel, never armed | [`Entry::new`] |
//! | [`ARMED`] | linked in a wheel; `who` holds whom to wake | the owner, [`TimerWheel::arm`], under the lock |
//! | [`FIRED`] | unlinked by the firer, `who` taken out by it; the firer touches the entry no more | the firer, [`TimerWheel::fire_one`], under the lock (Release: its last touch) |
//! | [`CANCELLED`] | unlinked by [`TimerWheel::cancel`], `who` handed back | the owner or its thread's terminator, under the lock |
//!
//! Every transition is made under the wheel's lock, so a cancel and a
//! firing are ordered by it: a cancel that comes second finds [`FIRED`]
//! and takes nothing (the wake is on its way, or done, and leaves at worst
//! a stray wakeup token). The one read without the lock is the owner's
//! [`Entry::fired`] (Acquire): once it says yes, the firer is done with the
//! entry, and the owner may let it go (leave the frame) while the firer
//! still wakes it with the `who` it took.

use std::marker::{PhantomData, PhantomPinned};

use super::shim::{AtomicU8, Ordering, UnsafeCell};
use super::wheel::{Node, Wheel};

/// In no wheel, never armed.
pub(crate) const IDLE: u8 = 0;
/// In a wheel, waiting for its tick.
pub(crate) const ARMED: u8 = 1;
/// Its tick came: taken out by the firer, who wakes `who`.
pub(crate) const FIRED: u8 = 2;
/// Taken out before its tick.
pub(crate) const CANCELLED: u8 = 3;

/// One timer: whom to wake (`W`) at a tick. `repr(C)` with the node
/// first, so that a node the wheel hands back leads to its entry. Linked
/// by address: it must not move while armed.
#[repr(C)]
pub(crate) struct Entry<W> {
    node: Node,
    state: AtomicU8,
    /// Touched only under the wheel's lock, and by the owner once it has
    /// seen the entry settle (see the module docs).
    who: UnsafeCell<Option<W>>,
    _pinned: PhantomPinned,
}

// SAFETY: `node` and `who` are touched only by the holder of the wheel's
// lock (`&mut TimerWheel`), or by the owner after `fired` (Acquire) says
// the firer is done; `who` moves between threads, hence `W: Send`.
unsafe impl<W: Send> Sync for Entry<W> {}
// SAFETY: as above.
unsafe impl<W: Send> Send for Entry<W> {}

impl<W> Entry<W> {
    /// An entry in no wheel.
    pub(crate) fn new() -> Entry<W> {
        Entry {
            node: Node::new(),
            state: AtomicU8::new(IDLE),
            who: UnsafeCell::new(None),
            _pinned: PhantomPinned,
        }
    }

    /// Its state (see the module's table); [`FIRED`] read here (Acquire)
    /// means the firer is done with the entry.
    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Whether its tick came and the firer took it out.
    pub(crate) fn fired(&self) -> bool {
        self.state() == FIRED
    }

    /// Whether it holds nobody to wake: true once it settled. For the
    /// owner, after [`Entry::fired`] said yes or a cancel returned (a read
    /// of `who` racing the firer's would be a bug the loom model catches).
    pub(crate) fn is_spent(&self) -> bool {
        // SAFETY: the caller's contract: the firer and cancellers are done.
        self.who.with(|w| unsafe { (*w).is_none() })
    }
}

impl<W> Default for Entry<W> {
    fn default() -> Entry<W> {
        Entry::new()
    }
}

/// A wheel of [`Entry`]s of one kind: the timers of one runtime, kept
/// under its lock.
pub(crate) struct TimerWheel<W> {
    wheel: Wheel,
    _who: PhantomData<W>,
}

impl<W> Default for TimerWheel<W> {
    fn default() -> TimerWheel<W> {
        TimerWheel::new()
    }
}

impl<W> TimerWheel<W> {
    /// An empty wheel at tick 0.
    pub(crate) const fn new() -> TimerWheel<W> {
        TimerWheel {
            wheel: Wheel::new(),
            _who: PhantomData,
        }
    }

    /// Arms `e` to wake `who` at tick `due` ([`ARMED`]); expired at once
    /// if `due` is not after the wheel's time. O(1).
    ///
    /// # Safety
    /// `e` is not armed, is armed only in this wheel, and stays live and
    /// in place until [`Entry::fired`] says so or a [`TimerWheel::cancel`]
    /// returned.
    pub(crate) unsafe fn arm(&mut self, e: &Entry<W>, due: u64, who: W) {
        debug_assert_ne!(e.state.load(Ordering::Relaxed), ARMED);
        // SAFETY: not armed: only the lock holder (the caller) touches it.
        e.who.with_mut(|w| unsafe { *w = Some(who) });
        // SAFETY: not armed, so in no wheel; the caller keeps it in place.
        unsafe { self.wheel.insert(&e.node, due) };
        e.state.store(ARMED, Ordering::Relaxed);
    }

    /// Takes `e` out if it is still armed ([`CANCELLED`]) and gives back
    /// whom it would have woken; `None` if it fired (or was never armed).
    /// O(1).
    ///
    /// # Safety
    /// `e` is live, and if armed, armed in this wheel.
    pub(crate) unsafe fn cancel(&mut self, e: &Entry<W>) -> Option<W> {
        if e.state.load(Ordering::Relaxed) != ARMED {
            return None;
        }
        // SAFETY: armed in this wheel (the contract).
        let linked = unsafe { self.wheel.remove(&e.node) };
        debug_assert!(linked);
        // SAFETY: we hold the lock and it was armed.
        let who = e.who.with_mut(|w| unsafe { (*w).take() });
        e.state.store(CANCELLED, Ordering::Relaxed);
        who
    }

    /// Moves the wheel's time on to tick `now`: the entries due by then
    /// are ready for [`TimerWheel::fire_one`].
    pub(crate) fn advance(&mut self, now: u64) {
        self.wheel.advance(now);
    }

    /// Takes out one entry whose tick has come ([`FIRED`]) and returns
    /// whom to wake: the caller wakes it after it lets go of the lock.
    pub(crate) fn fire_one(&mut self) -> Option<W> {
        let n = self.wheel.pop_expired()?;
        // SAFETY: every node of this wheel is the first field of a live
        // `Entry<W>` (`arm`'s contract), and `repr(C)` puts it at offset 0.
        let e = unsafe { n.cast::<Entry<W>>().as_ref() };
        // SAFETY: armed, and we hold the lock.
        let who = e.who.with_mut(|w| unsafe { (*w).take() });
        // The last touch: the owner may let the entry go once it sees this.
        e.state.store(FIRED, Ordering::Release);
        who
    }

    /// The first tick at which [`TimerWheel::advance`] has work, if any
    /// entry is armed. O(levels).
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        self.wheel.next_expiration()
    }

    /// How many entries are armed.
    pub(crate) fn len(&self) -> usize {
        self.wheel.len()
    }
}
