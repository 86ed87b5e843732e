//! Alerts (000 §5): a request, not a demand, that a thread give up what it
//! is doing and return as soon as it can. [`Thread::alert`] sets one;
//! the thread's code polls [`alerted`]. A thread in a call into another
//! process passes the alert down its chain (`rpc` registers that step,
//! [`Hooks`]), so the activation running for it at the far end sees it.
//!
//! This file owns the alert bits of a thread and the priority a thread may
//! give itself; it must not know what a call is (the `rpc` room does, behind
//! [`Hooks`]).
//!
//! # The alert word (`Header::alert`)
//!
//! | bit | set by | cleared by | meaning |
//! |-----|--------|------------|---------|
//! | `PENDING` | [`Thread::alert`] (any thread), `rpc` when an alert comes down a chain | [`clear_alert`] (the thread itself), `rpc` when an activation is reused | an alert is pending |
//! | `BLOCKED` | [`allow_alerts`]`(false)`, `rpc` when an activation takes a call | [`allow_alerts`]`(true)` | the thread does not see alerts now (they stay pending) |
//!
//! Every change is one atomic read-modify-write of the word, so no alert is
//! lost between an `alert` and an `allow_alerts`. An alert that finds the
//! thread allowed and inside a blocking call ([`crate::blocking`], or a
//! socket or file wait of ferry's) aborts that call ([`Thread::abort`]):
//! it returns early with `Interrupted` where the call allows it.
//!
//! # Alerts and blocking calls
//!
//! A blocking call is aborted by an alert whichever comes first:
//!
//! | when the alert comes | what aborts the call |
//! |----------------------|----------------------|
//! | during the call, alerts allowed | [`Thread::alert`], through [`Thread::abort`] |
//! | before the call, alerts allowed | the call's entry (`Thread::alert_aborts_calls`): a socket wait of [`crate::net`] returns `Interrupted` without parking, a file operation on the ring is cancelled as [`Thread::abort`] cancels it, and [`crate::blocking`] marks its call aborted and has it aborted as [`Thread::abort`] would (see its docs) |
//! | while alerts are blocked | nothing: the alert stays pending, and a blocking call entered once the thread allows alerts again is aborted at its entry |
//!
//! The race between the two is a store-fence-load pair on each side. The
//! entry publishes the call (the call word of [`crate::blocking`]; the
//! parked map of `net`, the watch map of the ring, each under its lock),
//! then issues a SeqCst fence and reads the alert word; [`Thread::alert`]
//! sets `PENDING`, issues a SeqCst fence, then looks for the call
//! ([`Thread::abort`]: the call words, then the two maps under their
//! locks). Whichever fence comes first in their single order, the other
//! side sees what came before it: either the entry sees the alert, or the
//! alert finds the call, or both (then the call is aborted twice, which
//! is one abort). `tests/loom_alert.rs` models the pair.
//!
//! An alert that finds the thread allowing alerts may still abort a call
//! the thread enters right after it blocked them (the alert's abort
//! already looks for the call); an alert pending on a thread whose call
//! was aborted stays pending, and aborts its next call too, until it is
//! cleared ([`clear_alert`]).

use std::sync::OnceLock;
use std::sync::atomic::Ordering::{AcqRel, Acquire, SeqCst};
use std::sync::atomic::fence;
use std::time::Duration;

use crate::header::{Priority, Thread};

/// An alert is pending.
pub(crate) const PENDING: u8 = crate::header::ALERT_PENDING;
/// The thread does not see alerts now.
pub(crate) const BLOCKED: u8 = crate::header::ALERT_BLOCKED;

/// What a room above (`rpc`) adds to alerts and priorities: registered
/// once, at the first call.
pub(crate) struct Hooks {
    /// Passes an alert of `t` down the chain of the call `t` is in, if any.
    pub(crate) alert: fn(&Thread),
    /// The highest priority `t` may give itself (its caller's, on an
    /// activation), if there is a limit.
    pub(crate) ceiling: fn(&Thread) -> Option<Priority>,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Registers the hooks (the first registration wins; `rpc` is the only
/// caller).
pub(crate) fn set_hooks(hooks: Hooks) {
    // Called by every client and server start, maybe on several ferry
    // threads at once: the first sets the cell, and must not be switched
    // out meanwhile while the others wait for it in the kernel.
    let _off = crate::upcall::preemption_off();
    let _ = HOOKS.set(hooks);
}

impl Thread {
    /// Alerts the thread: asks it to give up what it is doing and return as
    /// soon as it can. Its code sees the request through [`alerted`]; if it
    /// is in a call into another process, the request goes down the call's
    /// chain to the activation running for it there (whose code sees it
    /// once it allows alerts). A thread that allows alerts and is in a
    /// blocking call has the call aborted ([`Thread::abort`]); one that
    /// allows alerts and enters a blocking call later has that call
    /// aborted at its entry. A thread that blocks alerts
    /// ([`allow_alerts`]`(false)`) has nothing aborted: the alert waits
    /// until it allows them again (see the module docs). The alert stays
    /// pending until the thread clears it ([`clear_alert`]).
    pub fn alert(&self) {
        let before = self.header().alert.fetch_or(PENDING, AcqRel);
        // Pairs with the fence of a blocking call's entry (module docs):
        // either the call's entry sees `PENDING`, or the abort finds the
        // call.
        fence(SeqCst);
        if let Some(h) = HOOKS.get() {
            (h.alert)(self);
        }
        if before & BLOCKED == 0 {
            let _ = self.abort();
        }
    }

    /// Whether an alert is pending for the thread (whether or not it allows
    /// alerts now).
    pub fn is_alerted(&self) -> bool {
        self.header().alert.load(Acquire) & PENDING != 0
    }

    /// Sets the alert bits in `bits` without the side effects of
    /// [`Thread::alert`] (for `rpc`, which brings an alert down a chain
    /// and passes it on itself); returns the word before.
    pub(crate) fn alert_bits_or(&self, bits: u8) -> u8 {
        self.header().alert.fetch_or(bits, AcqRel)
    }

    /// Clears the alert bits in `bits`; returns the word before.
    pub(crate) fn alert_bits_clear(&self, bits: u8) -> u8 {
        self.header().alert.fetch_and(!bits, AcqRel)
    }
}

/// Whether the current thread has an alert pending and allows alerts (000's
/// `TestAlert`, without clearing it): code that can give up early polls
/// this. `false` off a ferry thread.
pub fn alerted() -> bool {
    super::try_current()
        .is_some_and(|t| t.header().alert.load(Acquire) & (PENDING | BLOCKED) == PENDING)
}

/// Clears the current thread's pending alert; returns whether one was
/// pending.
pub fn clear_alert() -> bool {
    super::try_current().is_some_and(|t| t.alert_bits_clear(PENDING) & PENDING != 0)
}

/// Lets the current thread see alerts (`true`, the default for a thread
/// that is not an activation) or not (`false`: they stay pending, and do
/// not abort its blocking calls). An activation serving a call starts with
/// alerts blocked (000 §5): a server opts in with `allow_alerts(true)`.
/// Returns whether alerts were allowed before.
pub fn allow_alerts(on: bool) -> bool {
    let Some(t) = super::try_current() else {
        return false;
    };
    let before = if on {
        t.alert_bits_clear(BLOCKED)
    } else {
        t.alert_bits_or(BLOCKED)
    };
    before & BLOCKED == 0
}

/// Sets the current thread's priority, no higher than its ceiling: a thread
/// serving a call on an activation runs at its caller's priority and may
/// lower it for its own part, never raise it above the caller's (000 §6).
/// Returns the priority set. Off a ferry thread, does nothing and returns
/// `priority`.
pub fn set_priority(priority: Priority) -> Priority {
    let Some(t) = super::try_current() else {
        return priority;
    };
    let ceiling = HOOKS.get().and_then(|h| (h.ceiling)(&t));
    let p = ceiling.map_or(priority, |c| priority.min(c));
    t.set_priority(p);
    p
}

/// How long the current thread has run on processors, including the time
/// charged to it by the servers it called (their activations' time on its
/// behalf), if the runtime accounts it
/// ([`Builder::thread_cpu_time`](crate::Builder::thread_cpu_time));
/// `None` off a ferry thread or without accounting.
pub fn cpu_time() -> Option<Duration> {
    super::cpu::current_cpu_time()
}
