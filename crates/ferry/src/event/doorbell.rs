//! The doorbell handshake between a side that is about to sleep and a peer
//! that has just published something for it (`polled`'s module docs). Only
//! the words and their order live here, so that a loom model
//! (`tests/loom_doorbell.rs`) checks this very code; the waits and wakes
//! are the caller's (`polled`, through `sys`).
//!
//! | step | sleeper ([`arm`], then looks, then waits) | ringer ([`ring`], after publishing) |
//! |------|------------------------------------------|-------------------------------------|
//! | 1 | stores [`ASLEEP`] in the doorbell | has published (its queue push) |
//! | 2 | SeqCst fence | SeqCst fence |
//! | 3 | looks at the queues: anything there, no sleep | reads the doorbell: [`AWAKE`], done |
//! | 4 | waits while the doorbell holds [`ASLEEP`] | swaps in [`AWAKE`], wakes the waiter |
//!
//! The two fences order step 1 against the ringer's step 3 and the
//! publication against the sleeper's step 3: either the sleeper sees the
//! publication, or the ringer sees [`ASLEEP`] and wakes it. [`disarm`] puts
//! [`AWAKE`] back where the sleeper left [`ASLEEP`].

use super::atomic::{AtomicU32, Ordering, fence};

/// A doorbell's value while its side has a processor awake (or no
/// sleeper that wants ringing).
pub(crate) const AWAKE: u32 = 0;
/// A doorbell's value while a processor of its side sleeps on it.
pub(crate) const ASLEEP: u32 = 1;

/// The sleeper's step 1 and 2, for each of its doorbells: after this it
/// looks at its queues once more before it waits.
pub(crate) fn arm<'a>(bells: impl IntoIterator<Item = &'a AtomicU32>) {
    for b in bells {
        b.store(ASLEEP, Ordering::SeqCst);
    }
    fence(Ordering::SeqCst);
}

/// The sleeper, awake again: puts [`AWAKE`] back where it left [`ASLEEP`].
pub(crate) fn disarm<'a>(bells: impl IntoIterator<Item = &'a AtomicU32>) {
    for b in bells {
        let _ = b.compare_exchange(ASLEEP, AWAKE, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The ringer's steps 2 to 4, after publishing: returns whether the peer
/// must be woken (`wake` is then called, after the swap); with `always`,
/// wakes even if the doorbell says nobody sleeps (an urgent call).
#[inline]
pub(crate) fn ring(bell: &AtomicU32, always: bool, wake: impl FnOnce(&AtomicU32)) -> bool {
    fence(Ordering::SeqCst);
    if bell.load(Ordering::Relaxed) == AWAKE && !always {
        return false;
    }
    ring_slow(bell, wake)
}

#[cold]
fn ring_slow(bell: &AtomicU32, wake: impl FnOnce(&AtomicU32)) -> bool {
    bell.swap(AWAKE, Ordering::SeqCst);
    wake(bell);
    true
}
