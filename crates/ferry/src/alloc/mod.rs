//! Processor allocation between processes (004 §3): a daemon
//! (`ferry allocd`) owns the machine's cores and gives each registered
//! process a set of them; each process runs exactly as many processors as
//! it owns cores, pinned there.
//!
//! This room owns the shared page and its protocol (`page`, `protocol`,
//! `cores`), the daemon's end of registration ([`Registrar`]) and the
//! runtime's end (`client`: the follower thread). It must not hold
//! allocation policy (that is the daemon's, in `ferry-cli`), must not
//! change processors except through the runtime's `set_processors` and
//! `processor_on`, and must trust nothing in the page: each side clamps
//! what the other wrote. Without a daemon nothing here runs.
//!
//! A process and the daemon, in order:
//!
//! 1. at runtime start (unless [`Builder::allocd`](crate::Builder::allocd)
//!    is off or `FERRY_ALLOCD=off`), if `<runtime dir>/allocd.sock` exists,
//!    the runtime starts its follower, which binds to it (the `rpc`
//!    binding handshake: the daemon checks the kernel's credentials, same
//!    user only) and receives the page in a sealed memfd;
//! 2. the follower stores `max_processors` and `desired`, and points each
//!    processor's willing-to-yield word into the page (a processor writes
//!    1 before it parks, 0 when it wakes);
//! 3. the daemon recomputes the allocation (at each registration, exit,
//!    and every tick) and, for a process whose cores change, writes them
//!    as a new order and wakes the follower's futex on `order`;
//! 4. the follower sets its processors to the number of cores, pins
//!    processor `i` to the `i`-th core, and acknowledges;
//! 5. a process that does not acknowledge within the daemon's grace time,
//!    or whose page holds words that cannot mean anything, is fenced: its
//!    cores count as free for the others until it acknowledges again;
//! 6. a process that exits is seen by the daemon at once (its pidfd); a
//!    daemon that exits is seen by the follower (the socket's end of
//!    file): the process keeps its cores and registers again when a
//!    daemon answers, trying every [`REGISTER_RETRY`].
//!
//! `page.rs` tables every word of the page; `protocol.rs` the orderings of
//! the order and acknowledgement; `tests/loom_alloc.rs` checks them.

pub(crate) mod client;
mod cores;
mod page;
mod protocol;
mod serve;

/// The atomics `protocol` uses (loom's in its model).
mod atomic {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
}

pub use client::{FOLLOW_TICK, REGISTER_RETRY};
pub use cores::{BadCoreList, CORE_WORDS, CoreSet, MAX_CORES};
pub use page::{
    Checked, MAGIC, MAX_WILLING, Malformed, OrderInfo, PAGE_LEN, Page, RuntimeWords, VERSION,
};
pub use protocol::{Ack, check_ack};
pub use serve::{HANDSHAKE_TIMEOUT, PROTOCOL_HASH, Registrar, Registration, SOCKET_NAME};
