//! Who drives a processor, and the proof of it: the [`Driver`] whose
//! kernel thread runs a processor's scheduler loop, the [`OwnerToken`]
//! through which alone the processor's owner part is reached, and the
//! [`Delivery`] through which event sources hand work to the processor
//! asking them.
//!
//! This file owns the proof's types; it must not make a token where the
//! driver word does not say so (see `OwnerToken::new`'s contract).

use std::marker::PhantomData;
use std::time::Instant;

use super::Processor;
use crate::event::Deliver;
use crate::event::stats::Kind;
use crate::sched::Event;

/// The kernel thread that drives a processor, as the processor's scheduler
/// loop sees it (an activation; see `upcall`).
///
/// # Safety
/// An implementation drives the processors it runs the loop of: its kernel
/// thread holds their driver word and one level of its critical count.
pub(crate) unsafe trait Driver {
    /// Whether it still drives `p` (it loses `p` when a thread of its comes
    /// back from the kernel to find `p` taken).
    fn drives(&self, p: &Processor) -> bool;

    /// Moves its kernel thread to the core `p` runs on, if that changed.
    fn pin_for(&self, p: &Processor);

    /// `p` is leaving the set: stops driving it (its queues go to the
    /// injector first, see [`Processor::give_queues_away`]). `false` if `p`
    /// was added back meanwhile and goes on.
    fn stop(&self, tok: OwnerToken<'_>, p: &Processor) -> bool;
}

/// Proof that the calling kernel thread drives a processor: the only way to
/// a processor's [`Owner`](super::Owner) part. Zero-sized, passed by value; a callee that
/// needs it again reborrows it ([`OwnerToken::rb`]), and reaching the owner
/// part consumes a reborrow for as long as the reference lives, so two
/// references never coexist through one token. Made, unsafely, where the
/// driver word says so: by `upcall::enter` (its `Entered` guard carries
/// one), by the scheduler loop of the processor's [`Driver`], and by a
/// thread resumed on the processor (it holds the level its switch handed
/// over).
pub(crate) struct OwnerToken<'a> {
    _borrow: PhantomData<&'a mut ()>,
    _not_send: PhantomData<*const ()>,
}

impl OwnerToken<'_> {
    /// A token for the processors the calling kernel thread drives.
    ///
    /// # Safety
    /// The calling kernel thread drives every processor the token (or a
    /// reborrow of it) is used with, for as long as it uses it (it holds
    /// the processor's driver word and a level of its critical count), and
    /// no reference obtained through another token into the same
    /// processor's owner part lives while this one is used.
    #[inline]
    pub(crate) unsafe fn new() -> OwnerToken<'static> {
        OwnerToken {
            _borrow: PhantomData,
            _not_send: PhantomData,
        }
    }

    /// The token again, for a callee, borrowed until the callee's use of
    /// it ends.
    #[inline(always)]
    pub(crate) fn rb(&mut self) -> OwnerToken<'_> {
        OwnerToken {
            _borrow: PhantomData,
            _not_send: PhantomData,
        }
    }
}

/// A processor as the event sources see it when it asks them: they hand
/// what they have to its policy, counted in the runtime's upcall
/// statistics.
pub(crate) struct Delivery<'a> {
    /// The processor asking.
    pub(crate) p: &'a Processor,
    /// Its owner token, lent for the delivery.
    pub(crate) tok: OwnerToken<'a>,
}

impl Deliver for Delivery<'_> {
    fn event(&mut self, event: Event<'_>, cause: Instant) {
        let kind = match event {
            Event::Blocked(_) => Kind::Blocked,
            Event::Unblocked(_) => Kind::Unblocked,
            Event::Preempted(_) => Kind::Preempted,
            Event::ProcessorAdded(_) => Kind::ProcessorAdded,
            Event::ProcessorRemoved(_) => Kind::ProcessorRemoved,
        };
        self.p.policy_event(self.tok.rb(), event);
        self.p.shared().counters.record(kind, cause);
    }

    fn made_ready(&mut self) {
        let shared = self.p.shared();
        if shared.processors.len() > 1 {
            shared.notify_work();
        }
    }
}
