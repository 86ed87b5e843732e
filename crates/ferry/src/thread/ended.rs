//! What a terminated thread leaves behind, and how [`Thread::terminate`](crate::Thread::terminate)
//! clears it up: the waits it is registered in (`wait_record`), its
//! thread-locals and its stack.
//!
//! This room owns the order of the clean-up; it must not know what a wait
//! *is* (each record's `abandon` says how to leave it, and
//! `crate::sync::waiter` writes those), and it runs only on a thread that
//! never runs again.

use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{Acquire, Relaxed};

use super::raw::{self, Header};

/// Abandons every wait the stopped thread registered, innermost first, and
/// empties its list.
///
/// # Safety
/// The thread of `header` has stopped for good (terminated, off its
/// processor), and the caller is its one terminator.
unsafe fn clear(header: &Header) {
    let mut r = header.waits.load(Acquire).cast_const();
    let mut tries = 0u32;
    while let Some(rec) = NonNull::new(r.cast_mut()) {
        // SAFETY: a registered record is live until unregistered, and the
        // thread, stopped for good, unregisters nothing any more.
        let rec = unsafe { rec.as_ref() };
        // SAFETY: as above; the thread has stopped for good.
        if unsafe { rec.abandon() } {
            r = rec.outer();
            tries = 0;
        } else {
            tries += 1;
            pause(tries);
        }
    }
    header.waits.store(ptr::null_mut(), Relaxed);
}

/// Clears up after a terminated thread that has stopped for good, then
/// completes it with `value` as if its closure had returned it: leaves its
/// registered waits (which frees its stack of every outside pointer),
/// drops its thread-locals (their destructors run here, on the caller's
/// thread), puts its stack back in the global stack cache, and completes
/// its join. False (and nothing done but the clean-up) if the closure's
/// result is not a `T`.
///
/// # Safety
/// The thread is terminated and off its processor for good: it never runs
/// again, nothing runs on its stack, no kernel call uses its stack, and
/// the caller is its one terminator.
pub(crate) unsafe fn finish_terminated<T: 'static>(ptr: NonNull<Header>, value: T) -> bool {
    // SAFETY: the caller holds a reference to the block.
    let header = unsafe { ptr.as_ref() };
    // SAFETY: the contract: stopped for good, one terminator.
    unsafe { clear(header) };
    // SAFETY: the thread no longer touches its table (it never runs
    // again), and nobody else does.
    drop(unsafe { raw::take_locals(ptr) });
    // SAFETY: nothing runs on the stack or points into it (the waits are
    // left); the thread never runs again, so its context is never resumed.
    if let Some(stack) = unsafe { raw::take_stack(ptr) } {
        // (Shielded: `stack::shield`.)
        crate::stack::StackCache::global().put(stack);
    }
    // SAFETY: the thread never runs again, so the stage is ours.
    unsafe { raw::finish_with(ptr, value) }
}

/// Waits a little between looks at another thread's state: yields at
/// first, then sleeps 50 µs (the thread or kernel thread alike).
pub(super) fn pause(tries: u32) {
    let on_ferry = crate::upcall::enter().is_some();
    match (tries < 64, on_ferry) {
        (true, true) => super::yield_now(),
        (true, false) => std::thread::yield_now(),
        (false, true) => crate::sleep(std::time::Duration::from_micros(50)),
        (false, false) => std::thread::sleep(std::time::Duration::from_micros(50)),
    }
}
