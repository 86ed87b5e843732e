//! The caller's face of a channel: [`Client`] (a connection, shared by its
//! clones) and [`Call`] (one call sent, to wait for or abort).
//!
//! This module owns connecting and the public calling API; the calling path
//! itself is `client`'s ([`ClientChan`]). A client made over a remote
//! transport ([`Client::from_remote`]) calls through it instead
//! ([`super::remote::Remote`]); its [`Call`]s run on a ferry thread of
//! their own, which an abort alerts.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::bind::{self, Credentials};
use super::call::CallOptions;
use super::client::{ClientChan, Sent};
use super::dir::RuntimeDir;
use super::error::{Error, Result};
use super::layout::Side;
use super::memory::Memory;
use super::remote::Remote;
use super::watch;
use crate::event::polled::Polled;
use crate::header::Unparker;
use crate::runtime::Handle;
use crate::sync::SpinLock;

/// A connection to a server's interface: one channel, in shared memory,
/// polled by the runtime of the thread that connected. Clones share the
/// channel; calls from many threads at once are in flight together (up to
/// the channel's slots; further callers wait for a slot). The channel is
/// closed when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Inner,
}

/// What a client calls through.
#[derive(Clone)]
enum Inner {
    /// A channel in shared memory with a server on this machine.
    Local(Arc<Connection>),
    /// A transport to another machine.
    Remote(Arc<dyn Remote>),
}

struct Connection {
    chan: Arc<ClientChan>,
    entry: Arc<dyn Polled>,
    runtime: Handle,
    watch: watch::Token,
    /// The interface name (for the stats page).
    name: String,
}

impl crate::stats::Source for Connection {
    /// The client as one channel end: calls made, the server's pid.
    fn report(&self, out: &mut crate::stats::Report) -> bool {
        out.channels.push(crate::stats::Channel {
            kind: crate::stats::ChannelKind::Client,
            name: self.name.clone(),
            peers: u64::from(self.chan.mem.peer().pid.unsigned_abs()),
            calls: self.chan.made.load(std::sync::atomic::Ordering::Relaxed),
            cpu_ns: 0,
        });
        true
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        watch::unwatch(&self.watch);
        self.chan.mem.close(Side::Client);
        self.chan.break_channel();
        // The registry's lock is a std one: no switch while it is held.
        crate::upcall::without_preemption(|| self.runtime.shared().remove_polled(&self.entry));
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
        // An alert of a thread in a call of this client goes down the call's
        // chain: the hook must be there in a process that only calls.
        super::logical::install_hooks();
        let binding = bind::connect_raw_in(dir, name, version)?;
        let mem = Memory::client(binding)?;
        let chan = Arc::new(ClientChan::new(mem)?);
        let watch = watch::watch(chan.clone(), chan.mem.peer().pid, chan.mem.socket())?;
        let entry: Arc<dyn Polled> = chan.clone();
        // The registry's lock is a std one: no switch while it is held.
        crate::upcall::without_preemption(|| runtime.shared().add_polled(entry.clone()));
        let inner = Arc::new(Connection {
            chan,
            entry,
            runtime,
            watch,
            name: name.to_owned(),
        });
        let source: Arc<dyn crate::stats::Source> = inner.clone();
        crate::stats::register(Arc::downgrade(&source));
        Ok(Client {
            inner: Inner::Local(inner),
        })
    }

    /// A client that calls through `remote` (a transport to another
    /// machine, such as `ferry-grpc`'s): the same type, so code that calls
    /// does not change with where the server is.
    pub fn from_remote(remote: Arc<dyn Remote>) -> Client {
        super::logical::install_hooks();
        Client {
            inner: Inner::Remote(remote),
        }
    }

    /// Whether this client calls through a remote transport.
    pub fn is_remote(&self) -> bool {
        matches!(self.inner, Inner::Remote(_))
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
        self.call_with(op, args, &CallOptions::default())
    }

    /// [`Client::call`] with `opts`: a deadline ([`Error::TimedOut`] after
    /// it; the slot is reclaimed safely), an urgent wake.
    ///
    /// # Errors
    /// As [`Client::call`], and [`Error::TimedOut`].
    pub fn call_with(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
        match &self.inner {
            Inner::Local(c) => c.chan.call(op, args, opts),
            Inner::Remote(r) => r.call(op, args, opts),
        }
    }

    /// Sends a call of `op` with `args` and returns at once: the call is in
    /// flight until [`Call::wait`] takes its reply, or it is aborted
    /// ([`Call::abort`], an [`AbortHandle`], or dropping the `Call`).
    ///
    /// # Errors
    /// As [`Client::call`], for what fails before the call is sent.
    pub fn start(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Call> {
        let shared = Arc::new(CallShared {
            aborted: AtomicBool::new(false),
            waiter: SpinLock::new(Some(Unparker::current())),
            worker: SpinLock::new(None),
        });
        let pending = match &self.inner {
            Inner::Local(c) => Pending::Local {
                chan: c.clone(),
                sent: c.chan.send(op, args, opts)?,
            },
            Inner::Remote(r) => {
                let (r, args, opts) = (r.clone(), args.to_vec(), *opts);
                let worker = crate::thread::Builder::new()
                    .name("ferry-remote-call")
                    .spawn(move || r.call(op, &args, &opts))
                    .map_err(Error::Io)?;
                *shared.worker.lock() = Some(worker.thread());
                Pending::Remote(worker)
            }
        };
        Ok(Call {
            client: self.clone(),
            pending: Some(pending),
            deadline: opts.deadline,
            shared,
            _not_send: std::marker::PhantomData,
        })
    }

    fn local(&self) -> Option<&Connection> {
        match &self.inner {
            Inner::Local(c) => Some(c),
            Inner::Remote(_) => None,
        }
    }

    /// The server's credentials, as the kernel reported them at binding;
    /// for a remote client, which has none the kernel vouches for, pid 0
    /// and the overflow ids (`u32::MAX`, nobody).
    pub fn peer(&self) -> Credentials {
        match self.local() {
            Some(c) => c.chan.mem.peer(),
            None => Credentials {
                pid: 0,
                uid: u32::MAX,
                gid: u32::MAX,
            },
        }
    }

    /// The interface name this client is bound to.
    pub fn name(&self) -> &str {
        match &self.inner {
            Inner::Local(c) => c.chan.mem.name(),
            Inner::Remote(r) => r.name(),
        }
    }

    /// The largest arguments or result one call may carry (for a remote
    /// client, [`MAX_CALL_LEN`](super::MAX_CALL_LEN)).
    pub fn max_call_len(&self) -> usize {
        self.local().map_or(super::MAX_CALL_LEN, |c| c.chan.max_len)
    }

    /// Whether the server is known to be gone (calls fail with
    /// [`Error::PeerDied`]).
    pub fn is_dead(&self) -> bool {
        match &self.inner {
            Inner::Local(c) => c.chan.dead.load(Acquire),
            Inner::Remote(r) => r.is_dead(),
        }
    }

    /// Replies refused so far (forged, repeated or out of range indices;
    /// always 0 for a remote client, whose transport checks its own).
    pub fn refused_replies(&self) -> u64 {
        self.local().map_or(0, |c| c.chan.refused.load(Relaxed))
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.name())
            .field("remote", &self.is_remote())
            .field("peer", &self.peer())
            .field("dead", &self.is_dead())
            .finish()
    }
}

/// What a [`Call`] and its [`AbortHandle`]s share.
struct CallShared {
    aborted: AtomicBool,
    /// Whom to wake when the call is aborted (the thread that started it).
    waiter: SpinLock<Option<Unparker>>,
    /// A remote call's worker thread, alerted by an abort (its transport
    /// then cancels the call).
    worker: SpinLock<Option<crate::Thread>>,
}

impl CallShared {
    fn abort(&self) {
        self.aborted.store(true, Release);
        let worker = self.worker.lock().clone();
        if let Some(t) = worker {
            t.alert();
        }
        let waiter = self.waiter.lock().clone();
        if let Some(u) = waiter {
            u.unpark();
        }
    }
}

/// A call in flight.
enum Pending {
    /// Sent on a local channel.
    Local { chan: Arc<Connection>, sent: Sent },
    /// Made by a ferry thread of its own through a remote transport.
    Remote(crate::thread::JoinHandle<Result<Vec<u8>>>),
}

/// One call in flight ([`Client::start`]), made by the thread that holds
/// it: wait for its reply, or abort it. Aborting splits the logical thread
/// (000 §5): the caller returns at once with [`Error::Aborted`], while the
/// server's activation is alerted, may finish its work, and has its reply
/// discarded; its activation goes back to its pool. Dropping a `Call` that
/// was not waited for aborts it.
pub struct Call {
    client: Client,
    pending: Option<Pending>,
    deadline: Option<std::time::Instant>,
    shared: Arc<CallShared>,
    /// Waited for by the thread that sent it (its unparker is the slot's).
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Aborts a [`Call`] from any thread ([`Call::abort_handle`]).
#[derive(Clone)]
pub struct AbortHandle(Arc<CallShared>);

impl AbortHandle {
    /// Aborts the call: its caller returns [`Error::Aborted`] at once (or as
    /// soon as it waits), the server's activation is alerted and its reply
    /// will be discarded. Does nothing to a call already finished.
    pub fn abort(&self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortHandle")
            .field("aborted", &self.0.aborted.load(Relaxed))
            .finish()
    }
}

impl Call {
    /// Waits for the reply (or the deadline, or an abort).
    ///
    /// # Errors
    /// As [`Client::call_with`], and [`Error::Aborted`] if the call was
    /// aborted first.
    pub fn wait(mut self) -> Result<Vec<u8>> {
        match self.pending.take().expect("a call is waited for once") {
            Pending::Local { chan, sent } => {
                chan.chan
                    .finish(sent, self.deadline, Some(&self.shared.aborted))
            }
            Pending::Remote(worker) => {
                if self.shared.aborted.load(Acquire) {
                    // Its worker was alerted; it ends by itself.
                    return Err(Error::Aborted);
                }
                let result = worker.join().unwrap_or_else(|_| {
                    Err(Error::Transport("the remote call's thread panicked".into()))
                });
                if self.shared.aborted.load(Acquire) {
                    return Err(Error::Aborted);
                }
                result
            }
        }
    }

    /// Aborts the call (see [`AbortHandle::abort`]); [`Call::wait`] then
    /// returns [`Error::Aborted`] at once.
    pub fn abort(&self) {
        self.shared.abort();
    }

    /// A handle that aborts this call from another thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.shared.clone())
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        match self.pending.take() {
            Some(Pending::Local { chan, sent }) => {
                self.shared.aborted.store(true, Release);
                let _ = chan
                    .chan
                    .finish(sent, self.deadline, Some(&self.shared.aborted));
            }
            // Alerted: its transport cancels, and the thread ends by itself.
            Some(Pending::Remote(_)) => self.shared.abort(),
            None => {}
        }
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("client", &self.client)
            .field("aborted", &self.shared.aborted.load(Acquire))
            .finish()
    }
}
