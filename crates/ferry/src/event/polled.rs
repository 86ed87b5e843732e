//! Polled memory: event sources that live in memory another process writes
//! (today `rpc` channels), which a processor finds by looking, not by being
//! told. An event source (see the parent module), with three differences
//! from the others: there are many of them, registered and dropped at run
//! time by a room above (`rpc` implements [`Polled`]); each processor keeps
//! its own list of them ([`Local`]), so that asking costs no lock and no
//! shared write; and a parked processor can sleep on their doorbells.
//!
//! This file owns the registry, the per-processor lists, the adaptive spin
//! budget and the doorbell half of the idle wait; it must not know what a
//! channel holds (that is [`Polled`]'s implementor) and must not park a
//! processor (`Processor::idle` does, calling [`Local::sleep`]).
//!
//! # Registry and lists
//!
//! | word | written by | read by |
//! |------|------------|---------|
//! | `list` (mutex) | [`Polling::register`], [`Polling::unregister`] | a processor refreshing its [`Local`] (`try_lock`: one that finds it held keeps its old copy and tries at its next look) |
//! | `version` | bumped (Release) after each change of `list` | every processor at each look (Relaxed, then Acquire on a change) |
//! | `count` | with `list` | the deadlock watch (an external source exists) |
//!
//! A processor's [`Local`] holds `Arc`s of the entries it saw at its last
//! refresh; an entry dropped from the registry is freed when the last
//! processor that saw it refreshes. [`Polling::unregister`] returns after
//! bumping the version; the runtime (`Set::add_polled`,
//! `Set::remove_polled`) wakes every processor after a change, so that
//! each refreshes promptly: to let go, or to wait on a new doorbell.
//!
//! # Doorbells
//!
//! Each entry may name a doorbell word of this side in shared memory
//! ([`Polled::doorbell`]): [`AWAKE`](super::doorbell::AWAKE) or [`ASLEEP`]. The last processor of
//! the runtime to go to sleep ([`Local::sleep`]) stores [`ASLEEP`] in every
//! doorbell (SeqCst), looks at the entries once more, and only then sleeps
//! in one `futex_waitv` on its own sleep word and every doorbell (at most
//! [`MAX_DOORBELLS`]; with more entries it wakes every [`POLL_PERIOD`] to look
//! at the rest). A peer that has published something issues a SeqCst fence,
//! reads the doorbell and, if it says [`ASLEEP`], swaps in [`AWAKE`](super::doorbell::AWAKE) and
//! wakes it (`FUTEX_WAKE`, a shared futex: the word lives in the peer's
//! mapping too). The fences pair as in Dekker's protocol: either the
//! sleeper's last look sees the publication, or the peer sees [`ASLEEP`].
//! A woken sleeper puts back [`AWAKE`](super::doorbell::AWAKE) wherever it left [`ASLEEP`].
//!
//! Nothing in a doorbell is trusted: a peer that keeps changing ours makes
//! `futex_waitv` return at once (the value differs); the sleeper then falls
//! back to a plain sleep bounded by [`POLL_PERIOD`] for that idle spell, so a
//! hostile peer costs polls, never a spinning core.
//!
//! # Adaptive spin
//!
//! An idle processor of a runtime with entries spins, looking, for the
//! [`Polling::spin_budget`] before it sleeps (001's processors poll their
//! channels rather than sleep). The budget adapts between [`MIN_SPIN`] and
//! [`MAX_SPIN`], judged each time a polled entry ends an idle spell: a
//! spell no longer than twice the budget doubles it (spinning caught the
//! work, or a little more spinning would have); a longer one halves it
//! (nobody calls that often, or the peer shares this core and cannot run
//! while we spin: then only the doorbell helps, and spinning wastes the
//! peer's time).
//!
//! Halving alone could not come back: once the budget is short, every
//! spell ends in a sleep and a doorbell wake, which makes it long (tens of
//! µs) however soon the work came, so it keeps the budget short. That is
//! where two unpinned processes start when the kernel first runs them on
//! one core: calls took 30-50 µs each ever after where 0.5 µs was
//! possible. So while the budget is below [`MAX_SPIN`], one spell in a
//! *probe gap* spins the whole [`MAX_SPIN`] ([`Polling::spell_budget`]): if
//! an entry ends it within that spin, spinning pays again and the budget
//! jumps to twice that spell (the doubling rule takes it on from there) and
//! the gap goes back to [`MIN_PROBE_GAP`] spells; if not, the gap doubles,
//! up to [`MAX_PROBE_GAP`]. Where spinning never pays, probes waste at most
//! one [`MAX_SPIN`] in [`MAX_PROBE_GAP`] spells, each of which sleeps anyway.
//!
//! A probe that did not pay also tells the idle processor
//! ([`Polling::idled`] says so), which may move its home to another CPU:
//! its peer may share its core, pinned there too, and never run while it
//! spins (`Processor::move_home_by_chance`).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::doorbell;
use crate::sys;

pub(crate) use super::doorbell::ASLEEP;
#[cfg(test)]
use super::doorbell::AWAKE;
/// The most doorbells one sleep waits on (`futex_waitv` takes 128 words,
/// one is the processor's own).
pub(crate) const MAX_DOORBELLS: usize = 127;
/// How often a sleeper looks at entries whose doorbells it cannot wait on.
pub(crate) const POLL_PERIOD: Duration = Duration::from_millis(1);
/// The shortest spin budget.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(2);
/// The longest spin budget.
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(200);
/// Idle spells between two probes of [`MAX_SPIN`] after a probe that paid.
pub(crate) const MIN_PROBE_GAP: u32 = 16;
/// The most idle spells between two probes (after probes that did not pay).
pub(crate) const MAX_PROBE_GAP: u32 = 1024;

/// Memory a processor polls: implemented by the room that owns it.
pub(crate) trait Polled: Send + Sync {
    /// Whether there is something to hand over: loads only.
    fn is_ready(&self) -> bool;

    /// Hands it over: wakes the threads it concerns (they reach their own
    /// processors), or queues work for them. Called by one processor at a
    /// time per entry is not guaranteed: the implementor serialises.
    fn deliver(&self);

    /// This side's doorbell word in shared memory, if the peer rings one.
    fn doorbell(&self) -> Option<&AtomicU32>;
}

/// The polled entries of one runtime.
pub(crate) struct Polling {
    list: Mutex<Vec<Arc<dyn Polled>>>,
    version: AtomicU64,
    count: AtomicUsize,
    spin_ns: AtomicU64,
    /// Idle spells between two probes (see the module docs).
    probe_gap: AtomicU32,
    /// Idle spells until the next probe.
    probe_in: AtomicU32,
}

impl Polling {
    pub(crate) fn new() -> Polling {
        Polling {
            list: Mutex::new(Vec::new()),
            version: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            spin_ns: AtomicU64::new(MAX_SPIN.as_nanos() as u64 / 4),
            probe_gap: AtomicU32::new(MIN_PROBE_GAP),
            probe_in: AtomicU32::new(MIN_PROBE_GAP),
        }
    }

    /// Adds `entry`; processors see it at their next look.
    pub(crate) fn register(&self, entry: Arc<dyn Polled>) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.push(entry);
        self.count.store(list.len(), Relaxed);
        self.version.fetch_add(1, Release);
    }

    /// Drops `entry` from the registry (processors let go of it at their
    /// next look; wake the sleeping ones to make that prompt).
    pub(crate) fn unregister(&self, entry: &Arc<dyn Polled>) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|e| !Arc::ptr_eq(e, entry));
        self.count.store(list.len(), Relaxed);
        self.version.fetch_add(1, Release);
    }

    /// Whether any entry is registered: an outside source of work exists.
    pub(crate) fn active(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    /// How long an idle processor spins before it sleeps.
    pub(crate) fn spin_budget(&self) -> Duration {
        Duration::from_nanos(self.spin_ns.load(Relaxed))
    }

    /// How long an idle processor spins in the spell it begins now: the
    /// budget, or [`MAX_SPIN`] when a probe is due (see the module docs).
    /// Pass it back to [`Polling::idled`] when the spell ends. (Processors
    /// share the count with relaxed loads and stores: a probe more or less
    /// under a race is harmless.)
    pub(crate) fn spell_budget(&self) -> Duration {
        let budget = self.spin_budget();
        if budget >= MAX_SPIN {
            return budget;
        }
        match self.probe_in.load(Relaxed) {
            0 => {
                self.probe_in.store(self.probe_gap.load(Relaxed), Relaxed);
                MAX_SPIN
            }
            left => {
                self.probe_in.store(left - 1, Relaxed);
                budget
            }
        }
    }

    /// An idle spell of `idle` (spinning for `spun`, then perhaps
    /// sleeping) ended; `by_entry` if a polled entry had something then.
    /// See the module docs for the rule. Whether the spell was a probe that
    /// spinning did not pay (the caller may then move, see the module
    /// docs).
    pub(crate) fn idled(&self, idle: Duration, spun: Duration, by_entry: bool) -> bool {
        if !by_entry {
            return false;
        }
        let budget = self.spin_budget();
        let probe = spun > budget;
        let mut missed = false;
        let next = if idle <= budget * 2 {
            (budget * 2).min(MAX_SPIN)
        } else if probe && idle <= spun {
            // The probe's spin caught it: spinning pays again.
            self.probe_gap.store(MIN_PROBE_GAP, Relaxed);
            self.probe_in.store(MIN_PROBE_GAP, Relaxed);
            (idle * 2).clamp(budget * 2, MAX_SPIN)
        } else {
            if probe {
                let gap = (self.probe_gap.load(Relaxed) * 2).min(MAX_PROBE_GAP);
                self.probe_gap.store(gap, Relaxed);
                self.probe_in.store(gap, Relaxed);
            }
            missed = probe;
            (budget / 2).max(MIN_SPIN)
        };
        self.spin_ns.store(next.as_nanos() as u64, Relaxed);
        missed
    }

    /// Copies the registry into `local`, unless someone holds it: then
    /// `local` stays as it was (still behind, so the next look tries
    /// again). Never waits: a ferry thread may hold `list` when its
    /// preemption signal comes, and that signal's switch looks at the
    /// sources on the same kernel thread.
    #[cold]
    fn refresh(&self, local: &mut Local) {
        let Some(list) = crate::lock::try_lock(&self.list) else {
            return;
        };
        local.version = self.version.load(Acquire);
        local.list.clone_from(&list);
    }

    /// Whether an entry has something: one load when nothing changed and
    /// nothing is registered, else one look per entry.
    #[inline]
    pub(crate) fn is_ready(&self, local: &mut Local) -> bool {
        if self.version.load(Relaxed) != local.version {
            self.refresh(local);
        }
        local.list.iter().any(|e| e.is_ready())
    }

    /// Delivers what every ready entry has.
    #[cold]
    pub(crate) fn deliver(&self, local: &mut Local) {
        if self.version.load(Relaxed) != local.version {
            self.refresh(local);
        }
        for e in &local.list {
            if e.is_ready() {
                e.deliver();
            }
        }
    }
}

/// One processor's copy of the registry (touched only by that processor).
#[derive(Default)]
pub(crate) struct Local {
    version: u64,
    list: Vec<Arc<dyn Polled>>,
}

/// How a doorbell sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slept {
    /// An entry was ready before sleeping: not slept at all.
    Ready,
    /// Slept, then woken or timed out.
    Woke,
}

impl Local {
    /// Entries seen at the last refresh.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The last processor's sleep: rings-to-wake armed on every doorbell,
    /// then one `futex_waitv` on `own` (this processor's private sleep word,
    /// while it holds `own_expected`) and the doorbells, for at most
    /// `timeout`. See the module docs.
    pub(crate) fn sleep(
        &mut self,
        polling: &Polling,
        own: &AtomicU32,
        own_expected: u32,
        timeout: Option<Duration>,
    ) -> Slept {
        if polling.version.load(Relaxed) != self.version {
            polling.refresh(self);
        }
        let bells: Vec<&AtomicU32> = self
            .list
            .iter()
            .filter_map(|e| e.doorbell())
            .take(MAX_DOORBELLS)
            .collect();
        doorbell::arm(bells.iter().copied());
        let slept = !self.list.iter().any(|e| e.is_ready());
        if slept {
            let mut timeout = timeout;
            // Entries whose doorbells we cannot wait on, or a registry we
            // could not copy (held): look again within the poll period.
            let behind = polling.version.load(Relaxed) != self.version;
            if bells.len() < self.list.len() || behind {
                timeout = Some(timeout.map_or(POLL_PERIOD, |t| t.min(POLL_PERIOD)));
            }
            let waited =
                sys::futex_waitv_own_and_shared(own, own_expected, &bells, ASLEEP, timeout);
            if waited == Err(rustix::io::Errno::AGAIN)
                && own.load(Acquire) == own_expected
                && !self.list.iter().any(|e| e.is_ready())
            {
                // A doorbell did not hold ASLEEP and nothing is ready: not a
                // ring (a peer rings after publishing, and we looked after
                // our store), so a peer scribbles on it. Sleep on our own
                // word, briefly, and look again.
                sys::futex_wait(own, own_expected, Some(POLL_PERIOD));
            }
        }
        doorbell::disarm(bells.iter().copied());
        if !slept { Slept::Ready } else { Slept::Woke }
    }
}

/// Rings the peer's doorbell `bell` after publishing something for it:
/// wakes its sleeping processor if it sleeps; with `always`, makes the
/// wake call even if the doorbell says nobody sleeps (an urgent call).
/// Returns whether it made the wake call. See `doorbell` for the handshake.
#[inline]
pub(crate) fn ring(bell: &AtomicU32, always: bool) -> bool {
    doorbell::ring(bell, always, |b| sys::futex_wake_shared(b, 1))
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;

    struct Flag {
        ready: AtomicBool,
        delivered: AtomicUsize,
        bell: AtomicU32,
    }

    impl Polled for Flag {
        fn is_ready(&self) -> bool {
            self.ready.load(Acquire)
        }
        fn deliver(&self) {
            self.ready.store(false, Release);
            self.delivered.fetch_add(1, Relaxed);
        }
        fn doorbell(&self) -> Option<&AtomicU32> {
            Some(&self.bell)
        }
    }

    fn flag() -> Arc<Flag> {
        Arc::new(Flag {
            ready: AtomicBool::new(false),
            delivered: AtomicUsize::new(0),
            bell: AtomicU32::new(AWAKE),
        })
    }

    #[test]
    fn a_processor_sees_registrations_and_lets_go_of_dropped_entries() {
        let polling = Polling::new();
        let mut local = Local::default();
        assert!(!polling.is_ready(&mut local) && !polling.active());
        let f = flag();
        let entry: Arc<dyn Polled> = f.clone();
        polling.register(entry.clone());
        assert!(polling.active());
        assert!(!polling.is_ready(&mut local));
        assert_eq!(local.len(), 1);
        f.ready.store(true, Release);
        assert!(polling.is_ready(&mut local));
        polling.deliver(&mut local);
        assert_eq!(f.delivered.load(Relaxed), 1);
        assert!(!polling.is_ready(&mut local));
        polling.unregister(&entry);
        drop(entry);
        assert_eq!(
            Arc::strong_count(&f),
            2,
            "the processor's list still holds it"
        );
        f.ready.store(true, Release);
        assert!(
            !polling.is_ready(&mut local),
            "an unregistered entry is not asked"
        );
        assert_eq!(Arc::strong_count(&f), 1, "let go at the refresh");
    }

    #[test]
    fn a_ring_wakes_the_doorbell_sleeper_and_an_awake_side_is_not_rung() {
        let polling = Arc::new(Polling::new());
        let f = flag();
        polling.register(f.clone());
        assert!(!ring(&f.bell, false), "nobody sleeps: no wake call");
        let own = Arc::new(AtomicU32::new(0));
        let sleeper = {
            let (polling, own) = (polling.clone(), own.clone());
            std::thread::spawn(move || {
                let mut local = Local::default();
                loop {
                    let slept = local.sleep(&polling, &own, 0, Some(Duration::from_secs(30)));
                    if polling.is_ready(&mut local) {
                        return slept;
                    }
                }
            })
        };
        while f.bell.load(SeqCst) != ASLEEP {
            std::thread::yield_now();
        }
        f.ready.store(true, Release);
        let rang = ring(&f.bell, false);
        // It ends either way: woken by the ring, or seeing the entry ready
        // at its look between arming and waiting (then it disarmed first,
        // and the ring found it awake). A lost ring would hang here (the
        // sleep is bounded by 30 s only).
        let slept = sleeper.join().unwrap();
        assert!(
            rang || slept == Slept::Ready,
            "the sleeper was neither rung nor saw the entry ready ({slept:?})"
        );
        assert_eq!(f.bell.load(SeqCst), AWAKE);
    }

    #[test]
    fn a_ready_entry_stops_the_sleep_before_it_starts() {
        let polling = Polling::new();
        let f = flag();
        polling.register(f.clone());
        f.ready.store(true, Release);
        let own = AtomicU32::new(0);
        let mut local = Local::default();
        assert_eq!(local.sleep(&polling, &own, 0, None), Slept::Ready);
        assert_eq!(f.bell.load(SeqCst), AWAKE, "put back");
    }

    #[test]
    fn the_spin_budget_grows_while_spells_are_short_and_shrinks_when_long() {
        let polling = Polling::new();
        let b0 = polling.spin_budget();
        polling.idled(Duration::ZERO, b0, true);
        assert_eq!(polling.spin_budget(), (b0 * 2).min(MAX_SPIN));
        polling.idled(Duration::ZERO, b0, false);
        assert_eq!(
            polling.spin_budget(),
            (b0 * 2).min(MAX_SPIN),
            "not an entry's spell"
        );
        for _ in 0..20 {
            polling.idled(Duration::from_secs(1), MIN_SPIN, true);
        }
        assert_eq!(polling.spin_budget(), MIN_SPIN);
        polling.idled(MIN_SPIN * 3, MIN_SPIN, true);
        assert_eq!(
            polling.spin_budget(),
            MIN_SPIN,
            "longer than twice the budget"
        );
        polling.idled(MIN_SPIN * 2, MIN_SPIN, true);
        assert_eq!(polling.spin_budget(), MIN_SPIN * 2);
        for _ in 0..20 {
            polling.idled(Duration::ZERO, MIN_SPIN, true);
        }
        assert_eq!(polling.spin_budget(), MAX_SPIN);
    }

    /// Runs idle spells that each end `idle` after they began (by an
    /// entry), spinning what `spell_budget` says; returns how many of
    /// `spells` were probes.
    fn spells(polling: &Polling, spells: u32, idle: impl Fn(Duration) -> Duration) -> u32 {
        let mut probes = 0;
        for _ in 0..spells {
            let spun = polling.spell_budget();
            if spun > polling.spin_budget() {
                probes += 1;
            }
            polling.idled(idle(spun), spun, true);
        }
        probes
    }

    #[test]
    fn a_short_budget_probes_the_longest_spin_and_comes_back_when_it_pays() {
        let polling = Polling::new();
        // Spells that end in a sleep and a wake, past the longest spin,
        // whatever the spin: the budget falls to the least, and probes
        // back off.
        let probes = spells(&polling, 4 * MAX_PROBE_GAP, |_| MAX_SPIN * 2);
        assert_eq!(polling.spin_budget(), MIN_SPIN);
        assert_eq!(polling.probe_gap.load(Relaxed), MAX_PROBE_GAP);
        assert!((2..=12).contains(&probes), "{probes} probes");
        // Now work comes 1 us into a spin (the peer runs on another core),
        // but only a spin that lasts that long sees it: a 2 us budget
        // does, so such spells double the budget up to the longest.
        polling.spin_ns.store(MIN_SPIN.as_nanos() as u64, Relaxed);
        spells(&polling, 20, |spun| {
            if spun >= Duration::from_micros(1) {
                Duration::from_micros(1)
            } else {
                Duration::from_micros(60)
            }
        });
        assert_eq!(polling.spin_budget(), MAX_SPIN);
    }

    #[test]
    fn only_a_probe_that_spinning_did_not_pay_says_so() {
        let polling = Polling::new();
        polling.spin_ns.store(MIN_SPIN.as_nanos() as u64, Relaxed);
        let late = MAX_SPIN * 2;
        assert!(!polling.idled(late, MIN_SPIN, true), "not a probe");
        assert!(
            !polling.idled(late, MAX_SPIN, false),
            "not an entry's spell"
        );
        assert!(polling.idled(late, MAX_SPIN, true), "a probe that missed");
        polling.spin_ns.store(MIN_SPIN.as_nanos() as u64, Relaxed);
        assert!(
            !polling.idled(MAX_SPIN / 2, MAX_SPIN, true),
            "a probe that caught the work"
        );
    }

    #[test]
    fn a_probe_that_catches_work_raises_the_budget_and_shortens_the_gap() {
        let polling = Polling::new();
        polling.spin_ns.store(MIN_SPIN.as_nanos() as u64, Relaxed);
        polling.probe_gap.store(MAX_PROBE_GAP, Relaxed);
        polling.probe_in.store(0, Relaxed);
        // Work comes 30 us after the spell began: only a probe's spin sees it.
        let at = Duration::from_micros(30);
        let sees = |spun: Duration| {
            if spun >= at {
                at
            } else {
                at + Duration::from_micros(40)
            }
        };
        spells(&polling, 200, sees);
        assert_eq!(
            polling.spin_budget(),
            MAX_SPIN,
            "a probe caught it at 30 us: the budget went to 60 us, then doubled"
        );
        assert_eq!(polling.probe_gap.load(Relaxed), MIN_PROBE_GAP);
    }
}
