//! The seam for calls that leave the machine: what a transport outside
//! ferry (the `ferry-grpc` crate) needs to carry a call as one logical
//! thread without ferry knowing the transport.
//!
//! This module owns the [`Remote`] trait (a [`Client`](super::Client) made
//! with [`Client::from_remote`](super::Client::from_remote) calls through
//! it, so an interface's generated client is the same type either way) and
//! four hooks into the logical thread: [`outgoing`] (the chain a call made
//! now carries), [`on_alert`] (an alert of the calling thread reaches the
//! transport, which cancels the call), [`serve_as`] (code runs as serving a
//! call of a chain that came over the transport: [`chain`](super::chain),
//! the priority ceiling and alerts as on an activation, and the calls it
//! makes carry the chain on) and [`charge`] (run time spent remotely is
//! charged to the caller). It must not name a transport, a network type or
//! an async runtime: the heavy dependencies stay out of `ferry`.

use std::time::{Duration, Instant};

use super::call::CallOptions;
use super::error::{Error, Result};
use super::logical::{self, Chain, Frame, Incoming, Outgoing};
use crate::header::wait_record::{self, WaitRecord};
use crate::thread::{self, Priority};

/// A transport that carries an interface's calls to another machine.
///
/// The arguments and results are the same bytes a local call carries (the
/// generated client's encoding); the transport converts them to its own
/// wire and back.
pub trait Remote: Send + Sync + 'static {
    /// Makes call `op` with `args` under `opts` and returns the result's
    /// bytes, parking the calling ferry thread (not its processor) until
    /// the answer comes. The transport carries [`outgoing`]'s chain and
    /// `opts.deadline`, cancels the call when the calling thread is alerted
    /// ([`on_alert`]) and charges the run time the peer reports
    /// ([`charge`]).
    ///
    /// # Errors
    /// As a local call's: [`Error::PeerDied`] if the peer is unreachable
    /// or went away, [`Error::DeadlineExceeded`], [`Error::Aborted`] when
    /// cancelled by an alert, the server's faults; [`Error::Transport`]
    /// for what the transport reports that has no local counterpart.
    fn call(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>>;

    /// The interface name the client is bound to.
    fn name(&self) -> &str;

    /// Whether the peer is known to be gone.
    fn is_dead(&self) -> bool {
        false
    }
}

/// The chain a call made now by the current thread carries, with
/// `deadline` (the call's own) merged with the chain's: the earlier wins.
///
/// # Errors
/// [`Error::NoRuntime`] off a ferry thread; [`Error::ChainTooDeep`] if the
/// call would visit more than [`MAX_CHAIN_DEPTH`](super::MAX_CHAIN_DEPTH)
/// processes.
pub fn outgoing(deadline: Option<Instant>) -> Result<Chain> {
    let mut c = logical::chain().ok_or(Error::NoRuntime)?;
    if c.hops.len() >= super::MAX_CHAIN_DEPTH {
        return Err(Error::ChainTooDeep {
            depth: c.hops.len() + 1,
        });
    }
    c.deadline = match (deadline, c.deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if c.depth() == 1 {
        // At the origin: the run time so far is the thread's own.
        c.cpu = thread::cpu_time().unwrap_or(Duration::ZERO);
    }
    Ok(c)
}

/// An [`Outgoing`] that calls a closure.
struct AlertHook<'a>(&'a (dyn Fn() + Sync));

impl Outgoing for AlertHook<'_> {
    fn alert(&self) {
        (self.0)();
    }
}

/// `on_alert`'s record of the thread's wait: a thread terminated inside
/// `f` has `alert` called too (termination splits the chain, 000 §5), so
/// the transport cancels its call, and its frame word is cleared.
#[repr(C)]
struct AlertWait<'a> {
    record: WaitRecord,
    alert: &'a (dyn Fn() + Sync),
    frame: &'a std::sync::atomic::AtomicUsize,
}

impl AlertWait<'_> {
    /// The terminator's side of the record.
    ///
    /// # Safety
    /// `r` is the record of a live `AlertWait` whose thread stopped for
    /// good in it; called once.
    unsafe fn abandon(r: &WaitRecord) -> bool {
        // SAFETY: `AlertWait` is `repr(C)` with `record` first, and records
        // of this kind are made only in `on_alert`.
        let w = unsafe { &*std::ptr::from_ref(r).cast::<AlertWait<'_>>() };
        logical::forget(w.frame);
        (w.alert)();
        true
    }
}

/// Runs `f`, during which an alert of the current ferry thread
/// ([`Thread::alert`](crate::Thread::alert), or an alert passed down a
/// chain) calls `alert` (on the alerting thread): a transport cancels its
/// call there. A thread terminated inside `f` has `alert` called too (on
/// its terminator). Off a ferry thread, just runs `f`.
pub fn on_alert<R>(alert: &(dyn Fn() + Sync), f: impl FnOnce() -> R) -> R {
    let Some(t) = thread::try_current() else {
        return f();
    };
    // First: a thread terminated from here on cancels through `alert`.
    let record = AlertWait {
        record: WaitRecord::new(AlertWait::abandon),
        alert,
        frame: &t.header().rpc,
    };
    // SAFETY: `t` is the running thread, and `record` stays on this frame
    // until `Clear` unregisters it (nothing between here and `Clear`
    // unwinds).
    unsafe { wait_record::register(&t.header().waits, &record.record) };
    logical::install_hooks();
    let own = Frame::new(None);
    let entered = t.header().rpc.load(std::sync::atomic::Ordering::Relaxed) == 0;
    if entered {
        logical::enter(&t, &own);
    }
    let hook = AlertHook(alert);
    // SAFETY: `t` is the current thread; `hook` lives on this frame and is
    // cleared below, before it goes (also when `f` unwinds: `Clear`).
    unsafe { logical::set_outgoing(&t, Some(&hook)) };
    struct Clear<'a>(&'a crate::header::Thread, bool, &'a WaitRecord);
    impl Drop for Clear<'_> {
        fn drop(&mut self) {
            // SAFETY: registered above, at this address, by this thread.
            unsafe { wait_record::unregister(&self.0.header().waits, self.2) };
            // SAFETY: the current thread; clearing names nothing.
            unsafe { logical::set_outgoing(self.0, None) };
            if self.1 {
                logical::leave(self.0);
            }
        }
    }
    let _clear = Clear(&t, entered, &record.record);
    // An alert that came before the hook was in place.
    if t.is_alerted() {
        alert();
    }
    f()
}

/// Runs `f` on the current ferry thread as serving a call of `chain` that
/// came over a remote transport: [`chain`](super::chain) returns it; the
/// thread runs at the chain's priority (its own is restored after) and may
/// lower it, never raise it above; an alert of the thread reaches the calls
/// `f` makes; and every call `f` makes carries the chain on, this process
/// added by the receiver (the chain's `hops` are as received: this process
/// is not among them until `f` calls into it).
///
/// # Errors
/// [`Error::NoRuntime`] off a ferry thread; [`Error::Transport`] when the
/// thread already serves or makes a call; [`Error::ChainTooDeep`] for a
/// chain of no hop or as deep as a call may go.
pub fn serve_as<R>(chain: &Chain, f: impl FnOnce() -> R) -> Result<R> {
    let t = thread::try_current().ok_or(Error::NoRuntime)?;
    let incoming = Incoming::from_chain(chain)?;
    if t.header().rpc.load(std::sync::atomic::Ordering::Relaxed) != 0 {
        return Err(Error::Transport(
            "serve_as on a thread that already serves or makes a call".into(),
        ));
    }
    logical::install_hooks();
    let frame = Frame::new(Some(incoming));
    let before = t.priority();
    t.set_priority(chain.priority);
    logical::enter(&t, &frame);
    struct Leave<'a>(&'a crate::header::Thread, Priority);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            logical::leave(self.0);
            self.0.set_priority(self.1);
        }
    }
    let _leave = Leave(&t, before);
    Ok(f())
}

/// Charges `d` of run time spent on the current thread's behalf by a
/// remote server to the current thread ([`thread::cpu_time`] includes it).
/// Does nothing off a ferry thread or without accounting.
pub fn charge(d: Duration) {
    crate::thread::charge_current(d);
}
