//! Stop 2: switching is cheap. Two threads take turns through park/unpark;
//! one round trip is two handoffs.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::{Duration, Instant};

use super::{Row, Scale, Stop, Visit};
use crate::measure;

pub const STOP: Stop = Stop {
    name: "switching",
    title: "switching is cheap",
    run,
};

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let ferry_rounds = scale.pick(100_000, 20_000, 200);
    let std_rounds = scale.pick(10_000, 2_000, 50);
    let mut rows = vec![Row {
        case: "park/unpark round trip, one CPU".into(),
        label: "round trip, one CPU".into(),
        ferry: measure::repeat(runs, ferry_rounds, || ferry_ping_pong(ferry_rounds, 1))?,
        std: measure::repeat(runs, std_rounds, || std_ping_pong(std_rounds, 0))?,
    }];
    let two_cpus = measure::cpu_count() >= 2;
    if two_cpus {
        rows.push(Row {
            case: "park/unpark round trip, two CPUs".into(),
            label: "round trip, two CPUs".into(),
            ferry: measure::repeat(runs, ferry_rounds, || ferry_ping_pong(ferry_rounds, 2))?,
            std: measure::repeat(runs, std_rounds, || std_ping_pong(std_rounds, 1))?,
        });
    }
    let mut lines = vec![
        "Handing the CPU to another ferry thread saves a few registers and jumps; std's \
         park/unpark is a futex system call and a pass through the kernel's scheduler. Two \
         threads take turns, each unparking the other and parking itself: a round trip is \
         two handoffs."
            .into(),
    ];
    lines.push(if two_cpus {
        "One CPU: ferry on 1 processor, std threads pinned to one CPU. Two CPUs: ferry on 2 \
         processors (it decides where its threads run), std threads pinned to two CPUs."
            .into()
    } else {
        "One CPU: ferry on 1 processor, std threads pinned to one CPU.".into()
    });
    Ok(Visit {
        lines,
        rows,
        pending: None,
    })
}

/// `rounds` round trips between the main thread and a partner, on
/// `processors` processors; times the main thread's side.
fn ferry_ping_pong(rounds: u64, processors: usize) -> io::Result<Duration> {
    ferry::Runtime::builder()
        .processors(processors)
        .run(move || {
            let turn = Arc::new(AtomicU64::new(0));
            let me = ferry::current();
            let partner_turn = Arc::clone(&turn);
            let partner = ferry::spawn(move || {
                for i in 0..rounds {
                    while partner_turn.load(Acquire) != 2 * i + 1 {
                        ferry::park();
                    }
                    partner_turn.store(2 * i + 2, Release);
                    me.unpark();
                }
            });
            let other = partner.thread().clone();
            let start = Instant::now();
            for i in 0..rounds {
                turn.store(2 * i + 1, Release);
                other.unpark();
                while turn.load(Acquire) != 2 * i + 2 {
                    ferry::park();
                }
            }
            let took = start.elapsed();
            partner.join().expect("the partner cannot panic");
            took
        })
}

/// The same with two std threads, the first pinned to the first allowed
/// CPU and the partner to the `partner_cpu`-th.
fn std_ping_pong(rounds: u64, partner_cpu: usize) -> io::Result<Duration> {
    let driver = std::thread::Builder::new().spawn(move || -> io::Result<Duration> {
        measure::pin_to(0);
        let turn = Arc::new(AtomicU64::new(0));
        let me = std::thread::current();
        let partner_turn = Arc::clone(&turn);
        let partner = std::thread::Builder::new().spawn(move || {
            measure::pin_to(partner_cpu);
            for i in 0..rounds {
                while partner_turn.load(Acquire) != 2 * i + 1 {
                    std::thread::park();
                }
                partner_turn.store(2 * i + 2, Release);
                me.unpark();
            }
        })?;
        let other = partner.thread().clone();
        let start = Instant::now();
        for i in 0..rounds {
            turn.store(2 * i + 1, Release);
            other.unpark();
            while turn.load(Acquire) != 2 * i + 2 {
                std::thread::park();
            }
        }
        let took = start.elapsed();
        partner
            .join()
            .map_err(|_| io::Error::other("the std partner panicked"))?;
        Ok(took)
    })?;
    driver
        .join()
        .map_err(|_| io::Error::other("the std driver panicked"))?
}
