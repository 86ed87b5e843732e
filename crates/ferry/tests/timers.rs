//! Timers at scale and timers taken out: many threads each sleep until a
//! random deadline 1–100 ms away and record when they woke; a sleeper that
//! is terminated, and an rpc deadline whose reply came, leave the wheel at
//! once.
//!
//! Nothing here asserts a duration: a woken sleeper's clock reading is at
//! or after its deadline (exact: the wheel rounds deadlines up to their
//! tick and the clock down), every sleeper wakes (a count), and the wheel
//! is empty afterwards (a count). How late the sleepers woke is printed
//! as a distribution, for the record.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use ferry::Handle;
use ferry::rpc::{CallOptions, Client, Fault, RuntimeDir, Server};
use ferry::sync::Barrier;
use ferry::thread::{Suspension, TIMER_TICK};

mod common;
use common::WATCHDOG;

/// A sleeper's record before it woke.
const NOT_WOKEN: u64 = u64::MAX;
/// A sleeper's record if it woke before its deadline.
const EARLY: u64 = u64::MAX - 1;

/// The delay of sleeper `i`: 1 to 100 ms, from a fixed pseudo-random
/// sequence (splitmix64), so that a failure can be rerun.
fn delay(i: u64) -> Duration {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    Duration::from_micros(1_000 + z % 99_001)
}

/// Spawns `n` sleepers on `processors` processors; each sleeps until its
/// deadline and records how late it woke. Checks that every one woke, none
/// before its deadline, and that no timer is left armed; prints how late.
fn sleepers(n: usize, processors: usize) {
    let late: Vec<u64> = common::within(WATCHDOG * 10, "a sleeper never woke", move || {
        let mut b = ferry::Runtime::builder();
        b.processors(processors);
        b.run(move || {
            let woke: Arc<Vec<AtomicU64>> =
                Arc::new((0..n).map(|_| AtomicU64::new(NOT_WOKEN)).collect());
            // Every sleeper is spawned and waits at the gate first, so
            // that the sleeps overlap and a woken sleeper does not
            // queue behind sleepers that have not run yet.
            let gate = Arc::new(Barrier::new(n + 1));
            let start = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|i| {
                    let woke = Arc::clone(&woke);
                    let gate = Arc::clone(&gate);
                    ferry::spawn(move || {
                        gate.wait();
                        let due = Instant::now() + delay(i as u64);
                        ferry::thread::sleep_until(due);
                        let now = Instant::now();
                        let rec = match now.checked_duration_since(due) {
                            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(EARLY - 1),
                            None => EARLY,
                        };
                        woke[i].store(rec, Relaxed);
                    })
                })
                .collect();
            let spawned = start.elapsed();
            gate.wait();
            for h in hs {
                h.join().unwrap();
            }
            eprintln!(
                "{n} sleepers on {processors} processors: spawned in {spawned:?}, all done in {:?}",
                start.elapsed()
            );
            let stats = Handle::current().upcall_stats();
            eprintln!(
                "unannounced blocks {}, stand-in takeovers {}, preempted {}",
                stats.unannounced_blocks, stats.stand_in_takeovers, stats.preempted.count
            );
            assert_eq!(Handle::current().armed_timers(), 0, "a timer left armed");
            woke.iter().map(|w| w.load(Relaxed)).collect()
        })
        .unwrap()
    });
    let never = late.iter().filter(|&&l| l == NOT_WOKEN).count();
    let early = late.iter().filter(|&&l| l == EARLY).count();
    assert_eq!(never, 0, "{never} of {n} sleepers recorded no wake");
    assert_eq!(
        early, 0,
        "{early} of {n} sleepers woke before their deadline"
    );
    // For the record: how late, in buckets.
    let tick = u64::try_from(TIMER_TICK.as_nanos()).unwrap();
    let bounds = [
        ("<= 1 tick", tick),
        ("<= 1 ms", 1_000_000),
        ("<= 10 ms", 10_000_000),
        ("<= 100 ms", 100_000_000),
        ("> 100 ms", u64::MAX),
    ];
    let mut counts = [0usize; 5];
    for &l in &late {
        let b = bounds.iter().position(|&(_, b)| l <= b).unwrap();
        counts[b] += 1;
    }
    let mut sorted = late;
    sorted.sort_unstable();
    let q = |p: usize| Duration::from_nanos(sorted[(sorted.len() - 1) * p / 100]);
    eprintln!(
        "lateness: p50 {:?}, p99 {:?}, max {:?}; {}",
        q(50),
        q(99),
        q(100),
        bounds
            .iter()
            .zip(counts)
            .map(|((name, _), c)| format!("{name}: {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(counts.iter().sum::<usize>(), n);
}

/// The size a debug build runs in a few seconds on two cores.
#[test]
fn twenty_thousand_sleepers_all_wake_none_before_its_deadline() {
    sleepers(20_000, 2);
}

/// One processor: firing and running the woken share one core.
#[test]
fn sleepers_on_one_processor_all_wake_none_before_its_deadline() {
    sleepers(5_000, 1);
}

/// The full size: a million sleepers (about 5 KB resident each, plus the
/// reservation of their stacks). Run with `--ignored`, in release.
#[test]
#[ignore = "a million threads: run with --release -- --ignored"]
fn a_million_sleepers_all_wake_none_before_its_deadline() {
    sleepers(1_000_000, 2);
}

/// Lets every other runnable thread run until it blocks.
fn settle() {
    for _ in 0..20 {
        ferry::yield_now();
    }
}

#[test]
fn a_terminated_sleeper_leaves_the_wheel() {
    common::within(WATCHDOG, "a terminated sleeper hung the runtime", || {
        let mut b = ferry::Runtime::builder();
        b.processors(1).time_slice(None);
        b.run(|| {
            let h = ferry::spawn(|| {
                ferry::sleep(Duration::from_secs(3600));
                1u32
            });
            settle();
            let handle = Handle::current();
            assert_eq!(handle.armed_timers(), 1, "the sleeper's timer is armed");
            let t = h.thread();
            // SAFETY: the sleeper holds nothing whose destructor matters.
            assert!(unsafe { t.terminate(7u32) }.is_ok());
            assert_eq!(t.suspension(), Suspension::Terminated);
            assert_eq!(h.join().unwrap(), 7);
            assert_eq!(handle.armed_timers(), 0, "its entry left the wheel");
            // The stack it slept on is reused; the wheel still works.
            ferry::sleep(Duration::from_millis(2));
            assert_eq!(handle.armed_timers(), 0);
        })
        .unwrap();
    });
}

#[test]
fn a_sleep_that_ends_leaves_nothing_armed_and_sleeps_nest_in_order() {
    ferry::run(|| {
        let handle = Handle::current();
        let hs: Vec<_> = (0..10u64)
            .map(|i| {
                ferry::spawn(move || {
                    let due = Instant::now() + Duration::from_millis(10 - i);
                    ferry::thread::sleep_until(due);
                    assert!(Instant::now() >= due);
                    // A deadline that has passed returns at once.
                    ferry::thread::sleep_until(due);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(handle.armed_timers(), 0);
        // Off the runtime, a kernel thread sleeps as std does.
        let due = Instant::now() + Duration::from_millis(1);
        std::thread::spawn(move || ferry::thread::sleep_until(due))
            .join()
            .unwrap();
        assert!(Instant::now() >= due);
    })
    .unwrap();
}

fn echo(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        0 => Ok(args.to_vec()),
        _ => Err(Fault::UnknownOp),
    }
}

#[test]
fn an_rpc_deadline_leaves_the_wheel_when_the_reply_comes() {
    let path = std::env::temp_dir().join(format!("ferry-timers-rpc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let dir = RuntimeDir::open(&path, rustix::process::getuid().as_raw()).unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&calls);
    common::within(WATCHDOG, "an rpc call hung", move || {
        let mut b = ferry::Runtime::builder();
        b.processors(2);
        b.run(move || {
            // A pool that never grows past its minimum: its keeper then arms
            // no decay timer, and the only timers are the calls' own.
            let _server = Server::builder()
                .activations(2, 2)
                .serve_in(&dir, "echo", 1, echo)
                .unwrap();
            let client = Client::connect_in(&dir, "echo", 1).unwrap();
            let handle = Handle::current();
            for i in 0..100u8 {
                let opts = CallOptions::timeout(Duration::from_secs(3600));
                assert_eq!(client.call_with(0, &[i], &opts).unwrap(), [i]);
                // The hour-long deadline did not outlive its call.
                assert_eq!(handle.armed_timers(), 0, "call {i} left its timer armed");
                seen.fetch_add(1, SeqCst);
            }
        })
        .unwrap();
    });
    assert_eq!(calls.load(SeqCst), 100);
    std::fs::remove_dir_all(path).unwrap();
}
