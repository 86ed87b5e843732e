//! Socket readiness: one epoll instance per runtime, edge-triggered, and
//! the readiness words of the sockets registered with it; an event source
//! (see the parent module).
//!
//! This room owns the epoll and wake descriptors, the slab of
//! registrations (each a readiness word, [`state`]), the harvest and its
//! token, and the count of threads waiting on sockets; it must not park or
//! wake a thread itself: the room above that waits on sockets (`net`)
//! keeps the wait lists and implements [`Waiters`], which a harvest calls
//! for each registration whose word it changed.
//!
//! # Registrations
//!
//! A socket is registered once, with `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`,
//! so no `epoll_ctl` runs per wait. Its slot in the slab is named in the
//! event's data as `index | generation << 32`; a slot is handed out again
//! after `EPOLL_CTL_DEL` with the next generation, so an event of the
//! earlier socket that a harvest still holds finds another generation in
//! the word and is dropped ([`state::set`]). Chunks of slots are never
//! freed (as Go's `pollcache`), so a word can be read without a lock.
//!
//! # Harvests
//!
//! | who | when | how |
//! |-----|------|-----|
//! | a busy processor | at a scheduling point ([`Every::Ticks`](super::Every::Ticks)), if threads wait on sockets and nobody harvested for [`HARVEST_EVERY`] | `epoll_wait` with timeout 0 |
//! | a spinning idle processor | every 64 looks for work, if threads wait on sockets and nobody harvested for [`SPIN_HARVEST_EVERY`] | `epoll_wait` with timeout 0: a request that arrives during the spin is served without a sleep |
//! | an idle processor (the *poller*, one at a time) | instead of its futex sleep, while threads wait on sockets | `epoll_wait` bounded by the sources' earliest moment; woken early through the wake eventfd |
//!
//! Every `epoll_wait` runs under the harvest token (`token`), so at most
//! one harvest runs at a time; a processor that finds it taken goes on
//! (the holder delivers). The wake eventfd is registered edge-triggered
//! and drained when its event is seen, so each later write is a new edge.
//!
//! # The runtime's end
//!
//! [`Readiness::shut_down`], called once every processor has stopped,
//! closes the sockets that threads of the runtime are parked on (those
//! threads never run again, and nothing else would close them), then the
//! epoll and wake descriptors; sockets used after that wait with `poll(2)`.

/// The atomics `state` uses (its loom model swaps in loom's).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}

mod source;
pub(crate) mod state;

pub(crate) use source::Readiness;

use once_cell::race::OnceBox;
use std::any::Any;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use ferry_queue::lock::SpinLock;
use rustix::event::epoll;

/// How long a busy processor lets pass between two harvests while threads
/// wait on sockets.
pub(crate) const HARVEST_EVERY: Duration = Duration::from_micros(50);
/// How long a spinning idle processor lets pass between two harvests
/// while threads wait on sockets: a socket that becomes ready during the
/// spin is seen within this, without the processor going to sleep.
pub(crate) const SPIN_HARVEST_EVERY: Duration = Duration::from_micros(5);
/// Slots per chunk of the slab.
pub(crate) const CHUNK: usize = 1024;
/// Chunks at most: 1,048,576 registrations.
pub(crate) const MAX_CHUNKS: usize = 1024;
/// Events one `epoll_wait` takes at most.
const EVENTS: usize = 256;
/// The event data of the wake eventfd (no slot has this index).
const WAKE_DATA: u64 = u64::MAX;
/// The event data of a watched descriptor ([`Reactor::watch`]: the ring's
/// eventfd, whose edge only ends the wait; no slot has this index).
const WATCHED_DATA: u64 = u64::MAX - 1;

/// The room above that waits on sockets: wakes the threads waiting on a
/// registration, and says which registrations have parked threads.
pub(crate) trait Waiters: Send + Sync + 'static {
    /// The word of registration `index` just got `bits` (see
    /// [`state`]): wake its threads waiting for any of them.
    fn wake(&self, index: u32, bits: u64);

    /// The runtime ended: whether threads of it are parked on registration
    /// `index` (they never run again).
    fn has_parked(&self, index: u32) -> bool;

    /// Interrupts the wait of the thread with id `thread` on a
    /// registration, if it waits on one (`Thread::abort`): true if it did.
    fn abort(&self, thread: u64) -> bool;

    /// The implementor, for the room that knows its type.
    fn as_any(&self) -> &dyn Any;
}

/// A registration's name: its slot and the generation it holds it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    /// The slot in the slab.
    pub(crate) index: u32,
    /// The slot's generation for this registration.
    pub(crate) generation: u32,
}

/// One slot of the slab.
struct Slot {
    /// The readiness word ([`state`]).
    word: AtomicU64,
    /// The registered descriptor, or -1.
    fd: AtomicI32,
    /// The next free slot after this one while it is on the free list
    /// ([`NO_SLOT`] at the end); read and written only under `free`'s lock.
    next_free: AtomicU32,
}

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

/// Free slots: the released ones first (a list threaded through the
/// slots, so that neither taking nor releasing allocates under the lock),
/// then the never-used ones from `next`.
struct Free {
    head: u32,
    next: u32,
}

/// The epoll instance of one runtime and its registrations.
pub(crate) struct Reactor {
    /// The epoll descriptor; -1 once the runtime ended.
    epoll: AtomicI32,
    /// The wake eventfd; -1 once the runtime ended.
    waker: AtomicI32,
    chunks: Box<[OnceBox<[Slot; CHUNK]>]>,
    /// Held for a few instructions (a pop or push of the free list, or a
    /// raise of `next`); never across an allocation or a system call.
    free: SpinLock<Free>,
    /// The harvest token: held by whoever is in `epoll_wait`.
    token: AtomicBool,
    /// Threads parked on a registration (or about to park).
    waiting: AtomicUsize,
    /// When a harvest last ended, in ns since `epoch`.
    last_harvest: AtomicU64,
    epoch: Instant,
    /// Whether the runtime ended ([`Readiness::shut_down`]).
    ended: AtomicBool,
    /// Set by the first socket (a reactor made for the ring has none yet).
    hook: OnceBox<Box<dyn Waiters>>,
}

impl Reactor {
    fn new() -> io::Result<Reactor> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let waker = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        epoll::add(
            &ep,
            &waker,
            epoll::EventData::new_u64(WAKE_DATA),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )?;
        Ok(Reactor {
            epoll: AtomicI32::new(ep.into_raw_fd()),
            waker: AtomicI32::new(waker.into_raw_fd()),
            chunks: (0..MAX_CHUNKS).map(|_| OnceBox::new()).collect(),
            free: SpinLock::new(Free {
                head: NO_SLOT,
                next: 0,
            }),
            token: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            last_harvest: AtomicU64::new(0),
            epoch: Instant::now(),
            ended: AtomicBool::new(false),
            hook: OnceBox::new(),
        })
    }

    /// The hook the reactor was made with.
    pub(crate) fn hook(&self) -> &dyn Waiters {
        &**self.hook.get().expect("a socket registered sets the hook")
    }

    /// Adds `fd` to the epoll set (edge-triggered, readable): its events
    /// only end a blocking harvest. For the ring's eventfd.
    ///
    /// # Errors
    /// `epoll_ctl`'s, or [`io::ErrorKind::Other`] once the runtime ended.
    pub(crate) fn watch(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let Some(ep) = self.epoll_fd() else {
            return Err(io::Error::other("the runtime ended"));
        };
        let flags = epoll::EventFlags::IN | epoll::EventFlags::ET;
        Ok(epoll::add(
            ep,
            fd,
            epoll::EventData::new_u64(WATCHED_DATA),
            flags,
        )?)
    }

    fn slot(&self, index: u32) -> &Slot {
        let (c, i) = (index as usize / CHUNK, index as usize % CHUNK);
        &self.chunks[c]
            .get()
            .expect("a slot handed out lives in a made chunk")[i]
    }

    /// The readiness word of registration `index`.
    pub(crate) fn word(&self, index: u32) -> &AtomicU64 {
        &self.slot(index).word
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether the runtime ended: sockets wait with `poll(2)` now.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Acquire)
    }

    /// The epoll descriptor, unless the runtime ended.
    fn epoll_fd(&self) -> Option<BorrowedFd<'_>> {
        let fd = self.epoll.load(Acquire);
        // SAFETY: the descriptor stays open until `shut_down`, which runs
        // once every processor stopped; a socket used after that sees
        // `ended` first (see the module docs).
        (fd >= 0 && !self.has_ended()).then(|| unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// Registers `fd` (edge-triggered, both directions).
    ///
    /// # Errors
    /// [`io::ErrorKind::Other`] once the runtime ended or with every slot
    /// taken; `epoll_ctl`'s error (e.g. out of memory).
    pub(crate) fn register(&self, fd: BorrowedFd<'_>) -> io::Result<Token> {
        let Some(ep) = self.epoll_fd() else {
            return Err(io::Error::other("the runtime of this socket ended"));
        };
        let index = {
            let mut free = self.free.lock();
            if free.head != NO_SLOT {
                let i = free.head;
                free.head = self.slot(i).next_free.load(Relaxed);
                i
            } else {
                let i = free.next;
                if i as usize >= CHUNK * MAX_CHUNKS {
                    return Err(io::Error::other("too many sockets registered"));
                }
                free.next += 1;
                i
            }
        };
        // The chunk of a never-used slot is made outside the lock (once per
        // `CHUNK` registrations). Racers for the same new chunk each make
        // one and the first to install it wins (the others drop theirs):
        // none waits for a maker, which a time slice may have switched
        // out, in a kernel wait that would cost it its processor.
        self.chunks[index as usize / CHUNK].get_or_init(|| {
            let slots: Box<[Slot]> = (0..CHUNK)
                .map(|_| Slot {
                    word: AtomicU64::new(state::fresh(0)),
                    fd: AtomicI32::new(-1),
                    next_free: AtomicU32::new(NO_SLOT),
                })
                .collect();
            slots.try_into().ok().expect("CHUNK slots")
        });
        let slot = self.slot(index);
        let generation = state::generation(slot.word.load(Acquire));
        slot.word.store(state::fresh(generation), Release);
        slot.fd.store(fd.as_raw_fd(), Release);
        let data = u64::from(index) | u64::from(generation) << 32;
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::OUT
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::ET;
        let token = Token { index, generation };
        if let Err(e) = epoll::add(ep, fd, epoll::EventData::new_u64(data), flags) {
            self.release(token);
            return Err(e.into());
        }
        Ok(token)
    }

    /// Deregisters `t`'s socket `fd` (before it is closed: a registration
    /// outlives the descriptor while a duplicate of it is open), ends the
    /// registration and wakes its waiters, who find it [`state::CLOSED`].
    /// Returns false (and does nothing) if the runtime's end already did.
    pub(crate) fn deregister(&self, t: Token, fd: BorrowedFd<'_>) -> bool {
        if state::generation(self.word(t.index).load(Acquire)) != t.generation {
            return false;
        }
        if let Some(ep) = self.epoll_fd() {
            let _ = epoll::delete(ep, fd);
        }
        self.release(t);
        true
    }

    fn release(&self, t: Token) {
        let slot = self.slot(t.index);
        slot.fd.store(-1, Release);
        state::retire(&slot.word, t.generation);
        self.hook().wake(t.index, state::CLOSED);
        let mut free = self.free.lock();
        slot.next_free.store(free.head, Relaxed);
        free.head = t.index;
    }

    /// A thread starts waiting on a registration.
    pub(crate) fn wait_begins(&self) {
        self.waiting.fetch_add(1, SeqCst);
    }

    /// A thread stops waiting on a registration.
    pub(crate) fn wait_ends(&self) {
        self.waiting.fetch_sub(1, Release);
    }

    /// How many threads wait on registrations.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(SeqCst)
    }

    /// Wakes the processor blocked in `epoll_wait`, if one is (a write to
    /// the wake eventfd, which is a new edge each time).
    pub(crate) fn wake_poller(&self) {
        let fd = self.waker.load(Acquire);
        if fd < 0 {
            return;
        }
        // SAFETY: open until `shut_down`, after every processor stopped.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
    }

    /// Harvests if the token is free: one `epoll_wait` bounded by `timeout`
    /// (`None`: until an event or a wake), then sets the words and wakes
    /// their waiters. Returns how many registrations changed, or `None` if
    /// another harvest runs (or the runtime ended).
    pub(crate) fn harvest(&self, timeout: Option<Duration>) -> Option<usize> {
        if self.token.swap(true, Acquire) {
            return None;
        }
        let n = self.harvest_holding_token(timeout);
        self.last_harvest.store(self.now(), Relaxed);
        self.token.store(false, Release);
        n
    }

    fn harvest_holding_token(&self, timeout: Option<Duration>) -> Option<usize> {
        let ep = self.epoll_fd()?;
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); EVENTS];
        let ts = timeout.map(|d| rustix::event::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let (got, _) = match epoll::wait(ep, &mut events[..], ts.as_ref()) {
            Ok(got) => got,
            Err(_) => return Some(0),
        };
        let mut changed = 0;
        for e in got.iter() {
            let data = e.data.u64();
            if data == WAKE_DATA {
                self.drain_waker();
                continue;
            }
            if data == WATCHED_DATA {
                continue;
            }
            let (index, generation) = (data as u32, (data >> 32) as u32);
            let bits = bits_of(e.flags);
            if state::set(self.word(index), generation, bits).is_some() {
                changed += 1;
                self.hook().wake(index, bits);
            }
        }
        Some(changed)
    }

    fn drain_waker(&self) {
        let fd = self.waker.load(Acquire);
        if fd >= 0 {
            // SAFETY: as in `wake_poller`.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let mut buf = [0u8; 8];
            let _ = rustix::io::read(fd, &mut buf);
        }
    }

    /// Whether a busy processor should harvest now: threads wait, the
    /// token is free and nobody harvested for [`HARVEST_EVERY`].
    fn due(&self) -> bool {
        self.waiting.load(Relaxed) != 0
            && !self.token.load(Relaxed)
            && self.now().saturating_sub(self.last_harvest.load(Relaxed))
                >= HARVEST_EVERY.as_nanos() as u64
    }

    /// For a spinning idle processor: harvests without waiting if threads
    /// wait on sockets, the token is free and nobody harvested for
    /// [`SPIN_HARVEST_EVERY`]. True if it woke anyone.
    pub(crate) fn harvest_while_spinning(&self) -> bool {
        self.waiting.load(Relaxed) != 0
            && !self.token.load(Relaxed)
            && self.now().saturating_sub(self.last_harvest.load(Relaxed))
                >= SPIN_HARVEST_EVERY.as_nanos() as u64
            && self
                .harvest(Some(Duration::ZERO))
                .is_some_and(|changed| changed != 0)
    }

    /// The runtime ended (see the module docs).
    fn shut_down(&self) {
        if self.ended.swap(true, AcqRel) {
            return;
        }
        while self.token.swap(true, Acquire) {
            std::hint::spin_loop();
        }
        let next = self.free.lock().next;
        for index in 0..next {
            // A slot handed out by a registration still making its chunk
            // holds no descriptor yet.
            let Some(chunk) = self.chunks[index as usize / CHUNK].get() else {
                continue;
            };
            let slot = &chunk[index as usize % CHUNK];
            let fd = slot.fd.load(Acquire);
            if fd >= 0 && self.hook().has_parked(index) {
                let g = state::generation(slot.word.load(Acquire));
                slot.fd.store(-1, Release);
                state::retire(&slot.word, g);
                // SAFETY: the socket's owner is parked for good on a thread
                // of this ended runtime, so nobody else closes or uses the
                // descriptor: its drop (if ever) sees the generation moved
                // on and leaves it (`net`).
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        for fd in [&self.epoll, &self.waker] {
            let raw: RawFd = fd.swap(-1, AcqRel);
            if raw >= 0 {
                // SAFETY: ours since `new`, and no harvest or wake uses it
                // now (`ended`, and the token held for good).
                drop(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
    }
}

/// The readiness flags an epoll event stands for.
fn bits_of(f: epoll::EventFlags) -> u64 {
    let mut bits = 0;
    if f.contains(epoll::EventFlags::IN) {
        bits |= state::READABLE;
    }
    if f.contains(epoll::EventFlags::OUT) {
        bits |= state::WRITABLE;
    }
    if f.contains(epoll::EventFlags::RDHUP) {
        bits |= state::READ_CLOSED;
    }
    if f.contains(epoll::EventFlags::HUP) {
        bits |= state::READ_CLOSED | state::WRITE_CLOSED;
    }
    if f.contains(epoll::EventFlags::ERR) {
        bits |= state::ERROR;
    }
    bits
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::sync::{Arc, Mutex as StdMutex};

    use super::*;

    /// A hook that records the wakes.
    #[derive(Default)]
    struct Log(StdMutex<Vec<(u32, u64)>>);

    impl Waiters for Arc<Log> {
        fn wake(&self, index: u32, bits: u64) {
            self.0.lock().unwrap().push((index, bits));
        }
        fn has_parked(&self, _: u32) -> bool {
            false
        }
        fn abort(&self, _: u64) -> bool {
            false
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn an_edge_sets_the_word_once_and_a_closed_registration_drops_stale_events() {
        let log = Arc::new(Log::default());
        let readiness = Readiness::new();
        let hook = Arc::clone(&log);
        let r = readiness.get_or_make(|| Box::new(hook)).unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let t = r.register(a.as_fd()).unwrap();
        assert_eq!(r.harvest(Some(Duration::ZERO)), Some(1), "writable at once");
        let w = r.word(t.index).load(Acquire);
        assert_eq!(state::flags(w), state::WRITABLE);
        assert_eq!(
            r.harvest(Some(Duration::ZERO)),
            Some(0),
            "an edge, not a level"
        );
        b.write_all(b"x").unwrap();
        assert_eq!(r.harvest(Some(Duration::from_secs(10))), Some(1));
        let w2 = r.word(t.index).load(Acquire);
        assert_ne!(state::flags(w2) & state::READABLE, 0);
        assert_ne!(state::tick(w2), state::tick(w));
        b.write_all(b"y").unwrap();
        assert!(r.deregister(t, a.as_fd()));
        assert!(!r.deregister(t, a.as_fd()), "once");
        assert_eq!(r.harvest(Some(Duration::ZERO)), Some(0), "deregistered");
        let t2 = r.register(b.as_fd()).unwrap();
        assert_eq!(t2.index, t.index, "the slot is reused");
        assert_eq!(t2.generation, t.generation + 1);
        assert!(
            state::set(r.word(t.index), t.generation, state::READABLE).is_none(),
            "an event of the old socket is stale"
        );
        let wakes = log.0.lock().unwrap().clone();
        assert!(wakes.contains(&(t.index, state::CLOSED)));
        readiness.shut_down();
        assert!(r.has_ended());
        assert!(r.register(a.as_fd()).is_err());
    }

    #[test]
    fn a_wake_ends_a_blocking_harvest() {
        let readiness = Arc::new(Readiness::new());
        let r = Arc::clone(
            readiness
                .get_or_make(|| Box::new(Arc::new(Log::default())))
                .unwrap(),
        );
        let r2 = Arc::clone(&r);
        let blocked = std::thread::spawn(move || r2.harvest(None));
        while !r.token.load(Acquire) {
            std::thread::yield_now();
        }
        r.wake_poller();
        assert_eq!(blocked.join().unwrap(), Some(0));
        readiness.shut_down();
    }
}
