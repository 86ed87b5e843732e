use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use super::*;

/// Counts its drops, to check that every value is dropped exactly once.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn sent_before_the_receiver_looks() {
    let (tx, rx) = channel();
    tx.send(7u32).unwrap();
    assert_eq!(rx.recv(), Ok(7));
}

#[test]
fn try_recv_says_empty_then_takes_then_disconnected() {
    let (tx, mut rx) = channel();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    tx.send(1u8).unwrap();
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn a_sender_dropped_unsent_ends_the_wait() {
    let (tx, mut rx) = channel::<u8>();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn a_send_to_a_dropped_receiver_gives_the_value_back() {
    let (tx, rx) = channel();
    assert!(!tx.is_closed());
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send(String::from("back")), Err(String::from("back")));
}

#[test]
fn every_value_is_dropped_once_on_every_path() {
    let drops = Arc::new(AtomicUsize::new(0));
    // Received.
    let (tx, rx) = channel();
    tx.send(Counted(Arc::clone(&drops))).unwrap();
    drop(rx.recv().unwrap());
    // Sent, never received.
    let (tx, rx) = channel();
    tx.send(Counted(Arc::clone(&drops))).unwrap();
    drop(rx);
    // Given back.
    let (tx, rx) = channel();
    drop(rx);
    drop(tx.send(Counted(Arc::clone(&drops))).unwrap_err());
    assert_eq!(drops.load(SeqCst), 3);
}

#[test]
fn a_parked_ferry_thread_is_woken_by_a_plain_kernel_thread() {
    crate::run(|| {
        for _ in 0..if cfg!(miri) { 3 } else { 200 } {
            let (tx, rx) = channel();
            let kernel = std::thread::spawn(move || tx.send(5u64).unwrap());
            assert_eq!(rx.recv(), Ok(5));
            kernel.join().unwrap();
        }
    })
    .unwrap();
}

#[test]
fn a_plain_kernel_thread_is_woken_by_a_ferry_thread() {
    crate::run(|| {
        for i in 0..if cfg!(miri) { 3 } else { 200 } {
            let (tx, rx) = channel();
            let kernel = std::thread::spawn(move || rx.recv());
            crate::thread::yield_now();
            tx.send(i).unwrap();
            assert_eq!(kernel.join().unwrap(), Ok(i));
        }
    })
    .unwrap();
}

/// Many pairs at once on two processors, each sent from another thread
/// and received while the sender may be anywhere in its send, or dropped
/// unsent: every value arrives once, every drop is seen.
#[test]
fn stress_many_pairs_across_processors() {
    let pairs = if cfg!(miri) { 20 } else { 20_000 };
    crate::Runtime::builder()
        .processors(2)
        .run(move || {
            let drops = Arc::new(AtomicUsize::new(0));
            let mut got = 0u64;
            let mut gone = 0usize;
            for i in 0..pairs {
                let (tx, rx) = channel();
                let d = Arc::clone(&drops);
                let sender = crate::spawn(move || {
                    if i % 7 == 0 {
                        drop(tx);
                    } else {
                        tx.send((i as u64, Counted(d))).unwrap();
                    }
                });
                match rx.recv() {
                    Ok((v, c)) => {
                        got += v;
                        drop(c);
                    }
                    Err(RecvError) => gone += 1,
                }
                sender.join().unwrap();
            }
            let unsent = (0..pairs).filter(|i| i % 7 == 0).count();
            assert_eq!(gone, unsent);
            assert_eq!(drops.load(SeqCst), pairs - unsent);
            let want: u64 = (0..pairs).filter(|i| i % 7 != 0).map(|i| i as u64).sum();
            assert_eq!(got, want);
        })
        .unwrap();
}
