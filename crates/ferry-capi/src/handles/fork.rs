//! The cthread table across `fork`: its free list's lock held over the
//! fork, and in the child every record but the forking thread's forgotten
//! and that one made the child's thread.
//!
//! This file owns the table's fork steps; it must not touch the runtime
//! (`start`'s fork handlers call these in their order).

use std::sync::atomic::Ordering::Relaxed;

use super::{
    CLAIMED, FORKED, FREE, LIVE, LOCKED, cthread_t, encode, generation_of, lock, slot, state_of,
};

/// Before a fork: takes the free list's lock, so that the child's copy is
/// consistent; the parent lets it go in [`release_after_fork`].
pub(crate) fn hold_for_fork() {
    FREE.lock_raw();
}

/// After a fork, in the parent: lets the free list's lock go.
pub(crate) fn release_after_fork() {
    // SAFETY: `hold_for_fork` took it, without a guard, for this fork.
    unsafe { FREE.force_unlock() };
}

/// In a fork child: frees every record but `keep`'s (their threads are not
/// in the child), without running their drops (they name the parent's
/// runtime, which the child abandons), and rebuilds the free list from the
/// slots (one that was between the free list and `LIVE` in the parent is
/// free again). A slot locked in the parent at the fork was locked by a
/// kernel thread the child does not have: its lock is dropped (a slot is
/// only ever locked for a few loads and stores, and a half-written record
/// belongs to a thread that is gone anyway).
pub(crate) fn forget_all_but(keep: cthread_t) {
    // The free list's lock was taken before the fork by this very flow;
    // its copy in the child is ours to release.
    // SAFETY: `hold_for_fork` took it without a guard, for this fork.
    unsafe { FREE.force_unlock() };
    let mut free = FREE.lock();
    let high = free.1;
    free.0.clear();
    for index in (0..high).rev() {
        let Some(s) = slot(index) else { continue };
        let now = s.state.load(Relaxed) & !LOCKED;
        let generation = generation_of(now);
        if now & LIVE != 0 {
            if encode(index, generation) == keep {
                s.state.store(now, Relaxed);
                continue;
            }
            // SAFETY: a fork child has one thread, this one: nobody else
            // touches the slot.
            unsafe {
                std::mem::forget((*s.join.get()).take());
                std::mem::forget((*s.thread.get()).take());
            }
            s.ready.store(false, Relaxed);
            s.state
                .store(state_of(generation.wrapping_add(1), 0), Relaxed);
        } else {
            s.state.store(now, Relaxed);
        }
        free.0.push(index);
    }
}

/// In a fork child: makes `keep` (the record of the thread that forked,
/// kept by [`forget_all_but`]) the record of `me`, that thread in the
/// child's runtime. Its joiner, if any, is in the parent: its join handle
/// is forgotten, and a forked thread's record is freed by its own end
/// ([`Record::end`](super::Record::end) tells it so).
pub(crate) fn adopt_in_child(keep: cthread_t, me: ferry_rt::Thread) {
    let Some(mut l) = lock(keep) else { return };
    // SAFETY: a fork child has one thread, this one; the slot is locked,
    // and `ready` may not be set if the fork came between the spawn of
    // this thread and its publication (then `join` is empty or being
    // written by a thread that is gone: forgotten either way).
    unsafe {
        std::mem::forget((*l.slot.join.get()).take());
        std::mem::forget((*l.slot.thread.get()).replace(me));
    }
    l.slot.ready.store(true, Relaxed);
    l.flags &= !(FORKED | CLAIMED);
}
