//! The server's end: [`Server`] serves one interface name; each client that
//! binds gets a channel, an event source of the server's runtime (it
//! implements `event::polled::Polled`), and its calls run on the server's
//! pool of ferry threads ([`super::pool`]).
//!
//! This module owns accepting, the server's channel ends and answering; it
//! must not decide how many threads serve (the pool does) nor how a
//! processor polls or sleeps (`event::polled`).
//!
//! # A call, on the server
//!
//! 1. A poller (a processor at a switch, spinning idle, or woken by the
//!    doorbell) sees the call queue non-empty, pops the slot indices (one
//!    poller at a time per channel) and hands each to the pool.
//! 2. A pool thread copies the call out of its slot (checked: index, state,
//!    length), runs the [`Handler`], writes the answer into the slot
//!    (status in the op word) with a compare-exchange on the slot's control
//!    word, pushes the index on the reply queue and rings the client's
//!    doorbell if the client's processors sleep.
//!
//! A client that breaks the protocol (a corrupt queue) or dies has its
//! channel closed: its calls not yet answered are dropped (their answers
//! fail the compare-exchange or go nowhere) and nothing else is affected.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use ferry_queue::mpsc::{ShmConsumer, ShmProducer};
use ferry_queue::shm::Observer;

use super::bind::{Credentials, Listener, Policy};
use super::call::{ChannelConfig, Fault, Handler, STATUS_OK};
use super::dir::RuntimeDir;
use super::error::{Error, Result};
use super::layout::Side;
use super::memory::Memory;
use super::pool::{Job, Pool};

/// A call for the pool: slot `index` of `chan`.
pub(crate) struct Served {
    chan: Arc<ServerChan>,
    index: u32,
}

impl Job for Served {
    fn run(self, handler: &dyn Handler) {
        let mut index = self.index;
        loop {
            self.chan.serve(index, handler);
            match self.chan.next_call() {
                Some(next) => index = next,
                None => return,
            }
        }
    }
}
use super::slots::ServerSlots;
use super::watch::{self, Watched};
use crate::event::polled::{self, Polled};
use crate::runtime::Handle;
use crate::sync::SpinLock;

/// The server's end of one channel.
pub(crate) struct ServerChan {
    // The `'static` endpoints borrow `mem`: declared before it, dropped
    // before it (see `memory`).
    calls: SpinLock<ShmConsumer<'static, u32>>,
    calls_seen: Observer<'static, u32>,
    replies: SpinLock<ShmProducer<'static, u32>>,
    slots: ServerSlots<'static>,
    pool: Arc<Pool<Served>>,
    closed: AtomicBool,
    /// The server, to drop this channel as soon as its client is gone.
    server: Weak<Shared>,
    mem: Memory,
}

impl ServerChan {
    fn new(mem: Memory, pool: Arc<Pool<Served>>, server: Weak<Shared>) -> Result<ServerChan> {
        // SAFETY: everything built from this view is stored in the fields
        // above `mem` of the `ServerChan` being built, dropped before it,
        // and never handed out with the `'static` lifetime.
        let view = unsafe { mem.view_static() };
        let calls = view.call_consumer()?;
        Ok(ServerChan {
            calls_seen: calls.observer(),
            calls: SpinLock::new(calls),
            replies: SpinLock::new(view.reply_producer()?),
            slots: ServerSlots::new(&view),
            pool,
            closed: AtomicBool::new(false),
            server,
            mem,
        })
    }

    /// Serves the call in slot `index` on the calling pool thread.
    pub(crate) fn serve(&self, index: u32, handler: &dyn Handler) {
        if self.closed.load(Acquire) {
            return;
        }
        let Ok(call) = self.slots.read_call(index) else {
            // Not a call (withdrawn, or scribbled on): nothing to answer.
            return;
        };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handler.call(call.op, &call.args)
        }))
        .unwrap_or(Err(Fault::Panicked));
        if self.closed.load(Acquire) {
            return;
        }
        let written = match &answer {
            Ok(result) => match self.slots.write_answer(&call, STATUS_OK, result) {
                Err(super::slots::SlotError::TooLarge { .. }) => {
                    self.slots
                        .write_answer(&call, Fault::TooLarge.status(), &[])
                }
                other => other,
            },
            Err(fault) => self.slots.write_answer(&call, fault.status(), &[]),
        };
        if written.is_err() {
            // Withdrawn by the client (its deadline passed) or scribbled
            // on: nobody waits for this answer.
            return;
        }
        if self.replies.lock().try_push(index).is_err() {
            self.close();
            return;
        }
        polled::ring(self.mem.view().doorbell(Side::Client), false);
    }

    /// After serving a call, with nothing else ready on its processor: the
    /// pool thread polls this channel for the runtime's spin budget and
    /// takes the next call itself (no poller, no pool hand-off, no wake),
    /// handing any further ones to the pool.
    fn next_call(self: &Arc<Self>) -> Option<u32> {
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

    fn take_calls(self: &Arc<Self>) {
        let Some(calls) = self.calls.try_lock() else {
            return;
        };
        loop {
            match calls.try_pop() {
                Ok(Some(index)) => self.pool.submit(Served {
                    chan: self.clone(),
                    index,
                }),
                Ok(None) => break,
                Err(_) => {
                    drop(calls);
                    self.close();
                    return;
                }
            }
        }
    }

    fn close(&self) {
        self.closed.store(true, Release);
    }
}

/// A registered channel: the `Arc` the poller list holds, with the
/// `Arc<Self>` the jobs need.
struct Entry(Arc<ServerChan>);

impl Polled for Entry {
    #[inline]
    fn is_ready(&self) -> bool {
        !self.0.calls_seen.is_empty() && !self.0.closed.load(Relaxed)
    }

    fn deliver(&self) {
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
            server.reap();
        }
    }
}

/// One bound client.
struct Bound {
    chan: Arc<ServerChan>,
    entry: Arc<dyn Polled>,
    watch: watch::Token,
}

/// What the server's accepting thread and its handle share.
struct Shared {
    listener: Listener,
    runtime: Handle,
    pool: Arc<Pool<Served>>,
    bound: Mutex<Vec<Bound>>,
    stopping: AtomicBool,
    accepted: AtomicU64,
}

impl Shared {
    /// Drops channels whose client is gone (called as clients come).
    fn reap(&self) {
        let gone: Vec<Bound> = {
            let mut bound = self.bound.lock().unwrap_or_else(PoisonError::into_inner);
            let (gone, live) = std::mem::take(&mut *bound)
                .into_iter()
                .partition(|b| b.chan.closed.load(Acquire));
            *bound = live;
            gone
        };
        for b in gone {
            self.unbind(b);
        }
    }

    fn unbind(&self, b: Bound) {
        watch::unwatch(&b.watch);
        b.chan.close();
        b.chan.mem.close(Side::Server);
        self.runtime.shared().remove_polled(&b.entry);
    }

    fn bind_one(self: &Arc<Self>, policy: &Policy<'_>) -> Result<()> {
        let accepted = self.listener.accept(policy)?;
        if self.stopping.load(Acquire) {
            return Err(Error::Closed);
        }
        let layout = self.listener_layout();
        let mem = Memory::server(accepted.binding, &layout)?;
        let chan = Arc::new(ServerChan::new(
            mem,
            self.pool.clone(),
            Arc::downgrade(self),
        )?);
        let watch = watch::watch(chan.clone(), chan.mem.peer().pid, chan.mem.socket())?;
        let entry: Arc<dyn Polled> = Arc::new(Entry(chan.clone()));
        self.runtime.shared().add_polled(entry.clone());
        self.accepted.fetch_add(1, Relaxed);
        self.bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Bound { chan, entry, watch });
        Ok(())
    }

    fn listener_layout(&self) -> super::layout::ChannelLayout {
        self.listener
            .layout()
            .expect("a server's listener always has a layout")
    }
}

/// Serves an interface: accepts clients by name and runs their calls on a
/// pool of ferry threads of the runtime it was started in. Dropping it (or
/// [`Server::close`]) stops accepting, closes every channel (their clients
/// get [`Error::PeerDied`]) and removes the socket file.
pub struct Server {
    shared: Arc<Shared>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

/// How a [`Server`] is set up.
pub struct ServerBuilder {
    config: ChannelConfig,
    max_threads: usize,
    allow: Option<Allow>,
}

/// A server's own check of a client's credentials.
type Allow = Box<dyn Fn(Credentials) -> bool + Send + Sync>;

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            config: ChannelConfig::default(),
            max_threads: super::pool::DEFAULT_MAX_THREADS,
            allow: None,
        }
    }
}

impl ServerBuilder {
    /// The channels' size (see [`ChannelConfig`]).
    pub fn channel(mut self, config: ChannelConfig) -> Self {
        self.config = config;
        self
    }

    /// The most ferry threads that serve calls at once (at least 1); more
    /// calls wait in line.
    pub fn max_threads(mut self, n: usize) -> Self {
        self.max_threads = n.max(1);
        self
    }

    /// Who may bind: exactly the clients for which `allow` returns true
    /// (it sees every client, of this user or another). Default: the
    /// server's own user only.
    pub fn allow(mut self, allow: impl Fn(Credentials) -> bool + Send + Sync + 'static) -> Self {
        self.allow = Some(Box::new(allow));
        self
    }

    /// Serves `name` at `version` in `dir` with `handler`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] off a ferry thread; every error of
    /// [`Listener::bind_in`]; [`Error::BadLayout`] for a configuration out
    /// of range.
    pub fn serve_in(
        self,
        dir: &RuntimeDir,
        name: &str,
        version: u64,
        handler: impl Handler,
    ) -> Result<Server> {
        let runtime = Handle::try_current().ok_or(Error::NoRuntime)?;
        let layout = self.config.layout()?;
        let mut listener = Listener::bind_in(dir, name, version)?;
        listener.set_layout(layout)?;
        let pool = Pool::start(&runtime, Arc::new(handler), self.max_threads)?;
        let shared = Arc::new(Shared {
            listener,
            runtime,
            pool,
            bound: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
        });
        let s = shared.clone();
        let allow = self.allow;
        let acceptor = std::thread::Builder::new()
            .name(format!("ferry-rpc-accept-{name}"))
            .spawn(move || {
                let policy = match &allow {
                    Some(f) => Policy::Custom(f),
                    None => Policy::SameUser,
                };
                while !s.stopping.load(Acquire) {
                    // A client that fails to bind fails alone.
                    let _ = s.bind_one(&policy);
                    s.reap();
                }
            })?;
        Ok(Server {
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// [`ServerBuilder::serve_in`] in the user's runtime directory.
    ///
    /// # Errors
    /// As [`ServerBuilder::serve_in`].
    pub fn serve(self, name: &str, version: u64, handler: impl Handler) -> Result<Server> {
        self.serve_in(&RuntimeDir::user()?, name, version, handler)
    }
}

impl Server {
    /// A builder, to set the channel size, the pool or the policy.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Serves `name` at interface version hash `version` in the user's
    /// runtime directory, with the defaults. Must be called on a ferry
    /// thread: calls run on ferry threads of its runtime.
    ///
    /// # Errors
    /// As [`ServerBuilder::serve_in`].
    pub fn serve(name: &str, version: u64, handler: impl Handler) -> Result<Server> {
        Server::builder().serve(name, version, handler)
    }

    /// [`Server::serve`] in `dir`.
    ///
    /// # Errors
    /// As [`ServerBuilder::serve_in`].
    pub fn serve_in(
        dir: &RuntimeDir,
        name: &str,
        version: u64,
        handler: impl Handler,
    ) -> Result<Server> {
        Server::builder().serve_in(dir, name, version, handler)
    }

    /// Clients bound so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Relaxed)
    }

    /// Clients bound now (those that are gone are dropped as new ones come
    /// and when counted).
    pub fn clients(&self) -> usize {
        self.shared.reap();
        self.shared
            .bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Ferry threads in the server's pool now.
    pub fn threads(&self) -> usize {
        self.shared.pool.threads()
    }

    /// Stops serving (as dropping does).
    pub fn close(self) {}
}

impl Drop for Server {
    fn drop(&mut self) {
        let s = &self.shared;
        s.stopping.store(true, Release);
        // Wake the accepting thread out of `accept`, and take the name
        // away now (the listener itself may outlive this handle a moment,
        // held by a channel's watch that is dropping it).
        s.listener.shutdown();
        s.listener.unlink();
        if let Some(t) = self.acceptor.take() {
            let _ = crate::blocking(|| t.join());
        }
        let bound = std::mem::take(&mut *s.bound.lock().unwrap_or_else(PoisonError::into_inner));
        for b in bound {
            s.unbind(b);
        }
        s.pool.stop();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.shared.listener.name())
            .field("accepted", &self.accepted())
            .finish()
    }
}
