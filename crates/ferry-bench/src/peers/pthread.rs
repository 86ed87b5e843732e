//! glibc's `pthread_mutex_t` as a peer of the `threads` experiment's
//! `ACQUIRE;RELEASE` row (std's `Mutex` is its own futex lock, not a
//! pthread one).
//!
//! This module owns that one loop.

use std::hint::black_box;
use std::time::Instant;

use crate::thread_ops::{Kind, Op, Outcome, Sample, per_op};

/// Label of the pthread mutex row.
pub const NAME: &str = "pthread_mutex_t";

/// One timed run of `kind`: `ACQUIRE;RELEASE` only, not applicable to
/// any other.
pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
    if kind != Kind::AcquireRelease {
        return Ok(Outcome::NotApplicable);
    }
    let m: Box<std::cell::UnsafeCell<libc::pthread_mutex_t>> =
        Box::new(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
    let p = m.get();
    let mut x = 0u64;
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: `p` points to an initialised default mutex, boxed so it
        // never moves, used by this thread only and not yet destroyed;
        // every lock is paired with an unlock by the same thread.
        unsafe {
            let p = black_box(p);
            libc::pthread_mutex_lock(p);
            x += 1;
            libc::pthread_mutex_unlock(p);
        }
    }
    let d = start.elapsed();
    // SAFETY: the mutex is unlocked and nobody else uses it.
    unsafe { libc::pthread_mutex_destroy(p) };
    if x != n {
        return Err("pthread mutex loop lost increments".to_owned());
    }
    Ok(Outcome::Measured(vec![Sample::new(
        Op::AcquireRelease,
        NAME,
        per_op(d, n),
    )]))
}
