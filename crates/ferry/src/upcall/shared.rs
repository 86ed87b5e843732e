//! The runtime's shared state ([`Shared`]): the processors' set, their
//! activation words, the kernel threads that drive them, the monitor and
//! the settings they act on; and how a thread's header reaches it (the
//! [`Schedule`] implementation) and how a processor reaches it when it
//! idles (the [`Host`] implementation).
//!
//! This file owns the runtime-wide operations over that state (scheduling a
//! thread from anywhere, handing a lent processor over, growing and
//! shrinking the set, shutting down); it must not switch contexts itself.

use std::io;
use std::ops::Deref;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::Takeover;
use super::Words;
use super::deadlock::Detector;
use super::{Activation, Activations, Assignment, Monitor, PerProcessor, enter};
use crate::header::raw;
use crate::header::{Ready, Schedule, Thread};
use crate::processor::{ACTIVE, Host, Processor, STARTING, STOPPED, STOPPING, Set, Settings};

/// State every processor, kernel thread and thread of one runtime shares:
/// the processors' [`Set`] (which it derefs to) and what the kernel threads
/// that drive them share.
pub(crate) struct Shared {
    /// The processors and what they share among themselves (the
    /// processor's own view of the runtime).
    pub(crate) set: Set,
    /// Each processor's activation words, by processor index.
    words: Box<[PerProcessor]>,
    /// The kernel threads that drive processors, and the spare pool.
    pub(crate) activations: Activations,
    pub(crate) monitor: Monitor,
    /// How long a lent processor waits before a spare takes it; zero: at
    /// once when work waits for it.
    pub(crate) handoff_after: Duration,
    /// Preemption time slice, if any.
    pub(crate) time_slice: Option<Duration>,
    /// Whether the runtime uses the fine-grain policy: the monitor then
    /// enforces each processor's quantum word instead of `time_slice`.
    pub(crate) fine_grain: bool,
    /// Whether the monitor takes over from unannounced blocking.
    pub(crate) take_over_unannounced: bool,
    /// Whether busy pinned processors get stand-ins (`upcall::stand_in`).
    pub(crate) stand_ins: bool,
    /// What to do when every thread is blocked for good.
    pub(crate) deadlock: Detector,
    /// What the monitor publishes while it watches (the stats page), if
    /// the runtime publishes one; set once at its start.
    pub(crate) publish: std::sync::OnceLock<Box<dyn super::Publish>>,
    /// Time zero of the `*_at` words.
    epoch: Instant,
    /// This `Shared`, for handing to new kernel threads.
    this: Weak<Shared>,
}

/// A thread reaches its runtime through its header (see `header`).
impl Schedule for Shared {
    #[inline]
    fn schedule(&self, t: Thread, why: Ready) {
        Shared::schedule(self, t, why);
    }

    fn stop_terminated(&self) -> ! {
        super::stop_terminated()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Thread {
    /// The runtime the thread belongs to.
    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        self.header()
            .scheduler
            .as_any()
            .downcast_ref::<Shared>()
            .expect("every thread's scheduler is a ferry runtime")
    }
}

/// How a runtime's [`Shared`] is made.
pub(crate) struct Config {
    /// Processors the runtime may hold.
    pub(crate) max_processors: usize,
    /// Processors that start (the first `start`; at least one).
    pub(crate) start: usize,
    /// The default stack size of a thread.
    pub(crate) stack_size: usize,
    /// Spins of an idle processor before it sleeps.
    pub(crate) spin_tries: u32,
    /// Kernel threads the runtime may have at once.
    pub(crate) max_activations: usize,
    /// See [`Shared::handoff_after`].
    pub(crate) handoff_after: Duration,
    /// See [`Shared::time_slice`].
    pub(crate) time_slice: Option<Duration>,
    /// See [`Shared::take_over_unannounced`].
    pub(crate) take_over_unannounced: bool,
    /// See [`Shared::stand_ins`].
    pub(crate) stand_ins: bool,
    /// Whether processors account each thread's run time.
    pub(crate) account_cpu: bool,
    /// What to do on a deadlock.
    pub(crate) on_deadlock: super::deadlock::Deadlock,
    /// The scheduling policy of every processor.
    pub(crate) policy: crate::sched::SchedPolicy,
}

impl Shared {
    /// The runtime's shared state, with processors `..config.start`
    /// starting.
    pub(crate) fn build(config: &Config) -> Arc<Shared> {
        let max = config.max_processors;
        let shared = Arc::new_cyclic(|this| Shared {
            set: Set::new(&Settings {
                processors: max,
                stack_size: config.stack_size,
                spin_tries: config.spin_tries,
                account_cpu: config.account_cpu,
                policy: config.policy,
            }),
            words: (0..max).map(|_| PerProcessor::new()).collect(),
            activations: Activations::new(config.max_activations.max(2 * max + 2)),
            monitor: Monitor::new(),
            handoff_after: config.handoff_after,
            time_slice: config.time_slice,
            fine_grain: config.policy == crate::sched::SchedPolicy::FineGrain,
            take_over_unannounced: config.take_over_unannounced,
            stand_ins: config.stand_ins,
            deadlock: Detector::new(config.on_deadlock),
            publish: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            this: this.clone(),
        });
        let host: &dyn Host = &*shared;
        // SAFETY: once, before any kernel thread runs a processor; the
        // runtime owns the set (so outlives it) and, in its `Arc`, does not
        // move.
        unsafe { shared.set.set_host(host) };
        for p in &shared.processors[..config.start] {
            p.membership.store(STARTING, Relaxed);
        }
        shared
    }

    /// The runtime processor `p` belongs to.
    #[inline]
    pub(crate) fn of(p: &Processor) -> &Shared {
        let set = p.shared();
        debug_assert!(
            set.host().as_any().downcast_ref::<Shared>().is_some(),
            "every processor's host is a ferry runtime"
        );
        // SAFETY: a set gets a host only in `Shared::build`, which gives it
        // the `Shared` that owns it (the debug check above says so), and the
        // runtime outlives its processors.
        unsafe { &*set.host_addr().cast::<Shared>() }
    }

    /// Processor `p`'s activation words.
    #[inline]
    pub(crate) fn words(&self, p: &Processor) -> &PerProcessor {
        &self.words[p.index]
    }

    /// Makes `t` runnable: through the calling processor's policy if it is
    /// one of this runtime's, else on the injector; and lets an idle
    /// processor know.
    pub(crate) fn schedule(&self, t: Thread, why: Ready) {
        match enter() {
            Some(mut e) if std::ptr::eq(e.p.shared(), &self.set) => {
                e.p.make_ready(e.tok.rb(), t, why)
            }
            // Off the runtime (a kernel thread, or another runtime's processor).
            _ => match self.injector.push(t) {
                Ok(()) => self.notify_work(),
                // The runtime ended: nothing runs it any more. One that
                // never ran (a thread made suspended, resumed after the
                // end) is completed as abandoned, so that its join says
                // so, as for the threads still queued at the end.
                Err(t) => {
                    // SAFETY: the injector refuses pushes only once every
                    // processor has stopped, so the thread never runs; we
                    // hold the reference the queue would have held.
                    unsafe { raw::abandon(t.as_ptr()) };
                    drop(t);
                }
            },
        }
    }

    /// Makes a spawned thread `t` runnable as [`Shared::schedule`] does;
    /// gives it back if the runtime has ended, so that the spawn fails.
    ///
    /// Race-free against the end: a thread queued on a processor, or on
    /// the injector before `run` closes it (after every processor has
    /// stopped), is either run or, if the runtime ends first, handed to
    /// `raw::abandon` by `drain`, whose join then reports it; a push
    /// after the close is refused here.
    pub(crate) fn schedule_spawned(&self, t: Thread) -> Result<(), Thread> {
        match enter() {
            Some(mut e) if std::ptr::eq(e.p.shared(), &self.set) => {
                e.p.make_ready(e.tok.rb(), t, Ready::Spawned);
                Ok(())
            }
            _ => {
                self.injector.push(t)?;
                self.notify_work();
                Ok(())
            }
        }
    }

    /// The runtime as an `Arc`, for a new kernel thread to hold.
    pub(crate) fn arc(&self) -> Arc<Shared> {
        self.this
            .upgrade()
            .expect("the runtime is alive while it runs")
    }

    /// Nanoseconds since the runtime's epoch, for the `*_at` words.
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The moment a `*_at` word names.
    pub(crate) fn instant_of(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Hands lent processor `p` to a spare activation (which takes it only
    /// if it is still lent when it gets there).
    ///
    /// At most one taker is on its way per processor (`standby`): a lend
    /// while one is on its way (or stands in) wakes nobody, that taker takes
    /// this lend too. `how`: [`Takeover::WhenIdle`] when the lender itself asks (the spare waits
    /// for the lender's core to go idle (see `upcall::activation`).
    pub(crate) fn hand_lent(&self, p: &'static Processor, how: Takeover) {
        if !p.upcall().raise_standby(super::ON_WAY) {
            return;
        }
        crate::probe_mark!(crate::probe::STANDBY_RAISED);
        if !self.activations.hand(&self.arc(), Assignment::Take(p, how)) {
            // Nobody was started: the word is still ours.
            p.upcall().standby.store(0, SeqCst);
        }
    }

    /// How many processors are in the set (or on their way in).
    pub(crate) fn active_processors(&self) -> usize {
        self.processors
            .iter()
            .filter(|p| matches!(p.membership.load(Relaxed), ACTIVE | STARTING))
            .count()
    }

    /// Whether every processor in the set sleeps in `idle` and none is lent
    /// or taken over (the monitor has nothing to watch).
    pub(crate) fn all_idle(&self) -> bool {
        self.processors.iter().all(|p| {
            let m = p.membership.load(Relaxed);
            m == STOPPED
                || (m == ACTIVE
                    && p.is_willing_to_yield()
                    && p.upcall().driver.load(Relaxed) & super::LENT == 0)
        })
    }

    /// Changes the set of processors to the first `n` (at least one, at
    /// most all the runtime has).
    pub(crate) fn set_processors(&self, n: usize) -> io::Result<()> {
        // From a ferry thread: the change takes the activation list's and
        // pool's std mutexes (and may start a kernel thread under them),
        // which the monitor and lending threads take too; its thread must
        // not be switched out holding them.
        let _off = super::preempt::preemption_off();
        self.change_processors(n.max(1), Duration::ZERO)
    }

    /// Changes the set of processors to the first `n` (at most all the
    /// runtime has), as decided `age` ago (a processor allocation daemon's
    /// order: the `ProcessorAdded`/`ProcessorRemoved` latencies count from
    /// the decision).
    ///
    /// `n` may be zero: only a kernel thread outside the runtime (the
    /// allocation follower) asks for that, for a process out of turn. No
    /// thread of the runtime runs until a processor is added again;
    /// wakes, spawns and completions wait in the injector, and deadlock
    /// detection, which needs a processor asleep, stays quiet.
    pub(crate) fn change_processors(&self, n: usize, age: Duration) -> io::Result<()> {
        let n = n.min(self.processors.len());
        let age = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
        let now = self.now_ns().saturating_sub(age);
        for (i, p) in self.processors.iter().enumerate() {
            let p = p.as_static();
            if i < n {
                if p.membership
                    .compare_exchange(STOPPING, ACTIVE, AcqRel, Acquire)
                    .is_ok()
                {
                    continue;
                }
                if p.membership
                    .compare_exchange(STOPPED, STARTING, AcqRel, Acquire)
                    .is_ok()
                {
                    for q in self.processors.iter() {
                        q.reset_home();
                    }
                    p.upcall().changed_at.store(now, Relaxed);
                    if !self.activations.hand(&self.arc(), Assignment::Start(p)) {
                        p.membership.store(STOPPED, Release);
                        return Err(io::Error::other(
                            "ferry: no kernel thread to drive an added processor",
                        ));
                    }
                }
            } else {
                let stopping = p
                    .membership
                    .compare_exchange(ACTIVE, STOPPING, AcqRel, Acquire)
                    .or_else(|_| {
                        p.membership
                            .compare_exchange(STARTING, STOPPING, AcqRel, Acquire)
                    })
                    .is_ok();
                if stopping {
                    p.upcall().changed_at.store(now, Relaxed);
                    self.nudge_stopping(p);
                }
            }
        }
        self.monitor.unpark();
        Ok(())
    }

    /// Makes a processor that is leaving the set notice: woken if it
    /// sleeps, handed to a spare if it is lent, its thread preempted if one
    /// runs. The monitor repeats the preemption until it has stopped.
    pub(crate) fn nudge_stopping(&self, p: &'static Processor) {
        p.wake();
        // A sleeping stand-in leaves (or takes a lend to stop it).
        super::wake_stand_in(p);
        let d = p.upcall().driver.load(Acquire);
        if d & super::LENT != 0 {
            self.hand_lent(p, Takeover::AtOnce);
        } else if p.dispatch.load(Relaxed) & 1 != 0
            // SAFETY: `d` is a driver word of this live runtime.
            && let Some(a) = unsafe { Activation::from_word(d) }
        {
            super::signal(a);
        }
    }

    /// Wakes every kernel thread of the runtime that waits.
    fn wake_everyone(&self) {
        for p in self.processors.iter() {
            p.wake();
            super::wake_stand_in(p);
        }
        self.activations.wake_pool();
        // And every activation's own sleep, whatever its role: a sleeper
        // no word names any more (a stand-in whose processor's word moved
        // on) would otherwise keep the run from ending, since no sleep of
        // the runtime has a timeout. Each looks at the shutdown flag when
        // it wakes.
        self.activations.for_each(|a| a.wake_up());
        self.monitor.unpark();
    }

    /// Lets every queued thread go, after every processor has stopped, and
    /// closes the injector: a thread that never ran is completed as
    /// abandoned (its join returns an error saying the runtime ended first).
    pub(crate) fn drain(&self) {
        let abandon = |t: Thread| {
            // SAFETY: every processor stopped, so the thread never runs;
            // `t` is the reference its queue held.
            unsafe { raw::abandon(t.as_ptr()) };
        };
        for p in self.processors.iter() {
            // SAFETY: called by `run` after every processor's kernel thread
            // has left its loop and been joined, so nobody else touches them.
            unsafe { p.drain(self.words(p).is_lent(), abandon) };
        }
        self.injector.close(abandon);
    }

    /// Stops every processor's scheduler loop.
    pub(crate) fn shut_down(&self) {
        // Not preempted while it holds the pool's and the activations'
        // locks: a ferry thread stopped there by its time slice would never
        // run again (the processors are stopping) and keep them for ever.
        let critical = super::critical_enter();
        self.set.mark_shut_down();
        self.wake_everyone();
        drop(critical);
    }
}

impl Deref for Shared {
    type Target = Set;

    fn deref(&self) -> &Set {
        &self.set
    }
}

/// A processor idles through its runtime's deadlock detection and monitor.
impl Host for Shared {
    fn watches_deadlocks(&self) -> bool {
        self.deadlock.is_on()
    }

    fn quiet(&self) -> Option<u64> {
        super::deadlock::quiet(self)
    }

    fn confirm(&self, seen: u64) {
        super::deadlock::confirm(self, seen);
    }

    fn woke(&self) {
        self.monitor.woke();
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The error of a spawn on a runtime that has shut down (kind
/// `BrokenPipe`: the side that would run the thread is gone, as a pipe's
/// reader).
pub(crate) fn shut_down_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "ferry: the runtime has shut down; no thread can be spawned on it",
    )
}
