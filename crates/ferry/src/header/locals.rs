//! One thread's table of local values, kept in its control block so that
//! the values follow the thread from processor to processor; the keys and
//! their access are `thread::local`'s.
//!
//! This file owns the table's storage and the order its values drop in; it
//! never runs a value's code but in that drop.

use std::any::Any;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// One thread's local values, indexed by key; each value boxed so that a
/// reference to it stays valid while the table grows.
///
/// Most threads never use a key: dropping a table that never grew is one
/// inline compare, where the vector's own drop is a call (a thread's table
/// is dropped twice, as it ends and with its block).
pub(crate) struct LocalTable {
    values: ManuallyDrop<Vec<Option<Box<dyn Any + Send>>>>,
}

impl LocalTable {
    pub(crate) const fn new() -> LocalTable {
        LocalTable {
            values: ManuallyDrop::new(Vec::new()),
        }
    }

    #[cold]
    #[inline(never)]
    fn drop_values(&mut self) {
        // SAFETY: called once, from `drop`, which uses the field no more.
        unsafe { ManuallyDrop::drop(&mut self.values) }
    }
}

impl Default for LocalTable {
    fn default() -> LocalTable {
        LocalTable::new()
    }
}

impl Drop for LocalTable {
    #[inline]
    fn drop(&mut self) {
        // A vector that never allocated holds no values.
        if self.values.capacity() != 0 {
            self.drop_values();
        }
    }
}

impl Deref for LocalTable {
    type Target = Vec<Option<Box<dyn Any + Send>>>;
    fn deref(&self) -> &Self::Target {
        &self.values
    }
}

impl DerefMut for LocalTable {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.values
    }
}
