//! The writing side of the page: the file's creation at the runtime's
//! start, the monitor's writes ([`upcall::Publish`](crate::upcall::Publish)) and the file's removal
//! at the end.
//!
//! This file owns the page file of this process and what goes into each
//! write; it must not write anywhere but the page, and never blocks the
//! monitor: a write that finds the page busy (the runtime ending) is
//! skipped.
//!
//! One writer: the monitor role is held by one activation at a time, and
//! every write takes the page's lock with `try_lock` besides, so two
//! writers can never interleave (the sequence lock's one rule).

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Relaxed, Release};
use std::sync::{Arc, Mutex, PoisonError};

use super::mapped::Mapping;
use super::page::{
    self, DATA_WORDS, MAGIC_AT, PAGE_MAGIC, PAGE_SIZE, PAGE_VERSION, SIZE_AT, Snapshot,
    UpcallCounts, VERSION_AT,
};
use super::{Report, TOP_DIR, allocation, gather_sources, seqlock};
use crate::processor::{ACTIVE, STARTING};
use crate::upcall::{Publish, Shared};

/// Whether a runtime of this process publishes the page now.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// The page of a runtime that runs until the process exits, removed by
/// the `atexit` handler.
static AT_EXIT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The page file and what each write reuses.
struct Writer {
    map: Mapping,
    path: PathBuf,
    snap: Snapshot,
    report: Report,
    words: Box<[u64; DATA_WORDS]>,
}

/// What the runtime's hook and its guard share: the writer, until the
/// guard takes it away.
struct Page {
    writer: Mutex<Option<Writer>>,
}

/// The monitor's hook.
struct Hook(Arc<Page>);

impl Publish for Hook {
    fn publish(&self, shared: &Shared) {
        let Ok(mut w) = self.0.writer.try_lock() else {
            return;
        };
        if let Some(w) = w.as_mut() {
            w.write(shared);
        }
    }
}

/// A runtime's hold on the page: dropping it removes the page.
pub(crate) struct Guard {
    page: Arc<Page>,
}

impl Guard {
    /// Keeps the page for as long as the process runs (a runtime that is
    /// never shut down): an `atexit` handler removes it.
    pub(crate) fn keep_until_exit(self) {
        let path = self
            .page
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|w| w.path.clone());
        *AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner) = path;
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `remove_at_exit` is a plain function that touches a
            // static behind `try_lock` and makes one system call.
            unsafe { libc::atexit(remove_at_exit) };
        });
        std::mem::forget(self);
    }
}

extern "C" fn remove_at_exit() {
    if let Ok(mut p) = AT_EXIT.try_lock()
        && let Some(path) = p.take()
    {
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let w = self
            .page
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = w {
            let _ = std::fs::remove_file(&w.path);
        }
        CLAIMED.store(false, Release);
    }
}

/// Starts publishing the page of `shared` unless `on` is false, the
/// environment turns it off (`FERRY_STATS=off`) or another runtime of the
/// process publishes: creates the file, writes the first snapshot, puts the
/// file in place and installs the monitor's hook. The page is best effort:
/// if the directory or file cannot be made, the runtime runs without one.
pub(crate) fn start(shared: &Arc<Shared>, on: bool) -> Option<Guard> {
    if !on || super::off_by_env() || CLAIMED.swap(true, AcqRel) {
        return None;
    }
    match create(shared) {
        Ok(w) => {
            let page = Arc::new(Page {
                writer: Mutex::new(Some(w)),
            });
            if shared
                .publish
                .set(Box::new(Hook(Arc::clone(&page))))
                .is_err()
            {
                // Started twice for one runtime: the first hook writes.
                return None;
            }
            Some(Guard { page })
        }
        Err(_) => {
            CLAIMED.store(false, Release);
            None
        }
    }
}

/// This process's command name (`/proc/self/comm`).
fn command() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

/// Makes the page: `top/.<pid>.new`, sized, header and first snapshot
/// written, renamed to `top/<pid>`.
fn create(shared: &Shared) -> io::Result<Writer> {
    let uid = rustix::process::getuid().as_raw();
    let base = crate::sys::user_runtime_dir(
        std::env::var_os("XDG_RUNTIME_DIR"),
        uid,
        &std::env::temp_dir(),
    );
    let top = base.join(TOP_DIR);
    for dir in [&base, &top] {
        crate::sys::private_dir(dir, uid).map_err(|e| match e {
            crate::sys::DirError::Io(e) => e,
            crate::sys::DirError::Unsafe(what) => io::Error::other(what),
        })?;
    }
    let (pid, start) = crate::sys::process_identity();
    let fresh = top.join(format!(".{pid}.new"));
    let path = top.join(pid.to_string());
    let _ = std::fs::remove_file(&fresh);
    let file: File = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&fresh)?;
    let made = (|| {
        file.set_len(PAGE_SIZE as u64)?;
        let map = Mapping::new(&file, true)?;
        let w = map.words();
        w[MAGIC_AT].store(PAGE_MAGIC, Relaxed);
        w[VERSION_AT].store(PAGE_VERSION, Relaxed);
        w[SIZE_AT].store(PAGE_SIZE as u64, Relaxed);
        let mut writer = Writer {
            map,
            path: path.clone(),
            snap: Snapshot {
                pid,
                start,
                command: command(),
                ..Snapshot::default()
            },
            report: Report::default(),
            words: Box::new([0; DATA_WORDS]),
        };
        writer.write(shared);
        std::fs::rename(&fresh, &path)?;
        Ok(writer)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    made
}

impl Writer {
    /// Fills the snapshot from `shared` and the registered sources and
    /// writes it under the sequence lock.
    fn write(&mut self, shared: &Shared) {
        let s = &mut self.snap;
        s.cores.clear();
        let mut active = 0usize;
        let mut asleep = 0usize;
        for p in shared.processors.iter() {
            if matches!(p.membership.load(Relaxed), ACTIVE | STARTING) {
                active += 1;
                s.cores.push(p.core(&shared.set).map(|c| c as u64));
                asleep += usize::from(p.is_willing_to_yield());
            }
        }
        s.processors = active as u64;
        s.max_processors = shared.processors.len() as u64;
        s.runnable = (active.saturating_sub(asleep) + shared.injector.len()) as u64;
        // (Kept from the last write when the list is busy.)
        if let Some(away) = shared.activations.away() {
            s.blocked = away as u64;
        }
        s.kernel_threads = shared.activations.count() as u64;
        s.max_kernel_threads = shared.activations.max() as u64;
        let u = shared.counters.snapshot();
        s.upcalls = UpcallCounts {
            blocked: u.blocked.count,
            unblocked: u.unblocked.count,
            preempted: u.preempted.count,
            processor_added: u.processor_added.count,
            processor_removed: u.processor_removed.count,
        };
        // (Both kept from the last write while a ferry thread holds them.)
        if let Some(a) = allocation() {
            s.allocation = a;
        }
        gather_sources(&mut self.report);
        s.channels.clone_from(&self.report.channels);
        s.logical.clone_from(&self.report.logical);
        s.writes += 1;
        s.stamp_ns = crate::sys::monotonic_ns();
        page::encode(s, &mut self.words);
        seqlock::write(self.map.seq(), self.map.data(), &self.words[..]);
    }
}
