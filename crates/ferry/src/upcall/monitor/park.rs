//! The monitor's park word: how the watcher sleeps between two looks and
//! while every processor sleeps, and how a change of the set, a shutdown
//! or a waking processor ends that sleep.
//!
//! This file owns the word and its futex; it must not decide when to look
//! or what a look does (the parent does).

use std::sync::Mutex;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::time::Duration;

use super::WatchState;
use crate::sys;
use crate::upcall::Shared;

/// `Monitor::parked`: looking.
const AWAKE: u8 = 0;
/// `Monitor::parked`: napping between two looks.
const NAPPING: u8 = 1;
/// `Monitor::parked`: parked while every processor sleeps.
const PARKED: u8 = 2;

/// The monitor's park word.
///
/// | `parked` | written by | meaning |
/// |----------|------------|---------|
/// | `AWAKE` | the monitor, when it wakes; `unpark`, `woke` | it looks every tick |
/// | `NAPPING` | the monitor, before it naps on `wake` (some processor busy, the looks quiet) | a change of the set or a shutdown (`unpark`) wakes it; a processor that wakes (`woke`) does not: the nap ends on time |
/// | `PARKED` | the monitor, before it parks on `wake` (every processor asleep) | `unpark` and `woke` wake it |
pub(crate) struct Monitor {
    parked: AtomicU8,
    wake: AtomicU32,
    /// Nobody watches (see the module docs).
    vacant: AtomicBool,
    /// What the watch remembers between looks, handed from watcher to
    /// watcher (only the watcher locks it, for as long as it watches).
    pub(super) state: Mutex<Option<WatchState>>,
}

impl Monitor {
    pub(crate) fn new() -> Monitor {
        Monitor {
            parked: AtomicU8::new(AWAKE),
            wake: AtomicU32::new(0),
            vacant: AtomicBool::new(false),
            state: Mutex::new(None),
        }
    }

    /// Leaves the watch vacant: a watcher took a processor and could not
    /// start a successor.
    pub(crate) fn leave_vacant(&self) {
        self.vacant.store(true, SeqCst);
    }

    /// Claims a vacant watch for the calling activation, which is done
    /// driving; whether it was vacant.
    pub(crate) fn claim_vacancy(&self) -> bool {
        self.vacant.load(Relaxed) && self.vacant.swap(false, SeqCst)
    }

    /// Wakes the monitor if it parked. Fenced: a caller's stores before
    /// (a processor no longer willing to yield, the shutdown flag) are
    /// seen by a monitor that raised `parked` too late to be found here
    /// (see [`Monitor::park`]).
    #[inline]
    pub(crate) fn unpark(&self) {
        std::sync::atomic::fence(SeqCst);
        if self.parked.load(Relaxed) != AWAKE {
            self.unpark_slow();
        }
    }

    /// A sleeping processor woke: wakes the monitor if it parked (every
    /// processor was asleep), not if it naps. A nap is at most
    /// [`LONGEST_NAP`](super::LONGEST_NAP) and is taken only while the looks find nothing
    /// that only the monitor would notice; ending it at every wake cost a
    /// socket server a futex wake and a look per request. Fenced as
    /// [`unpark`](Monitor::unpark).
    #[inline]
    pub(crate) fn woke(&self) {
        std::sync::atomic::fence(SeqCst);
        if self.parked.load(Relaxed) == PARKED {
            self.unpark_slow();
        }
    }

    #[cold]
    fn unpark_slow(&self) {
        self.parked.store(AWAKE, SeqCst);
        self.wake.store(1, SeqCst);
        sys::futex_wake_one(&self.wake);
    }

    /// Sleeps `d` between two looks, or until `unpark` (the set changed,
    /// or the runtime shuts down). An `unpark` just before the flag is up
    /// is missed: the look comes one nap late.
    pub(super) fn nap(&self, d: Duration) {
        self.sleep_unless_unparked(NAPPING, Some(d), || true);
    }

    /// Parks while every processor sleeps, with no timeout: an idle runtime
    /// wakes no kernel thread. Nothing is missed: the monitor raises
    /// `parked` and fences before it reads the processors' words and the
    /// shutdown flag, and whoever changes those fences before it reads
    /// `parked` ([`Monitor::unpark`]): one of the two sees the other.
    pub(super) fn park(&self, shared: &Shared) {
        self.sleep_unless_unparked(PARKED, None, || shared.all_idle() && !shared.is_shut_down());
    }

    /// Sets `parked` to `how`, then sleeps on `wake` (for at most `d`, if
    /// given) if `wanted` still holds, until woken.
    fn sleep_unless_unparked(&self, how: u8, d: Option<Duration>, wanted: impl FnOnce() -> bool) {
        self.wake.store(0, SeqCst);
        self.parked.store(how, SeqCst);
        std::sync::atomic::fence(SeqCst);
        if wanted() {
            sys::futex_wait(&self.wake, 0, d);
        }
        self.parked.store(AWAKE, SeqCst);
    }
}
