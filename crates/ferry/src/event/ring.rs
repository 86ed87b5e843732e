//! File operations through io_uring: one ring per runtime, made at the
//! first file operation, whose completions are an event source (see the
//! parent module).
//!
//! This room owns the ring, its eventfd, the operation records in flight
//! and the reaping of completions; it must not park a thread or decide
//! how a file operation falls back (`fs` does both): it starts an
//! operation ([`Uring::start`]), and wakes the record's owner when the
//! kernel completes it.
//!
//! # The ring and the crate
//!
//! The `io-uring` crate (tokio-rs) maps the queues and spells the
//! submission entries; rustix's `io_uring` module has the system calls
//! and structures only, so mapping the rings and the memory ordering of
//! their heads and tails would be ours to write and get right.
//!
//! # Submission and reaping
//!
//! | who | holds | does |
//! |-----|-------|------|
//! | a thread starting an operation | the submission lock | pushes one entry, then `io_uring_enter` (a read of a cached page often completes inside it) |
//! | the same thread, right after its submission | the completion lock (`try_lock`) | reaps as below: a read of a cached page is then done before the thread would park |
//! | a processor, at every switch and in its idle spin ([`Every::Switch`](super::Every::Switch)) while operations are in flight | the completion lock (`try_lock`: one reaper at a time, the others go on) | takes up to [`REAP`] completions, lets go of the lock, then completes their records |
//! | a processor about to sleep ([`Source::is_ready`](super::Source::is_ready)) | the completion lock (`try_lock`) | looks whether the queue is empty; a lock held by another counts as "not empty, look again", since its holder may have looked before the newest completion and the eventfd's edge may be spent (`tests/loom_ring_look.rs`) |
//! | the idle poller | — | blocks in the reactor's `epoll_wait`, whose set holds the ring's eventfd (`IORING_REGISTER_EVENTFD`): a completion ends the wait, and the processor reaps as a busy one would |
//!
//! One lock per queue, not one ring per processor: a ring per processor
//! would need each processor's eventfd in the epoll set and a completion
//! would still have to reach the owner wherever it runs; submissions are
//! a few hundred nanoseconds under the lock against microseconds in the
//! kernel. [`Source::is_ready`](super::Source::is_ready) is one load while nothing is in flight
//! (the count of operations in flight) and a `try_lock` and two loads of
//! the completion queue otherwise.
//!
//! A thread waiting on the ring counts as a waiter of the reactor
//! (`Reactor::wait_begins`), so the idle poller waits in `epoll_wait`
//! while operations are in flight, and the deadlock watch counts it as
//! waiting on something outside the runtime.
//!
//! # Records and their buffers
//!
//! A record is boxed and owns the memory the kernel reads or writes (the
//! data, the path); `user_data` is its address. The owner copies data in
//! before and out after, so a record never points into a thread's stack.
//! Its completion word ([`state`]) says who frees it: the owner once the
//! completion arrived, or, if the owner was terminated while parked, the
//! reaper when the completion arrives (or the terminator, if it already
//! did). The kernel thus never writes freed memory, and a terminated
//! thread's record is freed once the kernel is done with it. Records in
//! flight when the runtime ends are leaked, never freed under the kernel.
//!
//! # Cancellation
//!
//! A waiting owner is watched by its thread id ([`cancel`]): an abort
//! or a terminator submits `IORING_OP_ASYNC_CANCEL` for the record, and
//! the operation completes soon, with `-ECANCELED` (or `-EINTR`) unless
//! it completed first, whose result then stands.

/// The atomics `state` uses (its loom model swaps in loom's).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, Ordering};
}

mod cancel;
mod source;
pub(crate) mod state;

pub(crate) use source::Ring;

use std::cell::UnsafeCell;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};

use io_uring::{IoUring, opcode, squeue, types};

use super::readiness::{Reactor, Readiness};
use crate::header::Unparker;

/// Submission queue entries (the completion queue is twice as long).
const ENTRIES: u32 = 256;
/// Completions one reap takes at most before it lets go of the lock.
pub(crate) const REAP: usize = 64;
/// The largest read or write one operation makes (a longer one is short,
/// as `read(2)` may be).
pub(crate) const MAX_IO: usize = 1 << 21;

/// How a runtime's [`crate::fs`] runs its file operations.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Submitted to the runtime's io_uring: a waiting thread lends no
    /// kernel thread.
    IoUring,
    /// Handed to a kernel thread through [`crate::blocking`], because of
    /// the reason given.
    Blocking(Fallback),
}

/// Why a runtime's file operations do not use io_uring.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// [`Builder::io_uring(false)`](crate::Builder::io_uring).
    Builder,
    /// The environment variable `FERRY_IO_URING` is `0`.
    Environment,
    /// `io_uring_setup` (or registering the ring's eventfd) failed with
    /// this `errno`: `EPERM` where `kernel.io_uring_disabled` or a seccomp
    /// filter forbids it, `ENOSYS` on a kernel without it.
    Kernel(i32),
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::IoUring => f.write_str("io_uring"),
            Backend::Blocking(Fallback::Builder) => {
                f.write_str("blocking handoff (Builder::io_uring(false))")
            }
            Backend::Blocking(Fallback::Environment) => {
                f.write_str("blocking handoff (FERRY_IO_URING=0)")
            }
            Backend::Blocking(Fallback::Kernel(errno)) => write!(
                f,
                "blocking handoff (io_uring unavailable: {})",
                io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// Counts of one runtime's ring ([`crate::Handle::fs_ring_stats`]); all
/// zero without a ring. A snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingStats {
    /// Operations completed (reaped) since the ring was made.
    pub completed: u64,
    /// Entries submitted (operations, and the cancels of some) and not
    /// yet reaped.
    pub in_flight: usize,
    /// Operation records alive: in flight, or completed and not yet taken
    /// by their thread. A thread terminated while it waited leaves none
    /// once its operation completed.
    pub records: usize,
    /// Reads served on the calling thread by `preadv2` with `RWF_NOWAIT`
    /// (the data was in the page cache), with no ring entry.
    pub reads_without_ring: u64,
    /// Cancels submitted for a waiting thread's operation: by
    /// [`Thread::abort`](crate::Thread::abort), or by the termination of
    /// a thread that waited on the ring.
    pub cancels: u64,
}

/// One file operation to start; the borrowed data is copied into the
/// record.
#[derive(Debug, Clone)]
pub(crate) enum Request<'a> {
    /// Reads up to `len` bytes from `fd` at `offset` (`None`: at the file
    /// position, which it advances).
    Read {
        fd: RawFd,
        len: usize,
        offset: Option<u64>,
    },
    /// Writes `data` to `fd` at `offset` (`None`: at the file position).
    Write {
        fd: RawFd,
        data: &'a [u8],
        offset: Option<u64>,
    },
    /// Opens `path` (relative to the working directory) with `flags`
    /// and `mode`.
    Open {
        path: &'a CString,
        flags: i32,
        mode: u32,
    },
    /// `fsync`, or `fdatasync` if `data_only`.
    Fsync { fd: RawFd, data_only: bool },
    /// `statx` of `path` relative to `dirfd` with `flags` (`AT_*`) and
    /// `mask` (`STATX_*`); the record's buffer receives the `struct
    /// statx` ([`STATX_SIZE`] bytes).
    Statx {
        dirfd: RawFd,
        path: &'a CString,
        flags: i32,
        mask: u32,
    },
}

/// The bytes of the kernel's `struct statx`, which a [`Request::Statx`]'s
/// buffer holds when it completes.
pub(crate) const STATX_SIZE: usize = std::mem::size_of::<libc::statx>();

/// An operation record (see the module docs).
struct Op {
    /// The completion word ([`state`]).
    word: AtomicU32,
    /// The completion's result (`res`), stored before `word` says DONE.
    result: AtomicI32,
    /// Whether an abort cancelled the operation; written and read under
    /// the ring's watch lock ([`cancel`]).
    aborted: AtomicBool,
    /// Whom the completion wakes.
    who: Unparker,
    /// The data the kernel reads or writes.
    buf: UnsafeCell<Vec<u8>>,
    /// The path an open reads.
    path: Option<CString>,
    /// The ring's count of records, which outlives every record (a ring
    /// is dropped only with its runtime; records then in flight leak).
    records: *const AtomicUsize,
}

impl Drop for Op {
    fn drop(&mut self) {
        // SAFETY: see the field.
        unsafe { (*self.records).fetch_sub(1, Relaxed) };
    }
}

/// The owner's handle on an operation in flight.
pub(crate) struct Pending(NonNull<Op>);

// SAFETY: the handle names a boxed record that only its owner frees after
// the completion, and whose shared fields are atomics.
unsafe impl Send for Pending {}

impl Pending {
    /// Whether the completion arrived.
    pub(crate) fn is_done(&self) -> bool {
        // SAFETY: the record lives until `finish` or an abandon frees it,
        // and neither has run (the handle exists, and its thread runs).
        state::is_done(unsafe { &self.0.as_ref().word })
    }

    /// The address a terminator's [`abandon`] takes.
    pub(crate) fn as_ptr(&self) -> *const () {
        self.0.as_ptr().cast_const().cast()
    }

    /// After [`Pending::is_done`], and after the owner stopped being
    /// watched ([`Uring::unwatch`]): the result (bytes, or a new
    /// descriptor), the record's buffer, and whether an abort cancelled
    /// the operation (the result is then `EINTR`; an operation that
    /// completed before the cancel keeps its own result, and says
    /// `false`); frees the record.
    pub(crate) fn finish(self) -> (io::Result<u32>, Vec<u8>, bool) {
        debug_assert!(self.is_done());
        // SAFETY: done, so the kernel and the reaper let go of the record
        // (the reaper's last touch is the swap `is_done` saw), and only
        // this handle names it: it was `Box::into_raw`'d in `start`.
        let op = unsafe { Box::from_raw(self.0.as_ptr()) };
        let res = op.result.load(Relaxed);
        let aborted = op.aborted.load(Relaxed) && (res == -libc::ECANCELED || res == -libc::EINTR);
        let res = if aborted { -libc::EINTR } else { res };
        let result = if res < 0 {
            Err(io::Error::from_raw_os_error(-res))
        } else {
            Ok(res.unsigned_abs())
        };
        let mut op = op;
        (result, std::mem::take(op.buf.get_mut()), aborted)
    }
}

/// The terminator's side of a record whose owner stopped for good: frees
/// it if the completion already arrived, else leaves that to the reaper.
///
/// # Safety
/// `op` is [`Pending::as_ptr`] of a handle whose thread has stopped for
/// good, never finished, and this is called once for it.
unsafe fn abandon(op: *const ()) {
    let op = op.cast::<Op>();
    // SAFETY: the record lives until both the reaper and this abandon
    // passed its word (the contract: never finished).
    if state::abandon(unsafe { &(*op).word }) {
        // SAFETY: the reaper is done with it, and the owner never runs.
        drop(unsafe { Box::from_raw(op.cast_mut()) });
    }
}

/// One runtime's ring.
pub(crate) struct Uring {
    ring: IoUring,
    sq: Mutex<()>,
    cq: Mutex<()>,
    /// Operations submitted and not yet reaped.
    in_flight: AtomicUsize,
    /// Completions reaped since the ring was made.
    completed: AtomicU64,
    /// Records alive.
    records: AtomicUsize,
    /// Reads served without the ring ([`Uring::read_now`]).
    reads_now: AtomicU64,
    /// The owners that wait, by thread id ([`cancel`]).
    watched: cancel::Watched,
    /// Cancels submitted.
    cancels: AtomicU64,
    /// The reactor whose epoll set holds `eventfd`.
    reactor: Arc<Reactor>,
    /// Registered with the ring; closed after it.
    _eventfd: OwnedFd,
}

impl Uring {
    fn new(readiness: &Readiness) -> io::Result<Uring> {
        let ring = IoUring::builder()
            .setup_cqsize(ENTRIES * 2)
            .dontfork()
            .build(ENTRIES)?;
        let eventfd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let reactor = Arc::clone(readiness.reactor()?);
        reactor.watch(std::os::fd::AsFd::as_fd(&eventfd))?;
        Ok(Uring {
            ring,
            sq: Mutex::new(()),
            cq: Mutex::new(()),
            in_flight: AtomicUsize::new(0),
            completed: AtomicU64::new(0),
            records: AtomicUsize::new(0),
            reads_now: AtomicU64::new(0),
            watched: cancel::Watched::default(),
            cancels: AtomicU64::new(0),
            reactor,
            _eventfd: eventfd,
        })
    }

    /// The reactor (whose waiters the ring's waiters count among).
    pub(crate) fn reactor(&self) -> &Reactor {
        &self.reactor
    }

    /// The ring's counts. `in_flight` is read first (Acquire): the reaper
    /// counts an operation `completed` before it leaves `in_flight`, so
    /// counts that show none in flight include every completion.
    pub(crate) fn stats(&self) -> RingStats {
        let in_flight = self.in_flight.load(Acquire);
        RingStats {
            completed: self.completed.load(Relaxed),
            in_flight,
            records: self.records.load(Relaxed),
            reads_without_ring: self.reads_now.load(Relaxed),
            cancels: self.cancels.load(Relaxed),
        }
    }

    /// A read that would not block, on the calling thread: `preadv2` of
    /// `buf` at `offset` (`None`: the file position) with `RWF_NOWAIT`,
    /// which the kernel serves from the page cache or refuses with
    /// `EAGAIN`. `None` when the read must go to the ring: `EAGAIN` (not
    /// all cached: the kernel may still have returned fewer bytes, which
    /// is a short read, as `read(2)` may make), `EOPNOTSUPP` (the file
    /// does not take the flag), `ENOSYS`, or `EINTR` (the ring path
    /// decides about retries).
    pub(crate) fn read_now(
        &self,
        fd: BorrowedFd<'_>,
        buf: &mut [u8],
        offset: Option<u64>,
    ) -> Option<io::Result<usize>> {
        use rustix::io::{Errno, ReadWriteFlags};
        // `u64::MAX` is the kernel's -1: the file position, advanced.
        let at = offset.unwrap_or(u64::MAX);
        let res = rustix::io::preadv2(
            fd,
            &mut [io::IoSliceMut::new(buf)],
            at,
            ReadWriteFlags::NOWAIT,
        );
        match res {
            Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INTR) => None,
            Err(e) => Some(Err(e.into())),
            Ok(n) => {
                self.reads_now.fetch_add(1, Relaxed);
                Some(Ok(n))
            }
        }
    }

    /// Starts `req`, whose completion wakes `who`.
    ///
    /// # Errors
    /// `io_uring_enter`'s error other than a full completion queue or an
    /// interruption (which it retries); the operation was then not
    /// started.
    pub(crate) fn start(&self, req: Request<'_>, who: Unparker) -> io::Result<Pending> {
        let (buf, path) = match &req {
            Request::Read { len, .. } => (vec![0; (*len).min(MAX_IO)], None),
            Request::Write { data, .. } => (data[..data.len().min(MAX_IO)].to_vec(), None),
            Request::Open { path, .. } => (Vec::new(), Some((*path).clone())),
            Request::Fsync { .. } => (Vec::new(), None),
            Request::Statx { path, .. } => (vec![0; STATX_SIZE], Some((*path).clone())),
        };
        let op = Box::new(Op {
            word: state::new(),
            result: AtomicI32::new(0),
            aborted: AtomicBool::new(false),
            who,
            buf: UnsafeCell::new(buf),
            path,
            records: &raw const self.records,
        });
        self.records.fetch_add(1, Relaxed);
        let at = |offset: Option<u64>| offset.unwrap_or(u64::MAX);
        // The kernel's view of the buffer; the Vec's heap memory stays put
        // while the box moves.
        let (ptr, len) = {
            // SAFETY: nobody else sees the record yet.
            let buf = unsafe { &mut *op.buf.get() };
            (
                buf.as_mut_ptr(),
                u32::try_from(buf.len()).unwrap_or(u32::MAX),
            )
        };
        let entry = match req {
            Request::Read { fd, offset, .. } => opcode::Read::new(types::Fd(fd), ptr, len)
                .offset(at(offset))
                .build(),
            Request::Write { fd, offset, .. } => {
                opcode::Write::new(types::Fd(fd), ptr.cast_const(), len)
                    .offset(at(offset))
                    .build()
            }
            Request::Open { flags, mode, .. } => {
                let path = op.path.as_ref().expect("an open's record holds its path");
                opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr())
                    .flags(flags | libc::O_CLOEXEC)
                    .mode(mode)
                    .build()
            }
            Request::Fsync { fd, data_only } => {
                let flags = if data_only {
                    types::FsyncFlags::DATASYNC
                } else {
                    types::FsyncFlags::empty()
                };
                opcode::Fsync::new(types::Fd(fd)).flags(flags).build()
            }
            Request::Statx {
                dirfd, flags, mask, ..
            } => {
                let path = op.path.as_ref().expect("a statx's record holds its path");
                opcode::Statx::new(types::Fd(dirfd), path.as_ptr(), ptr.cast::<types::statx>())
                    .flags(flags)
                    .mask(mask)
                    .build()
            }
        };
        let op = NonNull::from(Box::leak(op));
        let entry = entry.user_data(op.as_ptr() as u64);
        self.in_flight.fetch_add(1, Release);
        if let Err(e) = self.submit(&entry) {
            self.in_flight.fetch_sub(1, Relaxed);
            // SAFETY: never submitted: only this frame names the record.
            drop(unsafe { Box::from_raw(op.as_ptr()) });
            return Err(e);
        }
        Ok(Pending(op))
    }

    /// Pushes `entry` and enters the kernel, under the submission lock.
    /// The entry is pushed once: an enter that fails for a moment (a full
    /// completion queue, an interruption) is retried without pushing it
    /// again, which would start the operation twice under one record.
    fn submit(&self, entry: &squeue::Entry) -> io::Result<()> {
        let _sq = self.sq.lock().unwrap_or_else(PoisonError::into_inner);
        let mut pushed = false;
        loop {
            if !pushed {
                // SAFETY: the submission lock makes this the only view of
                // the submission queue; the entry's buffers live in its
                // record until the completion.
                pushed = unsafe {
                    let mut sq = self.ring.submission_shared();
                    let pushed = sq.push(entry).is_ok();
                    sq.sync();
                    pushed
                };
            }
            match self.ring.submitter().submit() {
                // Submitted; or the queue was full, and this enter made
                // room for the push on the next turn.
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) =>
                {
                    // Completions the kernel could not post yet: reap and
                    // enter again (a pushed entry stays queued).
                    self.reap();
                    std::thread::yield_now();
                    continue;
                }
                Err(e) if !pushed => return Err(e),
                // Pushed and the enter failed otherwise: the entry stays
                // in the queue, and the next enter submits it.
                Err(_) => return Ok(()),
            }
            if pushed {
                return Ok(());
            }
        }
    }

    /// Whether completions may wait to be reaped: true also while another
    /// processor holds the completion lock. That one may have taken its
    /// look before the newest completion was posted, and the edge of the
    /// ring's eventfd that announced it may already be spent (a poller's
    /// harvest woke for it, found the lock held, and went back to sleep):
    /// a "no" here would let the last processor awake sleep with it
    /// unreaped, its owner parked for good. So a contended look says
    /// "look again" until the lock is free (`tests/loom_ring_look.rs`).
    fn has_completions(&self) -> bool {
        if self.in_flight.load(Acquire) == 0 {
            return false;
        }
        let Some(_cq) = self.try_lock_cq() else {
            return true;
        };
        // SAFETY: the completion lock makes this the only view.
        !unsafe { self.ring.completion_shared() }.is_empty()
    }

    /// The completion lock, unless another processor holds it (a panic
    /// under it changes nothing the queue's view depends on, so a
    /// poisoned lock is taken as it is).
    fn try_lock_cq(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        crate::lock::try_lock(&self.cq)
    }

    /// Reaps what completed (up to [`REAP`] per pass, the lock released
    /// between passes) and wakes the owners; returns how many. Nothing if
    /// another processor reaps ([`Uring::has_completions`] then says to
    /// look again).
    pub(crate) fn reap(&self) -> usize {
        let mut total = 0;
        loop {
            let mut done = [(0u64, 0i32); REAP];
            let n = {
                let Some(_cq) = self.try_lock_cq() else {
                    return total;
                };
                // SAFETY: the completion lock makes this the only view; its
                // drop publishes the new head.
                let cq = unsafe { self.ring.completion_shared() };
                let mut n = 0;
                for cqe in cq.take(REAP) {
                    done[n] = (cqe.user_data(), cqe.result());
                    n += 1;
                }
                n
            };
            let mut ops = 0;
            for &(data, res) in &done[..n] {
                if data == cancel::CANCEL_DATA {
                    // A cancel's own completion: its target's comes apart.
                    continue;
                }
                ops += 1;
                let op = data as *mut Op;
                // SAFETY: `data` is the address of a record `start` leaked
                // and submitted; it lives until its word's second party
                // (the owner's `finish`, or an abandon) let go, and this
                // is the first.
                unsafe {
                    (*op).result.store(res, Relaxed);
                    let who = (*op).who.clone();
                    if state::complete(&(*op).word) {
                        drop(Box::from_raw(op));
                    } else {
                        who.unpark();
                    }
                }
            }
            // Counted before they leave `in_flight` (see `stats`).
            self.completed.fetch_add(ops, Relaxed);
            self.in_flight.fetch_sub(n, Release);
            total += n;
            if n < REAP {
                return total;
            }
        }
    }
}
