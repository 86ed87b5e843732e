//! The block depot: freed small thread blocks (see `header::raw`, "Small
//! blocks") kept for the whole process in magazines of [`MAGAZINE`], between
//! the processors' own caches, as the stack cache keeps stacks.
//!
//! A thread's block goes back to the cache of the processor its last
//! reference drops on. With many threads alive at once, or threads spawned
//! on one processor and ending on another, one processor's cache fills
//! while another's runs dry: without the depot, the first would free blocks
//! to the allocator one by one (often across the allocator's per-thread
//! arenas) while the second allocated new ones one by one. With it, a full
//! cache gives a magazine here and an empty one takes one back, one lock a
//! [`MAGAZINE`] blocks.
//!
//! This file owns the depot and its bound; it must not know about
//! processors (they call [`give`] and [`take`]) nor build a thread in a
//! block.
//!
//! **Bound.** The process's depot keeps at most [`bound_bytes`] of blocks
//! (the larger of 4 MiB and 1/1024 of `MemTotal`, a sixteenth of the stack
//! cache's resident bound); a magazine given beyond it is freed to the
//! allocator, outside the lock.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::header::SmallBlock;

/// Blocks moved between a processor's cache and the depot at a time.
pub(crate) const MAGAZINE: usize = 64;

/// Full magazines of freed blocks, the newest last, at most `most` of them.
struct Depot {
    magazines: Mutex<Vec<Vec<SmallBlock>>>,
}

impl Depot {
    const fn new() -> Depot {
        Depot {
            magazines: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Vec<SmallBlock>>> {
        self.magazines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `magazine` unless `most` magazines are kept already; frees it
    /// then, outside the lock.
    fn give(&self, magazine: Vec<SmallBlock>, most: usize) {
        debug_assert!(magazine.len() <= MAGAZINE);
        let refused = {
            let mut magazines = self.lock();
            if magazines.len() < most {
                magazines.push(magazine);
                None
            } else {
                Some(magazine)
            }
        };
        drop(refused);
    }

    fn take(&self) -> Option<Vec<SmallBlock>> {
        self.lock().pop()
    }
}

/// The process's depot.
static DEPOT: Depot = Depot::new();

/// The most bytes of blocks the process's depot keeps: max(4 MiB,
/// `MemTotal`/1024).
pub(crate) fn bound_bytes() -> usize {
    static BOUND: OnceLock<usize> = OnceLock::new();
    *BOUND.get_or_init(|| (4 << 20).max(crate::sys::mem_total().unwrap_or(0) / 1024))
}

/// Keeps `magazine` (at most [`MAGAZINE`] blocks) for another processor,
/// or frees its blocks if the depot is at its bound.
pub(crate) fn give(magazine: Vec<SmallBlock>) {
    DEPOT.give(magazine, bound_bytes() / (MAGAZINE * SmallBlock::SIZE));
}

/// A magazine of freed blocks, the one given last; `None` if the depot is
/// empty.
pub(crate) fn take() -> Option<Vec<SmallBlock>> {
    DEPOT.take()
}

/// Takes the depot's lock until the returned guard drops (around `fork`,
/// so that a child never finds it held by a kernel thread it does not
/// have).
pub(crate) fn hold() -> Box<dyn std::any::Any> {
    Box::new(DEPOT.lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn magazine(n: usize) -> Vec<SmallBlock> {
        (0..n)
            .map(|_| SmallBlock::try_alloc().expect("memory for a block"))
            .collect()
    }

    /// Magazines come back newest first, whole, until the depot is empty.
    #[test]
    fn magazines_come_back_newest_first() {
        let depot = Depot::new();
        assert!(depot.take().is_none());
        depot.give(magazine(MAGAZINE), 4);
        depot.give(magazine(3), 4);
        assert_eq!(depot.take().map(|m| m.len()), Some(3));
        assert_eq!(depot.take().map(|m| m.len()), Some(MAGAZINE));
        assert!(depot.take().is_none());
    }

    /// Past its bound the depot frees what it is given and keeps the rest.
    #[test]
    fn the_depot_keeps_no_more_than_its_bound() {
        let depot = Depot::new();
        for _ in 0..5 {
            depot.give(magazine(2), 3);
        }
        assert_eq!(depot.lock().len(), 3);
        let kept: usize = std::iter::from_fn(|| depot.take()).map(|m| m.len()).sum();
        assert_eq!(kept, 6);
    }

    /// The process's bound holds at least 4 MiB of blocks.
    #[test]
    fn the_process_bound_is_at_least_four_mib() {
        assert!(bound_bytes() >= 4 << 20);
        assert!(bound_bytes() / (MAGAZINE * SmallBlock::SIZE) >= 256);
    }
}
