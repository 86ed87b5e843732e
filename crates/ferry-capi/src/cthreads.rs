//! `ferry/cthreads.h`: Mach's C-Threads interface (003 §5, and 004 §4,
//! which keeps it unchanged so that programs "need only be recompiled and
//! linked"), on ferry's user-level threads, mutexes and conditions.
//!
//! This room owns the C-Threads names and their C contracts; threads,
//! locks and waiting are `ferry`'s. It must not block a kernel thread where
//! a ferry thread could block at user level instead.

use std::ffi::c_char;
use std::ptr;

use ferry_rt::sync::{Condvar, Mutex};

use crate::handles::{self, Outcome, Peek, Taken, cthread_t};
use crate::{any_t, call_c, control};

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
        control::set_errno(libc::EINVAL);
        return NO_CTHREAD;
    };
    let Some(rt) = control::ensure() else {
        control::set_errno(libc::EAGAIN);
        return NO_CTHREAD;
    };
    let Some(record) = handles::alloc_forked() else {
        control::set_errno(libc::EAGAIN);
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
            control::set_errno(libc::EAGAIN);
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
    control::ensure();
    let refused = |own: bool| {
        control::set_errno(if own { libc::EDEADLK } else { libc::EINVAL });
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
                Ok(Err(_)) => control::FERRY_TERMINATED as any_t,
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
            control::FERRY_TERMINATED as any_t
        }
        Err(join) => {
            // The caller's own handle (checked above; kept for safety): put
            // the right to join back.
            handles::untake_join(t, join);
            control::set_errno(libc::EDEADLK);
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
    control::ensure();
    let me = cthread_self();
    match handles::forked(me) {
        Some(true) => {
            // SAFETY: a cthread's stack holds C frames and its own closure,
            // which owns nothing that must be dropped (the C-Threads
            // contract: cthread_exit abandons the frames between).
            unsafe { ferry_rt::thread::exit_with(Outcome::new(result as usize, me)) }
        }
        Some(false) if control::is_first_thread(me) => {
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
    control::ensure();
    // Off a ferry thread this is the kernel's `sched_yield`.
    ferry_rt::yield_now();
}

/// The calling thread's handle; `NO_CTHREAD` on a kernel thread that runs
/// no ferry thread (any kernel thread but the first to call ferry).
#[unsafe(no_mangle)]
pub extern "C" fn cthread_self() -> cthread_t {
    control::ensure();
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

// ---------------------------------------------------------------------------
// Mutexes and conditions

/// Words of storage in [`mutex`] and [`condition`].
pub const FERRY_SYNC_WORDS: usize = 6;

/// A C-Threads mutex: `ferry::sync::Mutex` in storage the program owns.
/// All-zero bytes are an unlocked mutex, so `MUTEX_INITIALIZER` (or
/// [`mutex_init`], or static storage) makes one. A contended lock blocks
/// only the calling ferry thread.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct mutex {
    _opaque: [u64; FERRY_SYNC_WORDS],
}

/// A C-Threads condition: `ferry::sync::Condvar` in storage the program
/// owns; all-zero bytes are a condition nobody waits on.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct condition {
    _opaque: [u64; FERRY_SYNC_WORDS],
}

/// C-Threads' mutex handle.
#[allow(non_camel_case_types)]
pub type mutex_t = *mut mutex;
/// C-Threads' condition handle.
#[allow(non_camel_case_types)]
pub type condition_t = *mut condition;

const _: () = {
    assert!(size_of::<Mutex<()>>() <= size_of::<mutex>());
    assert!(align_of::<Mutex<()>>() <= align_of::<mutex>());
    assert!(size_of::<Condvar>() <= size_of::<condition>());
    assert!(align_of::<Condvar>() <= align_of::<condition>());
};

/// The ferry mutex in `m`'s storage.
///
/// # Safety
/// `m` points at a live `struct mutex` (zeroed or used only as a mutex).
unsafe fn as_mutex<'a>(m: mutex_t) -> &'a Mutex<()> {
    // SAFETY: the storage is big and aligned enough (checked above), and
    // all-zero bytes are `Mutex::new(())` (tested); the caller vouches
    // for the pointer.
    unsafe { &*m.cast::<Mutex<()>>() }
}

/// The ferry condition in `c`'s storage.
///
/// # Safety
/// As [`as_mutex`], for a `struct condition`.
unsafe fn as_condition<'a>(c: condition_t) -> &'a Condvar {
    // SAFETY: as in `as_mutex`.
    unsafe { &*c.cast::<Condvar>() }
}

/// Makes `*m` an unlocked mutex (same as `MUTEX_INITIALIZER`).
///
/// # Safety
/// `m` points at writable storage for a `struct mutex` nobody uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_init(m: mutex_t) {
    if !m.is_null() {
        // SAFETY: the caller's contract.
        unsafe { m.write_bytes(0, 1) };
    }
}

/// Makes `*c` a condition nobody waits on (same as
/// `CONDITION_INITIALIZER`).
///
/// # Safety
/// `c` points at writable storage for a `struct condition` nobody uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_init(c: condition_t) {
    if !c.is_null() {
        // SAFETY: the caller's contract.
        unsafe { c.write_bytes(0, 1) };
    }
}

/// A new unlocked mutex on the heap ([`mutex_free`] it).
#[unsafe(no_mangle)]
pub extern "C" fn mutex_alloc() -> mutex_t {
    Box::into_raw(Box::new(mutex {
        _opaque: [0; FERRY_SYNC_WORDS],
    }))
}

/// Frees a mutex made by [`mutex_alloc`]; `NULL` is ignored.
///
/// # Safety
/// `m` came from `mutex_alloc`, is unlocked, and is used no more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_free(m: mutex_t) {
    if !m.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(m) });
    }
}

/// Locks `m`, blocking the calling thread (at user level on a ferry
/// thread) while another holds it.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_lock(m: mutex_t) {
    // SAFETY: the caller's contract.
    unsafe { as_mutex(m) }.lock_raw();
}

/// Takes `m` if it is free: nonzero if taken.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_try_lock(m: mutex_t) -> i32 {
    // SAFETY: the caller's contract.
    i32::from(unsafe { as_mutex(m) }.try_lock_raw())
}

/// Unlocks `m`, waking one waiter if any.
///
/// # Safety
/// `m` is a live mutex that the calling thread holds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_unlock(m: mutex_t) {
    // SAFETY: the caller holds the lock it releases.
    unsafe { as_mutex(m).force_unlock() };
}

/// A new condition on the heap ([`condition_free`] it).
#[unsafe(no_mangle)]
pub extern "C" fn condition_alloc() -> condition_t {
    Box::into_raw(Box::new(condition {
        _opaque: [0; FERRY_SYNC_WORDS],
    }))
}

/// Frees a condition made by [`condition_alloc`]; `NULL` is ignored.
///
/// # Safety
/// `c` came from `condition_alloc`, nobody waits on it, and it is used no
/// more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_free(c: condition_t) {
    if !c.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(c) });
    }
}

/// Wakes at least one thread waiting on `c`, if any.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_signal(c: condition_t) {
    // SAFETY: the caller's contract.
    unsafe { as_condition(c) }.notify_one();
}

/// Wakes every thread waiting on `c`.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_broadcast(c: condition_t) {
    // SAFETY: the caller's contract.
    unsafe { as_condition(c) }.notify_all();
}

/// Unlocks `m`, waits until `c` is signalled, and locks `m` again. Wakeups
/// may come without the condition holding: wait in a loop.
///
/// # Safety
/// `c` is a live condition and `m` a live mutex the caller holds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_wait(c: condition_t, m: mutex_t) {
    // SAFETY: the caller's contract; the guard stands for the lock the
    // caller holds, and is forgotten once the wait has locked it again.
    unsafe {
        let m = as_mutex(m);
        std::mem::forget(as_condition(c).wait(m.make_guard_unchecked()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_storage_is_a_fresh_mutex_and_condition() {
        // The static initialisers rely on this: all-zero bytes are an
        // unlocked mutex and an empty condition.
        let m = Box::into_raw(Box::new(mutex {
            _opaque: [0; FERRY_SYNC_WORDS],
        }));
        let c = Box::into_raw(Box::new(condition {
            _opaque: [0; FERRY_SYNC_WORDS],
        }));
        // SAFETY: fresh zeroed storage, used as one mutex and one condition.
        unsafe {
            assert!(!as_mutex(m).is_locked());
            assert_eq!(mutex_try_lock(m), 1);
            assert_eq!(mutex_try_lock(m), 0);
            mutex_unlock(m);
            condition_signal(c);
            condition_broadcast(c);
            let (mp, cp) = (m as usize, c as usize);
            let waiter = std::thread::spawn(move || {
                let (m, c) = (mp as mutex_t, cp as condition_t);
                mutex_lock(m);
                condition_wait(c, m);
                mutex_unlock(m);
            });
            while !waiter.is_finished() {
                mutex_lock(m);
                condition_signal(c);
                mutex_unlock(m);
                std::thread::yield_now();
            }
            waiter.join().unwrap();
            mutex_free(m);
            condition_free(c);
        }
    }
}
