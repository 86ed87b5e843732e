//! The shared-memory queues under a hostile peer.
//!
//! `shm` promises that a peer which writes anything anywhere in the region at
//! any time can make this side read garbage items or get [`Corrupt`], but
//! never panic, read or write out of bounds, or loop without bound. These
//! tests hold it to that:
//!
//! - `hostile_*`: one thread operates both sides of a queue (every handle the
//!   kind allows, `try_push_many` for MP-SC) for a fixed number of calls
//!   while another stores random words anywhere in the region: header,
//!   `head`, `tail`, stamps and items. Every call must return, with one of
//!   the results the API documents, and nothing may panic (debug assertions
//!   and overflow checks on).
//! - targeted cases, one broken word at a time, with the exact error each
//!   one must give;
//! - peers that spin `head` or `tail` (and the matching stamps) forward for
//!   ever: the other side's calls must still return;
//! - `honest_*`: with no hostile writer, 100 000 items pass through every
//!   kind exactly once and in order.
//!
//! A watchdog aborts the process with a message if a test stops making
//! progress, so a hang is reported as a failure instead of stalling the run.
//! Under Miri the iteration counts are scaled down and the watchdog is off.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::thread;
use std::time::Duration;

use bytemuck::{Pod, Zeroable};
use ferry_queue::mpmc::{self, Mpmc};
use ferry_queue::mpsc::{self, Mpsc};
use ferry_queue::shm::{self, LAYOUT_VERSION, LayoutError, PushError, Region};
use ferry_queue::spmc::{self, Spmc};
use ferry_queue::spsc::{self, Spsc};
use ferry_queue::{Corrupt, Kind};

// The documented layout (`shm` module docs), in 8-byte words.
const W_VERSION: usize = 0;
const W_KIND: usize = 1;
const W_CAPACITY: usize = 2;
const W_ITEM_SIZE: usize = 3;
const W_HEAD: usize = 16;
const W_TAIL: usize = 32;
const W_SLOTS: usize = 48;

/// A 24-byte item whose three words are tied together, so a torn or
/// misplaced item shows.
#[derive(Pod, Zeroable, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Triple {
    a: u64,
    b: u64,
    c: u64,
}

/// Items the tests push: built from a sequence number, checkable on receipt.
trait Item: Pod + Send + Sync + PartialEq + std::fmt::Debug {
    fn make(n: u64) -> Self;
}

impl Item for u64 {
    fn make(n: u64) -> Self {
        n
    }
}

impl Item for Triple {
    fn make(n: u64) -> Self {
        Triple {
            a: n,
            b: !n,
            c: n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }
}

/// xorshift64*: small, fast, and good enough to pick words and values.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Scales an iteration count down under Miri.
const fn scaled(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

fn words_for<T: Pod>(capacity: usize) -> Vec<AtomicU64> {
    let n = shm::words_needed::<T>(capacity).expect("valid capacity");
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn stamp_word<T: Pod>(slot: usize) -> usize {
    W_SLOTS + slot * (1 + size_of::<T>().div_ceil(8))
}

/// Runs `f`, aborting the process with a message if it has not returned
/// after `secs` seconds (a hang is a failure, not a stalled run).
fn with_watchdog<R>(name: &str, secs: u64, f: impl FnOnce() -> R) -> R {
    if cfg!(miri) {
        return f();
    }
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let name = name.to_owned();
    let dog = thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            wait.recv_timeout(Duration::from_secs(secs))
        {
            eprintln!("watchdog: {name} did not finish within {secs} s: a call hangs");
            std::process::abort();
        }
    });
    let r = f();
    drop(done);
    dog.join().unwrap();
    r
}

/// What a kind's shared-memory form offers beyond push and pop, and how many
/// handles of each side it may have.
trait ShmKind: Kind + Sized {
    const PRODUCERS: usize;
    const CONSUMERS: usize;
    /// Seed offset, so the kinds do not replay one random sequence.
    const SEED: u64;

    /// `try_push_many`, for the kinds that have it.
    fn try_push_many<T: Pod>(
        _tx: &shm::Producer<'_, T, Self>,
        _items: &[T],
    ) -> Option<Result<(), PushError>> {
        None
    }
}

impl ShmKind for Spsc {
    const SEED: u64 = 1;
    const PRODUCERS: usize = 1;
    const CONSUMERS: usize = 1;
}

impl ShmKind for Mpsc {
    const SEED: u64 = 2;
    const PRODUCERS: usize = 2;
    const CONSUMERS: usize = 1;

    fn try_push_many<T: Pod>(
        tx: &shm::Producer<'_, T, Self>,
        items: &[T],
    ) -> Option<Result<(), PushError>> {
        Some(tx.try_push_many(items))
    }
}

impl ShmKind for Spmc {
    const SEED: u64 = 3;
    const PRODUCERS: usize = 1;
    const CONSUMERS: usize = 2;
}

impl ShmKind for Mpmc {
    const SEED: u64 = 4;
    const PRODUCERS: usize = 2;
    const CONSUMERS: usize = 2;
}

type Handles<'r, T, K> = (Vec<shm::Producer<'r, T, K>>, Vec<shm::Consumer<'r, T, K>>);

/// Lays out a fresh queue and attaches every handle the kind allows. The
/// hostile writer may be running, so this may fail with any [`LayoutError`]
/// (which is itself a correct answer); the caller tries again later.
fn fresh<'r, T: Pod, K: ShmKind>(
    region: Region<'r>,
    capacity: usize,
) -> Result<Handles<'r, T, K>, LayoutError> {
    shm::init::<T, K>(region, capacity)?;
    let producers = (0..K::PRODUCERS)
        .map(|_| shm::Producer::<T, K>::attach(region))
        .collect::<Result<Vec<_>, _>>()?;
    let consumers = (0..K::CONSUMERS)
        .map(|_| shm::Consumer::<T, K>::attach(region))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((producers, consumers))
}

/// Tallies of what the operating thread saw, printed with `--nocapture`.
#[derive(Debug, Default)]
struct Tally {
    pushed: u64,
    full: u64,
    push_corrupt: u64,
    popped: u64,
    empty: u64,
    pop_corrupt: u64,
    batches: u64,
    too_large: u64,
    len_corrupt: u64,
    attach_errors: u64,
}

/// Stores random values to random words of `words` until `stop`, pausing a
/// random few spins between stores. Biased towards the words the protocols
/// read (header, `head`, `tail`, stamps) and towards plausible values (near
/// the current one, small, or extreme), which reach deeper than pure noise.
fn scribble<T: Pod>(words: &[AtomicU64], capacity: usize, stop: &AtomicBool, seed: u64) {
    let mut rng = XorShift::new(seed);
    let hot = [W_VERSION, W_KIND, W_CAPACITY, W_ITEM_SIZE, W_HEAD, W_TAIL];
    while !stop.load(Relaxed) {
        let index = match rng.below(4) {
            0 => hot[rng.below(hot.len())],
            1 => stamp_word::<T>(rng.below(capacity)),
            _ => rng.below(words.len()),
        };
        let current = words[index].load(Relaxed);
        let value = match rng.below(4) {
            0 => rng.next(),
            1 => current.wrapping_add(rng.next() % 9).wrapping_sub(4),
            2 => rng.next() % (4 * capacity as u64 + 4),
            _ => [
                0,
                1,
                u64::MAX,
                1 << 63,
                capacity as u64,
                current.wrapping_neg(),
            ][rng.below(6)],
        };
        words[index].store(value, Relaxed);
        for _ in 0..rng.below(64) {
            std::hint::spin_loop();
        }
    }
}

/// One hostile run: `ops` calls on every handle of a queue of kind `K` with
/// `capacity` slots of `T`, while another thread scribbles on the region.
fn hostile_run<T: Item, K: ShmKind>(capacity: usize, ops: usize, seed: u64) -> Tally {
    let words = words_for::<T>(capacity);
    let region = Region::new(&words);
    let mut tally = Tally::default();
    // Attach before the writer starts, so the run starts from a sound queue.
    let (mut txs, mut rxs) = fresh::<T, K>(region, capacity).expect("clean region");
    // What each handle was attached with. The writer may change the header's
    // capacity between `init` and `attach` to a smaller power of two that
    // still fits, which a handle then accepts; it must never change after.
    let caps_of = |txs: &[shm::Producer<'_, T, K>], rxs: &[shm::Consumer<'_, T, K>]| {
        let caps: Vec<usize> = txs.iter().map(|t| t.capacity()).collect();
        (caps, rxs.iter().map(|r| r.capacity()).collect::<Vec<_>>())
    };
    let (mut tx_caps, mut rx_caps) = caps_of(&txs, &rxs);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let words = &words;
        let stop_ref = &stop;
        s.spawn(move || scribble::<T>(words, capacity, stop_ref, seed ^ 0xA5A5));
        // Stops the writer however this thread leaves the scope, so a failed
        // assertion fails the test instead of leaving the scope waiting.
        let _stop = StopOnDrop(&stop);
        let mut rng = XorShift::new(seed);
        let mut n = 0u64;
        let mut batch = Vec::with_capacity(capacity + 1);
        for _ in 0..ops {
            match rng.below(100) {
                0..40 => {
                    let tx = &txs[rng.below(txs.len())];
                    n += 1;
                    match tx.try_push(T::make(n)) {
                        Ok(()) => tally.pushed += 1,
                        Err(PushError::Full) => tally.full += 1,
                        Err(PushError::Corrupt) => tally.push_corrupt += 1,
                        Err(e @ PushError::TooLarge { .. }) => panic!("single push: {e:?}"),
                    }
                }
                40..80 => match rxs[rng.below(rxs.len())].try_pop() {
                    Ok(Some(_garbage_or_not)) => tally.popped += 1,
                    Ok(None) => tally.empty += 1,
                    Err(Corrupt) => tally.pop_corrupt += 1,
                },
                80..90 => {
                    let len = rng.below(capacity + 2);
                    batch.clear();
                    batch.extend((0..len as u64).map(|i| T::make(n + i)));
                    n += len as u64;
                    let tx = &txs[rng.below(txs.len())];
                    let Some(result) = K::try_push_many(tx, &batch) else {
                        continue;
                    };
                    tally.batches += 1;
                    let cap = tx.capacity();
                    match result {
                        Err(PushError::TooLarge {
                            len: l,
                            capacity: c,
                        }) => {
                            assert!(len > cap, "batch of {len} fits in {cap}");
                            assert_eq!((l, c), (len, cap));
                            tally.too_large += 1;
                        }
                        _ if len > cap => panic!("batch of {len} > {cap}: {result:?}"),
                        _ if len == 0 => assert_eq!(result, Ok(())),
                        Ok(()) => tally.pushed += len as u64,
                        Err(PushError::Full) => tally.full += 1,
                        Err(PushError::Corrupt) => tally.push_corrupt += 1,
                    }
                }
                90..99 => {
                    let (len, cap) = if rng.below(2) == 0 {
                        (txs[0].len(), txs[0].capacity())
                    } else {
                        (rxs[0].len(), rxs[0].capacity())
                    };
                    match len {
                        Ok(len) => assert!(len <= cap, "len {len} > capacity {cap}"),
                        Err(Corrupt) => tally.len_corrupt += 1,
                    }
                    assert_eq!(
                        caps_of(&txs, &rxs),
                        (tx_caps.clone(), rx_caps.clone()),
                        "capacity is kept locally"
                    );
                    assert!(
                        tx_caps
                            .iter()
                            .chain(&rx_caps)
                            .all(|&c| c.is_power_of_two() && c <= capacity)
                    );
                }
                _ => {
                    // Start over from a sound queue now and then, so the run
                    // also covers states a few bad words away from sound.
                    if rng.below(10) == 0 {
                        match fresh::<T, K>(region, capacity) {
                            Ok((t, r)) => {
                                (txs, rxs) = (t, r);
                                (tx_caps, rx_caps) = caps_of(&txs, &rxs);
                            }
                            Err(_) => tally.attach_errors += 1,
                        }
                    }
                }
            }
        }
    });
    tally
}

/// Sets the flag if dropped while its thread panics.
struct FlagOnPanic<'a>(&'a AtomicBool);

impl Drop for FlagOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.store(true, Relaxed);
        }
    }
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

fn hostile_kind<K: ShmKind>(name: &str) {
    let ops = scaled(40_000, 300);
    let caps: &[usize] = if cfg!(miri) { &[4] } else { &[4, 64] };
    with_watchdog(name, 120, || {
        for (i, &cap) in caps.iter().enumerate() {
            let seed = 0x5EED_0000 + K::SEED * 16 + i as u64;
            let t = hostile_run::<u64, K>(cap, ops, seed);
            eprintln!("{name} u64 cap {cap}: {t:?}");
            let t = hostile_run::<Triple, K>(cap, ops, seed ^ 0xFF);
            eprintln!("{name} Triple cap {cap}: {t:?}");
        }
    });
}

#[test]
fn hostile_spsc() {
    hostile_kind::<Spsc>("hostile_spsc");
}

#[test]
fn hostile_mpsc() {
    hostile_kind::<Mpsc>("hostile_mpsc");
}

#[test]
fn hostile_spmc() {
    hostile_kind::<Spmc>("hostile_spmc");
}

#[test]
fn hostile_mpmc() {
    hostile_kind::<Mpmc>("hostile_mpmc");
}

// ---------------------------------------------------------------------------
// Targeted cases: one broken word at a time, each with its exact error.

#[test]
fn spsc_head_far_ahead_is_corrupt() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Spsc>(region, 4).unwrap();
    let tx = spsc::ShmProducer::<u64>::attach(region).unwrap();
    let rx = spsc::ShmConsumer::<u64>::attach(region).unwrap();
    tx.try_push(1).unwrap();
    assert_eq!(rx.try_pop(), Ok(Some(1)));

    words[W_HEAD].store(1_000, Relaxed);
    assert_eq!(rx.try_pop(), Err(Corrupt), "head 999 ahead of tail");
    assert_eq!(rx.try_pop(), Err(Corrupt), "and it stays corrupt");
    assert_eq!(rx.len(), Err(Corrupt));
    assert_eq!(tx.is_empty(), Err(Corrupt));
    assert_eq!(
        spsc::ShmConsumer::<u64>::attach(region).unwrap_err(),
        LayoutError::Corrupt
    );
    assert_eq!(
        spsc::ShmProducer::<u64>::attach(region).unwrap_err(),
        LayoutError::Corrupt
    );

    // Head *behind* tail wraps to a huge distance: corrupt too.
    words[W_HEAD].store(0, Relaxed);
    words[W_TAIL].store(7, Relaxed);
    assert_eq!(
        spsc::ShmConsumer::<u64>::attach(region).unwrap_err(),
        LayoutError::Corrupt
    );
}

#[test]
fn spsc_producer_sees_tail_moved_behind() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Spsc>(region, 4).unwrap();
    let tx = spsc::ShmProducer::<u64>::attach(region).unwrap();
    // The peer moves `tail` back by more than a lap: the producer trusts its
    // cached copy until the cache says full, then must notice.
    words[W_TAIL].store(u64::MAX - 10, Relaxed);
    for i in 0..4 {
        assert_eq!(tx.try_push(i), Ok(()));
    }
    assert_eq!(tx.try_push(4), Err(PushError::Corrupt));
    assert_eq!(tx.try_push(5), Err(PushError::Corrupt));
}

#[test]
fn mpsc_head_far_ahead_is_corrupt() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpsc>(region, 4).unwrap();
    let tx = mpsc::ShmProducer::<u64>::attach(region).unwrap();
    words[W_HEAD].store(1 << 40, Relaxed);
    // The claim re-reads `head` (it may just be stale) until its retries run out.
    assert_eq!(tx.try_push(1), Err(PushError::Corrupt));
    assert_eq!(tx.try_push_many(&[1, 2]), Err(PushError::Corrupt));
    assert_eq!(
        tx.try_push_many(&[0; 5]),
        Err(PushError::TooLarge {
            len: 5,
            capacity: 4
        })
    );
    assert_eq!(
        mpsc::ShmConsumer::<u64>::attach(region).unwrap_err(),
        LayoutError::Corrupt
    );
}

#[test]
fn mpsc_flag_set_without_item_gives_an_item_not_a_crash() {
    let words = words_for::<Triple>(4);
    let region = Region::new(&words);
    shm::init::<Triple, Mpsc>(region, 4).unwrap();
    let rx = mpsc::ShmConsumer::<Triple>::attach(region).unwrap();
    // A peer sets the valid flag of position 0 (`2·0 + 1`) with garbage in
    // the slot: the consumer reads the garbage (documented), and moves on.
    words[stamp_word::<Triple>(0)].store(1, Relaxed);
    words[stamp_word::<Triple>(0) + 1].store(7, Relaxed);
    let got = rx.try_pop().unwrap().unwrap();
    assert_eq!(got.a, 7);
    assert_eq!(rx.try_pop(), Ok(None));
}

#[test]
fn multi_consumer_stamp_ahead_is_corrupt() {
    fn check<K: ShmKind>() {
        let words = words_for::<u64>(4);
        let region = Region::new(&words);
        shm::init::<u64, K>(region, 4).unwrap();
        let rx = shm::Consumer::<u64, K>::attach(region).unwrap();
        // Slot 0's stamp claims a later lap than `tail`: "another consumer
        // took it", over and over, until the retries run out.
        words[stamp_word::<u64>(0)].store(9, Relaxed);
        assert_eq!(rx.try_pop(), Err(Corrupt));
        // A stamp of an earlier lap just reads as empty.
        words[stamp_word::<u64>(0)].store(0, Relaxed);
        assert_eq!(rx.try_pop(), Ok(None));
    }
    check::<Spmc>();
    check::<Mpmc>();
}

#[test]
fn mpmc_producer_stamp_ahead_is_corrupt() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpmc>(region, 4).unwrap();
    let tx = mpmc::ShmProducer::<u64>::attach(region).unwrap();
    words[stamp_word::<u64>(0)].store(100, Relaxed);
    assert_eq!(tx.try_push(1), Err(PushError::Corrupt));
    // Behind: the slot looks full.
    words[stamp_word::<u64>(0)].store(u64::MAX, Relaxed);
    assert_eq!(tx.try_push(1), Err(PushError::Full));
}

#[test]
fn garbage_version_word() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    // Never initialised.
    assert_eq!(
        spsc::ShmProducer::<u64>::attach(region).unwrap_err(),
        LayoutError::Version { found: 0 }
    );
    shm::init::<u64, Spsc>(region, 4).unwrap();
    let good = words[W_VERSION].load(Relaxed);
    assert_eq!(good & 0xFFFF_FFFF, LAYOUT_VERSION);
    for bad in [0xDEAD_BEEF, good + 1, good ^ (1 << 40), u64::MAX] {
        words[W_VERSION].store(bad, Relaxed);
        assert_eq!(
            spsc::ShmProducer::<u64>::attach(region).unwrap_err(),
            LayoutError::Version { found: bad }
        );
        assert_eq!(
            spsc::ShmConsumer::<u64>::attach(region).unwrap_err(),
            LayoutError::Version { found: bad }
        );
    }
    words[W_VERSION].store(good, Relaxed);
    assert!(spsc::ShmConsumer::<u64>::attach(region).is_ok());
}

#[test]
fn wrong_kind() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Spsc>(region, 4).unwrap();
    assert_eq!(
        mpmc::ShmProducer::<u64>::attach(region).unwrap_err(),
        LayoutError::WrongKind {
            found: 1,
            expected: 4
        }
    );
    assert_eq!(
        spmc::ShmConsumer::<u64>::attach(region).unwrap_err(),
        LayoutError::WrongKind {
            found: 1,
            expected: 3
        }
    );
    words[W_KIND].store(77, Relaxed);
    assert_eq!(
        spsc::ShmConsumer::<u64>::attach(region).unwrap_err(),
        LayoutError::WrongKind {
            found: 77,
            expected: 1
        }
    );
}

#[test]
fn wrong_item_size() {
    let words = words_for::<Triple>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpsc>(region, 4).unwrap();
    assert_eq!(
        mpsc::ShmConsumer::<Triple>::attach(region).unwrap_err(),
        LayoutError::WrongItemSize {
            found: 8,
            expected: 24
        }
    );
    shm::init::<Triple, Mpsc>(region, 4).unwrap();
    assert_eq!(
        mpsc::ShmProducer::<u32>::attach(region).unwrap_err(),
        LayoutError::WrongItemSize {
            found: 24,
            expected: 4
        }
    );
    words[W_ITEM_SIZE].store(u64::MAX, Relaxed);
    assert_eq!(
        mpsc::ShmProducer::<Triple>::attach(region).unwrap_err(),
        LayoutError::WrongItemSize {
            found: u64::MAX,
            expected: 24
        }
    );
}

#[test]
fn region_too_small() {
    let needed = shm::words_needed::<Triple>(8).unwrap();
    assert_eq!(shm::bytes_needed::<Triple>(8), Ok(needed * 8));
    let words = words_for::<Triple>(8);
    let short = Region::new(&words[..needed - 1]);
    assert_eq!(
        shm::init::<Triple, Spmc>(short, 8),
        Err(LayoutError::TooSmall {
            needed: needed * 8,
            got: (needed - 1) * 8
        })
    );
    // A sound queue in a region that is then seen through a shorter window
    // (the peer's mapping is smaller, or the header's capacity grew).
    shm::init::<Triple, Spmc>(Region::new(&words), 8).unwrap();
    assert_eq!(
        spmc::ShmConsumer::<Triple>::attach(short).unwrap_err(),
        LayoutError::TooSmall {
            needed: needed * 8,
            got: (needed - 1) * 8
        }
    );
    words[W_CAPACITY].store(16, Relaxed);
    assert_eq!(
        spmc::ShmProducer::<Triple>::attach(Region::new(&words)).unwrap_err(),
        LayoutError::TooSmall {
            needed: shm::bytes_needed::<Triple>(16).unwrap(),
            got: needed * 8
        }
    );
    // Shorter than the header itself.
    assert_eq!(
        spmc::ShmProducer::<Triple>::attach(Region::new(&words[..10])).unwrap_err(),
        LayoutError::TooSmall {
            needed: W_SLOTS * 8,
            got: 80
        }
    );
    assert_eq!(
        spmc::ShmProducer::<Triple>::attach(Region::new(&[])).unwrap_err(),
        LayoutError::TooSmall {
            needed: W_SLOTS * 8,
            got: 0
        }
    );
}

#[test]
fn region_from_raw_alignment() {
    let words = words_for::<u64>(4);
    let base = words.as_ptr().cast::<u8>().cast_mut();
    let len = words.len() * 8;
    // SAFETY: `base..base + len` is the live allocation of `words`, which
    // outlives the region and is only ever accessed through atomics.
    let region = unsafe { Region::from_raw(base, len) }.unwrap();
    assert_eq!(region.len_bytes(), len);
    shm::init::<u64, Spsc>(region, 4).unwrap();
    assert!(spsc::ShmProducer::<u64>::attach(region).is_ok());
    // SAFETY: as above; trailing bytes short of a word are ignored.
    let region = unsafe { Region::from_raw(base, len - 3) }.unwrap();
    assert_eq!(region.len_bytes(), len - 8);
    for offset in 1..8 {
        // SAFETY: `from_raw` rejects the misaligned pointer before touching
        // it; the bytes are inside the allocation of `words` anyway.
        let r = unsafe { Region::from_raw(base.wrapping_add(offset), len - 8) };
        assert_eq!(r.unwrap_err(), LayoutError::Misaligned, "offset {offset}");
    }
}

#[test]
fn bad_capacity() {
    for cap in [0, 3, 6, 100, (1 << 32) + 1, 1 << 33] {
        assert_eq!(
            shm::words_needed::<u64>(cap),
            Err(LayoutError::BadCapacity(cap as u64))
        );
        assert_eq!(
            shm::bytes_needed::<u64>(cap),
            Err(LayoutError::BadCapacity(cap as u64))
        );
    }
    let words = words_for::<u64>(8);
    let region = Region::new(&words);
    assert_eq!(
        shm::init::<u64, Mpmc>(region, 5),
        Err(LayoutError::BadCapacity(5))
    );
    shm::init::<u64, Mpmc>(region, 8).unwrap();
    for bad in [0, 3, 5, 7, 1 << 33, (1 << 32) + 1, 1 << 63, u64::MAX] {
        words[W_CAPACITY].store(bad, Relaxed);
        assert_eq!(
            mpmc::ShmConsumer::<u64>::attach(region).unwrap_err(),
            LayoutError::BadCapacity(bad),
            "capacity word {bad}"
        );
    }
    // A smaller power of two still fits: attaching with it is sound.
    words[W_CAPACITY].store(2, Relaxed);
    let rx = mpmc::ShmConsumer::<u64>::attach(region).unwrap();
    assert_eq!(rx.capacity(), 2);
}

/// Errors print something useful.
#[test]
fn error_messages() {
    let errors: [&dyn std::error::Error; 4] = [
        &LayoutError::Version { found: 0 },
        &LayoutError::TooSmall { needed: 8, got: 0 },
        &PushError::Corrupt,
        &Corrupt,
    ];
    for e in errors {
        assert!(!e.to_string().is_empty());
    }
}

// ---------------------------------------------------------------------------
// Peers that spin a shared word for ever.

/// Runs `calls` calls of `op` while a peer runs `peer` in a loop; returns how
/// many calls gave each answer. Each call must return.
fn against_spinning_peer<R: std::fmt::Debug + PartialEq>(
    name: &str,
    calls: usize,
    peer: impl Fn(&mut XorShift) + Sync,
    mut op: impl FnMut() -> R,
) -> Vec<(R, usize)> {
    let stop = AtomicBool::new(false);
    let mut seen: Vec<(R, usize)> = Vec::new();
    with_watchdog(name, 120, || {
        thread::scope(|s| {
            s.spawn(|| {
                let mut rng = XorShift::new(0xBAD);
                while !stop.load(Relaxed) {
                    peer(&mut rng);
                }
            });
            let _stop = StopOnDrop(&stop);
            for _ in 0..calls {
                let r = op();
                match seen.iter_mut().find(|(x, _)| *x == r) {
                    Some((_, n)) => *n += 1,
                    None => seen.push((r, 1)),
                }
            }
        });
    });
    eprintln!("{name}: {seen:?}");
    seen
}

#[test]
fn mpmc_push_returns_while_peer_spins_head() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpmc>(region, 4).unwrap();
    let tx = mpmc::ShmProducer::<u64>::attach(region).unwrap();
    let head = &words[W_HEAD];
    // Get well past the first lap, so no slot's stamp can match `head` by luck.
    head.store(1_000, Relaxed);
    let seen = against_spinning_peer(
        "mpmc head spinner",
        scaled(2_000, 20),
        |_| {
            head.fetch_add(1, Relaxed);
        },
        || tx.try_push(5),
    );
    for (r, _) in &seen {
        assert!(
            matches!(r, Err(PushError::Full | PushError::Corrupt)),
            "{r:?}"
        );
    }
}

#[test]
fn mpmc_push_returns_while_peer_spins_head_and_stamps() {
    // A nastier peer: it keeps moving `head` and makes the stamp at the new
    // `head` match, so the producer always sees a free slot and then loses
    // the CAS. It must give up (Corrupt) or win a slot (Ok), never spin on.
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpmc>(region, 4).unwrap();
    let tx = mpmc::ShmProducer::<u64>::attach(region).unwrap();
    let seen = against_spinning_peer(
        "mpmc head+stamp spinner",
        scaled(500, 5),
        |rng| {
            let h = words[W_HEAD].load(Relaxed).wrapping_add(1 + rng.next() % 3);
            words[stamp_word::<u64>((h % 4) as usize)].store(h, Relaxed);
            words[W_HEAD].store(h, Relaxed);
        },
        || tx.try_push(5),
    );
    for (r, _) in &seen {
        assert!(
            matches!(r, Ok(()) | Err(PushError::Full | PushError::Corrupt)),
            "{r:?}"
        );
    }
}

#[test]
fn multi_consumer_pop_returns_while_peer_spins_tail_and_stamps() {
    fn check<K: ShmKind>(name: &str) {
        let words = words_for::<u64>(4);
        let region = Region::new(&words);
        shm::init::<u64, K>(region, 4).unwrap();
        let rx = shm::Consumer::<u64, K>::attach(region).unwrap();
        let seen = against_spinning_peer(
            name,
            scaled(500, 5),
            |rng| {
                let t = words[W_TAIL].load(Relaxed).wrapping_add(1 + rng.next() % 3);
                words[stamp_word::<u64>((t % 4) as usize)].store(t.wrapping_add(1), Relaxed);
                words[W_TAIL].store(t, Relaxed);
            },
            || rx.try_pop().map(|item| item.is_some()),
        );
        assert!(!seen.is_empty());
    }
    check::<Spmc>("spmc tail+stamp spinner");
    check::<Mpmc>("mpmc tail+stamp spinner");
}

#[test]
fn mpsc_push_returns_while_peer_spins_head_and_tail() {
    let words = words_for::<u64>(4);
    let region = Region::new(&words);
    shm::init::<u64, Mpsc>(region, 4).unwrap();
    let tx = mpsc::ShmProducer::<u64>::attach(region).unwrap();
    // `head` keeps moving and `tail` keeps up with it: the queue always looks
    // nearly empty, and every CAS on `head` loses.
    let seen = against_spinning_peer(
        "mpsc head+tail spinner",
        scaled(500, 5),
        |rng| {
            let h = words[W_HEAD].load(Relaxed).wrapping_add(1 + rng.next() % 3);
            words[W_HEAD].store(h, Relaxed);
            words[W_TAIL].store(h.wrapping_sub(1), Relaxed);
        },
        || (tx.try_push(5), tx.try_push_many(&[1, 2])),
    );
    for ((one, many), _) in &seen {
        for r in [one, many] {
            assert!(
                matches!(r, Ok(()) | Err(PushError::Full | PushError::Corrupt)),
                "{r:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Honest peers: every item exactly once, in order.

fn honest<T: Item, K: ShmKind>(capacity: usize, items: u64) {
    let words = words_for::<T>(capacity);
    let region = Region::new(&words);
    shm::init::<T, K>(region, capacity).unwrap();
    let tx = shm::Producer::<T, K>::attach(region).unwrap();
    let rx = shm::Consumer::<T, K>::attach(region).unwrap();
    // Set if either side panics, so the other stops waiting for it.
    let failed = AtomicBool::new(false);
    thread::scope(|s| {
        let failed = &failed;
        s.spawn(move || {
            let _flag = FlagOnPanic(failed);
            let mut rng = XorShift::new(items ^ capacity as u64);
            let mut next = 0u64;
            let mut batch = Vec::new();
            while next < items && !failed.load(Relaxed) {
                // MP-SC: every third step, a batch of 1..=capacity items.
                let want = rng.below(capacity) as u64 + 1;
                batch.clear();
                batch.extend((next..(next + want).min(items)).map(T::make));
                let result = match rng.below(3) {
                    0 => K::try_push_many(&tx, &batch).map(|r| r.map(|()| batch.len())),
                    _ => None,
                }
                .unwrap_or_else(|| tx.try_push(T::make(next)).map(|()| 1));
                match result {
                    Ok(n) => next += n as u64,
                    Err(PushError::Full) => thread::yield_now(),
                    Err(e) => panic!("honest push: {e:?}"),
                }
            }
        });
        let _flag = FlagOnPanic(failed);
        let mut expect = 0u64;
        while expect < items {
            assert!(!failed.load(Relaxed), "the producer panicked");
            match rx.try_pop() {
                Ok(Some(item)) => {
                    assert_eq!(item, T::make(expect));
                    expect += 1;
                }
                Ok(None) => thread::yield_now(),
                Err(Corrupt) => panic!("honest pop: corrupt at item {expect}"),
            }
        }
        assert_eq!(rx.try_pop(), Ok(None));
    });
    assert_eq!(rx.len(), Ok(0));
}

fn honest_kind<K: ShmKind>(name: &str) {
    let items = scaled(100_000, 200) as u64;
    with_watchdog(name, 120, || {
        honest::<u64, K>(4, items);
        honest::<Triple, K>(64, items);
    });
}

#[test]
fn honest_spsc() {
    honest_kind::<Spsc>("honest_spsc");
}

#[test]
fn honest_mpsc() {
    honest_kind::<Mpsc>("honest_mpsc");
}

#[test]
fn honest_spmc() {
    honest_kind::<Spmc>("honest_spmc");
}

#[test]
fn honest_mpmc() {
    honest_kind::<Mpmc>("honest_mpmc");
}
