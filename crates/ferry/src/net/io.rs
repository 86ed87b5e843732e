//! The waiting half of every socket of this module: [`Io`] tries an
//! operation that must not block (`MSG_DONTWAIT`, a non-blocking
//! descriptor) and, when it would, parks the calling ferry thread on its
//! runtime's reactor until the socket is ready (or waits in `poll(2)` off
//! a runtime); and the reactor's wait lists ([`Lists`], behind the
//! [`Waiters`] hook).
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

use std::any::Any;
use std::collections::HashMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::atomic::fence;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::event::readiness::state::{self, READ_INTEREST, WRITE_INTEREST};
use crate::event::readiness::{CHUNK, MAX_CHUNKS, Reactor, Token, Waiters};
use crate::sync::SpinLock;
use crate::sync::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

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
                    let reactor = readiness.get_or_make(|| Box::new(Lists::new()))?;
                    let token = reactor.register(fd)?;
                    if self
                        .reg
                        .set(Reg {
                            reactor: Arc::clone(reactor),
                            token,
                        })
                        .is_err()
                    {
                        // Another thread registered first.
                        reactor.deregister(token, fd);
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
            Some(reg) if !reg.reactor.deregister(reg.token, fd) => Released::ClosedByRuntime,
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

/// The reader and writer lists of one registration.
#[derive(Default)]
struct DirLists {
    read: SpinLock<WaitList>,
    write: SpinLock<WaitList>,
}

/// A parked thread, for `Thread::abort`.
struct Parked {
    index: u32,
    dir: Dir,
    aborted: bool,
}

/// The wait lists of every registration of one reactor, in chunks laid
/// out as the reactor's slab; the reactor's [`Waiters`] hook.
pub(crate) struct Lists {
    chunks: Box<[OnceLock<Box<[DirLists]>>]>,
    /// Threads parked (by thread id), for `Thread::abort`.
    parked: SpinLock<HashMap<u64, Parked>>,
}

impl Lists {
    fn new() -> Lists {
        Lists {
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
            parked: SpinLock::new(HashMap::new()),
        }
    }

    fn of(&self, index: u32) -> &DirLists {
        let (c, i) = (index as usize / CHUNK, index as usize % CHUNK);
        &self.chunks[c].get_or_init(|| (0..CHUNK).map(|_| DirLists::default()).collect())[i]
    }

    fn list(&self, index: u32, dir: Dir) -> &SpinLock<WaitList> {
        let l = self.of(index);
        match dir {
            Dir::Read => &l.read,
            Dir::Write => &l.write,
        }
    }

    /// Wakes every waiter of `list`.
    fn wake_list(list: &SpinLock<WaitList>) {
        let entry = Entry::enter();
        let batch = list.lock_entered(&entry).take();
        // SAFETY: socket waiters never remove themselves from a batch (a
        // timed-out or aborted one removes itself only while `holds` says
        // it is queued); the batch is ours.
        unsafe { batch.wake_all(entry) };
    }

    /// Leaves the wait of a terminated waiter `w` (see `sync::waiter`'s
    /// termination table): a readiness wake is a broadcast, so there is
    /// nothing to pass on; and the reactor stops counting it.
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `list` is a registration's list of
    /// `reactor`, both alive (the slab and the lists are never freed while
    /// a socket of theirs exists), and `w` a waiter of it whose thread has
    /// stopped for good.
    unsafe fn abandon(list: *const (), reactor: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let (list, reactor) = unsafe {
            (
                &*list.cast::<SpinLock<WaitList>>(),
                &*reactor.cast::<Reactor>(),
            )
        };
        let entry = Entry::enter();
        let mut l = list.lock_entered(&entry);
        if l.holds(w) {
            // SAFETY: queued here (checked under the lock).
            unsafe { l.remove(w) };
        } else if !w.is_woken() && !w.is_out() {
            return false;
        }
        drop(l);
        drop(entry);
        reactor.wait_ends();
        true
    }
}

impl Waiters for Lists {
    fn wake(&self, index: u32, bits: u64) {
        let l = self.of(index);
        if bits & READ_INTEREST != 0 {
            Lists::wake_list(&l.read);
        }
        if bits & WRITE_INTEREST != 0 {
            Lists::wake_list(&l.write);
        }
    }

    fn has_parked(&self, index: u32) -> bool {
        let l = self.of(index);
        !l.read.lock().is_empty() || !l.write.lock().is_empty()
    }

    fn abort(&self, thread: u64) -> bool {
        let target = {
            let mut parked = self.parked.lock();
            match parked.get_mut(&thread) {
                Some(p) => {
                    p.aborted = true;
                    (p.index, p.dir)
                }
                None => return false,
            }
        };
        Lists::wake_list(self.list(target.0, target.1));
        true
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Parks the calling ferry thread until registration `t` of `reactor`
/// changes from `seen` in direction `dir` (see the module docs), or until
/// `deadline`.
fn wait(
    reactor: &Arc<Reactor>,
    t: Token,
    dir: Dir,
    seen: u64,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let lists = reactor
        .hook()
        .as_any()
        .downcast_ref::<Lists>()
        .expect("the reactor's hook is net's lists");
    let list = lists.list(t.index, dir);
    let word = reactor.word(t.index);
    let me = crate::thread::current();
    let id = me.id().as_u64();
    lists.parked.lock().insert(
        id,
        Parked {
            index: t.index,
            dir,
            aborted: false,
        },
    );
    // An alert that came before the wait aborts it here; one that comes
    // later finds it in `parked` (`thread::alert`'s module docs).
    fence(SeqCst);
    if me.alert_aborts_calls() {
        lists.parked.lock().remove(&id);
        return Err(aborted());
    }
    reactor.wait_begins();
    let what = match dir {
        Dir::Read => WaitsOn::Readable,
        Dir::Write => WaitsOn::Writable,
    };
    let outcome = {
        let entry = Entry::enter();
        // SAFETY: `abandon` takes a list of `reactor`'s lists and the
        // reactor, which outlive every wait on them (this thread holds an
        // `Arc` of the reactor, which holds the lists).
        let w = entry.waiter(
            unsafe { Site::new(Lists::abandon, list, Some(&**reactor)) }.describing(what, word),
        );
        let queued = {
            let mut l = list.lock_entered(&entry);
            let now = word.load(Acquire);
            if state::generation(now) != t.generation {
                Err(closed())
            } else if state::flags(now) & dir.interest() != 0
                || state::tick(now) != state::tick(seen)
            {
                Ok(false)
            } else {
                // SAFETY: `w` is in no list and stays on this frame until
                // it is woken or removes itself below under the lock.
                unsafe { l.push_back(&w) };
                Ok(true)
            }
        };
        drop(entry);
        match queued {
            Ok(true) => match deadline {
                // The timer is armed in the wheel for the park only, and
                // taken out when it ends.
                Some(d) => crate::thread::with_timer(&me.shared().sources.timers, d, |fired| {
                    park_until(list, &w, lists, id, Some(fired))
                }),
                None => park_until(list, &w, lists, id, None),
            },
            other => other.map(|_| ()),
        }
    };
    reactor.wait_ends();
    let aborted_wait = lists.parked.lock().remove(&id).is_some_and(|p| p.aborted);
    if aborted_wait {
        return Err(aborted());
    }
    outcome
}

/// The error of an aborted wait.
fn aborted() -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        "the wait on the socket was aborted",
    )
}

/// Parks until `w` is woken, or until the timer `fired` fires or the
/// thread is aborted: then takes `w` out of `list` itself (unless a waker
/// took it first).
fn park_until(
    list: &SpinLock<WaitList>,
    w: &Waiter,
    lists: &Lists,
    id: u64,
    fired: Option<&dyn Fn() -> bool>,
) -> io::Result<()> {
    loop {
        if w.is_woken() {
            return Ok(());
        }
        let aborted = || lists.parked.lock().get(&id).is_some_and(|p| p.aborted);
        let timed_out = fired.is_some_and(|f| f());
        if timed_out || aborted() {
            let entry = Entry::enter();
            let mut l = list.lock_entered(&entry);
            if l.holds(w) {
                // SAFETY: queued here (checked under the lock).
                unsafe { l.remove(w) };
                return if timed_out {
                    Err(timed_out_err())
                } else {
                    Ok(())
                };
            }
            if w.is_woken() {
                return Ok(());
            }
            // In a batch a waker is waking: it wakes us soon.
        }
        crate::thread::park();
    }
}

fn timed_out_err() -> io::Error {
    timed_out()
}
