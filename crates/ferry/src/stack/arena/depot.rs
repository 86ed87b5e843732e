//! A cache's depot of carved stacks: per class, full warm magazines oldest
//! first, magazines of released (cold) stacks, one partly filled magazine
//! for gets and puts made off a processor, and spare empty magazines. It
//! lives under its [`StackCache`](crate::stack::StackCache)'s lock; it must
//! never drop a [`Stack`] (a carved stack's drop locks the global cache) nor
//! make a system call: whatever must be released or dropped is handed back
//! to the caller, who does it after unlocking.
//!
//! # Accounting
//!
//! Warm stacks are charged at `pages` resident pages each, an estimate per
//! class that starts at the whole usable size and is refreshed by
//! [`Depot::sampled`] from `mincore` of each released run (a running
//! average). Stacks in a processor's own magazines (at most two magazines
//! per processor) are not charged.

use std::collections::VecDeque;

use super::{CLASSES, MAGAZINE, class_size};
use crate::stack::{Stack, page_size};

/// Up to [`MAGAZINE`] free stacks of one class.
pub(crate) struct Magazine {
    stacks: Vec<Stack>,
}

impl Magazine {
    /// An empty magazine, with room for [`MAGAZINE`] stacks (so pushes never
    /// allocate).
    pub(crate) fn new() -> Magazine {
        Magazine {
            stacks: Vec::with_capacity(MAGAZINE),
        }
    }

    /// A magazine holding `stacks` (at most [`MAGAZINE`]).
    pub(crate) fn of(mut stacks: Vec<Stack>) -> Magazine {
        debug_assert!(stacks.len() <= MAGAZINE);
        stacks.reserve_exact(MAGAZINE - stacks.len().min(MAGAZINE));
        Magazine { stacks }
    }

    pub(crate) fn len(&self) -> usize {
        self.stacks.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.stacks.len() >= MAGAZINE
    }

    pub(crate) fn pop(&mut self) -> Option<Stack> {
        self.stacks.pop()
    }

    /// Adds a stack; the caller checked [`is_full`](Magazine::is_full).
    pub(crate) fn push(&mut self, stack: Stack) {
        debug_assert!(!self.is_full());
        self.stacks.push(stack);
    }

    pub(crate) fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    /// Empties the magazine into a vector.
    pub(crate) fn take_all(&mut self) -> Vec<Stack> {
        std::mem::take(&mut self.stacks)
    }
}

/// One class's part of a depot.
struct Class {
    /// Full magazines of warm stacks, oldest first.
    warm: VecDeque<Magazine>,
    /// Magazines of released stacks (any fill).
    cold: Vec<Magazine>,
    /// Warm stacks given and taken one at a time (off a processor).
    loose: Magazine,
    /// Spare empty magazines.
    empty: Vec<Magazine>,
    /// Estimated resident pages of one warm stack.
    pages: usize,
    /// Stacks in `warm` and `loose`.
    warm_n: usize,
    /// Stacks in `cold`.
    cold_n: usize,
}

impl Class {
    fn new(class: usize) -> Class {
        Class {
            warm: VecDeque::new(),
            cold: Vec::new(),
            loose: Magazine { stacks: Vec::new() },
            empty: Vec::new(),
            pages: class_size(class) / page_size(),
            warm_n: 0,
            cold_n: 0,
        }
    }

    fn spare(&mut self) -> Magazine {
        self.empty.pop().unwrap_or_else(Magazine::new)
    }
}

/// What a depot holds, per class, for [`CacheStats`](crate::stack::CacheStats).
#[derive(Default)]
pub(crate) struct ClassCounts {
    pub(crate) stacks: usize,
    pub(crate) warm: usize,
    pub(crate) bytes: usize,
    pub(crate) warm_bytes: usize,
    pub(crate) resident: usize,
}

/// Free carved stacks of every class; see the module documentation.
pub(crate) struct Depot {
    classes: Vec<Class>,
}

impl Depot {
    /// An empty depot (allocates nothing until used).
    pub(crate) const fn new() -> Depot {
        Depot {
            classes: Vec::new(),
        }
    }

    fn class(&mut self, class: usize) -> &mut Class {
        if self.classes.is_empty() {
            self.classes = (0..CLASSES).map(Class::new).collect();
        }
        &mut self.classes[class]
    }

    /// Estimated resident bytes of the warm stacks held.
    pub(crate) fn resident(&self) -> usize {
        let page = page_size();
        self.classes.iter().map(|c| c.warm_n * c.pages * page).sum()
    }

    /// One warm magazine's estimated resident bytes in `class`.
    pub(crate) fn magazine_bytes(&mut self, class: usize) -> usize {
        MAGAZINE * self.class(class).pages * page_size()
    }

    /// A stack of `class`, warm first (newest), else cold.
    pub(crate) fn take(&mut self, class: usize) -> Option<(Stack, bool)> {
        let c = self.class(class);
        if c.loose.is_empty()
            && let Some(full) = c.warm.pop_back()
        {
            let old = std::mem::replace(&mut c.loose, full);
            if old.stacks.capacity() > 0 {
                c.empty.push(old);
            }
        }
        if let Some(s) = c.loose.pop() {
            c.warm_n -= 1;
            return Some((s, true));
        }
        let mag = c.cold.last_mut()?;
        let s = mag.pop();
        if mag.is_empty() {
            let empty = c.cold.pop().expect("just looked");
            c.empty.push(empty);
        }
        c.cold_n -= usize::from(s.is_some());
        s.map(|s| (s, false))
    }

    /// Keeps a warm stack given off a processor.
    pub(crate) fn give(&mut self, class: usize, stack: Stack) {
        let c = self.class(class);
        if c.loose.stacks.capacity() == 0 {
            c.loose = c.spare();
        }
        c.loose.push(stack);
        c.warm_n += 1;
        if c.loose.is_full() {
            let spare = c.spare();
            let full = std::mem::replace(&mut c.loose, spare);
            c.warm.push_back(full);
        }
    }

    /// A processor's full magazine in, an empty one out.
    pub(crate) fn exchange_full(&mut self, class: usize, full: Magazine) -> Magazine {
        let c = self.class(class);
        c.warm_n += full.len();
        c.warm.push_back(full);
        c.spare()
    }

    /// A processor's empty magazine in, a full one (warm first, else cold)
    /// out; or the empty one back when the depot has none.
    pub(crate) fn exchange_empty(
        &mut self,
        class: usize,
        empty: Magazine,
    ) -> Result<Magazine, Magazine> {
        let c = self.class(class);
        let full = if let Some(m) = c.warm.pop_back() {
            c.warm_n -= m.len();
            m
        } else if let Some(m) = c.cold.pop() {
            c.cold_n -= m.len();
            m
        } else {
            return Err(empty);
        };
        c.empty.push(empty);
        Ok(full)
    }

    /// Takes the oldest warm magazines (the loose one last) until the
    /// estimate is at most `target` bytes, for the caller to release.
    pub(crate) fn take_for_release(&mut self, target: usize) -> Vec<(usize, Magazine)> {
        self.take_some_for_release(target, usize::MAX)
    }

    /// As [`take_for_release`](Depot::take_for_release), at most `most`
    /// magazines.
    pub(crate) fn take_some_for_release(
        &mut self,
        target: usize,
        most: usize,
    ) -> Vec<(usize, Magazine)> {
        let mut taken = Vec::new();
        let page = page_size();
        let mut resident = self.resident();
        for (i, c) in self.classes.iter_mut().enumerate() {
            while resident > target && taken.len() < most {
                let Some(m) = c.warm.pop_front().or_else(|| {
                    (!c.loose.is_empty()).then(|| std::mem::replace(&mut c.loose, Magazine::new()))
                }) else {
                    break;
                };
                c.warm_n -= m.len();
                resident -= m.len() * c.pages * page;
                taken.push((i, m));
            }
        }
        taken
    }

    /// Every warm magazine, for the caller to release.
    pub(crate) fn take_all_warm(&mut self) -> Vec<(usize, Magazine)> {
        self.take_for_release(0)
    }

    /// Keeps magazines whose stacks were released.
    pub(crate) fn put_cold(&mut self, class: usize, mag: Magazine) {
        let c = self.class(class);
        c.cold_n += mag.len();
        c.cold.push(mag);
    }

    /// Folds a `mincore` sample into `class`'s estimate: `pages` resident
    /// pages were seen over `stacks` stacks.
    pub(crate) fn sampled(&mut self, class: usize, pages: usize, stacks: usize) {
        if stacks == 0 {
            return;
        }
        let c = self.class(class);
        let seen = pages.div_ceil(stacks).max(1);
        c.pages = (c.pages + seen).div_ceil(2).max(1);
    }

    /// Takes every stack out (for `clear`).
    pub(crate) fn take_everything(&mut self) -> Vec<Stack> {
        let mut all = Vec::new();
        for c in &mut self.classes {
            for mut m in c.warm.drain(..).chain(c.cold.drain(..)) {
                all.append(&mut m.stacks);
            }
            all.append(&mut c.loose.stacks);
            c.warm_n = 0;
            c.cold_n = 0;
        }
        all
    }

    /// What the depot holds, over all classes.
    pub(crate) fn counts(&self) -> ClassCounts {
        let page = page_size();
        let mut n = ClassCounts::default();
        for (i, c) in self.classes.iter().enumerate() {
            let size = class_size(i);
            let reserved = size + crate::stack::default_guard_size(size);
            n.stacks += c.warm_n + c.cold_n;
            n.warm += c.warm_n;
            n.bytes += (c.warm_n + c.cold_n) * reserved;
            n.warm_bytes += c.warm_n * reserved;
            n.resident += c.warm_n * c.pages * page;
        }
        n
    }
}
