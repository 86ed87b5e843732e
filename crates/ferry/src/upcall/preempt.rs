//! Preemption: the signal that interrupts a ferry thread (its time slice is
//! over, its processor is leaving the set, its processor was taken while
//! it slept in the kernel, or thread control stops it: it was suspended
//! and waited for, or terminated), and lock-holder care.
//!
//! This room owns the signal handler and the rule for when it may act; it
//! must not act while the interrupted code is inside the runtime, holds a
//! spinlock (`Activation::critical` above zero: the preemption is chained
//! to the moment the count returns to zero, Synthesis's procedure
//! chaining), runs C library code (malloc's per-kernel-thread caches must
//! not change hands mid-call) or is panicking (std counts panics per kernel
//! thread); in the last two cases the monitor asks again at its next look.
//! Code that needs the same care can say so with [`without_preemption`].
//! A kernel thread in an announced blocking call is left alone altogether
//! (its thread is stopped, if asked, when the call returns; see
//! `blocking`).
//!
//! A thread stopped by thread control is switched away and held (as
//! `Thread::wait_suspended` holds a thread that stops itself), or, if it
//! was terminated, queued once more for the next processor that picks it
//! to drop. Thread control sends the signal ([`signal_driver`]) to the
//! kernel thread driving the processor that last ran the thread, and again
//! while it waits, since the thread may have moved or been somewhere it
//! must not stop; a signal that finds another thread, or none, there does
//! nothing.
//!
//! # The full context switch
//!
//! The kernel saves the whole interrupted state (every general register,
//! the flags, and the FP/SIMD state with `xsave`) in the signal frame, on
//! the interrupted thread's own stack (the handler runs without
//! `SA_ONSTACK`). The handler then makes an ordinary, partial switch away.
//! When the thread is resumed — on any processor, any kernel thread — the
//! handler returns and `rt_sigreturn` restores the full state from that
//! frame. The frame costs about 1–3 KiB of the thread's stack.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

use super::Words;
use super::activation::{self, Activation, FLAGS};
use crate::processor::Processor;
use crate::sys;

/// The preemption signal. `SIGURG` (as Go uses) is otherwise only raised
/// for out-of-band socket data, which almost no program asks for.
pub(crate) const SIGNAL: i32 = libc::SIGURG;

/// Installs the preemption handler, once per process.
pub(crate) fn install() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        // Resolve the C runtime's ranges now, not in a handler.
        let _ = sys::c_runtime_code();
        sys::install_handler(SIGNAL, on_signal, true).map_err(|e| e.raw_os_error().unwrap_or(0))?;
        super::blocking::install_abort().map_err(|e| e.raw_os_error().unwrap_or(0))
    });
    r.map_err(io::Error::from_raw_os_error)
}

/// Sends the preemption signal to `a`'s kernel thread.
pub(crate) fn signal(a: &Activation) {
    let tid = a.tid.load(Relaxed) as i32;
    if tid != 0 {
        let _ = sys::signal_thread(tid, SIGNAL);
    }
}

/// Sends the preemption signal to the kernel thread driving `p`, unless
/// nobody does, it is lent for a blocking call (or being checked by the
/// monitor), or it is the caller's own.
pub(crate) fn signal_driver(p: &Processor) {
    let d = p.upcall().driver.load(Acquire);
    if d == 0 || d & FLAGS != 0 || activation::local().is_some_and(|a| a.word() == d) {
        return;
    }
    // SAFETY: `d` is a driver word of a live runtime (the caller holds a
    // thread of it, so its `Shared`), and a runtime keeps every activation,
    // joined ones too (`Activations::retired`), for as long as it lives.
    if let Some(a) = unsafe { Activation::from_word(d) } {
        signal(a);
    }
}

/// Bytes from the start of `activation::raise` in which the count may be
/// half updated (the function is far shorter than this, in any build; a
/// preemption deferred for code that follows it is merely late).
const COUNT_UPDATE_BYTES: usize = 512;

/// Whether `pc` lies where the critical count is being checked and raised
/// from zero (a thread moved to another kernel thread there would write the
/// old one's count). Everywhere else a count of zero may be moved: code
/// that `raise` calls out of line before its check (a debug build's
/// thread-local access) may leave it holding a stale activation, which the
/// check notices; `critical_exit` touches its activation only before it
/// stores zero.
fn in_count_update(pc: usize) -> bool {
    let raise = super::critical::raise_address();
    (raise..raise + COUNT_UPDATE_BYTES).contains(&pc)
}

/// Whether the interrupted code holds its kernel thread's errno address
/// (`errno_slot`) in a register, as C code does between the header's
/// `ferry_errno_location()` and the access through it. Moved to another
/// kernel thread there, the code would read or write the errno of the
/// kernel thread it left, so the preemption waits for the monitor's next
/// look. Only the exact address counts: a register that holds it by chance
/// merely delays a preemption, and any wider test (the whole static TLS)
/// matched registers that keep such values for good, which made some
/// loops unpreemptible. (An address saved to memory is not seen; the C
/// headers say so.)
fn holds_errno_address(ucontext: *mut libc::c_void, errno_slot: *mut i32) -> bool {
    let at = errno_slot as usize;
    // SAFETY: the running handler's `ucontext`.
    unsafe { sys::interrupted_registers_point_into(ucontext, at..at + size_of::<i32>()) }
}

/// Whether `pc` lies in the C runtime's code.
fn in_c_runtime(pc: usize) -> bool {
    sys::c_runtime_code()
        .iter()
        .any(|&(start, end)| (start..end).contains(&pc))
}

extern "C" fn on_signal(_signal: i32, _info: *mut libc::siginfo_t, ucontext: *mut libc::c_void) {
    let errno_slot = sys::errno_location();
    // SAFETY: the interrupted code's errno, on this kernel thread.
    let errno = unsafe { *errno_slot };
    if let Some(a) = activation::local() {
        if a.critical.load(Relaxed) != 0 {
            a.chained.store(true, Relaxed);
        } else {
            // SAFETY: the kernel's `ucontext` for this running handler.
            let pc = unsafe { sys::interrupted_pc(ucontext) };
            if in_count_update(pc) {
                // Between reading and writing the count: it will have
                // changed by the time this is acted on.
                a.chained.store(true, Relaxed);
            } else if !in_c_runtime(pc)
                && !std::thread::panicking()
                && !holds_errno_address(ucontext, errno_slot)
            {
                // (A panicking thread must stay on its kernel thread until
                // the panic is caught: std counts panics per kernel thread.)
                interrupt(a, false);
            }
        }
    }
    // Possibly on another kernel thread by now: put errno back there.
    // SAFETY: the errno slot of whichever kernel thread runs us now.
    unsafe { *sys::errno_location() = errno };
}

/// A preemption waited for the critical count to reach zero, and it just
/// did (the thread released its last spinlock or left the runtime). The
/// activation is read afresh: the code may have been moved since.
pub(crate) fn chained() {
    // As for a signal: a panicking thread stays on its kernel thread (the
    // monitor asks again at its next look). A drop while unwinding may
    // enter the runtime (a thread block's last reference does), and its
    // exit ends here.
    if std::thread::panicking() {
        return;
    }
    if let Some(a) = activation::local() {
        interrupt(a, true);
    }
}

/// Acts on a preemption request for the thread running on `a`'s kernel
/// thread, which is outside the runtime: hands it back if `a` lost its
/// processor, stops it if thread control asked, preempts it if its slice
/// is over or its processor leaves, and otherwise (a stale request, or a
/// blocking call in progress) does nothing.
fn interrupt(a: &Activation, was_chained: bool) {
    if super::blocking::in_call(a) {
        // In an announced blocking call (the signal came during its system
        // call, or before its lend): it stops, if asked, when the call
        // returns; a give-back from here would restart the system call on
        // whichever kernel thread resumes it, on no lent processor.
        return;
    }
    let Some(p) = a.processor() else {
        return;
    };
    let d = p.upcall().driver.load(Acquire);
    if d == a.word() {
        let Some(mut e) = crate::upcall::enter() else {
            return;
        };
        let Some(current) = e.p.current_ref(&e.tok) else {
            return;
        };
        let stop = current.must_stop();
        if !(stop || p.is_stopping() || p.upcall().slice_expired(p.dispatch.load(Relaxed))) {
            return;
        }
        if was_chained {
            e.p.shared().counters.chained.fetch_add(1, Relaxed);
        }
        // Whatever runs next on this kernel thread must be preemptible.
        sys::unblock_signal(SIGNAL);
        if stop {
            // Held (or, terminated, queued to be dropped) until resumed.
            let _resumed_on = e.p.switch_away_held(e.tok.rb());
        } else {
            e.p.preempt_current(e.tok.rb());
        }
        drop(e);
    } else if d & !FLAGS == a.word() {
        // Lent for a blocking call (or being checked by the monitor).
    } else {
        // Taken while we slept in the kernel: give the thread back.
        // Unblocked first: this kernel thread goes to the pool from inside
        // `enter` and must be preemptible when it drives again. A signal
        // that nests here does the same give-back, and this `enter` then
        // finds the thread on a processor already.
        sys::unblock_signal(SIGNAL);
        drop(crate::upcall::enter());
    }
}

/// Runs `f` with the calling ferry thread's preemption held off, as if it
/// held a [`SpinLock`](crate::sync::SpinLock): a time slice that ends
/// meanwhile, or its processor's removal, takes effect right after `f`
/// returns. For short sections of code that rely on the kernel thread they
/// run on (a `std::thread_local!`, a lock keyed by kernel thread such as
/// std's stdout lock). `f` must not block or switch.
///
/// ```
/// let n = ferry::run(|| ferry::upcall::without_preemption(|| 6 * 7)).unwrap();
/// assert_eq!(n, 42);
/// ```
pub fn without_preemption<R>(f: impl FnOnce() -> R) -> R {
    let _off = preemption_off();
    f()
}

/// Holds off the calling ferry thread's preemption and thread control's
/// stops for as long as the guard lives, as [`without_preemption`] does
/// for a closure: for a section that takes and releases a lock of its own
/// which others spin on (a stopped holder would keep it for good). The
/// section must not block or switch, and the guard must be dropped on the
/// thread that made it (it is not `Send`). Off a processor it does
/// nothing.
pub fn preemption_off() -> PreemptionOff {
    PreemptionOff {
        _critical: super::critical_enter().map(|(c, _)| c),
    }
}

/// What [`preemption_off`] returns: preemption and stops wait until it is
/// dropped.
#[must_use = "preemption is held off only while the guard lives"]
pub struct PreemptionOff {
    _critical: Option<super::Critical>,
}
