//! A processor's scheduler loop, run by the kernel thread that drives it,
//! and the drain of a processor nobody drives any more.
//!
//! This file owns the loop's order of looks (driver, switch to finish,
//! shutdown, stop, event sources, then the policy's choice or the idle
//! path); it must not decide which thread is next (the policy does) nor
//! wait for work (`idle` does).

use std::ptr;

use super::{OwnerToken, Pending, Processor, RunEnd};
use crate::arch;
use crate::header::Thread;
use crate::processor::Driver;
use crate::sched::Policy;

impl Processor {
    /// The scheduler loop, run by `driver`'s kernel thread: runs threads
    /// until the runtime shuts down, the processor leaves the set, or the
    /// driver loses it (a thread of the driver's came back from the kernel
    /// to find it taken and switched to this loop to be handed back).
    pub(crate) fn run(&self, driver: &impl Driver) -> RunEnd {
        let shared = self.shared();
        // SAFETY: a `Driver` drives the processor whose loop it runs (its
        // contract), and the loop keeps no reference into the owner part
        // across the calls below.
        let mut tok = unsafe { OwnerToken::new() };
        loop {
            if !driver.drives(self) {
                return RunEnd::Lost;
            }
            self.finish_switch(tok.rb());
            if shared.is_shut_down() {
                return RunEnd::ShutDown;
            }
            if self.is_stopping() && driver.stop(tok.rb(), self) {
                return RunEnd::Stopped;
            }
            let handoff = if shared
                .sources
                .ready(true, &mut self.owner(tok.rb()).sources)
            {
                self.deliver_sources(tok.rb(), true)
            } else {
                None
            };
            driver.pin_for(self);
            // An activation given a call with nothing else ready runs
            // straight from the poll; else the policy picks.
            match handoff
                .map(|h| self.direct_call(tok.rb(), h))
                .or_else(|| self.with_policy(tok.rb(), |policy, cx| policy.next(cx)))
            {
                Some(t) => {
                    let to = self.enter_context(tok.rb(), Some(t));
                    let sched = self.owner(tok.rb()).sched;
                    // `t` was held or dropped (suspended, terminated) and
                    // nothing else was ready: `to` is this loop's own
                    // context, which is running, not saved. Look again.
                    if ptr::eq(to, sched) {
                        continue;
                    }
                    self.start_account(tok.rb());
                    // SAFETY: `sched` is the driver's scheduler context, on
                    // its kernel thread's own stack, saved here and resumed
                    // only by a thread this processor (or the driver) runs; `to` is a
                    // queued thread's context, saved or prepared and not
                    // resumed since.
                    unsafe { arch::switch(sched, to) };
                }
                None => self.idle(tok.rb(), shared),
            }
        }
    }

    /// Hands every thread still queued here to `abandon`, and gives the
    /// stacks and blocks this processor still holds to the global caches; `lent`: its driver was away in a
    /// kernel call, whose thread keeps the processor's reference to it.
    ///
    /// # Safety
    /// No kernel thread runs this processor any more.
    pub(crate) unsafe fn drain(&self, lent: bool, mut abandon: impl FnMut(Thread)) {
        // SAFETY: nobody drives the processor any more (the contract).
        let mut tok = unsafe { OwnerToken::new() };
        let owner = self.owner(tok.rb());
        owner.queue.clear(&mut abandon);
        if let Some(t) = self.next.take() {
            abandon(t);
        }
        if lent {
            // Its thread runs on, away in the kernel, on this reference.
            std::mem::forget(owner.current.take());
        }
        owner.current = None;
        owner.pending = Pending::None;
        owner.stacks.drain();
        // SAFETY: as for `owner` (the contract): nobody drives it.
        unsafe { self.drain_blocks() };
    }
}
