//! An activation driving a processor: the scheduler loop it runs, how it
//! stops a processor that leaves the set, and how a thread that came back
//! from the kernel to find its processor taken is handed back.
//!
//! This file owns the activation's side of the [`Driver`] contract; it
//! must not move the driver word except to let go of it when the
//! processor stops (the word's transitions are `per_processor`'s).

use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::time::Instant;

use super::{Activation, PROBING};
use crate::header::Thread;
use crate::processor::{Driver, OwnerToken, Processor, RunEnd, STOPPED, STOPPING};
use crate::upcall::{Posted, Shared};

impl Activation {
    /// Runs `p`'s scheduler loop until the processor is lost, stopped or the
    /// runtime shuts down.
    pub(in crate::upcall) fn drive(&self, shared: &Shared, p: &'static Processor) -> RunEnd {
        let end = p.run(&Driving { act: self, shared });
        self.processor.set(ptr::null());
        self.words.set(ptr::null());
        end
    }

    /// The running thread found its processor taken (it was away in the
    /// kernel): it leaves this kernel thread for the scheduler loop's
    /// frame, which hands it back with `Unblocked`. `blocked_at`: when the
    /// monitor found this kernel thread asleep without a lend (its
    /// [`blocked_at`](Self::blocked_at)), `0` if it was not. Returns the
    /// processor it resumes on, with its critical count held.
    #[cold]
    #[inline(never)]
    pub(crate) fn give_back_thread(&self, blocked_at: u64) -> &'static Processor {
        self.lost_processor.store(false, Relaxed);
        let lost = self
            .processor()
            .expect("gives back the thread of a processor it drove");
        self.processor.set(ptr::null());
        self.words.set(ptr::null());
        let header = self.turn.running.replace(ptr::null_mut());
        // SAFETY: `header` is the running thread's own block; the taker of
        // the processor forgot its handle on it (`deliver_blocked`), whose
        // reference this one now carries.
        let me = unsafe { Thread::from_raw(header) };
        if blocked_at != 0 {
            // Found asleep without a lend: its turn ran until then. (A lend
            // ended the turn itself, `handover::lend`.)
            lost.end_taken_turn(me.header(), &self.turn, blocked_at);
        }
        let (from, my_header) = (me.context_ptr(), me.as_ptr());
        self.lost.set(Some((me, Instant::now())));
        // SAFETY: `from` is our own context slot, kept alive by the handle
        // in `lost` until someone resumes it; `sched` is this activation's
        // scheduler loop, suspended in `Processor::run` since it switched to
        // a thread, and resumed only here.
        crate::processor::switch_out_to(from, self.sched.get(), my_header)
    }
}

/// An activation driving a processor, as the processor's scheduler loop
/// sees it.
struct Driving<'a> {
    act: &'a Activation,
    shared: &'a Shared,
}

// SAFETY: an activation runs the loop of the processor it took the driver
// word of (`begin`), at one level of its count.
unsafe impl Driver for Driving<'_> {
    #[inline]
    fn drives(&self, p: &Processor) -> bool {
        debug_assert_eq!(
            self.act.critical.load(Relaxed),
            1,
            "the scheduler loop runs at one level"
        );
        std::ptr::eq(self.act.processor().map_or(ptr::null(), ptr::from_ref), p)
    }

    #[inline]
    fn pin_for(&self, p: &Processor) {
        self.act.pin_for(self.shared, p);
    }

    /// Leaves the set: gives every queued thread to the injector, lets go
    /// of the driver word and lets the others know. `false` if the
    /// processor was re-added meanwhile (it goes on).
    fn stop(&self, mut tok: OwnerToken<'_>, p: &Processor) -> bool {
        let (act, shared) = (self.act, self.shared);
        // SAFETY: we drive `p` (its scheduler loop calls us).
        unsafe { p.give_queues_away(tok.rb()) };
        let words = shared.words(p);
        // Our word, or `A|PROBING` if the monitor is checking us: it will
        // see our count (the scheduler loop runs at one level) and fail to
        // put the word back, so its mark on `away` is ours to undo, and the
        // flag must not come back with the word.
        let me = words.release();
        debug_assert_eq!(
            me & !PROBING,
            act.word(),
            "stopping a processor we do not drive"
        );
        if me & PROBING != 0 {
            act.away.store(false, Relaxed);
        }
        if p.membership
            .compare_exchange(STOPPING, STOPPED, AcqRel, Acquire)
            .is_err()
        {
            words.restore(act.word());
            return false;
        }
        shared.sources.upcalls.post(
            Posted::ProcessorRemoved(p.index),
            shared.instant_of(words.changed_at.load(Relaxed)),
        );
        shared.notify_work();
        true
    }
}
