//! Who spins and who sleeps among the processors of one runtime, and the
//! notifier's side of the idle handshake (the module docs of `processor`,
//! "Idling and waking"): whether a processor that published work must wake
//! a sleeper, and which one.
//!
//! This room owns the counts, the list of sleepers and those decisions; it
//! must not wake, park or look for work itself (the caller wakes the
//! processor named, through its `sleep` word, and the idler looks for work
//! between its steps). It reaches its atomics, its lock and its fences
//! through `super::atomic`, so that `tests/loom_idle.rs` compiles this very
//! file against loom's and checks the handshake under every interleaving.
//!
//! | word | written by | meaning |
//! |------|------------|---------|
//! | `spinning` | a processor entering (+1) and leaving (-1) its spin in `idle` (SeqCst) | how many processors are looking for work right now; while any is, nobody needs waking |
//! | `sleeper_count` | a processor joining or leaving `sleepers`, or a notifier taking one out, under its lock | how many processors sleep (or are about to); read without the lock by a notifier |

use super::atomic::Ordering::{Relaxed, SeqCst};
use super::atomic::{AtomicUsize, Mutex, PoisonError, heavy_fence, light_fence};

/// The idle bookkeeping of one runtime's processors; see the module docs.
pub(crate) struct IdleSet {
    /// Indices of processors asleep (or about to sleep) in `idle`.
    sleepers: Mutex<Vec<usize>>,
    sleeper_count: AtomicUsize,
    spinning: AtomicUsize,
}

impl IdleSet {
    /// Nobody spins or sleeps yet; room for `processors` sleepers.
    pub(crate) fn new(processors: usize) -> IdleSet {
        IdleSet {
            sleepers: Mutex::new(Vec::with_capacity(processors)),
            sleeper_count: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
        }
    }

    /// Work was just published by a processor: whether a sleeper must be
    /// woken ([`IdleSet::take_sleeper`] names it). Not when one spins: it
    /// will find the work. `light_fence` pairs with the idler's
    /// `heavy_fence`.
    #[inline]
    pub(crate) fn notify_work(&self) -> bool {
        light_fence();
        self.someone_sleeps_and_nobody_spins()
    }

    /// [`IdleSet::notify_work`], from a kernel thread that drives no
    /// processor (and so is not covered by the idler's `heavy_fence`).
    pub(crate) fn notify_work_anywhere(&self) -> bool {
        heavy_fence();
        self.someone_sleeps_and_nobody_spins()
    }

    #[inline]
    fn someone_sleeps_and_nobody_spins(&self) -> bool {
        self.spinning.load(Relaxed) == 0 && self.sleeper_count.load(Relaxed) != 0
    }

    /// Takes the last processor that went to sleep out of the sleepers,
    /// for the caller to wake; `None` if none sleeps any more.
    #[cold]
    pub(crate) fn take_sleeper(&self) -> Option<usize> {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        let i = sleepers.pop();
        self.sleeper_count.store(sleepers.len(), Relaxed);
        i
    }

    /// A processor starts spinning for work.
    pub(crate) fn spinning_enter(&self) {
        self.spinning.fetch_add(1, SeqCst);
    }

    /// A spinner stops (to sleep: it has joined the sleepers first).
    pub(crate) fn spinning_exit(&self) {
        self.spinning.fetch_sub(1, SeqCst);
    }

    /// A spinner found work: whether a sleeper must be woken to spin in its
    /// place, because it was the last spinner (Go's rule: more work already
    /// queued does not wait for this one).
    pub(crate) fn spinning_exit_found_work(&self) -> bool {
        self.spinning.fetch_sub(1, SeqCst) == 1 && self.sleeper_count.load(Relaxed) != 0
    }

    /// Processor `index` joins the sleepers (its `sleep` word is 0 already).
    pub(crate) fn sleeper_enter(&self, index: usize) {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.push(index);
        self.sleeper_count.store(sleepers.len(), SeqCst);
    }

    /// How many processors sleep (or are about to).
    pub(crate) fn sleepers(&self) -> usize {
        self.sleeper_count.load(SeqCst)
    }

    /// Processor `index` leaves `idle` (woken, or it found work on its last
    /// look): out of the sleepers, if a notifier did not take it out.
    pub(crate) fn sleeper_exit(&self, index: usize) {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.retain(|&i| i != index);
        self.sleeper_count.store(sleepers.len(), SeqCst);
    }
}
