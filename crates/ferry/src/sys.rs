//! Small libc shims that the safe layers above need and rustix does not
//! offer. Nothing here blocks or allocates.

/// The calling kernel thread's `errno`.
#[inline]
pub(crate) fn errno() -> i32 {
    // SAFETY: `__errno_location` returns the calling kernel thread's errno
    // slot, valid for the thread's lifetime; reading an int from it is sound.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling kernel thread's `errno`.
#[inline]
pub(crate) fn set_errno(value: i32) {
    // SAFETY: as in `errno`; the slot belongs to the calling kernel thread.
    unsafe { *libc::__errno_location() = value };
}
