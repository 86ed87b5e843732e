//! The only system calls ferry-queue makes: futex wait and wake, for
//! [`SpinPark`](crate::wait::SpinPark). Process-private futexes: the in-process
//! queues never share their futex words with another process.

use core::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleeps while `*word == expected`. Returns on a wake, a signal, or at once
/// if the word already differs; callers re-check their condition in all cases.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (value changed) and EINTR (signal) are both "go and re-check".
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wakes up to `count` threads sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32, count: u32) {
    let _ = futex::wake(word, futex::Flags::PRIVATE, count);
}
