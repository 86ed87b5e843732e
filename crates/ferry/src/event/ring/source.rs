//! The ring as an event source of one runtime: the ring, made at the
//! first file operation (or why there is none), its reaping at switches
//! and in the idle poller, and the abort of a thread waiting on it.
//!
//! This room owns the choice of backend (builder, environment, kernel) and
//! the [`Source`] side; it must not submit or reap itself (the parent
//! does both).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use once_cell::race::OnceBox;
use std::time::Duration;

use super::super::readiness::Readiness;
use super::super::{Deliver, Every, Source};
use super::{Backend, Fallback, RingStats, Uring};

/// The ring source of one runtime: the ring once made, or why there is
/// none.
pub(crate) struct Ring {
    made: OnceBox<Result<Arc<Uring>, Fallback>>,
    /// Whether the builder allows the ring (set before threads run).
    allowed: AtomicBool,
}

impl Ring {
    pub(crate) fn new() -> Ring {
        Ring {
            made: OnceBox::new(),
            allowed: AtomicBool::new(true),
        }
    }

    /// Allows or forbids the ring ([`crate::Builder::io_uring`]); only
    /// before the first file operation.
    pub(crate) fn allow(&self, on: bool) {
        self.allowed.store(on, Relaxed);
    }

    /// The ring if it is made.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Arc<Uring>> {
        self.made.get().and_then(|m| m.as_ref().ok())
    }

    /// The ring, made now if this is the first ask, or why there is none.
    pub(crate) fn get_or_make(&self, readiness: &Readiness) -> Result<&Arc<Uring>, &Fallback> {
        if let Some(made) = self.made.get() {
            return made.as_ref();
        }
        // Made outside the cell (system calls): threads that race to make
        // the first ring each make one, the first installed wins and the
        // others' are dropped (closing their descriptors; nothing was
        // submitted to them). None waits in the kernel for a maker a time
        // slice may have switched out.
        let made = if !self.allowed.load(Relaxed) {
            Err(Fallback::Builder)
        } else if std::env::var_os("FERRY_IO_URING").is_some_and(|v| v == "0") {
            Err(Fallback::Environment)
        } else {
            Uring::new(readiness)
                .map(Arc::new)
                .map_err(|e| Fallback::Kernel(e.raw_os_error().unwrap_or(libc::EIO)))
        };
        self.made.get_or_init(|| Box::new(made)).as_ref()
    }

    /// How file operations run (makes the ring if nobody asked yet).
    pub(crate) fn backend(&self, readiness: &Readiness) -> Backend {
        match self.get_or_make(readiness) {
            Ok(_) => Backend::IoUring,
            Err(why) => Backend::Blocking(why.clone()),
        }
    }

    /// Aborts the ring wait of thread `thread` ([`Uring::abort`]); false
    /// without a ring.
    pub(crate) fn abort(&self, thread: u64) -> bool {
        self.get().is_some_and(|u| u.abort(thread))
    }

    /// The ring's counts (zero without a ring).
    pub(crate) fn stats(&self) -> RingStats {
        self.get().map_or_else(RingStats::default, |u| u.stats())
    }
}

/// Threads waiting on the ring are woken when a processor reaps at a
/// switch or in its idle spin, or when the poller's `epoll_wait` returns
/// for the ring's eventfd and its processor reaps.
impl Source for Ring {
    const EVERY: Every = Every::Switch;

    #[inline]
    fn is_ready(&self) -> bool {
        self.get().is_some_and(|u| u.has_completions())
    }

    fn deliver(&self, _to: &mut dyn Deliver) {
        // The woken threads reach their processors through their own
        // scheduler, not through `to`.
        if let Some(u) = self.get() {
            u.reap();
        }
    }

    fn until_next(&self) -> Option<Duration> {
        None
    }
}
