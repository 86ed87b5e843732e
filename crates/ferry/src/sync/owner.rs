//! Who holds a lock, told apart without a thread id: a lock records a
//! *stack mark* (the address of a local in the frame that took it), and
//! "does the caller hold it?" becomes "is the mark on the caller's stack?".
//!
//! This room owns the marks and the caller's stack range; it must not block,
//! switch or take a lock (it runs inside lock and unlock), and where it
//! cannot tell it answers [`Held::Unknown`] rather than guess.
//!
//! # Why a mark
//!
//! Taking a mark costs one store of an address the processor already has (a
//! local's place in the current frame), so the uncontended lock keeps its
//! one compare-and-swap and two plain stores. Naming the running ferry thread
//! instead needs an entry into the runtime (a preemption may move the thread
//! between reading its kernel thread and reading what that kernel thread
//! runs); on the uncontended lock+unlock that cost 2.4 ns of 10.4. The
//! question "is it mine?" is asked only where misuse is possible and rare:
//! a contended lock (a relock), a raw unlock, a raw condition wait.
//!
//! # Whose stack
//!
//! | the caller | its stack | found by |
//! |------------|-----------|----------|
//! | a ferry thread ferry spawned | its ferry stack | the thread's header, inside an entry into the runtime |
//! | the first thread of [`crate::Builder::adopt`] | the stack its flow ran on before it was adopted: the kernel thread's (or, in a fork child, the ferry thread's that forked) | `thread::note_adopted_stack`, called by the adoption, into a ferry thread-local |
//! | a plain kernel thread (or a kernel thread between ferry threads) | its pthread stack | `pthread_getattr_np`, once per kernel thread |
//!
//! The stacks of live threads are disjoint, so a mark lies on one live
//! thread's stack at most, and a thread never finds its own mark after it
//! stored zero over it (it reads its own later store or a later one, which
//! is another holder's mark or zero). A lock whose holder ended without
//! unlocking it keeps a mark on a stack that a new thread may later run on:
//! that thread then counts as its holder, as it would with a reused thread
//! id. A lock taken on a signal handler's alternate stack is nobody's
//! ([`Held::No`] for the raw checks) — locking in a signal handler is not
//! allowed anyway.

use crate::thread::caller_stack;

/// Whether the caller holds a lock, by its mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// The mark is on the caller's stack.
    Yes,
    /// The mark is zero (nobody holds it) or on another stack.
    No,
    /// The caller's stack is not known (an adopted flow whose adoption did
    /// not record it, or a kernel thread whose stack the C library would not
    /// tell): checks are skipped, as they were before locks had marks.
    Unknown,
}

/// The caller's mark: an address in its current frame (never zero).
#[inline(always)]
pub(crate) fn mark() -> usize {
    let here = 0u8;
    &here as *const u8 as usize
}

/// How far from the caller's own frame, up or down, a mark is taken as the
/// caller's without asking for its stack: one page. Within a page of a
/// live frame lies either more of the same stack or a guard (below every
/// ferry stack at least 64 KiB, below a pthread stack glibc's page; above
/// a ferry stack the next one's guard, above a pthread stack its own
/// thread control block), never a mark of another thread's. (A pthread
/// made with `guardsize` 0 has no guard below: the one exception.)
const NEAR: usize = 4096;

/// Whether `mark` (a lock's recorded mark, or zero) is on the caller's stack.
#[inline]
pub(crate) fn caller_holds(mark: usize) -> Held {
    if mark == 0 {
        return Held::No;
    }
    // The usual case, a lock released or waited on from the frame that
    // took it, or one near it (a condition wait relocks a few frames
    // deeper): no entry into the runtime, no lookup.
    if mark.abs_diff(self::mark()) < NEAR {
        return Held::Yes;
    }
    caller_holds_slow(mark)
}

/// [`caller_holds`] by the caller's whole stack.
#[cold]
fn caller_holds_slow(mark: usize) -> Held {
    match caller_stack() {
        Some(r) if r.contains(&mark) => Held::Yes,
        Some(_) => Held::No,
        None => Held::Unknown,
    }
}
