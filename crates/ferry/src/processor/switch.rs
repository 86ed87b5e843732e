//! Switching between threads: what a thread that gives up its processor
//! leaves for the next context to do ([`Pending`], see the parent module's
//! docs), the switch itself, and the accounting of run time.
//!
//! This file owns the order of a switch; it must not choose the next
//! thread (the policy does, through `with_policy`) and never keeps the
//! processor's address across a switch.

use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

use super::{ACTIVE, Delivery, OwnerToken, Pending, Processor, To, Turn};
use crate::arch::{self, Context};
use crate::event::Sources;
use crate::event::stats::Kind;
use crate::header::{
    DROPPED, HELD, Header, SUSPENDED, TERMINATED, Thread, held_back, park_word::finish_parking,
};
use crate::sched::{Event, Policy, Ready};
use crate::sys;

impl Processor {
    /// Does what the context that switched to us left to do.
    pub(crate) fn finish_switch(&self, mut tok: OwnerToken<'_>) {
        match std::mem::replace(&mut self.owner(tok.rb()).pending, Pending::None) {
            Pending::None => {}
            Pending::Requeue(t) => {
                self.make_ready(tok.rb(), t, Ready::Yielded);
            }
            Pending::Park(t) => {
                // An unpark that came while it switched out: run it again.
                if !finish_parking(t.state()) {
                    self.make_ready(tok.rb(), t, Ready::Woken);
                }
            }
            Pending::Exit(t) => {
                // SAFETY: `t` exited and the switch away from it has landed:
                // nothing runs on its stack, and only we hold it now.
                if let Some(stack) = unsafe { t.take_stack() } {
                    self.release_stack(tok.rb(), stack);
                }
            }
            Pending::Hold(t) => hold(tok.rb(), t, Ready::Woken, self),
            Pending::Preempted(t, at) => {
                self.with_policy(tok.rb(), |policy, cx| policy.event(cx, Event::Preempted(t)));
                let shared = self.shared();
                shared.counters.record(Kind::Preempted, at);
                if shared.processors.len() > 1 {
                    shared.notify_work();
                }
            }
        }
    }

    /// Hands what the event sources have to this processor's policy (all
    /// of them, or only those asked at every switch). Out of line, so that
    /// the switch path keeps no delivery state.
    ///
    /// Returns the activation the delivery gave an incoming call to, if
    /// nothing else was ready here when it did (see
    /// [`Processor::make_ready`]): the caller switches straight to it
    /// (000's direct switch from the poll into the activation) or, if it
    /// cannot, queues it.
    #[cold]
    #[inline(never)]
    #[must_use]
    pub(super) fn deliver_sources(&self, mut tok: OwnerToken<'_>, all: bool) -> Option<Thread> {
        // The list is taken out for the delivery: a delivery may reach this
        // processor's owner part (queuing woken threads).
        let mut local = std::mem::take(&mut self.owner(tok.rb()).sources);
        self.owner(tok.rb()).delivering = true;
        self.shared().sources.deliver(
            all,
            &mut local,
            &mut Delivery {
                p: self,
                tok: tok.rb(),
            },
        );
        let owner = self.owner(tok.rb());
        owner.delivering = false;
        owner.sources = local;
        let handoff = owner.handoff.take()?;
        // Something else is ready (queued before, or made ready in the
        // same delivery: a reply, a timer, another call): the policy
        // orders them all by priority.
        if self.with_policy(tok.rb(), |policy, cx| policy.has_ready(cx)) {
            self.make_ready(tok.rb(), handoff, Ready::Woken);
            return None;
        }
        Some(handoff)
    }

    /// Counts a switch straight from the poll into an activation (see
    /// [`Processor::deliver_sources`]), lets the policy do what picking it
    /// would have done, and gives back the activation.
    #[inline]
    pub(super) fn direct_call(&self, mut tok: OwnerToken<'_>, h: Thread) -> Thread {
        self.shared().counters.direct_calls.fetch_add(1, Relaxed);
        self.with_policy(tok.rb(), |policy, cx| policy.runs_unpicked(cx, &h));
        h
    }

    /// Yields the running thread to the one the policy has ready here, if
    /// any.
    pub(crate) fn yield_current(&self, mut tok: OwnerToken<'_>) {
        let shared = self.shared();
        let handoff = if shared
            .sources
            .ready(true, &mut self.owner(tok.rb()).sources)
        {
            self.deliver_sources(tok.rb(), true)
        } else {
            None
        };
        if let Some(h) = handoff {
            // An incoming call, with nothing else ready: the yielding
            // thread gives way to its activation.
            let h = self.direct_call(tok.rb(), h);
            return self.switch_to(tok.rb(), To::Thread(h), Pending::Requeue);
        }
        match self.with_policy(tok.rb(), |policy, cx| policy.next_local(cx)) {
            Some(next) => self.switch_to(tok.rb(), To::Thread(next), Pending::Requeue),
            // A thread that yields with nothing else to run would go on
            // for ever after a shutdown: to the scheduler loop, which leaves.
            None if shared.is_shut_down() => self.switch_to(tok.rb(), To::Loop, Pending::Requeue),
            None => {}
        }
    }

    /// Makes `next` the running thread and returns its context, or the
    /// scheduler loop's when there is none. The thread learns which
    /// processor resumed it from its header, without a TLS lookup.
    #[inline]
    pub(super) fn enter_context(
        &self,
        mut tok: OwnerToken<'_>,
        mut next: Option<Thread>,
    ) -> *const Context {
        // A suspended thread is held, not run (see `thread`'s docs).
        while next.as_ref().is_some_and(|t| {
            let h = t.header();
            held_back(h, h.control.load(Relaxed))
        }) {
            let held = next.take().expect("checked above");
            let c = held.header().control.load(Acquire);
            if c & TERMINATED != 0 && !held.header().exiting.load(Relaxed) {
                // It never runs again: drop the runtime's reference.
                held.header().control.fetch_or(DROPPED, AcqRel);
                drop(held);
            } else if let Some(resumed) = try_hold(held) {
                next = Some(resumed);
                break;
            }
            if self.membership.load(Relaxed) == ACTIVE {
                next = self.with_policy(tok.rb(), |policy, cx| policy.next(cx));
            }
        }
        self.mark_dispatch(tok.rb(), next.is_some());
        let owner = self.owner(tok.rb());
        match next {
            Some(next) => {
                claim(&next, self);
                let to = next.context_ptr();
                // SAFETY: `turn` is our driver's, set in `bind`; only its
                // kernel thread (this one) touches it.
                unsafe { (*owner.turn).running.set(next.as_ptr().as_ptr()) };
                // (Its run time is counted from the turn's `since`: the
                // clock read of the `account` that ends the last thread's
                // turn, or the scheduler loop's, taken after this choice,
                // one read per switch.)
                owner.current = Some(next);
                to
            }
            None => owner.sched,
        }
    }

    /// Ends the turn of the thread switched out, `h` (when the runtime
    /// accounts run time), and starts the next thread's from the same
    /// clock read: one `rdtsc` a switch, and a plain load and store of the
    /// count. The C API, which accounts (`thread_info` reports it), pays two
    /// of them per fork+join: about 11 ns, 5-6% of it, on the development
    /// VM.
    ///
    /// Called once the next thread is chosen (`enter_context`), right
    /// before the switch: choosing may wait (for the injector's lock, held
    /// by a kernel thread the kernel stopped), and a turn must not begin
    /// before its thread was chosen, or it would count again a stretch the
    /// thread ran elsewhere before it was queued. The wait is the outgoing
    /// thread's, which still holds the processor.
    ///
    /// # Safety
    /// `h` is the block of the thread this processor ran until now, kept
    /// alive by its pending action or `current` until after the switch.
    #[inline]
    pub(super) unsafe fn account(&self, mut tok: OwnerToken<'_>, h: NonNull<Header>) {
        let owner = self.owner(tok.rb());
        if owner.account_cpu {
            let now = sys::cycles();
            // SAFETY: as in `enter_context`: our driver's, set in `bind`.
            let since = unsafe { &(*owner.turn).since };
            let ran = now.saturating_sub(since.replace(now));
            // SAFETY: alive (the contract).
            add_ticks(unsafe { h.as_ref() }, ran);
        }
    }

    /// The running thread's run time in ticks, with the turn it is in up
    /// to `now` (the time stamp counter, read by the caller a few
    /// instructions ago; a reading from before the turn began counts none
    /// of it), if the runtime accounts it. `h` is the thread this processor
    /// runs.
    pub(crate) fn running_cpu_ticks_at(
        &self,
        mut tok: OwnerToken<'_>,
        h: &Header,
        now: u64,
    ) -> Option<u64> {
        let owner = self.owner(tok.rb());
        owner.account_cpu.then(|| {
            // SAFETY: as in `enter_context`: our driver's, set in `bind`.
            let since = unsafe { (*owner.turn).since.get() };
            // A `now` read before a switch that began this turn (the
            // caller's entry handed the thread back and it resumed here)
            // counts no turn at all, never a negative one.
            h.cpu_ticks
                .load(Relaxed)
                .wrapping_add(now.saturating_sub(since))
        })
    }

    /// Adds `ticks` run on behalf of the thread this processor runs (`h`)
    /// elsewhere (an activation of a server it called) to its count, if the
    /// runtime accounts run time. Its processor is the only writer while it
    /// runs, and the caller holds it (entered: no preemption in between),
    /// so a plain load and store suffice.
    pub(crate) fn charge_running(&self, mut tok: OwnerToken<'_>, h: &Header, ticks: u64) {
        if self.owner(tok.rb()).account_cpu {
            add_ticks(h, ticks);
        }
    }

    /// Starts the run time of a thread the scheduler loop switches to (when
    /// the runtime accounts it), once it is chosen: the loop's time is
    /// nobody's.
    #[inline]
    pub(super) fn start_account(&self, mut tok: OwnerToken<'_>) {
        let owner = self.owner(tok.rb());
        if owner.account_cpu {
            // SAFETY: as in `enter_context`: our driver's, set in `bind`.
            unsafe { (*owner.turn).since.set(sys::cycles()) };
        }
    }

    /// Ends the running thread's turn (when the runtime accounts run time):
    /// its kernel thread is about to lend the processor for a call that may
    /// block. If it takes the processor back, the turn goes on from here
    /// (it held the processor all along); if a spare takes it, the thread
    /// held it until now.
    pub(crate) fn end_turn_for_lend(&self, mut tok: OwnerToken<'_>) {
        let Some(h) = self.owner(tok.rb()).current.as_ref().map(Thread::as_ptr) else {
            return;
        };
        // SAFETY: the running thread's block, kept alive by `current`.
        unsafe { self.account(tok.rb(), h) };
    }

    /// Ends the turn of thread `h`, whose processor (this one) a spare took
    /// while its kernel thread slept in the kernel without announcing it:
    /// the turn (begun at `turn.since`, the sleeper's own record) ran until
    /// `at`, when the monitor found the kernel thread asleep. Called by
    /// that kernel thread, which holds the thread and has not handed it
    /// back yet, so no processor runs it and nothing else writes its count.
    pub(crate) fn end_taken_turn(&self, h: &Header, turn: &Turn, at: u64) {
        if self.shared().account_cpu {
            let ran = at.saturating_sub(turn.since.get());
            add_ticks(h, ran);
        }
    }

    /// Switches the running thread away and holds it (it suspended itself);
    /// returns once it is resumed, on whichever processor.
    pub(crate) fn switch_away_held(&self, mut tok: OwnerToken<'_>) -> &'static Processor {
        let me = self
            .owner(tok.rb())
            .current
            .take()
            .expect("switch_away_held outside a thread");
        let from = me.context_ptr();
        let my_header = me.as_ptr();
        self.owner(tok.rb()).pending = Pending::Hold(me);
        let to = self.next_context(tok.rb());
        // SAFETY: its pending hold keeps the block alive past the switch.
        unsafe { self.account(tok.rb(), my_header) };
        switch_out_to(from, to, my_header)
    }

    /// The next context: the thread the policy chooses (a handoff, straight
    /// from thread to thread), else the scheduler loop. A processor that is
    /// leaving the set, or whose runtime shut down, goes to its scheduler
    /// loop.
    #[inline]
    pub(super) fn next_context(&self, mut tok: OwnerToken<'_>) -> *const Context {
        // After a shutdown, to the loop, which leaves: a thread that
        // spawns its successor and exits would otherwise relay for ever.
        let next = if self.membership.load(Relaxed) == ACTIVE && !self.shared().is_shut_down() {
            self.with_policy(tok.rb(), |policy, cx| policy.next(cx))
        } else {
            None
        };
        self.enter_context(tok.rb(), next)
    }

    /// Switches away from the running thread, leaving `pending` for whoever
    /// runs next: straight to the thread the policy picks if there is one
    /// (handoff), else to the scheduler loop. Returns when the thread is
    /// resumed, possibly on another processor.
    pub(crate) fn switch_away(
        &self,
        mut tok: OwnerToken<'_>,
        make_pending: impl FnOnce(Thread) -> Pending,
    ) {
        self.switch_to(tok.rb(), To::Policy, make_pending);
    }

    /// As [`Processor::switch_away`], to `to`.
    #[inline]
    pub(super) fn switch_to(
        &self,
        mut tok: OwnerToken<'_>,
        mut to: To,
        make_pending: impl FnOnce(Thread) -> Pending,
    ) {
        let owner = self.owner(tok.rb());
        // Threads handed off among themselves never pass through the
        // scheduler loop: ask the event sources here too (those that read
        // the clock every so often).
        owner.ticks = owner.ticks.wrapping_add(1);
        let tick = owner.ticks.is_multiple_of(Sources::TICKS);
        if tick {
            // Threads that only yield would hand the processor among
            // themselves for ever after a shutdown: every so often, look,
            // and go to the scheduler loop, which leaves (the chosen
            // thread is abandoned with the others still queued).
            if self.shared().is_shut_down() {
                if let To::Thread(t) = to {
                    self.make_ready(tok.rb(), t, Ready::Yielded);
                }
                to = To::Loop;
            }
        }
        if self
            .shared()
            .sources
            .ready(tick, &mut self.owner(tok.rb()).sources)
            && let Some(h) = self.deliver_sources(tok.rb(), tick)
        {
            // An activation given a call with nothing else ready: straight
            // to it when the policy would have picked, else queued.
            match to {
                To::Policy
                    if self.membership.load(Relaxed) == ACTIVE && !self.shared().is_shut_down() =>
                {
                    to = To::Thread(self.direct_call(tok.rb(), h));
                }
                _ => self.make_ready(tok.rb(), h, Ready::Woken),
            }
        }
        let me = self
            .owner(tok.rb())
            .current
            .take()
            .expect("switch_away outside a thread");
        let from = me.context_ptr();
        let my_header = me.as_ptr();
        self.owner(tok.rb()).pending = make_pending(me);
        let to = match to {
            To::Thread(t) => self.enter_context(tok.rb(), Some(t)),
            To::Policy => self.next_context(tok.rb()),
            To::Loop => self.enter_context(tok.rb(), None),
        };
        // SAFETY: its pending action keeps the block alive past the switch.
        unsafe { self.account(tok.rb(), my_header) };
        switch_out_to(from, to, my_header);
    }

    /// Ends the running thread: its stack is released by whoever runs next.
    pub(crate) fn exit_current(&self, mut tok: OwnerToken<'_>) -> ! {
        let me = self
            .owner(tok.rb())
            .current
            .take()
            .expect("exit outside a thread");
        let my_header = me.as_ptr();
        self.owner(tok.rb()).pending = Pending::Exit(me);
        let to = self.next_context(tok.rb());
        // SAFETY: its pending exit keeps the block alive past the switch.
        unsafe { self.account(tok.rb(), my_header) };
        // SAFETY: `to` as in `switch_out_to`; nothing on this stack is used
        // again (the caller dropped its locals), and the stack is released
        // only after the switch, by `finish_switch`.
        unsafe { arch::resume(to) }
    }
}

/// Adds `ticks` to thread `h`'s run time. One writer at a time, so a plain
/// load and store (not a locked add): the processor running the thread
/// (its switch out, a lend, a charge from a server it called), or its
/// kernel thread ending a turn it lost its processor in before it hands the
/// thread back; the next one to run it is handed it through a queue or
/// slot (release, acquire) after the write.
#[inline]
fn add_ticks(h: &Header, ticks: u64) {
    h.cpu_ticks
        .store(h.cpu_ticks.load(Relaxed).wrapping_add(ticks), Relaxed);
}

/// Records in `t`'s header that `p` is about to switch to it. Only the
/// processor doing so calls it, while the thread is not running.
#[inline]
pub(super) fn claim(t: &Thread, p: &Processor) {
    t.header()
        .processor
        .store(ptr::from_ref(p).cast_mut().cast(), Relaxed);
}

/// The processor that switched to the thread owning `header`.
///
/// # Safety
/// Called by that thread, running (so its block is alive and [`claim`]
/// was called for this run).
#[inline]
pub(super) unsafe fn resumed_on(header: NonNull<Header>) -> &'static Processor {
    // SAFETY: the block is live (the contract) and the processor, owned by
    // the runtime's `Shared`, outlives every thread run on it.
    unsafe { &*header.as_ref().processor.load(Relaxed).cast::<Processor>() }
}

/// Holds suspended thread `t` (its `control` word takes over the runtime's
/// reference), or gives it back if it was resumed meanwhile.
pub(super) fn try_hold(t: Thread) -> Option<Thread> {
    match t
        .header()
        .control
        .compare_exchange(SUSPENDED, SUSPENDED | HELD, AcqRel, Acquire)
    {
        Ok(_) => {
            let _ = t.into_raw();
            None
        }
        Err(_) => Some(t),
    }
}

/// Holds `t` as [`try_hold`] does, or queues it on `p` if it was resumed.
pub(super) fn hold(mut tok: OwnerToken<'_>, t: Thread, why: Ready, p: &Processor) {
    if let Some(t) = try_hold(t) {
        p.make_ready(tok.rb(), t, why);
    }
}

/// Saves the running thread's context into `from`, continues `to`, and once
/// someone resumes the thread (on whichever processor) finishes the switch
/// there and puts back the thread's errno. Returns the processor it resumed
/// on. The caller holds one level of the critical count, which `to`
/// inherits and the resumer hands back.
pub(crate) fn switch_out_to(
    from: *mut Context,
    to: *const Context,
    my_header: std::ptr::NonNull<Header>,
) -> &'static Processor {
    // errno belongs to the kernel thread; a user-level thread keeps its own
    // on its stack across the switch and puts it back wherever it resumes.
    let errno_slot = crate::sys::errno_location();
    // SAFETY: the calling kernel thread's own errno slot.
    let errno = unsafe { *errno_slot };
    // SAFETY: `from` is the running thread's own context slot, kept alive by
    // its `Thread` (in a pending action, a queue or a lost-thread slot) until
    // it is resumed; `to` is a context that was saved or prepared and not
    // resumed since (a queued thread's, or a scheduler loop's, which is
    // suspended while any thread runs on its processor).
    unsafe { arch::switch(from, to) };
    // Resumed, possibly by another processor on another kernel thread: the
    // one that resumed us left itself in our header.
    // SAFETY: we run, so the processor that switched to us holds our block
    // as its `current`; it wrote `processor` just before.
    let p = unsafe { resumed_on(my_header) };
    // SAFETY: we run on `p` now, with the level of the critical count the
    // switch handed over: the calling kernel thread drives `p`, and nothing
    // up this stack holds a reference into its owner part (the switch left
    // all of them behind).
    let mut tok = unsafe { OwnerToken::new() };
    p.finish_switch(tok.rb());
    // SAFETY: the errno slot of the kernel thread driving `p`, which is the
    // one running us now (set in `bind`).
    unsafe { *p.owner(tok.rb()).errno = errno };
    p
}
