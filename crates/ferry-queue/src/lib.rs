//! Bounded lock-free queues after the optimistic queues of the Synthesis
//! kernel (Massalin and Pu, SOSP 1989, §3.2).
//!
//! Synthesis observed that almost every kernel structure is a queue, and that
//! a queue needs only as much synchronisation as its case demands (the
//! *principle of frugality*). ferry-queue provides the four cases, each in its
//! own module, each with only the atomic operations its case needs:
//!
//! | module   | producers | consumers | read-modify-write atomics per transfer |
//! |----------|-----------|-----------|----------------------------------------|
//! | [`spsc`] | one  | one  | none: loads and stores only |
//! | [`mpsc`] | many | one  | one CAS per push (or per *batch*: [`mpsc::Producer::try_push_many`]) |
//! | [`spmc`] | one  | many | one CAS per pop |
//! | [`mpmc`] | many | many | one CAS per push and one per pop |
//!
//! Frugality is also decided per operation: a multi side that currently has a
//! single handle claims its positions with a plain store, as the single kinds
//! do, so a CAS is paid only while the side is really shared.
//!
//! Every queue is bounded with a power-of-two capacity fixed at creation and
//! offers, like Synthesis, both **asynchronous** operations (`try_push` gives
//! the item back when full, `try_pop` returns `None` when empty) and
//! **synchronous** ones (`push`/`pop` wait through a [`wait::Wait`] strategy:
//! [`wait::Spin`], [`wait::SpinYield`] or the default [`wait::SpinPark`]).
//! Which side may be shared is a compile-time fact: an [`spsc::Producer`] is
//! `Send` but not `Clone`; an [`mpsc::Producer`] is `Clone`.
//!
//! ```
//! let (tx, rx) = ferry_queue::mpsc::channel::<u64>(1024);
//! let tx2 = tx.clone();
//! let a = std::thread::spawn(move || for i in 0..100 { tx.push(i).unwrap() });
//! let b = std::thread::spawn(move || for i in 0..100 { tx2.push(i).unwrap() });
//! let sum: u64 = (0..200).map(|_| rx.pop().unwrap()).sum();
//! a.join().unwrap();
//! b.join().unwrap();
//! assert_eq!(sum, 2 * 4950);
//! ```
//!
//! Handles are `Send` but not `Sync`: each keeps private cached indices, so a
//! thread gets its own handle (a clone, on a multi side) instead of sharing one.
//!
//! ```compile_fail,E0277
//! fn shared<T: Sync>(_: &T) {}
//! let (tx, _rx) = ferry_queue::mpmc::channel::<u8>(8);
//! shared(&tx);
//! ```
//!
//! Each kind also has a **shared-memory form** ([`shm`]) for plain-old-data
//! items, laid over a byte region that two processes map: offsets instead of
//! pointers, a layout version word, and hardening so that a hostile peer that
//! scribbles on the region can make the other side read garbage items or get
//! a [`Corrupt`] error, but never crash, read out of bounds or hang.
//!
//! The protocols (which word each side writes, when, and with which ordering)
//! are written once in the private `ring` module and documented there and in
//! each kind's module.

#![deny(missing_docs)]

mod local;
mod pad;
mod primitive;
mod ring;
mod sys;

pub mod lock;
pub mod mpmc;
pub mod mpsc;
#[cfg(not(ferry_loom))]
pub mod shm;
pub mod spmc;
pub mod spsc;
pub mod wait;

use core::fmt;

pub use local::{Consumer, MAX_CAPACITY, Producer};

/// One of the four queue kinds: [`spsc::Spsc`], [`mpsc::Mpsc`],
/// [`spmc::Spmc`], [`mpmc::Mpmc`]. Sealed: the kinds are exactly these.
pub trait Kind: ring::Protocol + 'static {}

/// The other side of the queue is gone: every handle of it has been dropped.
///
/// Carries back the item a synchronous push could not deliver (`T = ()` for a
/// pop).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Disconnected<T = ()>(pub T);

impl<T> fmt::Debug for Disconnected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Disconnected(..)")
    }
}

impl<T> fmt::Display for Disconnected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the other side of the queue has disconnected")
    }
}

impl<T> std::error::Error for Disconnected<T> {}

/// Why a batch push ([`mpsc::Producer::try_push_many`] / `push_many`) did not
/// insert the batch. Nothing of the batch was inserted in any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchError {
    /// Not enough free slots for the whole batch right now.
    Full,
    /// The batch is larger than the queue's capacity, so it can never fit.
    TooLarge {
        /// Items in the batch.
        len: usize,
        /// Slots in the queue.
        capacity: usize,
    },
    /// Every consumer handle has been dropped (synchronous `push_many` only).
    Disconnected,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Full => f.write_str("not enough room in the queue for the whole batch"),
            BatchError::TooLarge { len, capacity } => write!(
                f,
                "a batch of {len} items can never fit in a queue of capacity {capacity}"
            ),
            BatchError::Disconnected => f.write_str("the consumer has disconnected"),
        }
    }
}

impl std::error::Error for BatchError {}

/// A shared-memory queue's words contradict its protocol: the peer process
/// is faulty or hostile. The operation did nothing; the queue should be
/// abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shared-memory queue is corrupt (its indices contradict the protocol)")
    }
}

impl std::error::Error for Corrupt {}
