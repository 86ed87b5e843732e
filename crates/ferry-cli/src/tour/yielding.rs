//! Stop 3: yield. Two threads on one CPU yield to each other.

use std::io;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::{Row, Scale, Stop, Visit};
use crate::measure;

pub const STOP: Stop = Stop {
    name: "yield",
    title: "yield",
    run,
};

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let ferry_each = scale.pick(100_000, 20_000, 200);
    let std_each = scale.pick(20_000, 5_000, 50);
    Ok(Visit {
        lines: vec![
            "ferry::yield_now moves the caller to the back of its processor's run queue and \
             switches to the next thread there; std::thread::yield_now is sched_yield(2). Two \
             threads yield to each other on one CPU (ferry: 1 processor; std: both pinned to \
             one CPU); time per yield."
                .into(),
        ],
        rows: vec![Row {
            case: "yield to the other thread, one CPU".into(),
            label: "yield, two threads on one CPU".into(),
            ferry: measure::repeat(runs, 2 * ferry_each, || ferry_yield(ferry_each))?,
            std: measure::repeat(runs, 2 * std_each, || std_yield(std_each))?,
        }],
        pending: None,
    })
}

fn ferry_yield(each: u64) -> io::Result<Duration> {
    ferry::Runtime::builder().processors(1).run(move || {
        let start = Instant::now();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                ferry::spawn(move || {
                    for _ in 0..each {
                        ferry::yield_now();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a yielding thread cannot panic");
        }
        start.elapsed()
    })
}

fn std_yield(each: u64) -> io::Result<Duration> {
    let barrier = Arc::new(Barrier::new(2));
    let start = Instant::now();
    let threads = (0..2)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::Builder::new().spawn(move || {
                measure::pin_to(0);
                barrier.wait();
                for _ in 0..each {
                    std::thread::yield_now();
                }
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    for t in threads {
        t.join()
            .map_err(|_| io::Error::other("a yielding std thread panicked"))?;
    }
    Ok(start.elapsed())
}
