//! `ferry/ferry.h`, part two: Mach's thread control (003 §3–4, Appendix I)
//! on ferry threads: create (suspended), suspend, resume, wait, abort,
//! terminate, info, and the task's thread list.
//!
//! This room owns the C face of thread control; suspension and termination
//! themselves are `ferry::Thread`'s. It builds on `start` (the runtime,
//! the codes) and `cthreads` (forking, a thread's own exit).

use std::ffi::{c_char, c_int, c_uint};
use std::ptr;

use ferry_rt::thread::Suspension;

use crate::any_t;
use crate::cthreads::cthread_fn_t;
use crate::handles::{self, Outcome, cthread_t};
use crate::start::{
    FERRY_FAILURE, FERRY_INVALID_ARGUMENT, FERRY_RESOURCE_SHORTAGE, FERRY_SUCCESS,
    FERRY_TERMINATED, ensure, ferry_return_t,
};

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
