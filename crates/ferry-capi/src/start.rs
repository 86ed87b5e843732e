//! `ferry/ferry.h`, part one: starting the runtime from C, the
//! `kern_return_t`-style codes, and errno for the calls.
//!
//! This room owns the runtime's start (the first call's adoption, fork
//! handlers) and the codes; it must not hold thread control (`control`)
//! or the C-Threads calls (`cthreads`), which both build on it.

use std::ffi::{c_char, c_int, c_uint};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::Duration;

use crate::handles::{self, cthread_t};

/// What ferry's thread-control calls return (Mach's `kern_return_t`).
#[allow(non_camel_case_types)]
pub type ferry_return_t = c_int;

/// The call did what it was asked.
pub const FERRY_SUCCESS: ferry_return_t = 0;
/// A handle is stale (its thread was joined, or exited detached) or was
/// never one, or a pointer argument is `NULL`.
pub const FERRY_INVALID_ARGUMENT: ferry_return_t = 4;
/// The call is not allowed now: the runtime was already started
/// (`ferry_init`), or the thread cannot be acted on this way (terminating
/// a thread the C API did not create, or one that is already ending).
pub const FERRY_FAILURE: ferry_return_t = 5;
/// Out of memory, stacks, kernel threads or handles.
pub const FERRY_RESOURCE_SHORTAGE: ferry_return_t = 6;

/// What `cthread_join` returns for a thread that was terminated
/// (`(any_t)-1`, like `PTHREAD_CANCELED`).
pub const FERRY_TERMINATED: isize = -1;

/// A message for a `ferry_return_t`: never `NULL`, static.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_strerror(code: ferry_return_t) -> *const c_char {
    let s: &'static std::ffi::CStr = match code {
        FERRY_SUCCESS => c"success",
        FERRY_INVALID_ARGUMENT => c"invalid argument: a stale or unknown handle, or a NULL pointer",
        FERRY_FAILURE => c"not allowed now",
        FERRY_RESOURCE_SHORTAGE => c"out of resources (memory, stacks, kernel threads or handles)",
        _ => c"unknown ferry error code",
    };
    s.as_ptr()
}

// ---------------------------------------------------------------------------
// Starting

/// Settings for [`ferry_init`]; a zero field keeps the default.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct ferry_config {
    /// Processors (kernel threads running ferry threads); default: the
    /// CPUs the process may use, or `FERRY_PROCESSORS` from the environment.
    pub processors: c_uint,
    /// Bytes of each thread's stack; default 256 KiB.
    pub stack_size: usize,
    /// Preemption time slice in microseconds; default: 10 ms (or
    /// `FERRY_TIME_SLICE` from the environment, e.g. `500us`, `off`).
    pub time_slice_us: u64,
}

struct Started {
    handle: ferry_rt::Handle,
    /// The first thread's handle: the adopted flow's (`main`'s), or
    /// `NO_FIRST` if the runtime was started from a kernel thread that was
    /// not adopted.
    first: cthread_t,
}

// SAFETY: `first` is a handle (a number), not a pointer to anything.
unsafe impl Send for Started {}
// SAFETY: as above; `Handle` is shared freely.
unsafe impl Sync for Started {}

/// Set once, by the first call: whether the runtime started.
static STARTED: OnceLock<bool> = OnceLock::new();
/// The runtime now (replaced in a fork child): a leaked `Started`.
static CURRENT: AtomicPtr<Started> = AtomicPtr::new(ptr::null_mut());
/// The settings the runtime started with, for a fork child's new one.
static BUILDER: std::sync::Mutex<Option<ferry_rt::Builder>> = std::sync::Mutex::new(None);

fn builder(config: Option<&ferry_config>) -> ferry_rt::Builder {
    let mut b = ferry_rt::Runtime::builder();
    let env_processors = std::env::var("FERRY_PROCESSORS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    match config {
        Some(c) if c.processors > 0 => {
            b.processors(c.processors as usize);
        }
        _ => {
            if let Some(n) = env_processors {
                b.processors(n);
            }
        }
    }
    if let Some(c) = config {
        if c.stack_size > 0 {
            b.stack_size(c.stack_size);
        }
        if c.time_slice_us > 0 {
            b.time_slice(Some(Duration::from_micros(c.time_slice_us)));
        }
    }
    b.thread_cpu_time(true);
    b
}

/// Whether the calling kernel thread is the process's main thread (the one
/// whose id is the process id): the only one whose flow ferry adopts.
fn on_main_kernel_thread() -> bool {
    // SAFETY: plain system calls without arguments.
    unsafe { libc::gettid() == libc::getpid() }
}

/// Starts the runtime for the C API, on the first call:
///
/// - on a ferry thread (a Rust program's): the C API uses that runtime;
/// - on the process's main kernel thread: a new runtime adopts the
///   caller's flow, which becomes the first thread (`main`);
/// - on any other kernel thread (a pthread): a new runtime starts in the
///   background and the caller stays a kernel thread outside it, so its
///   flow returns from its start routine on the kernel thread it began on.
fn start(config: Option<&ferry_config>) -> bool {
    let b = builder(config);
    let (handle, first) = if ferry_rt::thread::try_current().is_some() {
        (ferry_rt::Handle::current(), NO_FIRST)
    } else if on_main_kernel_thread() {
        let Ok(handle) = b.adopt() else {
            return false;
        };
        let me = ferry_rt::current();
        let Some(first) = handles::alloc_known(me.clone(), c"main".as_ptr() as usize) else {
            return false;
        };
        me.set_tag(first as usize);
        (handle, first)
    } else {
        let Ok(handle) = b.start() else {
            return false;
        };
        (handle, NO_FIRST)
    };
    *BUILDER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(b);
    CURRENT.store(Box::into_raw(Box::new(Started { handle, first })), Release);
    // SAFETY: registering plain functions, once.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        )
    };
    true
}

/// `Started::first` when no flow was adopted.
const NO_FIRST: cthread_t = ptr::null_mut();

/// The runtime now, if it started.
fn current() -> Option<&'static Started> {
    // SAFETY: `CURRENT` holds null or a leaked `Started`, never freed.
    unsafe { CURRENT.load(Acquire).as_ref() }
}

/// Before a fork: holds the cthread table's free list (registered after
/// the runtime's own handlers, so it runs before them and takes its lock
/// first).
extern "C" fn before_fork() {
    handles::hold_for_fork();
}

/// After a fork, in the parent.
extern "C" fn after_fork_in_parent() {
    handles::release_after_fork();
}

/// In a fork child: the calling flow is the only thread left. Its record
/// stays (now the child's first thread's), every other record goes, and
/// the flow is adopted into a fresh runtime with the parent's settings. A
/// flow that was no ferry thread (a kernel thread outside the runtime)
/// stays one: the fresh runtime starts in the background.
extern "C" fn after_fork_in_child() {
    if current().is_none() {
        return;
    }
    // The parent's runtime state was copied into the child whole; reading
    // the calling thread's tag through it is still sound.
    let was_ferry_thread = ferry_rt::thread::try_current();
    let keep = was_ferry_thread.as_ref().map_or(0, |t| t.tag()) as cthread_t;
    handles::forget_all_but(keep);
    let b = BUILDER
        .try_lock()
        .ok()
        .and_then(|g| g.clone())
        .unwrap_or_else(|| builder(None));
    if was_ferry_thread.is_none() {
        let Ok(handle) = b.start() else {
            eprintln!("ferry: cannot start a runtime in the fork child — aborting");
            std::process::abort();
        };
        let started = Started {
            handle,
            first: NO_FIRST,
        };
        CURRENT.store(Box::into_raw(Box::new(started)), Release);
        return;
    }
    // SAFETY: a fork child, on the flow that forked, before anything else.
    let Ok(handle) = (unsafe { b.adopt_after_fork() }) else {
        eprintln!("ferry: cannot start a runtime in the fork child — aborting");
        std::process::abort();
    };
    let me = ferry_rt::current();
    let first = if keep.is_null() {
        handles::alloc_known(me.clone(), c"main".as_ptr() as usize).unwrap_or(ptr::null_mut())
    } else {
        // Its joiner, if any, is in the parent.
        handles::adopt_in_child(keep, me.clone());
        keep
    };
    me.set_tag(first as usize);
    CURRENT.store(Box::into_raw(Box::new(Started { handle, first })), Release);
}

/// The runtime, started with defaults if nothing started it yet (as
/// [`start`] says); `None` if it could not start.
#[inline]
pub(crate) fn ensure() -> Option<&'static ferry_rt::Handle> {
    // Once started, one load (every C call comes through here).
    if let Some(s) = current() {
        return Some(&s.handle);
    }
    ensure_slow()
}

#[cold]
fn ensure_slow() -> Option<&'static ferry_rt::Handle> {
    if !*STARTED.get_or_init(|| start(None)) {
        return None;
    }
    current().map(|s| &s.handle)
}

/// Whether `h` is the program's first thread (in a fork child: the thread
/// that forked).
pub(crate) fn is_first_thread(h: cthread_t) -> bool {
    !h.is_null() && current().is_some_and(|s| s.first == h)
}

/// Starts the runtime with `config` (`NULL`: defaults). Called from the
/// process's main thread, it makes the caller's flow the first cthread
/// (`"main"`); from any other kernel thread (a pthread), the runtime starts
/// in the background and the caller stays a kernel thread outside it, as
/// it must to return from its start routine; from a ferry thread of a
/// Rust program, the C API uses that thread's runtime and `config` is not
/// used. The first ferry call of any kind does the same with defaults.
/// Call it first, before any other ferry call; afterwards it returns
/// `FERRY_FAILURE` and changes nothing. `FERRY_RESOURCE_SHORTAGE` if the
/// runtime could not start.
///
/// # Safety
/// `config` is `NULL` or points at a `struct ferry_config`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_init(config: *const ferry_config) -> ferry_return_t {
    // SAFETY: the caller's contract.
    let config = unsafe { config.as_ref() };
    let mut ran = false;
    let started = *STARTED.get_or_init(|| {
        ran = true;
        start(config)
    });
    match (ran, started) {
        (true, true) => FERRY_SUCCESS,
        (true, false) => FERRY_RESOURCE_SHORTAGE,
        (false, _) => FERRY_FAILURE,
    }
}

/// The number of processors the runtime holds now (starting it if needed).
#[unsafe(no_mangle)]
pub extern "C" fn ferry_processors() -> c_uint {
    ensure().map_or(0, |h| h.processors() as c_uint)
}

/// Gives every stack made from now on a guard of `bytes` (rounded up to
/// whole pages) instead of the default, which is as large as the stack so
/// that a frame that skips pages without probing them still lands in it
/// (`pthread_attr_setguardsize` for ferry's stacks, process-wide; the
/// environment's `FERRY_STACK_GUARD` does the same). A smaller guard makes
/// carving stacks cheaper and catches only probed frames: build C code
/// with `-fstack-clash-protection` (in `ferry.pc`'s flags) before using
/// one. Call it first, before `ferry_init` or any other ferry call: unlike
/// them it does not start the runtime, and the size is chosen once, at the
/// first stack. Setting the size already chosen again succeeds.
///
/// Returns `FERRY_SUCCESS`; `FERRY_INVALID_ARGUMENT` for 0 or more than
/// 1 MiB; `FERRY_FAILURE` once the process's stacks have their guard size
/// (a stack was made, `FERRY_STACK_GUARD` was read, or another size was
/// set).
#[unsafe(no_mangle)]
pub extern "C" fn ferry_stack_guard_set(bytes: usize) -> ferry_return_t {
    match ferry_rt::stack::set_guard_size(bytes) {
        Ok(()) => FERRY_SUCCESS,
        Err(ferry_rt::stack::GuardSizeError::OutOfRange { .. }) => FERRY_INVALID_ARGUMENT,
        Err(ferry_rt::stack::GuardSizeError::AlreadyDecided { .. }) => FERRY_FAILURE,
    }
}

/// Sets errno for the calling thread.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: the calling kernel thread's own errno slot, which ferry saves
    // and restores with the ferry thread at every switch.
    unsafe { *crate::errno_slot() = e };
}
