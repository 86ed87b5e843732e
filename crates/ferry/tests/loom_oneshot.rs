#![cfg(ferry_loom)]
//! Loom model of the one-shot channel's slot (`src/sync/oneshot/slot.rs`,
//! compiled here against loom's atomics and cells, with loom's park and
//! unpark for a ferry thread's): under every interleaving loom explores, a
//! receiver waiting while the sender sends (or goes unsent) is woken and
//! finds the value (or finds it gone), never left parked; a value sent to
//! a receiver that goes at the same time is either given back or dropped
//! with the slot, once.

use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::SeqCst;
use loom::thread;

/// What `slot` reaches through `super::shim`.
mod shim {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicU8, Ordering};
}

#[path = "../src/sync/oneshot/slot.rs"]
#[allow(dead_code)]
mod slot;

use slot::{Look, Slot, Wake};

/// A loom thread, woken by loom's unpark.
struct LoomThread(thread::Thread);

impl Wake for LoomThread {
    fn current() -> LoomThread {
        LoomThread(thread::current())
    }

    fn wake(&self) {
        self.0.unpark();
    }
}

/// Counts its drops.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl PartialEq for Counted {
    fn eq(&self, _: &Counted) -> bool {
        true
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_waiting_receiver_gets_the_value() {
    loom::model(|| {
        let slot = Arc::new(Slot::<u32, LoomThread>::new());
        let s = Arc::clone(&slot);
        let sender = thread::spawn(move || s.send(7).unwrap());
        assert_eq!(slot.wait(thread::park), Look::Value(7));
        sender.join().unwrap();
    });
}

#[test]
fn a_waiting_receiver_learns_the_sender_went() {
    loom::model(|| {
        let slot = Arc::new(Slot::<u32, LoomThread>::new());
        let s = Arc::clone(&slot);
        let sender = thread::spawn(move || s.sender_gone());
        assert_eq!(slot.wait(thread::park), Look::Gone);
        sender.join().unwrap();
    });
}

#[test]
fn a_receiver_that_looks_first_then_waits_gets_the_value() {
    loom::model(|| {
        let slot = Arc::new(Slot::<u32, LoomThread>::new());
        let s = Arc::clone(&slot);
        let sender = thread::spawn(move || s.send(3).unwrap());
        let got = match slot.try_take() {
            Look::Value(v) => v,
            Look::Empty => match slot.wait(thread::park) {
                Look::Value(v) => v,
                other => panic!("{other:?}"),
            },
            Look::Gone => panic!("gone before it was sent"),
        };
        assert_eq!(got, 3);
        sender.join().unwrap();
    });
}

#[test]
fn a_value_sent_as_the_receiver_goes_is_dropped_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(Slot::<Counted, LoomThread>::new());
        let s = Arc::clone(&slot);
        let d = Arc::clone(&drops);
        let sender = thread::spawn(move || {
            // Given back: the sender drops it here.
            let _ = s.send(Counted(d));
        });
        slot.drop_receiver();
        sender.join().unwrap();
        drop(slot);
        assert_eq!(drops.load(SeqCst), 1);
    });
}
