//! The runtime's injector: threads made runnable off the processors and
//! ring overflow, one FIFO per priority level under one lock, each
//! beginning with the express lane of threads whose timers fired; and
//! [`Chain`], threads linked for the injector without a lock.
//!
//! This file owns the lists and their links; it must not decide which
//! queue a thread goes to (the policy does) and must not wake processors
//! (the processor mechanism does, after a push).

use std::ptr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Mutex, PoisonError};

use super::LEVELS;
use crate::header::{Header, Thread};

/// Threads made runnable off the processors (by kernel threads, another
/// runtime, timers fired off a processor) and ring overflow: one FIFO per
/// priority level under one lock, linked through the threads' own
/// `Header::queue_next` (a runnable thread is in one queue at a time), so
/// that queuing a thread never allocates and never fails for want of
/// memory.
///
/// | state (under the lock) | written by | meaning |
/// |------------------------|------------|---------|
/// | `closed == false` | `new` | threads are taken |
/// | `closed == true` | [`Injector::close`], once every processor stopped | nobody runs a thread queued now: [`Injector::push`] gives it back |
pub(crate) struct Injector {
    lists: Mutex<Lists>,
    /// How many threads wait on each level, readable without the lock (a
    /// hint): a look for a level finds an empty one without the lock.
    len: [AtomicUsize; LEVELS],
    /// Of those, how many are in the level's express lane (a hint, as
    /// `len`).
    express_len: [AtomicUsize; LEVELS],
}

/// The injector's lists: each a head and a tail of threads given up with
/// `Thread::into_raw`, linked through `queue_next`; the list owns those
/// references.
///
/// Each level's list begins with its *express lane*: threads whose sleep
/// or timed wait reached its deadline ([`Injector::push_express`]), in the
/// order their timers fired, ahead of every other thread of the level.
/// `express[l]` is the lane's last thread (null: the lane is empty) and
/// `express_n[l]` its length; the lane is always a prefix of the list, so
/// whatever takes from the head takes from the lane first.
struct Lists {
    head: [*mut Header; LEVELS],
    tail: [*mut Header; LEVELS],
    express: [*mut Header; LEVELS],
    express_n: [usize; LEVELS],
    closed: bool,
}

// SAFETY: the pointers are thread references the lists own (a `Thread` is
// `Send`), touched only under the injector's lock.
unsafe impl Send for Lists {}

impl Lists {
    /// Takes the first thread of level `l` (the express lane's first, if
    /// any), and whether it was in the lane.
    fn pop(&mut self, l: usize) -> Option<(Thread, bool)> {
        let h = self.head[l];
        if h.is_null() {
            return None;
        }
        // SAFETY: a queued pointer is a live block whose reference the list
        // owns; its link is ours under the lock.
        let next = unsafe { (*h).queue_next.load(Relaxed) };
        self.head[l] = next;
        if next.is_null() {
            self.tail[l] = ptr::null_mut();
        }
        let express = self.express_n[l] != 0;
        if express {
            self.express_n[l] -= 1;
            if self.express_n[l] == 0 {
                self.express[l] = ptr::null_mut();
            }
        }
        // SAFETY: the list gives up the reference it owned, once.
        Some((unsafe { Thread::from_raw(h) }, express))
    }

    /// Puts `t` back first on level `l` (a thread just popped), in the
    /// express lane again if it was in it (then so was every thread
    /// popped before it, and the lane is still a prefix).
    fn push_front(&mut self, l: usize, t: Thread, express: bool) {
        let p = t.into_raw();
        // SAFETY: `p` is live (the list owns its reference again) and in no
        // other queue; its link is ours under the lock.
        unsafe { (*p).queue_next.store(self.head[l], Relaxed) };
        if self.head[l].is_null() {
            self.tail[l] = p;
        }
        self.head[l] = p;
        if express {
            if self.express_n[l] == 0 {
                self.express[l] = p;
            }
            self.express_n[l] += 1;
        }
    }
}

impl Injector {
    pub(crate) fn new() -> Injector {
        Injector {
            lists: Mutex::new(Lists {
                head: [ptr::null_mut(); LEVELS],
                tail: [ptr::null_mut(); LEVELS],
                express: [ptr::null_mut(); LEVELS],
                express_n: [0; LEVELS],
                closed: false,
            }),
            len: Default::default(),
            express_len: Default::default(),
        }
    }

    /// Queues `t`, whose timer fired, at the back of its level's express
    /// lane: after the threads whose timers fired before it, before every
    /// other thread of its level (see [`Lists`]). Gives it back if the
    /// injector is closed. Never allocates.
    pub(crate) fn push_express(&self, t: Thread) -> Result<(), Thread> {
        let l = t.priority().level();
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        if lists.closed {
            return Err(t);
        }
        let p = t.into_raw();
        let after = lists.express[l];
        // SAFETY: `p` is live (we gave up its reference to the list) and
        // was in no other queue; `after`, if not null, is a queued live
        // block; links are touched only under this lock.
        unsafe {
            let next = if after.is_null() {
                lists.head[l]
            } else {
                (*after).queue_next.load(Relaxed)
            };
            (*p).queue_next.store(next, Relaxed);
            if after.is_null() {
                lists.head[l] = p;
            } else {
                (*after).queue_next.store(p, Relaxed);
            }
            if next.is_null() {
                lists.tail[l] = p;
            }
        }
        lists.express[l] = p;
        lists.express_n[l] += 1;
        self.add_len(l, 1);
        self.express_len[l].store(lists.express_n[l], Release);
        Ok(())
    }

    /// Whether level `level`'s express lane looks non-empty (a hint).
    #[inline]
    pub(crate) fn has_express(&self, level: usize) -> bool {
        self.express_len[level].load(Acquire) != 0
    }

    /// Takes the first thread of level `level`'s express lane, if any.
    pub(crate) fn pop_express(&self, level: usize) -> Option<Thread> {
        if !self.has_express(level) {
            return None;
        }
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        if lists.express_n[level] == 0 {
            return None;
        }
        let (t, _) = lists.pop(level)?;
        self.taken(&lists, level, 1);
        Some(t)
    }

    /// Counts `n` threads taken from level `l`, and the express lane's
    /// length now; under the lock.
    #[inline]
    fn taken(&self, lists: &Lists, l: usize, n: usize) {
        self.sub_len(l, n);
        let e = &self.express_len[l];
        if e.load(Relaxed) != lists.express_n[l] {
            e.store(lists.express_n[l], Release);
        }
    }

    /// Queues `t` at the back of its level; gives it back if the injector
    /// is closed (the runtime ended). Never allocates.
    pub(crate) fn push(&self, t: Thread) -> Result<(), Thread> {
        let level = t.priority().level();
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        if lists.closed {
            return Err(t);
        }
        let p = t.into_raw();
        // SAFETY: `p` is live (we gave up its reference to the list), and
        // its link is touched only under this lock while it is queued; it
        // was in no other queue.
        unsafe { (*p).queue_next.store(ptr::null_mut(), Relaxed) };
        let tail = lists.tail[level];
        if tail.is_null() {
            lists.head[level] = p;
        } else {
            // SAFETY: the tail is a queued live block (as above).
            unsafe { (*tail).queue_next.store(p, Relaxed) };
        }
        lists.tail[level] = p;
        self.add_len(level, 1);
        Ok(())
    }

    /// Queues every thread of `chain` at the back of its level, in the
    /// chain's order, under one lock; gives the chain back if the injector
    /// is closed. Never allocates.
    pub(crate) fn push_chain(&self, mut chain: Chain) -> Result<(), Chain> {
        if chain.len() == 0 {
            return Ok(());
        }
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        if lists.closed {
            return Err(chain);
        }
        for l in 0..LEVELS {
            let head = std::mem::replace(&mut chain.head[l], ptr::null_mut());
            if head.is_null() {
                continue;
            }
            let tail = std::mem::replace(&mut chain.tail[l], ptr::null_mut());
            if lists.tail[l].is_null() {
                lists.head[l] = head;
            } else {
                // SAFETY: the tail is a queued live block whose link is ours
                // under the lock.
                unsafe { (*lists.tail[l]).queue_next.store(head, Relaxed) };
            }
            lists.tail[l] = tail;
            self.add_len(l, std::mem::take(&mut chain.len[l]));
        }
        Ok(())
    }

    /// Takes the oldest thread of the highest level.
    pub(crate) fn pop(&self) -> Option<Thread> {
        self.pop_at_least(LEVELS - 1)
    }

    /// Takes the oldest thread of level `level` or above (more urgent).
    pub(crate) fn pop_at_least(&self, level: usize) -> Option<Thread> {
        if self.len_at_least(level) == 0 {
            return None;
        }
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let (l, t) = (0..=level).find_map(|l| lists.pop(l).map(|(t, _)| (l, t)))?;
        self.taken(&lists, l, 1);
        Some(t)
    }

    /// Takes the oldest thread of level `level` or above, as
    /// [`Injector::pop_at_least`], and, under the same lock, hands up to
    /// `more` of the threads queued behind it on its level to `keep`, in
    /// order (Go's `globrunqget`: a processor that finds its own queue
    /// empty takes its share of the injector at once, not one lock per
    /// thread). A thread `keep` gives back stays first in the injector,
    /// and the rest with it.
    pub(crate) fn pop_share(
        &self,
        level: usize,
        more: usize,
        mut keep: impl FnMut(Thread) -> Result<(), Thread>,
    ) -> Option<Thread> {
        if self.len_at_least(level) == 0 {
            return None;
        }
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let l = (0..=level).find(|&l| !lists.head[l].is_null())?;
        let (first, _) = lists.pop(l)?;
        let mut taken = 1;
        while taken <= more {
            let Some((t, express)) = lists.pop(l) else {
                break;
            };
            if let Err(t) = keep(t) {
                lists.push_front(l, t, express);
                break;
            }
            taken += 1;
        }
        self.taken(&lists, l, taken);
        Some(first)
    }

    /// Counts `n` more threads on level `l`. Called only under the lock,
    /// which orders every change of the counts, so a load and a store do
    /// (a locked add would cost a second locked instruction a push).
    #[inline]
    fn add_len(&self, l: usize, n: usize) {
        let len = &self.len[l];
        len.store(len.load(Relaxed) + n, Release);
    }

    /// Counts `n` fewer threads on level `l`; under the lock, as
    /// [`Injector::add_len`].
    #[inline]
    fn sub_len(&self, l: usize, n: usize) {
        let len = &self.len[l];
        len.store(len.load(Relaxed) - n, Release);
    }

    /// Whether threads of exactly level `level` look queued (a hint).
    pub(crate) fn holds(&self, level: usize) -> bool {
        self.len[level].load(Acquire) != 0
    }

    /// How many threads look queued (a hint).
    pub(crate) fn len(&self) -> usize {
        self.len_at_least(LEVELS - 1)
    }

    /// How many threads of level `level` or above look queued (a hint).
    fn len_at_least(&self, level: usize) -> usize {
        self.len[..=level].iter().map(|n| n.load(Acquire)).sum()
    }

    /// Whether threads look queued.
    pub(crate) fn has_work(&self) -> bool {
        self.len.iter().any(|n| n.load(Acquire) != 0)
    }

    /// Closes the injector (a later [`Injector::push`] gives its thread
    /// back) and hands every queued thread to `f`, one at a time, outside
    /// the lock.
    pub(crate) fn close(&self, mut f: impl FnMut(Thread)) {
        self.lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        loop {
            let t = {
                let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
                let t = (0..LEVELS).find_map(|l| lists.pop(l).map(|(t, _)| (l, t)));
                if let Some((l, _)) = t {
                    self.taken(&lists, l, 1);
                }
                t
            };
            match t {
                Some((_, t)) => f(t),
                None => return,
            }
        }
    }
}

/// Threads linked through their `Header::queue_next`, one FIFO per
/// priority level, built without a lock and handed to the injector whole
/// ([`Injector::push_chain`]). Owns the references of the threads in it;
/// dropping a chain drops them.
pub(crate) struct Chain {
    head: [*mut Header; LEVELS],
    tail: [*mut Header; LEVELS],
    len: [usize; LEVELS],
}

// SAFETY: the pointers are thread references the chain owns (a `Thread` is
// `Send`), and only the chain's owner touches their links.
unsafe impl Send for Chain {}

impl Default for Chain {
    fn default() -> Self {
        Chain::new()
    }
}

impl Chain {
    /// An empty chain.
    pub(crate) const fn new() -> Chain {
        Chain {
            head: [ptr::null_mut(); LEVELS],
            tail: [ptr::null_mut(); LEVELS],
            len: [0; LEVELS],
        }
    }

    /// Links `t` at the back of its level. `t` must be in no queue (a
    /// runnable thread is in one queue at a time, and this is its queue
    /// now).
    pub(crate) fn push(&mut self, t: Thread) {
        let l = t.priority().level();
        let p = t.into_raw();
        // SAFETY: `p` is live (the chain owns its reference now) and in no
        // other queue, so its link is ours.
        unsafe { (*p).queue_next.store(ptr::null_mut(), Relaxed) };
        if self.tail[l].is_null() {
            self.head[l] = p;
        } else {
            // SAFETY: the tail is a live block of this chain (as above).
            unsafe { (*self.tail[l]).queue_next.store(p, Relaxed) };
        }
        self.tail[l] = p;
        self.len[l] += 1;
    }

    /// How many threads the chain holds.
    pub(crate) fn len(&self) -> usize {
        self.len.iter().sum()
    }

    /// Takes the oldest thread of the highest level.
    pub(crate) fn pop(&mut self) -> Option<Thread> {
        let l = (0..LEVELS).find(|&l| !self.head[l].is_null())?;
        let h = self.head[l];
        // SAFETY: a linked pointer is a live block whose reference the chain
        // owns; its link is ours.
        let next = unsafe { (*h).queue_next.load(Relaxed) };
        self.head[l] = next;
        if next.is_null() {
            self.tail[l] = ptr::null_mut();
        }
        self.len[l] -= 1;
        // SAFETY: the chain gives up the reference it owned, once.
        Some(unsafe { Thread::from_raw(h) })
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        let lists = self.lists.get_mut().unwrap_or_else(PoisonError::into_inner);
        for l in 0..LEVELS {
            while lists.pop(l).is_some() {}
        }
    }
}
