//! ferry's C API: `libferry.so` / `libferry.a`, with the headers
//! `ferry/cthreads.h` (Mach's C-Threads on ferry threads) and
//! `ferry/ferry.h` (the runtime, Mach-style thread control, blocking calls,
//! signals as messages; it includes `cthreads.h` and `rpc.h`) and
//! `ferry/rpc.h` (calls into another process), generated from this crate
//! by cbindgen.
//!
//! This crate owns the C names and their contracts: handles, error codes,
//! the translation of C callbacks. It must not hold scheduling logic of its
//! own: every call goes to the `ferry` crate (renamed `ferry_rt` here).
//!
//! # The names
//!
//! `ferry/cthreads.h`, from Mach's C-Threads (003 §5):
//! `cthread_fork`, `cthread_join`, `cthread_exit`, `cthread_detach`,
//! `cthread_yield`, `cthread_self`, `cthread_set_name`, `cthread_name`,
//! `cthread_set_data`, `cthread_data`, `cthread_wire`, `cthread_unwire`;
//! `mutex_init`, `mutex_alloc`, `mutex_free`, `mutex_lock`,
//! `mutex_try_lock`, `mutex_unlock`; `condition_init`, `condition_alloc`,
//! `condition_free`, `condition_signal`, `condition_broadcast`,
//! `condition_wait`; the types `cthread_t`, `any_t`, `cthread_fn_t`,
//! `struct mutex`/`mutex_t`, `struct condition`/`condition_t`; and
//! `MUTEX_INITIALIZER`, `CONDITION_INITIALIZER`, `NO_CTHREAD`. It also
//! defines `errno` (below) through `ferry_errno_location`.
//!
//! `ferry/ferry.h`: `ferry_init` (with `struct ferry_config`),
//! `ferry_processors`, `ferry_stack_guard_set`, `ferry_strerror`; Mach's thread control (003 §3–4)
//! `thread_suspend`, `thread_resume`, `thread_wait`, `thread_terminate`,
//! `thread_info` (with `struct ferry_thread_info` and the
//! `FERRY_THREAD_*` states), `task_threads`, `task_threads_free`, returning
//! `ferry_return_t` (`FERRY_SUCCESS`, `FERRY_INVALID_ARGUMENT`,
//! `FERRY_FAILURE`, `FERRY_RESOURCE_SHORTAGE`); `FERRY_TERMINATED`;
//! blocking calls that keep their processor running: `ferry_blocking`,
//! `ferry_read`, `ferry_write`, `ferry_open`, `ferry_accept`,
//! `ferry_connect`, `ferry_waitpid`; and `ferry_signal_wait`. It includes
//! `ferry/rpc.h`.
//!
//! `ferry/rpc.h`, calls into another process ([`rpc`]): `ferry_rpc_serve`,
//! `ferry_rpc_serve_in`, `ferry_rpc_serve_mode` (with
//! `FERRY_RPC_SERVE_DEFAULT`, `FERRY_RPC_SERVE_MIGRATING`,
//! `FERRY_RPC_SERVE_STATIC`), `ferry_rpc_server_mode`,
//! `ferry_rpc_server_close`, `ferry_rpc_reply_set`,
//! `ferry_rpc_reply_buffer` (with `ferry_rpc_handler_t` and
//! `struct ferry_rpc_reply`); `ferry_rpc_connect`, `ferry_rpc_connect_in`,
//! `ferry_rpc_close`, `ferry_rpc_max_call`, `ferry_rpc_call`,
//! `ferry_rpc_call_timeout`, `ferry_rpc_call_alloc`, `ferry_rpc_strerror`;
//! `ferry_rpc_chain` (with `struct ferry_rpc_chain_info` and
//! `FERRY_RPC_MAX_CHAIN_DEPTH`); `FERRY_RPC_MAX_CALL`,
//! `FERRY_RPC_NO_TIMEOUT`. They return errno values.
//! `tests/c/every_name.c` uses each name.
//!
//! # Starting
//!
//! The first call of any function here starts the runtime with defaults
//! ([`start::ferry_init`] sets them first). What becomes of the caller
//! depends on where that call is made:
//!
//! - on the process's main kernel thread (`gettid() == getpid()`, where a
//!   C `main` runs): the runtime adopts the caller's flow of control as its
//!   first ferry thread, named `"main"` (004 §2.1). From then on `main` runs
//!   as a user-level thread that may be moved to another kernel thread at
//!   any switch; `main` returning ends the process as usual.
//! - on any other kernel thread (a pthread): the runtime starts in the
//!   background and the caller stays a kernel thread outside it. A pthread
//!   must return from its start routine on the kernel thread it began on,
//!   and adopting its flow would break that (`pthread_join` could hang).
//!   `main`, if it calls ferry later, is then outside the runtime too.
//! - on a ferry thread of a Rust program: the C API uses that runtime.
//!
//! # Calls from kernel threads outside the runtime
//!
//! A kernel thread that runs no ferry thread (a pthread, or `main` when a
//! pthread made the first call) may call ferry as a client from outside:
//! `cthread_fork` starts a cthread; `cthread_join`, `mutex_lock`,
//! `condition_wait` and `ferry_signal_wait` block that kernel thread (in
//! the kernel) until they can go on, and its locks and conditions work
//! with the cthreads'; `cthread_yield` is `sched_yield`; the blocking calls
//! (`ferry_read`, `ferry_blocking`, ...) make the call directly; the
//! thread-control calls and `cthread_set_name`/`cthread_set_data` act on the
//! handle they are given. It has no handle of its own: `cthread_self`
//! returns `NO_CTHREAD`, and `cthread_exit` prints why and aborts (end a
//! pthread with `pthread_exit`). `tests/c/pthread_first.c` does each.
//!
//! # errno
//!
//! errno is per cthread: ferry saves the kernel thread's errno with a
//! ferry thread at every switch and puts it back wherever the thread
//! resumes. glibc declares `__errno_location` `const`, though, so a
//! compiler at -O2 may keep errno's *address* across `cthread_yield()` or
//! `mutex_lock()` and then read the errno of the kernel thread the cthread
//! left. The headers therefore include `<errno.h>` and redefine `errno` as
//! `(*ferry_errno_location())` (see [`kernel`]), an ordinary function the
//! compiler must call again after any call, with gcc and clang, with or
//! without LTO, whichever order a program includes `<errno.h>` and the
//! ferry headers in. A translation unit that uses errno around ferry calls
//! without including a ferry header, or that keeps `&errno` in a variable
//! across a switch, is not covered.
//!
//! # Thread-local data
//!
//! `__thread` and `_Thread_local` variables, and the C library's own
//! per-thread state, belong to the *kernel* thread (the processor's), not
//! to the cthread: a cthread sees the variables of whichever kernel thread
//! runs it at that moment, which changes at any call that may block or
//! yield (and, with a time slice, anywhere). Worse, the compiler treats
//! the thread pointer as fixed within a function, so after such a call the
//! function may go on using the variable of the kernel thread it left. Do
//! not keep per-cthread state in them; keep it with
//! `cthread_set_data(cthread_self(), p)` and `cthread_data(cthread_self())`
//! (one word per cthread, read through a call, correct across moves:
//! `tests/c/thread_data.c`), and in Rust with `ferry::thread_local!`. Rust's
//! `std::thread_local!` is per kernel thread in the same way.
//!
//! Per-ferry-thread TLS, by giving each ferry thread its own FS base and
//! switching it with the thread, is possible on this hardware but is not
//! what ferry does. Linux lets user code write the FS base with `wrfsbase`
//! where the CPU has FSGSBASE (`HWCAP2_FSGSBASE`, bit 1 of
//! `getauxval(AT_HWCAP2)`); on the development machine (AMD EPYC, Linux
//! 6.18) it is allowed, and a `wrfsbase`+`rdfsbase` pair costs about 12 ns
//! (`arch_prctl(ARCH_SET_FS)`+`ARCH_GET_FS` about 260 ns), measured by
//! `crates/ferry-bench/c/fsbase_cost.c` — a fifth to a quarter of a C
//! `cthread_yield` (42–71 ns, `docs/results/capi.md`) added to every
//! switch. The cost
//! that decides it is not the instruction: glibc keeps its thread control
//! block at `fs:0` — the `struct pthread` that `pthread_self`, the stdio and
//! recursive locks and cancellation use, the stack-protector canary and
//! pointer guard, the dtv through which dynamically loaded modules' TLS is
//! found — followed by every module's static TLS block. A ferry thread with
//! its own FS base needs its own copy of all of that, laid out as glibc's
//! private (unversioned) internals expect and kept in step with `dlopen`,
//! and its own static TLS copied at each spawn: kilobytes per thread
//! against ferry's few pages, a spawn that copies, and a dependence on
//! glibc internals that no ABI promises. So `__thread` stays per kernel
//! thread, and the key API is the per-cthread store.
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

pub mod alerts;
pub mod calls;
pub mod control;
pub mod cthreads;
pub mod handles;
pub mod kernel;
pub mod locks;
mod raw_lock;
pub mod rpc;
pub mod start;
pub mod streams;

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

/// The calling kernel thread's errno slot, asked afresh at every call:
/// through a function pointer the compiler cannot see into, so that two
/// calls with a switch between them (the thread may run on another kernel
/// thread afterwards) are never merged into one, as calls of
/// `__errno_location`, known to the compiler as constant, would be.
fn errno_slot() -> *mut i32 {
    let f: unsafe extern "C" fn() -> *mut i32 = std::hint::black_box(libc::__errno_location);
    // SAFETY: always valid for the calling kernel thread.
    unsafe { f() }
}
