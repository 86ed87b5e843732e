//! The waiting half of every socket of this module: [`Io`] tries an
//! operation that must not block (`MSG_DONTWAIT`, a non-blocking
//! descriptor) and, when it would, parks the calling ferry thread on its
//! runtime's reactor until the socket is ready (or waits in `poll(2)` off
//! a runtime); and the reactor's wait lists ([`Lists`], behind the
//! [`Waiters`](crate::event::readiness::Waiters) hook, in `lists`).
//!
//! This room owns the per-socket registration and timeouts, the reader
//! and writer wait lists of every registration, and the table of parked
//! threads that `Thread::abort` consults; it must not hold a wait list's
//! spinlock across a park or a system call, and never clears readiness
//! except through `state::clear` with the word it read before the try.
//!
//! # One operation
//!
//! 1. read the registration's word (`seen`), if registered;
//! 2. try the operation — unless `seen` says the direction is not ready
//!    (cleared at step 3 or by a short TCP read or write, with no edge
//!    since) and the caller is a thread of the registration's runtime,
//!    which then goes to step 4 without a call that would fail; done
//!    unless it fails with `EAGAIN` (a short TCP read or write clears the
//!    direction for `seen`'s tick, as Tokio does);
//! 3. register (the first time only; with the caller's runtime) and
//!    retry, or clear the direction for `seen`'s tick;
//! 4. take the direction's list lock, read the word again, and park only
//!    if neither its flags nor its tick changed since `seen` (a harvest
//!    sets the word before it takes that lock: no edge is lost, see
//!    `tests/loom_readiness.rs`); then go to 1.
//!
//! A thread parked here is in a `sync::waiter` list, so its termination
//! takes it out and the deadlock report names the socket; the reactor
//! counts it as waiting on something outside the runtime.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::event::readiness::state::{self, READ_INTEREST, WRITE_INTEREST};
use crate::event::readiness::{Reactor, Token};

mod lists;

pub(crate) use lists::Lists;
use lists::wait;

/// How many times one operation looks again for a registration another
/// thread sharing the socket is making before it gives up with `EEXIST`
/// (each look retries the operation: about a second of them).
const MAX_REGISTRATION_RACES: u32 = 1_000_000;

/// Which way an operation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Reads, receives, accepts.
    Read,
    /// Writes, sends, connects.
    Write,
}

impl Dir {
    fn interest(self) -> u64 {
        match self {
            Dir::Read => READ_INTEREST,
            Dir::Write => WRITE_INTEREST,
        }
    }

    fn ready_bit(self) -> u64 {
        match self {
            Dir::Read => state::READABLE,
            Dir::Write => state::WRITABLE,
        }
    }
}

/// A socket's registration with its runtime's reactor.
struct Reg {
    reactor: Arc<Reactor>,
    token: Token,
}

/// What a socket keeps beside its descriptor: its registration (made at
/// the first operation that would block) and its timeouts.
#[derive(Default)]
pub(crate) struct Io {
    reg: OnceLock<Reg>,
    /// Read and write timeouts in ns; 0 is none.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("registered", &self.reg.get().is_some())
            .finish()
    }
}

/// How [`Io::release`] left the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// Still open: the owner closes it.
    Open,
    /// Closed by the end of the runtime it was registered with (its owner
    /// was parked there for good): the owner must not close it again.
    ClosedByRuntime,
}

fn timeout_ns(t: Option<Duration>) -> io::Result<u64> {
    match t {
        None => Ok(0),
        Some(d) if d.is_zero() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        )),
        Some(d) => Ok(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
    }
}

fn ns_timeout(ns: u64) -> Option<Duration> {
    (ns != 0).then(|| Duration::from_nanos(ns))
}

impl Io {
    /// Sets the read timeout (`None`: wait for ever).
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for a zero duration, as std.
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(timeout_ns(t)?, Relaxed);
        Ok(())
    }

    /// Sets the write timeout, as [`Io::set_read_timeout`].
    ///
    /// # Errors
    /// As [`Io::set_read_timeout`].
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.write_timeout.store(timeout_ns(t)?, Relaxed);
        Ok(())
    }

    /// The read timeout.
    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        ns_timeout(self.read_timeout.load(Relaxed))
    }

    /// The write timeout.
    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        ns_timeout(self.write_timeout.load(Relaxed))
    }

    /// Runs `f` (an operation on `fd` that fails with `WouldBlock` instead
    /// of blocking) until it does not would-block, waiting for `dir`
    /// readiness in between, no longer than the direction's timeout
    /// (then `WouldBlock`, as std's timed-out socket calls). An `EINTR`
    /// is retried.
    ///
    /// # Errors
    /// `f`'s error; [`io::ErrorKind::WouldBlock`] after the timeout;
    /// [`io::ErrorKind::Interrupted`] if `Thread::abort` interrupted the
    /// wait; [`io::ErrorKind::NotConnected`] if the socket was closed
    /// (by its runtime's end) while waiting.
    pub(crate) fn op<T>(
        &self,
        fd: BorrowedFd<'_>,
        dir: Dir,
        f: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        self.op_draining(fd, dir, f, |_| false)
    }

    /// [`Io::op`] for a stream socket's `recv` or `send` of `len` bytes,
    /// which returns how many it moved: where a short one means that the
    /// socket's receive queue is empty or its send buffer full (TCP), a
    /// result of fewer than `len` bytes (but some) clears the direction's
    /// readiness as a `WouldBlock` does (Tokio's rule), and the next
    /// operation parks without a call that would fail; an edge that came
    /// meanwhile keeps it (see the module docs). `len` 0: never.
    ///
    /// # Errors
    /// As [`Io::op`].
    pub(crate) fn op_stream(
        &self,
        fd: BorrowedFd<'_>,
        dir: Dir,
        len: usize,
        f: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.op_draining(fd, dir, f, |&n| n > 0 && n < len)
    }

    /// [`Io::op`], where a result for which `drains` holds leaves the
    /// direction not ready.
    fn op_draining<T>(
        &self,
        fd: BorrowedFd<'_>,
        dir: Dir,
        mut f: impl FnMut() -> io::Result<T>,
        drains: impl Fn(&T) -> bool,
    ) -> io::Result<T> {
        let timeout = match dir {
            Dir::Read => self.read_timeout(),
            Dir::Write => self.write_timeout(),
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        // Looks that found the socket being registered by another thread
        // (see below); bounded, so that a registration nobody records
        // (which should not exist) fails the call instead of spinning.
        let mut raced_for = 0u32;
        loop {
            let seen = self
                .reg
                .get()
                .map(|r| r.reactor.word(r.token.index).load(Acquire));
            if !self.known_not_ready(seen, dir) {
                match f() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(done) => {
                        if let (Some(reg), Some(seen)) = (self.reg.get(), seen)
                            && drains(&done)
                        {
                            state::clear(reg.reactor.word(reg.token.index), seen, dir.ready_bit());
                        }
                        return Ok(done);
                    }
                    Err(e) => return Err(e),
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(timed_out());
            }
            let Some(me) = crate::thread::try_current() else {
                poll_fd(fd, dir, deadline)?;
                continue;
            };
            let readiness = &me.shared().sources.readiness;
            let reg = match (self.reg.get(), seen) {
                (Some(reg), Some(seen)) if !reg.reactor.has_ended() => {
                    let ours = readiness
                        .get()
                        .is_some_and(|r| Arc::ptr_eq(r, &reg.reactor));
                    if !ours {
                        // Registered with another runtime: wait as a
                        // kernel thread would.
                        drop(me);
                        poll_fd(fd, dir, deadline)?;
                        continue;
                    }
                    state::clear(reg.reactor.word(reg.token.index), seen, dir.ready_bit());
                    (reg, seen)
                }
                (Some(_), _) => {
                    drop(me);
                    poll_fd(fd, dir, deadline)?;
                    continue;
                }
                (None, _) => {
                    // The first makes the reactor, whose cell racers wait
                    // on for a moment: its maker is not switched out.
                    let reactor = crate::upcall::without_preemption(|| {
                        readiness.get_or_make(|| Box::new(Lists::new()))
                    })?;
                    // Registered and recorded in one section with
                    // preemption off: the reactor's free list is a spinlock
                    // other ferry threads spin on, and a thread sharing the
                    // socket (a reader and a writer of one stream) that
                    // races here finds the socket already in the epoll
                    // set (`EEXIST`) and looks again, which finds the
                    // registration recorded: its maker is never switched
                    // out in between.
                    let raced = crate::upcall::without_preemption(|| -> io::Result<bool> {
                        let token = match reactor.register(fd) {
                            Ok(token) => token,
                            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Ok(true),
                            Err(e) => return Err(e),
                        };
                        let reg = Reg {
                            reactor: Arc::clone(reactor),
                            token,
                        };
                        if self.reg.set(reg).is_err() {
                            // Another thread recorded a registration with
                            // another runtime's reactor meanwhile: ours goes.
                            reactor.deregister(token, fd);
                        }
                        Ok(false)
                    })?;
                    if raced {
                        raced_for += 1;
                        if raced_for > MAX_REGISTRATION_RACES {
                            return Err(io::Error::from_raw_os_error(libc::EEXIST));
                        }
                        std::hint::spin_loop();
                    }
                    // Try again: the registration reports the current
                    // readiness as its first edge.
                    continue;
                }
            };
            drop(me);
            let (reg, seen) = reg;
            wait(&reg.reactor, reg.token, dir, seen, deadline)?;
        }
    }

    /// Whether the registration's word `seen` says that the socket is not
    /// ready in direction `dir` (cleared by a `WouldBlock` or a draining
    /// operation, with no edge since) and the caller is a thread of the
    /// registration's runtime, whose harvests will set the word at the
    /// next edge: the operation would fail, so the caller parks without
    /// trying. Not before the first edge (tick 0): a new registration
    /// reports the socket's readiness as its first edge, which a harvest
    /// may not have seen yet. Not on another runtime or a kernel thread,
    /// which wait with `poll(2)` and never see the word change.
    fn known_not_ready(&self, seen: Option<u64>, dir: Dir) -> bool {
        let (Some(reg), Some(w)) = (self.reg.get(), seen) else {
            return false;
        };
        if state::tick(w) == 0 || state::flags(w) & dir.interest() != 0 || reg.reactor.has_ended() {
            return false;
        }
        // An entry, not `thread::try_current`: no reference to the thread
        // is taken on this path, which every read of a busy socket crosses.
        crate::upcall::enter().is_some_and(|e| {
            e.p.current_ref(&e.tok).is_some()
                && e.p
                    .shared()
                    .sources
                    .readiness
                    .get()
                    .is_some_and(|r| Arc::ptr_eq(r, &reg.reactor))
        })
    }

    /// Deregisters the socket `fd`, before it is closed (or handed out by
    /// `into_std`); says whether the runtime's end closed it already.
    pub(crate) fn release(&mut self, fd: BorrowedFd<'_>) -> Released {
        match self.reg.take() {
            // With preemption off, as the registration (the free list).
            Some(reg)
                if !crate::upcall::without_preemption(|| reg.reactor.deregister(reg.token, fd)) =>
            {
                Released::ClosedByRuntime
            }
            _ => Released::Open,
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::WouldBlock, "the socket's timeout passed")
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the socket was closed while a thread waited on it",
    )
}

/// Waits in `poll(2)` for `dir` readiness of `fd` (a kernel thread, or a
/// socket of another or an ended runtime).
fn poll_fd(fd: BorrowedFd<'_>, dir: Dir, deadline: Option<Instant>) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let flags = match dir {
        Dir::Read => PollFlags::IN | PollFlags::RDHUP,
        Dir::Write => PollFlags::OUT,
    };
    let mut fds = [PollFd::new(&fd, flags)];
    let ts = deadline.map(|d| {
        let left = d.saturating_duration_since(Instant::now());
        Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        }
    });
    let call = || match rustix::event::poll(&mut fds, ts.as_ref()) {
        Ok(_) => Ok(()),
        Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    };
    crate::fs::call_once(call)
}
