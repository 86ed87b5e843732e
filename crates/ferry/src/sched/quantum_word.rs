//! The processor's quantum word: the quantum, in microseconds, of the
//! thread a processor runs under the fine-grain policy, which the monitor
//! enforces in place of the runtime's time slice.
//!
//! This file owns the word's two accesses; it must not order anything by
//! itself: the order comes from the processor's `dispatch` word.
//!
//! | step | by | access |
//! |------|----|--------|
//! | the policy picks a thread | the processor's own kernel thread | [`publish`]: a Relaxed store of its quantum |
//! | the processor switches to it | the same kernel thread, after `publish` | `dispatch` (`dispatches << 1 \| 1`): a Release store (`Processor::mark_dispatch`) |
//! | the monitor looks | the watcher's kernel thread | `dispatch`: an Acquire load; then [`read`]: a Relaxed load |
//!
//! So a monitor that saw a dispatch reads that dispatch's quantum or a
//! later one's, never an earlier thread's; a later one's can only make it
//! ask, for the dispatch it saw, a preemption that the processor ignores
//! once that dispatch has ended (`slice_expired` compares dispatches).
//! `tests/loom_quantum.rs` compiles this file against loom's atomics.

use super::atomic::{AtomicU32, Ordering};

/// Publishes `us` as the quantum of the thread about to run (before the
/// processor's `dispatch` store).
#[inline]
pub(crate) fn publish(word: &AtomicU32, us: u32) {
    word.store(us, Ordering::Relaxed);
}

/// The quantum of the dispatch the caller saw in an Acquire load of the
/// processor's `dispatch` word (or of a later one).
#[inline]
pub(crate) fn read(word: &AtomicU32) -> u32 {
    word.load(Ordering::Relaxed)
}
