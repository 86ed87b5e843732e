//! Small thread blocks: memory of one fixed layout that a processor's
//! cache keeps for the next spawn (the parent's docs, "Small blocks").
//!
//! This file owns the layout and the memory's ownership; it must not
//! build or drop a cell in it (the parent does).

use std::alloc::Layout;
use std::ptr::NonNull;

/// The layout of the thread blocks processors keep for reuse (see the
/// module docs): 256 bytes at `malloc`'s own alignment.
pub(super) const SMALL_BLOCK: Layout = match Layout::from_size_align(256, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};

/// Memory for one small thread block that holds no live cell: freed to the
/// global allocator when dropped, unless a processor's cache keeps it.
pub(crate) struct SmallBlock(NonNull<u8>);

// SAFETY: the block is plain memory that nobody else points at.
unsafe impl Send for SmallBlock {}

impl SmallBlock {
    /// The size of every small block, in bytes.
    pub(crate) const SIZE: usize = SMALL_BLOCK.size();

    /// A fresh block from the global allocator; `None` if it has no memory.
    pub(crate) fn try_alloc() -> Option<SmallBlock> {
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(SMALL_BLOCK) };
        NonNull::new(p).map(SmallBlock)
    }

    /// Takes back the memory of a dropped small cell.
    ///
    /// # Safety
    /// `p` was allocated with [`SMALL_BLOCK`] and nothing else owns it.
    pub(super) unsafe fn from_raw(p: NonNull<u8>) -> SmallBlock {
        SmallBlock(p)
    }

    /// The memory, to build a cell in; the caller owns it from now on.
    pub(super) fn into_raw(self) -> NonNull<u8> {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl Drop for SmallBlock {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout (`alloc`, or the contract of
        // `from_raw`), owned by us alone.
        unsafe { std::alloc::dealloc(self.0.as_ptr(), SMALL_BLOCK) };
    }
}
