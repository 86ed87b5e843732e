//! Timestamps along the handoff of a lent processor, for a latency
//! breakdown (`examples/blocked_probe.rs`). Built only with
//! `RUSTFLAGS="--cfg ferry_probe"`; the runtime's marks compile to nothing
//! otherwise.
//!
//! Each mark stores the time stamp counter into its slot, the last one
//! wins; a caller resets the slots before the call it wants to see.
//!
//! | slot | where | kernel thread |
//! |------|-------|---------------|
//! | 0 (`LENT`) | `upcall::lend`, `lent_at` just taken (the cause of `Blocked`) | lender |
//! | 1 (`STANDBY_RAISED`) | `Shared::hand_lent`, `standby` raised | lender |
//! | 2 (`SPARE_POPPED`) | `Activations::hand`, a spare popped from the pool | lender |
//! | 3 (`SPARE_TO_WAIT_CLASS`) | the spare moved to the wait class (when idle) | lender |
//! | 5 (`SPARE_PINNED`) | the spare pinned, named in `standby` | lender |
//! | 6 (`SPARE_WOKEN`) | the spare assigned and woken (`FUTEX_WAKE` returned) | lender |
//! | 7 (`CALL_BEGINS`) | `blocking`, the processor lent, before the closure | lender |
//! | 8 (`SPARE_AWAKE`) | `Activation::wait`, back from the pool's `FUTEX_WAIT` | spare |
//! | 9 (`TAKE_BEGINS`) | `Activation::take` begins | spare |
//! | 10 (`DRIVER_WORD_MOVED`) | the driver word moved to the spare | spare |
//! | 11 (`SPARE_NORMAL_CLASS`) | the spare back in the normal class | spare |
//! | 12 (`BEFORE_BEGIN`) | before `begin` | spare |
//! | 13 (`POLICY_GOT_BLOCKED`) | the policy got `Blocked` | spare |
//! | 14, 15 | free for the caller (the example: before `read`, the next thread runs) | |
//! | 16 (`FOUND_ASLEEP`) | the monitor found a driver asleep (`take_unannounced`, `lent_at` just taken) | watcher |
//! | 17 (`PROBE_FENCED`) | its `heavy_fence` returned | watcher |
//! | 18 (`WATCHER_CLAIMED`) | the lend confirmed, the processor claimed for the watcher itself | watcher |
//! | 19 (`WATCHER_TAKES`) | back in `Activation::main`, about to take it | watcher |
//! | 20 (`PINNED_FOR_PROCESSOR`) | pinned for the processor (`begin`) | watcher |
//! | 21 (`WATCH_HANDED_ON`) | the watch handed on after a takeover | watcher |
//! | 22 (`NAME_RESTORED`) | the kernel thread's name restored | watcher |
//! | 23 (`STAND_IN_SLEPT`) | a stand-in's tick or handoff-wait sleep ended | stand-in |
//! | 24 (`STAND_IN_YIELDED`) | a stand-in's `sched_yield` returned | stand-in |
//! | 25 (`STAND_IN_QUIET_TICK`) | a stand-in begins a quiet tick's sleep | stand-in |
//! | 26 (`STAND_IN_HANDOFF_WAIT`) | a stand-in sleeps until a lend's handoff wait is over | stand-in |
//! | 27 (`STAND_IN_PARKED_SLEEP`) | a stand-in sleeps while its processor is parked | stand-in |
//! | 28 (`STAND_IN_BEGINS`) | an activation begins to stand in | stand-in |
//! | 29 (`LEND_NO_STAND_IN`) | `lend` found no stand-in attached | lender |
//! | 30 (`LEND_STAND_IN_COMING`) | `lend` found a stand-in coming (provided, not yet there) | lender |
//! | 31 (`LEND_STAND_IN_ASLEEP`) | `lend` found the stand-in asleep (its processor was parked) | lender |
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Slots.
pub const N: usize = 32;

/// Slot 0: see the table in the module docs.
pub const LENT: usize = 0;
/// Slot 1: see the table in the module docs.
pub const STANDBY_RAISED: usize = 1;
/// Slot 2: see the table in the module docs.
pub const SPARE_POPPED: usize = 2;
/// Slot 3: see the table in the module docs.
pub const SPARE_TO_WAIT_CLASS: usize = 3;
/// Slot 5: see the table in the module docs.
pub const SPARE_PINNED: usize = 5;
/// Slot 6: see the table in the module docs.
pub const SPARE_WOKEN: usize = 6;
/// Slot 7: see the table in the module docs.
pub const CALL_BEGINS: usize = 7;
/// Slot 8: see the table in the module docs.
pub const SPARE_AWAKE: usize = 8;
/// Slot 9: see the table in the module docs.
pub const TAKE_BEGINS: usize = 9;
/// Slot 10: see the table in the module docs.
pub const DRIVER_WORD_MOVED: usize = 10;
/// Slot 11: see the table in the module docs.
pub const SPARE_NORMAL_CLASS: usize = 11;
/// Slot 12: see the table in the module docs.
pub const BEFORE_BEGIN: usize = 12;
/// Slot 13: see the table in the module docs.
pub const POLICY_GOT_BLOCKED: usize = 13;
/// Slot 16: see the table in the module docs.
pub const FOUND_ASLEEP: usize = 16;
/// Slot 17: see the table in the module docs.
pub const PROBE_FENCED: usize = 17;
/// Slot 18: see the table in the module docs.
pub const WATCHER_CLAIMED: usize = 18;
/// Slot 19: see the table in the module docs.
pub const WATCHER_TAKES: usize = 19;
/// Slot 20: see the table in the module docs.
pub const PINNED_FOR_PROCESSOR: usize = 20;
/// Slot 21: see the table in the module docs.
pub const WATCH_HANDED_ON: usize = 21;
/// Slot 22: see the table in the module docs.
pub const NAME_RESTORED: usize = 22;
/// Slot 23: see the table in the module docs.
pub const STAND_IN_SLEPT: usize = 23;
/// Slot 24: see the table in the module docs.
pub const STAND_IN_YIELDED: usize = 24;
/// Slot 25: see the table in the module docs.
pub const STAND_IN_QUIET_TICK: usize = 25;
/// Slot 26: see the table in the module docs.
pub const STAND_IN_HANDOFF_WAIT: usize = 26;
/// Slot 27: see the table in the module docs.
pub const STAND_IN_PARKED_SLEEP: usize = 27;
/// Slot 28: see the table in the module docs.
pub const STAND_IN_BEGINS: usize = 28;
/// Slot 29: see the table in the module docs.
pub const LEND_NO_STAND_IN: usize = 29;
/// Slot 30: see the table in the module docs.
pub const LEND_STAND_IN_COMING: usize = 30;
/// Slot 31: see the table in the module docs.
pub const LEND_STAND_IN_ASLEEP: usize = 31;
static STAMP: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

/// The time stamp counter.
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: `rdtsc` has no preconditions (every x86-64 CPU has it).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Stamps slot `i`.
#[inline(always)]
pub fn mark(i: usize) {
    STAMP[i].store(now(), Relaxed);
}

/// Clears every slot.
pub fn reset() {
    for s in &STAMP {
        s.store(0, Relaxed);
    }
}

/// Every slot (0: not stamped since the reset).
pub fn stamps() -> [u64; N] {
    std::array::from_fn(|i| STAMP[i].load(Relaxed))
}
