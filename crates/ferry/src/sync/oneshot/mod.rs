//! [`oneshot::channel`](channel): one value, sent once, received once — the
//! reply channel of a request.
//!
//! A [`channel()`](crate::sync::channel()) lives long, so its wait pays a
//! heavy fence (`membarrier`) once, when a receiver first waits, to spare
//! its senders a full fence on every send afterwards. A channel made for
//! one reply would pay that system call every time. A one-shot channel
//! instead waits through one state word, which each side changes once with
//! a read-modify-write (`slot.rs` has the protocol): no fence, no system
//! call but the park itself.
//!
//! Both ends work from ferry threads and from plain kernel threads (a
//! tokio worker answering a ferry thread, say), in any mix. A receiver
//! blocked in [`Receiver::recv`] parks its ferry thread, not its processor.
//!
//! This room owns the two ends; it must not queue or schedule threads
//! (it parks the receiver and wakes it through `crate::thread`).
//!
//! ```
//! use ferry::sync::oneshot;
//!
//! ferry::run(|| {
//!     let (tx, rx) = oneshot::channel();
//!     let worker = ferry::spawn(move || tx.send(6 * 7).unwrap());
//!     assert_eq!(rx.recv(), Ok(42));
//!     worker.join().unwrap();
//!
//!     // A sender dropped unsent says so.
//!     let (tx, rx) = oneshot::channel::<u32>();
//!     drop(tx);
//!     assert!(rx.recv().is_err());
//! })
//! .unwrap();
//! ```

mod slot;

/// The atomics and cells `slot` uses (loom's in its model).
mod shim {
    pub(crate) use std::sync::atomic::{AtomicU8, Ordering};

    pub(crate) use crate::cell::UnsafeCell;
}

use std::fmt;
use std::sync::Arc;

use crate::header::Unparker;
pub use crate::sync::{RecvError, TryRecvError};
use slot::{Look, Slot, Wake};

impl Wake for Unparker {
    fn current() -> Unparker {
        Unparker::current()
    }

    fn wake(&self) {
        self.unpark();
    }
}

/// A one-shot channel: a [`Sender`] that sends one value and a
/// [`Receiver`] that receives it.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Slot::new());
    (
        Sender {
            slot: Some(Arc::clone(&slot)),
        },
        Receiver { slot, done: false },
    )
}

/// The sending end of a one-shot [`channel`]; dropping it unsent ends the
/// receiver's wait with [`RecvError`].
pub struct Sender<T> {
    /// `None` once sent.
    slot: Option<Arc<Slot<T, Unparker>>>,
}

impl<T> Sender<T> {
    /// Sends `value`, waking the receiver if it waits.
    ///
    /// # Errors
    /// The value back, if the receiver is gone.
    pub fn send(mut self, value: T) -> Result<(), T> {
        match self.slot.take() {
            Some(slot) => slot.send(value),
            None => Err(value),
        }
    }

    /// Whether the receiver is gone, so that a send would fail.
    pub fn is_closed(&self) -> bool {
        self.slot.as_ref().is_none_or(|s| s.receiver_gone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            slot.sender_gone();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender").finish_non_exhaustive()
    }
}

/// The receiving end of a one-shot [`channel`].
pub struct Receiver<T> {
    slot: Arc<Slot<T, Unparker>>,
    /// The value was taken by [`Receiver::try_recv`].
    done: bool,
}

impl<T> Receiver<T> {
    /// Waits for the value. A ferry thread parks (its processor runs
    /// others); a plain kernel thread parks in the kernel.
    ///
    /// # Errors
    /// [`RecvError`] if the sender went without sending, or the value was
    /// already taken by [`Receiver::try_recv`].
    pub fn recv(self) -> Result<T, RecvError> {
        if self.done {
            return Err(RecvError);
        }
        match self.slot.wait(crate::thread::park) {
            Look::Value(v) => Ok(v),
            Look::Empty | Look::Gone => Err(RecvError),
        }
    }

    /// The value if it has come, without waiting.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] if it has not come yet;
    /// [`TryRecvError::Disconnected`] if the sender went without sending or
    /// the value was taken already.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        if self.done {
            return Err(TryRecvError::Disconnected);
        }
        match self.slot.try_take() {
            Look::Value(v) => {
                self.done = true;
                Ok(v)
            }
            Look::Empty => Err(TryRecvError::Empty),
            Look::Gone => Err(TryRecvError::Disconnected),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.slot.drop_receiver();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
