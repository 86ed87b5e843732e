//! Stop 5: ferry::sync. An uncontended mutex and a bounded channel between
//! two threads, beside std::sync::Mutex and std::sync::mpsc::sync_channel.

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use super::{Row, Scale, Stop, Visit};
use crate::measure;

pub const STOP: Stop = Stop {
    name: "sync",
    title: "ferry::sync",
    run,
};

/// Capacity of both channels.
const CAPACITY: usize = 64;

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let locks = scale.pick(1_000_000, 200_000, 1_000);
    let ferry_items = scale.pick(200_000, 50_000, 500);
    let std_items = scale.pick(100_000, 20_000, 200);
    let mut rows = vec![
        Row {
            case: "mutex lock+unlock, uncontended".into(),
            label: "Mutex lock + unlock, uncontended".into(),
            ferry: measure::repeat(runs, locks, || ferry_mutex(locks))?,
            std: measure::repeat(runs, locks, || std_mutex(locks))?,
        },
        Row {
            case: "channel transfer, one CPU".into(),
            label: format!("channel (capacity {CAPACITY}) per item, one CPU"),
            ferry: measure::repeat(runs, ferry_items, || ferry_channel(ferry_items, 1))?,
            std: measure::repeat(runs, std_items, || std_channel(std_items, 0))?,
        },
    ];
    if measure::cpu_count() >= 2 {
        rows.push(Row {
            case: "channel transfer, two CPUs".into(),
            label: format!("channel (capacity {CAPACITY}) per item, two CPUs"),
            ferry: measure::repeat(runs, ferry_items, || ferry_channel(ferry_items, 2))?,
            std: measure::repeat(runs, std_items, || std_channel(std_items, 1))?,
        });
    }
    Ok(Visit {
        lines: vec![
            "ferry's Mutex, Condvar, Semaphore, RwLock, Barrier and channel block only the \
             calling ferry thread; its processor runs other threads meanwhile. Row 1: lock \
             and unlock a mutex nobody else wants. Then one thread sends u64s through a \
             bounded channel to another (ferry::sync::channel vs std's sync_channel), on one \
             CPU (ferry: 1 processor; std pinned) and on two."
                .into(),
        ],
        rows,
        pending: None,
    })
}

fn ferry_mutex(n: u64) -> io::Result<Duration> {
    ferry::Runtime::builder().processors(1).run(move || {
        let m = ferry::sync::Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock() += 1;
        }
        let took = start.elapsed();
        assert_eq!(m.into_inner(), n);
        took
    })
}

fn std_mutex(n: u64) -> io::Result<Duration> {
    let m = std::sync::Mutex::new(0u64);
    let start = Instant::now();
    for _ in 0..n {
        *black_box(&m).lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }
    let took = start.elapsed();
    assert_eq!(m.into_inner().unwrap_or_else(|e| e.into_inner()), n);
    Ok(took)
}

/// `n` items from a spawned sender to the main thread, on `processors`.
fn ferry_channel(n: u64, processors: usize) -> io::Result<Duration> {
    ferry::Runtime::builder()
        .processors(processors)
        .run(move || {
            let (tx, rx) = ferry::sync::channel::<u64>(CAPACITY);
            let start = Instant::now();
            let sender = ferry::spawn(move || {
                for i in 0..n {
                    tx.send(i).expect("the receiver outlives the sender");
                }
            });
            let mut sum = 0u64;
            for _ in 0..n {
                sum += rx.recv().expect("the sender sends every item");
            }
            let took = start.elapsed();
            sender.join().expect("the sender cannot panic");
            assert_eq!(sum, n * (n - 1) / 2);
            took
        })
}

/// The same with std threads: the receiver pinned to the first allowed CPU,
/// the sender to the `sender_cpu`-th.
fn std_channel(n: u64, sender_cpu: usize) -> io::Result<Duration> {
    let receiver = std::thread::Builder::new().spawn(move || -> io::Result<Duration> {
        measure::pin_to(0);
        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(CAPACITY);
        let start = Instant::now();
        let sender = std::thread::Builder::new().spawn(move || {
            measure::pin_to(sender_cpu);
            for i in 0..n {
                tx.send(i).expect("the receiver outlives the sender");
            }
        })?;
        let mut sum = 0u64;
        for _ in 0..n {
            sum += rx
                .recv()
                .map_err(|_| io::Error::other("the std sender stopped early"))?;
        }
        let took = start.elapsed();
        sender
            .join()
            .map_err(|_| io::Error::other("the std sender panicked"))?;
        assert_eq!(sum, n * (n - 1) / 2);
        Ok(took)
    })?;
    receiver
        .join()
        .map_err(|_| io::Error::other("the std receiver panicked"))?
}
