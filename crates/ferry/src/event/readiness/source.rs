//! Readiness as an event source of one runtime: the reactor, made at the
//! first registration (by a socket, or by the ring for its eventfd), the
//! questions the runtime asks of the threads waiting on sockets (are there
//! any, abort one), the runtime's end, and the harvest at a busy
//! processor's scheduling point.
//!
//! This room owns the making of the reactor and the [`Source`] side; it
//! must not touch the epoll or wake descriptors, the slab or the harvest
//! token itself (the parent's [`Reactor`] does all of that).

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::super::{Deliver, Every, Source};
use super::{Reactor, Waiters};

/// The readiness source of one runtime: its reactor, made at the first
/// registration.
pub(crate) struct Readiness {
    reactor: OnceLock<Arc<Reactor>>,
}

impl Readiness {
    pub(crate) fn new() -> Readiness {
        Readiness {
            reactor: OnceLock::new(),
        }
    }

    /// The reactor, if a socket was ever registered.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Arc<Reactor>> {
        self.reactor.get()
    }

    /// The reactor, made with `hook` if there is none yet.
    ///
    /// # Errors
    /// Making the epoll or eventfd descriptor failed (out of descriptors).
    pub(crate) fn get_or_make(
        &self,
        hook: impl FnOnce() -> Box<dyn Waiters>,
    ) -> io::Result<&Arc<Reactor>> {
        let r = self.reactor()?;
        r.hook.get_or_init(|| Box::new(hook()));
        Ok(r)
    }

    /// The reactor, made (with no hook yet) if there is none.
    ///
    /// # Errors
    /// As [`Readiness::get_or_make`].
    pub(crate) fn reactor(&self) -> io::Result<&Arc<Reactor>> {
        if let Some(r) = self.reactor.get() {
            return Ok(r);
        }
        // Made outside any lock (system calls and allocations); if two
        // threads race to make the first one, the loser's is dropped, which
        // closes its descriptors, and nothing was registered with it.
        let r = Arc::new(Reactor::new()?);
        let won = self.reactor.get_or_init(|| Arc::clone(&r));
        if !Arc::ptr_eq(won, &r) {
            r.shut_down();
        }
        Ok(won)
    }

    /// Whether threads wait on sockets (the deadlock watch counts them as
    /// waiting on something outside the runtime).
    pub(crate) fn waiting(&self) -> bool {
        self.reactor.get().is_some_and(|r| r.waiting() != 0)
    }

    /// Interrupts the socket wait of the thread with id `thread`, if it is
    /// in one: true if it was.
    pub(crate) fn abort(&self, thread: u64) -> bool {
        self.reactor
            .get()
            .is_some_and(|r| r.hook.get().is_some_and(|h| h.abort(thread)))
    }

    /// The runtime ended; see the module docs.
    pub(crate) fn shut_down(&self) {
        if let Some(r) = self.reactor.get() {
            r.shut_down();
        }
    }
}

/// Threads waiting on sockets are woken by harvests: a busy processor
/// harvests at a scheduling point at most every
/// [`HARVEST_EVERY`](super::HARVEST_EVERY), an idle one blocks in
/// `epoll_wait` (`Processor::idle`).
impl Source for Readiness {
    const EVERY: Every = Every::Ticks;

    #[inline]
    fn is_ready(&self) -> bool {
        self.reactor.get().is_some_and(|r| r.due())
    }

    fn deliver(&self, _to: &mut dyn Deliver) {
        // The woken threads reach their processors through their own
        // scheduler, not through `to`.
        if let Some(r) = self.reactor.get() {
            r.harvest(Some(Duration::ZERO));
        }
    }

    fn until_next(&self) -> Option<Duration> {
        None
    }
}
