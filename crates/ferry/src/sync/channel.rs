//! [`channel`]: a bounded multi-producer multi-consumer channel whose
//! blocking `send`/`recv` park at user level.
//!
//! This room owns the channel's handles and its error types; the items, the
//! indices and the disconnection counts belong to `ferry_queue::mpmc`, and the
//! waiting to [`ParkWait`]. It must not add a lock on the send or receive
//! path.
//!
//! # Protocol
//!
//! All words are `ferry_queue`'s (see `ferry_queue::mpmc` and its handle
//! counts): one CAS per send and one per receive, plus [`ParkWait`]'s fence
//! and load to see whether anyone must be woken. A blocked sender waits on the
//! queue's "not full" strategy, a blocked receiver on "not empty"; each
//! successful operation notifies the other side, and the last handle of a side
//! to drop notifies every waiter of the other.

use std::fmt;

use ferry_queue::Disconnected;
use ferry_queue::mpmc;

use super::park::ParkWait;

/// Creates a bounded channel holding up to `capacity` items, rounded up to a
/// power of two (and at least 1), returning its two ends.
///
/// Both ends can be cloned (MPMC): give each thread its own clone, as the
/// handles are `Send` but not `Sync`. [`Sender::send`] blocks while the
/// channel is full, [`Receiver::recv`] while it is empty; on a ferry thread
/// that blocks only the user-level thread, on a plain kernel thread the
/// kernel thread, and the two kinds may share a channel. When every
/// [`Receiver`] is gone, sends fail with [`SendError`] (giving the item
/// back); when every [`Sender`] is gone, receives drain what is left and then
/// fail with [`RecvError`].
///
/// ```
/// ferry::run(|| {
///     let (tx, rx) = ferry::sync::channel::<u64>(4);
///     let producers: Vec<_> = (0..3u64)
///         .map(|p| {
///             let tx = tx.clone();
///             ferry::spawn(move || {
///                 for i in 0..10 {
///                     tx.send(p * 100 + i).unwrap();
///                 }
///             })
///         })
///         .collect();
///     drop(tx); // the producers hold the remaining senders
///     let got: Vec<u64> = rx.iter().collect(); // ends when all senders are gone
///     assert_eq!(got.len(), 30);
///     for p in producers {
///         p.join().unwrap();
///     }
/// })
/// .unwrap();
/// ```
///
/// # Panics
/// If `capacity` is larger than `ferry_queue::MAX_CAPACITY`.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX);
    let (tx, rx) = mpmc::channel_with::<T, ParkWait>(capacity);
    (Sender { tx }, Receiver { rx })
}

/// The sending end of a [`channel`]. Clone it for each sending thread.
pub struct Sender<T> {
    tx: mpmc::Producer<T, ParkWait>,
}

/// The receiving end of a [`channel`]. Clone it for each receiving thread.
pub struct Receiver<T> {
    rx: mpmc::Consumer<T, ParkWait>,
}

/// [`Sender::send`] failed: every receiver is gone. Holds the item.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

/// [`Receiver::recv`] failed: the channel is empty and every sender is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvError;

/// Why [`Sender::try_send`] did not send. Holds the item.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The channel is full right now.
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Why [`Receiver::try_recv`] returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// The channel is empty right now.
    Empty,
    /// The channel is empty and every sender is gone.
    Disconnected,
}

impl<T> Sender<T> {
    /// Sends `value`, blocking while the channel is full.
    ///
    /// # Errors
    /// [`SendError`], with the value, if every receiver is gone (checked
    /// before sending, and again while blocked).
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.tx.is_disconnected() {
            return Err(SendError(value));
        }
        self.tx.push(value).map_err(|Disconnected(v)| SendError(v))
    }

    /// Sends `value` if there is room right now.
    ///
    /// # Errors
    /// [`TrySendError::Full`] when the channel is full,
    /// [`TrySendError::Disconnected`] when every receiver is gone.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        if self.tx.is_disconnected() {
            return Err(TrySendError::Disconnected(value));
        }
        self.tx.try_push(value).map_err(TrySendError::Full)
    }

    /// Whether every receiver is gone.
    pub fn is_disconnected(&self) -> bool {
        self.tx.is_disconnected()
    }

    /// Items in the channel at some moment during the call.
    pub fn len(&self) -> usize {
        self.tx.len()
    }

    /// Whether the channel was empty at some moment during the call.
    pub fn is_empty(&self) -> bool {
        self.tx.is_empty()
    }

    /// How many items the channel holds at most.
    pub fn capacity(&self) -> usize {
        self.tx.capacity()
    }
}

impl<T> Receiver<T> {
    /// Receives the oldest item, blocking while the channel is empty.
    ///
    /// # Errors
    /// [`RecvError`] once the channel is empty and every sender is gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.rx.pop().map_err(|_| RecvError)
    }

    /// Receives the oldest item if there is one right now.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] when the channel is empty,
    /// [`TryRecvError::Disconnected`] when it is empty and every sender is
    /// gone.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        if let Some(v) = self.rx.try_pop() {
            return Ok(v);
        }
        if self.rx.is_disconnected() {
            // The last sender may have sent just before it dropped.
            self.rx.try_pop().ok_or(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// An iterator that [`recv`](Receiver::recv)s until the channel is empty
    /// and every sender is gone.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// An iterator over the items there are right now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Whether every sender is gone (items may still be waiting).
    pub fn is_disconnected(&self) -> bool {
        self.rx.is_disconnected()
    }

    /// Items in the channel at some moment during the call.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether the channel was empty at some moment during the call.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// How many items the channel holds at most.
    pub fn capacity(&self) -> usize {
        self.rx.capacity()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver {
            rx: self.rx.clone(),
        }
    }
}

/// Blocking iterator over a [`Receiver`]; see [`Receiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Non-blocking iterator over a [`Receiver`]; see [`Receiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Owning blocking iterator over a [`Receiver`].
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receivers are all gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are all gone")
    }
}

impl std::error::Error for RecvError {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receivers are all gone")
            }
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

impl<T> TrySendError<T> {
    /// The item that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are all gone")
            }
        }
    }
}

impl std::error::Error for TryRecvError {}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(SendError(v): SendError<T>) -> Self {
        TrySendError::Disconnected(v)
    }
}
