//! `ferry/ferry.h`, part one: starting the runtime, error codes, and Mach's
//! thread control (003 §3–4, Appendix I) on ferry threads: create
//! (suspended), suspend, resume, wait, abort, terminate, info, and the
//! task's thread list.
//!
//! This room owns the runtime's start from C and the `kern_return_t`-style
//! codes; suspension and termination themselves are `ferry::Thread`'s.

use std::ffi::{c_char, c_int, c_uint};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::Duration;

use ferry_rt::thread::Suspension;

use crate::any_t;
use crate::cthreads::cthread_fn_t;
use crate::handles::{self, Outcome, cthread_t};

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

/// Sets errno for the calling thread.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: the calling kernel thread's own errno slot, which ferry saves
    // and restores with the ferry thread at every switch.
    unsafe { *crate::errno_slot() = e };
}

// ---------------------------------------------------------------------------
// Thread control

fn thread_of(t: cthread_t) -> Result<ferry_rt::Thread, ferry_return_t> {
    ensure();
    handles::thread(t).ok_or(FERRY_INVALID_ARGUMENT)
}

/// Places thread `t` in *will-suspend* state: it runs on until
/// [`thread_wait`] stops it (003 §4).
#[unsafe(no_mangle)]
pub extern "C" fn thread_suspend(t: cthread_t) -> ferry_return_t {
    match thread_of(t) {
        Ok(th) => {
            th.suspend();
            FERRY_SUCCESS
        }
        Err(e) => e,
    }
}

/// Places thread `t` in *running* state: a stopped thread is scheduled
/// again; a will-suspend one will not stop.
#[unsafe(no_mangle)]
pub extern "C" fn thread_resume(t: cthread_t) -> ferry_return_t {
    match thread_of(t) {
        Ok(th) => {
            th.resume();
            FERRY_SUCCESS
        }
        Err(e) => e,
    }
}

/// If thread `t` is in *will-suspend* state, places it in *suspended*
/// state. On the calling thread, it stops at once and this returns once it
/// is resumed. Another thread that is running is interrupted (a signal,
/// whether or not a time slice is set) and stops as soon as it is outside
/// ferry's own code and its spinlocks; one that is not running stops
/// before it would run again. One in a blocking call (`ferry_blocking`,
/// `ferry_read`, ...) stops when the call returns, before it runs any
/// code after the call, and counts as stopped meanwhile
/// (`FERRY_THREAD_STOPPED_IN_CALL`: its kernel thread may still be in the
/// system call). With `wait` nonzero the caller waits until it has come to
/// a stop (or was resumed meanwhile).
#[unsafe(no_mangle)]
pub extern "C" fn thread_wait(t: cthread_t, wait: c_int) -> ferry_return_t {
    match thread_of(t) {
        Ok(th) => {
            th.wait_suspended(wait != 0);
            FERRY_SUCCESS
        }
        Err(e) => e,
    }
}

/// Terminates thread `t` (Mach's `thread_terminate`): it never runs again,
/// and its joiner gets `FERRY_TERMINATED`. On the calling thread this is
/// `cthread_exit(FERRY_TERMINATED)`. Another thread is stopped as
/// [`thread_wait`] stops it (a running one is interrupted), and this waits
/// until it has; one in a blocking call has the call aborted (as
/// [`thread_abort`]) and is stopped when it returns, and this waits for
/// that too.
///
/// A thread waiting in `mutex_lock`, `condition_wait` or `cthread_join`
/// leaves that wait, and no wakeup is lost: if an unlock or a
/// `condition_signal` had already chosen it, the next waiter is woken in
/// its place (as POSIX asks of a cancelled waiter). Its stack is then
/// freed for reuse, so nothing may point into it any more.
///
/// What it held stays held, as with `pthread_cancel` without cleanup
/// handlers: nothing on its stack is cleaned up (C++ destructors do not
/// run), and a mutex it locked stays locked for good. A thread terminated
/// while waiting holds neither the mutex it waited for nor, in
/// `condition_wait`, the condition's mutex.
///
/// `FERRY_FAILURE` if `t` has already finished, or was not made by
/// `cthread_fork` (the first thread, or a Rust one).
#[unsafe(no_mangle)]
pub extern "C" fn thread_terminate(t: cthread_t) -> ferry_return_t {
    let th = match thread_of(t) {
        Ok(th) => th,
        Err(e) => return e,
    };
    if handles::forked(t) != Some(true) {
        return FERRY_FAILURE;
    }
    if crate::cthreads::cthread_self() == t {
        crate::cthreads::cthread_exit(FERRY_TERMINATED as crate::any_t);
    }
    // Its record ends as if the thread had: the outcome, dropped at once
    // for a detached thread, frees it.
    // SAFETY: a cthread's stack holds C frames and its own closure; the
    // contract above (documented in the header) is Mach's.
    match unsafe { th.terminate(Outcome::new(FERRY_TERMINATED as usize, t)) } {
        Ok(()) => FERRY_SUCCESS,
        Err(outcome) => {
            // Not used: the thread's own end owns the record's.
            outcome.disarm();
            FERRY_FAILURE
        }
    }
}

/// Makes a thread that will run `func(arg)`, *suspended* (003's
/// `thread_create`): it runs only once [`thread_resume`]d. `*out` gets its
/// handle, which is joined or detached as one from `cthread_fork` (and
/// may be terminated before it ever ran: its joiner then gets
/// `FERRY_TERMINATED`).
///
/// `FERRY_INVALID_ARGUMENT` if `func` or `out` is `NULL`;
/// `FERRY_RESOURCE_SHORTAGE` if no stack or handle is left (or the runtime
/// could not start).
///
/// # Safety
/// `func` is a valid function that accepts `arg`; `out` is `NULL` or
/// points at writable storage for a `cthread_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn thread_create(
    func: cthread_fn_t,
    arg: any_t,
    out: *mut cthread_t,
) -> ferry_return_t {
    if func.is_none() || out.is_null() {
        return FERRY_INVALID_ARGUMENT;
    }
    // SAFETY: the caller's contract.
    let t = unsafe { crate::cthreads::fork(func, arg, true) };
    if t.is_null() {
        return FERRY_RESOURCE_SHORTAGE;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(t) };
    FERRY_SUCCESS
}

/// Aborts the blocking call thread `t` is in (Mach's `thread_abort`): the
/// system call it is blocked in fails with `EINTR`, so `ferry_read` and the
/// other `ferry_` calls return -1 with errno `EINTR` (they do not retry
/// it), and a function run by `ferry_blocking` sees its system call fail
/// so. Returns once the system call was interrupted or the call is over.
/// A thread in no blocking call is left alone, and nothing is remembered
/// for a later call: `FERRY_SUCCESS` either way, as in Mach.
///
/// A function run by `ferry_blocking` that retries on `EINTR` blocks
/// again; a system call that signals do not interrupt keeps this waiting
/// until it returns. ferry sends the signal `SIGRTMAX - 1` for this
/// (installed without `SA_RESTART`); a program must leave it alone.
#[unsafe(no_mangle)]
pub extern "C" fn thread_abort(t: cthread_t) -> ferry_return_t {
    match thread_of(t) {
        Ok(th) => {
            th.abort();
            FERRY_SUCCESS
        }
        Err(e) => e,
    }
}

/// `ferry_thread_info::state`: runs (or is ready to).
pub const FERRY_THREAD_RUNNING: c_int = 0;
/// Still runs; `thread_wait` will stop it.
pub const FERRY_THREAD_WILL_SUSPEND: c_int = 1;
/// Must not run; on its way off its processor.
pub const FERRY_THREAD_SUSPENDED: c_int = 2;
/// Suspended and stopped.
pub const FERRY_THREAD_STOPPED: c_int = 3;
/// Ended (returned, exited or terminated), not yet joined.
pub const FERRY_THREAD_FINISHED: c_int = 4;
/// Suspended in a blocking call: it runs nothing more until resumed (it
/// stops when the call returns), but its kernel thread may still be in the
/// system call.
pub const FERRY_THREAD_STOPPED_IN_CALL: c_int = 5;

/// What [`thread_info`] reports.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct ferry_thread_info {
    /// One of the `FERRY_THREAD_*` states.
    pub state: c_int,
    /// The processor that last ran it, or -1.
    pub processor: c_int,
    /// Its name as `cthread_name` gives it (may be `NULL`).
    pub name: *const c_char,
    /// Nanoseconds it has run on processors: the time it held one, by the
    /// CPU's time-stamp counter, which includes any time the kernel took
    /// that processor's core away during its turns (other processes).
    pub cpu_time_ns: u64,
    /// The runtime's id of the thread (unique in the process).
    pub id: u64,
}

/// Fills `*info` with thread `t`'s state, name, processor and CPU time.
///
/// # Safety
/// `info` is `NULL` or points at writable storage for a
/// `struct ferry_thread_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn thread_info(t: cthread_t, info: *mut ferry_thread_info) -> ferry_return_t {
    if info.is_null() {
        return FERRY_INVALID_ARGUMENT;
    }
    let th = match thread_of(t) {
        Ok(th) => th,
        Err(e) => return e,
    };
    let name = crate::cthreads::cthread_name(t);
    let state = if th.is_finished() {
        FERRY_THREAD_FINISHED
    } else {
        match th.suspension() {
            Suspension::Running => FERRY_THREAD_RUNNING,
            Suspension::WillSuspend => FERRY_THREAD_WILL_SUSPEND,
            Suspension::Suspended => FERRY_THREAD_SUSPENDED,
            Suspension::Stopped => FERRY_THREAD_STOPPED,
            Suspension::StoppedInCall => FERRY_THREAD_STOPPED_IN_CALL,
            Suspension::Terminated => FERRY_THREAD_FINISHED,
        }
    };
    let out = ferry_thread_info {
        state,
        processor: th.last_processor().map_or(-1, |p| p as c_int),
        name,
        cpu_time_ns: th.cpu_time().map_or(0, |d| d.as_nanos() as u64),
        id: th.id().as_u64(),
    };
    // SAFETY: the caller's contract.
    unsafe { info.write(out) };
    FERRY_SUCCESS
}

/// Lists every thread the C API knows (Mach's `task_threads` for the one
/// task, the process): those made by `cthread_fork` and not yet joined or
/// ended detached, the first thread, and any other ferry thread that asked
/// for `cthread_self`. `*list` gets an array of `*count` handles, to be
/// freed with [`task_threads_free`].
///
/// # Safety
/// `list` and `count` are `NULL` or point at writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn task_threads(
    list: *mut *mut cthread_t,
    count: *mut c_uint,
) -> ferry_return_t {
    if list.is_null() || count.is_null() {
        return FERRY_INVALID_ARGUMENT;
    }
    ensure();
    let live = handles::live();
    let bytes = live.len().max(1) * size_of::<cthread_t>();
    // SAFETY: plain allocation; freed by `task_threads_free`.
    let array = unsafe { libc::malloc(bytes) }.cast::<cthread_t>();
    if array.is_null() {
        return FERRY_RESOURCE_SHORTAGE;
    }
    // SAFETY: `array` holds `live.len()` handles; the caller's pointers are
    // writable.
    unsafe {
        ptr::copy_nonoverlapping(live.as_ptr(), array, live.len());
        *list = array;
        *count = live.len() as c_uint;
    }
    FERRY_SUCCESS
}

/// Frees a list from [`task_threads`]; `NULL` is ignored.
///
/// # Safety
/// `list` came from `task_threads` and is freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn task_threads_free(list: *mut cthread_t) {
    // SAFETY: allocated with `malloc` by `task_threads`.
    unsafe { libc::free(list.cast()) };
}
