//! The server: [`Server`] serves one interface name; each client that binds
//! gets a channel (`chan`), an event source of the server's runtime, and
//! its calls run as the server chose at serve time ([`ServeMode`]): on
//! activations, as migrating calls (`activation`), or on a pool of service
//! threads (`pool`, Mach's static model).
//!
//! This module owns accepting, the server's configuration and its
//! bookkeeping of bound clients; it must not serve a call itself (`chan`,
//! `activation` and `pool` do).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::activation::{ActivationStats, Activations, OnPoolLow, PoolConfig, PoolLow, WhenFull};
use super::bind::{Credentials, Listener, Policy};
use super::call::{ChannelConfig, Handler};
use super::chan::{Dispatch, Entry, Owner, PathTicks, Served, ServerChan};
use super::dir::RuntimeDir;
use super::error::{Error, Result};
use super::layout::Side;
use super::memory::Memory;
use super::pool::Pool;
use super::watch;
use crate::event::polled::Polled;
use crate::runtime::Handle;

/// How a server runs its calls, chosen at serve time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeMode {
    /// Migrating calls (000): each call occupies an activation of the
    /// server's pool and runs as its caller's logical thread — at the
    /// caller's priority, its run time charged back to the caller, alerts
    /// and aborts reaching it. The default.
    Migrating,
    /// Mach's static model: a fixed pool of service threads takes calls
    /// from a line in arrival order, at their own priority; the server
    /// keeps the run time (nothing is charged back) and alerts do not cross.
    Static,
}

impl ServeMode {
    /// The default: [`ServeMode::Migrating`], or what the environment
    /// variable `FERRY_RPC_MODE` says (`static` or `migrating`), so that
    /// one test suite runs in both modes.
    pub fn from_env() -> ServeMode {
        match std::env::var("FERRY_RPC_MODE").as_deref() {
            Ok("static") => ServeMode::Static,
            _ => ServeMode::Migrating,
        }
    }
}

/// A server's path timing ([`ServerBuilder::measure_path`]): sums over the
/// calls served, as 000's Table 3 splits a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Calls measured.
    pub calls: u64,
    /// From the call seen by the server's poller to the handler's entry.
    pub to_handler: Duration,
    /// From the handler's return to the reply pushed.
    pub to_reply: Duration,
}

/// How a server serves, with the handle its statistics come from.
enum Serving {
    Static(Arc<Pool<Served>>),
    Migrating(Arc<Activations>),
}

impl Serving {
    fn dispatch(&self) -> Arc<dyn Dispatch> {
        match self {
            Serving::Static(pool) => pool.clone(),
            Serving::Migrating(acts) => acts.clone(),
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
pub(crate) struct Shared {
    listener: Listener,
    runtime: Handle,
    serving: Serving,
    path: Option<Arc<PathTicks>>,
    bound: Mutex<Vec<Bound>>,
    /// Run time spent on calls of clients gone, by pid.
    cpu_gone: Mutex<Vec<(i32, Duration)>>,
    stopping: AtomicBool,
    accepted: AtomicU64,
    /// The interface name (for the stats page).
    name: String,
    /// Calls answered on channels of clients gone.
    served_gone: AtomicU64,
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
        // The registry's lock is a std one: no switch while it is held.
        crate::upcall::without_preemption(|| self.runtime.shared().remove_polled(&b.entry));
        self.served_gone
            .fetch_add(b.chan.served.load(Relaxed), Relaxed);
        let cpu = Duration::from_nanos(b.chan.cpu_ns.load(Relaxed));
        if !cpu.is_zero() {
            self.cpu_gone
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((b.chan.mem.peer().pid, cpu));
        }
    }

    fn bind_one(self: &Arc<Self>, policy: &Policy<'_>) -> Result<()> {
        let owner: std::sync::Weak<dyn Owner> = Arc::downgrade(&(self.clone() as Arc<dyn Owner>));
        let accepted = self.listener.accept(policy)?;
        if self.stopping.load(Acquire) {
            return Err(Error::Closed);
        }
        let layout = self.listener_layout();
        let mem = Memory::server(accepted.binding, &layout)?;
        let chan = Arc::new(ServerChan::new(
            mem,
            self.serving.dispatch(),
            self.path.clone(),
            owner,
        )?);
        let watch = watch::watch(chan.clone(), chan.mem.peer().pid, chan.mem.socket())?;
        let entry: Arc<dyn Polled> = Arc::new(Entry(chan.clone()));
        // The registry's lock is a std one: no switch while it is held.
        crate::upcall::without_preemption(|| self.runtime.shared().add_polled(entry.clone()));
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

impl crate::stats::Source for Shared {
    /// The server as one channel end (its clients' calls summed), and the
    /// logical threads its activations serve.
    fn report(&self, out: &mut crate::stats::Report) -> bool {
        let (mut calls, mut cpu) = (self.served_gone.load(Relaxed), 0u64);
        let Some(gone) = crate::lock::try_lock(&self.cpu_gone) else {
            return false;
        };
        for (_, c) in gone.iter() {
            cpu = cpu.saturating_add(u64::try_from(c.as_nanos()).unwrap_or(u64::MAX));
        }
        drop(gone);
        let peers = {
            let Some(bound) = crate::lock::try_lock(&self.bound) else {
                return false;
            };
            for b in bound.iter() {
                calls = calls.saturating_add(b.chan.served.load(Relaxed));
                cpu = cpu.saturating_add(b.chan.cpu_ns.load(Relaxed));
            }
            bound.len()
        };
        out.channels.push(crate::stats::Channel {
            kind: crate::stats::ChannelKind::Server,
            name: self.name.clone(),
            peers: peers as u64,
            calls,
            cpu_ns: cpu,
        });
        if let Serving::Migrating(acts) = &self.serving {
            acts.in_calls(&mut out.logical);
        }
        true
    }
}

impl Owner for Shared {
    /// The client of `chan` died: its calls are aborted (a client process
    /// that dies terminates all its chains), and its channel is dropped.
    fn peer_gone(&self, chan: &ServerChan) {
        let found = self
            .bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|b| std::ptr::eq(Arc::as_ptr(&b.chan), chan))
            .map(|b| b.chan.clone());
        if let Some(c) = found {
            c.dispatch.client_died(c.clone());
        }
        self.reap();
    }
}

/// Serves an interface: accepts clients by name and runs their calls in
/// the runtime it was started in, on activations (migrating calls) or on a
/// pool of service threads ([`ServeMode`]). Dropping it (or
/// [`Server::close`]) stops accepting, closes every channel (their clients
/// get [`Error::PeerDied`]) and removes the socket file.
pub struct Server {
    shared: Arc<Shared>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

/// How a [`Server`] is set up.
pub struct ServerBuilder {
    config: ChannelConfig,
    mode: ServeMode,
    pool: PoolConfig,
    measure_path: bool,
    allow: Option<Allow>,
}

/// A server's own check of a client's credentials.
type Allow = Box<dyn Fn(Credentials) -> bool + Send + Sync>;

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            config: ChannelConfig::default(),
            mode: ServeMode::from_env(),
            pool: PoolConfig::default(),
            measure_path: false,
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

    /// How calls run: on activations (default) or service threads.
    pub fn mode(mut self, mode: ServeMode) -> Self {
        self.mode = mode;
        self
    }

    /// The most calls served at once (at least 1): service threads in
    /// [`ServeMode::Static`], activations in [`ServeMode::Migrating`]
    /// (with [`ServerBuilder::activations`]' minimum kept).
    pub fn max_threads(mut self, n: usize) -> Self {
        self.pool.max = n.max(1);
        self
    }

    /// Mach's static model with a fixed pool: [`ServeMode::Static`] with
    /// exactly `n` service threads (at least 1), all started at serve time
    /// and never more; calls beyond `n` wait in the receive queue for one
    /// of them. (Without this, a static pool starts two threads and grows
    /// on demand to [`ServerBuilder::max_threads`].)
    pub fn static_threads(mut self, n: usize) -> Self {
        self.mode = ServeMode::Static;
        self.pool.max = n.max(1);
        self.pool.min = self.pool.max;
        self
    }

    /// The pool of activations: `min` kept ready (made at start, never
    /// retired), at most `max` at once (at least 1). The pool grows on
    /// demand between them, and unoccupied activations above `min` retire
    /// by halves each second none is taken. A call whose chain already
    /// visits this process may take one beyond `max`, so that re-entrant
    /// chains never wait for one. In [`ServeMode::Static`], `min` is the
    /// number of service threads started at serve time.
    pub fn activations(mut self, min: usize, max: usize) -> Self {
        self.pool.max = max.max(1);
        self.pool.min = min.min(self.pool.max);
        self
    }

    /// What a call does when every activation is taken and the pool is at
    /// its maximum: wait in a bounded line (the default, 1,024 calls,
    /// highest priority first) or fail with [`Error::Busy`].
    pub fn when_full(mut self, when: WhenFull) -> Self {
        self.pool.when_full = when;
        self
    }

    /// Called (on a ferry thread of the server) when the last unoccupied
    /// activation is taken and the pool is below its maximum, before calls
    /// have to wait (000 §6.2); returns how many activations to add now
    /// (the default adds one).
    pub fn on_pool_low(mut self, f: impl Fn(PoolLow) -> usize + Send + Sync + 'static) -> Self {
        let f: OnPoolLow = Arc::new(f);
        self.pool.on_low = Some(f);
        self
    }

    /// Times each call's server-side path ([`Server::path_stats`]): two
    /// reads of the time stamp counter more per call.
    pub fn measure_path(mut self, on: bool) -> Self {
        self.measure_path = on;
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
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let serving = match self.mode {
            ServeMode::Static => Serving::Static(Pool::start(
                &runtime,
                handler,
                self.pool.min,
                self.pool.max,
            )?),
            ServeMode::Migrating => {
                Serving::Migrating(Activations::start(&runtime, handler, self.pool)?)
            }
        };
        let shared = Arc::new(Shared {
            listener,
            runtime,
            serving,
            path: self.measure_path.then(Default::default),
            bound: Mutex::new(Vec::new()),
            cpu_gone: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            name: name.to_owned(),
            served_gone: AtomicU64::new(0),
        });
        let source: Arc<dyn crate::stats::Source> = shared.clone();
        crate::stats::register(Arc::downgrade(&source));
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
    /// A builder, to set the mode, the pool, the channel size or the
    /// policy.
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

    /// How this server runs its calls.
    pub fn mode(&self) -> ServeMode {
        match &self.shared.serving {
            Serving::Static(_) => ServeMode::Static,
            Serving::Migrating(_) => ServeMode::Migrating,
        }
    }

    /// Clients bound so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Relaxed)
    }

    /// Clients bound now (those that are gone are dropped as new ones come
    /// and when counted).
    pub fn clients(&self) -> usize {
        // The server's lists are std mutexes its other users (ferry
        // threads sharing it, the acceptor) wait on in the kernel: no
        // switch while one is held.
        let _off = crate::upcall::preemption_off();
        self.shared.reap();
        self.shared
            .bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Threads that serve calls now: service threads, or activations.
    pub fn threads(&self) -> usize {
        match &self.shared.serving {
            Serving::Static(pool) => pool.threads(),
            Serving::Migrating(acts) => acts.stats().live,
        }
    }

    /// The pool of activations' counters (all zero in
    /// [`ServeMode::Static`]).
    pub fn activations(&self) -> ActivationStats {
        match &self.shared.serving {
            Serving::Static(_) => ActivationStats::default(),
            Serving::Migrating(acts) => acts.stats(),
        }
    }

    /// Run time spent on each client's calls, by the client's pid (clients
    /// gone included): what the server charged back to them. Empty in
    /// [`ServeMode::Static`], where the server keeps its run time.
    pub fn cpu_by_client(&self) -> Vec<(i32, Duration)> {
        // As in `clients`.
        let _off = crate::upcall::preemption_off();
        let mut out = self
            .shared
            .cpu_gone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for b in self
            .shared
            .bound
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let cpu = Duration::from_nanos(b.chan.cpu_ns.load(Relaxed));
            if !cpu.is_zero() {
                out.push((b.chan.mem.peer().pid, cpu));
            }
        }
        out
    }

    /// The server-side path timing so far, if the server measures it
    /// ([`ServerBuilder::measure_path`]).
    pub fn path_stats(&self) -> Option<PathStats> {
        let p = self.shared.path.as_ref()?;
        Some(PathStats {
            calls: p.calls.load(Relaxed),
            to_handler: crate::sys::cycles_to_duration(p.to_handler.load(Relaxed)),
            to_reply: crate::sys::cycles_to_duration(p.to_reply.load(Relaxed)),
        })
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
        match &s.serving {
            Serving::Static(pool) => pool.stop(),
            Serving::Migrating(acts) => acts.stop(),
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.shared.listener.name())
            .field("mode", &self.mode())
            .field("accepted", &self.accepted())
            .finish()
    }
}
