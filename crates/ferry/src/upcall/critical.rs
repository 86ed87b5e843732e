//! The runtime-critical count of each kernel thread (see `activation`'s
//! module docs for its protocol): entering the runtime raises it, leaving
//! lowers it and performs a preemption that waited meanwhile.
//!
//! This file owns the raise (checked against the kernel thread the code
//! runs on, in one block the preemption handler does not interrupt) and
//! the release; it must not switch threads but through the preemption a
//! release performs.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::compiler_fence;

use super::activation::{Activation, LOCAL, local};
use crate::processor::Processor;

/// Marks the calling kernel thread as in runtime-critical code (or holding
/// a spinlock) until the returned guard drops; `None` on a kernel thread
/// that is no activation (nothing there can be preempted or taken).
///
/// The activation is returned for the caller's immediate use only: after a
/// switch the code may run on another one.
///
/// Entering from the thread's own code (a count of zero), it first makes
/// sure the kernel thread still drives its processor: a lent one is taken
/// back, and if it was taken (the thread slept in the kernel), the thread
/// is handed back and this returns once it runs again, on whichever kernel
/// thread. Nested entries need no check: nobody takes a processor from a
/// kernel thread whose count is above zero (the handshake in the module
/// docs), so code inside the runtime or under a spinlock never switches
/// for this reason.
#[inline(never)]
pub(crate) fn critical_enter() -> Option<(Critical, &'static Activation)> {
    // Entering from a count of zero, this code may be preempted and moved
    // to another kernel thread until the count is raised, so the activation
    // `raise` read may name the kernel thread it ran on a moment ago;
    // `raise` checks, and then we ask again. Nested, the count holds it
    // here.
    let (a, c) = loop {
        let (a, c) = raise();
        if a.is_null() {
            return None;
        }
        if c != MOVED {
            // SAFETY: a non-null `LOCAL` is an activation kept alive by the
            // runtime's list while its kernel thread runs (see `local`).
            break (unsafe { &*a }, c);
        }
    };
    // Pairs with the monitor's `heavy_fence` (see the module docs).
    ferry_queue::wait::light_fence();
    let critical = Critical {
        _not_send: PhantomData,
    };
    // (The words of the processor it drives, kept beside it: one load, as
    // the processor's own field would be; null when it drives none.)
    if c == 0
        // SAFETY: set with `processor` in `begin` to the words of that
        // processor, which live as long as its runtime, and cleared with it.
        && let Some(words) = unsafe { a.words.get().as_ref() }
    {
        let d = words.driver.load(Acquire);
        if d != a.word() {
            return back_from_call(critical, a, d);
        }
    }
    Some((critical, a))
}

/// [`critical_enter`]'s rare branch, out of line (inlined, it made every
/// entry save more registers): back from a blocking call (or entering from
/// inside one) to its processor, whose driver word is `d`: the call is over.
#[cold]
#[inline(never)]
fn back_from_call(
    critical: Critical,
    a: &'static Activation,
    d: usize,
) -> Option<(Critical, &'static Activation)> {
    let p = a
        .processor()
        .expect("an activation with words drives a processor");
    super::blocking::leave_call(a);
    super::handover::reclaim_or_give_back(p, a, d);
    // Possibly resumed on another kernel thread: ask again.
    Some((critical, local()?))
}

/// What [`raise`] returns for a count it could not raise: the calling code
/// was moved off the kernel thread whose activation it read.
const MOVED: u32 = u32::MAX;

/// Reads the calling kernel thread's activation (null if it is none) and
/// raises its count by one, returning it with the count before; or the
/// count [`MOVED`] if the code no longer runs on the activation's kernel
/// thread (it was moved after the read, and that count belongs to whatever
/// runs there now). The check and the store are one `asm!` block
/// (`arch::raise_on_home`, always inlined) in a function of its own, whose code the preemption handler leaves alone
/// (`preempt::in_count_update`): no move can come between them, whatever
/// the compiler makes of the code around it. The read of `LOCAL` is in the
/// same function (one call per entry instead of two); where the compiler
/// keeps it out of line (a debug build), a move after it is what the check
/// catches.
#[inline(never)]
fn raise() -> (*const Activation, u32) {
    let a = LOCAL.with(Cell::get);
    // SAFETY: as in `local`: a non-null `LOCAL` is a live activation.
    let Some(act) = (unsafe { a.as_ref() }) else {
        return (a, 0);
    };
    // SAFETY: both pointers are to fields of a live activation (activations
    // outlive their runtime's threads); `critical` is only ever written from
    // the kernel thread it belongs to, whose thread pointer `home` holds,
    // with plain relaxed stores (`critical_exit`).
    let before = unsafe { crate::arch::raise_on_home(act.home.as_ptr(), act.critical.as_ptr()) };
    (a, before)
}

/// Where `raise` starts (for the preemption handler).
pub(crate) fn raise_address() -> usize {
    raise as *const () as usize
}

/// The processor the calling kernel thread drives, without entering the
/// runtime: for a context that was just switched to (it runs with the
/// level the switch handed over).
pub(crate) fn resumed_processor() -> Option<&'static Processor> {
    local()?.processor()
}

/// The calling kernel thread's critical count (0 off the runtime). Exact
/// only while the caller holds a level: at zero, a preemption may move it
/// between reading its activation and the count.
pub(crate) fn critical_depth() -> u32 {
    local().map_or(0, |a| a.critical.load(Relaxed))
}

/// Leaves one level of runtime-critical code on the calling kernel thread;
/// at zero, performs a preemption that waited for it.
///
/// The caller holds a level, so until the store `a` is this kernel
/// thread's; once the count is zero the code may be moved, so nothing
/// after the store touches `a`. (A preemption that arrives between the
/// look at `chained` and the store stays chained until the next time the
/// count reaches zero here, or the monitor asks again.)
#[inline(never)]
fn critical_exit() {
    // `LOCAL` read here rather than through `local`, saving a call: this
    // function is never inlined and does not switch before its last use of
    // `a` (only `preempt::chained` may, after the store), so the address
    // cannot outlive the kernel thread it was read on.
    // SAFETY: as in `local`.
    let Some(a) = (unsafe { LOCAL.with(Cell::get).as_ref() }) else {
        return;
    };
    compiler_fence(SeqCst);
    let c = a.critical.load(Relaxed) - 1;
    // Only this kernel thread and its own signal handler touch `chained`:
    // look before the swap (a full barrier on x86), which it rarely needs.
    let chained = c == 0 && a.chained.load(Relaxed) && a.chained.swap(false, Relaxed);
    a.critical.store(c, Release);
    compiler_fence(SeqCst);
    if chained {
        super::preempt::chained();
    }
}

/// One level of the calling kernel thread's critical count (see the module
/// docs). Dropping it leaves the level on whatever kernel thread the code
/// runs on by then: a switch in between hands the level over with it.
#[must_use]
pub(crate) struct Critical {
    _not_send: PhantomData<*const ()>,
}

impl Critical {
    /// Leaves without dropping through `Drop`'s chained-preemption check
    /// (the count is handed to the context switched to).
    pub(crate) fn hand_over(self) {
        std::mem::forget(self);
    }
}

impl Drop for Critical {
    fn drop(&mut self) {
        critical_exit();
    }
}

/// Leaves one level of the count that a context switched to us handed over
/// (a thread's first run).
pub(crate) fn critical_release_inherited() {
    critical_exit();
}
