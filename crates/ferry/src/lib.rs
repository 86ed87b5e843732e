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
//! ([`Handle::set_processors`]), processors shared between processes
//! by a processor allocation daemon ([`alloc`], `ferry allocd`), a report
//! of deadlocks ([`Builder::on_deadlock`]), and a page of figures other
//! processes read ([`stats`], what `ferry top` shows).
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

// (Over `rpc`'s binding, which loom builds leave out.)
#[cfg(not(ferry_loom))]
pub mod alloc;
pub mod arch;
mod cell;
mod event;
pub mod fs;
mod header;
mod lock;
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
pub mod stats;
pub mod stream;
pub mod sync;
mod sys;
pub mod thread;
pub mod upcall;
mod waits;

/// A server and a client of one interface in one runtime (the crate
/// `ferry-macros` documents the generated items, the wire and the version
/// hash):
///
/// ```
/// use ferry::rpc::RuntimeDir;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, PartialEq, Serialize, Deserialize)]
/// pub struct NoName;
///
/// #[ferry::interface]
/// pub trait Greeter {
///     /// Adds two numbers.
///     fn add(&self, a: i64, b: i64) -> i64;
///     /// Greets someone by name.
///     fn greet(&self, name: String) -> Result<String, NoName>;
/// }
///
/// struct Impl;
///
/// impl Greeter for Impl {
///     fn add(&self, a: i64, b: i64) -> i64 {
///         a + b
///     }
///     fn greet(&self, name: String) -> Result<String, NoName> {
///         if name.is_empty() { Err(NoName) } else { Ok(format!("hello {name}")) }
///     }
/// }
///
/// let path = std::env::temp_dir().join(format!("ferry-iface-doc-{}", std::process::id()));
/// let uid = rustix::process::getuid().as_raw();
/// let p = path.clone();
/// ferry::run(move || {
///     let dir = RuntimeDir::open(&p, uid).unwrap();
///     let _server = GreeterServer::serve_in(&dir, "greeter", Impl).unwrap();
///     let greeter = GreeterClient::connect_in(&dir, "greeter").unwrap();
///     assert_eq!(greeter.add(2, 3).unwrap(), 5);
///     let opts = ferry::rpc::CallOptions::timeout(std::time::Duration::from_secs(10));
///     assert_eq!(greeter.with(&opts).greet("ferry".into()).unwrap(), Ok("hello ferry".into()));
///     assert_eq!(greeter.greet(String::new()).unwrap(), Err(NoName));
/// })
/// .unwrap();
/// std::fs::remove_dir_all(&path).unwrap();
/// ```
pub use ferry_macros::interface;

/// What a runtime does once it has started, in the rooms above `runtime`
/// (wired here so that `runtime` does not import them): registering with
/// a processor allocation daemon if `allocd` allows and one listens.
pub(crate) fn runtime_started(handle: &Handle, allocd: bool) {
    #[cfg(not(ferry_loom))]
    alloc::client::start(handle, allocd);
    #[cfg(ferry_loom)]
    let _ = (handle, allocd);
}
pub use runtime::{Builder, Handle, Runtime, run};
pub use sched::{SchedPolicy, UnknownPolicy};
pub use thread::{
    JoinHandle, Panic, Thread, ThreadId, alerted, current, park, sleep, spawn, yield_now,
};
pub use upcall::blocking;
pub use upcall::deadlock::Deadlock;
