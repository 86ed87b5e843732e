//! The user-level context switch: [`Context`], [`prepare`] a fresh one on a
//! stack, [`switch`] from one to another directly (handoff), [`resume`] one
//! when the current one is finished.
//!
//! This module owns the register-level switch, and the other places where
//! ferry needs assembly (the thread pointer, a count raised only on its own
//! kernel thread, and a byte copy over memory a peer may write meanwhile,
//! `shared_copy`); it must never allocate, schedule, lock, or
//! know what a thread is; it saves only the state the ABI makes a callee
//! keep (a voluntary switch is a procedure call).
//!
//! ## What a switch saves
//!
//! [`switch`] is an `asm!` block inlined into its caller. It declares every
//! caller-saved register and r12–r15 clobbered, so the compiler saves only
//! those that hold live values, once per function rather than once per
//! switch (the partial context switch). It saves itself what it cannot
//! declare clobbered (rbx, rbp) and what the SysV ABI makes a callee keep
//! beyond registers (the MXCSR and the x87 control word), in a 64-byte frame
//! on the suspended stack; the stack pointer goes into the [`Context`]. On
//! the way in it loads the incoming MXCSR, and the incoming x87 control word
//! only if it differs from the outgoing one. It goes on with an indirect
//! `jmp`, not `ret`. A preempted thread needs its
//! full register and FP/SIMD state; that is not this module's job.
//!
//! ## Why this switch, and not corosensei or a naked function
//!
//! `ferry-bench switch --runs 11`, ns per one-way switch, median of 11 runs
//! × 2,000,000 round trips, one thread pinned to one CPU of the 2-vCPU
//! development VM (AMD EPYC, Zen 3); three runs of the program, medians
//! within 0.05 ns of each other except where noted. (Other processes used
//! 0.1–1.1 of the 2 CPUs during them; min and median of each row stay
//! within 0.1 ns.) `ping-pong`: the two sides switch from different code;
//! `same site`: both sides run one loop function.
//!
//! | system | ping-pong | same site |
//! |---|---:|---:|
//! | **ferry switch** (inline asm, jmp, FP control saved, x87 word loaded only if changed) | **5.6** | **5.6** |
//! | inline asm, jmp, FP control always loaded | 5.95 | 5.95 |
//! | inline asm, jmp, no FP control | 2.2 | 5.0 |
//! | inline asm, jmp, FP control stored, not loaded (not a correct switch) | 5.45 | 5.3 |
//! | inline asm, jmp, MXCSR and x87 word each loaded only if changed | 7.65 (once 9.6) | 7.5 |
//! | inline asm, ret | 11.9 | 14.1–14.4 |
//! | naked `extern "C"` call, ret, FP control saved | 14.4 | 5.95 |
//! | naked call, ret, no FP control | 11.45 | 5.3 |
//! | naked call, pop+jmp | 14.3 (5.95 in other builds) | 5.95 |
//! | corosensei 0.3 (`resume` + `suspend`, no FP control) | 2.0 | – |
//!
//! * Without the FP control words, ferry's switch costs what corosensei's
//!   does (2.2 against 2.0 ns), and it is symmetric: any context switches to
//!   any other, which handoff needs. corosensei's coroutines are asymmetric
//!   (resume and suspend pair like call and return, which is why its return
//!   predictions are right), so a thread-to-thread switch would have to go
//!   through a coroutine's parent: the scheduler-loop detour handoff exists
//!   to avoid. corosensei stays a peer in `ferry-bench`, not a dependency.
//! * An inlined switch beats a naked function by 8 ns when the two sides
//!   switch from different code: a naked function's `ret` is predicted to
//!   return to its caller and mispredicts on every switch (a `ret` from an
//!   inline block mispredicts everywhere). An indirect `jmp` is predicted
//!   from its own history, and leaves the return predictor balanced.
//! * Storing and loading the MXCSR and x87 control word unconditionally
//!   costs about 3.7 ns per switch on this CPU, and nearly all of it is
//!   `stmxcsr` (about 3.1 ns; `fnstcw` about 0.2, `ldmxcsr` 0.15, `fldcw`
//!   0.3, from one-instruction variants measured once). So the switch
//!   loads the x87 word only when it differs from the outgoing one (a
//!   16-bit compare and a predicted branch; 0.3 ns saved) but loads MXCSR
//!   always: comparing MXCSR needs what `stmxcsr` stored read back, which
//!   costs about 1.4 ns, ten times the `ldmxcsr` it saves (the `each loaded
//!   only if changed` row). [`resume`] does the same (measured in a
//!   prepare–switch–resume loop: 0.3 ns less than loading both words, 4.4 ns
//!   more when it compares MXCSR too). The words are kept, because the ABI
//!   requires it of a callee and a thread that changes its rounding mode
//!   must not change its neighbours'. A variant without them (for threads
//!   known to keep the default environment, as Rust code must) would make
//!   the switch 2.2 ns; that is a decision for the thread layer.
//! * `same site` numbers are 1–3 ns higher than `ping-pong` for the inlined
//!   switches even without mispredictions; not investigated yet.
//!
//! ## Panics
//!
//! Nothing may unwind out of an entry function: there is no frame above it
//! to unwind into. Its `extern "C"` type makes an escaping panic abort the
//! process, and the trampoline's call frame information marks the end of
//! the stack for unwinders and debuggers. An entry function that runs
//! arbitrary code catches panics itself (`std::panic::catch_unwind`) and
//! passes them on by other means; the thread layer does.

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("ferry::arch has a context switch for x86-64 Linux only (so far)");

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86_64;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod shared_copy;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use x86_64 as imp;

pub use imp::{FCW_DEFAULT, MXCSR_DEFAULT};
pub(crate) use imp::{raise_on_home, thread_pointer};

/// A suspended execution context: the stack pointer of the frame [`switch`]
/// saved (or [`prepare`] built) on its stack.
///
/// A `Context` is a snapshot that can be resumed once: resuming it continues
/// the suspended code, which runs on and leaves the `Context` stale until it
/// is saved into again. It is neither `Copy` nor `Clone`, so that a snapshot
/// is not resumed twice by accident.
///
/// `#[repr(C)]`, one pointer: the saved stack pointer is at offset 0 (the
/// assembly reads and writes it there).
#[repr(C)]
#[derive(Debug)]
pub struct Context {
    /// Stack pointer of the suspended frame; null for an empty context.
    sp: *mut u8,
}

// SAFETY: a `Context` is only an address; every use of it (`switch`,
// `resume`) is `unsafe` and states what must hold for the stack it points
// to. Resuming a context on another kernel thread than the one that saved it
// is exactly what a runtime of user-level threads does; whether the code on
// that stack tolerates it (thread-locals) is the resumer's obligation.
unsafe impl Send for Context {}

impl Context {
    /// A context with nothing saved in it yet: the place where [`switch`]
    /// saves the currently running context. Switching *to* an empty context
    /// is undefined behaviour (checked in debug builds).
    pub const fn empty() -> Context {
        Context {
            sp: core::ptr::null_mut(),
        }
    }

    /// Whether nothing has been saved into (or prepared in) this context.
    pub fn is_empty(&self) -> bool {
        self.sp.is_null()
    }
}

impl Default for Context {
    fn default() -> Context {
        Context::empty()
    }
}

/// Bytes of a fresh stack that [`prepare`] itself uses, at most; the entry
/// function's own needs come on top.
pub const PREPARE_BYTES: usize = 128;

/// A fresh context that, when first switched to, calls `entry(arg)` on the
/// stack that ends at `stack_top`.
///
/// `entry` starts with a SysV-aligned stack (`rsp + 8` a multiple of 16), the
/// default MXCSR and x87 control word ([`MXCSR_DEFAULT`], [`FCW_DEFAULT`]),
/// and below a terminating frame: unwinders and debuggers stop there. `entry`
/// never returns: it ends by switching or resuming elsewhere, for good.
///
/// # Safety
///
/// * `stack_top` is the exclusive upper end of a writable region (the stack
///   grows down from it) big enough for [`PREPARE_BYTES`] plus everything
///   `entry` and what it calls will need; `stack_top` need not be aligned.
/// * That region stays valid, and is used by nothing else, until the context
///   is finished (has resumed elsewhere for the last time).
/// * `entry` must not unwind: it catches panics itself (see the module
///   docs). An unwind that escapes aborts the process.
/// * Whatever `entry` does with `arg` must be sound on the kernel thread
///   that first switches to the context.
pub unsafe fn prepare(
    stack_top: *mut u8,
    entry: unsafe extern "C" fn(arg: *mut ()) -> !,
    arg: *mut (),
) -> Context {
    // SAFETY: forwarded; the caller upholds the same contract, and
    // `PREPARE_BYTES` covers what `imp::prepare` writes.
    unsafe { imp::prepare(stack_top, entry, arg) }
}

/// Saves the running context into `*from` and continues `*to`, directly: no
/// scheduler runs in between (this is the handoff primitive).
///
/// Returns when some other context switches (or resumes) to what was saved in
/// `*from`, possibly on another kernel thread.
///
/// # Safety
///
/// * `from` is valid for writes; `to` is valid for reads and holds a context
///   that was saved by `switch` or made by [`prepare`] and has not been
///   resumed since (a `Context` is resumed at most once per save).
/// * `to`'s stack is still valid and used by nothing else.
/// * `*from` must stay in place (not be moved or freed) until it is resumed
///   or abandoned, and whatever the current context borrows stays borrowed
///   while it is suspended: the compiler sees an ordinary call.
#[inline(always)]
pub unsafe fn switch(from: *mut Context, to: *const Context) {
    // SAFETY: reading `to` is allowed by the caller's contract.
    let empty = unsafe { (*to).sp.is_null() };
    debug_assert!(!empty, "ferry::arch::switch to an empty Context");
    // SAFETY: forwarded; the caller upholds `imp::switch`'s contract, which
    // is this one.
    unsafe { imp::switch(from, to) }
}

/// Continues `*to` without saving the running context, which is finished and
/// will never run again (an exiting thread); its stack may be freed as soon
/// as `to` (or anyone after it) knows that nothing runs on it any more.
///
/// # Safety
///
/// * `to` is valid for reads and holds a context saved by [`switch`] or made
///   by [`prepare`], not resumed since.
/// * Nothing on the current stack is ever used again: destructors of its
///   locals do not run, so the caller drops what must be dropped first.
#[inline(always)]
pub unsafe fn resume(to: *const Context) -> ! {
    // SAFETY: reading `to` is allowed by the caller's contract.
    let empty = unsafe { (*to).sp.is_null() };
    debug_assert!(!empty, "ferry::arch::resume to an empty Context");
    // SAFETY: forwarded; the caller upholds `imp::resume`'s contract.
    unsafe { imp::resume(to) }
}
