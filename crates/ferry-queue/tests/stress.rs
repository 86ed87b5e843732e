//! Multi-thread stress tests of the four in-process queue kinds.
//!
//! Items are `u64`s that encode which producer pushed them and in which order
//! ([`item`]), so the consumers can check that every item arrives exactly once
//! and that each producer's items arrive in the order they were pushed.
//!
//! The ordering check holds for every kind, not only the single-consumer
//! ones: each kind hands out queue positions in increasing order to one
//! producer's successive pushes and to one consumer's successive pops, so a
//! consumer always sees each producer's sequence numbers increasing. With a
//! single consumer it must see them *consecutive* (nothing lost, nothing
//! reordered), which is the stronger check used for SP-SC and MP-SC.
//!
//! Thread counts are small on purpose (the target machine has two cores) and
//! everything is scaled down under Miri ([`scaled`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use ferry_queue::wait::{Spin, SpinYield, Wait};
use ferry_queue::{BatchError, Consumer, Disconnected, Kind, Producer, mpmc, mpsc, spmc, spsc};

/// Scales an iteration or item count down under Miri, which runs code about
/// a thousand times slower: 10^6 items become 2 000.
fn scaled(n: usize) -> usize {
    if cfg!(miri) { (n / 500).max(2) } else { n }
}

/// How long a test's threads may take before the test fails instead of
/// hanging: a lost wakeup leaves a thread parked forever. Tests take a few
/// seconds at most alone, so this only trips on a stuck thread (or a machine
/// loaded far beyond its cores).
const DEADLINE: Duration = Duration::from_secs(60);

/// Joins `t`, failing the test if it is still running at `deadline`; re-raises
/// the thread's own panic. Under Miri (a virtual, slow clock) it just joins.
fn join_by<T>(t: thread::JoinHandle<T>, deadline: Instant, what: &str) -> T {
    if !cfg!(miri) {
        let mut nap = Duration::from_micros(20);
        while !t.is_finished() {
            assert!(
                Instant::now() < deadline,
                "{what} still blocked after {DEADLINE:?}: lost wakeup or deadlock"
            );
            thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }
    t.join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Handles on a multi side (producers of MP-SC / MP-MC, consumers of SP-MC /
/// MP-MC).
const MULTI: usize = if cfg!(miri) { 2 } else { 3 };

/// Items through each throughput test.
const TOTAL: usize = 1_000_000;

/// Producer `p`'s item number `seq`.
fn item(p: usize, seq: usize) -> u64 {
    ((p as u64) << 32) | seq as u64
}

fn decode(v: u64) -> (usize, usize) {
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

/// Spins a little after a failed try_ operation, then yields (the other side
/// may not be running: two cores, more threads than that).
fn backoff(fails: &mut u32) {
    *fails += 1;
    if *fails < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// `n` handles: `h` and `n - 1` clones of it.
fn clones<H: Clone>(h: H, n: usize) -> Vec<H> {
    let mut v = vec![h];
    while v.len() < n {
        let c = v[0].clone();
        v.push(c);
    }
    v
}

/// How the stress threads move items.
#[derive(Debug, Clone, Copy)]
enum Ops {
    /// `push` / `pop`, waiting through the queue's strategy; consumers stop at
    /// `Err(Disconnected)`.
    Blocking,
    /// `try_push` / `try_pop` in a retry loop; consumers stop when the queue is
    /// disconnected and a `try_pop` after seeing that finds nothing.
    Try,
}

/// The `total` items split as evenly as possible among `producers`.
fn shares(total: usize, producers: usize) -> Vec<usize> {
    (0..producers)
        .map(|p| total / producers + usize::from(p < total % producers))
        .collect()
}

/// Runs every producer and consumer handle on its own thread until all items
/// are through, then checks what each consumer got.
fn stress<K: Kind, W: Wait + 'static>(
    producers: Vec<Producer<u64, K, W>>,
    consumers: Vec<Consumer<u64, K, W>>,
    total: usize,
    ops: Ops,
) {
    let deadline = Instant::now() + DEADLINE;
    let shares = shares(total, producers.len());
    let single_consumer = consumers.len() == 1;
    let consumer_threads: Vec<_> = consumers
        .into_iter()
        .map(|rx| {
            thread::spawn(move || {
                let mut got = Vec::new();
                match ops {
                    Ops::Blocking => {
                        while let Ok(v) = rx.pop() {
                            got.push(v);
                        }
                        assert!(rx.is_disconnected());
                        assert_eq!(rx.pop(), Err(Disconnected(())));
                    }
                    Ops::Try => {
                        let mut fails = 0;
                        loop {
                            if let Some(v) = rx.try_pop() {
                                got.push(v);
                                fails = 0;
                            } else if rx.is_disconnected() {
                                // Everything pushed before the last producer
                                // dropped is visible now.
                                match rx.try_pop() {
                                    Some(v) => got.push(v),
                                    None => break,
                                }
                            } else {
                                backoff(&mut fails);
                            }
                        }
                    }
                }
                got
            })
        })
        .collect();
    let producer_threads: Vec<_> = producers
        .into_iter()
        .zip(shares.clone())
        .enumerate()
        .map(|(p, (tx, n))| {
            thread::spawn(move || {
                for seq in 0..n {
                    let v = item(p, seq);
                    match ops {
                        Ops::Blocking => tx.push(v).expect("consumers are alive"),
                        Ops::Try => {
                            let mut v = v;
                            let mut fails = 0;
                            while let Err(back) = tx.try_push(v) {
                                assert_eq!(back, item(p, seq), "try_push gave back another item");
                                v = back;
                                backoff(&mut fails);
                            }
                        }
                    }
                }
                // `tx` drops here; the last one disconnects the consumers.
            })
        })
        .collect();
    // Consumers first: their panics are the interesting ones (a producer
    // whose consumers died only fails to push).
    let got: Vec<Vec<u64>> = consumer_threads
        .into_iter()
        .map(|t| join_by(t, deadline, "consumer"))
        .collect();
    for t in producer_threads {
        join_by(t, deadline, "producer");
    }
    check_delivery(&shares, &got, single_consumer);
}

/// Every item of every producer exactly once; per consumer, each producer's
/// sequence numbers increasing (consecutive with a single consumer).
fn check_delivery(shares: &[usize], got: &[Vec<u64>], single_consumer: bool) {
    let mut seen: Vec<Vec<bool>> = shares.iter().map(|&n| vec![false; n]).collect();
    let mut delivered = 0;
    for (c, items) in got.iter().enumerate() {
        let mut next = vec![0usize; shares.len()];
        for &v in items {
            let (p, seq) = decode(v);
            assert!(
                p < shares.len() && seq < shares[p],
                "consumer {c}: item {v:#x} was never pushed"
            );
            assert!(
                !seen[p][seq],
                "consumer {c}: item {p}/{seq} delivered twice"
            );
            seen[p][seq] = true;
            if single_consumer {
                assert_eq!(seq, next[p], "producer {p}: out of order or lost item");
            } else {
                assert!(
                    seq >= next[p],
                    "consumer {c}: producer {p}'s {seq} after {}",
                    next[p] - 1
                );
            }
            next[p] = seq + 1;
        }
        delivered += items.len();
    }
    assert_eq!(delivered, shares.iter().sum::<usize>(), "items lost");
    for (p, s) in seen.iter().enumerate() {
        if let Some(seq) = s.iter().position(|&b| !b) {
            panic!("producer {p}: item {seq} never arrived");
        }
    }
}

// ---------------------------------------------------------------------------
// Throughput: 10^6 items per test, capacity 8 and 1024.

fn run_spsc<W: Wait + 'static>(
    (tx, rx): (spsc::Producer<u64, W>, spsc::Consumer<u64, W>),
    ops: Ops,
) {
    stress(vec![tx], vec![rx], scaled(TOTAL), ops);
}

fn run_mpsc<W: Wait + 'static>(
    (tx, rx): (mpsc::Producer<u64, W>, mpsc::Consumer<u64, W>),
    ops: Ops,
) {
    stress(clones(tx, MULTI), vec![rx], scaled(TOTAL), ops);
}

fn run_spmc<W: Wait + 'static>(
    (tx, rx): (spmc::Producer<u64, W>, spmc::Consumer<u64, W>),
    ops: Ops,
) {
    stress(vec![tx], clones(rx, MULTI), scaled(TOTAL), ops);
}

fn run_mpmc<W: Wait + 'static>(
    (tx, rx): (mpmc::Producer<u64, W>, mpmc::Consumer<u64, W>),
    ops: Ops,
) {
    stress(clones(tx, 2), clones(rx, 2), scaled(TOTAL), ops);
}

#[test]
fn spsc_blocking_park_cap8() {
    run_spsc(spsc::channel(8), Ops::Blocking);
}

#[test]
fn spsc_blocking_park_cap1024() {
    run_spsc(spsc::channel(1024), Ops::Blocking);
}

#[test]
fn spsc_try_spin_cap8() {
    run_spsc(spsc::channel_with::<_, Spin>(8), Ops::Try);
}

#[test]
fn spsc_blocking_spin_yield_cap1024() {
    run_spsc(spsc::channel_with::<_, SpinYield>(1024), Ops::Blocking);
}

#[test]
fn mpsc_blocking_park_cap8() {
    run_mpsc(mpsc::channel(8), Ops::Blocking);
}

#[test]
fn mpsc_blocking_park_cap1024() {
    run_mpsc(mpsc::channel(1024), Ops::Blocking);
}

#[test]
fn mpsc_try_spin_cap8() {
    run_mpsc(mpsc::channel_with::<_, Spin>(8), Ops::Try);
}

#[test]
fn mpsc_blocking_spin_yield_cap1024() {
    run_mpsc(mpsc::channel_with::<_, SpinYield>(1024), Ops::Blocking);
}

#[test]
fn spmc_blocking_park_cap8() {
    run_spmc(spmc::channel(8), Ops::Blocking);
}

#[test]
fn spmc_blocking_park_cap1024() {
    run_spmc(spmc::channel(1024), Ops::Blocking);
}

#[test]
fn spmc_try_spin_cap8() {
    run_spmc(spmc::channel_with::<_, Spin>(8), Ops::Try);
}

#[test]
fn spmc_blocking_spin_yield_cap1024() {
    run_spmc(spmc::channel_with::<_, SpinYield>(1024), Ops::Blocking);
}

#[test]
fn mpmc_blocking_park_cap8() {
    run_mpmc(mpmc::channel(8), Ops::Blocking);
}

#[test]
fn mpmc_blocking_park_cap1024() {
    run_mpmc(mpmc::channel(1024), Ops::Blocking);
}

#[test]
fn mpmc_try_spin_cap8() {
    run_mpmc(mpmc::channel_with::<_, Spin>(8), Ops::Try);
}

#[test]
fn mpmc_blocking_spin_yield_cap1024() {
    run_mpmc(mpmc::channel_with::<_, SpinYield>(1024), Ops::Blocking);
}

// ---------------------------------------------------------------------------
// MP-SC multi-item insert: batches arrive whole, contiguous and in order.

/// Item `index` of batch `batch` (of `len` items) of producer `p`.
fn batch_item(p: usize, batch: usize, index: usize, len: usize) -> u64 {
    assert!(p < 1 << 4 && batch < 1 << 28 && index < 1 << 16 && len < 1 << 16);
    ((p as u64) << 60) | ((batch as u64) << 32) | ((index as u64) << 16) | len as u64
}

fn decode_batch_item(v: u64) -> (usize, usize, usize, usize) {
    (
        (v >> 60) as usize,
        ((v >> 32) & 0x0fff_ffff) as usize,
        ((v >> 16) & 0xffff) as usize,
        (v & 0xffff) as usize,
    )
}

/// xorshift64: batch sizes without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// `MULTI` producers push batches of 1..=cap items (`push_many`; producer 0
/// uses `try_push_many` in a retry loop) until `total` items are through; the
/// single consumer checks every batch arrives whole and each producer's
/// batches in order.
fn mpsc_batches(cap: usize) {
    let deadline = Instant::now() + DEADLINE;
    let total = scaled(TOTAL);
    let shares = shares(total, MULTI);
    let (tx, rx) = mpsc::channel::<u64>(cap);
    let producers: Vec<_> = clones(tx, MULTI)
        .into_iter()
        .zip(shares.clone())
        .enumerate()
        .map(|(p, (tx, n))| {
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (p as u64 + 1));
                let mut batch = Vec::with_capacity(cap);
                let (mut sent, mut batches) = (0, 0);
                while sent < n {
                    let len = (1 + rng.below(cap)).min(n - sent);
                    batch.extend((0..len).map(|i| batch_item(p, batches, i, len)));
                    if p == 0 {
                        let mut fails = 0;
                        while let Err(e) = tx.try_push_many(&mut batch) {
                            assert_eq!(e, BatchError::Full);
                            assert_eq!(batch.len(), len, "a failed batch push changed the batch");
                            backoff(&mut fails);
                        }
                    } else {
                        tx.push_many(&mut batch).expect("consumer is alive");
                    }
                    assert!(
                        batch.is_empty(),
                        "a successful batch push left items behind"
                    );
                    sent += len;
                    batches += 1;
                }
                batches
            })
        })
        .collect();

    let consumer = thread::spawn(move || {
        // (producer, batch, length, next index) of the batch being received.
        let mut open: Option<(usize, usize, usize, usize)> = None;
        let mut next_batch = [0usize; MULTI];
        let mut received = 0;
        while let Ok(v) = rx.pop() {
            let (p, b, i, len) = decode_batch_item(v);
            received += 1;
            match open {
                None => {
                    assert!(p < MULTI, "item {v:#x} was never pushed");
                    assert_eq!(i, 0, "producer {p} batch {b}: starts at index {i}");
                    assert_eq!(b, next_batch[p], "producer {p}: batch out of order or lost");
                    assert!((1..=cap).contains(&len), "batch length {len}");
                    next_batch[p] += 1;
                    if len > 1 {
                        open = Some((p, b, len, 1));
                    }
                }
                Some((op, ob, olen, oi)) => {
                    assert_eq!(
                        (p, b, len, i),
                        (op, ob, olen, oi),
                        "batch of producer {op} interrupted or reordered"
                    );
                    open = (oi + 1 < olen).then_some((op, ob, olen, oi + 1));
                }
            }
        }
        assert_eq!(open, None, "a batch was cut short");
        assert_eq!(received, total);
        next_batch
    });
    let next_batch = join_by(consumer, deadline, "consumer");
    for (p, t) in producers.into_iter().enumerate() {
        let batches = join_by(t, deadline, "producer");
        assert_eq!(next_batch[p], batches, "producer {p}: batches lost");
    }
}

#[test]
fn mpsc_batches_cap8() {
    mpsc_batches(8);
}

#[test]
fn mpsc_batches_cap1024() {
    mpsc_batches(1024);
}

#[test]
fn mpsc_try_push_many_errors() {
    let drops = counters(16);
    let tracked = |ids: std::ops::Range<usize>| -> Vec<Tracked> {
        ids.map(|id| Tracked::new(id, &drops)).collect()
    };
    let ids = |v: &[Tracked]| v.iter().map(|t| t.id).collect::<Vec<_>>();
    let (tx, rx) = mpsc::channel::<Tracked>(4);

    // An empty batch is a successful no-op, for both forms.
    let mut empty = Vec::new();
    assert_eq!(tx.try_push_many(&mut empty), Ok(()));
    assert_eq!(tx.push_many(&mut empty), Ok(()));
    assert!(rx.is_empty());

    // Too large: never fits, reported at once by both forms, batch untouched.
    let mut big = tracked(0..5);
    let too_large = Err(BatchError::TooLarge {
        len: 5,
        capacity: 4,
    });
    assert_eq!(tx.try_push_many(&mut big), too_large);
    assert_eq!(tx.push_many(&mut big), too_large);
    assert_eq!(ids(&big), [0, 1, 2, 3, 4]);
    drop(big);

    // Fits: the vec is emptied, its allocation kept.
    let mut a = tracked(5..8);
    assert_eq!(tx.try_push_many(&mut a), Ok(()));
    assert!(a.is_empty() && a.capacity() >= 3);
    assert_eq!(tx.len(), 3);

    // Full: nothing inserted, nothing dropped, the vec untouched.
    let mut b = tracked(8..10);
    assert_eq!(tx.try_push_many(&mut b), Err(BatchError::Full));
    assert_eq!(ids(&b), [8, 9]);
    assert_eq!(tx.len(), 3);
    // Too large wins over full.
    let mut c = tracked(10..15);
    assert_eq!(tx.try_push_many(&mut c), too_large);
    assert_eq!(ids(&c), [10, 11, 12, 13, 14]);
    drop(c);
    for id in 8..15 {
        assert_eq!(drops[id].load(SeqCst), usize::from(id >= 10), "item {id}");
    }

    // Room made: the same batch now fits exactly.
    assert_eq!(rx.try_pop().map(|t| t.id), Some(5));
    assert_eq!(tx.try_push_many(&mut b), Ok(()));
    assert!(b.is_empty());
    assert_eq!(tx.len(), 4);
    let mut one = tracked(15..16);
    assert_eq!(tx.try_push_many(&mut one), Err(BatchError::Full));
    assert_eq!(ids(&one), [15]);
    for want in [6, 7, 8, 9] {
        assert_eq!(rx.try_pop().map(|t| t.id), Some(want));
    }
    assert!(rx.try_pop().is_none());
    drop(one);
    drop((tx, rx));
    for (id, d) in drops.iter().enumerate() {
        assert_eq!(d.load(SeqCst), 1, "item {id}");
    }
}

// ---------------------------------------------------------------------------
// Disconnection.

/// Items pushed before the producers drop are all popped, then `pop` fails
/// (and keeps failing); dropping a producer that is not the last changes
/// nothing.
fn pop_after_producers_drop<K: Kind>(
    mut producers: Vec<Producer<u64, K>>,
    consumers: Vec<Consumer<u64, K>>,
) {
    for (i, tx) in producers.iter().enumerate() {
        tx.push(i as u64).unwrap();
    }
    let n = producers.len() as u64;
    while producers.len() > 1 {
        drop(producers.pop());
        assert!(consumers.iter().all(|rx| !rx.is_disconnected()));
    }
    assert_eq!(consumers[0].try_pop(), Some(0));
    drop(producers);
    for rx in &consumers {
        assert!(rx.is_disconnected());
    }
    for i in 1..n {
        assert_eq!(consumers[i as usize % consumers.len()].pop(), Ok(i));
    }
    for rx in &consumers {
        assert_eq!(rx.pop(), Err(Disconnected(())));
        assert_eq!(rx.pop(), Err(Disconnected(())));
        assert_eq!(rx.try_pop(), None);
    }
}

#[test]
fn spsc_pop_after_producer_drop() {
    let (tx, rx) = spsc::channel(4);
    pop_after_producers_drop(vec![tx], vec![rx]);
}

#[test]
fn mpsc_pop_after_producers_drop() {
    let (tx, rx) = mpsc::channel(4);
    pop_after_producers_drop(clones(tx, 3), vec![rx]);
}

#[test]
fn spmc_pop_after_producer_drop() {
    let (tx, rx) = spmc::channel(4);
    pop_after_producers_drop(vec![tx], clones(rx, 3));
}

#[test]
fn mpmc_pop_after_producers_drop() {
    let (tx, rx) = mpmc::channel(4);
    pop_after_producers_drop(clones(tx, 3), clones(rx, 3));
}

/// Consumers blocked in `pop` on an empty queue wake with `Disconnected` when
/// the last producer drops, and not before.
fn blocked_pop_wakes_on_disconnect<K: Kind>(
    mut producers: Vec<Producer<u64, K>>,
    consumers: Vec<Consumer<u64, K>>,
) {
    let waiters: Vec<_> = consumers
        .into_iter()
        .map(|rx| thread::spawn(move || rx.pop()))
        .collect();
    while producers.len() > 1 {
        drop(producers.pop());
    }
    thread::sleep(Duration::from_millis(50));
    let deadline = Instant::now() + DEADLINE;
    assert!(
        waiters.iter().all(|t| !t.is_finished()),
        "pop returned while a producer lives"
    );
    drop(producers);
    for t in waiters {
        assert_eq!(join_by(t, deadline, "consumer"), Err(Disconnected(())));
    }
}

#[test]
fn spsc_blocked_pop_wakes_on_disconnect() {
    let (tx, rx) = spsc::channel(4);
    blocked_pop_wakes_on_disconnect(vec![tx], vec![rx]);
}

#[test]
fn mpsc_blocked_pop_wakes_on_disconnect() {
    let (tx, rx) = mpsc::channel(4);
    blocked_pop_wakes_on_disconnect(clones(tx, 2), vec![rx]);
}

#[test]
fn spmc_blocked_pop_wakes_on_disconnect() {
    let (tx, rx) = spmc::channel(4);
    blocked_pop_wakes_on_disconnect(vec![tx], clones(rx, 2));
}

#[test]
fn mpmc_blocked_pop_wakes_on_disconnect() {
    let (tx, rx) = mpmc::channel(4);
    blocked_pop_wakes_on_disconnect(clones(tx, 2), clones(rx, 2));
}

/// Many short rounds: producer threads push 0..=3 items each and drop at
/// once, racing the consumers' `pop` (or `is_disconnected` + `try_pop`), which
/// must still deliver every item before reporting the disconnection.
fn last_items_before_drop<K: Kind>(
    make: impl Fn() -> (Vec<Producer<u64, K>>, Vec<Consumer<u64, K>>),
) {
    for round in 0..scaled(2_000) {
        let (producers, consumers) = make();
        let total = (round % 4) * producers.len();
        let ops = if round % 2 == 0 {
            Ops::Blocking
        } else {
            Ops::Try
        };
        stress(producers, consumers, total, ops);
    }
}

#[test]
fn spsc_last_items_before_drop_not_lost() {
    last_items_before_drop(|| {
        let (tx, rx) = spsc::channel(2);
        (vec![tx], vec![rx])
    });
}

#[test]
fn mpsc_last_items_before_drop_not_lost() {
    last_items_before_drop(|| {
        let (tx, rx) = mpsc::channel(2);
        (clones(tx, 2), vec![rx])
    });
}

#[test]
fn spmc_last_items_before_drop_not_lost() {
    last_items_before_drop(|| {
        let (tx, rx) = spmc::channel(2);
        (vec![tx], clones(rx, 2))
    });
}

#[test]
fn mpmc_last_items_before_drop_not_lost() {
    last_items_before_drop(|| {
        let (tx, rx) = mpmc::channel(2);
        (clones(tx, 2), clones(rx, 2))
    });
}

/// A producer blocked in `push` on a full queue gets its item back in
/// `Disconnected` once the last consumer drops, and not before.
fn blocked_push_gets_item_back<K: Kind, W: Wait + 'static>(
    tx: Producer<u64, K, W>,
    mut consumers: Vec<Consumer<u64, K, W>>,
) {
    let mut v = 0;
    while tx.try_push(v).is_ok() {
        v += 1;
    }
    assert_eq!(v as usize, tx.capacity());
    let pusher = thread::spawn(move || {
        let r = tx.push(1000);
        (r, tx.is_disconnected())
    });
    while consumers.len() > 1 {
        drop(consumers.pop());
    }
    thread::sleep(Duration::from_millis(50));
    assert!(
        !pusher.is_finished(),
        "push returned while a consumer lives"
    );
    drop(consumers);
    let deadline = Instant::now() + DEADLINE;
    let (r, disconnected) = join_by(pusher, deadline, "producer");
    assert_eq!(r, Err(Disconnected(1000)));
    assert!(disconnected);
}

#[test]
fn spsc_blocked_push_gets_item_back() {
    let (tx, rx) = spsc::channel(4);
    blocked_push_gets_item_back(tx, vec![rx]);
    let (tx, rx) = spsc::channel_with::<_, SpinYield>(1);
    blocked_push_gets_item_back(tx, vec![rx]);
}

#[test]
fn mpsc_blocked_push_gets_item_back() {
    let (tx, rx) = mpsc::channel(4);
    blocked_push_gets_item_back(tx, vec![rx]);
    let (tx, rx) = mpsc::channel_with::<_, SpinYield>(1);
    blocked_push_gets_item_back(tx, vec![rx]);
}

#[test]
fn spmc_blocked_push_gets_item_back() {
    let (tx, rx) = spmc::channel(4);
    blocked_push_gets_item_back(tx, clones(rx, 2));
    let (tx, rx) = spmc::channel_with::<_, SpinYield>(2);
    blocked_push_gets_item_back(tx, clones(rx, 2));
}

#[test]
fn mpmc_blocked_push_gets_item_back() {
    let (tx, rx) = mpmc::channel(4);
    blocked_push_gets_item_back(tx, clones(rx, 2));
    let (tx, rx) = mpmc::channel_with::<_, SpinYield>(2);
    blocked_push_gets_item_back(tx, clones(rx, 2));
}

#[test]
fn mpsc_blocked_push_many_gets_batch_back() {
    let (tx, rx) = mpsc::channel::<u64>(4);
    tx.push(0).unwrap();
    tx.push(1).unwrap();
    let tx2 = tx.clone();
    let pusher = thread::spawn(move || {
        let mut batch = vec![10, 11, 12];
        let r = tx2.push_many(&mut batch);
        (r, batch)
    });
    thread::sleep(Duration::from_millis(50));
    assert!(
        !pusher.is_finished(),
        "push_many returned while the consumer lives"
    );
    drop(rx);
    let deadline = Instant::now() + DEADLINE;
    let (r, batch) = join_by(pusher, deadline, "producer");
    assert_eq!(r, Err(BatchError::Disconnected));
    assert_eq!(batch, [10, 11, 12]);
    assert_eq!(tx.len(), 2);
}

// ---------------------------------------------------------------------------
// Leftover items are dropped exactly once, by the queue when its last handle
// goes.

/// An item that counts its drops in `drops[id]`.
#[derive(Debug)]
struct Tracked {
    id: usize,
    drops: Arc<[AtomicUsize]>,
}

impl Tracked {
    fn new(id: usize, drops: &Arc<[AtomicUsize]>) -> Self {
        Tracked {
            id,
            drops: drops.clone(),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops[self.id].fetch_add(1, SeqCst);
    }
}

fn counters(n: usize) -> Arc<[AtomicUsize]> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

type Handles<K> = (Vec<Producer<Tracked, K>>, Vec<Consumer<Tracked, K>>);

/// Single-threaded: wrap the ring around by `rotate` positions, leave `fill`
/// items in it, drop the handles in either order; each item must be dropped
/// exactly once, leftovers only when the last handle goes.
fn leftovers_dropped_once<K: Kind>(make: impl Fn(usize) -> Handles<K>) {
    for cap in [2, 8] {
        for rotate in 0..=2 * cap + 1 {
            for fill in 0..=cap {
                for producers_first in [false, true] {
                    let drops = counters(rotate + fill + 1);
                    let count = |id: usize| drops[id].load(SeqCst);
                    let (producers, consumers) = make(cap);
                    let mut next = 0;
                    for i in 0..rotate {
                        let tx = &producers[i % producers.len()];
                        tx.try_push(Tracked::new(next, &drops)).expect("room");
                        let got = consumers[i % consumers.len()].try_pop().expect("an item");
                        assert_eq!(got.id, next);
                        assert_eq!(count(next), 0);
                        drop(got);
                        next += 1;
                    }
                    for i in 0..fill {
                        let tx = &producers[i % producers.len()];
                        tx.try_push(Tracked::new(next, &drops)).expect("room");
                        next += 1;
                    }
                    if fill == cap {
                        let back = producers[0]
                            .try_push(Tracked::new(next, &drops))
                            .expect_err("queue is full");
                        assert_eq!(back.id, next);
                        assert_eq!(count(next), 0, "a refused item was dropped by the queue");
                        drop(back);
                        next += 1;
                    }
                    assert_eq!(consumers[0].len(), fill);
                    let leftovers = rotate..rotate + fill;
                    for id in 0..next {
                        let want = usize::from(!leftovers.contains(&id));
                        assert_eq!(
                            count(id),
                            want,
                            "cap {cap} rotate {rotate} fill {fill} id {id}"
                        );
                    }
                    if producers_first {
                        drop(producers);
                        assert!(leftovers.clone().all(|id| count(id) == 0));
                        drop(consumers);
                    } else {
                        drop(consumers);
                        assert!(leftovers.clone().all(|id| count(id) == 0));
                        drop(producers);
                    }
                    for id in 0..next {
                        assert_eq!(
                            count(id),
                            1,
                            "cap {cap} rotate {rotate} fill {fill} id {id}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn spsc_leftovers_dropped_once() {
    leftovers_dropped_once(|cap| {
        let (tx, rx) = spsc::channel(cap);
        (vec![tx], vec![rx])
    });
}

#[test]
fn mpsc_leftovers_dropped_once() {
    leftovers_dropped_once(|cap| {
        let (tx, rx) = mpsc::channel(cap);
        (clones(tx, 3), vec![rx])
    });
}

#[test]
fn spmc_leftovers_dropped_once() {
    leftovers_dropped_once(|cap| {
        let (tx, rx) = spmc::channel(cap);
        (vec![tx], clones(rx, 3))
    });
}

#[test]
fn mpmc_leftovers_dropped_once() {
    leftovers_dropped_once(|cap| {
        let (tx, rx) = mpmc::channel(cap);
        (clones(tx, 2), clones(rx, 3))
    });
}

/// Multi-threaded: producers push (blocking) until the consumers, having
/// taken half of the items between them, drop their handles; the queue is
/// full of leftovers then (after many wrap-arounds), and the last handle to
/// go, on whichever thread, must drop each of them exactly once.
fn leftovers_dropped_after_threads<K: Kind>((producers, consumers): Handles<K>) {
    let deadline = Instant::now() + DEADLINE;
    let per_producer = scaled(20_000);
    let drops = counters(producers.len() * per_producer);
    let quota = producers.len() * per_producer / 2 / consumers.len();
    let popping: Vec<_> = consumers
        .into_iter()
        .map(|rx| {
            thread::spawn(move || {
                for _ in 0..quota {
                    drop(rx.pop().expect("producers outlive the consumers"));
                }
            })
        })
        .collect();
    let pushing: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(p, tx)| {
            let drops = drops.clone();
            thread::spawn(move || {
                for seq in 0..per_producer {
                    let id = p * per_producer + seq;
                    if let Err(Disconnected(back)) = tx.push(Tracked::new(id, &drops)) {
                        assert_eq!(back.id, id);
                        drop(back);
                        return seq + 1; // items created
                    }
                }
                per_producer
            })
        })
        .collect();
    for t in popping {
        join_by(t, deadline, "consumer");
    }
    let created: Vec<usize> = pushing
        .into_iter()
        .map(|t| join_by(t, deadline, "producer"))
        .collect();
    for (p, &n) in created.iter().enumerate() {
        for seq in 0..per_producer {
            let id = p * per_producer + seq;
            let want = usize::from(seq < n);
            assert_eq!(
                drops[id].load(SeqCst),
                want,
                "producer {p} item {seq} (created {n})"
            );
        }
    }
}

#[test]
fn spsc_leftovers_dropped_after_threads() {
    for cap in [8, 64] {
        let (tx, rx) = spsc::channel(cap);
        leftovers_dropped_after_threads((vec![tx], vec![rx]));
    }
}

#[test]
fn mpsc_leftovers_dropped_after_threads() {
    for cap in [8, 64] {
        let (tx, rx) = mpsc::channel(cap);
        leftovers_dropped_after_threads((clones(tx, 2), vec![rx]));
    }
}

#[test]
fn spmc_leftovers_dropped_after_threads() {
    for cap in [8, 64] {
        let (tx, rx) = spmc::channel(cap);
        leftovers_dropped_after_threads((vec![tx], clones(rx, 2)));
    }
}

#[test]
fn mpmc_leftovers_dropped_after_threads() {
    for cap in [8, 64] {
        let (tx, rx) = mpmc::channel(cap);
        leftovers_dropped_after_threads((clones(tx, 2), clones(rx, 2)));
    }
}

/// A batch producer and a single-item producer both blocked on a full MP-SC
/// queue: one pop frees one slot, which the single push can use. Its wakeup
/// must not be swallowed by the batch producer, which still cannot fit and
/// goes back to sleep (a lost wakeup found in review).
#[test]
fn mpsc_single_push_not_starved_by_waiting_batch() {
    let (tx, rx) = mpsc::channel::<u64>(4);
    for i in 0..4 {
        tx.try_push(i).unwrap();
    }
    let batcher = tx.clone();
    let batch = thread::spawn(move || batcher.push_many(&mut vec![10, 11, 12, 13]));
    // Let the batch producer park first, so it is the one a lone wakeup finds.
    thread::sleep(Duration::from_millis(50));
    let single = thread::spawn(move || tx.push(99));
    thread::sleep(Duration::from_millis(50));
    assert_eq!(rx.pop(), Ok(0));
    let deadline = Instant::now() + DEADLINE;
    assert_eq!(join_by(single, deadline, "single push"), Ok(()));
    // Drain: the batch fits only once all four slots are free, so it comes
    // last, whole and in order.
    let got: Vec<u64> = (0..8).map(|_| rx.pop().unwrap()).collect();
    assert_eq!(join_by(batch, deadline, "batch push"), Ok(()));
    assert_eq!(got, [1, 2, 3, 99, 10, 11, 12, 13]);
}
