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
//! Classes are keyed by usable size; only stacks with the default guard
//! ([`default_guard_size`](super::default_guard_size)) are cached, so every
//! stack a class hands out has the guard [`Stack::new`] would give it. The cache is a mutex around a few vectors: an
//! uncontended lock is two atomic operations, cheap next to a spawn; the
//! thread layer may add per-processor caches in front of it.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use super::{DEFAULT_STACK_SIZE, Stack, round_to_pages};

/// Bounds of a [`StackCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most stacks cached, warm and cold together.
    pub max_stacks: usize,
    /// Most address space (guards included) held by cached stacks.
    pub max_bytes: usize,
    /// Most address space held by warm stacks, which bounds the memory the
    /// cache keeps committed.
    pub max_warm_bytes: usize,
}

impl CacheLimits {
    /// The global cache's limits: 1024 stacks, 1 GiB of address space,
    /// 32 MiB warm (64 default-sized stacks with their 256 KiB guards, so
    /// at most 16 MiB of committed stack).
    pub const DEFAULT: CacheLimits = CacheLimits {
        max_stacks: 1024,
        max_bytes: 1 << 30,
        max_warm_bytes: 64 * 2 * DEFAULT_STACK_SIZE,
    };
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
    /// [`StackCache::get`] calls served from the cache.
    pub hits: u64,
    /// [`StackCache::get`] calls that mapped a new stack.
    pub misses: u64,
    /// Stacks [`StackCache::put`] unmapped because the cache was full.
    pub dropped: u64,
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
}

static GLOBAL: StackCache = StackCache::new(CacheLimits::DEFAULT);

impl StackCache {
    /// An empty cache with the given limits.
    pub const fn new(limits: CacheLimits) -> StackCache {
        StackCache {
            limits,
            inner: Mutex::new(Inner {
                classes: Vec::new(),
                stacks: 0,
                bytes: 0,
                warm: 0,
                warm_bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// The process-wide cache, with [`CacheLimits::DEFAULT`].
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
    pub fn get(&self, size: usize) -> io::Result<Stack> {
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
    pub fn put(&self, mut stack: Stack) {
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

    /// Releases the pages of every warm stack (`MADV_DONTNEED`), keeping the
    /// stacks cold. Returns how many stacks were trimmed.
    pub fn trim(&self) -> usize {
        let taken: Vec<Stack> = {
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
            taken
        };
        let n = taken.len();
        for mut stack in taken {
            if stack.release_pages().is_ok() {
                self.put_cold(stack);
            }
        }
        n
    }

    /// Unmaps every cached stack.
    pub fn clear(&self) {
        let classes = {
            let mut inner = self.lock();
            inner.stacks = 0;
            inner.bytes = 0;
            inner.warm = 0;
            inner.warm_bytes = 0;
            std::mem::take(&mut inner.classes)
        };
        drop(classes);
    }

    /// Current contents and counters.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            stacks: inner.stacks,
            warm: inner.warm,
            bytes: inner.bytes,
            warm_bytes: inner.warm_bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
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
