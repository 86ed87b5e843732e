//! The ring path of [`crate::fs`]: a file operation submitted to the
//! runtime's io_uring, the calling ferry thread parked until its
//! completion is reaped.
//!
//! This room owns the wait on one operation (its record registered with
//! the thread for termination, the reactor's count of waiters) and the
//! open flags std would pass; it must not fall back itself: each function
//! returns `None` when the ring is not the path (off a runtime, or the
//! runtime has none), and the caller takes the blocking handoff.
//!
//! # Termination and abort
//!
//! A thread parked on an operation is watched by the ring for
//! [`Thread::abort`], which cancels the operation
//! (`IORING_OP_ASYNC_CANCEL`): the call returns
//! [`Interrupted`](io::ErrorKind::Interrupted), not retried, unless the
//! operation completed first (its result then stands). The thread also
//! registers a [`WaitRecord`] whose `abandon` cancels the operation the
//! same way and gives the record to the ring (see `event::ring`): the
//! kernel keeps writing the record's own buffer, never the thread's
//! stack, and the record is freed when the (cancelled) completion
//! arrives. An operation the kernel cannot cancel once started (a
//! regular file's read in progress) runs to its end.
//!
//! [`Thread::abort`]: crate::Thread::abort

use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::marker::PhantomPinned;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::pin::pin;
use std::ptr;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::fence;

use crate::event::ring::{Request, Uring};
use crate::header::Unparker;
use crate::header::wait_record::{WaitRecord, register, unregister};

/// Runs `f` with the calling ferry thread's ring, if its runtime has one
/// (made at the first ask); `None` off a runtime or without a ring.
fn with_ring<R>(f: impl FnOnce(&Uring) -> R) -> Option<R> {
    let me = crate::thread::try_current()?;
    let sources = &me.shared().sources;
    Some(f(made_ring(&sources.ring, &sources.readiness)?))
}

/// The runtime's ring, made now if this is the first ask; `None` without
/// one. The making (the ring and, maybe, the reactor, whose cell racers
/// wait on for a moment) runs with preemption off, so that its maker is
/// not switched out meanwhile; once it is made, no critical section.
pub(super) fn made_ring<'a>(
    ring: &'a crate::event::ring::Ring,
    readiness: &crate::event::readiness::Readiness,
) -> Option<&'a std::sync::Arc<Uring>> {
    ring.get()
        .or_else(|| crate::upcall::without_preemption(|| ring.get_or_make(readiness)).ok())
}

/// A wait on one operation, pinned on the waiting thread's frame and
/// registered with it.
#[repr(C)]
struct RingWait {
    record: WaitRecord,
    /// The operation's record once started; null before.
    op: Cell<*const ()>,
    /// The waiting thread's id, by which the ring watches it.
    thread: u64,
    uring: *const Uring,
    _pinned: PhantomPinned,
}

impl RingWait {
    /// The terminator's side: the operation (if started) is cancelled and
    /// its record goes to the ring, and the reactor stops counting the
    /// waiter.
    ///
    /// # Safety
    /// `r` is the record of a live `RingWait` whose thread has stopped for
    /// good.
    unsafe fn abandon_record(r: &WaitRecord) -> bool {
        // SAFETY: `RingWait` is `repr(C)` with `record` first, and records
        // of this kind are only made by `wait`.
        let w = unsafe { &*ptr::from_ref(r).cast::<RingWait>() };
        // SAFETY: the runtime (which holds the ring) outlives its
        // threads' waits.
        let u = unsafe { &*w.uring };
        let op = w.op.get();
        if !op.is_null() {
            // Inside a critical section, as every other taker of the
            // ring's watch and submission locks.
            let _critical = crate::upcall::critical_enter();
            // SAFETY: the handle was never finished (its thread,
            // `w.thread`, stopped before `finish`, which comes after the
            // record is unregistered), and a record is abandoned once.
            unsafe { u.abandon(w.thread, op) };
        }
        u.reactor().wait_ends();
        true
    }
}

/// Runs `req` in the ring `u` until it does not fail with `EINTR`:
/// the result and the record's buffer.
fn run(u: &Uring, req: &Request<'_>) -> (io::Result<u32>, Vec<u8>) {
    loop {
        match wait(u, req) {
            // Interrupted, and not by `Thread::abort`: again.
            (Err(e), _, false) if e.kind() == io::ErrorKind::Interrupted => continue,
            (res, buf, _) => return (res, buf),
        }
    }
}

/// Starts `req` and parks until it completes, counted as a waiter of the
/// reactor meanwhile: the result, the buffer, and whether an abort
/// cancelled the operation.
fn wait(u: &Uring, req: &Request<'_>) -> (io::Result<u32>, Vec<u8>, bool) {
    let thread_id = crate::thread::try_current().map(|me| me.id().as_u64());
    let w = pin!(RingWait {
        record: WaitRecord::new(RingWait::abandon_record),
        op: Cell::new(ptr::null()),
        thread: thread_id.unwrap_or(0),
        uring: u,
        _pinned: PhantomPinned,
    });
    let w: &RingWait = &w;
    let who = Unparker::current();
    let thread = match &who {
        // SAFETY: the caller's own block, alive while it runs.
        Unparker::Ferry(t) => Some(unsafe { t.as_ptr().as_ref() }),
        Unparker::Kernel(_) => None,
    };
    // No stop between the count, the registration, the submission and
    // the record's address stored: a thread terminated in between would
    // leave an operation nobody cancels or a count nobody ends.
    let critical = crate::upcall::critical_enter();
    u.reactor().wait_begins();
    if let Some(h) = thread {
        // SAFETY: `h` is the running caller's own block, and the record
        // stays in place (pinned) until it is unregistered below.
        unsafe { register(&h.waits, &w.record) };
    }
    let started = u.start(req.clone(), who.clone());
    if let Ok(p) = &started {
        w.op.set(p.as_ptr());
    }
    drop(critical);
    let pending = match started {
        Ok(p) => p,
        Err(e) => {
            if let Some(h) = thread {
                // SAFETY: registered above by this thread.
                unsafe { unregister(&h.waits, &w.record) };
            }
            u.reactor().wait_ends();
            return (Err(e), Vec::new(), false);
        }
    };
    // A cached read or write often completed inside the submission: reap
    // it now rather than at the next tick or idle look.
    u.reap();
    // The watch lock is taken in critical sections: a thread stopped for
    // good while holding it (a termination interrupts a running thread)
    // would leave its terminator waiting on it for ever.
    if let Some(id) = thread_id {
        let critical = crate::upcall::critical_enter();
        u.watch(id, &pending);
        drop(critical);
        // An alert that came before the watch cancels the operation here,
        // as `Thread::abort` would; one that comes later finds the watch
        // (`thread::alert`'s module docs).
        fence(SeqCst);
        if crate::thread::try_current().is_some_and(|me| me.alert_aborts_calls()) {
            let critical = crate::upcall::critical_enter();
            let _ = u.abort(id);
            drop(critical);
        }
    }
    while !pending.is_done() {
        crate::thread::park();
    }
    if let Some(id) = thread_id {
        let critical = crate::upcall::critical_enter();
        u.unwatch(id);
        drop(critical);
    }
    if let Some(h) = thread {
        // SAFETY: registered above by this thread.
        unsafe { unregister(&h.waits, &w.record) };
    }
    u.reactor().wait_ends();
    pending.finish()
}

/// `read(2)` of up to `buf.len()` bytes at `offset` (`None`: the file
/// position): on the calling thread if the data is in the page cache
/// (`preadv2` with `RWF_NOWAIT`), else through the ring; `None` if the
/// ring is not the path.
pub(super) fn read(fd: RawFd, buf: &mut [u8], offset: Option<u64>) -> Option<io::Result<usize>> {
    with_ring(|u| {
        // SAFETY: the caller's file holds `fd` open for the call.
        let file = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Some(done) = u.read_now(file, buf, offset) {
            return done;
        }
        let req = Request::Read {
            fd,
            len: buf.len(),
            offset,
        };
        let (res, data) = run(u, &req);
        let n = res? as usize;
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    })
}

/// `write(2)` of `data` at `offset` (`None`: the file position) through
/// the ring; `None` if the ring is not the path.
pub(super) fn write(fd: RawFd, data: &[u8], offset: Option<u64>) -> Option<io::Result<usize>> {
    with_ring(|u| Ok(run(u, &Request::Write { fd, data, offset }).0? as usize))
}

/// `fsync` (or `fdatasync`) through the ring; `None` if the ring is not
/// the path.
pub(super) fn fsync(fd: RawFd, data_only: bool) -> Option<io::Result<()>> {
    with_ring(|u| run(u, &Request::Fsync { fd, data_only }).0.map(drop))
}

/// Opens `path` with `flags` and `mode` through the ring; `None` if the
/// ring is not the path or the path holds a NUL byte (std reports that).
pub(super) fn open(path: &Path, flags: i32, mode: u32) -> Option<io::Result<std::fs::File>> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    with_ring(|u| {
        let fd = run(
            u,
            &Request::Open {
                path: &path,
                flags,
                mode,
            },
        )
        .0?;
        let fd = RawFd::try_from(fd).map_err(io::Error::other)?;
        // SAFETY: the open's result is a new descriptor, ours alone.
        Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    })
}

/// `statx` of `path` relative to `dirfd` through the ring (`flags`:
/// `AT_*`, `mask`: `STATX_*`); `None` if the ring is not the path.
pub(super) fn statx(
    dirfd: RawFd,
    path: &CString,
    flags: i32,
    mask: u32,
) -> Option<io::Result<rustix::fs::Statx>> {
    with_ring(|u| {
        let req = Request::Statx {
            dirfd,
            path,
            flags,
            mask,
        };
        let (res, buf) = run(u, &req);
        res?;
        if buf.len() < std::mem::size_of::<rustix::fs::Statx>() {
            return Err(io::Error::other("ferry: a short statx buffer"));
        }
        // SAFETY: the buffer holds at least a `Statx`'s bytes (checked),
        // which the kernel wrote as its `struct statx` (the layout
        // `rustix::fs::Statx` is, `repr(C)`); every field is an integer
        // or integer flags, so any bytes are a valid value; the read is
        // unaligned because a `Vec<u8>` promises no alignment.
        Ok(unsafe { ptr::read_unaligned(buf.as_ptr().cast::<rustix::fs::Statx>()) })
    })
}

/// The options std's `OpenOptions` holds, which it does not show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flags {
    pub(super) read: bool,
    pub(super) write: bool,
    pub(super) append: bool,
    pub(super) truncate: bool,
    pub(super) create: bool,
    pub(super) create_new: bool,
    pub(super) custom: i32,
    pub(super) mode: u32,
}

impl Flags {
    /// Every option off, mode `0o666`.
    pub(super) const NEW: Flags = Flags {
        read: false,
        write: false,
        append: false,
        truncate: false,
        create: false,
        create_new: false,
        custom: 0,
        mode: 0o666,
    };

    /// The `open` flags std passes for these options, or `None` where
    /// std refuses them (`InvalidInput`): the caller lets std say so.
    pub(super) fn open_flags(&self) -> Option<i32> {
        let access = match (self.read, self.write, self.append) {
            (true, false, false) => libc::O_RDONLY,
            (false, true, false) => libc::O_WRONLY,
            (true, true, false) => libc::O_RDWR,
            (false, _, true) => libc::O_WRONLY | libc::O_APPEND,
            (true, _, true) => libc::O_RDWR | libc::O_APPEND,
            (false, false, false) => return None,
        };
        if !self.write && !self.append && (self.truncate || self.create || self.create_new) {
            return None;
        }
        if self.append && self.truncate && !self.create_new {
            return None;
        }
        let creation = match (self.create, self.truncate, self.create_new) {
            (false, false, false) => 0,
            (true, false, false) => libc::O_CREAT,
            (false, true, false) => libc::O_TRUNC,
            (true, true, false) => libc::O_CREAT | libc::O_TRUNC,
            (_, _, true) => libc::O_CREAT | libc::O_EXCL,
        };
        Some(access | creation | (self.custom & !libc::O_ACCMODE))
    }
}
