//! The parts a thread spawned on a processor takes from it and gives back
//! when it exits: an id from the processor's block of ids, a stack from its
//! magazines, a small thread block from its cache — all without a lock.
//!
//! This file owns those per-processor caches; it must not touch the
//! global caches' policy (what `stack::cache` keeps and gives back).

use std::io;

use super::{ID_BLOCK, LOCAL_BLOCKS, OwnerToken, Processor};
use crate::header::{SmallBlock, ThreadId};
use crate::stack::{Stack, StackCache};

impl Processor {
    /// An id and a stack for a thread spawned here: the id from this
    /// processor's block, a default-size stack from its own cache.
    pub(crate) fn thread_parts(
        &self,
        mut tok: OwnerToken<'_>,
        stack_size: Option<usize>,
    ) -> io::Result<(ThreadId, Stack)> {
        let owner = self.owner(tok.rb());
        let shared = self.shared();
        if owner.ids.is_empty() {
            owner.ids = shared.next_thread_ids(ID_BLOCK);
        }
        let id = ThreadId(owner.ids.start);
        owner.ids.start += 1;
        let size = stack_size.unwrap_or(shared.stack_size);
        let stack = if size == shared.stack_size {
            owner.stacks.get(size)?
        } else {
            StackCache::global().get(size)?
        };
        Ok((id, stack))
    }

    /// Takes back an exited thread's stack: into this processor's
    /// magazines if it is a carved stack of their size, else the global
    /// cache.
    pub(super) fn release_stack(&self, mut tok: OwnerToken<'_>, stack: Stack) {
        // Its thread is gone: a deadlock report must not list it.
        crate::waits::forget_stack(&stack);
        self.owner(tok.rb()).stacks.put(stack);
    }

    /// A freed small thread block from this processor's cache, for a spawn
    /// here.
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn take_block(&self) -> Option<SmallBlock> {
        // SAFETY: the caller drives us; the borrow ends with the pop, which
        // frees nothing.
        unsafe { (*self.blocks.get()).pop() }
    }

    /// Keeps a freed small thread block in this processor's cache if there
    /// is room; frees it otherwise.
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn keep_block(&self, block: SmallBlock) {
        // SAFETY: the caller drives us; the borrow ends with the push, which
        // frees nothing (the vector has its full capacity from the start).
        let blocks = unsafe { &mut *self.blocks.get() };
        if blocks.len() < LOCAL_BLOCKS {
            blocks.push(block);
        }
    }

    /// How many freed small thread blocks this processor keeps (for tests).
    ///
    /// # Safety
    /// The caller drives this processor.
    #[cfg(test)]
    pub(crate) unsafe fn cached_blocks(&self) -> usize {
        // SAFETY: as in `take_block`.
        unsafe { (*self.blocks.get()).len() }
    }
}
