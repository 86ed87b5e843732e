//! One cross-process connection, as this process holds it: the binding
//! (its memfd mapping and its socket), the two shared rings laid over the
//! mapping, the counts of this side's handles, and what this side knows
//! of the peer (gone, or caught breaking the protocol).
//!
//! This room owns the connection's life: opening it over a binding,
//! closing each direction when its last handle goes, hearing of the
//! peer's death from rpc's watcher, poisoning it on a bad value, and the
//! hang-up when the last handle is gone. It must not move bytes (the
//! rings do, for the handles, `ends.rs`).
//!
//! | local word | written by | states |
//! |------------|------------|--------|
//! | `writers`, `readers` | handles: `+1` on clone (Relaxed), `-1` on drop (AcqRel) | live handles of each kind; the last one gone closes its direction (`wclosed` / `rclosed` in shared memory, then a ring) |
//! | `dead` | rpc's watcher (`peer_gone`), Release | false, then true for good: the peer process exited or hung up |
//! | `poison` | the first handle to catch a bad value | empty, then the error's message for good |

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Arc, OnceLock};

use super::atomic::AtomicUsize;
use super::layout;
use super::ring::{Bad, In, Out};
use super::wait;
use super::{Bytes, Padded};
use crate::rpc::bind::Binding;
use crate::rpc::region::ChannelRegion;
use crate::rpc::watch::{self, Watched};
use crate::sync::SpinLock;

/// Which end of the binding this side is: the listener writes ring 0
/// and reads ring 1, the connector the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Listener,
    Connector,
}

/// One connection. The rings borrow the binding's mapping: they are
/// declared before it and dropped first, and never handed out.
pub(crate) struct Conn {
    pub(super) out: Padded<Out<'static>>,
    pub(super) inn: Padded<In<'static>>,
    /// Held by shared writers for one copy.
    pub(super) wlock: Padded<SpinLock<()>>,
    /// Held by shared readers for one copy.
    pub(super) rlock: Padded<SpinLock<()>>,
    writers: AtomicUsize,
    readers: AtomicUsize,
    dead: AtomicBool,
    poison: OnceLock<String>,
    watch: OnceLock<watch::Token>,
    /// The size of an atomic write: `min(ATOMIC_WRITE, capacity)`.
    pub(super) atomic: usize,
    name: Box<str>,
    binding: Binding,
}

impl Conn {
    /// Opens the connection over a finished `binding`, as `role`, and asks
    /// rpc's watcher to tell it of the peer's death. The listener laid the
    /// memory out (`layout::init`) before sending it; the connector checks
    /// the header here.
    pub(super) fn open(binding: Binding, role: Role) -> io::Result<Arc<Conn>> {
        let m = binding.mapping();
        // SAFETY: the mapping stays mapped, readable and writable as long
        // as `binding` lives, which the `Conn` owns; everything built from
        // these words is in the fields declared before it (dropped first)
        // and never handed out. The words are only accessed atomically.
        let region = unsafe { ChannelRegion::<'static>::from_raw(m.as_ptr(), m.len()) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        let words = region.words();
        let name: Box<str> = binding.name().into();
        let cap = layout::check(words, m.len()).map_err(|why| {
            io::Error::new(io::ErrorKind::InvalidData, format!("stream {name}: {why}"))
        })?;
        let (o, i) = match role {
            Role::Listener => (0, 1),
            Role::Connector => (1, 0),
        };
        let bytes = |ring: usize| {
            let at = layout::DATA + ring * cap;
            // SAFETY: `at + cap <= DATA + 2 * cap`, the mapping's length
            // (checked above), and the mapping outlives the `Bytes` as the
            // words do; in this process only the end's holder touches
            // each ring's bytes (ring.rs).
            unsafe { Bytes::borrowed(NonNull::new(m.as_ptr().add(at)).expect("mapped"), cap) }
        };
        let conn = Arc::new(Conn {
            out: Padded(Out::new(layout::ring_words(words, o), bytes(o))),
            inn: Padded(In::new(layout::ring_words(words, i), bytes(i))),
            wlock: Padded::default(),
            rlock: Padded::default(),
            writers: AtomicUsize::new(1),
            readers: AtomicUsize::new(1),
            dead: AtomicBool::new(false),
            poison: OnceLock::new(),
            watch: OnceLock::new(),
            atomic: super::super::ATOMIC_WRITE.min(cap),
            name,
            binding,
        });
        let token = watch::watch(conn.clone(), conn.binding.peer_pid(), conn.binding.socket())
            .map_err(|e| conn.rpc_error(e))?;
        let _ = conn.watch.set(token);
        Ok(conn)
    }

    /// The name the connection was made on.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// An rpc error while opening, as an `io::Error` naming the stream.
    fn rpc_error(&self, e: crate::rpc::Error) -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("stream {}: {e}", self.name),
        )
    }

    /// Whether the peer process is gone.
    #[inline(always)]
    pub(super) fn dead(&self) -> bool {
        self.dead.load(Acquire)
    }

    /// The error of a poisoned connection, if it is.
    #[inline(always)]
    pub(super) fn poisoned(&self) -> io::Result<()> {
        match self.poison.get() {
            None => Ok(()),
            Some(why) => Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())),
        }
    }

    /// The peer broke the protocol: the connection is poisoned for good,
    /// this side's sleepers are woken to see it, and the error returned.
    #[cold]
    pub(super) fn broken(&self, bad: Bad) -> io::Error {
        let message = format!("stream {}: {bad}; the connection is unusable", self.name);
        // Two handles may catch the peer at once: the first sets the cell
        // and is not switched out while the other waits for it.
        let _ = crate::upcall::without_preemption(|| self.poison.set(message));
        self.wake_own();
        self.poisoned().expect_err("just poisoned")
    }

    /// Wakes every sleeper of this side.
    fn wake_own(&self) {
        wait::wake(&self.inn.words().rbell);
        wait::wake(&self.out.words().wbell);
    }

    /// Counts one more writer handle.
    pub(super) fn add_writer(&self) {
        self.writers.fetch_add(1, Relaxed);
    }

    /// Counts one more reader handle.
    pub(super) fn add_reader(&self) {
        self.readers.fetch_add(1, Relaxed);
    }

    /// A writer handle went; the last one closes the outgoing ring (the
    /// peer reads what is left, then end-of-file).
    pub(super) fn drop_writer(&self) {
        if self.writers.fetch_sub(1, AcqRel) == 1 {
            self.out.close();
            wait::ring(&self.out.words().rbell);
        }
    }

    /// A reader handle went; the last one closes the incoming ring (the
    /// peer's writes fail with `BrokenPipe`).
    pub(super) fn drop_reader(&self) {
        if self.readers.fetch_sub(1, AcqRel) == 1 {
            self.inn.close();
            wait::ring(&self.inn.words().wbell);
        }
    }
}

impl Watched for Conn {
    fn peer_gone(&self) {
        self.dead.store(true, Release);
        self.wake_own();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(token) = self.watch.get() {
            watch::unwatch(token);
        }
        // The peer's watcher sees the hang-up at once; the memory stays
        // mapped in the peer for the bytes it has still to read.
        self.binding.hang_up();
    }
}
