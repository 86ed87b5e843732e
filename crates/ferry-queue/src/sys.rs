//! The only system calls ferry-queue makes, all for
//! [`SpinPark`](crate::wait::SpinPark): futex wait and wake (process-private:
//! the in-process queues never share their futex words with another process),
//! and `membarrier`, the heavy half of its asymmetric fence.

use core::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleeps while `*word == expected`. Returns on a wake, a signal, or at once
/// if the word already differs; callers re-check their condition in all cases.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (value changed) and EINTR (signal) are both "go and re-check".
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wakes up to `count` threads sleeping on `word` (`u32::MAX`: all of them).
pub(crate) fn futex_wake(word: &AtomicU32, count: u32) {
    // The kernel reads the count as an `int`: `u32::MAX` would arrive as -1
    // and wake a single thread.
    let count = count.min(i32::MAX as u32);
    let _ = futex::wake(word, futex::Flags::PRIVATE, count);
}

/// Registers this process for `MEMBARRIER_CMD_PRIVATE_EXPEDITED`. False if the
/// kernel (or a sandbox) does not offer it; then [`membarrier`] must not be used.
pub(crate) fn membarrier_register() -> bool {
    #[cfg(miri)]
    return false;
    #[cfg(not(miri))]
    rustix::thread::membarrier(rustix::thread::MembarrierCommand::RegisterPrivateExpedited).is_ok()
}

/// Makes every other running thread of this process execute a full memory
/// barrier before this returns. Only after [`membarrier_register`] succeeded.
pub(crate) fn membarrier() {
    // After a successful registration the kernel defines no failure for
    // this command. Should one happen anyway, continuing without the barrier
    // could lose a wakeup silently, so stop loudly instead.
    if let Err(e) = rustix::thread::membarrier(rustix::thread::MembarrierCommand::PrivateExpedited)
    {
        eprintln!("ferry-queue: membarrier(PRIVATE_EXPEDITED) failed after registration: {e}");
        std::process::abort();
    }
}
