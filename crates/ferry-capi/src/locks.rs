//! `ferry/cthreads.h`, continued: C-Threads' mutexes, conditions and spin
//! locks (003 §5) on `ferry::sync`'s `Mutex` and `Condvar` and the C API's
//! test-and-set lock, in storage the program owns.
//!
//! This room owns the C contracts of these names: the storage layouts, the
//! initialisers, and misuse answered through errno (the calls return
//! nothing); locking and waiting are `ferry`'s. It must not block a kernel
//! thread where a ferry thread could block at user level instead.

use std::ffi::c_char;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::Relaxed;

use ferry_rt::sync::{Condvar, Mutex};

use crate::start;

// ---------------------------------------------------------------------------
// Mutexes and conditions

/// Words of storage in [`mutex`] and [`condition`].
pub const FERRY_SYNC_WORDS: usize = 8;

/// A C-Threads mutex: `ferry::sync::Mutex` and a name, in storage the
/// program owns. All-zero bytes are an unlocked, unnamed mutex, so
/// `MUTEX_INITIALIZER` (or [`mutex_init`], or static storage) makes one. A
/// contended lock blocks only the calling ferry thread.
///
/// Misuse is answered as by an error-checking pthread mutex, through errno
/// (the C-Threads calls return nothing): [`mutex_lock`] by the holder sets
/// `EDEADLK`, [`mutex_unlock`] by a thread that does not hold the mutex sets
/// `EPERM`, and [`condition_wait`] without the mutex sets `EPERM`; each
/// returns at once and leaves the mutex as it was. These hold for ferry
/// threads and plain kernel threads alike; a mutex locked in a signal
/// handler running on an alternate stack is held by no thread.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct mutex {
    _opaque: [u64; FERRY_SYNC_WORDS],
}

/// A C-Threads condition: `ferry::sync::Condvar` and a name, in storage the
/// program owns; all-zero bytes are an unnamed condition nobody waits on.
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

/// What a `struct mutex` or `struct condition` holds: the ferry object and
/// the name the program gave it (null: none).
#[repr(C)]
struct Named<T> {
    sync: T,
    name: AtomicPtr<c_char>,
}

const _: () = {
    assert!(size_of::<Named<Mutex<()>>>() <= size_of::<mutex>());
    assert!(align_of::<Named<Mutex<()>>>() <= align_of::<mutex>());
    assert!(size_of::<Named<Condvar>>() <= size_of::<condition>());
    assert!(align_of::<Named<Condvar>>() <= align_of::<condition>());
};

/// The ferry mutex and name in `m`'s storage.
///
/// # Safety
/// `m` points at a live `struct mutex` (zeroed or used only as a mutex).
unsafe fn as_mutex<'a>(m: mutex_t) -> &'a Named<Mutex<()>> {
    // SAFETY: the storage is big and aligned enough (checked above), and
    // all-zero bytes are `Mutex::new(())` and a null name (tested); the
    // caller vouches for the pointer.
    unsafe { &*m.cast::<Named<Mutex<()>>>() }
}

/// The ferry condition and name in `c`'s storage.
///
/// # Safety
/// As [`as_mutex`], for a `struct condition`.
unsafe fn as_condition<'a>(c: condition_t) -> &'a Named<Condvar> {
    // SAFETY: as in `as_mutex`.
    unsafe { &*c.cast::<Named<Condvar>>() }
}

/// A name as C-Threads returns it: `"?"` for none.
fn name_or_unknown(name: &AtomicPtr<c_char>) -> *const c_char {
    let n = name.load(Relaxed);
    if n.is_null() { c"?".as_ptr() } else { n }
}

/// Makes `*m` an unlocked, unnamed mutex (same as `MUTEX_INITIALIZER`).
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

/// Ends the use of a mutex that [`mutex_alloc`] did not make (static or
/// embedded storage), as C-Threads asks before its storage is reused. A
/// ferry mutex holds nothing outside its storage, so on an unlocked mutex
/// nobody waits for this changes nothing (it stays usable, and keeps its
/// name). On a mutex that is held or waited for it changes nothing and sets
/// errno to `EBUSY`.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_clear(m: mutex_t) {
    // SAFETY: the caller's contract.
    let m = unsafe { as_mutex(m) };
    if m.sync.is_locked() || m.sync.has_waiters() {
        start::set_errno(libc::EBUSY);
    }
}

/// Names mutex `m` (for debugging). The string is not copied, as in
/// C-Threads: keep it alive while the mutex may be asked its name.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_set_name(m: mutex_t, name: *const c_char) {
    // SAFETY: the caller's contract.
    unsafe { as_mutex(m) }.name.store(name.cast_mut(), Relaxed);
}

/// Mutex `m`'s name as last set, or `"?"` if it has none (as C-Threads).
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_name(m: mutex_t) -> *const c_char {
    // SAFETY: the caller's contract.
    name_or_unknown(&unsafe { as_mutex(m) }.name)
}

/// Makes `*c` an unnamed condition nobody waits on (same as
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

/// Ends the use of a condition that [`condition_alloc`] did not make, as
/// [`mutex_clear`] does for a mutex: nothing changes on a condition nobody
/// waits on; one with waiters is left as it is (they stay waiting) and errno
/// is set to `EBUSY`.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_clear(c: condition_t) {
    // SAFETY: the caller's contract.
    if unsafe { as_condition(c) }.sync.has_waiters() {
        start::set_errno(libc::EBUSY);
    }
}

/// Names condition `c` (for debugging). The string is not copied: keep it
/// alive while the condition may be asked its name.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_set_name(c: condition_t, name: *const c_char) {
    // SAFETY: the caller's contract.
    unsafe { as_condition(c) }
        .name
        .store(name.cast_mut(), Relaxed);
}

/// Condition `c`'s name as last set, or `"?"` if it has none.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_name(c: condition_t) -> *const c_char {
    // SAFETY: the caller's contract.
    name_or_unknown(&unsafe { as_condition(c) }.name)
}

/// A new unlocked, unnamed mutex on the heap ([`mutex_free`] it).
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
/// If the calling thread holds `m` already, waiting would never end: the
/// call returns at once with errno set to `EDEADLK`, and the caller still
/// holds `m`, once (locks are not counted: one [`mutex_unlock`] frees it).
/// This is what an error-checking pthread mutex does, rather than an abort,
/// so that a program can see the error and go on: test errno where a relock
/// is possible, since a caller that does not goes on as if it had just
/// locked, and its nested unlock frees the mutex while the outer section is
/// still running. errno is left alone when the lock is taken.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_lock(m: mutex_t) {
    // SAFETY: the caller's contract.
    if unsafe { as_mutex(m) }.sync.lock_raw().is_err() {
        start::set_errno(libc::EDEADLK);
    }
}

/// Takes `m` if it is free: nonzero if taken, 0 if any thread holds it (the
/// caller included).
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_try_lock(m: mutex_t) -> i32 {
    // SAFETY: the caller's contract.
    i32::from(unsafe { as_mutex(m) }.sync.try_lock_raw())
}

/// Unlocks `m`, waking one waiter if any.
///
/// Only the thread that holds `m` may unlock it. Called by any other thread
/// (or on an unlocked mutex) it changes nothing — the holder keeps the
/// mutex — and sets errno to `EPERM`, as an error-checking pthread mutex
/// answers (C-Threads' `mutex_unlock` returns nothing, so errno is the
/// answer). errno is left alone when the unlock is made.
///
/// # Safety
/// `m` is a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mutex_unlock(m: mutex_t) {
    // SAFETY: the caller's contract; C holds no borrow of the (empty) data.
    if unsafe { as_mutex(m).sync.unlock_raw() }.is_err() {
        start::set_errno(libc::EPERM);
    }
}

/// A new unnamed condition on the heap ([`condition_free`] it).
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
    unsafe { as_condition(c) }.sync.notify_one();
}

/// Wakes every thread waiting on `c`.
///
/// # Safety
/// `c` is a live condition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_broadcast(c: condition_t) {
    // SAFETY: the caller's contract.
    unsafe { as_condition(c) }.sync.notify_all();
}

/// Unlocks `m`, waits until `c` is signalled, and locks `m` again. Wakeups
/// may come without the condition holding: wait in a loop.
///
/// The caller must hold `m`. Called without it, the call returns at once,
/// without waiting and without taking `m`, and sets errno to `EPERM`.
/// errno is left alone by a wait.
///
/// # Safety
/// `c` is a live condition and `m` a live mutex.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn condition_wait(c: condition_t, m: mutex_t) {
    // SAFETY: the caller's contract; C holds no guard or borrow of the
    // mutex's (empty) data.
    let waited = unsafe { as_condition(c).sync.wait_raw(&as_mutex(m).sync) };
    if waited.is_err() {
        start::set_errno(libc::EPERM);
    }
}

// ---------------------------------------------------------------------------
// Spin locks

/// C-Threads' spin lock: an `int`, 0 when free (`SPIN_LOCK_INITIALIZER`), for
/// critical sections of a few instructions. Pass its address to
/// [`spin_lock`] and the others.
///
/// A waiter spins a little, then yields its processor at every try (a
/// holder that a time slice preempted may be waiting on the same processor
/// to run); off a ferry thread it yields its kernel thread. A spin lock has
/// no holder: any thread may unlock it, and unlocking a free one leaves it
/// free.
#[allow(non_camel_case_types)]
pub type spin_lock_t = i32;

/// Mach's `boolean_t`: nonzero is true.
#[allow(non_camel_case_types)]
pub type boolean_t = i32;

/// The test-and-set lock in a `spin_lock_t`'s storage.
///
/// # Safety
/// `p` points at a live `spin_lock_t`, written only through these calls.
unsafe fn as_spin<'a>(p: *mut spin_lock_t) -> &'a crate::raw_lock::RawLock<()> {
    const {
        assert!(size_of::<crate::raw_lock::RawLock<()>>() <= size_of::<spin_lock_t>());
        assert!(align_of::<crate::raw_lock::RawLock<()>>() <= align_of::<spin_lock_t>());
    }
    // SAFETY: the storage is big and aligned enough (checked above), and a
    // zero `int` is a free lock (its first byte is the `false` flag); the
    // caller vouches for the pointer.
    unsafe { &*p.cast::<crate::raw_lock::RawLock<()>>() }
}

/// Makes `*p` a free spin lock (same as `SPIN_LOCK_INITIALIZER`).
///
/// # Safety
/// `p` points at writable storage for a `spin_lock_t` nobody uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spin_lock_init(p: *mut spin_lock_t) {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        unsafe { p.write(0) };
    }
}

/// Takes spin lock `*p`, spinning (then yielding) while another holds it.
/// Do not block while holding it: other threads spin for it.
///
/// # Safety
/// `p` points at a live spin lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spin_lock(p: *mut spin_lock_t) {
    // SAFETY: the caller's contract.
    unsafe { as_spin(p) }.lock_raw();
}

/// Takes spin lock `*p` if it is free: `TRUE` (1) if taken, `FALSE` (0)
/// otherwise.
///
/// # Safety
/// `p` points at a live spin lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spin_try_lock(p: *mut spin_lock_t) -> boolean_t {
    // SAFETY: the caller's contract.
    boolean_t::from(unsafe { as_spin(p) }.try_lock_raw())
}

/// Frees spin lock `*p`.
///
/// # Safety
/// `p` points at a live spin lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn spin_unlock(p: *mut spin_lock_t) {
    // SAFETY: the caller's contract: no guard of a spin lock is ever made.
    unsafe { as_spin(p).force_unlock() };
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
            assert!(!as_mutex(m).sync.is_locked());
            assert!(as_mutex(m).name.load(Relaxed).is_null());
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
