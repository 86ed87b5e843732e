//! The stats page: each runtime publishes what it holds and does in a small
//! file of the user's runtime directory, `<runtime dir>/top/<pid>`, mapped
//! shared, so that `ferry top` in another process reads every ferry
//! process of the user without asking any of them (and without a daemon).
//!
//! This room owns the page: its layout (`page.rs`), the sequence lock it is
//! written under (`seqlock.rs`), the file and the writing (`writer.rs`), the
//! reader's checked mapping ([`MappedPage`], `mapped.rs`), and the books
//! other rooms report into: cross-process channels and logical threads
//! (the `Source` trait, which `rpc` implements and registers; this room
//! names no room above it) and the allocation daemon's grant
//! (`set_allocation`). It must not put anything on a thread's path: it
//! reads counters that exist, and its one write of the page is made by the
//! runtime's monitor (`upcall::Publish`) at most every 100 ms while
//! processors are busy, and once before the
//! monitor parks (so an idle runtime's page says it is idle, and an idle
//! runtime still wakes nobody).
//!
//! # The page's life
//!
//! | state | made by | a reader sees |
//! |-------|---------|---------------|
//! | absent | — | nothing: the process has no page (stats off, or another runtime of the process publishes) |
//! | `top/.<pid>.new` | the runtime's start: created 0600, sized once to [`PAGE_SIZE`], header and first snapshot written | nothing (names that are not pids are skipped) |
//! | `top/<pid>`, `seq` even | the start renames it into place; the monitor's writes | a whole snapshot |
//! | `top/<pid>`, `seq` odd | the monitor, during a write | a write under way: the reader tries again |
//! | unlinked | the end of [`Builder::run`](crate::Builder::run); for runtimes that run until the process exits, an `atexit` handler | nothing |
//! | `top/<pid>` of a dead process | a process killed before its end | `ferry top` checks the pid and its start time and removes the page |
//!
//! One runtime per process publishes: the first to start while none does.
//! `FERRY_STATS=off` (or [`Builder::stats(false)`](crate::Builder::stats))
//! turns the page off. A forked child does not publish.

mod mapped;
mod page;
mod seqlock;
mod writer;

pub use mapped::{MappedPage, OpenError};
pub use page::{
    Allocation, Channel, ChannelKind, LogicalThread, MAX_CHANNELS, MAX_CORES, MAX_HOPS,
    MAX_LOGICAL, MAX_NAME, PAGE_MAGIC, PAGE_SIZE, PAGE_VERSION, PageError, Snapshot, UpcallCounts,
};
pub(crate) use writer::start;

use std::sync::{Mutex, PoisonError, Weak};

/// The atomics `seqlock` uses (loom's in its model).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering, fence};
}

/// The subdirectory of the runtime directory the pages live in.
pub const TOP_DIR: &str = "top";

/// What a source reports at each write of the page.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Channel ends (a server with all its clients is one).
    pub(crate) channels: Vec<Channel>,
    /// Logical threads in calls here.
    pub(crate) logical: Vec<LogicalThread>,
}

/// Something with figures for the page: a server, a client. Implemented
/// above this room (`rpc`), called at each write of the page on the
/// monitor's kernel thread. The monitor is what preempts ferry threads, so
/// a report must never wait for a lock a ferry thread may hold: a holder
/// preempted while both processors run threads that never yield would
/// then never run again.
pub(crate) trait Source: Send + Sync {
    /// Adds its figures to `out`; `false` if a lock it needs is held (the
    /// page then keeps the figures of its last write).
    fn report(&self, out: &mut Report) -> bool;
}

/// The sources of this process, as registered (dead ones are dropped at
/// the next registration or write).
static SOURCES: Mutex<Vec<Weak<dyn Source>>> = Mutex::new(Vec::new());

/// Registers `source` for the page of this process: it reports at each
/// write while it lives.
#[cfg_attr(ferry_loom, allow(dead_code))] // (loom builds leave `rpc` out)
pub(crate) fn register(source: Weak<dyn Source>) {
    // A std lock other ferry threads may take at once (servers and clients
    // starting together): not to be switched out holding it.
    let _off = crate::upcall::preemption_off();
    let mut all = SOURCES.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|s| s.strong_count() > 0);
    all.push(source);
}

/// Every live source's figures, in place of `out`'s; `false`, leaving
/// `out` as it was, if the list of sources or a lock a source needs is
/// held (by a ferry thread registering one, which the monitor that calls
/// this must not wait for: see [`Source`]).
fn gather_sources(out: &mut Report) -> bool {
    let live: Vec<_> = {
        let Some(mut all) = crate::lock::try_lock(&SOURCES) else {
            return false;
        };
        all.retain(|s| s.strong_count() > 0);
        all.iter().filter_map(Weak::upgrade).collect()
    };
    let mut fresh = Report::default();
    for s in live {
        if !s.report(&mut fresh) {
            return false;
        }
    }
    *out = fresh;
    true
}

/// The allocation daemon's grant to this process, `None` while it is not
/// registered with one.
static ALLOCATION: Mutex<Option<Allocation>> = Mutex::new(None);

/// Sets what the allocation daemon granted this process (`None`: not
/// registered), for the page's next write.
#[allow(dead_code)] // the allocation client calls it
pub(crate) fn set_allocation(a: Option<Allocation>) {
    *ALLOCATION.lock().unwrap_or_else(PoisonError::into_inner) = a;
}

/// The grant, or `None` while the allocation client holds it (the monitor
/// must not wait: see [`Source`]).
fn allocation() -> Option<Option<Allocation>> {
    crate::lock::try_lock(&ALLOCATION).map(|a| *a)
}

/// Whether the environment turns the page off (`FERRY_STATS=off` or `0`).
pub(crate) fn off_by_env() -> bool {
    std::env::var_os("FERRY_STATS").is_some_and(|v| v == "off" || v == "0")
}

#[cfg(test)]
mod tests;
