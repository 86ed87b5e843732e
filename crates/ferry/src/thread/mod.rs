//! User-level threads: [`spawn()`], [`Builder`], [`JoinHandle`], [`current`],
//! [`yield_now`], and the park/unpark pair every blocking primitive is built
//! on.
//!
//! This room owns a thread's identity, stack, saved context and its park
//! state; it must not pick which thread runs next (that is
//! the `processor` module's job).
//!
//! # What must not be held across a switch
//!
//! A ferry thread can stop at any blocking call (`park`, `join`, `sleep`,
//! `yield_now`, and every `ferry::sync` wait) and resume on another kernel
//! thread. So, across such a call, do not hold:
//!
//! - a reference obtained from a `std::thread_local!` (the value belongs to
//!   the kernel thread, which may by then run another ferry thread); use
//!   [`thread_local!`](crate::thread_local) for per-thread state instead;
//! - a `std::sync::Mutex`/`RwLock` guard, or anything else that blocks the
//!   *kernel* thread: another ferry thread on the same processor that waits
//!   for it would block the processor, and the guard may be released from a
//!   different kernel thread than took it (pthread forbids that);
//! - raw pointers to the current processor: the runtime itself always asks
//!   for the current processor again after a switch, never through an
//!   address cached before it.
//!
//! With a time slice ([`crate::Builder::time_slice`]) a thread can also be
//! preempted *between* any two instructions of its own code, and resume on
//! another kernel thread. ferry defers a preemption inside the runtime,
//! under a [`SpinLock`](crate::sync::SpinLock), in the C library and while
//! the thread panics; code of your own that depends on its kernel thread
//! (a `std::thread_local!` borrow, std's stdout lock held by `println!`)
//! can ask for the same with [`without_preemption`](crate::upcall::without_preemption).
//!
//! # errno and thread-local storage
//!
//! `errno` is saved and restored per ferry thread across every switch. One
//! trap remains, and it is the compiler's: std declares `__errno_location`
//! `ffi_const`, so in an optimised build a function that reads errno through
//! std (`io::Error::last_os_error()`) may compute the errno *address* once
//! and reuse it after a switch that moved the thread to another kernel
//! thread — reading that kernel thread's errno, not its own. Make the failing
//! call and the errno read in a small `#[inline(never)]` function that does
//! not switch in between (ferry's own wrappers do), or read errno through
//! `libc::__errno_location`, which is not declared `ffi_const`. (C code
//! that includes ferry's headers gets `errno` through a non-const accessor
//! and is safe as written; see the `ferry-capi` crate.)
//!
//! Thread-local storage — `std::thread_local!`, `#[thread_local]`, C's
//! `__thread` — belongs to the kernel thread, not to the ferry thread: a
//! ferry thread sees the values of whichever kernel thread runs it at the
//! moment, and the compiler treats the thread pointer as fixed within a
//! function, so after a switch it may go on using the address of the
//! kernel thread it left. Per-ferry-thread state goes in
//! [`thread_local!`](crate::thread_local) (C: `cthread_set_data`), whose
//! value is found through the running thread at each access. ferry does
//! not give each ferry thread an FS base of its own: where the kernel
//! allows `wrfsbase` the switch itself would cost about 12 ns more, but
//! glibc's thread control block at `fs:0` (the `struct pthread`, the stack
//! canary, the dtv) and every module's static TLS would need a copy per
//! ferry thread; `ferry-capi`'s crate docs give the measurement and the
//! reasons.

mod alert;
#[cfg(test)]
mod block_cache_tests;
mod caller_stack;
mod control;
mod cpu;
mod ended;
mod join;
mod local;
mod panic;
mod sleep;
mod spawn;
mod stream_bytes;

pub(crate) use alert::{BLOCKED, Hooks, PENDING, set_hooks};
pub use alert::{alerted, allow_alerts, clear_alert, cpu_time, set_priority};
pub(crate) use caller_stack::{caller_stack, note_adopted_stack};
pub use control::Suspension;
pub(crate) use cpu::{RunSpan, charge_current, charge_current_ticks, current_cpu_ticks_at};
pub use join::JoinHandle;
pub use local::LocalKey;
pub(crate) use panic::install_panic_hook;
pub(crate) use sleep::with_timer;
pub use sleep::{sleep, sleep_until};
pub(crate) use stream_bytes::{count_stream_bytes_from_now, moved_stream_bytes};

/// The resolution of ferry's timers (2^16 ns): a [`sleep()`] ends within a
/// tick after its deadline when a processor looks in time, never before.
pub use crate::event::timer::TICK as TIMER_TICK;
pub(crate) use spawn::switch_in_adopted;
pub use spawn::{Builder, exit_with, spawn};

pub use crate::header::{Panic, Priority, Thread, ThreadId};

use crate::header::raw::{self};
use crate::header::{Ready, Unparker, park_word};
use crate::processor::Pending;

/// The running user-level thread, or `None` on a kernel thread that is not
/// running one.
pub fn try_current() -> Option<Thread> {
    crate::upcall::enter().and_then(|e| e.p.current_ref(&e.tok).cloned())
}

/// The running user-level thread's [`tag`](Thread::tag), or `None` on a
/// kernel thread that is not running one; cheaper than
/// `try_current().map(|t| t.tag())` (no reference taken).
pub fn current_tag() -> Option<usize> {
    crate::upcall::enter().and_then(|e| e.p.current_ref(&e.tok).map(Thread::tag))
}

/// The running user-level thread.
///
/// # Panics
/// On a kernel thread that is not running a ferry thread.
pub fn current() -> Thread {
    crate::upcall::enter()
        .and_then(|e| e.p.current_ref(&e.tok).cloned())
        .expect("ferry::thread::current: not on a ferry thread")
}

/// Lets other runnable threads of this processor run first. Cheap when there
/// are none. Outside a ferry thread, yields the kernel thread.
pub fn yield_now() {
    let Some(mut e) = crate::upcall::enter().filter(|e| e.p.in_thread(&e.tok)) else {
        std::thread::yield_now();
        return;
    };
    e.p.yield_current(e.tok.rb());
}

/// Whether the calling ferry thread may spin a while instead of parking:
/// it runs on a processor that has no other thread ready, and no polled
/// entry of the runtime holds something only this processor would hand
/// over (a call to a server of this runtime, or a reply, while every other
/// processor sleeps: spinning would keep the processor that must deliver
/// it from looking, as with one processor and a server in the same
/// process). `false` off a ferry thread.
fn may_spin() -> bool {
    crate::upcall::enter()
        .filter(|e| e.p.in_thread(&e.tok))
        .is_some_and(|mut e| !e.p.others_ready(e.tok.rb()) && !e.p.polled_waits_for_me(e.tok.rb()))
}

/// Spins calling `look` until it answers, for at most the runtime's
/// polled-entry spin budget and only while the calling ferry thread's
/// processor has no other thread ready (asked again every 64 looks):
/// what a thread does instead of parking when its answer is likely to
/// come within the budget. `None` if it gave up (or is not on a ferry
/// thread).
pub(crate) fn spin_for<T>(mut look: impl FnMut() -> Option<T>) -> Option<T> {
    if !may_spin() {
        return None;
    }
    // The entry is left before the spin: it holds preemption off.
    let budget = {
        let e = crate::upcall::enter()?;
        e.p.current_ref(&e.tok)?;
        e.p.shared().sources.polled.spin_budget()
    };
    let start = std::time::Instant::now();
    let mut i = 0u32;
    loop {
        if let Some(answer) = look() {
            return Some(answer);
        }
        i = i.wrapping_add(1);
        if i.is_multiple_of(64) && (start.elapsed() >= budget || !may_spin()) {
            // One last look: what stopped the spin may be the answer itself
            // (a reply waiting on this runtime's channel).
            return look();
        }
        std::hint::spin_loop();
    }
}

/// Blocks the calling thread until it gets a wakeup token (see
/// [`Thread::unpark`]); may also return spuriously. On a plain kernel thread
/// this is `std::thread::park`.
pub fn park() {
    match crate::upcall::enter() {
        Some(e) => park_entered(e),
        None => std::thread::park(),
    }
}

/// [`park`], inside an entry into the runtime the caller already made (a
/// blocking primitive that took its waiter spinlock in the same critical
/// section): the entry is left after the park returns, on whichever
/// processor resumed the thread.
pub(crate) fn park_entered(mut e: crate::upcall::Entered) {
    let p = e.p;
    let Some(me) = p.current_ref(&e.tok) else {
        drop(e);
        std::thread::park();
        return;
    };
    // A token taken means return at once (see `park_word`).
    if park_word::take_token_or_start_parking(&me.header().state) {
        return;
    }
    p.switch_away(e.tok.rb(), Pending::Park);
}

impl Unparker {
    /// The caller, as something to wake later.
    pub(crate) fn current() -> Unparker {
        Unparker::current_entered(crate::upcall::enter().as_ref())
    }

    /// [`unpark`](Unparker::unpark) from inside the entry `e` into the
    /// runtime (see `sync::waiter::Entry`), leaving it. A parked ferry
    /// thread of the entered processor's runtime is queued there inside the
    /// level, without entering again and without another reference to it.
    /// Any other wake (another runtime's thread, a kernel thread) is made
    /// after the level is left, as `unpark` makes it. Either way the
    /// reference is dropped after `e`'s level is left, as `unpark`'s caller
    /// dropped it (the last reference to another runtime's thread may hold
    /// that runtime's last `Arc`).
    pub(crate) fn unpark_leaving(self, mut e: crate::upcall::Entered) {
        match self {
            Unparker::Ferry(t) if std::ptr::eq(e.p.shared(), &t.shared().set) => {
                let unqueued = if park_word::unpark(&t.header().state) {
                    e.p.make_ready(e.tok.rb(), t, Ready::Woken);
                    None
                } else {
                    Some(t)
                };
                drop(e);
                drop(unqueued);
            }
            other => {
                drop(e);
                other.unpark();
            }
        }
    }

    /// The thread `e` runs, or (with no entry, or none running) the calling
    /// kernel thread: [`Unparker::current`] inside an entry already made.
    pub(crate) fn current_entered(e: Option<&crate::upcall::Entered>) -> Unparker {
        match e.and_then(|e| e.p.current_ref(&e.tok)) {
            Some(t) => Unparker::Ferry(t.clone()),
            None => Unparker::Kernel(std::thread::current()),
        }
    }
}
