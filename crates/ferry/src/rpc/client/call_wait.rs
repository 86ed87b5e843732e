//! A caller's registered wait for its call ([`CallWait`]): what the
//! terminator of a thread stopped anywhere in a call gives back for it
//! (000 §5: termination splits the chain).
//!
//! This room owns the call's stages as termination sees them and the
//! clean-up of each; it must not send, wait or read replies (the parent
//! does) and must not touch the waiter word but through the parent's
//! `terminated`.
//!
//! # Stages
//!
//! A synchronous call ([`ClientChan::call`]) registers its record before it
//! takes anything, so a caller terminated at any step of the call leaves
//! nothing behind. Each step moves the stage in the same critical section
//! (a spinlock held, or the critical count raised) as the step itself, and
//! the preemption that stops a thread waits for the count to fall: the
//! terminator always finds the stage that matches what the call holds.
//!
//! | stage | set by the caller | what it holds | the terminator |
//! |-------|-------------------|---------------|----------------|
//! | `Nothing` | at the start; after giving back a failed call's permit | nothing | nothing to do |
//! | `Permit` | taking a permit of `free` | a permit | gives the permit back |
//! | `Slot(t)` | reserving slot `t` (under `slots`) | a permit, a slot being written | frees the slot, gives the permit back |
//! | `Armed(t)` | arming the slot's waiter (under its `who` lock); the index is pushed next | a call the server may see | aborts it (`terminated`: the server's activation is alerted, a late reply discarded), gives the slot and the permit back |
//!
//! One window is left open: a permit the semaphore hands over after the
//! caller parked for one (all slots were taken) is the caller's from the
//! moment its wait returns, a few instructions before the stage says so.
//! A caller terminated just there keeps that permit for good (the channel
//! has one slot fewer); an uncontended permit is taken inside the critical
//! section and has no such window.
//!
//! A started [`Call`](crate::rpc::Call) registers its record only while
//! its thread waits in it (its `Armed` stage): a thread terminated while it
//! holds a started call without waiting leaves it to the `Call`'s
//! destructor, which termination does not run (see `Thread::terminate`).

use std::cell::Cell;
use std::sync::atomic::AtomicUsize;

use super::ClientChan;
use crate::header::wait_record::WaitRecord;
use crate::rpc::logical;
use crate::rpc::slots::Ticket;
use crate::waits::WaitsOn;

/// How far a call got (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Nothing taken, or all given back.
    Nothing,
    /// A permit of `free` taken.
    Permit,
    /// A permit and the slot of this ticket, not yet armed.
    Slot(Ticket),
    /// The slot's waiter armed for this ticket: the server may see it.
    Armed(Ticket),
}

/// A caller's wait for its reply, registered with its thread: a thread
/// terminated in it aborts the call, so that the server is alerted, the
/// slot and its permit come back, and nothing points into the dead stack.
#[repr(C)]
pub(super) struct CallWait<'a> {
    record: WaitRecord,
    chan: &'a ClientChan,
    stage: Cell<Stage>,
    /// The frame word of the waiting thread.
    frame: Option<&'a AtomicUsize>,
}

impl<'a> CallWait<'a> {
    /// A record at `stage` for a call on `chan` by the thread whose frame
    /// word is `frame`; registered by the caller where it stays.
    pub(super) fn new(chan: &'a ClientChan, stage: Stage, frame: Option<&'a AtomicUsize>) -> Self {
        CallWait {
            record: WaitRecord::describing(
                CallWait::abandon,
                WaitsOn::Reply as u32,
                std::ptr::from_ref(chan) as usize,
            ),
            chan,
            stage: Cell::new(stage),
            frame,
        }
    }

    /// The record to register.
    pub(super) fn record(&self) -> &WaitRecord {
        &self.record
    }

    /// Moves to `stage`. Call it in the same critical section as the step
    /// that makes the stage true (see the module docs).
    pub(super) fn set(&self, stage: Stage) {
        self.stage.set(stage);
    }

    /// The terminator's side of the record.
    ///
    /// # Safety
    /// `r` is the record of a live `CallWait` whose thread stopped for good
    /// in it; called once.
    unsafe fn abandon(r: &WaitRecord) -> bool {
        // SAFETY: `CallWait` is `repr(C)` with `record` first, and records
        // of this kind are made only by `CallWait::new`.
        let w = unsafe { &*std::ptr::from_ref(r).cast::<CallWait<'_>>() };
        if let Some(word) = w.frame {
            logical::forget(word);
        }
        match w.stage.get() {
            Stage::Nothing => {}
            Stage::Permit => w.chan.free.release(),
            Stage::Slot(ticket) => {
                let _ = w.chan.slots.lock().release(&ticket);
                w.chan.free.release();
            }
            Stage::Armed(ticket) => w.chan.terminated(ticket),
        }
        true
    }
}

/// Runs `f` with the calling kernel thread's critical count raised: no
/// preemption (and so no termination) stops the thread inside it.
pub(super) fn critically<R>(f: impl FnOnce() -> R) -> R {
    let _critical = crate::upcall::critical_enter();
    f()
}
