//! The two kinds of threads the workers can run on.
//!
//! This room owns the [`Threads`] trait and its two implementations:
//! [`Ferry`] (user-level threads of a ferry runtime, `ferry::sync::Barrier`)
//! and [`Std`] (kernel threads, `std::sync::Barrier`). It must not know what
//! the workers compute: it starts `workers` threads running one closure with
//! the worker's number, gives them a barrier, and returns when all have
//! finished.

use std::io;
use std::sync::Arc;

/// A kind of threads: how to start the workers and how they wait for each
/// other between phases.
pub trait Threads {
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
    /// stay.
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
