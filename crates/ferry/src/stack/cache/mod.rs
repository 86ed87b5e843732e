//! The stack cache: freed stacks kept per size for the next spawn, as
//! C-Threads kept exited threads. It owns only stacks nobody runs on, and it
//! must never let its count, its address space or its committed memory grow
//! past its limits.
//!
//! # Warm and cold
//!
//! A stack put back *warm* keeps the pages its thread touched, so the next
//! thread to take it faults nothing in: spawn/exit churn costs no system
//! calls. Warm stacks are bounded by [`CacheLimits::max_warm_bytes`] of
//! address space, which bounds the memory they can hold. A stack put back
//! when the warm budget is spent is made *cold*: its pages are released with
//! `MADV_DONTNEED` and it keeps only its address range and its guard (one
//! VMA or two, see [`GuardMethod`](super::GuardMethod); no memory). Guard
//! markers survive `MADV_DONTNEED`, which only covers the usable part anyway.
//! [`StackCache::trim`] turns every warm stack cold.
//!
//! `MADV_DONTNEED` rather than `MADV_FREE`: `MADV_FREE` is cheaper when the
//! stack is reused before memory gets tight, but the pages stay in the
//! process's RSS until the kernel is under pressure, so a trim would show no
//! effect in `top`, memory use would depend on other processes, and a
//! reused stack would read as stale or zero depending on that. `DONTNEED`
//! frees at once, and a cold stack reads as zero: a new thread never sees
//! an old thread's data on a cold stack (warm stacks, like `malloc`ed memory,
//! are not cleared).
//!
//! # Carved stacks
//!
//! Stacks of the arena's sizes (powers of two from 64 KiB to 8 MiB, which
//! include [`DEFAULT_STACK_SIZE`]) are carved from the arena's regions
//! (`super::arena`) and kept in the cache's depot in magazines of 64,
//! under [`CacheLimits::max_resident_bytes`] instead of the count and
//! address-space bounds: they are never unmapped one by one. When a `put`
//! leaves the depot's estimated resident memory more than one magazine past
//! the bound, the oldest warm magazines are released down to 3/4 of the
//! bound, in runs of adjacent stacks: one `madvise(MADV_DONTNEED)` per run,
//! not per stack, without the lock. Who releases them: in a cache made
//! with [`StackCache::new`], the caller of that `put`; in the global
//! cache (and any after [`StackCache::release_in_background`]), a
//! scavenger thread at a bounded pace, so that exiting threads pay nothing,
//! with the caller releasing only past four times the bound (`scavenger`). Processors keep
//! two magazines of their own in front of the global cache, so a spawn or
//! an exit there takes this cache's lock once per 64.
//!
//! Other sizes, and stacks with their own mapping ([`Stack::new`]), are
//! kept per size as warm or cold stacks under the count and byte bounds,
//! and unmapped beyond them. Only stacks with the default guard
//! ([`default_guard_size`](super::default_guard_size)) are cached, so every
//! stack a class hands out has the guard [`Stack::new`] would give it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::arena::{self, Depot, Magazine, class_of};
use super::{DEFAULT_STACK_SIZE, Stack, round_to_pages, shield};

mod scavenger;

use scavenger::{Over, Scavenger};

/// Bounds of a [`StackCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most stacks cached, warm and cold together.
    pub max_stacks: usize,
    /// Most address space (guards included) held by cached stacks.
    pub max_bytes: usize,
    /// Most address space held by warm stacks with their own mapping,
    /// which bounds the memory those keep committed.
    pub max_warm_bytes: usize,
    /// Most memory the warm carved stacks in the cache are estimated to
    /// keep resident (see the module documentation), past which it is
    /// given back in batches. 0 means the default: the larger of 32 MiB and
    /// 1/64 of `MemTotal`.
    pub max_resident_bytes: usize,
}

impl CacheLimits {
    /// The global cache's limits: for carved stacks, the default resident
    /// bound (max(32 MiB, `MemTotal`/64)); for stacks with their own
    /// mapping, 1024 stacks, 1 GiB of address space and 32 MiB warm (64
    /// default-sized stacks with their 256 KiB guards).
    pub const DEFAULT: CacheLimits = CacheLimits {
        max_stacks: 1024,
        max_bytes: 1 << 30,
        max_warm_bytes: 64 * 2 * DEFAULT_STACK_SIZE,
        max_resident_bytes: 0,
    };

    /// The resident bound in bytes, with 0 resolved to the default.
    pub fn resident_bound(&self) -> usize {
        if self.max_resident_bytes != 0 {
            return self.max_resident_bytes;
        }
        static AUTO: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *AUTO.get_or_init(|| (32 << 20).max(crate::sys::mem_total().unwrap_or(0) / 64))
    }
}

impl Default for CacheLimits {
    fn default() -> CacheLimits {
        CacheLimits::DEFAULT
    }
}

/// A snapshot of a cache's contents and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Stacks cached.
    pub stacks: usize,
    /// Of which warm (pages kept).
    pub warm: usize,
    /// Address space held, guards included.
    pub bytes: usize,
    /// Address space held by warm stacks.
    pub warm_bytes: usize,
    /// Stacks handed out from the cache: one per [`StackCache::get`] served
    /// from it, a magazine's worth per processor refill.
    pub hits: u64,
    /// Stacks mapped or carved because the cache had none: one per
    /// [`StackCache::get`] that missed, a batch of up to 64 per processor
    /// refill that missed.
    pub misses: u64,
    /// Stacks [`StackCache::put`] unmapped because the cache was full.
    pub dropped: u64,
    /// Estimated resident bytes of the warm carved stacks held.
    pub resident: usize,
    /// `madvise` calls made to give carved stacks' memory back (one per
    /// run of adjacent stacks).
    pub releases: u64,
    /// Arena regions mapped in the process (all caches together).
    pub regions: usize,
}

struct Class {
    size: usize,
    warm: Vec<Stack>,
    cold: Vec<Stack>,
}

struct Inner {
    classes: Vec<Class>,
    stacks: usize,
    bytes: usize,
    warm: usize,
    warm_bytes: usize,
    /// Carved stacks.
    depot: Depot,
    /// The scavenger has work (see `scavenger`'s table).
    due: bool,
}

impl Inner {
    fn class(&mut self, size: usize) -> &mut Class {
        let i = match self.classes.iter().position(|c| c.size == size) {
            Some(i) => i,
            None => {
                self.classes.push(Class {
                    size,
                    warm: Vec::new(),
                    cold: Vec::new(),
                });
                self.classes.len() - 1
            }
        };
        &mut self.classes[i]
    }

    fn fits(&self, limits: &CacheLimits, cost: usize) -> bool {
        self.stacks < limits.max_stacks && self.bytes.saturating_add(cost) <= limits.max_bytes
    }
}

/// A bounded cache of free stacks per size class. See the module
/// documentation for the warm/cold policy.
pub struct StackCache {
    limits: CacheLimits,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    dropped: AtomicU64,
    releases: AtomicU64,
    /// Whether carved stacks' memory is given back in the background.
    background: AtomicBool,
    /// This cache, for its scavenger (set by `release_in_background`).
    me: OnceLock<&'static StackCache>,
    scavenger: Scavenger,
}

static GLOBAL: StackCache = StackCache::make(CacheLimits::DEFAULT, true);

impl StackCache {
    /// An empty cache with the given limits, which releases inline: the
    /// put that passes the resident bound releases a batch itself (see
    /// [`release_in_background`](StackCache::release_in_background)).
    pub const fn new(limits: CacheLimits) -> StackCache {
        StackCache::make(limits, false)
    }

    const fn make(limits: CacheLimits, background: bool) -> StackCache {
        StackCache {
            limits,
            inner: Mutex::new(Inner {
                classes: Vec::new(),
                stacks: 0,
                bytes: 0,
                warm: 0,
                warm_bytes: 0,
                depot: Depot::new(),
                due: false,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            releases: AtomicU64::new(0),
            background: AtomicBool::new(background),
            me: OnceLock::new(),
            scavenger: Scavenger::new(),
        }
    }

    /// The process-wide cache, with [`CacheLimits::DEFAULT`], which
    /// releases in the background.
    pub fn global() -> &'static StackCache {
        &GLOBAL
    }

    /// This cache's limits.
    pub fn limits(&self) -> CacheLimits {
        self.limits
    }

    /// Holds the cache's lock (for a fork: see `stack::hold_for_fork`).
    pub(crate) fn hold(&'static self) -> Box<dyn std::any::Any> {
        Box::new(self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stack of `size` usable bytes (rounded up to pages): a cached one,
    /// warm first, or a newly mapped one. A cached stack has no owner.
    ///
    /// On a ferry thread it runs with the thread's preemption held off: the
    /// cache's locks are the processors' too (see `shield`).
    pub fn get(&self, size: usize) -> io::Result<Stack> {
        shield::shielded(|| self.get_here(size))
    }

    /// Gives a stack back: cached warm if the warm budget allows, else cold
    /// (pages released) if the count and byte limits allow, else unmapped.
    /// Its owner is cleared. Stacks with a non-default guard are unmapped.
    /// Nothing may run on `stack` any more. Shielded as [`StackCache::get`].
    pub fn put(&self, stack: Stack) {
        shield::shielded(|| self.put_here(stack));
    }

    /// Releases the pages of every warm stack (`MADV_DONTNEED`; carved
    /// ones in runs), keeping the stacks cold. Returns how many stacks were
    /// trimmed. Shielded as [`StackCache::get`].
    pub fn trim(&self) -> usize {
        shield::shielded(|| self.trim_here())
    }

    /// Unmaps every cached stack with its own mapping, and every arena
    /// region whose carved stacks are all in this cache; the other carved
    /// stacks stay, released. Shielded as [`StackCache::get`].
    pub fn clear(&self) {
        shield::shielded(|| self.clear_here());
    }

    /// Current contents and counters. Shielded as [`StackCache::get`].
    pub fn stats(&self) -> CacheStats {
        shield::shielded(|| self.stats_here())
    }

    /// A stack of `size` usable bytes (rounded up to pages): a cached one,
    /// warm first, or a newly mapped one. A cached stack has no owner.
    fn get_here(&self, size: usize) -> io::Result<Stack> {
        if let Some(class) = round_to_pages(size).and_then(class_of) {
            let taken = self.lock().depot.take(class);
            if let Some((stack, _warm)) = taken {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(stack);
            }
            let mut one = self.carve(class, 1)?;
            return one
                .pop()
                .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory));
        }
        if let Some(rounded) = round_to_pages(size).filter(|&s| s > 0) {
            let mut inner = self.lock();
            if let Some(i) = inner.classes.iter().position(|c| c.size == rounded) {
                let class = &mut inner.classes[i];
                let (stack, warm) = match class.warm.pop() {
                    Some(s) => (Some(s), true),
                    None => (class.cold.pop(), false),
                };
                if class.warm.is_empty() && class.cold.is_empty() {
                    inner.classes.swap_remove(i);
                }
                if let Some(stack) = stack {
                    inner.stacks -= 1;
                    inner.bytes -= stack.reserved();
                    if warm {
                        inner.warm -= 1;
                        inner.warm_bytes -= stack.reserved();
                    }
                    drop(inner);
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(stack);
                }
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        Stack::new(size)
    }

    /// Gives a stack back: cached warm if the warm budget allows, else cold
    /// (pages released) if the count and byte limits allow, else unmapped.
    /// Its owner is cleared. Stacks with a non-default guard are unmapped.
    /// Nothing may run on `stack` any more.
    fn put_here(&self, mut stack: Stack) {
        if let Some(class) = stack.region().and_then(|_| class_of(stack.size())) {
            stack.clear_owner();
            let over = {
                let mut inner = self.lock();
                inner.depot.give(class, stack);
                self.over_bound(&mut inner, class)
            };
            self.settle(over);
            return;
        }
        if !stack.has_default_guard() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        stack.clear_owner();
        let cost = stack.reserved();
        {
            let mut inner = self.lock();
            if !inner.fits(&self.limits, cost) {
                drop(inner);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return; // unmapped outside the lock
            }
            if inner.warm_bytes.saturating_add(cost) <= self.limits.max_warm_bytes {
                inner.stacks += 1;
                inner.bytes += cost;
                inner.warm += 1;
                inner.warm_bytes += cost;
                inner.class(stack.size()).warm.push(stack);
                return;
            }
        }
        // Cold: release its pages outside the lock, then check again.
        if stack.release_pages().is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.put_cold(stack);
    }

    fn put_cold(&self, stack: Stack) {
        let cost = stack.reserved();
        let mut inner = self.lock();
        if inner.fits(&self.limits, cost) {
            inner.stacks += 1;
            inner.bytes += cost;
            inner.class(stack.size()).cold.push(stack);
        } else {
            drop(inner);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Releases the pages of every warm stack (`MADV_DONTNEED`; carved
    /// ones in runs), keeping the stacks cold. Returns how many stacks were
    /// trimmed.
    fn trim_here(&self) -> usize {
        let (taken, mags): (Vec<Stack>, _) = {
            let mut inner = self.lock();
            let mut taken = Vec::new();
            for class in &mut inner.classes {
                taken.append(&mut class.warm);
            }
            let bytes: usize = taken.iter().map(Stack::reserved).sum();
            inner.stacks -= taken.len();
            inner.bytes -= bytes;
            inner.warm = 0;
            inner.warm_bytes = 0;
            inner.classes.retain(|c| !c.cold.is_empty());
            (taken, inner.depot.take_all_warm())
        };
        let n = taken.len() + mags.iter().map(|(_, m)| m.len()).sum::<usize>();
        self.release(mags);
        for mut stack in taken {
            if stack.release_pages().is_ok() {
                self.put_cold(stack);
            }
        }
        n
    }

    /// Unmaps every cached stack with its own mapping, and every arena
    /// region whose carved stacks are all in this cache; the other carved
    /// stacks stay, released.
    fn clear_here(&self) {
        let (classes, carved) = {
            let mut inner = self.lock();
            inner.stacks = 0;
            inner.bytes = 0;
            inner.warm = 0;
            inner.warm_bytes = 0;
            (
                std::mem::take(&mut inner.classes),
                inner.depot.take_everything(),
            )
        };
        drop(classes);
        let mut by_region: std::collections::BTreeMap<u32, Vec<Stack>> = Default::default();
        for s in carved {
            by_region
                .entry(s.region().unwrap_or(u32::MAX))
                .or_default()
                .push(s);
        }
        let mut kept = Vec::new();
        for (region, stacks) in by_region {
            if stacks.len() == arena::carved_in(region) {
                if let Err(back) = arena::unmap_region(region, stacks) {
                    kept.extend(back);
                }
            } else {
                kept.extend(stacks);
            }
        }
        let mut mags: Vec<(usize, Magazine)> = Vec::new();
        for s in kept {
            let class = class_of(s.size()).unwrap_or(0);
            match mags.iter_mut().find(|(c, m)| *c == class && !m.is_full()) {
                Some((_, m)) => m.push(s),
                None => {
                    let mut m = Magazine::new();
                    m.push(s);
                    mags.push((class, m));
                }
            }
        }
        let released = arena::release_runs(&mags);
        self.releases.fetch_add(released.calls, Ordering::Relaxed);
        let mut inner = self.lock();
        for (class, m) in mags {
            inner.depot.put_cold(class, m);
        }
    }

    /// Takes back many stacks at once (a processor's magazines).
    pub(crate) fn put_many(&self, stacks: Vec<Stack>) {
        let mut other = Vec::new();
        let mut over = Over::default();
        {
            let mut inner = self.lock();
            for mut s in stacks {
                match s.region().and_then(|_| class_of(s.size())) {
                    Some(class) => {
                        s.clear_owner();
                        inner.depot.give(class, s);
                        over.add(self.over_bound(&mut inner, class));
                    }
                    None => other.push(s),
                }
            }
        }
        self.settle(over);
        for s in other {
            self.put(s);
        }
    }

    /// A processor's full magazine of `class` in, an empty one out; past
    /// the resident bound, releases a batch first.
    pub(crate) fn exchange_full(&self, class: usize, full: Magazine) -> Magazine {
        let (empty, over) = {
            let mut inner = self.lock();
            let empty = inner.depot.exchange_full(class, full);
            (empty, self.over_bound(&mut inner, class))
        };
        self.settle(over);
        empty
    }

    /// A processor's empty magazine of `class` in, a full one out, or the
    /// empty one back when the depot has none.
    pub(crate) fn exchange_empty(
        &self,
        class: usize,
        empty: Magazine,
    ) -> Result<Magazine, Magazine> {
        let got = self.lock().depot.exchange_empty(class, empty);
        if let Ok(m) = &got {
            self.hits.fetch_add(m.len() as u64, Ordering::Relaxed);
        }
        got
    }

    /// Carves up to `n` new stacks of `class` (counted as misses).
    pub(crate) fn carve(&self, class: usize, n: usize) -> io::Result<Vec<Stack>> {
        let stacks = arena::carve(class, n)?;
        self.misses
            .fetch_add(stacks.len() as u64, Ordering::Relaxed);
        Ok(stacks)
    }

    /// Releases `mags` in runs (without the lock) and keeps them cold.
    fn release(&self, mags: Vec<(usize, Magazine)>) {
        if mags.is_empty() {
            return;
        }
        let released = arena::release_runs(&mags);
        self.releases.fetch_add(released.calls, Ordering::Relaxed);
        let mut inner = self.lock();
        for (class, pages, stacks) in released.samples {
            inner.depot.sampled(class, pages, stacks);
        }
        for (class, m) in mags {
            inner.depot.put_cold(class, m);
        }
    }

    /// Current contents and counters.
    fn stats_here(&self) -> CacheStats {
        let inner = self.lock();
        let carved = inner.depot.counts();
        CacheStats {
            stacks: inner.stacks + carved.stacks,
            warm: inner.warm + carved.warm,
            bytes: inner.bytes + carved.bytes,
            warm_bytes: inner.warm_bytes + carved.warm_bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            resident: carved.resident,
            releases: self.releases.load(Ordering::Relaxed),
            regions: arena::regions(),
        }
    }
}

impl std::fmt::Debug for StackCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackCache")
            .field("limits", &self.limits)
            .field("stats", &self.stats())
            .finish()
    }
}
