//! Calls into other processes over pair-wise shared memory (URPC, seed
//! 001): this room owns everything between two processes that call each
//! other, from finding the peer to the memory they share and the calls
//! over it. Nothing below it imports it.
//!
//! A server serves a named interface at a version hash ([`Server`]); a
//! client binds to it by name ([`Client`]) and calls: an operation number
//! and argument bytes in, result bytes out ([`Client::call`]), or typed
//! methods through `#[ferry::interface]`. Each client/server pair shares
//! one channel in a sealed memfd; after binding, no system call is on the
//! call path unless a side sleeps.
//!
//! ```
//! use ferry::rpc::{Client, Fault, RuntimeDir, Server};
//!
//! let path = std::env::temp_dir().join(format!("ferry-rpc-doc-{}", std::process::id()));
//! let dir = RuntimeDir::open(&path, rustix::process::getuid().as_raw()).unwrap();
//! ferry::run(move || {
//!     let double = |op: u32, args: &[u8]| -> Result<Vec<u8>, Fault> {
//!         match op {
//!             0 => Ok(args.iter().map(|b| b.wrapping_mul(2)).collect()),
//!             _ => Err(Fault::UnknownOp),
//!         }
//!     };
//!     let _server = Server::serve_in(&dir, "double", 1, double).unwrap();
//!     let client = Client::connect_in(&dir, "double", 1).unwrap();
//!     assert_eq!(client.call(0, &[1, 2, 3]).unwrap(), [2, 4, 6]);
//! })
//! .unwrap();
//! std::fs::remove_dir_all(&path).unwrap();
//! ```
//!
//! # The rooms, bottom to top
//!
//! | file | owns |
//! |------|------|
//! | `error.rs` | [`Error`]: every way binding or calling fails |
//! | `dir.rs` | the per-user runtime directory ([`RuntimeDir`]), checked 0700 and ours |
//! | `layout.rs`, `region.rs` | the channel's memory: header (checked once at attach), MP-SC call and reply queues, doorbells, liveness words, slots, extents |
//! | `slots.rs` | a slot's protocol with generations: a late or forged reply never completes the wrong call |
//! | `call.rs` | what both ends share: [`CallOptions`], [`Fault`], [`Handler`], [`ChannelConfig`] |
//! | `bind.rs` | binding: the Unix socket, `SO_PEERCRED` and [`Policy`], the sealed memfd sent with `SCM_RIGHTS` ([`Listener`], [`connect_raw`], [`Binding`]) |
//! | `memory.rs` | one side's hold on a channel: the binding and the checked view |
//! | `watch.rs` | liveness: one kernel thread waits on every peer's pidfd and binding socket |
//! | `frame_word.rs`, `logical.rs` | the logical thread: the context every call carries (identity, priority, deadline, run time, alert, chain: [`chain`]), and the frame through which an alert finds the call a thread makes |
//! | `waiter.rs` | a client slot's waiter word: who moves a call from state to state |
//! | `client.rs`, `connection.rs` | the caller's end: the calling path and its waiters ([`Client`], [`Call`], aborts) |
//! | `chan.rs` | the server's end of a channel: finding calls (an event source of its runtime, `event::polled`), answering, signals |
//! | `activation/` | migrating calls: a server's pool of activations, its keeper (growth, decay, low water, alerts) |
//! | `pool.rs` | the static model: a server's pool of service threads waiting on a line |
//! | `server.rs` | [`Server`], [`ServerBuilder`], [`ServeMode`]: accepting, and the books of bound clients |
//!
//! `layout` and `region` name each other, one concern split for size:
//! `layout` computes and checks the channel's areas and its `init`/`attach`
//! take a `region`; a `region`'s view hands out those areas.
//!
//! # How a call travels
//!
//! The caller writes the call's context (its logical thread: see
//! `logical.rs`) and its arguments into a free slot (inline up to the
//! slot's size, else in the slot's extent), pushes the slot's index on the
//! call queue, rings the server's doorbell only if the server's processors
//! all sleep, and parks; its processor runs other threads. With nothing else
//! to run it first polls for the reply itself for the runtime's adaptive
//! spin budget. The server's processors find the call as they find any
//! event (at a switch, spinning idle, or woken by the doorbell) and hand it
//! on as the server chose ([`ServeMode`]):
//!
//! - **Migrating** (000): to an unoccupied activation, set to the caller's
//!   priority and run next; it copies the call out once, runs the
//!   [`Handler`] as the caller's logical thread ([`chain`], alerts blocked
//!   until it allows them), writes the answer with the run time it spent
//!   into the slot and pushes the index back; unoccupied again with nothing
//!   else to run, it takes its channel's next call itself.
//! - **Static** (Mach): onto the pool's line, where a service thread takes
//!   it in arrival order at its own priority, serves it, and goes back to
//!   the line.
//!
//! The client's processors find the reply the same way and wake the
//! caller, which is charged the run time the server spent (never more than
//! the call took).
//!
//! # Alerts and aborts
//!
//! [`Thread::alert`](crate::Thread::alert) on a thread in a call writes an
//! alert into its slot's signal word and bumps the channel's signal count;
//! the server's keeper alerts the activation serving that call, which
//! passes it on to the call it makes in turn, down the chain. An abort
//! ([`Call::abort`], a deadline passing, the caller terminated, the client
//! process dying) alerts the same way, withdraws the call at once (the
//! caller returns [`Error::Aborted`] or [`Error::DeadlineExceeded`]), and
//! discards the late reply: 000's split of a chain.
//!
//! # Failure
//!
//! Nothing in shared memory is trusted: indices are checked and masked,
//! lengths checked, bytes copied out before they are looked at, and every
//! reply checked against the caller's own record of its call. A peer can
//! deny service; it cannot make this side crash, hang (with a deadline) or
//! touch memory out of bounds (`tests/rpc_hostile.rs`, `rpc_scribble.rs`).
//! A peer that dies or hangs up is seen at once through its pidfd or its
//! binding socket: every pending call returns [`Error::PeerDied`], the
//! server drops the channel, and the memfd, mapping and fds go
//! (`tests/rpc_process.rs`). A call with a deadline returns
//! [`Error::DeadlineExceeded`] after it and its slot is reclaimed safely. A
//! call without one waits as long as the peer lives. A context that does
//! not check out is answered [`Error::BadArgs`]; the run time a server
//! claims is charged only up to the call's own duration.

mod activation;
pub(crate) mod bind;
mod call;
mod chan;
mod client;
mod connection;
mod dir;
mod error;
mod frame_word;
mod identity_cost;
mod logical;
// The helpers of the code `#[ferry::interface]` generates.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
// Parts of these are used only by the channel tests, which include the
// files by path (`tests/rpc_support`).
#[allow(dead_code)]
pub(crate) mod layout;
mod memory;
mod pool;
#[allow(dead_code)]
pub(crate) mod region;
pub mod remote;
mod server;
#[allow(dead_code)]
pub(crate) mod slots;
mod waiter;
pub(crate) mod watch;

/// The byte copy `slots` moves long payloads with (a name here, so that
/// the channel tests that include `slots.rs` by path can supply it too).
use crate::arch::shared_copy;

/// The atomics `waiter` and `frame_word` use (loom's in their models).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
}

pub use activation::{Activation, ActivationStats, OnPoolLow, PoolLow, WhenFull};
pub use bind::{
    Accepted, Binding, Credentials, DEFAULT_CHANNEL_LEN, DEFAULT_HANDSHAKE_TIMEOUT, Listener,
    MAX_CHANNEL_LEN, Mapping, Policy, connect_raw, connect_raw_in, connect_raw_with,
};
pub use call::{CallOptions, ChannelConfig, Fault, Handler, MAX_CALL_LEN};
pub use connection::{AbortHandle, Call, Client};
pub use dir::{MAX_NAME_LEN, RuntimeDir, check_name};
pub use error::{Error, Result};
/// What carrying the logical thread costs a call, timed alone (for
/// `ferry-bench migrating`; see `rpc/identity_cost.rs`).
#[doc(hidden)]
pub use identity_cost::identity_steps;
pub use logical::{Chain, LogicalId, MAX_CHAIN_DEPTH, chain};
pub use server::{PathStats, ServeMode, Server, ServerBuilder};
