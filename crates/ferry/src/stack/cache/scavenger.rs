//! The stack cache's scavenger: a kernel thread of its own that gives the
//! memory of warm carved stacks back in the background, as Go's scavenger
//! does, so that threads that exit in a burst do not each pay an
//! `madvise` on their way out.
//!
//! This room owns who gives a cache's memory back once it passes its
//! resident bound (the putting thread, or the scavenger), the scavenger's
//! thread, its wake-up and its pace; it must not choose which stacks to
//! release (the depot's oldest warm magazines) nor run on a ferry thread
//! (it blocks in the kernel on purpose).
//!
//! # The two bounds
//!
//! A cache that releases in the background has a *target*, its resident
//! bound ([`CacheLimits::resident_bound`](super::CacheLimits::resident_bound)),
//! and a *ceiling* of [`CEILING`] times it. A stack given back past the
//! target (by more than a magazine) wakes the scavenger and costs its
//! thread nothing more; the scavenger takes the oldest warm magazines a
//! few at a time, releases them in runs and rests between batches, until
//! the estimate is back to 3/4 of the target. Past the ceiling (threads
//! exiting faster than the scavenger's pace), the thread that gives a
//! stack back releases a batch itself, as a cache without a scavenger
//! does: memory stays bounded whatever the pace.
//!
//! # `due`
//!
//! | `due` | written by | meaning |
//! |-------|------------|---------|
//! | false → true | a `put` that leaves the estimate past the target, under the cache's lock; the one that flips it wakes the thread | the scavenger has work |
//! | true → false | the scavenger, under the cache's lock, when the estimate is back to 3/4 of the target | it sleeps until the next flip |
//!
//! Both flips happen under the cache's lock, against the estimate they
//! check, so no put past the target is left without a scavenger on its
//! way.
//!
//! # Its thread
//!
//! Started by the first wake in a process (again in a forked child, which
//! has none), named `ferry-scavenger`, asleep on a condition variable
//! while nothing is due: an idle process pays nothing for it. If it cannot
//! be started, the cache releases inline as before.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::arena::Magazine;
use super::{GLOBAL, Inner, StackCache};

/// The ceiling, in multiples of the resident bound, past which a put
/// releases inline even with a scavenger.
const CEILING: usize = 4;

/// Warm magazines the scavenger releases per batch (of 64 stacks each).
const BATCH: usize = 4;

/// The scavenger rests `PACE` times as long as each batch took: it uses at
/// most 1/(1 + `PACE`) of one CPU.
const PACE: u32 = 3;

/// A cache's scavenger (see the module docs).
pub(super) struct Scavenger {
    /// The process whose scavenger thread runs (0: none started).
    pid: AtomicU32,
    /// Set with `due` (under the cache's lock); the thread waits on it.
    wake: Mutex<bool>,
    bell: Condvar,
}

impl Scavenger {
    pub(super) const fn new() -> Scavenger {
        Scavenger {
            pid: AtomicU32::new(0),
            wake: Mutex::new(false),
            bell: Condvar::new(),
        }
    }

    /// Wakes the scavenger of `cache` (starting its thread in this
    /// process if need be); false if no thread could be started.
    pub(super) fn wake(&self, cache: &'static StackCache) -> bool {
        let pid = std::process::id();
        let mut woken = self.wake.lock().unwrap_or_else(PoisonError::into_inner);
        // A forked child has no scavenger thread of its own yet.
        if self.pid.load(Acquire) != pid {
            let spawned = std::thread::Builder::new()
                .name("ferry-scavenger".into())
                .stack_size(64 * 1024)
                .spawn(move || run(cache));
            if spawned.is_err() {
                return false;
            }
            self.pid.store(pid, Release);
        }
        *woken = true;
        drop(woken);
        self.bell.notify_one();
        true
    }

    /// Waits until woken.
    fn wait(&self) {
        let mut woken = self.wake.lock().unwrap_or_else(PoisonError::into_inner);
        while !*woken {
            woken = self
                .bell
                .wait(woken)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *woken = false;
    }
}

/// The scavenger thread: releases batches while the cache is past its
/// target, resting between them, then sleeps until woken again.
fn run(cache: &'static StackCache) {
    loop {
        cache.scavenger.wait();
        while let Some(batch) = cache.take_scavenged(BATCH) {
            let began = Instant::now();
            cache.release(batch);
            std::thread::sleep(rest(began.elapsed()));
        }
    }
}

/// How long to rest after a batch that took `took`.
fn rest(took: Duration) -> Duration {
    took.saturating_mul(PACE)
}

/// What a put past the resident bound leaves to do outside the lock.
#[derive(Default)]
pub(super) struct Over {
    /// Magazines to release now, on this thread.
    release: Vec<(usize, Magazine)>,
    /// Whether to wake the scavenger.
    wake: bool,
}

impl Over {
    /// Adds what another put left to do.
    pub(super) fn add(&mut self, more: Over) {
        self.release.extend(more.release);
        self.wake |= more.wake;
    }
}

impl StackCache {
    /// Gives the memory of warm carved stacks back in the background from
    /// now on: a scavenger thread (started at the first need) brings the
    /// estimate back under the resident bound at a bounded pace, and a put
    /// releases inline only past four times the bound (see the
    /// `scavenger` module's docs, in `stack/cache/scavenger.rs`). The
    /// global cache does this from the start.
    pub fn release_in_background(&'static self) {
        let _ = self.me.set(self);
        self.background.store(true, Ordering::Relaxed);
    }

    /// This cache as `'static`, if it can have a scavenger.
    fn as_static(&self) -> Option<&'static StackCache> {
        if std::ptr::eq(self, &GLOBAL) {
            return Some(&GLOBAL);
        }
        self.me.get().copied()
    }

    /// What to do when the depot is more than one magazine of `class` past
    /// the resident bound: without a scavenger, release the oldest warm
    /// magazines down to 3/4 of it; with one, wake it, and release inline
    /// only past the ceiling (down to a quarter of the bound below it).
    pub(super) fn over_bound(&self, inner: &mut Inner, class: usize) -> Over {
        let bound = self.limits.resident_bound();
        let slack = inner.depot.magazine_bytes(class).min(bound / 4);
        let resident = inner.depot.resident();
        if resident <= bound.saturating_add(slack) {
            return Over::default();
        }
        if !self.background.load(Ordering::Relaxed) {
            return Over {
                release: inner.depot.take_for_release(bound / 4 * 3),
                wake: false,
            };
        }
        let wake = !std::mem::replace(&mut inner.due, true);
        let ceiling = bound.saturating_mul(CEILING);
        let release = if resident > ceiling.saturating_add(slack) {
            inner.depot.take_for_release(ceiling - bound / 4)
        } else {
            Vec::new()
        };
        Over { release, wake }
    }

    /// Does what `over_bound` left to do, without the lock.
    pub(super) fn settle(&self, over: Over) {
        if over.wake {
            let woken = self.as_static().is_some_and(|me| self.scavenger.wake(me));
            if !woken {
                // No scavenger thread: release inline from now on.
                self.background.store(false, Ordering::Relaxed);
                let mut inner = self.lock();
                inner.due = false;
                let more = inner
                    .depot
                    .take_for_release(self.limits.resident_bound() / 4 * 3);
                drop(inner);
                self.release(more);
            }
        }
        self.release(over.release);
    }

    /// The scavenger's next batch: at most `most` of the oldest warm
    /// magazines while the estimate is past 3/4 of the resident bound;
    /// `None` (and nothing due) once it is not.
    fn take_scavenged(&self, most: usize) -> Option<Vec<(usize, Magazine)>> {
        let mut inner = self.lock();
        let batch = inner
            .depot
            .take_some_for_release(self.limits.resident_bound() / 4 * 3, most);
        if batch.is_empty() {
            inner.due = false;
            return None;
        }
        Some(batch)
    }
}
