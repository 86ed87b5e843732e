//! The runtime's upcall queue: scheduler-activation events posted for
//! whichever processor looks next (`Unblocked` threads whose processor was
//! taken while they were in the kernel, and processor removals); an event
//! source (see the parent module).
//!
//! This file owns the queue and its length word; it must not decide what
//! the events mean (the processor's policy does) and never blocks but on
//! its short lock (and, with memory short, a millisecond at a time in
//! [`Upcalls::post`]).

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Deliver, Every, Source};
use crate::header::Thread;
use crate::sched::Event;

/// An event waiting for a processor to deliver it, with the moment its
/// cause happened (for the runtime's upcall statistics).
pub(crate) enum Posted {
    Unblocked(Thread),
    ProcessorRemoved(usize),
}

/// Events posted for whichever processor looks next: `Unblocked` threads
/// and processor removals.
///
/// | word | written by | meaning |
/// |------|------------|---------|
/// | `len` | a poster (under the lock, then `notify_work`), a deliverer (under the lock) | events waiting; read without the lock by every processor at each switch |
pub(crate) struct Upcalls {
    queue: Mutex<VecDeque<(Posted, Instant)>>,
    len: AtomicUsize,
}

impl Upcalls {
    pub(crate) fn new() -> Upcalls {
        Upcalls {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// Whether an event waits: one relaxed load.
    #[inline]
    pub(crate) fn pending(&self) -> bool {
        self.len.load(Relaxed) != 0
    }

    /// Posts an event caused at `at`; the caller then notifies processors.
    ///
    /// Never aborts and never drops the event (an `Unblocked` event carries
    /// its thread): when the queue cannot grow because memory is short, the
    /// posting kernel thread (an activation between its own kernel call and
    /// its next assignment, or a processor leaving the set) waits a
    /// millisecond at a time for memory, instead of aborting the process.
    pub(crate) fn post(&self, event: Posted, at: Instant) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        while q.try_reserve(1).is_err() {
            drop(q);
            std::thread::sleep(std::time::Duration::from_millis(1));
            q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        }
        q.push_back((event, at));
        self.len.store(q.len(), Relaxed);
    }

    /// Takes the waiting events.
    pub(crate) fn take(&self) -> VecDeque<(Posted, Instant)> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        self.len.store(0, Relaxed);
        std::mem::take(&mut *q)
    }
}

/// Events arrive from other kernel threads, which notify a parked processor
/// after posting (`Set::notify_work`); a busy processor looks at every
/// switch (one relaxed load).
impl Source for Upcalls {
    const EVERY: Every = Every::Switch;

    #[inline]
    fn is_ready(&self) -> bool {
        self.pending()
    }

    #[cold]
    fn deliver(&self, to: &mut dyn Deliver) {
        for (event, at) in self.take() {
            match event {
                Posted::Unblocked(t) => to.event(Event::Unblocked(t), at),
                Posted::ProcessorRemoved(i) => to.event(Event::ProcessorRemoved(i), at),
            }
        }
        to.made_ready();
    }

    #[inline]
    fn until_next(&self) -> Option<Duration> {
        None
    }
}
