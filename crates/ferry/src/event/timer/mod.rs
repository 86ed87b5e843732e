//! Timers: the sleeping threads of one runtime, in a hierarchical timing
//! wheel; an event source (see the parent module).
//!
//! This room owns the runtime's wheel, its lock, the clock in ticks and the
//! "is anything due?" check the processors make while scheduling; it must
//! not switch contexts (a sleeper parks itself, see `thread::sleep`), must
//! not allocate per timer, and must not hold its lock while waking anyone.
//!
//! # Pieces
//!
//! - [`wheel`]: the wheel itself, 7 levels of 64 slots with an occupancy
//!   bitmap each, over intrusive nodes: insert and remove O(1), the next
//!   expiration O(levels).
//! - [`entry`]: one timer ([`Entry`]), kept in place by its owner (a
//!   sleeping thread keeps it in its frame, so arming allocates nothing),
//!   and the protocol of its state word: armed, fired, cancelled.
//! - [`Timers`] (here): the wheel under a lock, the clock, the `next_due`
//!   word, and the firing.
//!
//! # Ticks
//!
//! A tick is 2^16 ns (65.5 µs): short sleeps stay precise, and the wheel's
//! 42 bits of ticks reach 9 years (beyond, an entry waits whole turns of the
//! top level). A deadline is rounded *up* to its tick and the clock *down*
//! to its tick, and an entry fires once the clock's tick reaches its own:
//! no timer fires before its deadline, and a processor that looks in time
//! fires it within one tick after.
//!
//! # The `next_due` word
//!
//! | value | meaning | written by |
//! |-------|---------|------------|
//! | `u64::MAX` | no timer armed | whoever arms, cancels or fires (under the lock) |
//! | `t` | the first tick at which the wheel has work: an entry's tick, or the start of a slot to cascade | whoever arms, cancels or fires (under the lock) |
//!
//! Readers compare it with the clock without the lock; a stale value only
//! delays a check to the next scheduling point, or makes one look that
//! finds nothing, and the wheel is advanced under the lock before anything
//! is fired.
//!
//! # Lock
//!
//! A spin lock ([`ferry_queue::lock::SpinLock`]), held for O(1) steps
//! (arm, cancel) or one batch of [`FIRE_BATCH`] firings, none of which
//! blocks or allocates. A waiter spins or yields its kernel thread and
//! never sleeps in the kernel: a processor's driver asleep on a contended
//! lock would look like a thread in a blocking call and have its processor
//! taken over. Its holders on a processor are inside an entry into the
//! runtime (`upcall::enter`: not preempted, their processor not taken), so
//! it is never held across a switch; waking happens after it is let go.

pub(crate) mod entry;
pub(crate) mod wheel;

/// The atomics and cells `entry` uses (loom's in its model).
mod shim {
    pub(crate) use std::sync::atomic::{AtomicU8, Ordering};

    pub(crate) use crate::cell::UnsafeCell;
}

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::{Duration, Instant};

use ferry_queue::lock::{SpinGuard, SpinLock};

use super::{Deliver, Every, Source};
use crate::header::Unparker;
use crate::sched::Ready;
use entry::TimerWheel;

/// One timer of a runtime: whom to wake, at a tick. See [`entry`].
pub(crate) type Entry = entry::Entry<Unparker>;

/// Nanoseconds per tick, as a shift.
const TICK_SHIFT: u32 = 16;
/// The resolution of the runtime's timers: a sleep ends within one tick
/// after its deadline when a processor looks in time, never before it.
pub const TICK: Duration = Duration::from_nanos(1 << TICK_SHIFT);
/// Entries fired per hold of the lock: their wakers wait on the firer's
/// stack ([`Unparker`]s, 16 bytes each) while the lock is let go.
pub(crate) const FIRE_BATCH: usize = 32;

/// The sleeping threads of one runtime.
pub(crate) struct Timers {
    epoch: Instant,
    wheel: SpinLock<TimerWheel<Unparker>>,
    next_due: AtomicU64,
}

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers {
            epoch: Instant::now(),
            wheel: SpinLock::new(TimerWheel::new()),
            next_due: AtomicU64::new(u64::MAX),
        }
    }

    /// Nanoseconds since the epoch, now.
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The clock's tick now (rounded down).
    fn now_tick(&self) -> u64 {
        self.now_ns() >> TICK_SHIFT
    }

    /// The tick of deadline `due` (rounded up: never before it).
    fn tick_of(&self, due: Instant) -> u64 {
        let ns =
            u64::try_from(due.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        ns.div_ceil(1 << TICK_SHIFT)
    }

    fn lock(&self) -> SpinGuard<'_, TimerWheel<Unparker>> {
        self.wheel.lock()
    }

    /// Publishes the wheel's next expiration (under its lock).
    fn publish(&self, w: &TimerWheel<Unparker>) {
        self.next_due
            .store(w.next_expiration().unwrap_or(u64::MAX), Release);
    }

    /// Arms `e` to wake `who` (made ready as [`Ready::Expired`]) at
    /// `due`, or at once if `due` has passed. O(1), no allocation.
    ///
    /// # Safety
    /// `e` is not armed, is armed only here, and stays live and in place
    /// until [`Entry::fired`] says so or [`Timers::cancel`] returned.
    pub(crate) unsafe fn arm(&self, e: &Entry, due: Instant, who: Unparker) {
        let due = self.tick_of(due);
        let now = self.now_tick();
        let mut w = self.lock();
        // Keeps the wheel's time close to the clock, so that the entry is
        // placed as low as it can be (fewer cascades on its way down).
        w.advance(now);
        // SAFETY: the caller's contract.
        unsafe { w.arm(e, due, who) };
        self.publish(&w);
    }

    /// Takes `e` out if it has not fired: true if it was armed. O(1). Whom
    /// it would have woken is dropped after the lock is let go.
    ///
    /// # Safety
    /// `e` is live, and if armed, armed here.
    pub(crate) unsafe fn cancel(&self, e: &Entry) -> bool {
        if e.state() != entry::ARMED {
            // Fired (Acquire: the firer is done) or never armed.
            return false;
        }
        let who = {
            let mut w = self.lock();
            // SAFETY: the caller's contract.
            let who = unsafe { w.cancel(e) };
            if who.is_some() {
                self.publish(&w);
            }
            who
        };
        who.is_some()
    }

    /// How many timers are armed.
    pub(crate) fn armed(&self) -> usize {
        self.lock().len()
    }

    /// How long until the wheel next has work, if any timer is armed.
    pub(crate) fn until_next(&self) -> Option<Duration> {
        let due = self.next_due.load(Acquire);
        (due != u64::MAX)
            .then(|| Duration::from_nanos((due << TICK_SHIFT).saturating_sub(self.now_ns())))
    }

    /// Whether the wheel has work now: one load when no timer is armed
    /// (the clock is read out of line, only when one is).
    #[inline]
    pub(crate) fn is_due(&self) -> bool {
        self.next_due.load(Acquire) != u64::MAX && self.is_due_slow()
    }

    #[cold]
    #[inline(never)]
    fn is_due_slow(&self) -> bool {
        let due = self.next_due.load(Acquire);
        due != u64::MAX && self.now_tick() >= due
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
        let now = self.now_tick();
        if now < self.next_due.load(Acquire) {
            return 0;
        }
        let mut n = 0;
        loop {
            // A batch at a time, woken after the lock is let go; waking
            // allocates nothing, so it never fails for want of memory.
            let mut batch: [Option<Unparker>; FIRE_BATCH] = [const { None }; FIRE_BATCH];
            let mut k = 0;
            {
                let mut w = self.lock();
                w.advance(now);
                while k < FIRE_BATCH {
                    let Some(who) = w.fire_one() else { break };
                    batch[k] = Some(who);
                    k += 1;
                }
                self.publish(&w);
            }
            for who in batch.iter_mut().take(k).filter_map(Option::take) {
                // Not `Woken`: the default policy would put each in the
                // next-to-run slot, displacing the one before, and run the
                // latest deadline first. `Expired` queues them in the
                // order they fire, ahead of their level's backlog (the
                // injector's express lane). (A thread still on its way to
                // park when its timer fires is requeued by its processor
                // as `Woken`: a rare race, which can reorder only that
                // thread.)
                who.unpark_as(Ready::Expired);
            }
            n += k;
            if k < FIRE_BATCH {
                return n;
            }
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

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    fn me() -> Unparker {
        Unparker::Kernel(std::thread::current())
    }

    /// A deadline that has passed by a whole tick: due at once (a deadline
    /// of "now" is rounded up to the next tick).
    fn passed() -> Instant {
        Instant::now() - 2 * TICK
    }

    #[test]
    fn an_entry_fires_at_its_tick_never_before() {
        let t = Timers::new();
        let e = Entry::new();
        let due = Instant::now() + Duration::from_millis(2);
        // SAFETY: `e` stays here until it fired (checked below).
        unsafe { t.arm(&e, due, me()) };
        assert_eq!(t.armed(), 1);
        while t.fire_due() == 0 {
            assert!(!e.fired());
        }
        assert!(e.fired() && e.is_spent());
        assert!(Instant::now() >= due);
        assert_eq!(t.armed(), 0);
        assert_eq!(t.until_next(), None);
    }

    #[test]
    fn a_cancelled_entry_never_fires_and_hands_back_its_waker() {
        let t = Timers::new();
        let (a, b) = (Entry::new(), Entry::new());
        // SAFETY: both stay here until cancelled or fired.
        unsafe {
            t.arm(&a, passed(), me());
            t.arm(&b, passed(), me());
        }
        // Both are due (expired in the wheel, not yet fired): `b` is taken
        // out before the firing and never fires.
        // SAFETY: armed here.
        assert!(unsafe { t.cancel(&b) });
        assert!(b.is_spent() && !b.fired());
        assert_eq!(b.state(), entry::CANCELLED);
        // SAFETY: as above; a second cancel finds nothing.
        assert!(!unsafe { t.cancel(&b) });
        assert_eq!(t.fire_due(), 1);
        assert!(a.fired());
        // SAFETY: fired: a cancel after the firing takes nothing.
        assert!(!unsafe { t.cancel(&a) });
        assert_eq!(t.armed(), 0);
        assert_eq!(t.until_next(), None);
        // A far timer taken out leaves nothing for a parked processor to
        // wake for.
        let c = Entry::new();
        // SAFETY: cancelled below, before it goes.
        unsafe { t.arm(&c, Instant::now() + Duration::from_secs(3600), me()) };
        assert!(t.until_next().is_some());
        // SAFETY: armed here.
        assert!(unsafe { t.cancel(&c) });
        assert_eq!(t.until_next(), None, "the cancel updated next_due");
    }

    #[test]
    fn more_than_a_batch_fires_in_one_call() {
        let t = Timers::new();
        let es: Vec<Entry> = (0..FIRE_BATCH * 3 + 1).map(|_| Entry::new()).collect();
        for e in &es {
            // SAFETY: the vector is not touched until every entry fired.
            unsafe { t.arm(e, passed(), me()) };
        }
        assert_eq!(t.fire_due(), es.len());
        assert!(es.iter().all(Entry::fired));
    }
}
