//! Wait strategies: how the synchronous `push`/`pop` wait for room or an item.
//!
//! A queue holds two strategy values, one that consumers wait on ("not empty")
//! and one that producers wait on ("not full"). The waiting side calls
//! [`Wait::wait_until`]; the other side calls [`Wait::notify_one`] after every
//! successful operation, so a strategy that never sleeps ([`Spin`],
//! [`SpinYield`]) has an empty `notify_one` that compiles away, and only
//! [`SpinPark`] pays for wakeups. The thread runtime plugs in its own strategy
//! that parks a user-level thread instead of a kernel thread.
//!
//! This module never touches a queue's indices; it only re-runs the `ready`
//! closure it is given.

use core::sync::atomic::{AtomicU8, AtomicU32, Ordering, compiler_fence, fence};

use crate::primitive::{spin_loop, yield_now};

/// How a synchronous queue operation waits, and how the other side wakes it.
///
/// # Contract
/// - `wait_until(ready)` returns the first `Some` that `ready` produces. It may
///   call `ready` any number of times.
/// - No lost wakeups: after a `notify_one`, at least one waiter whose last
///   call of `ready` began before it (if there is any) calls `ready` again;
///   after a `notify_all`, every such waiter does. The queues call
///   `notify_one` only on a strategy whose waiters all want the same thing (one
///   item, one slot), so whichever waiter wakes can use the change; waiters
///   with different needs (batches of different sizes) wait on a strategy of
///   their own that is woken with `notify_all`.
/// - `notify_one` / `notify_all` are called by the other side after it changed
///   the queue (pushed, popped, or dropped its last handle). They must be cheap
///   when nobody waits: they run on every operation.
///
/// # Example: a strategy that counts how often it had to wait
/// ```
/// use ferry_queue::wait::{Spin, Wait};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// #[derive(Default)]
/// struct Counting { waits: AtomicUsize, inner: Spin }
///
/// impl Wait for Counting {
///     fn wait_until<R>(&self, ready: impl FnMut() -> Option<R>) -> R {
///         self.waits.fetch_add(1, Ordering::Relaxed);
///         self.inner.wait_until(ready)
///     }
///     fn notify_one(&self) {}
///     fn notify_all(&self) {}
/// }
///
/// let (tx, rx) = ferry_queue::spsc::channel_with::<u32, Counting>(2);
/// tx.push(7).unwrap();
/// assert_eq!(rx.pop().unwrap(), 7);
/// ```
pub trait Wait: Default + Send + Sync {
    /// Waits until `ready` returns `Some`, and returns that value.
    fn wait_until<R>(&self, ready: impl FnMut() -> Option<R>) -> R;
    /// Wakes at least one waiter, if any waits.
    fn notify_one(&self);
    /// Wakes every waiter.
    fn notify_all(&self);
}

/// Busy-waits with the CPU's spin hint. Cheapest wakeup (none needed), burns
/// a core while waiting: right when both sides own a core.
#[derive(Debug, Default, Clone, Copy)]
pub struct Spin;

impl Wait for Spin {
    #[inline]
    fn wait_until<R>(&self, mut ready: impl FnMut() -> Option<R>) -> R {
        loop {
            if let Some(r) = ready() {
                return r;
            }
            spin_loop();
        }
    }

    #[inline(always)]
    fn notify_one(&self) {}

    #[inline(always)]
    fn notify_all(&self) {}
}

/// Spins [`SpinYield::SPINS`] times, then calls `sched_yield` between tries.
/// No wakeup cost; polite to other runnable kernel threads, but still never
/// sleeps.
#[derive(Debug, Default, Clone, Copy)]
pub struct SpinYield;

impl SpinYield {
    /// Tries before the first yield.
    pub const SPINS: u32 = 64;
}

impl Wait for SpinYield {
    #[inline]
    fn wait_until<R>(&self, mut ready: impl FnMut() -> Option<R>) -> R {
        let mut tries = 0u32;
        loop {
            if let Some(r) = ready() {
                return r;
            }
            if tries < Self::SPINS {
                tries += 1;
                spin_loop();
            } else {
                yield_now();
            }
        }
    }

    #[inline(always)]
    fn notify_one(&self) {}

    #[inline(always)]
    fn notify_all(&self) {}
}

/// Spins briefly, then parks the kernel thread on a futex until notified.
///
/// This is the default strategy: it never burns a core for long, and costs the
/// notifying side two loads and a compiler fence when nobody sleeps (see the
/// fence modes below).
///
/// # Protocol
///
/// | word      | written by                         | meaning |
/// |-----------|------------------------------------|---------|
/// | `waiters` | the waiter, `+1` before its last check of `ready`, `-1` after it wakes | how many threads may be about to sleep or are asleep |
/// | `epoch`   | the notifier, `+1` before `FUTEX_WAKE` | changes whenever a wakeup is sent; the futex word |
///
/// The waiter reads `epoch`, increments `waiters`, issues the *heavy* fence,
/// checks `ready` once more and only then sleeps on `epoch` with the value it
/// read. The notifier has already published its change, issues the *light*
/// fence and reads `waiters`. The two fences are ordered one way or the other:
/// either the waiter's last check sees the change, or the notifier sees the
/// waiter and bumps `epoch`, which makes the `FUTEX_WAIT` return at once or
/// wakes it.
///
/// The fences are asymmetric, because the notifier runs on every operation and
/// the waiter only when it is about to sleep anyway: the light fence is a
/// compiler fence and the heavy one is `membarrier(PRIVATE_EXPEDITED)`, which
/// makes every running thread of the process execute a full barrier, so the
/// fast path has no barrier instruction at all. Where the kernel refuses
/// `membarrier` (and under Miri and loom) both are SeqCst fences. The choice is
/// made once per process in `FENCE_MODE`:
///
/// | `FENCE_MODE` | set by | light fence | heavy fence |
/// |--------------|--------|-------------|-------------|
/// | `UNKNOWN`    | initial | SeqCst fence | try to register; then as the mode it set |
/// | `ASYMMETRIC` | the first waiter (or [`prepare_fences`]), after registration succeeded | compiler fence | `membarrier` |
/// | `SYMMETRIC`  | the first waiter (or [`prepare_fences`]), after registration failed | SeqCst fence | SeqCst fence |
///
/// A notifier that still reads `UNKNOWN` uses the full fence, which pairs with
/// either heavy fence; the mode never leaves `ASYMMETRIC` once there.
#[derive(Debug, Default)]
pub struct SpinPark {
    epoch: AtomicU32,
    waiters: AtomicU32,
}

impl SpinPark {
    /// Tries (with the spin hint between them) before the thread parks.
    pub const SPINS: u32 = 128;
}

impl Wait for SpinPark {
    fn wait_until<R>(&self, mut ready: impl FnMut() -> Option<R>) -> R {
        for _ in 0..Self::SPINS {
            if let Some(r) = ready() {
                return r;
            }
            spin_loop();
        }
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            self.waiters.fetch_add(1, Ordering::SeqCst);
            heavy_fence();
            if let Some(r) = ready() {
                self.waiters.fetch_sub(1, Ordering::Relaxed);
                return r;
            }
            crate::sys::futex_wait(&self.epoch, epoch);
            self.waiters.fetch_sub(1, Ordering::Relaxed);
            if let Some(r) = ready() {
                return r;
            }
        }
    }

    #[inline]
    fn notify_one(&self) {
        light_fence();
        if self.waiters.load(Ordering::Relaxed) != 0 {
            self.wake(1);
        }
    }

    #[inline]
    fn notify_all(&self) {
        light_fence();
        if self.waiters.load(Ordering::Relaxed) != 0 {
            self.wake(u32::MAX);
        }
    }
}

impl SpinPark {
    #[cold]
    fn wake(&self, count: u32) {
        self.epoch.fetch_add(1, Ordering::Release);
        crate::sys::futex_wake(&self.epoch, count);
    }
}

const UNKNOWN: u8 = 0;
const ASYMMETRIC: u8 = 1;
const SYMMETRIC: u8 = 2;

/// How [`SpinPark`]'s two sides fence; see its protocol table.
static FENCE_MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The notifier's half of an asymmetric Dekker handshake: orders the
/// caller's earlier stores before its later loads, *provided* the other
/// side uses [`heavy_fence`] between its own store and load. A compiler
/// fence once [`heavy_fence`] or [`prepare_fences`] has found
/// `membarrier(PRIVATE_EXPEDITED)` usable, a SeqCst fence otherwise.
/// [`SpinPark`] uses the pair; so may any protocol whose one side is hot
/// and the other about to sleep anyway.
#[inline(always)]
pub fn light_fence() {
    if FENCE_MODE.load(Ordering::Relaxed) == ASYMMETRIC {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The waiter's half of the handshake of [`light_fence`]: a SeqCst fence,
/// and (asymmetric mode) `membarrier(PRIVATE_EXPEDITED)`, which forces a
/// full barrier on every running thread of the process. Costs a system call
/// (microseconds): use it on the side that is about to sleep.
#[cold]
pub fn heavy_fence() {
    let mode = fence_mode();
    fence(Ordering::SeqCst);
    if mode == ASYMMETRIC {
        crate::sys::membarrier();
    }
}

/// Makes the process's one choice of fences now (registering for
/// `membarrier` once) instead of at the first [`heavy_fence`]: until then
/// every [`light_fence`] is a full fence. A program whose hot side runs
/// long before any waiter sleeps (a runtime that never idles) calls this
/// at its start. Cheap after the first call.
///
/// ```
/// ferry_queue::wait::prepare_fences();
/// ferry_queue::wait::light_fence(); // a compiler fence where membarrier works
/// ```
pub fn prepare_fences() {
    fence_mode();
}

/// The process's fence mode, chosen now if it was not yet.
fn fence_mode() -> u8 {
    let mode = FENCE_MODE.load(Ordering::Relaxed);
    if mode != UNKNOWN {
        return mode;
    }
    let wanted = if cfg!(any(miri, ferry_loom)) || !crate::sys::membarrier_register() {
        SYMMETRIC
    } else {
        ASYMMETRIC
    };
    match FENCE_MODE.compare_exchange(UNKNOWN, wanted, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => wanted,
        Err(now) => now,
    }
}
