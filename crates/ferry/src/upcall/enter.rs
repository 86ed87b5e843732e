//! Entering the runtime: a ferry thread's way to the processor its kernel
//! thread drives, with one level of the critical count held ([`Entered`]);
//! and the runtime-side steps a thread takes through it that the header
//! asks for (`Header::keep_block`, `Schedule::stop_terminated`).
//!
//! This file owns only the entry; the count's protocol is `activation`'s,
//! the processor's work is `processor`'s.

use super::{Critical, Words, critical};
use crate::header::SmallBlock;
use crate::processor::{OwnerToken, Processor};

/// A ferry thread's way into the runtime: the processor the calling kernel
/// thread drives, with one level of its critical count held (see
/// `upcall::activation`) until this drops.
///
/// Code that switches while holding it may resume on another processor: it
/// takes the processor it resumed on from the switch, never from an
/// `Entered` made before.
pub(crate) struct Entered {
    pub(crate) p: &'static Processor,
    /// The proof that this kernel thread drives `p`, for its owner part.
    pub(crate) tok: OwnerToken<'static>,
    critical: Critical,
}

impl Entered {
    /// Leaves the level held to the context switched to (an exiting
    /// thread), keeping the token for the switch.
    pub(crate) fn hand_over(self) -> OwnerToken<'static> {
        self.critical.hand_over();
        self.tok
    }

    /// How many freed small thread blocks the entered processor keeps (for
    /// tests).
    #[cfg(test)]
    pub(crate) fn cached_blocks(&self) -> usize {
        // SAFETY: we drive `p` (entered).
        unsafe { self.p.cached_blocks() }
    }

    /// A freed small thread block from the entered processor's cache, for a
    /// spawn there.
    #[inline]
    pub(crate) fn take_block(&self) -> Option<SmallBlock> {
        // SAFETY: we drive `p` (entered).
        unsafe { self.p.take_block() }
    }
}

/// Enters the runtime from the calling kernel thread: `None` if it drives no
/// processor (a plain kernel thread, or an activation between processors).
/// If the processor was lent for a blocking call, takes it back; if it was
/// taken meanwhile, the calling ferry thread is handed back to the runtime
/// first and this returns once it runs again, on whichever processor.
#[inline]
pub(crate) fn enter() -> Option<Entered> {
    let (critical, act) = critical::critical_enter()?;
    let p = act.processor()?;
    // A nested entry does not look at the word, and the monitor may be
    // probing it (`A|PROBING`): it finds our count above zero and puts the
    // word back, and nobody else may take it meanwhile, so it is still ours.
    debug_assert_eq!(
        p.upcall().driver.load(std::sync::atomic::Ordering::Relaxed) & !super::PROBING,
        act.word(),
        "entered a processor we do not drive"
    );
    // SAFETY: the raised count and the driver word (checked above, in
    // debug builds) say the calling kernel thread drives `p`; the token is
    // lent only by `&mut` and no code inside the runtime keeps a reference
    // into `p`'s owner part across an entry.
    let tok = unsafe { OwnerToken::new() };
    Some(Entered { p, tok, critical })
}

/// Keeps a freed small thread block in the cache of the processor the
/// calling kernel thread drives, for its next spawns; frees it if there is
/// none, or no room.
pub(crate) fn keep_block(block: SmallBlock) {
    if let Some(e) = enter() {
        // SAFETY: we drive `e.p` (entered); the push frees no thread.
        unsafe { e.p.keep_block(block) };
    }
}

/// Stops the calling thread, which was terminated before it began to exit:
/// it switches away and the processor drops it; its terminator completes
/// it. Never returns.
pub(crate) fn stop_terminated() -> ! {
    let mut e = enter().expect("a ferry thread stopped outside a processor");
    let _ = e.p.switch_away_held(e.tok.rb());
    unreachable!("a terminated thread was resumed")
}
