//! Tokio as a peer of the `threads` experiment: tasks on the
//! current-thread runtime (the driver inside `block_on`) and on the
//! multi-thread one (one worker per CPU; the driver is itself a spawned
//! task, so it runs on a worker as the tasks it spawns do).
//! `tokio::spawn` + `.await` of the `JoinHandle`, `tokio::task::yield_now`,
//! `tokio::sync::Mutex`, and for `PINGPONG` two `tokio::sync::Notify`s,
//! Tokio's condition-variable equivalent.
//!
//! This module owns Tokio's side of each row.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{Mutex, Notify};

use crate::machine;
use crate::thread_ops::{
    FORK_BATCH, ForkTimes, Kind, Op, Outcome, Sample, per_op, procedure_calls, whole_batches,
};

/// Label of the current-thread runtime.
pub const CURRENT: &str = "tokio current-thread";

/// Label of the multi-thread runtime (one worker per CPU).
pub fn multi_name() -> String {
    format!("tokio multi-thread ({} workers)", machine::online_cpus())
}

/// Runs `f`'s future on a fresh runtime: on the current-thread runtime
/// inside `block_on`, on the multi-thread one as a spawned task (so it
/// runs on a worker, as the tasks it spawns do).
fn on_runtime<F, Fut, T>(multi: bool, f: F) -> Result<T, String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = if multi {
        tokio::runtime::Builder::new_multi_thread().build()
    } else {
        tokio::runtime::Builder::new_current_thread().build()
    }
    .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
    let fut = f();
    if multi {
        rt.block_on(rt.spawn(fut))
            .map_err(|e| format!("the Tokio driver task failed: {e}"))
    } else {
        Ok(rt.block_on(fut))
    }
}

/// One timed run of `kind` with `n` operations, on a fresh runtime.
pub fn measure(multi: bool, kind: Kind, n: u64) -> Result<Outcome, String> {
    let label = if multi {
        multi_name()
    } else {
        CURRENT.to_owned()
    };
    let samples = match kind {
        Kind::ProcedureCall => vec![Sample::new(
            Op::ProcedureCall,
            &label,
            on_runtime(multi, || async move { procedure_calls(n) })?,
        )],
        Kind::Fork => {
            let n = whole_batches(n);
            on_runtime(multi, || fork(n))??.samples(n, &label)
        }
        Kind::ForkJoin => vec![Sample::new(
            Op::ForkJoin,
            &label,
            on_runtime(multi, || fork_join(n))??,
        )],
        Kind::Yield => vec![Sample::new(
            Op::Yield,
            &label,
            on_runtime(multi, || yields(n))??,
        )],
        Kind::AcquireRelease => vec![Sample::new(
            Op::AcquireRelease,
            &label,
            on_runtime(multi, || acquire_release(n))?,
        )],
        Kind::PingPong => vec![Sample::new(
            Op::PingPong,
            &label,
            on_runtime(multi, || pingpong(n))??,
        )],
    };
    Ok(Outcome::Measured(samples))
}

async fn fork(n: u64) -> Result<ForkTimes, String> {
    let mut times = ForkTimes::default();
    let mut handles = Vec::with_capacity(FORK_BATCH as usize);
    for _ in 0..n / FORK_BATCH {
        let t0 = Instant::now();
        for _ in 0..FORK_BATCH {
            handles.push(tokio::spawn(async {}));
        }
        let t1 = Instant::now();
        for h in handles.drain(..) {
            h.await.map_err(|e| format!("a null task failed: {e}"))?;
        }
        let t2 = Instant::now();
        times.create += t1 - t0;
        times.destroy += t2 - t1;
    }
    Ok(times)
}

async fn fork_join(n: u64) -> Result<f64, String> {
    let start = Instant::now();
    for _ in 0..n {
        tokio::spawn(async {})
            .await
            .map_err(|e| format!("a null task failed: {e}"))?;
    }
    Ok(per_op(start.elapsed(), n))
}

async fn yields(n: u64) -> Result<f64, String> {
    let start = Instant::now();
    let side = move || async move {
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
    };
    let a = tokio::spawn(side());
    let b = tokio::spawn(side());
    a.await.map_err(|e| e.to_string())?;
    b.await.map_err(|e| e.to_string())?;
    Ok(per_op(start.elapsed(), 2 * n))
}

async fn acquire_release(n: u64) -> f64 {
    let m = Mutex::new(0u64);
    let start = Instant::now();
    for _ in 0..n {
        *black_box(&m).lock().await += 1;
    }
    let d = start.elapsed();
    assert_eq!(*m.lock().await, n, "tokio Mutex lost increments");
    per_op(d, n)
}

/// Two tasks, two `Notify`s: each notifies the other's and awaits its
/// own (`notify_one` keeps a permit if nobody waits yet).
async fn pingpong(n: u64) -> Result<f64, String> {
    let ping = Arc::new(Notify::new());
    let pong = Arc::new(Notify::new());
    let start = Instant::now();
    let b = {
        let (ping, pong) = (Arc::clone(&ping), Arc::clone(&pong));
        tokio::spawn(async move {
            for _ in 0..n {
                ping.notified().await;
                pong.notify_one();
            }
        })
    };
    for _ in 0..n {
        ping.notify_one();
        pong.notified().await;
    }
    b.await.map_err(|e| e.to_string())?;
    Ok(per_op(start.elapsed(), n))
}
