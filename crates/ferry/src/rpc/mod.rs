//! Calls into other processes over pair-wise shared memory (URPC, seed
//! 001): this room owns everything between two processes that call each
//! other, from finding the peer to the memory they share. Nothing below it
//! imports it.
//!
//! What exists is binding: a server serves a named interface at a version
//! hash in the per-user runtime directory ([`RuntimeDir`], [`Listener`]);
//! a client binds to it by name ([`connect_raw`]); the server checks the
//! client's credentials ([`Policy`]), the name and the version hash, and
//! both come away with a [`Binding`]: one sealed memfd mapped by both
//! ([`Mapping`]), the peer's credentials, and the socket, which carries
//! nothing after binding. Every failure is an [`Error`].
//!
//! The channel that binding's memory will carry is laid out too: its header,
//! call and reply queues, doorbell and liveness words and slot arena
//! (`layout`, `region`), checked once at attach, and the slot arena's
//! call/reply protocol with generations (`slots`), both hostile-peer safe
//! (`tests/rpc_channel.rs`, `tests/rpc_hostile.rs`). Calls over it, the
//! event source that polls it and the doorbells are not built yet.
//!
//! `layout` and `region` name each other, one concern split for size:
//! `layout` computes and checks the channel's areas and its `init`/`attach`
//! take a `region`; a `region`'s view hands out those areas.
//!
//! ```
//! use ferry::rpc::{self, Listener, Policy, RuntimeDir};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let path = std::env::temp_dir().join(format!("ferry-rpc-doc-{}", std::process::id()));
//! let dir = RuntimeDir::open(&path, rustix::process::getuid().as_raw()).unwrap();
//! let listener = Listener::bind_in(&dir, "calc", 0x1234).unwrap();
//! std::thread::scope(|s| {
//!     let server = s.spawn(|| listener.accept(&Policy::SameUser).unwrap());
//!     let client = rpc::connect_raw_in(&dir, "calc", 0x1234).unwrap();
//!     let server = server.join().unwrap().binding;
//!     // SAFETY: both mappings are at least 8 bytes long and 8-aligned.
//!     let (a, b) = unsafe {
//!         (
//!             &*(server.mapping().as_ptr() as *const AtomicU64),
//!             &*(client.mapping().as_ptr() as *const AtomicU64),
//!         )
//!     };
//!     a.store(42, Ordering::Release);
//!     assert_eq!(b.load(Ordering::Acquire), 42);
//! });
//! drop(listener);
//! std::fs::remove_dir(&path).unwrap();
//! ```

mod bind;
mod call;
mod client;
mod dir;
mod error;
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
mod watch;

pub use bind::{
    Accepted, Binding, Credentials, DEFAULT_CHANNEL_LEN, DEFAULT_HANDSHAKE_TIMEOUT, Listener,
    MAX_CHANNEL_LEN, Mapping, Policy, connect_raw, connect_raw_in, connect_raw_with,
};
pub use call::{CallOptions, ChannelConfig, Fault, Handler, MAX_CALL_LEN};
pub use client::Client;
pub use dir::{MAX_NAME_LEN, RuntimeDir, check_name};
pub use error::{Error, Result};
pub use server::{Server, ServerBuilder};
