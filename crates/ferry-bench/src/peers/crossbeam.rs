//! crossbeam as a peer of the `queues` experiment: `crossbeam_queue`'s
//! `ArrayQueue` in a spin loop and `crossbeam_channel::bounded` with its
//! blocking `send`/`recv`.
//!
//! This module owns only how these peers move an item; timing and checks
//! are the experiment's.

use std::sync::Arc;

use crate::transport::{Control, Transport, blocking_transport, spin_recv, spin_send};

/// Name of the crossbeam `ArrayQueue` system, the first ratio baseline.
pub const ARRAY_QUEUE: &str = "crossbeam ArrayQueue";

/// `crossbeam ArrayQueue`: `crossbeam_queue::ArrayQueue` shared through an
/// `Arc`, push/pop spin loops.
pub struct CrossbeamArrayQueue;

impl Transport for CrossbeamArrayQueue {
    const NAME: &'static str = ARRAY_QUEUE;
    type Tx = Arc<crossbeam_queue::ArrayQueue<u64>>;
    type Rx = Arc<crossbeam_queue::ArrayQueue<u64>>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(crossbeam_queue::ArrayQueue::new(capacity));
        (Arc::clone(&q), q)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
        spin_send(v, ctl, |v| tx.push(v))
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
        spin_recv(ctl, || rx.pop())
    }
}

blocking_transport!(
    /// `crossbeam-channel bounded`: blocking `send`/`recv`.
    CrossbeamBounded,
    "crossbeam-channel bounded",
    crossbeam_channel::Sender<u64>,
    crossbeam_channel::Receiver<u64>,
    crossbeam_channel::bounded,
    send,
    recv
);
