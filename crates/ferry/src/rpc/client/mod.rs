//! The client's end of a channel: [`Client`](super::Client) makes calls, and the channel
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
//!    out, frees the slot and returns the permit. What a poller does with
//!    a reply, and with a broken channel, is in `replies`.
//!
//! A caller terminated at any of steps 1-3 gives back what it took, and a
//! call the server may have seen is aborted (`call_wait`).
//!
//! # The waiter of a slot
//!
//! Each slot has a waiter: the caller's unparker and a waiter word whose
//! states and owners are tabulated in `waiter.rs`. An index the reply queue
//! hands back for a waiter that expects nothing (forged, repeated, out of
//! range) is ignored and counted ([`Client::refused_replies`](super::Client::refused_replies)).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::time::Instant;

use ferry_queue::mpsc::{ShmConsumer, ShmProducer};
use ferry_queue::shm::Observer;

use super::call::{CallOptions, STATUS_OK, status_error};
use super::error::{Error, Result};
use super::layout::Side;
use super::logical::{self, MAX_CONTEXT, Outgoing};
use super::memory::Memory;
use super::slots::{ABORT, ALERT, ClientSlots, SlotError, Ticket};
use super::waiter::{self, Outcome};
use crate::event::polled;
use crate::header::Unparker;
use crate::header::wait_record::{register as register_wait, unregister as unregister_wait};
use crate::runtime::Handle;
use crate::sync::{Semaphore, SpinLock};

mod call_wait;
mod replies;

use call_wait::{CallWait, Stage, critically};

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

/// A call sent, not yet finished.
pub(crate) struct Sent {
    ticket: Ticket,
    op: u32,
    /// The time stamp counter when the call began (before its context was
    /// encoded, with the run time read at the same moment).
    begun: u64,
    /// The calling thread (the one that waits), if a ferry thread.
    me: Option<crate::Thread>,
}

/// A call being waited for, as an alert of its caller finds it.
struct OutCall<'a> {
    chan: &'a ClientChan,
    ticket: Ticket,
}

impl Outgoing for OutCall<'_> {
    fn alert(&self) {
        self.chan.signal(&self.ticket, ALERT);
    }
}

/// Charges the run time `spent` that a server says it spent on a call
/// begun at counter reading `begun` to the current thread: never more than
/// the call took (a server cannot charge a client for time that did not
/// pass).
pub(super) fn charge_spent(spent: std::time::Duration, begun: u64) {
    let took = crate::sys::cycles().wrapping_sub(begun);
    crate::thread::charge_current_ticks(crate::sys::duration_to_cycles(spent).min(took));
}

/// Splits a reply's payload into the run time the server spent and the
/// result; `None` if it is too short to hold the first.
pub(super) fn split_spent(mut bytes: Vec<u8>) -> Option<(std::time::Duration, Vec<u8>)> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    bytes.drain(..8);
    Some((
        std::time::Duration::from_nanos(u64::from_ne_bytes(head)),
        bytes,
    ))
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
    pub(super) dead: AtomicBool,
    /// Replies refused (forged, repeated or out of range).
    pub(super) refused: AtomicU64,
    /// Calls sent (for the stats page).
    pub(super) made: AtomicU64,
    pub(super) max_len: usize,
    pub(super) mem: Memory,
}

impl ClientChan {
    pub(super) fn new(mem: Memory) -> Result<ClientChan> {
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
            made: AtomicU64::new(0),
            max_len: layout
                .slot_size()
                .max(layout.extent_size())
                .saturating_sub(logical::CONTEXT_ROOM),
            mem,
        })
    }

    pub(super) fn call(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
        // Registered before the call takes anything: a caller terminated
        // at any step gives back what it took (see `call_wait`).
        let me = crate::thread::try_current();
        let record = CallWait::new(self, Stage::Nothing, me.as_ref().map(|t| &t.header().rpc));
        if let Some(t) = &me {
            // SAFETY: `t` is the running thread, and `record` stays on this
            // frame until it is unregistered: by `wait_for`, or below.
            unsafe { register_wait(&t.header().waits, record.record()) };
        }
        match self.send_staged(op, args, opts, Some(&record)) {
            Ok(sent) => self.finish_staged(sent, opts.deadline, None, Some(&record)),
            Err(e) => {
                if let Some(t) = &me {
                    // SAFETY: registered above, at this address, by this
                    // thread; the failed send gave everything back.
                    unsafe { unregister_wait(&t.header().waits, record.record()) };
                }
                Err(e)
            }
        }
    }

    /// Sends a call: a permit, a slot, the context and the arguments
    /// written, the waiter armed with the current thread's unparker, the
    /// index pushed and the server rung. The caller then [`finish`]es it
    /// (on the same thread), which gives the permit back.
    ///
    /// [`finish`]: ClientChan::finish
    pub(crate) fn send(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Sent> {
        self.send_staged(op, args, opts, None)
    }

    /// [`send`](ClientChan::send), moving `record` through the call's
    /// stages as it goes.
    fn send_staged(
        &self,
        op: u32,
        args: &[u8],
        opts: &CallOptions,
        record: Option<&CallWait<'_>>,
    ) -> Result<Sent> {
        let stage = |s| {
            if let Some(r) = record {
                r.set(s);
            }
        };
        if self.dead.load(Acquire) {
            return Err(Error::PeerDied);
        }
        let me = crate::thread::try_current();
        // One counter read: the context's run time so far, and the start
        // of the call that bounds what the server may charge.
        let begun = crate::sys::cycles();
        let mut context = [0u8; MAX_CONTEXT];
        let head = logical::encode_current(me.as_ref(), opts.deadline, &mut context, begun)?;
        if args.len() > self.max_len {
            return Err(Error::TooLarge);
        }
        let len = head + args.len();
        // Each step and its stage in one critical section (`call_wait`).
        let took = critically(|| {
            let took = self.free.try_acquire();
            if took {
                stage(Stage::Permit);
            }
            took
        });
        if !took {
            self.free.acquire();
            stage(Stage::Permit);
        }
        let give_back = || {
            critically(|| {
                self.free.release();
                stage(Stage::Nothing);
            });
        };
        let reserved = {
            let mut slots = self.slots.lock();
            let r = slots.reserve(len);
            if let Ok(t) = r {
                stage(Stage::Slot(t));
            }
            r
        };
        let ticket = match reserved {
            Ok(t) => t,
            Err(e) => {
                give_back();
                return Err(slot_error(e));
            }
        };
        let arena = self.slots.lock().arena();
        if let Err(e) = arena.write_call_parts(&ticket, op, &context[..head], args) {
            {
                let mut slots = self.slots.lock();
                let _ = slots.release(&ticket);
                stage(Stage::Permit);
            }
            give_back();
            return Err(slot_error(e));
        }
        let w = &self.waiters[ticket.index as usize];
        {
            // The unparker and the word change together (see `Waiter`).
            let mut who = w.who.lock();
            *who = Some(Unparker::current());
            w.generation.store(ticket.generation, Relaxed);
            w.word.arm(&self.pending);
            stage(Stage::Armed(ticket));
        }
        if self.calls.lock().try_push(ticket.index).is_err() {
            // Full (impossible with honest peers: a slot is in one queue at
            // a time) or corrupt: the channel is unusable.
            self.break_channel();
        }
        self.made.fetch_add(1, Relaxed);
        polled::ring(self.mem.view().doorbell(Side::Server), opts.urgent);
        // A waiter checks `dead` after arming: a death marked before it
        // armed was not seen by the poller's sweep.
        if self.dead.load(Acquire) {
            self.fail_waiters();
        }
        Ok(Sent {
            ticket,
            op,
            begun,
            me,
        })
    }

    /// Waits for the reply to `sent` until `deadline` or until `abort` is
    /// set (its setter unparks this thread), and gives the slot's permit
    /// back. While it waits, an alert of this thread goes to the server
    /// (the thread's frame names this call).
    pub(crate) fn finish(
        &self,
        sent: Sent,
        deadline: Option<Instant>,
        abort: Option<&AtomicBool>,
    ) -> Result<Vec<u8>> {
        self.finish_staged(sent, deadline, abort, None)
    }

    /// [`finish`](ClientChan::finish) with the call's registered `record`
    /// (at `Armed`), or `None` to register one for the wait.
    fn finish_staged(
        &self,
        sent: Sent,
        deadline: Option<Instant>,
        abort: Option<&AtomicBool>,
        record: Option<&CallWait<'_>>,
    ) -> Result<Vec<u8>> {
        let result = self.wait_for(&sent, deadline, abort, record);
        self.free.release();
        result
    }

    fn wait_for(
        &self,
        sent: &Sent,
        deadline: Option<Instant>,
        abort: Option<&AtomicBool>,
        registered: Option<&CallWait<'_>>,
    ) -> Result<Vec<u8>> {
        let ticket = sent.ticket;
        let w = &self.waiters[ticket.index as usize];
        let aborted = || abort.is_some_and(|a| a.load(Acquire));
        let me = &sent.me;
        let out = OutCall { chan: self, ticket };
        // SAFETY: `own` is left below, before `out` goes (both live on this
        // frame, `out` longer).
        let own = unsafe { logical::Frame::calling(&out) };
        let mut entered = false;
        let mine = CallWait::new(
            self,
            Stage::Armed(ticket),
            me.as_ref().map(|t| &t.header().rpc),
        );
        let record = registered.unwrap_or(&mine);
        if let Some(t) = &me {
            if registered.is_none() {
                // SAFETY: `t` is the running thread, and `mine` stays on
                // this frame until it is unregistered below.
                unsafe { register_wait(&t.header().waits, mine.record()) };
            }
            if t.header().rpc.load(Relaxed) == 0 {
                // Our own frame, already naming the call.
                logical::enter(t, &own);
                entered = true;
            } else {
                // SAFETY: `t` is the current thread; `out` lives on this
                // frame and is cleared below, before it goes.
                unsafe { logical::set_outgoing(t, Some(&out)) };
            }
        }
        if !aborted() {
            self.spin_for_reply(w);
        }
        let waited = match deadline {
            None => self.wait_reply(w, aborted, crate::thread::park),
            // The deadline's timer is taken out of the wheel as soon as the
            // wait ends, reply or not.
            Some(d) => match Handle::try_current() {
                Some(h) => crate::thread::with_timer(&h.shared().sources.timers, d, |fired| {
                    self.wait_reply(w, || fired() || aborted(), crate::thread::park)
                }),
                // Not in a runtime: a kernel thread waits by itself.
                None => self.wait_reply(
                    w,
                    || Instant::now() >= d || aborted(),
                    || std::thread::park_timeout(d.saturating_duration_since(Instant::now())),
                ),
            },
        };
        if let Some(t) = &me {
            if entered {
                // After this nobody reaches `own`, nor `out` through it.
                logical::leave(t);
            } else {
                // SAFETY: `t` is the current thread; clearing names nothing.
                unsafe { logical::set_outgoing(t, None) };
            }
            // SAFETY: registered above or by `call`, at this address, by
            // this thread.
            unsafe { unregister_wait(&t.header().waits, record.record()) };
        }
        match waited {
            Waited::Replied => {}
            Waited::Dead => {
                w.word.finish(&self.pending);
                return Err(Error::PeerDied);
            }
            Waited::Abandoned => {
                let why = if aborted() {
                    Error::Aborted
                } else {
                    Error::DeadlineExceeded
                };
                return self.abandon(w, ticket, why);
            }
        }
        let arena = self.slots.lock().arena();
        let answer = arena.read_answer(&ticket);
        w.word.finish(&self.pending);
        let Ok((status, bytes)) = answer else {
            // The slot does not hold this call's reply although its index
            // came back: the server broke the protocol. The slot stays out
            // of use.
            return Err(Error::BadReply);
        };
        let _ = self.slots.lock().release(&ticket);
        let Some((spent, result)) = split_spent(bytes) else {
            return Err(Error::BadReply);
        };
        charge_spent(spent, sent.begun);
        if status == STATUS_OK {
            Ok(result)
        } else {
            Err(status_error(status, sent.op))
        }
    }

    /// The caller of `ticket` was terminated while it waited: its frame is
    /// left (nobody may reach its stack), the call withdrawn as an abort
    /// (the server's activation is alerted, a late reply discarded), and
    /// its permit given back. Runs on the terminator.
    fn terminated(&self, ticket: Ticket) {
        let w = &self.waiters[ticket.index as usize];
        if w.word.abandon() {
            let _ = self.abandon(w, ticket, Error::Aborted);
        } else {
            match w.word.outcome() {
                Outcome::Replied => {
                    w.word.finish(&self.pending);
                    let _ = self.slots.lock().release(&ticket);
                }
                _ => w.word.finish(&self.pending),
            }
        }
        self.free.release();
    }

    /// Signals `bits` to the server for the call `ticket` (still the
    /// caller's), and rings it.
    pub(crate) fn signal(&self, ticket: &Ticket, bits: u32) {
        let arena = self.slots.lock().arena();
        arena.signal(ticket, bits);
        self.mem.view().signals(Side::Client).fetch_add(1, Release);
        polled::ring(self.mem.view().doorbell(Side::Server), true);
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
    fn abandon(&self, w: &Waiter, ticket: Ticket, why: Error) -> Result<Vec<u8>> {
        // Tell the server first, while the slot is still this call's: its
        // activation is alerted, and its answer will be discarded.
        self.signal(&ticket, ALERT | ABORT);
        let mut slots = self.slots.lock();
        if !slots.arena().holds_reply(&ticket) && w.word.claim_abandoned(&self.pending) {
            // Withdrawn before the server answered: a late answer fails its
            // compare-exchange and is never pushed. Free the slot now.
            let _ = slots.abandon(&ticket);
        }
        // Else the reply is in the slot and its index on its way: the
        // poller frees the slot when it pops it (ABANDONED -> IDLE).
        Err(why)
    }
}

fn slot_error(e: SlotError) -> Error {
    match e {
        SlotError::TooLarge { .. } => Error::TooLarge,
        _ => Error::BadReply,
    }
}
