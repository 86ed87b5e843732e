//! [`sleep`]: a ferry thread waits on its runtime's timers (an event
//! source), parked, while its processor runs others.
//!
//! This file owns only the waiting side; the deadline heap and the firing
//! are `event::timer`'s.

use std::sync::atomic::Ordering::Acquire;
use std::time::{Duration, Instant};

use super::{Unparker, park};

/// Puts the calling thread to sleep for at least `duration`; its processor
/// runs other threads meanwhile. On a plain kernel thread this is
/// `std::thread::sleep`.
///
/// ```
/// use std::time::{Duration, Instant};
/// ferry::run(|| {
///     let start = Instant::now();
///     ferry::sleep(Duration::from_millis(5));
///     assert!(start.elapsed() >= Duration::from_millis(5));
/// })
/// .unwrap();
/// ```
pub fn sleep(duration: Duration) {
    let Some(me) = crate::upcall::enter().and_then(|e| e.p.current_ref(&e.tok).cloned()) else {
        std::thread::sleep(duration);
        return;
    };
    let due = Instant::now() + duration;
    let fired = me
        .shared()
        .sources
        .timers
        .add(due, Unparker::Ferry(me.clone()));
    drop(me);
    // Spurious returns from `park` are possible; the flag is the truth. A
    // token the timer leaves behind only makes some later `park` return
    // once, which every caller of `park` tolerates.
    while !fired.load(Acquire) {
        park();
    }
}
