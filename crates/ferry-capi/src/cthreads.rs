//! `ferry/cthreads.h`: Mach's C-Threads interface (003 §5, and 004 §4,
//! which keeps it unchanged so that programs "need only be recompiled and
//! linked"), on ferry's user-level threads: the thread calls here, the
//! mutexes, conditions and spin locks in [`crate::locks`].
//!
//! This room owns the C-Threads names and their C contracts; threads,
//! locks and waiting are `ferry`'s. It must not block a kernel thread where
//! a ferry thread could block at user level instead.

use std::ffi::c_char;
use std::ptr;

use crate::handles::{self, Outcome, Peek, Taken, cthread_t};
use crate::{any_t, call_c, start};

/// The function a cthread runs: takes the argument given to
/// [`cthread_fork`], returns the thread's result (what [`cthread_join`]
/// returns).
#[allow(non_camel_case_types)]
pub type cthread_fn_t = Option<unsafe extern "C-unwind" fn(any_t) -> any_t>;

/// The "no thread" handle: what [`cthread_fork`] returns when it cannot
/// start a thread, and [`cthread_self`] off any ferry thread.
pub const NO_CTHREAD: cthread_t = ptr::null_mut();

/// Starts a thread running `func(arg)` and returns its handle, or
/// `NO_CTHREAD` (with errno `EAGAIN`) when no stack or handle is left.
///
/// The handle must be joined ([`cthread_join`]) or detached
/// ([`cthread_detach`]) for its record to be reused.
///
/// # Safety
/// `func` must be a valid function that accepts `arg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cthread_fork(func: cthread_fn_t, arg: any_t) -> cthread_t {
    // SAFETY: the caller's contract.
    unsafe { fork(func, arg, false) }
}

/// [`cthread_fork`], or (`suspended`) Mach's `thread_create`: the thread
/// is made held, and runs only once resumed.
///
/// # Safety
/// As [`cthread_fork`].
pub(crate) unsafe fn fork(func: cthread_fn_t, arg: any_t, suspended: bool) -> cthread_t {
    let Some(func) = func else {
        start::set_errno(libc::EINVAL);
        return NO_CTHREAD;
    };
    let Some(rt) = start::ensure() else {
        start::set_errno(libc::EAGAIN);
        return NO_CTHREAD;
    };
    let Some(record) = handles::alloc_forked() else {
        start::set_errno(libc::EAGAIN);
        return NO_CTHREAD;
    };
    let h = record.handle();
    let arg = arg as usize;
    let body = move || -> Outcome {
        record.begin();
        let r = call_c(func, arg as any_t, "a cthread's function") as usize;
        if record.end() {
            // A fork child's copy of the thread that forked: nobody
            // joins it there, so its end frees its record.
            handles::free(record.handle());
            return Outcome::new(r, NO_CTHREAD);
        }
        Outcome::new(r, record.handle())
    };
    let spawned = ferry_rt::thread::Builder::new()
        .tag(h as usize)
        .suspended(suspended)
        .spawn_here_or_on(rt, body);
    match spawned {
        Ok(join) => {
            // SAFETY: this fork's record, published once.
            unsafe { record.publish(join) };
            h
        }
        Err(_) => {
            handles::unalloc(h);
            start::set_errno(libc::EAGAIN);
            NO_CTHREAD
        }
    }
}

/// Waits for thread `t` to end and returns its result (what its function
/// returned or it passed to [`cthread_exit`]; `FERRY_TERMINATED` if it was
/// terminated). Frees the handle.
///
/// A handle that is stale, detached, already joined, the caller's own, or
/// not made by [`cthread_fork`] returns `NULL` at once (with errno
/// `EINVAL`) and changes nothing.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_join(t: cthread_t) -> any_t {
    start::ensure();
    let refused = |own: bool| {
        start::set_errno(if own { libc::EDEADLK } else { libc::EINVAL });
        ptr::null_mut()
    };
    let own = || ferry_rt::thread::current_tag() == Some(t as usize);
    let taken = match handles::peek(t) {
        Peek::New => {
            // Forked a moment ago, it usually waits in the caller's queue:
            // give way once, as ferry's own join does for a thread that has
            // not run, so that it most often has finished when we look
            // (then the one locked section that takes the right frees the
            // record too). It is not the caller.
            ferry_rt::yield_now();
            handles::take_join(t, true)
        }
        Peek::Started => match handles::take_join(t, false) {
            // It will be waited for: not by itself, which is refused at
            // once, without touching the right (a concurrent join by
            // another thread must not fail because of it).
            Some(Taken::Running) if own() => return refused(true),
            Some(Taken::Running) => handles::take_join(t, true),
            taken => taken,
        },
        // Checked again under the lock; refused at once, with no switch.
        Peek::Refused => handles::take_join(t, true),
    };
    let waiting = match taken {
        Some(Taken::Finished(join)) => {
            return match join.join_unless_current() {
                // The record is freed already.
                Ok(Ok(outcome)) => outcome.disarm() as any_t,
                Ok(Err(_)) => start::FERRY_TERMINATED as any_t,
                Err(_) => unreachable!("a finished thread is not the caller"),
            };
        }
        Some(Taken::Waiting(join)) => join,
        Some(Taken::Running) => unreachable!("a waiting take does not leave it running"),
        None => return refused(own()),
    };
    match waiting.join_unless_current() {
        // Its drop frees the record.
        Ok(Ok(outcome)) => outcome.into_value() as any_t,
        Ok(Err(_)) => {
            handles::free(t);
            start::FERRY_TERMINATED as any_t
        }
        Err(join) => {
            // The caller's own handle (checked above; kept for safety): put
            // the right to join back.
            handles::untake_join(t, join);
            start::set_errno(libc::EDEADLK);
            ptr::null_mut()
        }
    }
}

/// Ends the calling thread with `result`, from any depth of calls: its
/// joiner gets `result`. The frames between are abandoned (C++ destructors
/// do not run), as in Mach's C-Threads.
///
/// From the program's first thread (`main`'s), waits until every other
/// cthread has ended, then ends the process with status 0, as
/// `pthread_exit` from `main` does. Off a ferry thread, or on a ferry
/// thread the C API did not create (a Rust one), prints why and aborts.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_exit(result: any_t) -> ! {
    start::ensure();
    let me = cthread_self();
    match handles::forked(me) {
        Some(true) => {
            // SAFETY: a cthread's stack holds C frames and its own closure,
            // which owns nothing that must be dropped (the C-Threads
            // contract: cthread_exit abandons the frames between).
            unsafe { ferry_rt::thread::exit_with(Outcome::new(result as usize, me)) }
        }
        Some(false) if start::is_first_thread(me) => {
            while handles::live_count() > 1 {
                ferry_rt::sleep(std::time::Duration::from_millis(1));
            }
            std::process::exit(0)
        }
        _ => {
            eprintln!("ferry: cthread_exit called off a thread made by cthread_fork — aborting");
            std::process::abort()
        }
    }
}

/// Lets thread `t` end without being joined: its record is freed when it
/// ends (at once if it has). A stale or already detached handle is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_detach(t: cthread_t) {
    // Dropping the join handle detaches the thread in ferry: its outcome
    // is dropped as it ends (or here, if it has), which frees the record.
    match handles::take_join(t, true) {
        Some(Taken::Finished(join)) => {
            // Ended already: the record is freed; the result goes unread.
            if let Ok(Ok(outcome)) = join.join_unless_current() {
                outcome.disarm();
            }
        }
        Some(Taken::Waiting(join)) => drop(join),
        Some(Taken::Running) | None => {}
    }
}

/// Offers the processor to another ready thread (a `sched_yield` off a
/// ferry thread).
#[unsafe(no_mangle)]
pub extern "C" fn cthread_yield() {
    start::ensure();
    // Off a ferry thread this is the kernel's `sched_yield`.
    ferry_rt::yield_now();
}

/// The calling thread's handle; `NO_CTHREAD` on a kernel thread outside
/// the runtime (a pthread, or `main` if the runtime was started from a
/// pthread), which may still call the other functions as the C API's
/// module docs say.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_self() -> cthread_t {
    start::ensure();
    match ferry_rt::thread::current_tag() {
        None => return NO_CTHREAD,
        Some(0) => {}
        Some(tag) => return tag as cthread_t,
    }
    let Some(me) = ferry_rt::thread::try_current() else {
        return NO_CTHREAD;
    };
    // A ferry thread the C API did not make: it gets a record now.
    match handles::alloc_known(me.clone(), 0) {
        Some(h) => {
            me.set_tag(h as usize);
            h
        }
        None => NO_CTHREAD,
    }
}

/// Names thread `t`. The string is not copied (as in C-Threads): keep it
/// alive while the thread may be asked its name. A stale handle is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_set_name(t: cthread_t, name: *const c_char) {
    handles::with_words(t, |n, _| *n = name as usize);
    // SAFETY: `name_for_report` does atomic loads only, on slots that are
    // never freed: async-signal-safe for any tag.
    unsafe { ferry_rt::stack::set_tag_namer(handles::name_for_report) };
}

/// Thread `t`'s name as last set (`NULL` if never set, or for a stale
/// handle); the program's first thread is `"main"`.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_name(t: cthread_t) -> *const c_char {
    handles::with_words(t, |n, _| *n as *const c_char).unwrap_or(ptr::null())
}

/// Attaches a word of the program's to thread `t`. A stale handle is
/// ignored.
#[unsafe(no_mangle)]
pub extern "C" fn cthread_set_data(t: cthread_t, data: any_t) {
    handles::with_words(t, |_, d| *d = data as usize);
}

/// The word last attached to thread `t` (`NULL` if none, or for a stale
/// handle).
#[unsafe(no_mangle)]
pub extern "C" fn cthread_data(t: cthread_t) -> any_t {
    handles::with_words(t, |_, d| *d as any_t).unwrap_or(ptr::null_mut())
}
