//! Small libc shims that the safe layers above need and rustix does not
//! offer. Nothing here blocks or allocates.

/// The calling kernel thread's errno slot, valid for the kernel thread's
/// lifetime.
#[inline]
pub(crate) fn errno_location() -> *mut i32 {
    // SAFETY: `__errno_location` has no preconditions.
    unsafe { libc::__errno_location() }
}
