//! `ferry/cthreads.h`, the names about a cthread's kernel thread: the
//! accessor the header's `errno` goes through, and Mach's
//! `cthread_wire`/`cthread_unwire`.
//!
//! This room owns what C code sees of the kernel thread under a cthread. It
//! must not cache anything of a kernel thread across a call that may switch:
//! a cthread may resume on another kernel thread after any such call.
//!
//! # errno
//!
//! glibc declares `__errno_location` `const`, so a C compiler may compute
//! errno's address once in a function and keep it across a call to
//! `cthread_yield` or `mutex_lock`, after which the cthread may run on
//! another kernel thread: it would read and write that address, the errno of
//! the kernel thread it left (which by then belongs to another cthread).
//! The headers therefore include `<errno.h>` and redefine
//! `errno` as `(*ferry_errno_location())`: an ordinary external function,
//! which the compiler must call again at each use after any call that might
//! write memory. It returns the errno of the kernel thread running the
//! caller now, which ferry saves and restores with each ferry thread at
//! every switch, so errno is per cthread. Solaris did the same with
//! `___errno()` for its M:N threads.

use std::ffi::c_int;

/// The address of the calling thread's `errno` now: the errno slot of the
/// kernel thread running it at this moment. `errno` in the ferry headers is
/// `(*ferry_errno_location())`.
///
/// Use the address at once and do not keep it: after a call that may
/// switch (any ferry call that may block or yield) the thread may run on
/// another kernel thread, whose slot is another address. A time slice's
/// preemption does not move a thread that holds its kernel thread's errno
/// address in a register, as between this call's return and the access
/// (it waits for the monitor's next look), so errno read or
/// written as `errno` stays right under preemption; an address the
/// program saved to memory (`int *e = &errno;` kept across a switch) is
/// not covered.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_errno_location() -> *mut c_int {
    crate::errno_slot()
}

/// Mach's `cthread_wire`: binds the calling cthread to its kernel thread.
/// ferry cannot do that: a ferry thread that blocks, yields or is
/// preempted may resume on any processor (this is how one processor keeps
/// running while a thread blocks in the kernel). So this changes nothing
/// and sets errno to `ENOTSUP`; the thread stays unwired. Code that needs a
/// kernel thread of its own (kernel-thread state such as signal masks,
/// `sched_setaffinity` of itself, `__thread` data kept across a block)
/// runs on a pthread instead, which may call every ferry function as a
/// kernel thread outside the runtime (see `cthread_self`).
#[unsafe(no_mangle)]
pub extern "C" fn cthread_wire() {
    crate::start::ensure();
    crate::start::set_errno(libc::ENOTSUP);
}

/// Mach's `cthread_unwire`: undoes `cthread_wire`. As no cthread is ever
/// wired, this changes nothing and sets errno to `ENOTSUP`.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_unwire() {
    crate::start::ensure();
    crate::start::set_errno(libc::ENOTSUP);
}
