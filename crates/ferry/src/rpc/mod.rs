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
//! | `pool.rs` | a server's pool of ferry threads |
//! | `waiter.rs` | a client slot's waiter word: who moves a call from state to state |
//! | `client.rs`, `server.rs` | the two ends: calls, waiters, answering, and each channel as an event source of its runtime (`event::polled`) |
//!
//! `layout` and `region` name each other, one concern split for size:
//! `layout` computes and checks the channel's areas and its `init`/`attach`
//! take a `region`; a `region`'s view hands out those areas.
//!
//! # How a call travels
//!
//! The caller writes its arguments into a free slot (inline up to the
//! slot's size, else in the slot's extent), pushes the slot's index on the
//! call queue, rings the server's doorbell only if the server's processors
//! all sleep, and parks; its processor runs other threads. With nothing else
//! to run it first polls for the reply itself for the runtime's adaptive
//! spin budget. The server's processors find the call as they find any
//! event (at a switch, spinning idle, or woken by the doorbell) and hand it
//! to a pool thread, which copies the arguments out, runs the [`Handler`],
//! writes the answer into the slot and pushes the index back; a pool thread
//! with nothing else to run polls its channel for the next call before it
//! parks. The client's processors find the reply the same way and wake the
//! caller.
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
//! [`Error::TimedOut`] after it and its slot is reclaimed safely. A call
//! without one waits as long as the peer lives.

mod activation;
mod bind;
mod call;
mod chan;
mod client;
mod connection;
mod dir;
mod error;
mod frame_word;
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
mod server;
#[allow(dead_code)]
pub(crate) mod slots;
mod waiter;
mod watch;

/// The atomics `waiter` and `frame_word` use (loom's in their models).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
}

pub use activation::{ActivationStats, OnPoolLow, PoolLow, WhenFull};
pub use bind::{
    Accepted, Binding, Credentials, DEFAULT_CHANNEL_LEN, DEFAULT_HANDSHAKE_TIMEOUT, Listener,
    MAX_CHANNEL_LEN, Mapping, Policy, connect_raw, connect_raw_in, connect_raw_with,
};
pub use call::{CallOptions, ChannelConfig, Fault, Handler, MAX_CALL_LEN};
pub use connection::{AbortHandle, Call, Client};
pub use dir::{MAX_NAME_LEN, RuntimeDir, check_name};
pub use error::{Error, Result};
pub use logical::{Chain, LogicalId, MAX_CHAIN_DEPTH, chain};
pub use server::{PathStats, ServeMode, Server, ServerBuilder};
