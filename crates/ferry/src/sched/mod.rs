//! Scheduling decisions: where a runnable thread waits and which one a
//! processor runs next, behind the [`Policy`] interface; and the queues those
//! decisions choose among.
//!
//! This room owns the run queues (each processor's next-to-run slot and its
//! rings, one per [`Priority`]; the runtime's injector), the policies that
//! use them ([`WorkStealing`], the default, and [`FineGrain`], chosen per
//! runtime with [`SchedPolicy`]) and the processor's quantum word that the
//! fine-grain policy writes (`quantum_word`). It must not switch contexts,
//! sleep, wake processors or preempt threads: that mechanism is
//! [`crate::processor`]'s (and the monitor's, in `upcall`), which calls the
//! policy and does what it says. A policy call never runs user code and
//! never re-enters the policy.
//!
//! # Thread states
//!
//! A thread's state is where it is; each transition has one performer:
//!
//! | from | to | performed by |
//! |------|----|--------------|
//! | new | runnable | `spawn`: [`Policy::ready`] with [`Ready::Spawned`] (or the injector, off a processor) |
//! | runnable | running | a processor: [`Policy::next`] chose it, the processor switches to it (its `current`) |
//! | running | runnable | the thread yields: the processor that switched it out calls [`Policy::ready`] with [`Ready::Yielded`] once the switch has landed |
//! | running | parked | the thread parks (`PARKING`); the processor that switched it out makes it `PARKED` once the switch has landed (or requeues it, if an unpark came first) |
//! | parked | runnable | `unpark`: [`Policy::ready`] with [`Ready::Woken`] on the waker's processor (the injector off a processor); a timer's with [`Ready::Expired`], which the default policy queues in the injector's express lane of its level, ahead of the level's other threads |
//! | parked | running | an `rpc` activation given a call by its processor's own delivery of the event sources ([`Ready::Call`]) with nothing else ready there: the processor switches to it straight from the delivery, bypassing the policy (otherwise it is `parked -> runnable` as [`Ready::Woken`]) |
//! | running | exited | the thread's closure returned or panicked; the processor that switched it out for the last time takes back its stack |
//! | running | blocked | the thread's kernel thread lent its processor for a kernel call; a spare took it ([`Policy::event`] `Blocked`) |
//! | blocked | runnable | the call returned to find the processor gone; a processor delivers `Unblocked` and the policy queues it |
//! | running | runnable | a signal preempted it (time slice, processor removal); the processor delivers `Preempted` once the switch has landed |
//!
//! A runnable thread is in exactly one queue: a next-to-run slot, a ring, or
//! the injector. Stealing moves it between queues, never out of "runnable".

mod choice;
mod fine_grain;
#[cfg(all(test, not(ferry_loom)))]
mod fine_grain_tests;
mod injector;
pub(crate) mod quantum_word;
mod queue;
#[cfg(all(test, not(ferry_loom)))]
mod tests;
mod work_stealing;

/// The atomics `quantum_word` uses (its loom model swaps in loom's).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, Ordering};
}

pub(crate) use choice::Chosen;
pub use choice::{SchedPolicy, UnknownPolicy};
pub(crate) use fine_grain::FineGrain;
pub(crate) use injector::{Chain, Injector};
pub(crate) use queue::{NEXT_STEAL_AFTER, NextSlot, RING_SLOTS, RingLens, RunQueue};
pub(crate) use work_stealing::WorkStealing;

use std::sync::atomic::AtomicU32;

use crate::header::Thread;
pub(crate) use crate::header::{LEVELS, Priority, Ready};

/// A scheduler-activation event, as the scheduling policy receives it
/// (`upcall::Event` in the glossary; `upcall`'s module docs give each one's
/// cause and deliverer).
#[derive(Debug)]
// The default policy needs only some payloads; the others are for policies
// that keep per-thread or per-processor books.
#[allow(dead_code)]
pub(crate) enum Event<'a> {
    /// The thread blocked in the kernel; its processor now runs others. The
    /// thread is not runnable: the policy may note it, but not queue it.
    Blocked(&'a Thread),
    /// The thread's blocking call returned; it is runnable again and the
    /// policy must queue it.
    Unblocked(Thread),
    /// The thread was stopped in the middle of its work; it is runnable and
    /// the policy must queue it.
    Preempted(Thread),
    /// Processor `i` joined the set (delivered to its own policy).
    ProcessorAdded(usize),
    /// Processor `i` left the set; its threads went to the injector.
    ProcessorRemoved(usize),
}

/// What a policy sees of the processor it decides for: that processor's
/// queues and the runtime's.
pub(crate) struct Cx<'a> {
    /// The processor's rings and its handles on the others'.
    pub(crate) queue: &'a RunQueue,
    /// The processor's next-to-run slot.
    pub(crate) next: &'a NextSlot,
    /// The runtime's queue of threads made or woken off a processor.
    pub(crate) injector: &'a Injector,
    /// The processor's quantum word: the quantum, in microseconds, of the
    /// thread it runs, which the monitor enforces instead of the runtime's
    /// time slice when the runtime uses the fine-grain policy (that policy
    /// writes it when it picks a thread; see `fine_grain`'s table). The
    /// default policy leaves it alone.
    pub(crate) quantum: &'a AtomicU32,
}

/// The scheduling decisions of one processor. The processor calls it from
/// its own kernel thread only, never re-entrantly; a policy keeps whatever
/// per-processor state it needs in `self`.
///
/// Two policies plug in here, chosen per runtime ([`SchedPolicy`], held as
/// [`Chosen`]): [`WorkStealing`], the default, and [`FineGrain`]; the
/// mechanism around them — switching, parking, idling, waking processors,
/// preempting — is the same for both.
pub(crate) trait Policy {
    /// `t` became runnable on this processor for `why`: put it in a queue.
    fn ready(&mut self, cx: &Cx<'_>, t: Thread, why: Ready);

    /// Every thread of `batch` became runnable together on this processor
    /// (a batch of woken waiters): queue them all, in the batch's order
    /// (within each priority level), never in the next-to-run slot.
    fn ready_batch(&mut self, cx: &Cx<'_>, batch: Chain);

    /// The thread this processor should run next, taken out of its queue;
    /// `None` when there is nothing to run (the processor then idles).
    fn next(&mut self, cx: &Cx<'_>) -> Option<Thread>;

    /// For a thread that yields: the thread to give way to, taken out of
    /// this processor's own queues (or the injector), never stolen; `None`
    /// when there is nobody, and the yielding thread goes on.
    fn next_local(&mut self, cx: &Cx<'_>) -> Option<Thread>;

    /// Whether [`Policy::next`] would find a thread without stealing.
    fn has_ready(&self, cx: &Cx<'_>) -> bool;

    /// The processor is about to run `t` without asking the policy (an
    /// `rpc` activation switched to straight from the poll, see
    /// [`Ready::Call`]): do what picking it would have done.
    fn runs_unpicked(&mut self, cx: &Cx<'_>, t: &Thread);

    /// A scheduler-activation event for this processor (see
    /// [`crate::upcall`]): a thread blocked in the kernel or came back, a
    /// thread was preempted, a processor joined or left. A thread in
    /// `Unblocked` or `Preempted` is runnable and must be queued.
    fn event(&mut self, cx: &Cx<'_>, event: Event<'_>);
}
