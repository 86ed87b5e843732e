//! The small tools the `upcalls` scenarios share: event-latency deltas
//! between two snapshots of the runtime's statistics, timed loops, waits
//! with a time limit, and the raw system calls the scenarios make (futex
//! words, a pipe, signal handlers, `getppid`).
//!
//! This module owns these wrappers and their `unsafe`; it knows no
//! scenario.

use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ferry::upcall::EventLatency;

use super::LOST_AFTER;
use crate::measure::Stats;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delta {
    /// Events delivered in between.
    pub count: u64,
    /// Their mean latency, ns (NaN if none).
    pub mean_ns: f64,
    /// The longest latency the runtime had seen by the second snapshot, ns.
    pub max_ns: f64,
}

/// The events of one kind delivered between snapshots `before` and `after`.
pub fn delta(before: &EventLatency, after: &EventLatency) -> Delta {
    let count = after.count.saturating_sub(before.count);
    let total = |l: &EventLatency| l.mean.as_nanos() as f64 * l.count as f64;
    Delta {
        count,
        mean_ns: if count == 0 {
            f64::NAN
        } else {
            ((total(after) - total(before)) / count as f64).max(0.0)
        },
        max_ns: after.max.as_nanos() as f64,
    }
}

/// Nanoseconds of `d`, as a float.
pub(super) fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// Nanoseconds since `base`, as a word an atomic can hold.
pub(super) fn ns_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Calls `f` until `max_n` calls or `limit` have passed; returns the calls
/// made and the time they took.
pub(super) fn timed_loop(limit: Duration, max_n: u64, mut f: impl FnMut()) -> (u64, Duration) {
    let start = Instant::now();
    let mut n = 0;
    while n < max_n {
        for _ in 0..64 {
            f();
        }
        n += 64;
        if start.elapsed() >= limit {
            break;
        }
    }
    (n, start.elapsed())
}

/// Yields (a ferry thread) until `done()` or [`LOST_AFTER`]; `Err(what)`
/// on the latter.
pub(super) fn ferry_wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > LOST_AFTER {
            return Err(format!("{what}: nothing after {LOST_AFTER:?}"));
        }
        ferry::yield_now();
    }
    Ok(())
}

/// Sleeps (a kernel thread) until `deadline`.
pub(super) fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        thread::sleep(deadline - now);
    }
}

/// Runs `f` as the first thread of a runtime built by `configure`.
pub(super) fn on_runtime<T: Send + 'static>(
    configure: impl FnOnce(&mut ferry::Builder),
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let mut b = ferry::Runtime::builder();
    configure(&mut b);
    b.run(f)
        .map_err(|e| format!("cannot start a ferry runtime: {e}"))
}

/// `FUTEX_WAIT` on `word` while it holds `expected`.
pub(super) fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic for the whole call; a
    // null timeout means no timeout. The result (woken, EAGAIN, EINTR) is
    // rechecked by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// `FUTEX_WAKE` of one waiter on `word`.
pub(super) fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; waking touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// Waits until `word` is 1, then resets it to 0.
pub(super) fn futex_take(word: &AtomicU32) {
    while word.swap(0, Ordering::Acquire) != 1 {
        futex_wait(word, 0);
    }
}

/// Installs `handler` for `signal` (with `SA_RESTART`), once per signal.
pub(super) fn install_handler(
    signal: i32,
    handler: extern "C" fn(libc::c_int),
) -> Result<(), String> {
    // SAFETY: `sigaction` is a plain C struct for which all-zero is valid
    // (no flags, empty mask); it is filled in before use.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as usize;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is a valid `sigset_t` owned by `act`.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: `act` is fully initialised; the handler only does
    // async-signal-safe things (an atomic load, `nanosleep`, or nothing).
    let rc = unsafe { libc::sigaction(signal, &act, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sigaction({signal}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// A pipe's two ends, closed on drop.
#[derive(Debug)]
pub(super) struct Pipe {
    pub read: i32,
    pub write: i32,
}

impl Pipe {
    /// A fresh pipe (close-on-exec).
    pub(super) fn new() -> Result<Pipe, String> {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a writable array of two ints, as pipe2 wants.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
        }
        Ok(Pipe {
            read: fds[0],
            write: fds[1],
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: both descriptors were opened by `Pipe::new` and are owned
        // by this value alone.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// Reads one byte from `fd`, blocking; whether one came.
pub(super) fn read_byte(fd: i32) -> bool {
    let mut b = 0u8;
    // SAFETY: `b` is a writable byte; `fd` is an open pipe end.
    let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
    n == 1
}

/// Writes one byte to `fd`; whether it went.
pub(super) fn write_byte(fd: i32) -> bool {
    let b = 1u8;
    // SAFETY: `b` is a readable byte; `fd` is an open pipe end.
    let n = unsafe { libc::write(fd, (&raw const b).cast(), 1) };
    n == 1
}

/// `getppid`, the cheapest real system call, never cached by the C library.
pub(super) fn getppid() -> i32 {
    // SAFETY: no arguments, no memory touched.
    unsafe { libc::getppid() }
}

/// Median of `v` (NaN if empty).
pub(super) fn median(v: &[f64]) -> f64 {
    Stats::from_samples(v).map_or(f64::NAN, |s| s.median)
}
