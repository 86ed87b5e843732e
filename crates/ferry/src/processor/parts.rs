//! The parts a thread spawned on a processor takes from it and gives back
//! when it exits: an id from the processor's block of ids, a stack from its
//! magazines, a small thread block from its cache — all without a lock
//! but once a magazine (64), when a cache trades with its global one.
//!
//! This file owns those per-processor caches; it must not touch the
//! global caches' policy (what `stack::cache` keeps and gives back).

use std::io;

use super::{ID_BLOCK, LOCAL_BLOCKS, OwnerToken, Processor, block_depot};
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
    /// here; an empty cache first takes a magazine from the process's
    /// depot.
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn take_block(&self) -> Option<SmallBlock> {
        // SAFETY: the caller drives us; the borrow ends with the pop or the
        // refill, which free no thread (the refill frees only the emptied
        // magazine's buffer; the vector has room for two magazines from
        // the start).
        let blocks = unsafe { &mut *self.blocks.get() };
        if let Some(block) = blocks.pop() {
            return Some(block);
        }
        Self::refill_blocks(blocks)
    }

    #[cold]
    fn refill_blocks(blocks: &mut Vec<SmallBlock>) -> Option<SmallBlock> {
        let mut magazine = block_depot::take()?;
        blocks.append(&mut magazine);
        blocks.pop()
    }

    /// Keeps a freed small thread block in this processor's cache; a full
    /// cache first gives its newer half to the process's depot (which
    /// frees it if it is at its bound).
    ///
    /// # Safety
    /// The caller drives this processor.
    #[inline]
    pub(crate) unsafe fn keep_block(&self, block: SmallBlock) {
        // SAFETY: the caller drives us; the borrow ends with the push or
        // the split, which free no thread (the vector has its full
        // capacity from the start; what the depot frees is plain memory).
        let blocks = unsafe { &mut *self.blocks.get() };
        if blocks.len() == LOCAL_BLOCKS {
            Self::spill_blocks(blocks);
        }
        blocks.push(block);
    }

    #[cold]
    fn spill_blocks(blocks: &mut Vec<SmallBlock>) {
        block_depot::give(blocks.split_off(LOCAL_BLOCKS - block_depot::MAGAZINE));
    }

    /// Gives every block this processor's cache holds to the depot, for
    /// the next runtime's processors.
    ///
    /// # Safety
    /// Nobody drives this processor (it is drained).
    pub(super) unsafe fn drain_blocks(&self) {
        // SAFETY: nobody drives us (the contract); the borrow ends with
        // the loop, which frees only plain memory.
        let blocks = unsafe { &mut *self.blocks.get() };
        while !blocks.is_empty() {
            let at = blocks.len().saturating_sub(block_depot::MAGAZINE);
            block_depot::give(blocks.split_off(at));
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
