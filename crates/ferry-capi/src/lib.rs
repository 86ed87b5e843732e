//! ferry's C API: `libferry.so` / `libferry.a`, with the headers
//! `ferry/cthreads.h` (Mach's C-Threads, unchanged, on ferry threads) and
//! `ferry/ferry.h` (the runtime, Mach-style thread control, blocking calls,
//! signals as messages), generated from this crate by cbindgen.
//!
//! This crate owns the C names and their contracts: handles, error codes,
//! the translation of C callbacks. It must not hold scheduling logic of its
//! own: every call goes to the `ferry` crate (renamed `ferry_rt` here).
//!
//! # Starting
//!
//! The first call of any function here starts the runtime with defaults
//! ([`control::ferry_init`] sets them first) and turns the calling kernel
//! thread's flow of control into the first ferry thread (004 §2.1): after
//! it, `main` runs as a user-level thread that may be moved to another
//! kernel thread at any switch. `main` returning ends the process as usual.
//!
//! # Handles
//!
//! A `cthread_t` is a generation-counted handle (see [`handles`]), never a
//! pointer: a handle whose thread was joined, or exited detached, or was
//! terminated and joined, is refused (`FERRY_INVALID_ARGUMENT`, or a
//! documented no-op for the `void` C-Threads calls), and can never name
//! another thread.
//!
//! # Unwinding
//!
//! A C callback (a cthread's function, `ferry_blocking`'s function) must
//! return normally or end its thread with `cthread_exit`. An exception or
//! `longjmp` that would carry control out of it, into ferry's frames,
//! aborts the process with a message instead: callbacks are called through
//! the `C-unwind` ABI with a guard whose destructor, run by the unwinder,
//! prints the message and aborts. (`longjmp` out of a callback runs no
//! destructor and is undefined; do not.) A Rust panic inside ferry cannot
//! cross into C either: every exported function is `extern "C"`, which
//! aborts on a panic.

pub mod calls;
pub mod control;
pub mod cthreads;
pub mod handles;
pub mod locks;

pub use handles::any_t;

/// Aborts the process if dropped: put one on the stack around a call into
/// C, and forget it once the call has returned.
struct AbortOnUnwind(&'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!(
            "ferry: {} unwound (an exception or forced unwind) into ferry's frames; \
             C callbacks must return normally or end with cthread_exit — aborting",
            self.0
        );
        std::process::abort();
    }
}

/// Calls C function `f` with `arg`, aborting cleanly if it unwinds.
fn call_c(f: unsafe extern "C-unwind" fn(any_t) -> any_t, arg: any_t, what: &'static str) -> any_t {
    let guard = AbortOnUnwind(what);
    // SAFETY: the C caller vouched for `f` and `arg` (the API's contract);
    // an unwind out of it is caught by `guard`.
    let r = unsafe { f(arg) };
    std::mem::forget(guard);
    r
}

/// The calling kernel thread's errno slot.
fn errno_slot() -> *mut i32 {
    // SAFETY: always valid for the calling kernel thread.
    unsafe { libc::__errno_location() }
}
