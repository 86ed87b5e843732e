//! `ferry/ferry.h`, part two: blocking calls that keep their processor
//! running (`ferry_blocking` and C forms of the `ferry::fs`/`net`/`process`
//! wrappers), and process signals received as messages by a designated
//! thread (003 §6).
//!
//! This room owns the C forms and the signal pipe; handing the processor
//! over is `ferry::blocking`'s. A system call's errno is read on the kernel
//! thread that made it, inside the blocking closure, and set again for the
//! calling ferry thread afterwards.
//!
//! # The signal words
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `CAUGHT[s]` | `catch`, under `CATCH_LOCK`, after `sigaction` succeeded (Release) | ferry's handler catches signal `s` |
//! | `PENDING[s]` | the handler (+1, AcqRel); a waiter that takes one (-1 if above 0, AcqRel) | arrivals of `s` not yet delivered to a waiter |
//! | `PIPE` | `open_pipe`, once (Relaxed; `PIPE_ONCE` orders it) | the self-pipe's read and write ends; a byte written after each `PENDING` increment wakes the waiters, who look at `PENDING` before they sleep |

use std::ffi::{c_char, c_int, c_void};
use std::sync::Once;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::start::{self, set_errno};
use crate::{any_t, call_c};

/// Runs `func(arg)`, which may block in the kernel, and returns its result.
/// While it runs, the caller's processor keeps running other ferry threads
/// (scheduler activations' `Blocked`/`Unblocked`; see `ferry::blocking`).
/// errno as `func` left it is the caller's afterwards.
///
/// # Safety
/// `func` is a valid function that accepts `arg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_blocking(
    func: Option<unsafe extern "C-unwind" fn(any_t) -> any_t>,
    arg: any_t,
) -> any_t {
    let Some(func) = func else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    start::ensure();
    let arg = arg as usize;
    let (r, e) = ferry_rt::blocking(move || {
        let r = call_c(func, arg as any_t, "ferry_blocking's function") as usize;
        // SAFETY: this kernel thread's errno, read before anything switches.
        (r, unsafe { *crate::errno_slot() })
    });
    set_errno(e);
    r as any_t
}

/// Runs system call `f` as a blocking call, keeping its errno.
fn syscall<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    start::ensure();
    let (r, e) = ferry_rt::blocking(move || {
        let r = f();
        // SAFETY: this kernel thread's errno, right after the call.
        (r, unsafe { *crate::errno_slot() })
    });
    set_errno(e);
    r
}

/// `read(2)` as a blocking call: the processor runs other threads while it
/// waits.
///
/// # Safety
/// As `read(2)`: `buf` is writable for `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_read(fd: c_int, buf: *mut c_void, count: usize) -> libc::ssize_t {
    let buf = buf as usize;
    // SAFETY: the caller's contract, as for `read`.
    syscall(move || unsafe { libc::read(fd, buf as *mut c_void, count) })
}

/// `write(2)` as a blocking call.
///
/// # Safety
/// As `write(2)`: `buf` is readable for `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_write(fd: c_int, buf: *const c_void, count: usize) -> libc::ssize_t {
    let buf = buf as usize;
    // SAFETY: the caller's contract, as for `write`.
    syscall(move || unsafe { libc::write(fd, buf as *const c_void, count) })
}

/// `open(2)` as a blocking call (a FIFO or a slow file system may block).
///
/// # Safety
/// As `open(2)`: `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_open(
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    let path = path as usize;
    // SAFETY: the caller's contract, as for `open`.
    syscall(move || unsafe { libc::open(path as *const c_char, flags, mode) })
}

/// `accept(2)` as a blocking call.
///
/// # Safety
/// As `accept(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_accept(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    let (addr, len) = (addr as usize, len as usize);
    // SAFETY: the caller's contract, as for `accept`.
    syscall(move || unsafe {
        libc::accept(fd, addr as *mut libc::sockaddr, len as *mut libc::socklen_t)
    })
}

/// `connect(2)` as a blocking call.
///
/// # Safety
/// As `connect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    let addr = addr as usize;
    // SAFETY: the caller's contract, as for `connect`.
    syscall(move || unsafe { libc::connect(fd, addr as *const libc::sockaddr, len) })
}

/// `waitpid(2)` as a blocking call.
///
/// # Safety
/// As `waitpid(2)`: `status` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    let status = status as usize;
    // SAFETY: the caller's contract, as for `waitpid`.
    syscall(move || unsafe { libc::waitpid(pid, status as *mut c_int, options) })
}

// ---------------------------------------------------------------------------
// Signals as messages

/// Signals received and not yet taken, per signal number.
static PENDING: [AtomicU32; 65] = [const { AtomicU32::new(0) }; 65];
/// Whether ferry catches each signal for `ferry_signal_wait`.
static CAUGHT: [AtomicU32; 65] = [const { AtomicU32::new(0) }; 65];
/// The self-pipe: the handler writes a byte, waiters read.
static PIPE: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static PIPE_ONCE: Once = Once::new();
static CATCH_LOCK: ferry_rt::sync::SpinLock<()> = ferry_rt::sync::SpinLock::new(());

/// The handler: counts the signal and writes one byte to the pipe; both
/// async-signal-safe. errno is kept for the interrupted code.
extern "C" fn on_signal(signo: c_int) {
    if let Some(p) = PENDING.get(signo as usize) {
        p.fetch_add(1, AcqRel);
    }
    // SAFETY: the calling kernel thread's errno.
    let saved = unsafe { *crate::errno_slot() };
    let byte = signo as u8;
    // SAFETY: writing one byte from a local to the pipe's (non-blocking)
    // write end; a full pipe just drops the byte (the count is what
    // matters, and waiters look at it before they sleep).
    unsafe { libc::write(PIPE[1].load(Relaxed) as c_int, (&raw const byte).cast(), 1) };
    // SAFETY: as above.
    unsafe { *crate::errno_slot() = saved };
}

fn open_pipe() -> bool {
    PIPE_ONCE.call_once(|| {
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
            PIPE[0].store(fds[0] as u32, Relaxed);
            PIPE[1].store(fds[1] as u32, Relaxed);
        }
    });
    PIPE[1].load(Relaxed) != 0
}

/// Catches every signal of `set` that ferry does not catch yet.
fn catch(set: &libc::sigset_t) -> bool {
    let _g = CATCH_LOCK.lock();
    for signo in 1..65 {
        // SAFETY: `set` is a valid signal set.
        if unsafe { libc::sigismember(set, signo) } != 1
            || CAUGHT[signo as usize].load(Acquire) != 0
        {
            continue;
        }
        // SAFETY: installing a handler with an empty mask; `on_signal`
        // is async-signal-safe.
        let ok = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(signo, &act, std::ptr::null_mut()) == 0
        };
        if !ok {
            return false;
        }
        CAUGHT[signo as usize].store(1, Release);
    }
    true
}

/// Takes one pending signal of `set`, lowest number first.
fn take(set: &libc::sigset_t) -> Option<c_int> {
    (1..65).find(|&signo| {
        // SAFETY: `set` is a valid signal set.
        let member = unsafe { libc::sigismember(set, signo) } == 1;
        member
            && PENDING[signo as usize]
                .fetch_update(AcqRel, Acquire, |n| n.checked_sub(1))
                .is_ok()
    })
}

/// Waits until one of the signals in `set` arrives for the process and
/// stores its number in `*signo` (003 §6: signals as messages to a
/// designated thread). From the first call on, ferry catches the signals
/// of `set`: when one arrives, whichever kernel thread the kernel picks
/// only counts it (a few instructions, system calls restarted) and the
/// waiting ferry thread receives it; no other thread is disturbed. Each
/// arrival is delivered once, to one waiter; arrivals of one signal before
/// anyone takes them are counted, not merged (the kernel itself merges a
/// standard signal sent again before it was delivered). The wait blocks
/// only the calling ferry thread. Returns 0, or an errno value (`EINVAL` for
/// `SIGKILL`/`SIGSTOP` or `NULL` arguments).
///
/// # Safety
/// `set` points at a valid `sigset_t`; `signo` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_signal_wait(set: *const libc::sigset_t, signo: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(set), false) = (unsafe { set.as_ref() }, signo.is_null()) else {
        return libc::EINVAL;
    };
    // SAFETY: `set` is valid.
    if unsafe {
        libc::sigismember(set, libc::SIGKILL) == 1 || libc::sigismember(set, libc::SIGSTOP) == 1
    } {
        return libc::EINVAL;
    }
    start::ensure();
    if !open_pipe() {
        return libc::EMFILE;
    }
    if !catch(set) {
        return libc::EINVAL;
    }
    let read_end = PIPE[0].load(Relaxed) as c_int;
    loop {
        if let Some(s) = take(set) {
            // SAFETY: the caller's contract.
            unsafe { *signo = s };
            return 0;
        }
        // Sleep in the kernel until a byte comes (or a short while, as a
        // byte may be taken by another waiter or dropped by a full pipe).
        syscall(move || {
            let mut pfd = libc::pollfd {
                fd: read_end,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 100) } > 0 {
                let mut buf = [0u8; 64];
                // SAFETY: reading into a local buffer; non-blocking.
                unsafe { libc::read(read_end, buf.as_mut_ptr().cast(), buf.len()) };
            }
        });
    }
}
