//! Event sources: everything that can make a thread runnable from outside
//! the run queues, behind one seam. A processor asks the sources in one
//! place when it looks for work ([`Sources`]), and a parked processor
//! sleeps in one kernel wait that covers all of them.
//!
//! This room owns the sources (today [`timer::Timers`], a timing wheel of
//! the runtime's sleepers, the runtime's upcall queue,
//! [`upcalls::Upcalls`], memory other processes write,
//! [`polled::Polling`]: `rpc` channels, socket readiness,
//! [`readiness::Readiness`], and file completions, [`ring::Ring`]) and
//! the contract below; it must not
//! switch contexts, choose which thread runs (a source hands threads and
//! events to the processor's policy through [`Deliver`]) or park a
//! processor (the processor does, in `Processor::idle`).
//!
//! # The contract of a source
//!
//! | question | method | who asks, when | cost |
//! |----------|--------|----------------|------|
//! | is there work for a processor? | [`Source::is_ready`] | a processor's own kernel thread: at switches ([`Every`]; [`Sources::ready`]), in its idle spin, and once more after it announced itself a sleeper | [`Every::Switch`]: one relaxed load; [`Every::Ticks`]: one load, and the clock only when something is pending |
//! | hand it over | [`Source::deliver`] | the same processor, inside the runtime (entered, or its scheduler loop), never while it holds its policy | a lock and a few queue operations; cold |
//! | when must a parked processor look again? | [`Source::until_next`] | a processor about to park | a load and the clock |
//!
//! How a source wakes a parked processor, so that one kernel wait covers
//! every source:
//!
//! | a source that becomes ready | does | so the parked processor |
//! |-----------------------------|------|-------------------------|
//! | from another kernel thread (an upcall posted; later: a completion) | publishes, then calls the runtime's `notify_work` (`notify_work_anywhere` off a processor) | is woken through its sleep word (`FUTEX_WAKE`), unless a spinning processor will find the work |
//! | from another process (a channel's call or reply, [`polled`]) | publishes in shared memory, then rings this side's doorbell if it says a processor sleeps on it | sleeps on its sleep word and every doorbell at once (`futex_waitv`), after a spin of adaptive length |
//! | at a moment (a timer) | reports the moment through `until_next` | bounds its `FUTEX_WAIT` by the earliest moment of all sources |
//!
//! | on a socket (readiness, [`readiness`]) | is harvested from the runtime's epoll instance: by a busy processor at a scheduling point, or by the one idle processor blocked in `epoll_wait` | when it is that one processor, is woken by a write to the reactor's eventfd as well as through its sleep word |
//! | a file operation completes (the ring, [`ring`]) | is reaped by its own thread right after submitting, else by a processor at every switch while operations are in flight; the kernel signals the ring's eventfd, which is in the reactor's epoll set (its waiters count as the reactor's) | when it is the poller, returns from `epoll_wait` and reaps |
//!
//! A parked processor's one kernel wait is thus `FUTEX_WAIT` on its sleep
//! word with a timeout, or, when polled entries exist, one `futex_waitv`
//! on its sleep word and their doorbells, or, for the one *poller* while
//! threads wait on sockets, `epoll_wait` on the runtime's epoll instance
//! (bounded by the polled entries' `POLL_PERIOD` while they exist: a
//! doorbell is a futex word, which epoll cannot wait on).
//!
//! Adding a source: implement [`Source`], add it to [`Sources`] (a field
//! and a line in `for_each_source!`); no run loop changes. The polled
//! entries are the one source asked through each processor's own list
//! ([`Local`]), since there are many of them and they come and go: see
//! [`polled`].

/// The atomics `doorbell` uses (loom's in its model).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, Ordering, fence};
}

pub(crate) mod doorbell;
pub(crate) mod polled;
pub(crate) mod readiness;
pub(crate) mod ring;
pub(crate) mod stats;
pub(crate) mod timer;
pub(crate) mod upcalls;

use std::time::{Duration, Instant};

pub(crate) use upcalls::{Posted, Upcalls};

use crate::sched::Event;
use polled::Polling;
use readiness::Readiness;
use ring::Ring;
use timer::Timers;

/// How often a busy processor (one that keeps switching between threads
/// and never idles) asks a source whether it is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Every {
    /// At every switch: the check is one relaxed load.
    Switch,
    /// Every [`Sources::TICKS`] switches: the check reads the clock.
    Ticks,
}

/// Where a source hands what it has: the calling processor.
pub(crate) trait Deliver {
    /// Hands `event` to the calling processor's policy; `cause` is when it
    /// happened (for the runtime's upcall statistics).
    fn event(&mut self, event: Event<'_>, cause: Instant);

    /// Threads were just queued here: lets an idle processor know.
    fn made_ready(&mut self);
}

/// One event source; see the module docs for the contract.
pub(crate) trait Source {
    /// How often a busy processor asks.
    const EVERY: Every;

    /// Whether the source has something for a processor now.
    fn is_ready(&self) -> bool;

    /// Hands what is ready to `to` (or wakes its threads, which reach
    /// their own processors); nothing if nothing is ready.
    fn deliver(&self, to: &mut dyn Deliver);

    /// How long a parked processor may sleep before this source needs a
    /// look without being woken; `None`: it wakes processors itself.
    fn until_next(&self) -> Option<Duration>;
}

/// The event sources of one runtime, asked in one place.
pub(crate) struct Sources {
    /// Sleeping threads, by deadline.
    pub(crate) timers: Timers,
    /// Scheduler-activation events posted for any processor.
    pub(crate) upcalls: Upcalls,
    /// Memory other processes write (`rpc` channels), asked at every
    /// switch through each processor's own list ([`Local`]).
    pub(crate) polled: Polling,
    /// Socket readiness: the runtime's epoll instance, made at the first
    /// socket that would block.
    pub(crate) readiness: Readiness,
    /// File operations through io_uring, made at the first one.
    pub(crate) ring: Ring,
}

/// What one processor keeps for the sources (only that processor touches
/// it): its list of the polled entries.
#[derive(Default)]
pub(crate) struct Local {
    /// The polled entries this processor looks at.
    pub(crate) polled: polled::Local,
}

/// Runs `$body` with `$s` bound to each source of `$sources`, in order.
macro_rules! for_each_source {
    ($sources:expr, |$s:ident| $body:expr) => {{
        {
            let $s = &$sources.upcalls;
            $body
        }
        {
            let $s = &$sources.timers;
            $body
        }
        {
            let $s = &$sources.readiness;
            $body
        }
        {
            let $s = &$sources.ring;
            $body
        }
    }};
}

impl Sources {
    /// A busy processor asks the [`Every::Ticks`] sources once per this
    /// many switches.
    pub(crate) const TICKS: u32 = 64;

    pub(crate) fn new() -> Sources {
        Sources {
            timers: Timers::new(),
            upcalls: Upcalls::new(),
            polled: Polling::new(),
            readiness: Readiness::new(),
            ring: Ring::new(),
        }
    }

    /// Whether a source has something for a processor: the
    /// [`Every::Switch`] sources always, the others too when `all` (a busy
    /// processor's every [`Sources::TICKS`]-th switch, a yield, a pass of
    /// the scheduler loop). Loads only, inline; [`Sources::deliver`] is
    /// called only when this says so, so that the switch path keeps no
    /// delivery state. The polled entries are asked at every switch,
    /// through this processor's list, `local`.
    #[inline(always)]
    pub(crate) fn ready(&self, all: bool, local: &mut Local) -> bool {
        let mut ready = false;
        for_each_source!(self, |s| ready |=
            (all || at_every_switch(s)) && s.is_ready());
        ready || self.polled.is_ready(&mut local.polled)
    }

    /// [`Sources::ready`] with `all`, for a processor about to sleep: every
    /// source but readiness, whose harvest such a processor makes as the
    /// poller instead of its sleep (`Processor::idle`), so that an idle
    /// runtime with threads waiting on sockets does not harvest in a loop.
    pub(crate) fn ready_to_sleep(&self, local: &mut Local) -> bool {
        self.upcalls.is_ready()
            || self.timers.is_ready()
            || self.ring.is_ready()
            || self.polled.is_ready(&mut local.polled)
    }

    /// Whether a source has something, or may get something with no
    /// processor's help (a polled entry exists, or threads wait on
    /// sockets or on file operations in the ring, which the kernel or a
    /// peer may complete): for a look from outside the
    /// processors (the deadlock watch), which has no [`Local`].
    pub(crate) fn ready_or_external(&self) -> bool {
        let mut ready = false;
        for_each_source!(self, |s| ready |= at_every_switch(s) && s.is_ready());
        ready || self.polled.active() || self.readiness.waiting()
    }

    /// Delivers what the sources [`Sources::ready`] looks at (with the same
    /// `all`) have.
    #[cold]
    pub(crate) fn deliver(&self, all: bool, local: &mut Local, to: &mut dyn Deliver) {
        for_each_source!(self, |s| if (all || at_every_switch(s)) && s.is_ready() {
            s.deliver(to);
        });
        self.polled.deliver(&mut local.polled);
    }

    /// How long a parked processor may sleep: until the earliest moment a
    /// source named, or `None` (until woken).
    pub(crate) fn until_next(&self) -> Option<Duration> {
        let mut next: Option<Duration> = None;
        for_each_source!(self, |s| if let Some(d) = s.until_next() {
            next = Some(next.map_or(d, |n| n.min(d)));
        });
        next
    }
}

/// Whether a busy processor asks `S` at every switch.
#[inline]
const fn at_every_switch<S: Source>(_: &S) -> bool {
    matches!(S::EVERY, Every::Switch)
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::header::Unparker;

    /// A processor stand-in that records what the sources hand it.
    #[derive(Default)]
    struct Recorder {
        removed: RefCell<Vec<usize>>,
        made_ready: RefCell<usize>,
    }

    impl Deliver for Recorder {
        fn event(&mut self, event: Event<'_>, _cause: Instant) {
            match event {
                Event::ProcessorRemoved(i) => self.removed.borrow_mut().push(i),
                other => panic!("unexpected {other:?}"),
            }
        }

        fn made_ready(&mut self) {
            *self.made_ready.borrow_mut() += 1;
        }
    }

    #[test]
    fn posted_events_are_delivered_at_the_next_switch() {
        let sources = Sources::new();
        let mut to = Recorder::default();
        let mut local = Local::default();
        assert!(!sources.ready(false, &mut local) && !sources.ready(true, &mut local));
        sources.deliver(false, &mut local, &mut to);
        assert!(to.removed.borrow().is_empty());
        sources
            .upcalls
            .post(Posted::ProcessorRemoved(3), Instant::now());
        assert!(sources.ready(false, &mut local) && sources.ready(true, &mut local));
        assert_eq!(sources.until_next(), None, "posted events have no deadline");
        sources.deliver(false, &mut local, &mut to);
        assert_eq!(*to.removed.borrow(), [3]);
        assert_eq!(*to.made_ready.borrow(), 1);
        assert!(!sources.ready(false, &mut local), "delivered once");
    }

    #[test]
    fn a_due_timer_fires_at_a_tick_or_a_poll_not_at_every_switch() {
        let sources = Sources::new();
        let mut to = Recorder::default();
        let mut local = Local::default();
        let (later, due) = (timer::Entry::new(), timer::Entry::new());
        let me = || Unparker::Kernel(std::thread::current());
        // SAFETY: both entries stay here, and are cancelled below if they
        // have not fired.
        unsafe {
            sources
                .timers
                .arm(&later, Instant::now() + Duration::from_secs(3600), me());
        }
        let wait = sources.until_next().expect("a timer is pending");
        assert!(wait > Duration::from_secs(3000));
        // SAFETY: as above.
        unsafe {
            sources
                .timers
                .arm(&due, Instant::now() - Duration::from_millis(1), me())
        };
        assert!(sources.ready(true, &mut local));
        assert!(
            !sources.ready(false, &mut local),
            "a clock source is not asked at every switch"
        );
        sources.deliver(false, &mut local, &mut to);
        assert!(!due.fired());
        sources.deliver(true, &mut local, &mut to);
        assert!(due.fired());
        assert!(!later.fired());
        assert!(!sources.ready(true, &mut local));
        sources.deliver(true, &mut local, &mut to);
        assert!(!later.fired());
        assert!(
            sources.until_next().is_some(),
            "the later timer is still pending"
        );
        // SAFETY: armed in these timers.
        assert!(unsafe { sources.timers.cancel(&later) });
        assert_eq!(sources.until_next(), None);
    }
}
