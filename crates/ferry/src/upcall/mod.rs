//! Scheduler activations in user space: the events a processor's scheduling
//! policy is told about when the kernel would otherwise stall it (a thread
//! blocks in the kernel or comes back, a thread is preempted, a processor is
//! added or taken away), and their sources.
//!
//! This room owns the activations (kernel threads that drive processors and
//! the pool of spare ones), the announced blocking call, the monitor that
//! notices unannounced blocking and expired time slices, the preemption
//! signal and the processor set's changes. It must not choose which thread
//! runs (the policy does, through its `event` method) and never
//! hands an event to application code.
//!
//! # The seed's design, in user space
//!
//! In the paper's kernel (`004`), an activation is a kernel-provided context
//! that runs a processor; when its thread blocks in the kernel, the kernel
//! makes a fresh activation on the same processor and upcalls `Blocked`;
//! when the call finishes, it upcalls `Unblocked` on some processor. Linux
//! offers none of this, so ferry keeps a pool of spare kernel threads
//! (activations) and moves *processors* between them:
//!
//! | event | cause | who delivers it to which policy |
//! |-------|-------|---------------------------------|
//! | `Blocked(t)` | `t` entered [`blocking`](crate::blocking) and its processor had work, or the monitor found its kernel thread asleep in the kernel | the activation that takes the processor over (the processor's stand-in, which the kernel runs as soon as the core goes idle; else a woken spare, or, for the monitor's findings, the spare that kept the watch and found it), to that processor's policy |
//! | `Unblocked(t)` | `t`'s call returned and its processor was gone | any processor, through the runtime's upcall queue |
//! | `Preempted(t)` | `t`'s time slice ran out, or its processor is being removed | the processor `t` was preempted on, once the switch landed |
//! | `ProcessorAdded(i)` | `Handle::set_processors` grew the set | processor `i`'s own policy, first thing |
//! | `ProcessorRemoved(i)` | `Handle::set_processors` shrank the set | any remaining processor, through the upcall queue |
//!
//! The count of kernel threads running user code never exceeds the
//! processors held, but for one window: a kernel thread whose processor was
//! taken while it slept unannounced runs its thread on until its next call
//! into ferry, or until the monitor sees it running and pushes the thread
//! off with the preemption signal, whichever comes first.
//!
//! # The files, and the one cycle among them
//!
//! ```text
//!   shared.rs (Shared: the runtime's state; Schedule, Host)   deadlock.rs
//!        |                                                        |
//!        v                                                        v
//!   pool.rs ----------> activation.rs <-----------+----------- monitor.rs
//!   (spares,            (a kernel thread: its     |            (the watch)
//!    assignments) <---- loop, take, drive,        |              |    ^
//!                       give back) ---------------+--> stand_in.rs    |
//!                          |   ^                                      |
//!                          v   |                                      |
//!   enter.rs ---> critical.rs (the count) ---> preempt.rs (signal) ---+
//!                          |         ^             |
//!                          v         +-------------+
//!   handover.rs <----- blocking.rs (ferry::blocking: lend, reclaim)
//!
//!   per_processor.rs (the words; reaches only its atomics)
//! ```
//!
//! Everything above `per_processor.rs` is one mechanism: the runtime's
//! kernel threads. An activation's loop runs the watch and stand-ins on its
//! own kernel thread, and they hand processors back to activations; a
//! preemption the critical count deferred runs when the count drops to
//! zero, and the preemption handler enters the runtime through the count.
//! So `activation`, `pool`, `monitor`, `stand_in`, `critical`, `preempt`,
//! `blocking` and `enter` import each other: they are split by concern, not
//! layered. Nothing outside this room sees that cycle, and nothing in it
//! reaches up (the room imports only `processor`, `event`, `sched`,
//! `header`, `waits` and the floor).

mod activation;
mod blocking;
mod critical;
pub(crate) mod deadlock;
mod enter;
mod handover;
mod monitor;
mod per_processor;
mod pool;
mod preempt;
mod shared;
mod stand_in;

/// The atomics `per_processor` reaches through `super::atomic` (loom's, in
/// its models).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

pub(crate) use crate::event::Posted;
pub(crate) use crate::event::stats::Kind;
pub use crate::event::stats::{EventLatency, UpcallStats};
pub(crate) use activation::{Activation, Assignment, StandInBy, Takeover, forget_local};
pub use blocking::blocking;
pub(crate) use blocking::{AbortStep, abort_step, call_aborted, thread_in_call};
pub(crate) use critical::{
    Critical, critical_depth, critical_enter, critical_release_inherited, resumed_processor,
};
pub(crate) use enter::{Entered, enter, keep_block, stop_terminated};
pub(crate) use handover::lend;
pub(crate) use monitor::{Monitor, Publish};
pub(crate) use per_processor::{LENT, ON_WAY, PROBING, PerProcessor, Reclaim};
pub(crate) use pool::Activations;
pub use preempt::{PreemptionOff, preemption_off, without_preemption};
pub(crate) use preempt::{install as install_preemption, signal, signal_driver};
pub(crate) use shared::{Config, Shared, shut_down_error};
pub(crate) use stand_in::wake as wake_stand_in;

use crate::processor::Processor;
pub(crate) use crate::sched::Event;

/// A processor's activation words, as the rooms that know the runtime
/// reach them (the processor itself never does; see `per_processor`).
pub(crate) trait Words {
    /// This processor's [`PerProcessor`].
    fn upcall(&self) -> &PerProcessor;
}

impl Words for Processor {
    #[inline]
    fn upcall(&self) -> &PerProcessor {
        Shared::of(self).words(self)
    }
}
