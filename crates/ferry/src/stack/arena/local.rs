//! A processor's own magazines of carved stacks (Bonwick's loaded and
//! previous): spawns and exits on the processor take and give stacks here
//! without a lock, and swap a whole magazine with the global cache's depot
//! only when both are empty (a spawn) or both full (an exit): one lock per
//! [`MAGAZINE`] spawns or exits, and keeping two magazines stops a
//! processor that spawns and exits around a boundary from swapping at
//! every call. It owns only stacks nobody runs on, and is touched only by
//! the kernel thread driving its processor (or by its drain).

use std::io;

use super::{MAGAZINE, Magazine, class_of};
use crate::stack::{Stack, StackCache, round_to_pages};

/// A processor's loaded and previous magazines for one class.
pub(crate) struct Local {
    loaded: Magazine,
    previous: Magazine,
    /// The class both magazines hold, fixed by the first carved stack.
    class: Option<usize>,
}

impl Default for Local {
    fn default() -> Local {
        Local::new()
    }
}

impl Local {
    /// Two empty magazines (allocated at once, so the hot path never
    /// allocates).
    pub(crate) fn new() -> Local {
        Local {
            loaded: Magazine::new(),
            previous: Magazine::new(),
            class: None,
        }
    }

    /// A stack of `size` usable bytes: from the magazines when it is an
    /// arena size, else from the global cache.
    pub(crate) fn get(&mut self, size: usize) -> io::Result<Stack> {
        let cache = StackCache::global();
        let Some(class) = round_to_pages(size).and_then(class_of) else {
            return cache.get(size);
        };
        if self.class.is_some_and(|c| c != class) {
            return cache.get(size);
        }
        self.class = Some(class);
        if let Some(s) = self.loaded.pop() {
            return Ok(s);
        }
        if !self.previous.is_empty() {
            std::mem::swap(&mut self.loaded, &mut self.previous);
            return Ok(self.loaded.pop().expect("previous was not empty"));
        }
        let empty = std::mem::replace(&mut self.previous, Magazine::new());
        match cache.exchange_empty(class, empty) {
            Ok(full) => self.loaded = full,
            Err(empty) => {
                self.previous = empty;
                self.loaded = Magazine::of(cache.carve(class, MAGAZINE)?);
            }
        }
        self.loaded.pop().map_or_else(|| cache.get(size), Ok)
    }

    /// Takes back an exited thread's stack: into the magazines when it is a
    /// carved stack of their class, else into the global cache.
    pub(crate) fn put(&mut self, mut stack: Stack) {
        let cache = StackCache::global();
        let class = stack
            .region()
            .and_then(|_| class_of(stack.size()))
            .filter(|&c| self.class.is_none_or(|mine| mine == c));
        let Some(class) = class else {
            cache.put(stack);
            return;
        };
        self.class = Some(class);
        stack.clear_owner();
        if self.loaded.is_full() {
            if self.previous.is_empty() {
                std::mem::swap(&mut self.loaded, &mut self.previous);
            } else {
                let full = std::mem::replace(&mut self.previous, Magazine::new());
                let empty = cache.exchange_full(class, full);
                self.previous = std::mem::replace(&mut self.loaded, empty);
            }
        }
        self.loaded.push(stack);
    }

    /// Gives every stack held back to the global cache.
    pub(crate) fn drain(&mut self) {
        let mut all = self.loaded.take_all();
        all.append(&mut self.previous.take_all());
        StackCache::global().put_many(all);
    }
}
