//! ferry as the `threads` experiment runs it: on a runtime of one
//! processor, as the paper's FastThreads tests were, with `ferry::spawn`,
//! `JoinHandle::join`, `ferry::yield_now` and `ferry::sync::{Mutex,
//! Condvar}`; `PINGPONG` also with `ferry::park` / `Thread::unpark` on an
//! atomic turn (`ferry (park/unpark)`), the floor the condition variable
//! builds on.
//!
//! This module owns ferry's side of each row; the peers' are in
//! [`crate::peers`]. [`yields`] is also Synthesis Table 4's partial switch
//! in `upcalls`.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use crate::thread_ops::{
    FORK_BATCH, ForkTimes, Kind, Op, Outcome, Sample, per_op, procedure_calls, whole_batches,
};

/// ferry's label, the baseline of the ratios.
pub const NAME: &str = "ferry";
/// The label of `PINGPONG` measured with park/unpark.
pub const PARK_UNPARK: &str = "ferry (park/unpark)";

/// Runs `f` as the first thread of a 1-processor runtime.
pub fn on_one_processor<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    ferry::Runtime::builder()
        .processors(1)
        .run(f)
        .map_err(|e| format!("cannot start a ferry runtime: {e}"))
}

/// One timed run of `kind` with `n` operations.
pub fn measure(kind: Kind, n: u64) -> Result<Outcome, String> {
    let samples = match kind {
        Kind::ProcedureCall => vec![Sample::new(
            Op::ProcedureCall,
            NAME,
            on_one_processor(move || procedure_calls(n))?,
        )],
        Kind::Fork => on_one_processor(move || fork(n))??,
        Kind::ForkJoin => vec![Sample::new(
            Op::ForkJoin,
            NAME,
            on_one_processor(move || fork_join(n))??,
        )],
        Kind::Yield => vec![Sample::new(
            Op::Yield,
            NAME,
            on_one_processor(move || yields(n))??,
        )],
        Kind::AcquireRelease => vec![Sample::new(Op::AcquireRelease, NAME, acquire_release(n)?)],
        Kind::PingPong => vec![
            Sample::new(Op::PingPong, NAME, pingpong(n)?),
            Sample::new(
                Op::PingPong,
                PARK_UNPARK,
                on_one_processor(move || pingpong_park(n))??,
            ),
        ],
    };
    Ok(Outcome::Measured(samples))
}

fn fork(n: u64) -> Result<Vec<Sample>, String> {
    let n = whole_batches(n);
    let mut times = ForkTimes::default();
    let mut handles = Vec::with_capacity(FORK_BATCH as usize);
    for _ in 0..n / FORK_BATCH {
        let t0 = Instant::now();
        for _ in 0..FORK_BATCH {
            handles.push(ferry::spawn(|| {}));
        }
        let t1 = Instant::now();
        for h in handles.drain(..) {
            h.join()
                .map_err(|p| format!("a null thread panicked: {p}"))?;
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
        ferry::spawn(|| {})
            .join()
            .map_err(|p| format!("a null thread panicked: {p}"))?;
    }
    Ok(per_op(start.elapsed(), n))
}

/// ns per `ferry::yield_now` switch: two threads on the calling
/// thread's runtime yield `n` times each (also Synthesis Table 4's
/// partial switch, in `upcalls`).
pub fn yields(n: u64) -> Result<f64, String> {
    let start = Instant::now();
    let a = ferry::spawn(move || {
        for _ in 0..n {
            ferry::yield_now();
        }
    });
    let b = ferry::spawn(move || {
        for _ in 0..n {
            ferry::yield_now();
        }
    });
    a.join().map_err(|p| p.to_string())?;
    b.join().map_err(|p| p.to_string())?;
    Ok(per_op(start.elapsed(), 2 * n))
}

/// `PINGPONG` with park/unpark: the turn is an atomic; each side parks
/// until the turn is its own, hands it over and unparks the other.
fn pingpong_park(n: u64) -> Result<f64, String> {
    let turn = Arc::new(AtomicU8::new(0));
    let a = ferry::current();
    let start = Instant::now();
    let b = {
        let turn = Arc::clone(&turn);
        ferry::spawn(move || {
            for _ in 0..n {
                while turn.load(Ordering::Acquire) != 1 {
                    ferry::park();
                }
                turn.store(0, Ordering::Release);
                a.unpark();
            }
        })
    };
    let b_thread = b.thread().clone();
    for _ in 0..n {
        while turn.load(Ordering::Acquire) != 0 {
            ferry::park();
        }
        turn.store(1, Ordering::Release);
        b_thread.unpark();
    }
    b.join().map_err(|p| p.to_string())?;
    Ok(per_op(start.elapsed(), n))
}

/// ns per uncontended `ferry::sync::Mutex` lock + increment + unlock.
fn acquire_release(n: u64) -> Result<f64, String> {
    on_one_processor(move || {
        let m = ferry::sync::Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock() += 1;
        }
        let d = start.elapsed();
        assert_eq!(*m.lock(), n, "ferry::sync::Mutex lost increments");
        per_op(d, n)
    })
}

/// ns per `PINGPONG` cycle on `ferry::sync::{Mutex, Condvar}`.
fn pingpong(n: u64) -> Result<f64, String> {
    on_one_processor(move || {
        type Pair = (ferry::sync::Mutex<u8>, ferry::sync::Condvar);
        let shared: Arc<Pair> = Arc::new((ferry::sync::Mutex::new(0), ferry::sync::Condvar::new()));
        let side = move |shared: &Pair, me: u8, other: u8| {
            let (m, c) = shared;
            for _ in 0..n {
                let mut turn = m.lock();
                while *turn != me {
                    turn = c.wait(turn);
                }
                *turn = other;
                c.notify_one();
                drop(turn);
            }
        };
        let start = Instant::now();
        let b = {
            let shared = Arc::clone(&shared);
            ferry::spawn(move || side(&shared, 1, 0))
        };
        side(&shared, 0, 1);
        b.join().map_err(|p| p.to_string())?;
        Ok(per_op(start.elapsed(), n))
    })?
}
