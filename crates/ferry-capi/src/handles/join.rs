//! The right to join a cthread: taking it with the join handle in one
//! locked section, giving it back, and the hint a join reads first (the
//! protocol is in the parent's docs, "Joining").
//!
//! This file owns those sections of a record; it must not wait for the
//! thread (`cthreads`' join does).

use std::sync::atomic::Ordering::Relaxed;

use super::{
    CLAIMED, FORKED, FREE, Join, LIVE, NEW, cthread_t, decode, generation_of, lock, lock_ready,
    slot,
};

/// What [`take_join`] found.
pub(crate) enum Taken {
    /// The thread had finished: the right and the join handle are taken,
    /// the record is freed, and the outcome the join handle gives must be
    /// disarmed.
    Finished(Join),
    /// The thread had not finished, and the caller would wait: the right
    /// and the join handle are taken, and the record stays, with the
    /// thread in it for the others, until the outcome's drop frees it.
    Waiting(Join),
    /// The thread had not finished, and the caller would not wait:
    /// nothing changed.
    Running,
}

/// Takes the right to join `h` and its join handle (`CLAIMED` set, in one
/// locked section) if the thread has finished, or if `wait`; `None` if
/// `h` is stale, not forked, or its right was taken already.
pub(crate) fn take_join(h: cthread_t, wait: bool) -> Option<Taken> {
    let mut l = lock_ready(h)?;
    if l.flags & (FORKED | CLAIMED) != FORKED {
        return None;
    }
    if l.parts().0?.is_finished() {
        let index = l.index();
        // SAFETY: ready (`lock_ready`).
        let (join, thread) = unsafe { l.free() };
        drop(thread);
        FREE.lock().0.push(index);
        return join.map(Taken::Finished);
    }
    if !wait {
        return Some(Taken::Running);
    }
    // SAFETY: ready (`lock_ready`).
    let (join, thread) = unsafe { l.parts_mut() };
    let join = join.take()?;
    *thread = Some(join.thread());
    l.flags |= CLAIMED;
    Some(Taken::Waiting(join))
}

/// Gives the right to join `h` back, with its handle (a join of the
/// caller's own thread).
pub(crate) fn untake_join(h: cthread_t, join: Join) {
    let mut l = lock(h).expect("a claimed record stays until its outcome frees it");
    // SAFETY: ready (it was claimed); the right was given up with the
    // handle taken out, and is given back here.
    *unsafe { l.parts_mut() }.0 = Some(join);
    l.flags &= !CLAIMED;
}

/// What a join of a handle may expect, from [`peek`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Peek {
    /// The handle looks joinable and its thread has not started: it is not
    /// the caller, and probably waits in the caller's queue.
    New,
    /// The handle looks joinable and its thread has started (it may be the
    /// caller), or ended.
    Started,
    /// The handle looks stale, detached, joined or not forked.
    Refused,
}

/// What a join of `h` may expect: a hint, without the lock, that may be
/// stale at once ([`take_join`] decides) — but for `New`, which the
/// caller's own handle never gives (a thread sees its own [`Record::begin`](super::Record::begin)).
pub(crate) fn peek(h: cthread_t) -> Peek {
    let Some(s) = decode(h).and_then(|(index, generation)| {
        slot(index).filter(|s| {
            let now = s.state.load(Relaxed);
            generation_of(now) == generation && now & (LIVE | FORKED | CLAIMED) == LIVE | FORKED
        })
    }) else {
        return Peek::Refused;
    };
    if s.progress.load(Relaxed) == NEW {
        Peek::New
    } else {
        Peek::Started
    }
}
