//! The completion word of one ring operation record: who frees the record.
//!
//! This room owns the word's three states and its two transitions; it must
//! not touch the record itself (the ring writes the result before
//! [`complete`], and whoever a transition names frees it).
//!
//! | state | written by | meaning |
//! |-------|------------|---------|
//! | [`WAITING`] | the owner, when it makes the record | in flight; the kernel may still write the record's buffer |
//! | [`DONE`] | the reaper ([`complete`]), after it stored the result | the kernel is done; the owner takes the result and frees the record |
//! | [`ABANDONED`] | the owner's terminator ([`abandon`]) | the owner never runs again; whoever comes second frees the record |
//!
//! Both transitions are one `swap` (AcqRel), so of the reaper and the
//! terminator exactly one sees the other's state and frees: the reaper
//! frees when it finds `ABANDONED`, the terminator when it finds `DONE`.
//! An owner that runs frees after it saw `DONE` (Acquire, which makes the
//! reaper's result visible) and after it unregistered its wait record, so
//! a terminator never reaches a freed record.

use super::atomic::{AtomicU32, Ordering};

/// In flight, the owner waiting.
pub(crate) const WAITING: u32 = 0;
/// Completed: the result is stored.
pub(crate) const DONE: u32 = 1;
/// The owner was terminated.
pub(crate) const ABANDONED: u32 = 2;

/// A new word: in flight.
pub(crate) fn new() -> AtomicU32 {
    AtomicU32::new(WAITING)
}

/// The reaper's transition, after it stored the result: true if the owner
/// was terminated and the reaper must free the record (and wake nobody).
pub(crate) fn complete(word: &AtomicU32) -> bool {
    word.swap(DONE, Ordering::AcqRel) == ABANDONED
}

/// The terminator's transition: true if the completion already arrived
/// and the terminator must free the record.
pub(crate) fn abandon(word: &AtomicU32) -> bool {
    word.swap(ABANDONED, Ordering::AcqRel) == DONE
}

/// Whether the completion arrived (Acquire: the result is visible).
pub(crate) fn is_done(word: &AtomicU32) -> bool {
    word.load(Ordering::Acquire) == DONE
}
