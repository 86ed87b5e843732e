//! crossbeam as a peer of the `queues` experiment: `crossbeam_queue`'s
//! `ArrayQueue` in a spin loop and `crossbeam_channel::bounded` with its
//! blocking `send`/`recv`.
//!
//! This module owns only how these peers move an item; timing and checks
//! are the experiment's.

use std::sync::Arc;

use crate::queues::transport::{Control, Transport, spin_recv, spin_send};

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

/// `crossbeam-channel bounded`: blocking `send`/`recv`.
pub struct CrossbeamBounded;

impl Transport for CrossbeamBounded {
    const NAME: &'static str = "crossbeam-channel bounded";
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(capacity)
    }
    #[inline(always)]
    fn send(tx: &Self::Tx, v: u64, _ctl: &Control) -> bool {
        tx.send(v).is_ok()
    }
    #[inline(always)]
    fn recv(rx: &Self::Rx, _ctl: &Control) -> Option<u64> {
        rx.recv().ok()
    }
}
