//! The two kinds of threads the workers can run on.
//!
//! This room owns the [`Threads`] trait and its two implementations:
//! [`Ferry`] (user-level threads of a ferry runtime, `ferry::sync::Barrier`)
//! and [`Std`] (kernel threads, `std::sync::Barrier`). It must not know what
//! the workers compute: it starts `workers` threads running one closure with
//! the worker's number, gives them a barrier, and returns when all have
//! finished. [`run_team`] adds the one rule that keeps a panicking worker
//! from leaving the others at a barrier for good.
//!
//! # The team's failure flag
//!
//! | `failed` | meaning | who changes it |
//! |----------|---------|----------------|
//! | false | every worker is running its phases | a worker whose body panicked: to true, then it arrives once more at the barrier |
//! | true | a worker panicked; the others leave at their next barrier | nobody (final) |
//!
//! Workers run their phases in lock step, so when one panics the others are
//! at, or on their way to, the barrier that ends the current phase; its
//! extra arrival completes that barrier, and each of them sees the flag when
//! it leaves (the barrier orders the flag's store before their loads; the
//! orderings below say so again).

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A kind of threads: how to start the workers and how they wait for each
/// other between phases.
pub trait Threads: 'static {
    /// The barrier the workers wait at between phases.
    type Barrier: Send + Sync + 'static;

    /// The kind's name, as the command line spells it.
    fn name(&self) -> &'static str;

    /// A barrier for `n` threads.
    fn barrier(&self, n: usize) -> Self::Barrier;

    /// Waits at `barrier` until all its threads have arrived.
    fn wait(barrier: &Self::Barrier);

    /// Runs `body(w)` for each `w` in `0..workers`, each on its own thread
    /// of this kind, and returns once all have returned.
    ///
    /// # Errors
    /// If a thread cannot be started (or, for [`Ferry`], the runtime), or a
    /// worker panicked. A thread that cannot be started leaves the started
    /// ones waiting at their first barrier for good; the workers of this
    /// crate meet at a barrier before anything else, so that is where they
    /// stay. A worker that panics would leave the others at their next
    /// barrier: [`run_team`] is the way out of that.
    fn run_workers<F>(&self, workers: usize, body: F) -> io::Result<()>
    where
        F: Fn(usize) + Send + Sync + 'static;
}

/// User-level threads of a fresh ferry runtime made for the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ferry {
    /// The runtime's processors; `None` for the runtime's default (the
    /// CPUs the process may use). Fewer processors than workers is fine:
    /// a worker waiting at a barrier gives its processor to another.
    pub processors: Option<usize>,
}

impl Threads for Ferry {
    type Barrier = ferry::sync::Barrier;

    fn name(&self) -> &'static str {
        "ferry"
    }

    fn barrier(&self, n: usize) -> ferry::sync::Barrier {
        ferry::sync::Barrier::new(n)
    }

    fn wait(barrier: &ferry::sync::Barrier) {
        barrier.wait();
    }

    fn run_workers<F>(&self, workers: usize, body: F) -> io::Result<()>
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        let mut builder = ferry::Runtime::builder();
        if let Some(p) = self.processors {
            builder.processors(p);
        }
        builder.run(move || {
            let body = Arc::new(body);
            let handles = (0..workers)
                .map(|w| {
                    let body = Arc::clone(&body);
                    ferry::thread::Builder::new()
                        .name(format!("gravity-{w}"))
                        .spawn(move || body(w))
                })
                .collect::<io::Result<Vec<_>>>()?;
            for h in handles {
                h.join()
                    .map_err(|p| io::Error::other(format!("a worker panicked: {p}")))?;
            }
            Ok(())
        })?
    }
}

/// Plain kernel threads (`std::thread`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Std;

impl Threads for Std {
    type Barrier = std::sync::Barrier;

    fn name(&self) -> &'static str {
        "std"
    }

    fn barrier(&self, n: usize) -> std::sync::Barrier {
        std::sync::Barrier::new(n)
    }

    fn wait(barrier: &std::sync::Barrier) {
        barrier.wait();
    }

    fn run_workers<F>(&self, workers: usize, body: F) -> io::Result<()>
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        std::thread::scope(|s| {
            let handles = (0..workers)
                .map(|w| {
                    let body = &body;
                    std::thread::Builder::new()
                        .name(format!("gravity-{w}"))
                        .spawn_scoped(s, move || body(w))
                })
                .collect::<io::Result<Vec<_>>>()?;
            for h in handles {
                h.join()
                    .map_err(|_| io::Error::other("a worker panicked"))?;
            }
            Ok(())
        })
    }
}

/// The barrier of a run's workers and its failure flag (see the module
/// docs).
pub struct Team<K: Threads> {
    barrier: K::Barrier,
    failed: AtomicBool,
}

/// What [`Team::wait`] returns when another worker panicked: leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

impl<K: Threads> Team<K> {
    /// Waits until every worker has arrived; `Err(Failed)` if one of them
    /// panicked (the caller returns at once).
    ///
    /// # Errors
    /// [`Failed`] when a worker panicked.
    pub fn wait(&self) -> Result<(), Failed> {
        K::wait(&self.barrier);
        if self.failed.load(Ordering::Acquire) {
            Err(Failed)
        } else {
            Ok(())
        }
    }
}

/// Runs `body(w, team)` for each worker `w` as [`Threads::run_workers`],
/// with a [`Team`] to meet at. A worker whose body panics raises the team's
/// flag and arrives once more at the barrier, so that the others leave
/// instead of waiting for it for good; the run then ends with an error.
/// The body's last act must be a [`Team::wait`] (a panic after it would
/// wait for workers that have gone).
///
/// # Errors
/// As [`Threads::run_workers`]; a panicking worker is an error.
pub fn run_team<K, F>(kind: &K, workers: usize, body: F) -> io::Result<()>
where
    K: Threads,
    F: Fn(usize, &Team<K>) + Send + Sync + 'static,
{
    let team = Arc::new(Team::<K> {
        barrier: kind.barrier(workers),
        failed: AtomicBool::new(false),
    });
    kind.run_workers(workers, move |w| {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| body(w, &team))) {
            team.failed.store(true, Ordering::Release);
            K::wait(&team.barrier);
            resume_unwind(panic);
        }
    })
}
