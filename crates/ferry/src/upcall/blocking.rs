//! The announced blocking call: [`blocking`] lends the calling thread's
//! processor for the duration of a closure that may block in the kernel.
//!
//! This room owns only the lend-and-reclaim bracket; the handoff to a spare
//! and the give-back are `activation`'s and `processor`'s.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::processor;

/// Runs `f`, which may block in the kernel (a read, a `wait`, a lock of the
/// C library), without stalling the other ferry threads of its processor,
/// and returns its value. A panic in `f` propagates to the caller.
///
/// While `f` runs, the processor is *lent*: if other threads wait for it, a
/// spare kernel thread takes it over at once and the scheduling policy is
/// told the thread `Blocked`; otherwise the monitor hands it over at its
/// next look if the call is still running (see
/// [`Builder::handoff_after`](crate::Builder::handoff_after)). When `f`
/// returns the thread takes its processor back if nobody took it, which
/// costs a few atomic operations; else it is queued (`Unblocked`) and runs
/// again on whichever processor the policy picks, and its kernel thread goes
/// back to the pool of spares.
///
/// Outside a ferry thread it just calls `f`; so it does while the thread
/// holds a [`SpinLock`](crate::sync::SpinLock) or runs
/// [`without_preemption`](crate::upcall::without_preemption), and then the
/// processor waits for the call.
///
/// `f` runs on the calling thread's stack and kernel thread, so it need not
/// be `Send`; it should not wait for other ferry threads (use
/// [`crate::sync`] for that), and if it calls into ferry itself the
/// processor is taken back first.
///
/// ```
/// use std::io::Read;
///
/// ferry::Runtime::builder().processors(1).run(|| {
///     let (mut reader, mut writer) = std::io::pipe().unwrap();
///     let ticker = ferry::spawn(|| (0..100).map(|_| ferry::yield_now()).count());
///     let read = ferry::spawn(move || {
///         let mut buf = [0u8; 5];
///         ferry::blocking(|| reader.read_exact(&mut buf)).unwrap();
///         buf
///     });
///     // The ticker ran although the only processor's thread blocked.
///     assert_eq!(ticker.join().unwrap(), 100);
///     std::io::Write::write_all(&mut writer, b"hello").unwrap();
///     assert_eq!(&read.join().unwrap(), b"hello");
/// })
/// .unwrap();
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match processor::enter() {
        // Inside a critical section (a `SpinLock` held, `without_preemption`)
        // the processor cannot be lent: it waits for the call.
        Some(e) if e.p.in_thread() && super::activation::critical_depth() == 1 => {
            e.p.lend();
            drop(e);
            crate::probe_mark!(7);
        }
        _ => return f(),
    }
    let result = catch_unwind(AssertUnwindSafe(f));
    // Take the processor back, or be handed back and resumed elsewhere.
    drop(processor::enter());
    match result {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}
