//! Stop 4: sleep. Many threads sleep at once; the wall time of the batch and
//! what each sleeper costs beyond the sleep itself.

use std::io;
use std::time::{Duration, Instant};

use super::{Row, Scale, Stop, Visit};
use crate::measure;
use crate::report::{fmt_count, fmt_ns};

pub const STOP: Stop = Stop {
    name: "sleep",
    title: "sleep",
    run,
};

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let nap = Duration::from_millis(scale.pick(10, 10, 1));
    let many = scale.pick(10_000, 5_000, 100);
    let same = scale.pick(1_000, 500, 20);

    let ferry_many = measure::durations(runs, || ferry_sleepers(many, nap))?;
    let ferry_same = measure::durations(runs, || ferry_sleepers(same, nap))?;
    let std_same = measure::durations(runs, || std_sleepers(same, nap))?;
    let beyond = |walls: &[Duration]| -> Vec<Duration> {
        walls.iter().map(|w| w.saturating_sub(nap)).collect()
    };
    let many_wall = measure::per_op(&ferry_many, 1).stats.median;
    let nap_label = format!("{} ms", nap.as_millis());

    Ok(Visit {
        lines: vec![format!(
            "A sleeping ferry thread is an entry in its runtime's timer heap, and its \
             processor runs other threads meanwhile; a sleeping std thread is a kernel thread \
             in nanosleep(2). {} ferry threads sleeping {nap_label} each were spawned, slept \
             and joined in {} of wall time. Row 2: time beyond the sleep per sleeper, ferry \
             with {} threads, std with {}.",
            fmt_count(many),
            fmt_ns(many_wall),
            fmt_count(many),
            fmt_count(same)
        )],
        rows: vec![
            Row {
                case: format!("{same} sleepers, wall"),
                label: format!("{} × sleep {nap_label}, wall", fmt_count(same)),
                ferry: measure::per_op(&ferry_same, 1),
                std: measure::per_op(&std_same, 1),
            },
            Row {
                case: "beyond the sleep, per sleeper".into(),
                label: format!(
                    "beyond the sleep, per sleeper (ferry {}, std {})",
                    fmt_count(many),
                    fmt_count(same)
                ),
                ferry: measure::per_op(&beyond(&ferry_many), many),
                std: measure::per_op(&beyond(&std_same), same),
            },
        ],
        pending: None,
    })
}

/// Wall time for `n` ferry threads on every processor to each sleep `nap`,
/// from the first spawn to the last join.
fn ferry_sleepers(n: u64, nap: Duration) -> io::Result<Duration> {
    ferry::Runtime::builder()
        .processors(measure::cpu_count())
        .run(move || -> io::Result<Duration> {
            let start = Instant::now();
            let threads = (0..n)
                .map(|_| ferry::thread::Builder::new().spawn(move || ferry::sleep(nap)))
                .collect::<io::Result<Vec<_>>>()?;
            for t in threads {
                t.join().expect("a sleeping thread cannot panic");
            }
            Ok(start.elapsed())
        })?
}

/// The same with `n` std threads.
fn std_sleepers(n: u64, nap: Duration) -> io::Result<Duration> {
    let start = Instant::now();
    let threads = (0..n)
        .map(|_| std::thread::Builder::new().spawn(move || std::thread::sleep(nap)))
        .collect::<io::Result<Vec<_>>>()?;
    for t in threads {
        t.join()
            .map_err(|_| io::Error::other("a sleeping std thread panicked"))?;
    }
    Ok(start.elapsed())
}
