//! The announced blocking call: [`blocking`] lends the calling thread's
//! processor for the duration of a closure that may block in the kernel,
//! and marks its kernel thread as in the call, so that thread control can
//! see it (a thread suspended or terminated meanwhile stops when the call
//! returns; `Thread::wait_suspended` reports it stopped in the call) and
//! `Thread::abort` can interrupt it.
//!
//! This room owns the lend-and-reclaim bracket, the call word and the abort
//! signal; the handoff to a spare and the give-back are `activation`'s and
//! `processor`'s. It must not stop a thread anywhere but after its call
//! returned, back on a processor, and sends the abort signal only to a
//! kernel thread whose call word names the thread being aborted.
//!
//! # The call word (`Activation::call`)
//!
//! | value | written by | meaning |
//! |-------|------------|---------|
//! | `0` | start; whoever leaves the call (`leave_call`, a CAS once `SENDING` is clear; from the first entry into the runtime after the call, on the call's kernel thread) | the kernel thread is in no announced blocking call |
//! | `H` | the thread entering a call (a store, on its own kernel thread, before the lend) | thread `H` (its block's address) is in a call on this kernel thread |
//! | `H\|ABORTED\|SENDING` | `abort_step` (CAS from `H` or `H\|ABORTED`, without `INTERRUPTED`) | the abort signal is being sent: the leaver waits for `SENDING` to clear |
//! | `H\|ABORTED` | `abort_step` (`fetch_and` after the signal went out); the entering thread (`fetch_or`, after the store of `H`) when it finds an alert pending at entry | the call is aborted: ferry's wrappers return `EINTR` rather than retry |
//! | `\|INTERRUPTED` | the abort signal's handler (CAS), when it interrupted a system call that then failed with `EINTR` | the abort took effect: `abort_step` sends no more |
//!
//! An abort signal that arrives before the call's system call started (the
//! thread was between the store of `H` and the kernel) interrupts nothing;
//! the aborter sends again until the handler reports `INTERRUPTED` or the
//! call is over. A signal is sent only while `SENDING` holds the call
//! open, and a leaver that finds `ABORTED` makes one system call after it
//! cleared the word, so that a signal still pending is delivered then and
//! cannot interrupt a later system call of its kernel thread.
//!
//! The word is read by thread control while it polls (`in_call`): the
//! leaver's CAS and a controller's change of the thread's `control` word
//! are both sequentially consistent, each followed by a load of the other
//! word, so either the thread sees the stop request when its call returns,
//! or the controller sees it out of the call (and interrupts it as usual).

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::atomic::fence;

use super::activation::{self, Activation};
use crate::sys;
use crate::upcall::Shared;

/// Call-word flag: the call is aborted.
const ABORTED: usize = 1;
/// Call-word flag: an abort signal is on its way.
const SENDING: usize = 2;
/// Call-word flag: the abort signal interrupted a system call of the call.
const INTERRUPTED: usize = 4;
const FLAGS: usize = ABORTED | SENDING | INTERRUPTED;

/// The abort signal (`SIGRTMAX - 1`), installed without `SA_RESTART` so
/// that the system call it interrupts fails with `EINTR`.
pub(crate) fn abort_signal() -> i32 {
    libc::SIGRTMAX() - 1
}

/// Installs the abort signal's handler, once per process.
pub(crate) fn install_abort() -> std::io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        sys::install_handler(abort_signal(), on_abort, false)
            .map_err(|e| e.raw_os_error().unwrap_or(0))
    });
    r.map_err(std::io::Error::from_raw_os_error)
}

extern "C" fn on_abort(_signal: i32, _info: *mut libc::siginfo_t, ucontext: *mut libc::c_void) {
    // Only the kernel thread's own call word is touched, and the leaver of
    // its call is this same kernel thread, paused while we run.
    if let Some(a) = activation::local() {
        let w = a.call.load(Relaxed);
        // SAFETY: the kernel's `ucontext` for this running handler.
        if w & ABORTED != 0 && unsafe { sys::interrupted_system_call(ucontext) } {
            let _ = a.call.compare_exchange(w, w | INTERRUPTED, SeqCst, Relaxed);
        }
    }
}

/// Whether the calling kernel thread is in an announced blocking call (for
/// the preemption handler, which must leave such a thread alone).
pub(crate) fn in_call(a: &Activation) -> bool {
    a.call.load(Relaxed) != 0
}

/// Whether the calling kernel thread's blocking call was aborted: ferry's
/// wrappers then return `EINTR` instead of retrying it. Called from inside
/// the call, where the thread cannot move to another kernel thread (the
/// preemption handler leaves it alone).
pub(crate) fn call_aborted() -> bool {
    activation::local().is_some_and(|a| a.call.load(SeqCst) & ABORTED != 0)
}

/// Leaves the blocking call `a`'s kernel thread is in, if any (see the
/// module docs). Runs on that kernel thread, inside the runtime. Out of
/// line: inlined into `critical_enter`'s rare branch, its loop made every
/// entry into the runtime save four more registers.
#[cold]
#[inline(never)]
pub(crate) fn leave_call(a: &Activation) {
    let mut w = a.call.load(SeqCst);
    loop {
        if w == 0 {
            return;
        }
        if w & SENDING != 0 {
            // An aborter is between its CAS and the signal: a moment.
            std::thread::yield_now();
            w = a.call.load(SeqCst);
            continue;
        }
        match a.call.compare_exchange(w, 0, SeqCst, SeqCst) {
            Ok(_) => break,
            Err(now) => w = now,
        }
    }
    if w & ABORTED != 0 {
        sys::deliver_pending_signals();
    }
}

/// The activation whose kernel thread runs thread `h`'s blocking call.
fn call_of(shared: &Shared, h: usize) -> Option<std::sync::Arc<Activation>> {
    let mut found = None;
    // The list's lock is a std mutex the monitor takes at every look: a
    // ferry thread (an abort, an alert) must not be switched out holding
    // it, or the monitor would wait in the kernel for it.
    let _off = super::preempt::preemption_off();
    shared.activations.for_each(|a| {
        if a.call.load(SeqCst) & !FLAGS == h {
            found = Some(std::sync::Arc::clone(a));
        }
    });
    found
}

/// Whether thread `h` is in an announced blocking call.
pub(crate) fn thread_in_call(shared: &Shared, h: usize) -> bool {
    call_of(shared, h).is_some()
}

/// What one step of an abort found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AbortStep {
    /// The thread is in no blocking call (any more).
    NotInCall,
    /// Its call's system call was interrupted: nothing more to send.
    Interrupted,
    /// The abort signal went (or is going) out: look again later.
    Sent,
}

/// One step of aborting thread `h`'s blocking call: marks it aborted and
/// sends the abort signal to its kernel thread, unless that interrupted a
/// system call of the call already.
pub(crate) fn abort_step(shared: &Shared, h: usize) -> AbortStep {
    let Some(a) = call_of(shared, h) else {
        return AbortStep::NotInCall;
    };
    // Not preempted between the CAS and the clear: the leaver waits for it.
    super::without_preemption(|| {
        let w = a.call.load(SeqCst);
        if w & !FLAGS != h {
            return AbortStep::NotInCall;
        }
        if w & INTERRUPTED != 0 {
            return AbortStep::Interrupted;
        }
        if w & SENDING == 0
            && a.call
                .compare_exchange(w, w | ABORTED | SENDING, SeqCst, SeqCst)
                .is_ok()
        {
            let tid = a.tid.load(Relaxed);
            if tid != 0 {
                let _ = sys::signal_thread(tid as i32, abort_signal());
            }
            a.call.fetch_and(!SENDING, SeqCst);
        }
        AbortStep::Sent
    })
}

/// Aborts the blocking call thread `t` entered with an alert pending (its
/// call word is marked `ABORTED` already), as [`Thread::abort`] would
/// from the alerter's kernel thread: from a short-lived kernel thread of
/// its own (the caller's runs the call), which sends the abort signal
/// until it interrupted a system call of the call, the call is over, or
/// the alert is cleared or blocked. Should the kernel refuse the thread,
/// the call stays marked aborted (ferry's wrappers return `Interrupted`
/// rather than make or retry their system call) but a system call already
/// blocked in is not interrupted.
///
/// [`Thread::abort`]: crate::Thread::abort
#[cold]
#[inline(never)]
fn abort_aside(t: crate::Thread) {
    let aborter = move || {
        let h = t.as_ptr().as_ptr() as usize;
        let mut tries = 0u32;
        while t.alert_aborts_calls() && abort_step(t.shared(), h) == AbortStep::Sent {
            tries += 1;
            if tries < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    };
    let _ = std::thread::Builder::new()
        .name("ferry-abort".into())
        .spawn(aborter);
}

/// Runs `f`, which may block in the kernel (a read, a `wait`, a lock of the
/// C library), without stalling the other ferry threads of its processor,
/// and returns its value. A panic in `f` propagates to the caller.
///
/// While `f` runs, the processor is *lent*: if other threads wait for it, a
/// spare kernel thread takes it over at once and the scheduling policy is
/// told the thread `Blocked`; otherwise the monitor hands it over at its
/// next look if the call is still running (see
/// [`Builder::handoff_after`](crate::Builder::handoff_after)). When `f`
/// returns the thread takes its processor back if nobody took it, which
/// costs a few atomic operations; else it is queued (`Unblocked`) and runs
/// again on whichever processor the policy picks, and its kernel thread goes
/// back to the pool of spares.
///
/// Thread control sees the call: a thread [suspended](crate::Thread::suspend)
/// and [waited for](crate::Thread::wait_suspended), or
/// [terminated](crate::Thread::terminate), while in it is stopped when `f`
/// returns, before it runs anything after this call;
/// [`Thread::abort`](crate::Thread::abort) interrupts the system call `f`
/// is blocked in (it fails with `EINTR`; ferry's own wrappers then return
/// [`Interrupted`](std::io::ErrorKind::Interrupted) instead of retrying).
///
/// Alerts: a thread that allows alerts and has one pending
/// ([`Thread::alert`](crate::Thread::alert),
/// [`thread::allow_alerts`](crate::thread::allow_alerts)) has the call
/// aborted, whether the alert comes during the call or came before it.
/// One that came before is found at entry: the call is marked aborted
/// from the start (ferry's wrappers return `Interrupted` without making
/// their system call) and a short-lived kernel thread sends the abort
/// signal as `Thread::abort` would, so the first system call `f` blocks
/// in fails with `EINTR`. An alert that finds alerts blocked aborts
/// nothing; a call entered after the thread allows them again is aborted
/// at entry.
///
/// Outside a ferry thread it just calls `f`; so it does while the thread
/// holds a [`SpinLock`](crate::sync::SpinLock) or runs
/// [`without_preemption`](crate::upcall::without_preemption), and then the
/// processor waits for the call (and thread control does not see it).
///
/// `f` runs on the calling thread's stack and kernel thread, so it need not
/// be `Send`; it should not wait for other ferry threads (use
/// [`crate::sync`] for that), and if it calls into ferry itself the
/// processor is taken back first (and the call is over for thread control).
///
/// ```
/// use std::io::Read;
///
/// ferry::Runtime::builder().processors(1).run(|| {
///     let (mut reader, mut writer) = std::io::pipe().unwrap();
///     let ticker = ferry::spawn(|| (0..100).map(|_| ferry::yield_now()).count());
///     let read = ferry::spawn(move || {
///         let mut buf = [0u8; 5];
///         ferry::blocking(|| reader.read_exact(&mut buf)).unwrap();
///         buf
///     });
///     // The ticker ran although the only processor's thread blocked.
///     assert_eq!(ticker.join().unwrap(), 100);
///     std::io::Write::write_all(&mut writer, b"hello").unwrap();
///     assert_eq!(&read.join().unwrap(), b"hello");
/// })
/// .unwrap();
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    loop {
        match crate::upcall::enter() {
            // Inside a critical section (a `SpinLock` held,
            // `without_preemption`) the processor cannot be lent: it waits
            // for the call.
            Some(mut e) if e.p.in_thread(&e.tok) && super::critical_depth() == 1 => {
                let me = e.p.current_ref(&e.tok).expect("in a thread, checked above");
                if me.must_stop() {
                    // Asked to stop before the signal caught it: stop
                    // before the call rather than after.
                    let _resumed_on = e.p.switch_away_held(e.tok.rb());
                    drop(e);
                    continue;
                }
                let a = activation::local().expect("an entered kernel thread is an activation");
                a.call.store(me.as_ptr().as_ptr() as usize, Release);
                // Pairs with `Thread::alert`'s fence: either the alert's
                // abort finds this call, or this sees the alert (the alert
                // word's module docs, `thread::alert`).
                fence(SeqCst);
                let alerted = me.alert_aborts_calls().then(|| {
                    a.call.fetch_or(ABORTED, SeqCst);
                    me.clone()
                });
                super::lend(e.p, e.tok.rb(), a);
                drop(e);
                crate::probe_mark!(crate::probe::CALL_BEGINS);
                if let Some(me) = alerted {
                    abort_aside(me);
                }
                break;
            }
            _ => return f(),
        }
    }
    let result = catch_unwind(AssertUnwindSafe(f));
    // Take the processor back, or be handed back and resumed elsewhere
    // (either way the entry leaves the call); then stop here if thread
    // control asked for it meanwhile.
    if let Some(mut e) = crate::upcall::enter() {
        if e.p
            .current_ref(&e.tok)
            .is_some_and(crate::Thread::must_stop)
        {
            let _resumed_on = e.p.switch_away_held(e.tok.rb());
        }
        drop(e);
    }
    match result {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}
