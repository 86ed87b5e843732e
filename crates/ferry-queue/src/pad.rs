//! `CachePadded`: keeps a word that one side writes off the cache lines the
//! other side writes, so the two sides of a queue do not false-share.
//!
//! 128 bytes because x86-64 prefetches cache lines in adjacent pairs.

use core::ops::Deref;

/// A value aligned to, and padded out to, 128 bytes.
#[derive(Debug, Default)]
#[repr(C, align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> Deref for CachePadded<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
