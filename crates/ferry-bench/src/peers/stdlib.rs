//! The standard library as a peer: `std::sync::mpsc::sync_channel` for the
//! `queues` experiment, and kernel threads (`std::thread` with
//! `std::sync::{Mutex, Condvar}`) for the `threads` experiment.
//!
//! This module owns only how these peers do each operation; run schedules,
//! sizes and printing are the experiments'.

use crate::transport::{Control, Transport, blocking_transport};

/// Kernel threads in the `threads` experiment: `std::thread::spawn` +
/// `join`, `std::thread::yield_now` (the two `YIELD` threads pinned to one
/// CPU: on two CPUs a `sched_yield` finds nobody to yield to),
/// `std::sync::{Mutex, Condvar}`.
pub mod threads {
    use std::hint::black_box;
    use std::sync::{Barrier, Condvar, Mutex};
    use std::thread;
    use std::time::Instant;

    use crate::affinity;
    use crate::thread_ops::{
        FORK_BATCH, ForkTimes, Kind, Op, Outcome, Sample, per_op, procedure_calls, whole_batches,
    };

    /// Label of kernel threads in `threads`.
    pub const NAME: &str = "std::thread";
    const YIELD_LABEL: &str = "std::thread (both on 1 cpu)";

    /// One timed run of `kind` with `n` operations on kernel threads.
    pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
        let samples = match kind {
            Kind::ProcedureCall => {
                vec![Sample::new(Op::ProcedureCall, NAME, procedure_calls(n))]
            }
            Kind::Fork => fork(n)?,
            Kind::ForkJoin => vec![Sample::new(Op::ForkJoin, NAME, fork_join(n)?)],
            Kind::Yield => vec![Sample::new(Op::Yield, YIELD_LABEL, yields(n)?)],
            Kind::AcquireRelease => {
                vec![Sample::new(Op::AcquireRelease, NAME, acquire_release(n))]
            }
            Kind::PingPong => vec![Sample::new(Op::PingPong, NAME, pingpong(n)?)],
        };
        Ok(Outcome::Measured(samples))
    }

    fn spawn_null() -> Result<thread::JoinHandle<()>, String> {
        thread::Builder::new()
            .spawn(|| {})
            .map_err(|e| format!("cannot spawn a kernel thread: {e}"))
    }

    fn fork(n: u64) -> Result<Vec<Sample>, String> {
        let n = whole_batches(n);
        let mut times = ForkTimes::default();
        let mut handles = Vec::with_capacity(FORK_BATCH as usize);
        for _ in 0..n / FORK_BATCH {
            let t0 = Instant::now();
            for _ in 0..FORK_BATCH {
                handles.push(spawn_null()?);
            }
            let t1 = Instant::now();
            for h in handles.drain(..) {
                h.join().map_err(|_| "a null thread panicked")?;
            }
            let t2 = Instant::now();
            times.create += t1 - t0;
            times.destroy += t2 - t1;
        }
        Ok(times.samples(n, NAME))
    }

    fn fork_join(n: u64) -> Result<f64, String> {
        let start = Instant::now();
        for _ in 0..n {
            spawn_null()?.join().map_err(|_| "a null thread panicked")?;
        }
        Ok(per_op(start.elapsed(), n))
    }

    /// Two kernel threads pinned to the same CPU each `sched_yield` `n` times;
    /// from the earlier start to the later end.
    fn yields(n: u64) -> Result<f64, String> {
        let cpu = affinity::first_allowed();
        let barrier = Barrier::new(2);
        let (a, b) = thread::scope(|s| {
            let side = || {
                affinity::pin_or_warn(cpu, "yield");
                barrier.wait();
                let start = Instant::now();
                for _ in 0..n {
                    thread::yield_now();
                }
                (start, Instant::now())
            };
            let a = s.spawn(side);
            let b = s.spawn(side);
            (a.join(), b.join())
        });
        let (a, b) = (
            a.map_err(|_| "a yield thread panicked")?,
            b.map_err(|_| "a yield thread panicked")?,
        );
        Ok(per_op(a.1.max(b.1) - a.0.min(b.0), 2 * n))
    }

    fn acquire_release(n: u64) -> f64 {
        let m = Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }
        let d = start.elapsed();
        assert_eq!(*m.lock().unwrap(), n, "std Mutex lost increments");
        per_op(d, n)
    }

    fn pingpong(n: u64) -> Result<f64, String> {
        let shared = (Mutex::new(0u8), Condvar::new());
        let side = |me: u8, other: u8| {
            let (m, c) = &shared;
            for _ in 0..n {
                let mut turn = m.lock().unwrap();
                while *turn != me {
                    turn = c.wait(turn).unwrap();
                }
                *turn = other;
                c.notify_one();
                drop(turn);
            }
        };
        let start = Instant::now();
        thread::scope(|s| {
            let b = s.spawn(|| side(1, 0));
            side(0, 1);
            b.join()
        })
        .map_err(|_| "a ping-pong thread panicked")?;
        Ok(per_op(start.elapsed(), n))
    }
}

/// Name of the std `sync_channel` system, the second ratio baseline of
/// `queues`.
pub const SYNC_CHANNEL: &str = "std sync_channel";

blocking_transport!(
    /// `std sync_channel`: `std::sync::mpsc::sync_channel`, blocking `send`/`recv`.
    StdSyncChannel,
    SYNC_CHANNEL,
    std::sync::mpsc::SyncSender<u64>,
    std::sync::mpsc::Receiver<u64>,
    std::sync::mpsc::sync_channel,
    send,
    recv
);
