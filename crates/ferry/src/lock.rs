//! Taking a std lock without waiting, as the runtime does wherever waiting
//! could stall a processor or the monitor: a lock a ferry thread may hold
//! when it is preempted, or one a kernel thread the kernel stopped may
//! hold. The caller that finds the lock held does something else (keeps
//! its last copy, looks again at its next pass).
//!
//! This file owns only that step; it must not wait, and knows nothing of
//! what the locks guard.

use std::sync::{Mutex, MutexGuard, TryLockError};

/// `m`'s guard, or `None` while someone holds it. A poisoned lock is
/// taken as it is: every lock taken this way guards data its holders leave
/// whole at each step (a list, a copy, a file handle), so a panic while
/// one held it leaves nothing half done.
#[inline]
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_and_a_poisoned_one_taken() {
        let m = Mutex::new(1);
        let held = m.lock().unwrap();
        assert!(try_lock(&m).is_none());
        drop(held);
        assert_eq!(*try_lock(&m).unwrap(), 1);
        let _ = std::panic::catch_unwind(|| {
            let _g = m.lock().unwrap();
            panic!("poisons the lock");
        });
        assert!(m.is_poisoned());
        assert_eq!(*try_lock(&m).unwrap(), 1);
    }
}
