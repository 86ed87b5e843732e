//! Waiting across processes: a reader waits for bytes on its ring's
//! `rbell`, a writer for room on its `wbell`: bells in the shared memory
//! that the peer rings after it moved a position, only when the bell says
//! somebody may sleep there.
//!
//! This room owns the sleep and the ring; it must not look at the ring
//! itself (the caller's `look` does) and never sleeps without a bound.
//!
//! A bell is two words: a flag and a count. The flag's handshake is the
//! doorbell's (`event/doorbell.rs`: the sleeper arms it, SeqCst fences,
//! looks again, and only then sleeps; the ringer publishes, fences, and
//! wakes only if it reads `ASLEEP`). Several handles of one process may
//! sleep on one bell, so a sleeper never puts `AWAKE` back itself (that
//! could hide another sleeper from the peer), and it sleeps on the count,
//! not on the flag: it reads the count before it arms, and the futex wait
//! returns at once if a ring bumped it since. A ring after its arming thus
//! always reaches it, even if another sleeper armed the flag again in
//! between (`tests/loom_stream_remote.rs` models this with two sleepers).
//!
//! | word | change | by | when |
//! |------|--------|----|------|
//! | flag | `AWAKE` → `ASLEEP` | [`until`] | a handle of the sleeping side, after reading the count, before its last look |
//! | flag, count | `ASLEEP` → `AWAKE`, count + 1, then `FUTEX_WAKE` all on the count | [`ring`] | the peer, after moving its position (or closing), if it reads `ASLEEP` |
//! | flag, count | the same, whatever the flag says | [`wake`] | this side, when the peer died or broke the protocol |
//!
//! A sleeper waits at most [`SLICE`] at a time, then looks again: a peer
//! that scribbles on a bell (or dies with it `AWAKE`) costs a look, never
//! a hang; the peer's death itself is told by rpc's watcher at once
//! (`Conn::peer_gone` calls [`wake`]). A count that keeps changing under a
//! sleeper with nothing to show for it makes it pause [`STRAY_PAUSE`]
//! instead of spinning.
//!
//! A ferry thread first spins while its processor has nothing else to run
//! (the runtime's spin budget), then sleeps in the kernel inside
//! [`crate::blocking`]: its processor runs other threads meanwhile. A
//! plain kernel thread spins for [`KERNEL_SPIN`], then sleeps. A ferry
//! thread terminated or suspended while it sleeps stops when that sleep
//! ends (a ring, or at most [`SLICE`]: `blocking`'s rule); an abort or
//! an alert ends the sleep early, and the wait goes on (a stream wait is
//! not a call that alerts abort).

use std::time::{Duration, Instant};

use super::atomic::Ordering::{Acquire, Release};
use super::ring::Bell;
use crate::event::doorbell;
use crate::sys;

/// The longest one sleep lasts before the sleeper looks again.
pub(super) const SLICE: Duration = Duration::from_millis(50);

/// How long a plain kernel thread spins, looking, before it sleeps (a
/// ferry thread spins for its runtime's budget, and only while its
/// processor has nothing else to run).
const KERNEL_SPIN: Duration = Duration::from_micros(100);

/// How long a sleeper pauses when its bell changes without a ring.
const STRAY_PAUSE: Duration = Duration::from_millis(1);

/// `FUTEX_WAKE`'s "everyone".
const ALL: u32 = i32::MAX as u32;

/// Waits on `bell` until `look` answers.
pub(super) fn until<T>(bell: &Bell<'_>, mut look: impl FnMut() -> Option<T>) -> T {
    if let Some(t) = crate::thread::spin_for(&mut look) {
        return t;
    }
    if crate::thread::try_current().is_none()
        && let Some(t) = spin_kernel(&mut look)
    {
        return t;
    }
    let mut strays = 0u32;
    loop {
        let seen = bell.seq.load(Acquire);
        doorbell::arm([bell.flag]);
        if let Some(t) = look() {
            return t;
        }
        let slept = crate::blocking(|| sys::futex_wait_shared(bell.seq, seen, SLICE));
        if let Some(t) = look() {
            return t;
        }
        if slept == Err(rustix::io::Errno::AGAIN) {
            strays += 1;
            if strays > 2 {
                crate::blocking(|| std::thread::sleep(STRAY_PAUSE));
            }
        } else {
            strays = 0;
        }
    }
}

/// A plain kernel thread's spin before it sleeps: `look` until it
/// answers, for at most [`KERNEL_SPIN`].
fn spin_kernel<T>(look: &mut impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    let mut i = 0u32;
    loop {
        if let Some(t) = look() {
            return Some(t);
        }
        i = i.wrapping_add(1);
        if i.is_multiple_of(64) && start.elapsed() >= KERNEL_SPIN {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// After moving a position: wakes whoever sleeps on the peer's `bell`.
#[inline(always)]
pub(super) fn ring(bell: &Bell<'_>) {
    doorbell::ring(bell.flag, false, |_| bump(bell));
}

/// Wakes every sleeper of this side on `bell`, whatever its flag says.
pub(super) fn wake(bell: &Bell<'_>) {
    doorbell::ring(bell.flag, true, |_| bump(bell));
}

fn bump(bell: &Bell<'_>) {
    bell.seq.fetch_add(1, Release);
    sys::futex_wake_shared(bell.seq, ALL);
}
