//! The park word's protocol: every transition of a thread's park state
//! (the table in `thread`'s module docs), on one `AtomicU32`, apart from
//! the switching and queuing around it.
//!
//! This room owns the transitions only; it must not switch, queue or
//! touch anything but the word. It reaches its atomics through
//! `super::atomic`, so that `tests/loom_park.rs` compiles this very file
//! against loom's atomics and checks it under every interleaving.

use super::atomic::AtomicU32;
use super::atomic::Ordering::{self, AcqRel, Acquire};

/// Running or runnable, no token.
pub(crate) const EMPTY: u32 = 0;
/// A token waits: the next park returns at once.
pub(crate) const NOTIFIED: u32 = 1;
/// The thread decided to block and is switching out.
pub(crate) const PARKING: u32 = 2;
/// Switched out, in no queue; only an unpark brings it back.
pub(crate) const PARKED: u32 = 3;

/// The thread itself, about to block: takes a waiting token and returns
/// true (the caller returns at once, and looks at its condition again),
/// or moves `EMPTY -> PARKING` and returns false (the caller switches
/// away and [`finish_parking`] follows).
///
/// The token is taken with a swap, not a load and a store: an [`unpark`]
/// that finds it writes it again, and the swap reads from that write, so
/// the caller's next look at its condition sees what that unpark's caller
/// set before it. (With a load and a plain store, and an unpark that
/// wrote nothing, x86 let the store wait in the store buffer while the
/// caller's look ran early; the look missed the condition and the next
/// park slept for ever.)
#[inline]
pub(crate) fn take_token_or_start_parking(state: &AtomicU32) -> bool {
    !move_or_take_token(state, EMPTY, PARKING, Acquire)
}

/// The processor that switched away from a parking thread, once the
/// switch has landed: `PARKING -> PARKED` and true (the thread waits for
/// an [`unpark`]), or, if an unpark came while it switched out, takes the
/// token (a swap, as in [`take_token_or_start_parking`]) and returns false:
/// the caller queues the thread to run again.
#[inline]
pub(crate) fn finish_parking(state: &AtomicU32) -> bool {
    move_or_take_token(state, PARKING, PARKED, AcqRel)
}

/// Moves the word `from -> to` (true), or, when an unpark left a token
/// instead, takes it (false) with a swap that reads from the last
/// unpark's write. Only the thread's own park and its finish take a
/// token, so the one the failed compare-exchange saw is still there.
#[inline]
fn move_or_take_token(state: &AtomicU32, from: u32, to: u32, success: Ordering) -> bool {
    if state.compare_exchange(from, to, success, Acquire).is_ok() {
        return true;
    }
    let token = state.swap(EMPTY, Acquire);
    debug_assert_eq!(token, NOTIFIED);
    false
}

/// Leaves a token (`EMPTY`, `PARKING` or `NOTIFIED -> NOTIFIED`: a token
/// already there is written again, see [`take_token_or_start_parking`]) and
/// returns false, or wakes a parked thread (`PARKED -> EMPTY`) and returns
/// true: the caller must queue it. Every write is a read-modify-write with
/// Release, so the side that takes the token sees what the caller did
/// before; the Acquire half sees the context a `finish_parking` saved
/// before `PARKED`.
#[inline]
pub(crate) fn unpark(state: &AtomicU32) -> bool {
    let mut s = state.load(Acquire);
    loop {
        let next = if s == PARKED { EMPTY } else { NOTIFIED };
        match state.compare_exchange(s, next, AcqRel, Acquire) {
            Ok(_) => return s == PARKED,
            Err(now) => s = now,
        }
    }
}
