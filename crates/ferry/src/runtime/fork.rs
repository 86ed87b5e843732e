//! ferry across `fork`: the `pthread_atfork` handlers that take the
//! process-wide locks (the stack cache's, the stack arena's, the stack
//! registry's, the block depot's, and those rooms above registered in `sync::fork_hold`)
//! before a fork and let them go in both processes after it, so that a
//! child finds them free rather than held by a kernel thread it does not
//! have.
//!
//! This file owns the handlers and the order the locks are taken in; it
//! must not take a lock a room did not register.

use crate::upcall;

thread_local! {
    /// The process-wide locks `fork_prepare` took, until `fork_parent` or
    /// `fork_child` lets them go (all three run on the forking kernel
    /// thread, which a raised critical count keeps the flow on).
    static FORK_HELD: std::cell::RefCell<Vec<Box<dyn std::any::Any>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Registers ferry's `pthread_atfork` handlers, once per process: a fork
/// child gets the stack cache's, the stack arena's, the stack registry's,
/// the block depot's and the registered locks (`sync::fork_hold`) free,
/// not held by a kernel thread that does not exist there.
pub(super) fn install_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering plain functions that only take and release
        // ferry's own locks.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    });
}

extern "C" fn fork_prepare() {
    // Keep the flow on this kernel thread until the fork returns: a
    // preemption now would move the held guards' owner.
    if let Some((critical, _)) = upcall::critical_enter() {
        critical.hand_over();
    }
    // In the order the code nests them: the cache, the arena (whose
    // `clear` unregisters stacks under it), the registry; the block depot
    // (a leaf: nothing is taken under it); then the locks
    // rooms above registered (`sync::fork_hold`: the stream shelf's),
    // taken with none of these.
    let mut held = vec![
        crate::stack::StackCache::global().hold(),
        crate::stack::hold_arena(),
        crate::stack::hold_registry(),
        crate::processor::block_depot::hold(),
    ];
    held.extend(crate::sync::fork_hold::hold_all());
    FORK_HELD.with(|h| *h.borrow_mut() = held);
}

extern "C" fn fork_parent() {
    FORK_HELD.with(|h| h.borrow_mut().clear());
    if upcall::resumed_processor().is_some() {
        upcall::critical_release_inherited();
    }
}

extern "C" fn fork_child() {
    // The child is single-threaded: the locks are ours to release. The
    // raised count belongs to the parent's runtime, which a child that
    // keeps using ferry abandons (`adopt_after_fork`).
    FORK_HELD.with(|h| h.borrow_mut().clear());
}
