//! The client's end of a channel: [`Client`] makes calls, and the channel
//! is an event source of the runtime that connected it (it implements
//! `event::polled::Polled`), so replies are found by whichever processor
//! polls: at its switches, in its idle spin, or woken by its doorbell.
//!
//! This module owns the calling path and the waiters' protocol; it must not
//! choose how a processor polls or sleeps (that is `event::polled`) nor
//! decode payloads (callers get bytes).
//!
//! # A call
//!
//! 1. A permit of the `free` semaphore (one per slot; a caller without one
//!    parks), then a slot reserved at a new generation (under `slots`).
//! 2. The arguments written into the slot (outside any lock), the waiter of
//!    the slot armed with the caller's unparker, the slot's index pushed on
//!    the call queue, the server's doorbell rung if its processors sleep.
//! 3. The caller parks until its waiter leaves `WAITING`.
//! 4. A poller pops the slot's index from the reply queue and moves the
//!    waiter to `REPLIED`, waking the caller; the caller copies the answer
//!    out, frees the slot and returns the permit.
//!
//! # The waiter of a slot
//!
//! Each slot has a waiter: the caller's unparker and a waiter word whose
//! states and owners are tabulated in `waiter.rs`. An index the reply queue
//! hands back for a waiter that expects nothing (forged, repeated, out of
//! range) is ignored and counted ([`Client::refused_replies`]).

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::time::Instant;

use ferry_queue::mpsc::{ShmConsumer, ShmProducer};
use ferry_queue::shm::Observer;

use super::bind::{self, Credentials};
use super::call::{CallOptions, STATUS_OK, status_error};
use super::dir::RuntimeDir;
use super::error::{Error, Result};
use super::layout::Side;
use super::memory::Memory;
use super::slots::{ClientSlots, SlotError, Ticket};
use super::waiter::{self, Outcome, Reply};
use super::watch::{self, Watched};
use crate::event::polled::{self, Polled};
use crate::header::Unparker;
use crate::runtime::Handle;
use crate::sync::{Semaphore, SpinLock};

/// One slot's waiter. Its word changes out of `WAITING` and its unparker
/// is taken under the `who` lock, and a caller arms both under it: a
/// poller that won one call's reply can never take the unparker of the
/// slot's next call (which would leave that call's reply unwoken).
struct Waiter {
    /// Its state (see `waiter.rs`).
    word: waiter::Waiter,
    /// The generation of the call the waiter waits for.
    generation: AtomicU32,
    who: SpinLock<Option<Unparker>>,
}

/// How a caller's wait for its reply ended.
enum Waited {
    /// The reply is in its slot.
    Replied,
    /// The peer died first.
    Dead,
    /// The deadline passed and the call was withdrawn.
    Abandoned,
}

/// The client's end of one channel, shared by its callers and the
/// processors that poll it.
pub(crate) struct ClientChan {
    // The `'static` endpoints borrow `mem`: declared before it, dropped
    // before it (see `memory`).
    slots: SpinLock<ClientSlots<'static>>,
    calls: SpinLock<ShmProducer<'static, u32>>,
    replies: SpinLock<ShmConsumer<'static, u32>>,
    replies_seen: Observer<'static, u32>,
    waiters: Box<[Waiter]>,
    free: Semaphore,
    /// Waiters in `WAITING` or `ABANDONED`.
    pending: AtomicUsize,
    dead: AtomicBool,
    /// Replies refused (forged, repeated or out of range).
    refused: AtomicU64,
    max_len: usize,
    mem: Memory,
}

impl ClientChan {
    fn new(mem: Memory) -> Result<ClientChan> {
        // SAFETY: everything built from this view is stored in the fields
        // above `mem` of the `ClientChan` being built, dropped before it,
        // and never handed out with the `'static` lifetime.
        let view = unsafe { mem.view_static() };
        let slots = ClientSlots::new(&view);
        let calls = view.call_producer()?;
        let replies = view.reply_consumer()?;
        let layout = *view.layout();
        let n = layout.slot_count() as usize;
        Ok(ClientChan {
            slots: SpinLock::new(slots),
            calls: SpinLock::new(calls),
            replies_seen: replies.observer(),
            replies: SpinLock::new(replies),
            waiters: (0..n)
                .map(|_| Waiter {
                    word: waiter::Waiter::new(),
                    generation: AtomicU32::new(0),
                    who: SpinLock::new(None),
                })
                .collect(),
            free: Semaphore::new(n),
            pending: AtomicUsize::new(0),
            dead: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            max_len: layout.slot_size().max(layout.extent_size()),
            mem,
        })
    }

    fn call(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
        if self.dead.load(Acquire) {
            return Err(Error::PeerDied);
        }
        if args.len() > self.max_len {
            return Err(Error::TooLarge);
        }
        self.free.acquire();
        let ticket = match self.slots.lock().reserve(args.len()) {
            Ok(t) => t,
            Err(e) => {
                self.free.release();
                return Err(slot_error(e));
            }
        };
        let result = self.make(op, args, opts, ticket);
        self.free.release();
        result
    }

    fn make(&self, op: u32, args: &[u8], opts: &CallOptions, ticket: Ticket) -> Result<Vec<u8>> {
        let arena = self.slots.lock().arena();
        arena.write_call(&ticket, op, args).map_err(slot_error)?;
        let w = &self.waiters[ticket.index as usize];
        {
            // The unparker and the word change together (see `Waiter`).
            let mut who = w.who.lock();
            *who = Some(Unparker::current());
            w.generation.store(ticket.generation, Relaxed);
            w.word.arm(&self.pending);
        }
        if self.calls.lock().try_push(ticket.index).is_err() {
            // Full (impossible with honest peers: a slot is in one queue at
            // a time) or corrupt: the channel is unusable.
            self.break_channel();
        }
        polled::ring(self.mem.view().doorbell(Side::Server), opts.urgent);
        // A waiter checks `dead` after arming: a death marked before it
        // armed was not seen by the poller's sweep.
        if self.dead.load(Acquire) {
            self.fail_waiters();
        }
        self.spin_for_reply(w);
        let waited = match opts.deadline {
            None => self.wait_reply(w, || false, crate::thread::park),
            // The deadline's timer is taken out of the wheel as soon as the
            // wait ends, reply or not.
            Some(d) => match Handle::try_current() {
                Some(h) => crate::thread::with_timer(&h.shared().sources.timers, d, |fired| {
                    self.wait_reply(w, fired, crate::thread::park)
                }),
                // Not in a runtime: a kernel thread waits by itself.
                None => self.wait_reply(
                    w,
                    || Instant::now() >= d,
                    || std::thread::park_timeout(d.saturating_duration_since(Instant::now())),
                ),
            },
        };
        match waited {
            Waited::Replied => {}
            Waited::Dead => {
                w.word.finish(&self.pending);
                return Err(Error::PeerDied);
            }
            Waited::Abandoned => return self.abandon(w, ticket),
        }
        let answer = arena.read_answer(&ticket);
        w.word.finish(&self.pending);
        let (status, bytes) = match answer {
            Ok(a) => a,
            Err(_) => {
                // The slot does not hold this call's reply although its
                // index came back: the server broke the protocol. The slot
                // stays out of use.
                return Err(Error::BadReply);
            }
        };
        let _ = self.slots.lock().release(&ticket);
        if status == STATUS_OK {
            Ok(bytes)
        } else {
            Err(status_error(status, op))
        }
    }

    /// Parks (with `park`) until the reply or the peer's death comes, or
    /// `due` says the deadline passed and the call could be withdrawn.
    fn wait_reply(&self, w: &Waiter, due: impl Fn() -> bool, park: impl Fn()) -> Waited {
        loop {
            match w.word.outcome() {
                Outcome::Replied => return Waited::Replied,
                Outcome::Dead => return Waited::Dead,
                Outcome::Waiting => {}
            }
            if due() {
                if w.word.abandon() {
                    return Waited::Abandoned;
                }
                // The answer (or the death) came meanwhile: take it.
                continue;
            }
            park();
        }
    }

    /// Before parking: with nothing else ready on its processor, the
    /// caller polls the reply queue itself for the runtime's spin budget
    /// (no park, no switch, no wake when the answer comes quickly).
    #[inline]
    fn spin_for_reply(&self, w: &Waiter) {
        crate::thread::spin_for(|| {
            if !self.replies_seen.is_empty() {
                self.take_replies();
            }
            (w.word.outcome() != Outcome::Waiting).then_some(())
        });
    }

    /// The caller's deadline passed: its waiter went from `WAITING` to
    /// `ABANDONED`.
    #[cold]
    fn abandon(&self, w: &Waiter, ticket: Ticket) -> Result<Vec<u8>> {
        let mut slots = self.slots.lock();
        if !slots.arena().holds_reply(&ticket) && w.word.claim_abandoned(&self.pending) {
            // Withdrawn before the server answered: a late answer fails its
            // compare-exchange and is never pushed. Free the slot now.
            let _ = slots.abandon(&ticket);
        }
        // Else the reply is in the slot and its index on its way: the
        // poller frees the slot when it pops it (ABANDONED -> IDLE).
        Err(Error::TimedOut)
    }

    /// Takes the replies off the queue (one poller at a time).
    fn take_replies(&self) {
        let Some(replies) = self.replies.try_lock() else {
            return;
        };
        loop {
            match replies.try_pop() {
                Ok(Some(index)) => self.replied(index),
                Ok(None) => break,
                Err(_) => {
                    drop(replies);
                    self.break_channel();
                    return;
                }
            }
        }
    }

    fn replied(&self, index: u32) {
        let Some(w) = self.waiters.get(index as usize) else {
            self.refused.fetch_add(1, Relaxed);
            return;
        };
        let mut who = w.who.lock();
        match w.word.reply() {
            Reply::Wake => {
                let taken = who.take();
                drop(who);
                if let Some(t) = taken {
                    t.unpark();
                }
            }
            Reply::Abandoned => {
                drop(who);
                let ticket = Ticket {
                    index,
                    generation: w.generation.load(Relaxed),
                };
                let mut slots = self.slots.lock();
                if slots.arena().read_answer(&ticket).is_ok() {
                    // The late reply: whoever claims the call frees it.
                    if w.word.claim_abandoned(&self.pending) {
                        let _ = slots.release(&ticket);
                    }
                } else {
                    self.refused.fetch_add(1, Relaxed);
                }
            }
            Reply::Refused => {
                drop(who);
                self.refused.fetch_add(1, Relaxed);
            }
        }
    }

    /// The peer broke the protocol in a way that leaves the channel
    /// unusable, or died: every call fails with `PeerDied`.
    fn break_channel(&self) {
        self.dead.store(true, Release);
        self.fail_waiters();
    }

    fn fail_waiters(&self) {
        for w in self.waiters.iter() {
            // An abandoned call is counted off too; its slot stays out of
            // use (the channel is dead).
            let mut who = w.who.lock();
            let taken = if w.word.fail(&self.pending) {
                who.take()
            } else {
                None
            };
            drop(who);
            if let Some(t) = taken {
                t.unpark();
            }
        }
    }
}

impl Polled for ClientChan {
    #[inline]
    fn is_ready(&self) -> bool {
        self.pending.load(Relaxed) != 0
            && (!self.replies_seen.is_empty() || self.dead.load(Relaxed))
    }

    fn deliver(&self) {
        if self.dead.load(Acquire) {
            self.fail_waiters();
        } else {
            self.take_replies();
        }
    }

    fn doorbell(&self) -> Option<&AtomicU32> {
        Some(self.mem.view().doorbell(Side::Client))
    }
}

impl Watched for ClientChan {
    fn peer_gone(&self) {
        self.break_channel();
    }
}

/// A connection to a server's interface: one channel, in shared memory,
/// polled by the runtime of the thread that connected. Clones share the
/// channel; calls from many threads at once are in flight together (up to
/// the channel's slots; further callers wait for a slot). The channel is
/// closed when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Connection>,
}

struct Connection {
    chan: Arc<ClientChan>,
    entry: Arc<dyn Polled>,
    runtime: Handle,
    watch: watch::Token,
}

impl Drop for Connection {
    fn drop(&mut self) {
        watch::unwatch(&self.watch);
        self.chan.mem.close(Side::Client);
        self.chan.break_channel();
        self.runtime.shared().remove_polled(&self.entry);
    }
}

impl Client {
    /// Binds to the server of interface `name` at version hash `version`
    /// in the user's runtime directory ([`RuntimeDir::user`]).
    ///
    /// # Errors
    /// Every binding error of [`bind::connect_raw`]; [`Error::BadLayout`]
    /// if the server's channel does not check out; [`Error::NoRuntime`]
    /// off a ferry thread.
    pub fn connect(name: &str, version: u64) -> Result<Client> {
        Client::connect_in(&RuntimeDir::user()?, name, version)
    }

    /// [`Client::connect`] in `dir`.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_in(dir: &RuntimeDir, name: &str, version: u64) -> Result<Client> {
        let runtime = Handle::try_current().ok_or(Error::NoRuntime)?;
        let binding = bind::connect_raw_in(dir, name, version)?;
        let mem = Memory::client(binding)?;
        let chan = Arc::new(ClientChan::new(mem)?);
        let watch = watch::watch(chan.clone(), chan.mem.peer().pid, chan.mem.socket())?;
        let entry: Arc<dyn Polled> = chan.clone();
        runtime.shared().add_polled(entry.clone());
        Ok(Client {
            inner: Arc::new(Connection {
                chan,
                entry,
                runtime,
                watch,
            }),
        })
    }

    /// Calls operation `op` with `args` and returns the result's bytes. The
    /// calling ferry thread parks meanwhile (its processor runs others).
    ///
    /// # Errors
    /// [`Error::PeerDied`] if the server died or broke the channel;
    /// [`Error::TooLarge`] for arguments over the channel's maximum;
    /// [`Error::UnknownOp`], [`Error::BadArgs`], [`Error::ServerPanicked`]
    /// as the server answered; [`Error::BadReply`] for a reply that does
    /// not follow the protocol.
    pub fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>> {
        self.inner.chan.call(op, args, &CallOptions::default())
    }

    /// [`Client::call`] with `opts`: a deadline ([`Error::TimedOut`] after
    /// it; the slot is reclaimed safely), an urgent wake.
    ///
    /// # Errors
    /// As [`Client::call`], and [`Error::TimedOut`].
    pub fn call_with(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
        self.inner.chan.call(op, args, opts)
    }

    /// The server's credentials, as the kernel reported them at binding.
    pub fn peer(&self) -> Credentials {
        self.inner.chan.mem.peer()
    }

    /// The interface name this client is bound to.
    pub fn name(&self) -> &str {
        self.inner.chan.mem.name()
    }

    /// The largest arguments or result one call may carry.
    pub fn max_call_len(&self) -> usize {
        self.inner.chan.max_len
    }

    /// Whether the server is known to be gone (calls fail with
    /// [`Error::PeerDied`]).
    pub fn is_dead(&self) -> bool {
        self.inner.chan.dead.load(Acquire)
    }

    /// Replies refused so far (forged, repeated or out of range indices).
    pub fn refused_replies(&self) -> u64 {
        self.inner.chan.refused.load(Relaxed)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.name())
            .field("peer", &self.peer())
            .field("dead", &self.is_dead())
            .finish()
    }
}

fn slot_error(e: SlotError) -> Error {
    match e {
        SlotError::TooLarge { .. } => Error::TooLarge,
        _ => Error::BadReply,
    }
}
