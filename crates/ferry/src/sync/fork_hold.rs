//! Locks held across `fork`: a room above the runtime that owns a
//! process-wide lock registers how to take it ([`register`]), and the
//! runtime's `pthread_atfork` handlers take them all before a fork
//! ([`hold_all`]) and let them go in the parent and the child, so that a
//! child never finds one held by a kernel thread it does not have.
//!
//! This room owns only the list; it must not take a lock itself nor know
//! whose locks they are.

use std::any::Any;
use std::sync::{Mutex, PoisonError};

/// Takes one lock and returns its guard, held until dropped.
pub(crate) type Hold = fn() -> Box<dyn Any>;

static HOLDS: Mutex<Vec<Hold>> = Mutex::new(Vec::new());

/// Adds `hold` to the locks taken before every fork (once per function).
pub(crate) fn register(hold: Hold) {
    let mut holds = HOLDS.lock().unwrap_or_else(PoisonError::into_inner);
    if !holds.iter().any(|h| std::ptr::fn_addr_eq(*h, hold)) {
        holds.push(hold);
    }
}

/// Takes every registered lock, in the order registered.
pub(crate) fn hold_all() -> Vec<Box<dyn Any>> {
    let holds = HOLDS.lock().unwrap_or_else(PoisonError::into_inner);
    holds.iter().map(|h| h()).collect()
}
