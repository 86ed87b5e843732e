//! The idle bookkeeping of a set of processors, and the words of a
//! processor that need no thread running on it: who is woken when work
//! comes ([`Set::notify_work`]), the last spinner's wake, thread ids,
//! membership and dispatch words, and a processor left in `idle` by a wake
//! from another kernel thread. No activation drives the processors here:
//! a test's own thread stands in for one where the processor's owner part
//! is touched, and nothing runs a user-level thread.

use std::any::Any;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::OwnerToken;
use super::idle_set::IdleSet;
use super::{ACTIVE, Host, NO_CORE, Processor, STOPPED, STOPPING, Set, Settings};

/// A set of `n` stopped processors, with no host.
fn set(n: usize) -> Set {
    Set::new(&Settings {
        processors: n,
        stack_size: 64 * 1024,
        spin_tries: 1,
        account_cpu: false,
        policy: crate::sched::SchedPolicy::WorkStealing,
    })
}

/// Which processors' `sleep` words say "woken".
fn woken(set: &Set) -> Vec<usize> {
    set.processors
        .iter()
        .filter(|p| p.sleep.load(Acquire) == 1)
        .map(|p| p.index)
        .collect()
}

#[test]
fn notify_work_wakes_a_sleeper_only_when_nobody_spins() {
    let s = set(3);
    s.sleeper_enter(2);
    s.spinning_enter();
    s.notify_work();
    s.notify_work_anywhere();
    assert_eq!(
        woken(&s),
        [] as [usize; 0],
        "the spinner will find the work"
    );
    assert_eq!(s.sleepers(), 1);
    s.spinning_exit();
    s.notify_work();
    assert_eq!(woken(&s), [2]);
    assert_eq!(s.sleepers(), 0, "the woken one left the sleepers");
}

#[test]
fn notify_work_with_nobody_asleep_wakes_nobody() {
    let s = set(2);
    s.notify_work();
    s.notify_work_anywhere();
    assert!(woken(&s).is_empty());
    assert_eq!(s.sleepers(), 0);
}

#[test]
fn notify_work_anywhere_wakes_a_sleeper_when_nobody_spins() {
    let s = set(2);
    s.sleeper_enter(1);
    s.notify_work_anywhere();
    assert_eq!(woken(&s), [1]);
    assert_eq!(s.sleepers(), 0);
}

#[test]
fn each_notify_wakes_one_sleeper_the_last_to_sleep_first() {
    let idle = IdleSet::new(3);
    idle.sleeper_enter(0);
    idle.sleeper_enter(2);
    idle.sleeper_enter(1);
    let mut order = Vec::new();
    while idle.notify_work() {
        order.extend(idle.take_sleeper());
    }
    assert_eq!(order, [1, 2, 0]);
    assert_eq!(idle.sleepers(), 0);
    assert_eq!(idle.take_sleeper(), None);
}

#[test]
fn a_sleeper_that_left_is_not_woken() {
    let s = set(3);
    s.sleeper_enter(1);
    s.sleeper_enter(2);
    s.sleeper_exit(2);
    assert_eq!(s.sleepers(), 1);
    s.notify_work();
    assert_eq!(woken(&s), [1]);
    // A woken processor leaves `idle` through `sleeper_exit` too.
    s.sleeper_exit(1);
    assert_eq!(s.sleepers(), 0);
}

#[test]
fn only_the_last_spinner_to_find_work_wakes_a_sleeper() {
    let s = set(3);
    s.sleeper_enter(2);
    s.spinning_enter();
    s.spinning_enter();
    s.spinning_exit_found_work();
    assert!(woken(&s).is_empty(), "another spinner is still looking");
    s.spinning_exit_found_work();
    assert_eq!(woken(&s), [2], "the last spinner wakes one in its place");
    // Nobody spins now: the next work wakes the next sleeper.
    s.sleeper_enter(0);
    s.notify_work();
    assert_eq!(woken(&s), [0, 2]);
}

#[test]
fn a_spinner_that_stops_to_sleep_wakes_nobody() {
    let idle = IdleSet::new(2);
    idle.sleeper_enter(1);
    idle.spinning_enter();
    idle.sleeper_enter(0);
    idle.spinning_exit();
    assert_eq!(idle.sleepers(), 2);
    assert!(idle.notify_work(), "now nobody spins");
}

#[test]
fn the_last_spinner_with_nobody_asleep_wakes_nobody() {
    let idle = IdleSet::new(2);
    idle.spinning_enter();
    assert!(!idle.spinning_exit_found_work());
    assert!(!idle.notify_work());
}

#[test]
fn thread_ids_come_in_disjoint_blocks_from_one() {
    let s = set(1);
    assert_eq!(s.next_thread_ids(3), 1..4);
    assert_eq!(s.next_thread_ids(2), 4..6);
    let blocks: Vec<std::ops::Range<u64>> = std::thread::scope(|scope| {
        let takers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| (0..100).map(|_| s.next_thread_ids(10)).collect::<Vec<_>>()))
            .collect();
        takers.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    let mut ids: Vec<u64> = blocks.into_iter().flatten().collect();
    ids.sort_unstable();
    assert_eq!(ids, (6..6 + 4000).collect::<Vec<_>>(), "each id once");
}

#[test]
fn built_processors_are_stopped_and_idle_with_every_other_as_victim() {
    let s = set(3);
    for (i, p) in s.processors.iter().enumerate() {
        assert_eq!(p.index, i);
        assert_eq!(p.membership.load(Relaxed), STOPPED);
        assert_eq!(p.dispatch.load(Relaxed), 0);
        assert_eq!(p.sleep.load(Relaxed), 0);
        assert!(!p.is_willing_to_yield());
        assert!(!p.is_stopping());
        assert!(p.next.is_empty());
        // SAFETY: no kernel thread drives these processors; the test is
        // their only user.
        let mut tok = unsafe { OwnerToken::new() };
        assert!(!p.in_thread(&tok));
        let victims: Vec<usize> = p.owner(tok.rb()).queue.victim_indices().collect();
        assert_eq!(victims, [(i + 1) % 3, (i + 2) % 3]);
    }
    assert_eq!(s.spin_tries(), 1);
    assert!(!s.is_shut_down());
    s.mark_shut_down();
    assert!(s.is_shut_down());
}

#[test]
fn stopping_is_read_from_the_membership_word() {
    let p = &Processor::build(1, crate::sched::SchedPolicy::WorkStealing)[0];
    for (word, stopping) in [(STOPPED, false), (ACTIVE, false), (STOPPING, true)] {
        p.membership.store(word, Relaxed);
        assert_eq!(p.is_stopping(), stopping, "membership {word}");
    }
}

#[test]
fn each_dispatch_change_publishes_a_new_count() {
    let p = &Processor::build(1, crate::sched::SchedPolicy::WorkStealing)[0];
    // SAFETY: no kernel thread drives the processor; the test is its only
    // user.
    let mut tok = unsafe { OwnerToken::new() };
    p.mark_dispatch(tok.rb(), true);
    assert_eq!(
        p.dispatch.load(Acquire),
        1 << 1 | 1,
        "one dispatch, running"
    );
    assert!(p.take_blocked(tok.rb()).is_none(), "no thread ran");
    assert_eq!(
        p.dispatch.load(Acquire),
        2 << 1,
        "two dispatches, none running"
    );
}

#[test]
fn a_named_core_wins_over_the_default_one() {
    let s = set(2);
    let p = &s.processors[1];
    assert_eq!(p.core(&s), super::cpus::default_core(1));
    p.set_core(5);
    assert_eq!(p.core(&s), Some(5));
    p.set_core(NO_CORE);
    let alone = set(1);
    assert_eq!(
        alone.processors[0].core(&alone),
        super::cpus::only_cpu(),
        "one processor is not pinned, unless the process has one CPU"
    );
}

/// The runtime above a test set: never watches for deadlocks, counts the
/// wakes it is told of.
struct Quiet {
    woke: AtomicUsize,
}

impl Host for Quiet {
    fn watches_deadlocks(&self) -> bool {
        false
    }

    fn quiet(&self) -> Option<u64> {
        panic!("asked for a deadlock snapshot without watching");
    }

    fn confirm(&self, _: u64) {
        panic!("asked to confirm a deadlock without watching");
    }

    fn woke(&self) {
        self.woke.fetch_add(1, Ordering::Relaxed);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Runs `f` with a set of `n` processors that knows its host.
fn with_hosted_set(n: usize, f: impl FnOnce(&Set, &Quiet)) {
    let host = Quiet {
        woke: AtomicUsize::new(0),
    };
    let s = set(n);
    // SAFETY: no kernel thread runs a processor of `s` yet, `host`
    // outlives `s` (dropped after it, below) and `s` does not move while
    // `f` runs.
    unsafe { s.set_host(&raw const host) };
    f(&s, &host);
    drop(s);
}

#[test]
fn a_parked_processor_leaves_idle_when_work_is_notified() {
    with_hosted_set(2, |s, host| {
        let p = &s.processors[0];
        std::thread::scope(|scope| {
            // This thread stands in for the processor's driver: the only
            // one to touch its owner part.
            let idler = scope.spawn(|| {
                // SAFETY: this thread stands in for the processor's driver:
                // the only one to touch its owner part.
                let tok = unsafe { OwnerToken::new() };
                p.idle(tok, s);
            });
            // Until it has joined the sleepers and stopped spinning, a
            // notify may find it spinning and wake nobody.
            while !idler.is_finished() {
                if s.sleepers() == 1 {
                    s.notify_work_anywhere();
                }
                std::thread::yield_now();
            }
            idler.join().unwrap();
        });
        assert_eq!(p.sleep.load(Acquire), 1, "it was woken through its word");
        assert_eq!(s.sleepers(), 0);
        assert!(!p.is_willing_to_yield());
        assert_eq!(host.woke.load(Relaxed), 1);
    });
}

#[test]
fn an_idle_processor_returns_at_once_after_shut_down() {
    with_hosted_set(2, |s, host| {
        s.mark_shut_down();
        let p = &s.processors[1];
        // SAFETY: the test's thread stands in for the processor's driver:
        // the only one to touch its owner part.
        let mut tok = unsafe { OwnerToken::new() };
        assert!(p.sees_work(tok.rb(), s));
        p.idle(tok, s);
        assert_eq!(s.sleepers(), 0);
        assert!(!p.is_willing_to_yield());
        assert_eq!(host.woke.load(Relaxed), 0, "it never slept");
        // It counted itself as a spinner and left as one that found work:
        // the next notify finds nobody spinning.
        s.sleeper_enter(0);
        s.notify_work();
        assert_eq!(woken(s), [0]);
    });
}

#[test]
fn an_unpaid_spin_moves_a_home_only_to_a_free_cpu_and_never_a_named_core() {
    let cpus = super::cpus::allowed_cpus();
    if cpus.len() < 2 {
        return;
    }
    let s = set(2);
    let (p0, p1) = (&s.processors[0], &s.processors[1]);
    p0.membership.store(ACTIVE, Relaxed);
    p1.membership.store(ACTIVE, Relaxed);
    let home = p0.core(&s).expect("two processors have homes");
    let others: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|&c| c != home && Some(c) != p1.core(&s))
        .collect();
    p0.move_home(&s);
    match others.first() {
        // Every other CPU is another processor's home: it stays.
        None => assert_eq!(p0.core(&s), Some(home)),
        Some(_) => {
            let moved = p0.core(&s).unwrap();
            assert!(others.contains(&moved), "moved to {moved}, not a free CPU");
        }
    }
    // With the other processor stopped, its CPU is free to move to.
    p1.membership.store(STOPPED, Relaxed);
    p0.reset_home();
    p0.move_home(&s);
    assert_ne!(p0.core(&s), Some(home), "an unpaid spin moves the home");
    // A core named with `processor_on` never moves.
    p0.set_core(home);
    p0.move_home(&s);
    assert_eq!(p0.core(&s), Some(home));
}
