//! ferry: threads that cost a few procedure calls, on processors that keep
//! running when a thread blocks. (Calls into other processes over shared
//! memory are the next layer; so far [`rpc`] binds a client to a server.)
//!
//! This crate is being built in layers (see `docs/architecture.md`). Present
//! so far: [`arch`]'s context switch, [`stack`]'s guarded stacks,
//! user-level threads on processors ([`run`], [`spawn`],
//! [`JoinHandle::join`], [`yield_now`], [`park`] / [`Thread::unpark`],
//! [`sync`]), and scheduler activations ([`upcall`]): [`blocking`] calls and
//! the [`fs`], [`net`] and [`process`] wrappers that keep their processor
//! running, a monitor for unannounced blocking, preemption (a 10 ms
//! [`Builder::time_slice`] by default), processor changes
//! ([`Handle::set_processors`]), and a report of deadlocks
//! ([`Builder::on_deadlock`]).
//!
//! ```
//! let answer = ferry::run(|| {
//!     let t = ferry::spawn(|| 6 * 7);
//!     t.join().unwrap()
//! })
//! .unwrap();
//! assert_eq!(answer, 42);
//! ```

#![deny(missing_docs)]

pub mod arch;
mod event;
pub mod fs;
mod header;
pub mod net;
#[cfg(ferry_probe)]
#[doc(hidden)]
pub mod probe;
pub mod process;
/// A timestamp of the handoff path (`--cfg ferry_probe` only).
macro_rules! probe {
    ($i:expr) => {
        #[cfg(ferry_probe)]
        crate::probe::mark($i);
    };
}
pub(crate) use probe as probe_mark;
mod processor;
// (Over `ferry-queue`'s shared-memory queues, which its loom builds leave out.)
#[cfg(not(ferry_loom))]
pub mod rpc;
mod runtime;
mod sched;
pub mod stack;
pub mod sync;
mod sys;
pub mod thread;
pub mod upcall;
mod waits;

pub use ferry_macros::interface;
pub use runtime::{Builder, Handle, Runtime, run};
pub use thread::{JoinHandle, Panic, Thread, ThreadId, current, park, sleep, spawn, yield_now};
pub use upcall::blocking;
pub use upcall::deadlock::Deadlock;
