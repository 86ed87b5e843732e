//! Stop 1: threads are cheap. Spawn+join one at a time, and many threads
//! alive (parked) at once, then woken and joined.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use super::{Row, Scale, Stop, Visit};
use crate::measure;
use crate::report::fmt_count;

pub const STOP: Stop = Stop {
    name: "threads",
    title: "threads are cheap",
    run,
};

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let seq_ferry = scale.pick(20_000, 5_000, 50);
    let seq_std = scale.pick(2_000, 500, 20);
    let alive_ferry = scale.pick(10_000, 5_000, 100);
    let alive_std = scale.pick(1_000, 500, 20);

    let spawn_join = Row {
        case: "spawn+join, one at a time".into(),
        label: "spawn + join, one at a time".into(),
        ferry: measure::repeat(runs, seq_ferry, || ferry_spawn_join(seq_ferry))?,
        std: measure::repeat(runs, seq_std, || std_spawn_join(seq_std))?,
    };
    let alive = Row {
        case: "alive at once, per thread".into(),
        label: format!(
            "alive at once, per thread (ferry {}, std {})",
            fmt_count(alive_ferry),
            fmt_count(alive_std)
        ),
        ferry: measure::repeat(runs, alive_ferry, || ferry_alive(alive_ferry))?,
        std: measure::repeat(runs, alive_std, || std_alive(alive_std))?,
    };
    Ok(Visit {
        lines: vec![
            "A ferry thread is a stack from a cache and a small control block; starting one \
             is a user-level switch, not a clone(2). Row 1: spawn a thread that returns at once \
             and join it, over and over (ferry on 1 processor)."
                .into(),
            format!(
                "Row 2: start N threads that all park, wait until all are alive, then wake and \
                 join them; time per thread. ferry runs {} threads; std only {} (2 MiB stacks \
                 each), to stay well within this machine's limits.",
                fmt_count(alive_ferry),
                fmt_count(alive_std)
            ),
        ],
        rows: vec![spawn_join, alive],
        pending: None,
    })
}

fn ferry_spawn_join(n: u64) -> io::Result<Duration> {
    ferry::Runtime::builder().processors(1).run(move || {
        let start = Instant::now();
        for _ in 0..n {
            ferry::spawn(|| ())
                .join()
                .expect("an empty thread cannot panic");
        }
        start.elapsed()
    })
}

fn std_spawn_join(n: u64) -> io::Result<Duration> {
    let start = Instant::now();
    for _ in 0..n {
        std::thread::Builder::new()
            .spawn(|| ())?
            .join()
            .map_err(|_| io::Error::other("an empty std thread panicked"))?;
    }
    Ok(start.elapsed())
}

/// `n` ferry threads on every processor: each counts itself in (the last
/// wakes the main thread) and parks until released.
fn ferry_alive(n: u64) -> io::Result<Duration> {
    ferry::Runtime::builder()
        .processors(measure::cpu_count())
        .run(move || -> io::Result<Duration> {
            let started = Arc::new(AtomicU64::new(0));
            let go = Arc::new(AtomicBool::new(false));
            let main = ferry::current();
            let start = Instant::now();
            let mut handles = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let (started, go, main) = (started.clone(), go.clone(), main.clone());
                handles.push(ferry::thread::Builder::new().spawn(move || {
                    if started.fetch_add(1, AcqRel) + 1 == n {
                        main.unpark();
                    }
                    while !go.load(Acquire) {
                        ferry::park();
                    }
                })?);
            }
            while started.load(Acquire) < n {
                ferry::park();
            }
            go.store(true, Release);
            for h in &handles {
                h.thread().unpark();
            }
            for h in handles {
                h.join().expect("a parking thread cannot panic");
            }
            Ok(start.elapsed())
        })?
}

/// The same with `n` std threads.
fn std_alive(n: u64) -> io::Result<Duration> {
    let started = Arc::new(AtomicU64::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let main = std::thread::current();
    let start = Instant::now();
    let mut handles = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let (counter, gate, waker) = (started.clone(), go.clone(), main.clone());
        let spawned = std::thread::Builder::new().spawn(move || {
            if counter.fetch_add(1, AcqRel) + 1 == n {
                waker.unpark();
            }
            while !gate.load(Acquire) {
                std::thread::park();
            }
        });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                // Release the ones already running before giving up.
                go.store(true, Release);
                for h in &handles {
                    h.thread().unpark();
                }
                return Err(e);
            }
        }
    }
    while started.load(Acquire) < n {
        std::thread::park();
    }
    go.store(true, Release);
    for h in &handles {
        h.thread().unpark();
    }
    for h in handles {
        h.join()
            .map_err(|_| io::Error::other("a parking std thread panicked"))?;
    }
    Ok(start.elapsed())
}
