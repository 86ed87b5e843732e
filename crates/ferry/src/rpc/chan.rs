//! The server's end of one channel: finding calls (it is an event source of
//! the server's runtime, `event::polled::Polled`), handing each to the
//! server's dispatch (a pool of service threads, or of activations), and
//! answering.
//!
//! This module owns the channel's queues and slots on the server side, the
//! reply's format (the run time spent, then the result), the path timing
//! and the signals a client sends about its calls; it must not decide which
//! thread runs a call (`pool` and `activation` do) nor how a processor
//! polls or sleeps (`event::polled`).
//!
//! # A call, on the server
//!
//! 1. A poller (a processor at a switch, spinning idle, or woken by the
//!    doorbell) sees the call queue non-empty, pops the slot indices (one
//!    poller at a time per channel) and hands each to the dispatch, stamped
//!    with the time it was seen when the server measures its path.
//! 2. A service thread or an activation copies the call out of its slot
//!    (checked: index, state, length, context), runs the [`Handler`](super::Handler),
//!    writes the answer into the slot (status in the op word) with a
//!    compare-exchange on the slot's control word, pushes the index on the
//!    reply queue and rings the client's doorbell if the client's
//!    processors sleep.
//!
//! A client that breaks the protocol (a corrupt queue) or dies has its
//! channel closed: its calls not yet answered are dropped (their answers
//! fail the compare-exchange or go nowhere), the activations serving them
//! are alerted, and nothing else is affected.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::time::Duration;

use ferry_queue::mpsc::{ShmConsumer, ShmProducer};
use ferry_queue::shm::Observer;

use super::call::{Fault, STATUS_BUSY, STATUS_OK};
use super::error::Result;
use super::layout::Side;
use super::memory::Memory;
use super::pool::{Job, Pool};
use super::slots::{IncomingCall, ServerSlots, SlotError};
use super::watch::Watched;
use crate::event::polled::{self, Polled};
use crate::sync::SpinLock;
use crate::sys;

/// Where a server's calls go: a pool of service threads (Mach's static
/// model, [`Pool`] of [`Served`]) or of activations (`activation`).
pub(crate) trait Dispatch: Send + Sync {
    /// Hands on the call in slot `index` of `chan`, seen at `seen` (from a
    /// poller: never blocks, never spawns).
    fn submit(&self, chan: &Arc<ServerChan>, index: u32, seen: u64);
    /// The client of `chan` signalled some of its calls (alerts, aborts).
    fn signalled(&self, chan: Arc<ServerChan>);
    /// The client of `chan` died: its calls are aborted.
    fn client_died(&self, chan: Arc<ServerChan>);
}

/// Mach's static model: calls wait on the pool's line for a service
/// thread; alerts and aborts do not reach it (the service thread knows
/// nothing of its caller).
impl Dispatch for Pool<Served> {
    fn submit(&self, chan: &Arc<ServerChan>, index: u32, seen: u64) {
        Pool::submit(
            self,
            Served {
                chan: chan.clone(),
                index,
                seen,
            },
        );
    }

    fn signalled(&self, _chan: Arc<ServerChan>) {}

    fn client_died(&self, _chan: Arc<ServerChan>) {}
}

/// What a channel tells the server that owns it.
pub(crate) trait Owner: Send + Sync {
    /// The client of `chan` is gone.
    fn peer_gone(&self, chan: &ServerChan);
}

/// The path timing of a server that measures it (in time stamp counter
/// ticks, summed over calls).
#[derive(Default)]
pub(crate) struct PathTicks {
    pub(crate) calls: AtomicU64,
    pub(crate) to_handler: AtomicU64,
    pub(crate) to_reply: AtomicU64,
}

/// A call for the static pool: slot `index` of `chan`, seen at `seen`.
pub(crate) struct Served {
    chan: Arc<ServerChan>,
    index: u32,
    seen: u64,
}

impl Job for Served {
    fn run(self, handler: &dyn super::call::Handler) {
        // Mach's static model: the service thread serves this call and goes
        // back to the pool's line for the next (it does not take calls off
        // the channel itself, as an activation does).
        let mut buf = Vec::new();
        self.chan
            .serve_static(self.index, self.seen, handler, &mut buf);
    }
}

/// The server's end of one channel.
pub(crate) struct ServerChan {
    // The `'static` endpoints borrow `mem`: declared before it, dropped
    // before it (see `memory`).
    calls: SpinLock<ShmConsumer<'static, u32>>,
    calls_seen: Observer<'static, u32>,
    replies: SpinLock<ShmProducer<'static, u32>>,
    pub(crate) slots: ServerSlots<'static>,
    /// The client's signal count (it bumps it after writing a slot's
    /// signal word, Release); read by pollers.
    signals: &'static AtomicU64,
    /// The count as last taken: a poller that swaps in a newer count
    /// delivers the signals (one poller per change).
    signals_seen: AtomicU64,
    pub(crate) dispatch: Arc<dyn Dispatch>,
    pub(crate) closed: AtomicBool,
    /// Run time this client's calls took on activations, in ns.
    pub(crate) cpu_ns: AtomicU64,
    /// Calls answered (for the stats page).
    pub(crate) served: AtomicU64,
    /// The server's path timing, if it measures it.
    path: Option<Arc<PathTicks>>,
    /// The server, to drop this channel as soon as its client is gone.
    server: std::sync::Weak<dyn Owner>,
    pub(crate) mem: Memory,
}

impl ServerChan {
    pub(crate) fn new(
        mem: Memory,
        dispatch: Arc<dyn Dispatch>,
        path: Option<Arc<PathTicks>>,
        server: std::sync::Weak<dyn Owner>,
    ) -> Result<ServerChan> {
        // SAFETY: everything built from this view is stored in the fields
        // above `mem` of the `ServerChan` being built, dropped before it,
        // and never handed out with the `'static` lifetime.
        let view = unsafe { mem.view_static() };
        let calls = view.call_consumer()?;
        let signals = view.signals(Side::Client);
        Ok(ServerChan {
            calls_seen: calls.observer(),
            calls: SpinLock::new(calls),
            replies: SpinLock::new(view.reply_producer()?),
            slots: ServerSlots::new(&view),
            signals_seen: AtomicU64::new(signals.load(Relaxed)),
            signals,
            dispatch,
            closed: AtomicBool::new(false),
            cpu_ns: AtomicU64::new(0),
            served: AtomicU64::new(0),
            path,
            server,
            mem,
        })
    }

    /// The clock read that stamps a call as seen (0 when the server does
    /// not measure its path).
    #[inline]
    pub(crate) fn stamp(&self) -> u64 {
        if self.path.is_some() {
            sys::cycles()
        } else {
            0
        }
    }

    /// Adds one call's path spans (from `seen` to `entered`, and from
    /// `returned` to now) to the server's timing.
    pub(crate) fn account_path(&self, seen: u64, entered: u64, returned: u64) {
        if let Some(p) = &self.path {
            let now = sys::cycles();
            p.calls.fetch_add(1, Relaxed);
            p.to_handler.fetch_add(entered.wrapping_sub(seen), Relaxed);
            p.to_reply.fetch_add(now.wrapping_sub(returned), Relaxed);
        }
    }

    /// Serves the call in slot `index` on the calling service thread (the
    /// static model: no context followed, no run time returned).
    fn serve_static(
        &self,
        index: u32,
        seen: u64,
        handler: &dyn super::call::Handler,
        buf: &mut Vec<u8>,
    ) {
        if self.closed.load(Acquire) {
            return;
        }
        let Ok((call, len)) = self.slots.read_call_into(index, buf) else {
            // Not a call (withdrawn, or scribbled on): nothing to answer.
            return;
        };
        let me = sys::process_identity().0;
        let Ok((_, head)) = super::logical::decode(&buf[..len], me) else {
            self.answer(&call, Err(Fault::BadArgs), Duration::ZERO);
            return;
        };
        let entered = self.stamp();
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handler.call(call.op, &buf[head..len])
        }))
        .unwrap_or(Err(Fault::Panicked));
        let returned = self.stamp();
        self.answer(&call, answer, Duration::ZERO);
        self.account_path(seen, entered, returned);
    }

    /// Answers `call` with `answer`, carrying `spent` (the run time spent
    /// on it), and rings the client.
    pub(crate) fn answer(
        &self,
        call: &IncomingCall,
        answer: std::result::Result<Vec<u8>, Fault>,
        spent: Duration,
    ) {
        if self.closed.load(Acquire) {
            return;
        }
        self.served.fetch_add(1, Relaxed);
        let head = (spent.as_nanos() as u64).to_ne_bytes();
        let written = match &answer {
            Ok(result) => match self
                .slots
                .write_answer_parts(call, STATUS_OK, &head, result)
            {
                Err(SlotError::TooLarge { .. }) => {
                    self.slots
                        .write_answer_parts(call, Fault::TooLarge.status(), &head, &[])
                }
                other => other,
            },
            Err(fault) => self
                .slots
                .write_answer_parts(call, fault.status(), &head, &[]),
        };
        if written.is_err() {
            // Withdrawn by the client (its deadline passed, or it aborted)
            // or scribbled on: nobody waits for this answer.
            return;
        }
        self.push_reply(call.index);
    }

    /// Refuses the call in slot `index`: the server's activations are all
    /// taken and it does not queue ([`super::Error::Busy`]).
    pub(crate) fn refuse_busy(&self, index: u32) {
        let mut scratch = Vec::new();
        let Ok((call, _)) = self.slots.read_call_into(index, &mut scratch) else {
            return;
        };
        let head = 0u64.to_ne_bytes();
        if self
            .slots
            .write_answer_parts(&call, STATUS_BUSY, &head, &[])
            .is_ok()
        {
            self.push_reply(index);
        }
    }

    fn push_reply(&self, index: u32) {
        if self.replies.lock().try_push(index).is_err() {
            self.close();
            return;
        }
        polled::ring(self.mem.view().doorbell(Side::Client), false);
    }

    /// After serving a call, with nothing else ready on its processor: the
    /// activation polls this channel for the runtime's spin budget and
    /// takes the next call itself (no poller, no pool hand-off, no wake),
    /// handing any further ones on.
    pub(crate) fn next_call(self: &Arc<Self>) -> Option<u32> {
        crate::thread::spin_for(|| {
            if self.closed.load(Relaxed) {
                return Some(None);
            }
            if self.calls_seen.is_empty() {
                return None;
            }
            let calls = self.calls.try_lock()?;
            let first = match calls.try_pop() {
                Ok(Some(index)) => index,
                Ok(None) => return Some(None),
                Err(_) => {
                    drop(calls);
                    self.close();
                    return Some(None);
                }
            };
            drop(calls);
            if !self.calls_seen.is_empty() {
                self.take_calls();
            }
            Some(Some(first))
        })
        .flatten()
    }

    /// Pops every call waiting and hands each on.
    pub(crate) fn take_calls(self: &Arc<Self>) {
        let Some(calls) = self.calls.try_lock() else {
            return;
        };
        loop {
            match calls.try_pop() {
                Ok(Some(index)) => self.dispatch(index),
                Ok(None) => break,
                Err(_) => {
                    drop(calls);
                    self.close();
                    return;
                }
            }
        }
    }

    fn dispatch(self: &Arc<Self>, index: u32) {
        self.dispatch.submit(self, index, self.stamp());
    }

    /// Whether the client signalled since the last look.
    #[inline]
    fn signalled(&self) -> bool {
        self.signals.load(Relaxed) != self.signals_seen.load(Relaxed)
    }

    /// Takes the client's signals: the activations serving its signalled
    /// calls are alerted (by the pool's keeper, a ferry thread).
    fn take_signals(self: &Arc<Self>) {
        let now = self.signals.load(Acquire);
        if self.signals_seen.swap(now, Relaxed) == now {
            return;
        }
        self.dispatch.signalled(self.clone());
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Release);
    }
}

/// A registered channel: the `Arc` the poller list holds, with the
/// `Arc<Self>` the jobs need.
pub(crate) struct Entry(pub(crate) Arc<ServerChan>);

impl Polled for Entry {
    #[inline]
    fn is_ready(&self) -> bool {
        !self.0.closed.load(Relaxed) && (!self.0.calls_seen.is_empty() || self.0.signalled())
    }

    fn deliver(&self) {
        if self.0.signalled() {
            self.0.take_signals();
        }
        self.0.take_calls();
    }

    fn doorbell(&self) -> Option<&AtomicU32> {
        Some(self.0.mem.view().doorbell(Side::Server))
    }
}

impl Watched for ServerChan {
    fn peer_gone(&self) {
        self.close();
        if let Some(server) = self.server.upgrade() {
            server.peer_gone(self);
        }
    }
}
