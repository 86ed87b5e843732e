//! Waiting across processes: a reader waits for bytes on its ring's
//! `rbell`, a writer for room on its `wbell`, futex words in the shared
//! memory that the peer rings after it moved a position, only when the
//! bell says somebody may sleep there.
//!
//! This room owns the sleep and the ring; it must not look at the ring
//! itself (the caller's `look` does) and never sleeps without a bound.
//!
//! The handshake is the doorbell's (`event/doorbell.rs`: arm, SeqCst
//! fences, look again, sleep while `ASLEEP`; the ringer publishes, fences,
//! and wakes only if it reads `ASLEEP`), with one difference: several
//! handles of one process may sleep on one bell, so a sleeper never puts
//! `AWAKE` back itself (that could hide another sleeper from the peer);
//! only a ring does, and it wakes every sleeper.
//!
//! | bell | set to | by | when |
//! |------|--------|----|------|
//! | `AWAKE` → `ASLEEP` | [`until`] | a handle of the sleeping side, before its last look |
//! | `ASLEEP` → `AWAKE` | [`ring`] | the peer, after moving its position (or closing), then `FUTEX_WAKE` all |
//! | `ASLEEP` → `AWAKE` | [`wake`] | this side (the peer died, or broke the protocol), then `FUTEX_WAKE` all |
//!
//! A sleeper waits at most [`SLICE`] at a time, then looks again: a peer
//! that scribbles on a bell (or dies with it `AWAKE`) costs a look, never
//! a hang; the peer's death itself is told by rpc's watcher at once
//! (`Conn::peer_gone` calls [`wake`]). A bell that keeps changing under a
//! sleeper (the wait fails at once, with nothing to show for it) makes it
//! pause [`STRAY_PAUSE`] instead of spinning.
//!
//! A ferry thread first spins while its processor has nothing else to run
//! (the runtime's spin budget), then sleeps in the kernel inside
//! [`crate::blocking`]: its processor runs other threads meanwhile. A
//! plain kernel thread sleeps at once.

use std::time::Duration;

use super::atomic::AtomicU32;
use crate::event::doorbell::{self, ASLEEP};
use crate::sys;

/// The longest one sleep lasts before the sleeper looks again.
pub(super) const SLICE: Duration = Duration::from_millis(50);

/// How long a sleeper pauses when its bell changes without a ring.
const STRAY_PAUSE: Duration = Duration::from_millis(1);

/// `FUTEX_WAKE`'s "everyone".
const ALL: u32 = i32::MAX as u32;

/// Waits on `bell` until `look` answers.
pub(super) fn until<T>(bell: &AtomicU32, mut look: impl FnMut() -> Option<T>) -> T {
    if let Some(t) = crate::thread::spin_for(&mut look) {
        return t;
    }
    let mut strays = 0u32;
    loop {
        doorbell::arm([bell]);
        if let Some(t) = look() {
            return t;
        }
        let slept = crate::blocking(|| sys::futex_wait_shared(bell, ASLEEP, SLICE));
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

/// After moving a position: wakes whoever sleeps on the peer's `bell`.
#[inline(always)]
pub(super) fn ring(bell: &AtomicU32) {
    doorbell::ring(bell, false, |b| sys::futex_wake_shared(b, ALL));
}

/// Wakes every sleeper of this side on `bell`, whatever the bell says.
pub(super) fn wake(bell: &AtomicU32) {
    doorbell::ring(bell, true, |b| sys::futex_wake_shared(b, ALL));
}
