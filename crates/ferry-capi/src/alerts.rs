//! `ferry/ferry.h`, last part: alerts (000 §5), priorities and run time of
//! a thread: alert one, poll, allow or clear the caller's, set a priority,
//! read a thread's CPU time.
//!
//! This room owns the C face of these; what an alert does is
//! `ferry::Thread::alert`'s. It builds on `start` (the runtime, the codes)
//! and `handles` (a `cthread_t` to its thread).

use std::ffi::c_int;

use ferry_rt::thread::{self, Priority};

use crate::handles::{self, cthread_t};
use crate::start::{FERRY_FAILURE, FERRY_INVALID_ARGUMENT, FERRY_SUCCESS, ensure, ferry_return_t};

/// `ferry_thread_set_priority`: runs before any thread of lower priority
/// that is ready on the same processor.
pub const FERRY_PRIORITY_HIGH: c_int = 0;
/// The priority a thread starts with.
pub const FERRY_PRIORITY_NORMAL: c_int = 1;
/// Runs after any ready thread of higher priority.
pub const FERRY_PRIORITY_LOW: c_int = 2;

fn thread_of(t: cthread_t) -> Result<ferry_rt::Thread, ferry_return_t> {
    ensure();
    handles::thread(t).ok_or(FERRY_INVALID_ARGUMENT)
}

/// Alerts thread `t` (000 §5's `Alert`): asks it to give up what it is
/// doing and return as soon as it can. Its code sees the request through
/// [`ferry_alerted`]. If it allows alerts, a blocking call it is in
/// (`ferry_blocking`, `ferry_read` and the other `ferry_` calls) is
/// aborted as [`thread_abort`](crate::control::thread_abort) aborts it
/// (its system call fails with `EINTR`; the `ferry_` calls return -1 with
/// errno `EINTR`), and so is a blocking call it enters later while the
/// alert is pending (at once, at the call's entry). If it blocks alerts
/// ([`ferry_allow_alerts`]`(0)`), nothing is aborted: the alert waits
/// until it allows them again. If it is in a call into another process,
/// the alert goes down the call's chain. The alert stays pending until
/// `t` clears it ([`ferry_clear_alert`]).
///
/// `FERRY_INVALID_ARGUMENT` if `t` is no live thread.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_thread_alert(t: cthread_t) -> ferry_return_t {
    match thread_of(t) {
        Ok(th) => {
            th.alert();
            FERRY_SUCCESS
        }
        Err(e) => e,
    }
}

/// Nonzero if the calling thread has an alert pending and allows alerts
/// (000 §5's `TestAlert`, without clearing it): code that can give up
/// early polls this. 0 off a ferry thread.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_alerted() -> c_int {
    c_int::from(ferry_rt::alerted())
}

/// Lets the calling thread see alerts (`on` nonzero, how a thread starts)
/// or not (`on` 0: alerts stay pending, do not show in [`ferry_alerted`]
/// and abort none of its blocking calls). Returns nonzero if alerts were
/// allowed before; 0 off a ferry thread (where it does nothing).
#[unsafe(no_mangle)]
pub extern "C" fn ferry_allow_alerts(on: c_int) -> c_int {
    c_int::from(thread::allow_alerts(on != 0))
}

/// Clears the calling thread's pending alert; returns nonzero if one was
/// pending (0 off a ferry thread).
#[unsafe(no_mangle)]
pub extern "C" fn ferry_clear_alert() -> c_int {
    c_int::from(thread::clear_alert())
}

/// Sets thread `t`'s priority (a `FERRY_PRIORITY_*`); it takes effect the
/// next time `t` is queued to run (a thread already waiting in a run
/// queue keeps its place until it runs). On the calling thread the
/// priority is capped by its ceiling: a thread serving a call for another
/// process runs at its caller's priority and may lower it, never raise it
/// above the caller's. If `set` is not `NULL`, `*set` gets the priority
/// set.
///
/// `FERRY_INVALID_ARGUMENT` if `priority` is no `FERRY_PRIORITY_*` or `t`
/// is no live thread.
///
/// # Safety
/// `set` is `NULL` or points at writable storage for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_thread_set_priority(
    t: cthread_t,
    priority: c_int,
    set: *mut c_int,
) -> ferry_return_t {
    let p = match priority {
        FERRY_PRIORITY_HIGH => Priority::High,
        FERRY_PRIORITY_NORMAL => Priority::Normal,
        FERRY_PRIORITY_LOW => Priority::Low,
        _ => return FERRY_INVALID_ARGUMENT,
    };
    let th = match thread_of(t) {
        Ok(th) => th,
        Err(e) => return e,
    };
    let on_self = thread::try_current().is_some_and(|me| me.id() == th.id());
    let got = if on_self {
        thread::set_priority(p)
    } else {
        th.set_priority(p);
        p
    };
    if !set.is_null() {
        let code = match got {
            Priority::High => FERRY_PRIORITY_HIGH,
            Priority::Normal => FERRY_PRIORITY_NORMAL,
            Priority::Low => FERRY_PRIORITY_LOW,
        };
        // SAFETY: the caller's contract.
        unsafe { set.write(code) };
    }
    FERRY_SUCCESS
}

/// Writes to `*ns` the nanoseconds thread `t` has run on processors,
/// including the time servers spent on its calls into other processes.
/// For the calling thread this includes the turn it is running now;
/// another thread's count is as of its last switch (as `thread_info`'s
/// `cpu_time_ns`).
///
/// `FERRY_INVALID_ARGUMENT` if `ns` is `NULL` or `t` is no live thread;
/// `FERRY_FAILURE` if its run time is not known (the C API's runtime
/// always accounts it; one started from Rust may not).
///
/// # Safety
/// `ns` is `NULL` or points at writable storage for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_thread_cpu_time(t: cthread_t, ns: *mut u64) -> ferry_return_t {
    if ns.is_null() {
        return FERRY_INVALID_ARGUMENT;
    }
    let th = match thread_of(t) {
        Ok(th) => th,
        Err(e) => return e,
    };
    let on_self = thread::try_current().is_some_and(|me| me.id() == th.id());
    let time = if on_self {
        thread::cpu_time()
    } else {
        th.cpu_time()
    };
    let Some(time) = time else {
        return FERRY_FAILURE;
    };
    // SAFETY: the caller's contract.
    unsafe { ns.write(u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)) };
    FERRY_SUCCESS
}
