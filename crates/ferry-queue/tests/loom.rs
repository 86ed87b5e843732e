//! Loom models of the in-process queues: every interleaving (up to the
//! preemption bound) of the real queue code, with loom's atomics, `Arc` and
//! `UnsafeCell` swapped in by `src/primitive.rs`.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg ferry_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p ferry-queue --release --test loom
//! ```
//!
//! `loom` is a `cfg(ferry_loom)` dependency of the crate, which integration
//! tests may name like any other dependency of their package.
//!
//! The models are kept small (capacity 2–4, two or three items per producer,
//! five in the two-thread `*_laps_in_order` models; at most four model
//! threads counting the main one): all of them together take about ten
//! seconds with `LOOM_MAX_PREEMPTIONS=2` in release mode.
//!
//! Every retry loop yields to the model, and no model has two threads that
//! may spin at once while a third holds what they wait for: loom's scheduler
//! can then alternate between the two spinners without bound and the model
//! fails with "exceeded maximum number of branches" (tokio-rs/loom#53). The
//! multi-consumer models therefore use bounded `try_pop`s and settle the rest
//! after the joins, and the waiting (`pop`, full queues) is modelled with one
//! producer and one consumer.

#![cfg(ferry_loom)]

use ferry_queue::wait::Spin;
use ferry_queue::{BatchError, Consumer, Disconnected, Kind, Producer};
use ferry_queue::{mpmc, mpsc, spmc, spsc};
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::Relaxed;
use loom::thread;

type Tx<T, K> = Producer<T, K, Spin>;
type Rx<T, K> = Consumer<T, K, Spin>;
type MakeChannel<T, K> = fn(usize) -> (Tx<T, K>, Rx<T, K>);

/// Pushes `item`, yielding to the model while the queue is full.
fn push_retry<T, K: Kind>(tx: &Tx<T, K>, mut item: T) {
    loop {
        match tx.try_push(item) {
            Ok(()) => return,
            Err(back) => {
                item = back;
                thread::yield_now();
            }
        }
    }
}

/// Pops one item, yielding to the model while the queue is empty.
fn pop_retry<T, K: Kind>(rx: &Rx<T, K>) -> T {
    loop {
        if let Some(item) = rx.try_pop() {
            return item;
        }
        thread::yield_now();
    }
}

/// True if the elements of `got` that are in `of` appear in the order of `of`
/// (each at most once).
fn in_order(got: &[u32], of: &[u32]) -> bool {
    let ranks: Vec<usize> = got
        .iter()
        .filter_map(|x| of.iter().position(|y| y == x))
        .collect();
    ranks.windows(2).all(|w| w[0] < w[1])
}

/// SP-SC: a producer thread pushes three items through two slots (so it
/// sees the queue full and the consumer's `tail` store), the main thread
/// pops them: exact values in exact order.
#[test]
fn spsc_three_items_in_order() {
    loom::model(|| {
        let (tx, rx) = spsc::channel_with::<u32, Spin>(2);
        let producer = thread::spawn(move || {
            for i in 1..=3 {
                push_retry(&tx, i);
            }
        });
        let got: Vec<u32> = (0..3).map(|_| pop_retry(&rx)).collect();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(rx.try_pop(), None);
        producer.join().unwrap();
    });
}

/// MP-SC: one producer pushes two single items while another pushes a batch
/// of two with `try_push_many`, into four slots, so the claims race on
/// `head` and the consumer on the main thread spins on unpublished flags. The
/// consumer gets all four, the batch contiguous and in order, the singles in
/// order.
///
/// Four slots, so neither producer ever waits: with two producers spinning on
/// a full queue and a consumer spinning on an empty slot, loom's scheduler can
/// alternate between the two spinners for ever while the preempted third
/// thread holds the claim (tokio-rs/loom#53). The full queue and slot reuse
/// are covered by [`mpsc_batches_wrap_around`].
#[test]
fn mpsc_single_and_batch() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel_with::<u32, Spin>(4);
        let tx2 = tx.clone();
        let singles = thread::spawn(move || {
            push_retry(&tx, 10);
            push_retry(&tx, 11);
        });
        let batch = thread::spawn(move || {
            let mut items = vec![20, 21];
            assert_eq!(tx2.try_push_many(&mut items), Ok(()));
            assert!(items.is_empty());
        });
        let got: Vec<u32> = (0..4).map(|_| pop_retry(&rx)).collect();
        assert_eq!(rx.try_pop(), None);
        singles.join().unwrap();
        batch.join().unwrap();

        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [10, 11, 20, 21], "got {got:?}");
        let at = got.iter().position(|&x| x == 20).unwrap();
        assert_eq!(got.get(at + 1), Some(&21), "batch not contiguous: {got:?}");
        assert!(
            in_order(&got, &[10, 11]),
            "single pushes reordered: {got:?}"
        );
    });
}

/// Pushes a batch, yielding to the model while there is no room for all of it.
fn push_many_retry<W>(tx: &mpsc::Producer<u32, W>, batch: &[u32])
where
    W: ferry_queue::wait::Wait,
{
    let mut items = batch.to_vec();
    loop {
        match tx.try_push_many(&mut items) {
            Ok(()) => return assert!(items.is_empty()),
            Err(BatchError::Full) => {
                assert_eq!(items, batch, "a failed batch is left untouched");
                thread::yield_now();
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

/// MP-SC through two slots: a producer thread pushes a batch of two (which
/// needs the queue empty), a single item and another batch of two, so every
/// claim after the first waits for the consumer's `tail` and reuses slots the
/// consumer has just read and cleared. The main thread receives all five in
/// order.
#[test]
fn mpsc_batches_wrap_around() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel_with::<u32, Spin>(2);
        let producer = thread::spawn(move || {
            push_many_retry(&tx, &[1, 2]);
            push_retry(&tx, 3);
            push_many_retry(&tx, &[4, 5]);
        });
        let got: Vec<u32> = (0..5).map(|_| pop_retry(&rx)).collect();
        assert_eq!(got, [1, 2, 3, 4, 5]);
        assert_eq!(rx.try_pop(), None);
        producer.join().unwrap();
    });
}

/// MP-SC through two slots with three threads and no waiting: one producer
/// tries two single items, another a batch of two, once each, while the
/// consumer on the main thread tries three pops; the rest is settled after
/// the joins. Claims race on `head`, see the queue full, re-read a stale
/// `head` after the consumer moved `tail` past it, and reuse slots.
/// Every item exactly once; in the consumer's sequence, the batch (if it fit)
/// is contiguous and the singles that fit are in order.
#[test]
fn mpsc_contended_full() {
    loom::model(|| {
        let (tx, rx) = mpsc::channel_with::<u32, Spin>(2);
        let (tx1, tx2) = (tx.clone(), tx.clone());
        let singles = thread::spawn(move || push_once_each(&tx1, &[10, 11]));
        let batch = thread::spawn(move || {
            let mut items = vec![20, 21];
            match tx2.try_push_many(&mut items) {
                Ok(()) => true,
                Err(BatchError::Full) => {
                    assert_eq!(items, [20, 21], "a failed batch is left untouched");
                    false
                }
                Err(e) => panic!("unexpected {e:?}"),
            }
        });
        let mut got = pop_tries(&rx, 3);
        let unsent = singles.join().unwrap();
        let batch_sent = batch.join().unwrap();
        got.extend(pop_tries(&rx, 4));
        assert_eq!(rx.try_pop(), None);

        let sent: Vec<u32> = [10, 11]
            .into_iter()
            .filter(|i| !unsent.contains(i))
            .collect();
        assert!(in_order(&got, &sent), "singles reordered: {got:?}");
        if batch_sent {
            let at = got.iter().position(|&x| x == 20).unwrap();
            assert_eq!(got.get(at + 1), Some(&21), "batch not contiguous: {got:?}");
        } else {
            assert!(!got.contains(&20) && !got.contains(&21), "{got:?}");
        }
        let mut expect = sent;
        if batch_sent {
            expect.extend([20, 21]);
        }
        got.sort_unstable();
        assert_eq!(got, expect);
    });
}

/// Pushes each of `items` with one `try_push`, returning those that found
/// the queue full.
fn push_once_each<K: Kind>(tx: &Tx<u32, K>, items: &[u32]) -> Vec<u32> {
    items.iter().filter_map(|&i| tx.try_push(i).err()).collect()
}

/// Up to `tries` `try_pop`s, without waiting: what a consumer got.
fn pop_tries<K: Kind>(rx: &Rx<u32, K>, tries: usize) -> Vec<u32> {
    (0..tries).filter_map(|_| rx.try_pop()).collect()
}

/// After every thread has joined: pops what is left, pushes what never fit,
/// pops that too, and checks that the consumers' takes and the rest together
/// are `all`, each exactly once.
fn settle<K: Kind>(
    tx: &Tx<u32, K>,
    rx: &Rx<u32, K>,
    took: &[Vec<u32>],
    unsent: &[u32],
    all: &[u32],
) {
    let mut rest = pop_tries(rx, all.len());
    for &item in unsent {
        assert!(tx.try_push(item).is_ok(), "an idle queue has room");
        rest.push(rx.try_pop().expect("just pushed"));
    }
    assert_eq!(rx.try_pop(), None);
    let mut every: Vec<u32> = took.concat();
    every.extend(rest);
    every.sort_unstable();
    assert_eq!(every, all, "consumers took {took:?}, unsent {unsent:?}");
}

/// SP-MC: the main thread pushes three items into two slots (the third only
/// fits once a consumer has freed slot 0) while two consumer threads race
/// for them with two `try_pop`s each. No waiting anywhere (so loom cannot
/// oscillate between spinners); what the consumers did not take is drained
/// afterwards. Every item exactly once; each consumer sees its items in push
/// order.
#[test]
fn spmc_every_item_once() {
    loom::model(|| {
        let (tx, rx) = spmc::channel_with::<u32, Spin>(2);
        let rx1 = rx.clone();
        let rx2 = rx.clone();
        let c1 = thread::spawn(move || pop_tries(&rx1, 2));
        let c2 = thread::spawn(move || pop_tries(&rx2, 2));
        let unsent = push_once_each(&tx, &[1, 2, 3]);
        assert!(unsent.iter().all(|&i| i == 3), "two slots hold two items");
        let took = [c1.join().unwrap(), c2.join().unwrap()];
        for got in &took {
            assert!(in_order(got, &[1, 2, 3]), "{got:?}");
        }
        settle(&tx, &rx, &took, &unsent, &[1, 2, 3]);
    });
}

/// MP-MC: two producer threads push two items each into two slots with one
/// `try_push` per item, while a consumer thread and the main thread take
/// with two `try_pop`s each; the rest is drained afterwards. Every item
/// exactly once; within one consumer, each producer's items keep their order.
///
/// (The main thread consumes rather than produces: with it pushing after
/// spawning both consumers the model needs over 2 million iterations, ~5
/// minutes; this arrangement explores the same races in ~30 000.)
#[test]
fn mpmc_every_item_once() {
    loom::model(|| {
        let (tx, rx) = mpmc::channel_with::<u32, Spin>(2);
        let (tx1, tx2) = (tx.clone(), tx.clone());
        let rx1 = rx.clone();
        let p1 = thread::spawn(move || push_once_each(&tx1, &[10, 11]));
        let p2 = thread::spawn(move || push_once_each(&tx2, &[20, 21]));
        let c1 = thread::spawn(move || pop_tries(&rx1, 2));
        let mine = pop_tries(&rx, 2);
        let mut unsent = p1.join().unwrap();
        unsent.extend(p2.join().unwrap());
        let took = [c1.join().unwrap(), mine];
        for got in &took {
            assert!(in_order(got, &[10, 11]), "{got:?}");
            assert!(in_order(got, &[20, 21]), "{got:?}");
        }
        settle(&tx, &rx, &took, &unsent, &[10, 11, 20, 21]);
    });
}

/// An item that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// A producer thread pushes two counted items into two slots while a consumer
/// thread takes at most one (one `try_pop`) and drops it; both then drop
/// their handles, so the queue itself is dropped by whichever thread is last,
/// with zero, one or two items left in it. Every item is dropped exactly
/// once (loom would also flag a double free or a leaked `Arc`).
fn leftovers_dropped_once<K: Kind>(make: MakeChannel<Counted, K>) {
    loom::model(move || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = make(2);
        let counter = drops.clone();
        let producer = thread::spawn(move || {
            for _ in 0..2 {
                let pushed = tx.try_push(Counted(counter.clone())).is_ok();
                assert!(pushed, "two slots, two items: never full");
            }
        });
        let consumer = thread::spawn(move || {
            drop(rx.try_pop());
        });
        producer.join().unwrap();
        consumer.join().unwrap();
        assert_eq!(drops.load(Relaxed), 2);
        assert_eq!(Arc::strong_count(&drops), 1);
    });
}

#[test]
fn spsc_leftovers_dropped_once() {
    leftovers_dropped_once(spsc::channel_with::<Counted, Spin>);
}

#[test]
fn mpsc_leftovers_dropped_once() {
    leftovers_dropped_once(mpsc::channel_with::<Counted, Spin>);
}

#[test]
fn spmc_leftovers_dropped_once() {
    leftovers_dropped_once(spmc::channel_with::<Counted, Spin>);
}

#[test]
fn mpmc_leftovers_dropped_once() {
    leftovers_dropped_once(mpmc::channel_with::<Counted, Spin>);
}

/// A producer thread pushes two items and drops its handle; the consumer's
/// blocking `pop` (Spin strategy) returns both, in order, and then
/// `Err(Disconnected)` — never an item lost to the drop race.
fn pop_after_disconnect<K: Kind>(make: MakeChannel<u32, K>) {
    loom::model(move || {
        let (tx, rx) = make(2);
        let producer = thread::spawn(move || {
            push_retry(&tx, 1);
            push_retry(&tx, 2);
            drop(tx);
        });
        assert_eq!(rx.pop(), Ok(1));
        assert_eq!(rx.pop(), Ok(2));
        assert_eq!(rx.pop(), Err(Disconnected(())));
        assert!(rx.is_disconnected());
        producer.join().unwrap();
    });
}

#[test]
fn spsc_pop_after_disconnect() {
    pop_after_disconnect(spsc::channel_with::<u32, Spin>);
}

#[test]
fn mpsc_pop_after_disconnect() {
    pop_after_disconnect(mpsc::channel_with::<u32, Spin>);
}

#[test]
fn spmc_pop_after_disconnect() {
    pop_after_disconnect(spmc::channel_with::<u32, Spin>);
}

#[test]
fn mpmc_pop_after_disconnect() {
    pop_after_disconnect(mpmc::channel_with::<u32, Spin>);
}

/// One producer thread pushes five items through two slots (each slot is
/// reused twice, so the stamps go through three laps) and drops its handle;
/// the main thread takes them with the blocking `pop` until disconnected.
/// Exact values in exact order, for every kind.
fn laps_in_order<K: Kind>(make: MakeChannel<u32, K>) {
    loom::model(move || {
        let (tx, rx) = make(2);
        let producer = thread::spawn(move || {
            for i in 1..=5 {
                push_retry(&tx, i);
            }
        });
        let mut got = Vec::new();
        while let Ok(item) = rx.pop() {
            got.push(item);
        }
        assert_eq!(got, [1, 2, 3, 4, 5]);
        producer.join().unwrap();
    });
}

#[test]
fn spsc_laps_in_order() {
    laps_in_order(spsc::channel_with::<u32, Spin>);
}

#[test]
fn mpsc_laps_in_order() {
    laps_in_order(mpsc::channel_with::<u32, Spin>);
}

#[test]
fn spmc_laps_in_order() {
    laps_in_order(spmc::channel_with::<u32, Spin>);
}

#[test]
fn mpmc_laps_in_order() {
    laps_in_order(mpmc::channel_with::<u32, Spin>);
}

/// The spin lock: two threads each make a read-then-write of a two-word
/// value under the lock. Under every interleaving the updates do not tear
/// or get lost (loom also checks that no two guards reach the cell at
/// once), and a `try_lock` that fails does so only while a guard lives.
#[test]
fn spin_lock_excludes() {
    use ferry_queue::lock::SpinLock;
    loom::model(|| {
        let lock = Arc::new(SpinLock::new((0u32, 0u32)));
        let other = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                let mut g = lock.lock();
                let (a, b) = *g;
                *g = (a + 1, b + 1);
            })
        };
        match lock.try_lock() {
            Some(mut g) => {
                let (a, b) = *g;
                *g = (a + 1, b + 1);
            }
            None => {
                let mut g = lock.lock();
                let (a, b) = *g;
                *g = (a + 1, b + 1);
            }
        }
        other.join().unwrap();
        assert_eq!(*lock.lock(), (2, 2));
        assert!(!lock.is_locked());
    });
}
