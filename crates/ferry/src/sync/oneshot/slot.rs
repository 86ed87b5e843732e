//! The protocol of a one-shot channel: one value, one sender, one
//! receiver, one state word, and no fence beyond the word's own
//! read-modify-writes.
//!
//! A multi-use wait (`ParkWait`, behind [`channel()`](crate::sync::channel()))
//! lets its notifiers skip the look for waiters until a first waiter arms
//! it with a heavy fence (`membarrier`): right for a channel that lives
//! long, one system call too many for a reply channel made per request.
//! Here each side changes the word once with a swap or a compare-exchange,
//! which orders its own cell write before it and tells it what the other
//! side did, so neither needs a separate fence.
//!
//! This room owns the word and the two cells; it must not park or wake by
//! itself (its caller passes how: [`Wake`] and a `park` function), and it
//! is compiled against loom's atomics and cells by
//! `tests/loom_oneshot.rs`.
//!
//! # Protocol
//!
//! | `state` | written by | meaning |
//! |---------|------------|---------|
//! | `EMPTY` | made so | nothing sent, no receiver asleep |
//! | `WAITING` | the receiver, by compare-exchange from `EMPTY` (AcqRel), after writing `waiter` | the receiver may be parked: a sender that leaves this state wakes `waiter` |
//! | `SENT` | the sender, by swap (AcqRel), after writing `value` | `value` holds the value; the receiver takes it after reading this (Acquire) |
//! | `SENDER_GONE` | a sender dropped unsent, by swap | nothing will come |
//! | `RECEIVER_GONE` | a receiver dropped, by swap | a send gives its value back |
//!
//! Cells: `value` is written only by the sender before its swap, and read
//! only by the receiver after it read `SENT` (or by the sender after its
//! swap returned `RECEIVER_GONE`: nobody else will). `waiter` is written
//! only by the receiver while the word is `EMPTY`, before its
//! compare-exchange publishes it, and read only by the side whose swap
//! returned `WAITING`. `SENT`, `SENDER_GONE` and `RECEIVER_GONE` are final.

use super::shim::Ordering::{AcqRel, Acquire};
use super::shim::{AtomicU8, UnsafeCell};

const EMPTY: u8 = 0;
const WAITING: u8 = 1;
const SENT: u8 = 2;
const SENDER_GONE: u8 = 3;
const RECEIVER_GONE: u8 = 4;

/// How a parked receiver is named and woken.
pub(crate) trait Wake {
    /// The calling thread.
    fn current() -> Self;
    /// Wakes it (or makes its next park return at once).
    fn wake(&self);
}

/// What a look at the slot found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Look<T> {
    /// The value.
    Value(T),
    /// Nothing yet.
    Empty,
    /// The sender went without sending.
    Gone,
}

/// One value on its way from one sender to one receiver.
pub(crate) struct Slot<T, W> {
    state: AtomicU8,
    value: UnsafeCell<Option<T>>,
    waiter: UnsafeCell<Option<W>>,
}

// SAFETY: the cells are reached only as the protocol table says: each by
// one side at a time, handed over by the state word's AcqRel changes; `T`
// and `W` move between threads, so they must be `Send`.
unsafe impl<T: Send, W: Send> Sync for Slot<T, W> {}
// SAFETY: as above; a slot owns a `T` and a `W`.
unsafe impl<T: Send, W: Send> Send for Slot<T, W> {}

impl<T, W: Wake> Slot<T, W> {
    /// An empty slot.
    pub(crate) fn new() -> Slot<T, W> {
        Slot {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(None),
            waiter: UnsafeCell::new(None),
        }
    }

    /// The sender's one send; the value back if the receiver is gone.
    /// Called at most once, and never after [`Slot::sender_gone`].
    pub(crate) fn send(&self, v: T) -> Result<(), T> {
        // SAFETY: only the sender writes `value`, before its swap (table).
        self.value.with_mut(|p| unsafe { *p = Some(v) });
        match self.state.swap(SENT, AcqRel) {
            WAITING => {
                self.wake_waiter();
                Ok(())
            }
            RECEIVER_GONE => {
                // SAFETY: the receiver is gone; the value is ours again.
                let v = self.value.with_mut(|p| unsafe { (*p).take() });
                Err(v.expect("the value was just written"))
            }
            _ => Ok(()),
        }
    }

    /// The sender went without sending: a waiting receiver wakes to find it.
    pub(crate) fn sender_gone(&self) {
        if self.state.swap(SENDER_GONE, AcqRel) == WAITING {
            self.wake_waiter();
        }
    }

    /// Whether the receiver is gone (a send would fail).
    pub(crate) fn receiver_gone(&self) -> bool {
        self.state.load(Acquire) == RECEIVER_GONE
    }

    /// The receiver went: a later send gives its value back.
    pub(crate) fn drop_receiver(&self) {
        self.state.swap(RECEIVER_GONE, AcqRel);
    }

    /// Wakes the receiver that published itself in `WAITING`.
    fn wake_waiter(&self) {
        self.waiter.with(|p| {
            // SAFETY: our swap read `WAITING`, so the receiver wrote
            // `waiter` before its compare-exchange (which we read with
            // Acquire) and writes it no more (table).
            if let Some(w) = unsafe { &*p } {
                w.wake();
            }
        });
    }

    /// The receiver's look, without waiting.
    pub(crate) fn try_take(&self) -> Look<T> {
        match self.state.load(Acquire) {
            SENT => self.take_sent(),
            SENDER_GONE => Look::Gone,
            _ => Look::Empty,
        }
    }

    /// The value, once `SENT` was read.
    fn take_sent(&self) -> Look<T> {
        // SAFETY: `SENT` was read with Acquire: the sender's write of
        // `value` happened before, and only the receiver reads it now.
        match self.value.with_mut(|p| unsafe { (*p).take() }) {
            Some(v) => Look::Value(v),
            // Taken by an earlier look: the receiver already has it.
            None => Look::Gone,
        }
    }

    /// The receiver waits for the value or for the sender to go, parking
    /// with `park` (which may return spuriously).
    pub(crate) fn wait(&self, park: impl Fn()) -> Look<T> {
        loop {
            match self.state.load(Acquire) {
                SENT => return self.take_sent(),
                SENDER_GONE => return Look::Gone,
                EMPTY => {
                    // SAFETY: the word is `EMPTY`, so no sender reads
                    // `waiter` until our compare-exchange publishes it.
                    self.waiter.with_mut(|p| unsafe { *p = Some(W::current()) });
                    // On failure the sender moved first: look again.
                    let _ = self.state.compare_exchange(EMPTY, WAITING, AcqRel, Acquire);
                }
                _ => park(),
            }
        }
    }
}
