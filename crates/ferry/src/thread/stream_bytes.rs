//! The count of bytes each thread moves through streams, which the
//! fine-grain scheduling policy turns into the thread's quantum (see
//! `sched::fine_grain`).
//!
//! This room owns when a stream's read or write is counted and on which
//! thread; the counter itself is the header's (`Header::add_stream_bytes`,
//! with its ownership). It must not block, switch or know any policy: a
//! stream calls it on every read and write that moved bytes.
//!
//! Counting costs a stream call one relaxed load of [`COUNTING`] while no
//! runtime of the process uses the fine-grain policy, so the default
//! policy's streams pay nothing else; once one does, a call that moved
//! bytes on a ferry thread enters the runtime to find the running thread
//! and adds to its header (a load and a store). Plain kernel threads are
//! not counted.
//!
//! | `COUNTING` | written by | meaning |
//! |------------|------------|---------|
//! | `false` | start | no runtime counts stream bytes |
//! | `true` | a runtime starting with the fine-grain policy (never reset) | stream calls count their bytes on the running ferry thread |

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

/// Whether stream calls count their bytes (see the module docs).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Makes stream calls count their bytes from now on, in every runtime of
/// the process (a runtime with the fine-grain policy is starting).
pub(crate) fn count_stream_bytes_from_now() {
    COUNTING.store(true, Relaxed);
}

/// A stream read or write moved `n` bytes on the calling thread: counts
/// them on the running ferry thread, if stream bytes are counted.
#[inline]
pub(crate) fn moved_stream_bytes(n: usize) {
    if COUNTING.load(Relaxed) {
        count(n);
    }
}

#[cold]
#[inline(never)]
fn count(n: usize) {
    if let Some(e) = crate::upcall::enter()
        && let Some(me) = e.p.current_ref(&e.tok)
    {
        me.header().add_stream_bytes(n);
    }
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    /// Counted bytes add up in the running thread's header; off a ferry
    /// thread nothing is counted (and nothing breaks).
    #[test]
    fn moved_bytes_add_up_on_the_running_thread() {
        count_stream_bytes_from_now();
        moved_stream_bytes(5);
        let n = crate::Runtime::builder()
            .processors(1)
            .run(|| {
                moved_stream_bytes(100);
                moved_stream_bytes(60);
                crate::current().header().take_stream_bytes()
            })
            .unwrap();
        assert_eq!(n, 160);
    }
}
