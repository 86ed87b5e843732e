//! The process's choice of guard size: the module's rule (a guard as large
//! as the stack, 64 KiB to 1 MiB), or one size for every stack, set by the
//! program ([`set_guard_size`]) or by `FERRY_STACK_GUARD` in the
//! environment, as `pthread_attr_setguardsize` sets a thread's.
//!
//! This room owns that one decision; it must not map or guard anything
//! (`mapping.rs` and the arena do). The choice is made once per process,
//! at the first stack (the first call of [`default_guard_size`](super::default_guard_size)) or at
//! the first [`set_guard_size`], whichever comes first, and never changes:
//! carved stacks keep their guards for good, and only stacks with the
//! process's guard are cached.
//!
//! # What a smaller guard costs and buys
//!
//! The module's rule catches any frame the stack could hold, probed or
//! not (see the module docs). A guard of one page catches probed frames
//! only: Rust's, and C's built with `-fstack-clash-protection` (on x86-64
//! gcc probes every page; on AArch64 it assumes 64 KiB); an unprobed C
//! frame larger than the guard may land in the stack below it. That is
//! what a pthread gets by default (glibc's guard is one page). What it
//! buys is the guard's cost in the kernel when stacks are carved: the
//! markers of each guard page and the page-table pages the guard's range
//! needs. Spawning 100,000 threads that block, from a fresh process
//! (`ferry-bench scale-ferry --n 100000 --processors 1`, medians of 3),
//! took 4.0 us per thread with the rule's 256 KiB guard, 2.8 us with
//! 64 KiB and 2.4 us with 4 KiB (Go's goroutines, same machine and hour:
//! 2.1 us), and a blocked thread held 5.5, 5.1 and 5.0 KB (Go's 2.8 KB).

use std::env;
use std::fmt;
use std::sync::OnceLock;

use super::{MAX_GUARD_SIZE, round_to_pages};

/// The process's guard size once decided: `None` for the module's rule.
static CHOICE: OnceLock<Option<usize>> = OnceLock::new();

/// Why [`set_guard_size`] refused a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardSizeError {
    /// Zero, or more than [`MAX_GUARD_SIZE`]: a stack always has a guard,
    /// and no larger one than the rule's largest.
    OutOfRange {
        /// The size asked for.
        bytes: usize,
    },
    /// The process's guard was decided before, differently: at its first
    /// stack (by the rule or `FERRY_STACK_GUARD`) or by an earlier call.
    AlreadyDecided {
        /// The process's guard size (`None`: the module's rule).
        current: Option<usize>,
    },
}

impl fmt::Display for GuardSizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardSizeError::OutOfRange { bytes } => write!(
                f,
                "a stack guard of {bytes} bytes: it must be at least one page and at most {MAX_GUARD_SIZE} bytes"
            ),
            GuardSizeError::AlreadyDecided { current: Some(g) } => write!(
                f,
                "the process's stack guard is already {g} bytes (it is chosen once, before the first stack)"
            ),
            GuardSizeError::AlreadyDecided { current: None } => write!(
                f,
                "the process's stack guards already follow the default rule (they are chosen once, before the first stack)"
            ),
        }
    }
}

impl std::error::Error for GuardSizeError {}

/// Gives every stack made from now on a guard of `bytes` (rounded up to
/// whole pages) instead of the module's rule: call it before the first
/// runtime starts (or any stack is made). Setting the size already chosen
/// again is `Ok`.
///
/// # Errors
/// [`GuardSizeError::OutOfRange`] for 0 or more than [`MAX_GUARD_SIZE`];
/// [`GuardSizeError::AlreadyDecided`] once the process's stacks have their
/// guard size (a stack was made, `FERRY_STACK_GUARD` was read, or another
/// size was set).
pub fn set_guard_size(bytes: usize) -> Result<(), GuardSizeError> {
    let size = valid(bytes).ok_or(GuardSizeError::OutOfRange { bytes })?;
    let chosen = *CHOICE.get_or_init(|| Some(size));
    if chosen == Some(size) {
        Ok(())
    } else {
        Err(GuardSizeError::AlreadyDecided { current: chosen })
    }
}

/// The process's guard size, deciding it at the first call: `None` for
/// the module's rule, or the size of `FERRY_STACK_GUARD` (bytes; ignored,
/// with a line on stderr, if it is not a size [`set_guard_size`] takes).
pub(super) fn chosen() -> Option<usize> {
    *CHOICE.get_or_init(|| {
        let v = env::var("FERRY_STACK_GUARD").ok()?;
        let size = v.trim().parse().ok().and_then(valid);
        if size.is_none() {
            eprintln!(
                "ferry: FERRY_STACK_GUARD={v:?} is not a guard size (bytes, one page to {MAX_GUARD_SIZE}); stacks get the default guard"
            );
        }
        size
    })
}

/// `bytes` rounded up to pages if it is a guard size this module takes.
fn valid(bytes: usize) -> Option<usize> {
    if bytes == 0 || bytes > MAX_GUARD_SIZE {
        return None;
    }
    round_to_pages(bytes)
}
