//! The runtime's upcall queue: scheduler-activation events posted for
//! whichever processor looks next (`Unblocked` threads whose processor was
//! taken while they were in the kernel, and processor removals); an event
//! source (see the parent module).
//!
//! This file owns the queue and its length word; it must not decide what
//! the events mean (the processor's policy does), and never blocks (but,
//! with memory short, a millisecond at a time in [`Upcalls::post`]). The
//! queue is under a spin lock ([`ferry_queue::lock::SpinLock`]) held for a
//! push or a swap: the queue grows, and the taken events are freed,
//! outside it, so no holder allocates, frees or sleeps.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use ferry_queue::lock::SpinLock;

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
    queue: SpinLock<VecDeque<(Posted, Instant)>>,
    len: AtomicUsize,
}

impl Upcalls {
    pub(crate) fn new() -> Upcalls {
        Upcalls {
            queue: SpinLock::new(VecDeque::new()),
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
        let mut grown: Option<VecDeque<(Posted, Instant)>> = None;
        loop {
            let old = {
                let mut q = self.queue.lock();
                if q.len() < q.capacity() {
                    q.push_back((event, at));
                    self.len.store(q.len(), Relaxed);
                    return;
                }
                match grown.take() {
                    // Moving the events over copies them and allocates
                    // nothing: the new queue had room for all and one more.
                    Some(mut bigger) if bigger.capacity() > q.len() => {
                        bigger.extend(q.drain(..));
                        bigger.push_back((event, at));
                        self.len.store(bigger.len(), Relaxed);
                        std::mem::replace(&mut *q, bigger)
                    }
                    // Grown meanwhile by another poster, or not yet: size
                    // the next try on what the queue holds now.
                    _ => {
                        let want = (q.len() * 2).max(8);
                        drop(q);
                        grown = Some(Self::with_room(want));
                        continue;
                    }
                }
            };
            // The full old buffer (now empty) is freed outside the lock.
            drop(old);
            return;
        }
    }

    /// An empty queue with room for `n` events, waiting a millisecond at a
    /// time while memory is short.
    fn with_room(n: usize) -> VecDeque<(Posted, Instant)> {
        let mut q = VecDeque::new();
        while q.try_reserve_exact(n).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        q
    }

    /// Takes the waiting events.
    pub(crate) fn take(&self) -> VecDeque<(Posted, Instant)> {
        let mut q = self.queue.lock();
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

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::{Posted, Upcalls};
    use std::sync::Arc;
    use std::time::Instant;

    fn removed(q: &mut std::collections::VecDeque<(Posted, Instant)>) -> Vec<usize> {
        q.drain(..)
            .map(|(e, _)| match e {
                Posted::ProcessorRemoved(i) => i,
                Posted::Unblocked(_) => unreachable!("only removals were posted"),
            })
            .collect()
    }

    #[test]
    fn posts_grow_the_queue_outside_the_lock_and_keep_their_order() {
        let u = Upcalls::new();
        for i in 0..1000 {
            u.post(Posted::ProcessorRemoved(i), Instant::now());
            assert!(u.pending());
        }
        let mut got = u.take();
        assert!(!u.pending());
        assert_eq!(removed(&mut got), (0..1000).collect::<Vec<_>>());
        assert_eq!(u.take().len(), 0);
    }

    #[test]
    fn racing_posters_lose_no_event() {
        let u = Arc::new(Upcalls::new());
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let u = Arc::clone(&u);
                std::thread::spawn(move || {
                    for i in 0..500 {
                        u.post(Posted::ProcessorRemoved(t * 1000 + i), Instant::now());
                    }
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in hs {
            h.join().unwrap();
        }
        all.extend(removed(&mut u.take()));
        all.sort_unstable();
        let want: Vec<usize> = (0..4)
            .flat_map(|t| (0..500).map(move |i| t * 1000 + i))
            .collect();
        assert_eq!(all, want);
    }
}
