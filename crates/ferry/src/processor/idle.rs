//! A processor with nothing to run: it spins a bounded number of tries
//! (fewer while threads wait on sockets, [`spin_tries`]) looking for work
//! (its own queues, the injector, the event sources, stranded next-to-run
//! slots of busy processors, and, while threads wait on sockets, a paced
//! harvest of readiness without waiting), then parks on its `sleep` futex
//! word, no longer than the earliest deadline of the event
//! sources; or, while threads wait on sockets, one idle processor at a
//! time (the poller, who wins the reactor's harvest token) blocks in
//! `epoll_wait` instead, woken by the reactor's eventfd. The handshake with `Set::notify_work` is in the parent
//! module's docs.
//!
//! This file owns the idle path; it must not choose which thread runs
//! (stealing only moves a thread into this processor's queues, where the
//! policy finds it).

use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::time::{Duration, Instant};

use super::{DEADLOCK_GRACE, OwnerToken, Processor, Set};
use crate::event::polled::POLL_PERIOD;
use crate::event::readiness::Reactor;
use crate::header::Header;
use crate::sched::{self, NextSlot, Policy, Ready};
use crate::sys;

/// What the spin of an idle processor is divided by while threads wait on
/// sockets (see [`spin_tries`]).
const SOCKET_SPIN_DIVISOR: u32 = 32;

/// How many times an idle processor without polled entries looks for work
/// before it sleeps: the runtime's [`Builder::spin_tries`] (4,096 by
/// default), or a [`SOCKET_SPIN_DIVISOR`]th of it (128) while threads wait
/// on sockets (or on file operations in the ring, which count as the
/// reactor's waiters too). Their work comes from the kernel, which wakes
/// the poller blocked in `epoll_wait` when it comes; a long spin for it
/// takes the CPU from whoever makes it (the peers and the network stack
/// on the same machine). An echo server at 1 and 10 connections on 2
/// shared CPUs served 0.61-0.70x Tokio's requests/s with the whole spin
/// and 0.77-1.03x with this one, and its p99 at one connection was
/// 3.9-4.0x Tokio's against 1.2-1.4x (`docs/results/net.md`).
///
/// [`Builder::spin_tries`]: crate::Builder::spin_tries
fn spin_tries(shared: &Set) -> u32 {
    let tries = shared.spin_tries();
    if shared
        .sources
        .readiness
        .get()
        .is_some_and(|r| r.waiting() != 0)
    {
        (tries / SOCKET_SPIN_DIVISOR).max(1)
    } else {
        tries
    }
}

impl Processor {
    /// Whether there looks to be work for this processor (or a reason to
    /// stop idling): cheap loads only.
    pub(crate) fn sees_work(&self, mut tok: OwnerToken<'_>, shared: &Set) -> bool {
        shared.is_shut_down()
            || self.is_stopping()
            || shared
                .sources
                .ready(false, &mut self.owner(tok.rb()).sources)
            || self.with_policy(tok.rb(), |policy, cx| policy.has_ready(cx))
            || self.owner(tok.rb()).queue.others_have_work()
    }

    /// Takes a thread that has sat in another processor's next-to-run slot
    /// for [`sched::NEXT_STEAL_AFTER`], queuing it here; `seen` keeps
    /// what was in each slot and since when.
    pub(super) fn steal_stale_next(
        &self,
        mut tok: OwnerToken<'_>,
        shared: &Set,
        seen: &mut Vec<(usize, *const Header, Instant)>,
    ) -> bool {
        let now = Instant::now();
        let victims: Vec<usize> = self.owner(tok.rb()).queue.victim_indices().collect();
        for v in victims {
            let slot = &shared.processors[v].next;
            let who = slot.peek();
            match seen.iter_mut().find(|(i, _, _)| *i == v) {
                Some(entry) if entry.1 == who => {
                    if !who.is_null()
                        && now.duration_since(entry.2) >= sched::NEXT_STEAL_AFTER
                        && self.steal_next_if_still(tok.rb(), slot, who)
                    {
                        return true;
                    }
                }
                Some(entry) => *entry = (v, who, now),
                None => seen.push((v, who, now)),
            }
        }
        false
    }

    /// Nothing to run: spin a while, then sleep until woken (or until the
    /// earliest timer is due). Returns when there may be work.
    pub(super) fn idle(&self, mut tok: OwnerToken<'_>, shared: &Set) {
        // With polled memory (rpc channels) an idle processor spins for the
        // polled entries' adaptive budget, even alone (see `event::polled`).
        let polling = shared.sources.polled.active();
        let budget = polling.then(|| (Instant::now(), shared.sources.polled.spell_budget()));
        if shared.processors.len() > 1 || polling {
            let tries = spin_tries(shared);
            shared.spinning_enter();
            let mut seen = Vec::new();
            let mut found = false;
            let mut i = 0u32;
            loop {
                if self.sees_work(tok.rb(), shared) {
                    found = true;
                    break;
                }
                if i % 64 == 63
                    && (shared
                        .sources
                        .ready_to_sleep(&mut self.owner(tok.rb()).sources)
                        || self.steal_stale_next(tok.rb(), shared, &mut seen)
                        || shared
                            .sources
                            .readiness
                            .get()
                            .is_some_and(|r| r.harvest_while_spinning()))
                {
                    found = true;
                    break;
                }
                i = i.wrapping_add(1);
                // With polled entries the adaptive budget alone bounds the
                // spin (the clock read every 16 looks).
                let done = match budget {
                    Some((start, budget)) => i.is_multiple_of(16) && start.elapsed() >= budget,
                    None => i >= tries,
                };
                if done {
                    break;
                }
                std::hint::spin_loop();
            }
            if found {
                if let Some((start, spun)) = budget {
                    self.idled_for_entries(tok.rb(), shared, start, spun);
                }
                shared.spinning_exit_found_work();
                return;
            }
            // Give up spinning, and offer the core while asleep.
            self.set_willing(true);
            self.sleep.store(0, Relaxed);
            shared.sleeper_enter(self.index);
            shared.spinning_exit();
        } else {
            if self.sees_work(tok.rb(), shared)
                || shared
                    .sources
                    .ready_to_sleep(&mut self.owner(tok.rb()).sources)
            {
                return;
            }
            self.set_willing(true);
            self.sleep.store(0, Relaxed);
            shared.sleeper_enter(self.index);
        }
        // Pairs with `light_fence` in `Set::notify_work`: either the
        // notifier sees us among the sleepers, or we see its work below.
        ferry_queue::wait::heavy_fence();
        if self.sees_work(tok.rb(), shared)
            || shared
                .sources
                .ready_to_sleep(&mut self.owner(tok.rb()).sources)
            || self.steal_stranded_next(tok.rb(), shared)
        {
            shared.sleeper_exit(self.index);
            self.set_willing(false);
            // The monitor may have seen us willing and parked.
            shared.host().woke();
            return;
        }
        let mut looked = !shared.host().watches_deadlocks();
        while self.sleep.load(Acquire) == 0 && !shared.is_shut_down() {
            // Threads wait on sockets: the one poller blocks in
            // `epoll_wait` instead (see `poll_instead_of_sleeping`).
            if self.poll_instead_of_sleeping(tok.rb(), shared) {
                break;
            }
            // With polled memory: one wait on the sleep word and the
            // doorbells, bounded by the earliest timer; then look again.
            if shared.sources.polled.active() {
                let wait = shared.sources.until_next();
                let local = &mut self.owner(tok.rb()).sources.polled;
                local.sleep(&shared.sources.polled, &self.sleep, 0, wait);
                break;
            }
            // Sleep no longer than until the earliest timer, then look again.
            if let Some(wait) = shared.sources.until_next() {
                if wait.is_zero() {
                    break;
                }
                sys::futex_wait(&self.sleep, 0, Some(wait));
                break;
            }
            // The last processor to sleep, with nothing pending: look for a
            // deadlock, twice a grace apart (once per idle spell).
            if !looked {
                looked = true;
                if let Some(seen) = shared.host().quiet() {
                    sys::futex_wait(&self.sleep, 0, Some(DEADLOCK_GRACE));
                    if self.sleep.load(Acquire) == 0 {
                        shared.host().confirm(seen);
                    }
                    continue;
                }
            }
            sys::futex_wait(&self.sleep, 0, None);
        }
        shared.sleeper_exit(self.index);
        self.set_willing(false);
        shared.host().woke();
        if let Some((start, spun)) = budget {
            self.idled_for_entries(tok.rb(), shared, start, spun);
        }
    }

    /// The poller's sleep: if threads wait on sockets and no other
    /// processor harvests, blocks in `epoll_wait` (harvesting what it
    /// returns) until an event, a [`Processor::wake`] (which writes the
    /// reactor's eventfd while `in_epoll` names it) or the sources'
    /// earliest moment; bounded by `POLL_PERIOD` while polled entries
    /// exist, whose doorbells epoll cannot wait on. False if it did not
    /// poll (the caller sleeps on its futex word).
    ///
    /// `in_epoll` is stored before the last look at `sleep`, and a waker
    /// stores `sleep` before it reads `in_epoll` (both SeqCst): either the
    /// poller sees the wake and does not block, or the waker writes the
    /// eventfd, whose edge ends (or pre-empts) the `epoll_wait`.
    ///
    /// While it delivers what the harvest returned, the processor is
    /// marked as the poller ([`Processor::take_polling`]): the first thread
    /// it wakes is its own to run, and no sleeper is woken for it.
    fn poll_instead_of_sleeping(&self, mut tok: OwnerToken<'_>, shared: &Set) -> bool {
        let Some(r) = shared.sources.readiness.get() else {
            return false;
        };
        if r.waiting() == 0 || r.has_ended() {
            return false;
        }
        self.in_epoll
            .store(std::ptr::from_ref::<Reactor>(r).cast_mut(), SeqCst);
        let polled = if self.sleep.load(SeqCst) == 0 && !shared.is_shut_down() {
            let mut wait = shared.sources.until_next();
            if shared.sources.polled.active() {
                wait = Some(wait.map_or(POLL_PERIOD, |w| w.min(POLL_PERIOD)));
            }
            self.owner(tok.rb()).polling = true;
            let harvested = r.harvest(wait).is_some();
            self.owner(tok.rb()).polling = false;
            harvested
        } else {
            true
        };
        self.in_epoll.store(std::ptr::null_mut(), SeqCst);
        polled
    }

    /// An idle spell that began at `start` and spun for at most `spun`
    /// ends: tells the polled entries' spin budget whether one of them
    /// ended it, and after a probe that spinning did not pay may move this
    /// processor's home ([`Processor::move_home_by_chance`]).
    fn idled_for_entries(
        &self,
        mut tok: OwnerToken<'_>,
        shared: &Set,
        start: Instant,
        spun: Duration,
    ) {
        let polled = &shared.sources.polled;
        let by_entry = polled.is_ready(&mut self.owner(tok.rb()).sources.polled);
        if polled.idled(start.elapsed(), spun, by_entry) {
            self.move_home_by_chance(shared);
        }
    }

    /// Before sleeping: if another processor's next-to-run slot holds a
    /// thread, waits [`sched::NEXT_STEAL_AFTER`] and steals it if it is
    /// still the same one (its owner is busy with something else). A slot
    /// whose occupant changed meanwhile belongs to a processor that is
    /// scheduling; a thread put there after our `heavy_fence` wakes us.
    pub(super) fn steal_stranded_next(&self, mut tok: OwnerToken<'_>, shared: &Set) -> bool {
        let occupied: Vec<(usize, *const Header)> = self
            .owner(tok.rb())
            .queue
            .victim_indices()
            .map(|v| (v, shared.processors[v].next.peek()))
            .filter(|(_, who)| !who.is_null())
            .collect();
        if occupied.is_empty() {
            return false;
        }
        let start = Instant::now();
        while start.elapsed() < sched::NEXT_STEAL_AFTER {
            std::hint::spin_loop();
        }
        occupied
            .into_iter()
            .any(|(v, who)| self.steal_next_if_still(tok.rb(), &shared.processors[v].next, who))
    }

    /// Takes the thread in another processor's next-to-run `slot` if `who`
    /// still sits there, and makes it ready here.
    pub(super) fn steal_next_if_still(
        &self,
        mut tok: OwnerToken<'_>,
        slot: &NextSlot,
        who: *const Header,
    ) -> bool {
        if slot.peek() != who {
            return false;
        }
        match slot.take() {
            Some(t) => {
                self.with_policy(tok.rb(), |policy, cx| policy.ready(cx, t, Ready::Woken));
                true
            }
            None => false,
        }
    }

    /// Wakes this processor if it sleeps in `idle`.
    pub(crate) fn wake(&self) {
        self.sleep.store(1, SeqCst);
        sys::futex_wake_one(&self.sleep);
        let r = self.in_epoll.load(SeqCst);
        if !r.is_null() {
            // SAFETY: `in_epoll` names the runtime's reactor, which its
            // `Sources` keep for as long as the processor lives.
            unsafe { (*r).wake_poller() };
        }
    }
}
