//! Synchronisation that blocks at user level: [`Mutex`], [`Condvar`],
//! [`Semaphore`], [`RwLock`], [`Barrier`], the bounded MPMC [`channel()`] and
//! the one-value [`oneshot::channel`];
//! and the [`SpinLock`] for sections of a few instructions, which a thread
//! is never preempted inside.
//!
//! This room owns the blocking primitives and their waiter queues; it must
//! not schedule threads itself (it only parks the caller and unparks the
//! chosen waiters through [`crate::thread`]), and it never parks or switches
//! while holding one of its internal spinlocks.
//!
//! # Who may block
//!
//! Every primitive works from a ferry thread *and* from a plain kernel thread
//! that is not one, in the same program and on the same object. A blocked
//! ferry thread gives its processor to other ferry threads; a blocked plain
//! kernel thread sleeps in `std::thread::park` (a futex). The waker does not
//! need to know which kind it wakes: each waiter records itself as a
//! `Unparker` (`crate::thread`).
//!
//! # Building blocks
//!
//! Each primitive keeps its fast path in one atomic word (documented with a
//! state table in its own file) and its waiters in an intrusive FIFO of
//! stack-allocated waiters guarded by a spinlock held for a few instructions
//! (`waiter.rs`). The channel is `ferry_queue::mpmc` waiting through
//! [`ParkWait`], the user-level [`ferry_queue::wait::Wait`] strategy.
//!
//! No primitive poisons: a panic while holding a lock releases it.
//!
//! ```
//! use std::sync::Arc;
//! use ferry::sync::{Mutex, channel};
//!
//! ferry::run(|| {
//!     let (tx, rx) = channel::<u32>(8);
//!     let seen = Arc::new(Mutex::new(Vec::new()));
//!     let s = Arc::clone(&seen);
//!     let consumer = ferry::spawn(move || {
//!         for v in rx {
//!             s.lock().push(v);
//!         }
//!     });
//!     for v in 0..20 {
//!         tx.send(v).unwrap();
//!     }
//!     drop(tx);
//!     consumer.join().unwrap();
//!     assert_eq!(*seen.lock(), (0..20).collect::<Vec<_>>());
//! })
//! .unwrap();
//! ```

mod barrier;
mod channel;
mod condvar;
pub(crate) mod fork_hold;
mod mutex;
pub mod oneshot;
pub(crate) mod owner;
mod park;
mod quiet;
/// What `quiet.rs` reaches through `super::quiet_atomic` (loom's, with
/// full fences, in its model).
mod quiet_atomic {
    pub(crate) use ferry_queue::wait::{heavy_fence, light_fence};
    pub(crate) use std::sync::atomic::{AtomicU8, Ordering};
}
mod rwlock;
mod semaphore;
mod spin;
pub(crate) mod waiter;

pub use barrier::{Barrier, BarrierWaitResult};
pub use channel::{
    IntoIter, Iter, Receiver, RecvError, SendError, Sender, TryIter, TryRecvError, TrySendError,
    channel,
};
pub use condvar::Condvar;
pub use mutex::{Mutex, MutexGuard, NotOwner, WouldDeadlock};
pub use park::ParkWait;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use spin::{SpinGuard, SpinLock};
