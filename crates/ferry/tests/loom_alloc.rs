#![cfg(ferry_loom)]
//! A loom model of the allocation page's order and acknowledgement
//! (`src/alloc/protocol.rs`, compiled here against loom's atomics): the
//! daemon publishes two orders (core sets) under the sequence word while
//! the runtime reads, follows and acknowledges. Under every interleaving
//! loom explores, a read the runtime accepts is exactly one order's cores
//! (never half of one and half of the next), generations only move
//! forward, and once the daemon sees the last order acknowledged, the
//! runtime followed exactly that order's cores.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicU64};

/// The atomics `protocol` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
}

#[path = "../src/alloc/protocol.rs"]
mod protocol;

/// The cores of order `g` (generations 2 and 4): two words each, so a
/// torn read would mix them.
fn set_of(g: u32) -> [u64; 2] {
    match g {
        0 => [0, 0],
        2 => [0b0011, 0b01],
        4 => [0b1100, 0b10],
        _ => unreachable!("no order {g}"),
    }
}

struct Words {
    order: AtomicU32,
    acked: AtomicU32,
    cores: [AtomicU64; 2],
}

#[test]
fn the_runtime_follows_whole_orders_and_the_daemon_sees_the_last_one_followed() {
    loom::model(|| {
        let w = Arc::new(Words {
            order: AtomicU32::new(0),
            acked: AtomicU32::new(0),
            cores: [AtomicU64::new(0), AtomicU64::new(0)],
        });
        let runtime = {
            let w = Arc::clone(&w);
            loom::thread::spawn(move || {
                let mut followed = 0u32;
                let mut cores = [0u64; 2];
                for _ in 0..3 {
                    let mut out = [0u64; 2];
                    if let Some(g) = protocol::read(&w.order, &w.cores, &mut out) {
                        assert_eq!(out, set_of(g), "a torn order");
                        assert!(g >= followed, "an order went back");
                        if g != followed {
                            cores = out;
                            followed = g;
                            protocol::ack(&w.acked, g);
                        }
                    }
                    loom::thread::yield_now();
                }
                (followed, cores)
            })
        };
        let g1 = protocol::publish(&w.order, &w.cores, &set_of(2), 0);
        let g2 = protocol::publish(&w.order, &w.cores, &set_of(4), g1);
        assert_eq!((g1, g2), (2, 4));
        let seen = protocol::acked(&w.acked);
        assert_ne!(protocol::check_ack(seen, g2, 0), protocol::Ack::Malformed);
        let (followed, cores) = runtime.join().unwrap();
        if seen == g2 {
            assert_eq!(followed, g2);
            assert_eq!(cores, set_of(g2));
        }
        assert_eq!(cores, set_of(followed));
    });
}
