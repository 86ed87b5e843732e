//! Migrating calls (000 §4–6): a server's pool of activations. An
//! activation ([`Passive`] here; [`Activation`] is what code running on
//! one sees of it) is a passive context — a ferry thread with its guarded
//! stack, parked at its entry — that an incoming call occupies: the poller
//! that finds the call gives it to an unoccupied activation, sets the
//! activation to the caller's priority and wakes it on the poller's own
//! processor as a call (`Ready::Call`). With nothing else ready there,
//! that processor switches straight from the poll into the activation (no
//! run queue, no pick: see `processor`'s docs); otherwise the policy
//! places it among the processor's other threads by the caller's priority:
//! a `Normal` call's activation takes the next-to-run slot, a `High` or
//! `Low` one the back of its level's ring (no line of calls, no service
//! thread that picks one). The activation
//! copies the call out of its slot once, runs the handler as the caller's
//! logical thread (its chain, priority, deadline and alerts), returns the
//! run time it spent with the reply and goes back to the pool.
//!
//! This module owns the pool: which activations are unoccupied, growth,
//! decay, the wait line when the pool is at its maximum, and delivering a
//! client's signals (alerts, aborts) to the activations serving its calls.
//! It must not touch a channel's queues (`chan` does) nor decide when a
//! processor runs the woken activation (the scheduler does). What one
//! activation does, from its making to each call it serves, is in
//! `life`; the thread that grows, shrinks and signals the pool in
//! `keeper`.
//!
//! # State (under `state`'s spinlock)
//!
//! | field | written by | meaning |
//! |-------|------------|---------|
//! | `idle` | an activation pushes itself before parking; a poller pops one and gives it a call (in its `mail`, under this lock) | unoccupied activations, most recently used last |
//! | `waiting` | a poller that found none idle; an activation or the keeper pops | calls waiting for an activation, highest priority first, then oldest |
//! | `reentrant` | a poller, for a call whose chain already visits this process | calls that get an activation beyond the maximum (the keeper makes one for each) |
//! | `live` | the keeper (+1 per activation made), an activation that retires (−1) | activations alive |
//! | `signalled` | a poller that saw a client's signal count move | channels whose signals the keeper delivers |
//!
//! A chain that re-enters a process (A → B → A → B) holds an activation in
//! every visit; were its next visit made to wait for one, a pool whose
//! activations all belong to such chains would never free one. So a
//! re-entrant call never waits: it gets an activation of its own, beyond the
//! maximum if need be (at most [`super::MAX_CHAIN_DEPTH`] per chain), which
//! retires once it is done.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod keeper;
mod life;

use super::call::Handler;
use super::chan::{Dispatch, ServerChan};
use super::error::Result;
use super::logical;
use crate::runtime::Handle;
use crate::sched::Ready;
use crate::sync::SpinLock;
use crate::thread::{Priority, Thread};

/// What a server does with a call when its pool is at its maximum and no
/// activation is unoccupied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// The call waits in a line of at most this many calls (highest
    /// priority first); beyond it, the call fails with
    /// [`Error::Busy`](super::Error::Busy).
    Queue(usize),
    /// The call fails at once with [`Error::Busy`](super::Error::Busy).
    Busy,
}

/// What a pool tells its server when it runs low (000 §6.2): before the
/// last unoccupied activation is taken. See
/// [`ServerBuilder::on_pool_low`](super::ServerBuilder::on_pool_low).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLow {
    /// Activations alive.
    pub live: usize,
    /// Of those, unoccupied.
    pub idle: usize,
    /// The pool's maximum.
    pub max: usize,
}

/// A server's answer to [`PoolLow`]: how many activations to add now (the
/// pool never grows past its maximum this way).
pub type OnPoolLow = Arc<dyn Fn(PoolLow) -> usize + Send + Sync>;

/// How a server's pool of activations is sized.
#[derive(Clone)]
pub(crate) struct PoolConfig {
    pub(crate) min: usize,
    pub(crate) max: usize,
    pub(crate) when_full: WhenFull,
    pub(crate) on_low: Option<OnPoolLow>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            min: 2,
            max: super::pool::DEFAULT_MAX_THREADS,
            when_full: WhenFull::Queue(DEFAULT_QUEUE),
            on_low: None,
        }
    }
}

/// The default wait line when the pool is full.
pub(crate) const DEFAULT_QUEUE: usize = 1024;
/// How long unoccupied activations above the minimum are kept: each period
/// with none taken, half of them retire.
const DECAY_PERIOD: Duration = Duration::from_secs(1);

/// A call for an activation: slot `index` of `chan`, seen at `seen`.
struct Job {
    chan: Arc<ServerChan>,
    index: u32,
    seen: u64,
    priority: Priority,
}

/// A waiting call, ordered highest priority first, then oldest.
struct Waiting {
    level: usize,
    seq: u64,
    job: Job,
}

impl PartialEq for Waiting {
    fn eq(&self, o: &Self) -> bool {
        (self.level, self.seq) == (o.level, o.seq)
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Waiting {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // A max-heap: the lowest level (highest priority), then the lowest
        // sequence number, is the greatest.
        (o.level, o.seq).cmp(&(self.level, self.seq))
    }
}

/// Which call an activation serves now: (channel address, slot index,
/// generation), for matching a client's signals exactly, and where the
/// chain it serves lies (for the stats page).
type Serving = Option<(usize, u32, u32, ChainAt)>;

/// The chain an activation serves, in its serving frame on its own stack:
/// named by its record only while the frame lives (the activation clears
/// the record, under its lock, before the frame goes), and read only under
/// that lock. The address, not a copy: the chain is 128 bytes, and copying
/// it into the record cost about 5 ns of every call.
#[derive(Debug, Clone, Copy)]
struct ChainAt(*const logical::Incoming);

// SAFETY: a `ChainAt` is an address read only under its record's lock,
// while the frame it names lives (see the type's docs); the `Incoming` is
// plain data.
unsafe impl Send for ChainAt {}

/// The activation the current code runs on (000's activation: a server's
/// passive context — a ferry thread and its guarded stack, from the
/// server's pool — occupied by an incoming migrating call): whom it serves.
/// See [`Activation::current`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    chain: super::Chain,
    client: super::Credentials,
}

impl Activation {
    /// The activation the current code runs on, if it serves a migrating
    /// call ([`ServeMode::Migrating`](super::ServeMode::Migrating)); `None`
    /// on any other thread.
    pub fn current() -> Option<Activation> {
        let (chain, client) = logical::current_incoming()?;
        Some(Activation { chain, client })
    }

    /// The chain of the logical thread it serves (this process last).
    pub fn chain(&self) -> &super::Chain {
        &self.chain
    }

    /// The client process whose call it serves, as the kernel reported it
    /// at binding.
    pub fn client(&self) -> super::Credentials {
        self.client
    }
}

/// A passive server context: a ferry thread that serves one call at a time
/// for a logical thread of another process (000's activation).
pub(crate) struct Passive {
    thread: OnceLock<Thread>,
    /// The call given to it while it was unoccupied (set under the pool's
    /// state lock).
    mail: SpinLock<Option<Job>>,
    /// The call it serves; alert bits are reset and set under this lock.
    serving: SpinLock<Serving>,
    /// Set under the pool's state lock: in `idle`.
    idle: std::sync::atomic::AtomicBool,
    /// Made beyond the maximum for a re-entrant call: retires when done.
    extra: bool,
    /// Retired by decay (set under the pool's state lock): leaves at its
    /// next look.
    retired: std::sync::atomic::AtomicBool,
}

struct State {
    idle: Vec<Arc<Passive>>,
    all: Vec<Arc<Passive>>,
    waiting: BinaryHeap<Waiting>,
    reentrant: VecDeque<Job>,
    signalled: Vec<(Arc<ServerChan>, bool)>,
    live: usize,
    seq: u64,
    /// Activations the server asked for (on_pool_low) or calls need.
    grow: usize,
    low_told: bool,
    taken_since_decay: bool,
    stopping: bool,
}

/// Counters of a pool, for [`Server::activations`](super::Server::activations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActivationStats {
    /// Activations alive.
    pub live: usize,
    /// Of those, unoccupied.
    pub idle: usize,
    /// Calls waiting for an activation.
    pub waiting: usize,
    /// Calls refused with `Busy` so far.
    pub refused: u64,
    /// Activations made so far.
    pub made: u64,
    /// Activations retired so far (decay, or done beyond the maximum).
    pub retired: u64,
}

/// A server's pool of activations.
pub(crate) struct Activations {
    state: SpinLock<State>,
    handler: Arc<dyn Handler>,
    config: PoolConfig,
    runtime: Handle,
    keeper: OnceLock<Thread>,
    refused: AtomicU64,
    made: AtomicU64,
    retired: AtomicU64,
}

impl Activations {
    /// Starts a pool in `runtime` serving with `handler`: its keeper and
    /// `config.min` activations.
    pub(crate) fn start(
        runtime: &Handle,
        handler: Arc<dyn Handler>,
        config: PoolConfig,
    ) -> Result<Arc<Activations>> {
        logical::install_hooks();
        let pool = Arc::new(Activations {
            state: SpinLock::new(State {
                idle: Vec::new(),
                all: Vec::new(),
                waiting: BinaryHeap::new(),
                reentrant: VecDeque::new(),
                signalled: Vec::new(),
                live: 0,
                seq: 0,
                grow: 0,
                low_told: false,
                taken_since_decay: false,
                stopping: false,
            }),
            handler,
            config,
            runtime: runtime.clone(),
            keeper: OnceLock::new(),
            refused: AtomicU64::new(0),
            made: AtomicU64::new(0),
            retired: AtomicU64::new(0),
        });
        let p = pool.clone();
        let keeper = runtime.spawn(move || p.keep())?;
        let _ = pool.keeper.set(keeper.thread());
        for _ in 0..pool.config.min.min(pool.config.max) {
            pool.make(None, false)?;
        }
        Ok(pool)
    }

    /// The logical threads its activations serve now, into `out` (up to
    /// the page's bound). Called by the monitor for the stats page: it
    /// never waits for a lock a poller or an activation holds (a busy one
    /// leaves that activation, or the whole pool, out of this write).
    pub(crate) fn in_calls(&self, out: &mut Vec<crate::stats::LogicalThread>) {
        let Some(all) = self.state.try_lock().map(|s| s.all.clone()) else {
            return;
        };
        for a in all {
            if out.len() >= crate::stats::MAX_LOGICAL {
                break;
            }
            let Some(incoming) = a.serving.try_lock().and_then(|s| {
                // SAFETY: the record names a live frame while it is set,
                // and we hold its lock (`ChainAt`'s docs).
                s.and_then(|(_, _, _, at)| (!at.0.is_null()).then(|| unsafe { *at.0 }))
            }) else {
                continue;
            };
            out.push(crate::stats::LogicalThread {
                origin: incoming.id.pid,
                thread: incoming.id.thread,
                priority: incoming.priority,
                cpu_ns: u64::try_from(incoming.cpu.as_nanos()).unwrap_or(u64::MAX),
                chain: incoming.hops().to_vec(),
            });
        }
    }

    /// Hands the call in slot `index` of `chan` to an activation (from a
    /// poller, inside a processor's scheduling: never blocks, never
    /// spawns).
    fn give(&self, chan: &Arc<ServerChan>, index: u32, seen: u64) {
        let first = chan.slots.peek_word(index, 0).unwrap_or(0);
        let priority = logical::peek_priority(first);
        let job = Job {
            chan: chan.clone(),
            index,
            seen,
            priority,
        };
        let mut s = self.state.lock();
        if s.stopping {
            return;
        }
        s.taken_since_decay = true;
        if let Some(a) = s.idle.pop() {
            a.idle.store(false, Relaxed);
            *a.mail.lock() = Some(job);
            let low = s.idle.is_empty() && !s.low_told && s.live < self.config.max;
            if low {
                s.low_told = true;
            }
            drop(s);
            if let Some(t) = a.thread.get() {
                t.set_priority(priority);
                // From a poll with nothing else ready, the processor
                // switches straight to it.
                t.unpark_as(Ready::Call);
            }
            if low {
                self.wake_keeper();
            }
            return;
        }
        if reenters(chan, index) {
            s.reentrant.push_back(job);
            drop(s);
            self.wake_keeper();
            return;
        }
        let room = match self.config.when_full {
            WhenFull::Queue(n) => s.waiting.len() < n,
            WhenFull::Busy => false,
        };
        if s.live + s.grow < self.config.max {
            s.grow += 1;
        } else if !room {
            drop(s);
            self.refused.fetch_add(1, Relaxed);
            chan.refuse_busy(index);
            return;
        }
        s.seq += 1;
        let seq = s.seq;
        s.waiting.push(Waiting {
            level: priority.level(),
            seq,
            job,
        });
        let grow = s.grow > 0;
        drop(s);
        if grow {
            self.wake_keeper();
        }
    }

    /// Stops the pool: waiting calls are dropped (their channels close),
    /// activations leave after their current call.
    pub(crate) fn stop(&self) {
        let (idle, waiting, reentrant) = {
            let mut s = self.state.lock();
            s.stopping = true;
            (
                std::mem::take(&mut s.idle),
                std::mem::take(&mut s.waiting),
                std::mem::take(&mut s.reentrant),
            )
        };
        drop((waiting, reentrant));
        for a in idle {
            if let Some(t) = a.thread.get() {
                t.unpark();
            }
        }
        self.wake_keeper();
    }

    /// The pool's counters now.
    pub(crate) fn stats(&self) -> ActivationStats {
        let s = self.state.lock();
        ActivationStats {
            live: s.live,
            idle: s.idle.len(),
            waiting: s.waiting.len() + s.reentrant.len(),
            refused: self.refused.load(Relaxed),
            made: self.made.load(Relaxed),
            retired: self.retired.load(Relaxed),
        }
    }

    fn wake_keeper(&self) {
        if let Some(k) = self.keeper.get() {
            k.unpark();
        }
    }
}

impl Dispatch for Activations {
    fn submit(&self, chan: &Arc<ServerChan>, index: u32, seen: u64) {
        self.give(chan, index, seen);
    }

    /// The keeper alerts the activations serving the signalled calls.
    fn signalled(&self, chan: Arc<ServerChan>) {
        self.state.lock().signalled.push((chan, false));
        self.wake_keeper();
    }

    /// Every activation serving one of the dead client's calls is alerted.
    fn client_died(&self, chan: Arc<ServerChan>) {
        self.state.lock().signalled.push((chan, true));
        self.wake_keeper();
    }
}

/// Whether the call in slot `index` of `chan` comes from a chain that
/// already visits this process as a server (holds an activation here): a
/// hop after the origin names this process. (The origin's own thread holds
/// no activation, so a call back to it is no re-entry.)
fn reenters(chan: &ServerChan, index: u32) -> bool {
    let Some(first) = chan.slots.peek_word(index, 0) else {
        return false;
    };
    if first >> 48 != logical::MAGIC {
        return false;
    }
    let hops = ((first >> 32) & 0xffff) as usize;
    let me = u64::from(crate::sys::process_identity().0);
    (1..hops.min(super::MAX_CHAIN_DEPTH)).any(|i| chan.slots.peek_word(index, 6 + i) == Some(me))
}
