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
//! | 0 | `Processor::lend`, `lent_at` just taken (the cause of `Blocked`) | lender |
//! | 1 | `Shared::hand_lent`, `standby` raised | lender |
//! | 2 | `Activations::hand`, a spare popped from the pool | lender |
//! | 3 | the spare moved to the wait class (patient) | lender |
//! | 5 | the spare pinned, named in `standby` | lender |
//! | 6 | the spare assigned and woken (`FUTEX_WAKE` returned) | lender |
//! | 7 | `blocking`, the processor lent, before the closure | lender |
//! | 8 | `Activation::wait`, back from the pool's `FUTEX_WAIT` | spare |
//! | 9 | `Activation::take` begins | spare |
//! | 10 | the driver word moved to the spare | spare |
//! | 11 | the spare back in the normal class | spare |
//! | 12 | before `begin` | spare |
//! | 13 | the policy got `Blocked` | spare |
//! | 14, 15 | free for the caller (the example: before `read`, the next thread runs) | |
//! | 16 | the monitor found a driver asleep (`take_unannounced`, `lent_at` just taken) | watcher |
//! | 17 | its `heavy_fence` returned | watcher |
//! | 18 | the lend confirmed, the processor claimed for the watcher itself | watcher |
//! | 19 | back in `Activation::main`, about to take it | watcher |
//! | 20 | pinned for the processor (`begin`) | watcher |
//! | 23 | a stand-in's tick or handoff-wait sleep ended | stand-in |
//! | 24 | a stand-in's `sched_yield` returned | stand-in |
//! | 25 | a stand-in begins a quiet tick's sleep | stand-in |
//! | 26 | a stand-in sleeps until a lend's handoff wait is over | stand-in |
//! | 27 | a stand-in sleeps while its processor is parked | stand-in |
//! | 28 | an activation begins to stand in | stand-in |
//! | 29 | `lend` found no stand-in attached | lender |
//! | 30 | `lend` found a stand-in coming (provided, not yet there) | lender |
//! | 31 | `lend` found the stand-in asleep (its processor was parked) | lender |
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Slots.
pub const N: usize = 32;
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
