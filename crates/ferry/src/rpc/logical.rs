//! The logical thread (000 §4): what every call carries so that it is one
//! flow of control across processes — its identity, priority, deadline,
//! run time so far, alert state and chain — encoded at the head of the
//! call's payload, and the frame through which a thread in a call is found
//! by an alert.
//!
//! This module owns the context's wire format (encode; decode with every
//! field checked, since a peer wrote it), the [`Chain`] a piece of code runs
//! in ([`chain`]) and the frame protocol on the thread header's `rpc` word.
//! It must not touch a channel (a frame names its outgoing call through
//! [`Outgoing`], which the client implements).
//!
//! # The context (little words of 8 bytes, native order)
//!
//! | word | content |
//! |------|---------|
//! | 0 | [`MAGIC`] in bits 48..64, hop count in 32..48, priority level in 8..16, flags in 0..8 ([`FLAG_ALERTED`]) |
//! | 1 | origin pid |
//! | 2 | origin process start time (clock ticks since boot) |
//! | 3 | origin thread id |
//! | 4 | deadline, `CLOCK_MONOTONIC` ns (0: none) |
//! | 5 | run time so far, ns |
//! | 6.. | one word per hop: the pid of each process the thread visits, the origin first |
//!
//! # The frame word (`Header::rpc`)
//!
//! | value | meaning | who changes it |
//! |-------|---------|----------------|
//! | 0 | the thread is in no call and serves none | the thread itself stores a frame's address |
//! | `f` | the thread's [`Frame`] at `f` (on its own stack) | the thread itself clears it (compare-exchange `f` → 0) |
//! | `f \| BUSY` | someone holds the frame: the thread changing its outgoing call, or an alerter reading it | the holder puts `f` back |
//!
//! The thread never leaves a frame (its stack frame returns) while the word
//! names it: it clears the word first, waiting out a holder. A holder holds
//! for a few loads and stores, without preemption.

use std::cell::Cell;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Acquire;
use std::time::{Duration, Instant};

use super::bind::Credentials;
use super::error::{Error, Result};
use super::frame_word::{self, BUSY};
use crate::header::Thread;
use crate::thread::{self, Priority};

/// The deepest chain: processes one logical thread may visit at once (the
/// origin included). A call that would go deeper fails with
/// [`Error::ChainTooDeep`].
pub const MAX_CHAIN_DEPTH: usize = 16;
/// The context's tag, in the top 16 bits of its first word.
pub(crate) const MAGIC: u64 = 0xFC26;
/// Context flag: the logical thread was alerted before the call was made.
pub(crate) const FLAG_ALERTED: u64 = 1;
/// Bytes of the context's fixed words.
const FIXED: usize = 6 * 8;
/// The longest context, in bytes.
pub(crate) const MAX_CONTEXT: usize = FIXED + 8 * MAX_CHAIN_DEPTH;
/// The room a channel keeps in each payload beyond the largest arguments,
/// for the context (or a reply's run time): [`MAX_CONTEXT`] rounded up to
/// a cache line, so that a channel's largest call is exactly what its
/// server configured.
pub(crate) const CONTEXT_ROOM: usize = MAX_CONTEXT.next_multiple_of(128);

/// A logical thread's identity, unique across the processes of a machine
/// while it runs: the process it began in and the thread there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogicalId {
    /// The origin process's pid.
    pub pid: u32,
    /// The origin process's start time (clock ticks since boot): with the
    /// pid, unique even when the pid is reused.
    pub start: u64,
    /// The thread's id in its origin process ([`crate::ThreadId::as_u64`]).
    pub thread: u64,
}

/// The chain the current code runs in (000's activation stack): the
/// logical thread, its attributes, and the processes it is visiting, the
/// origin first and this one last. See [`chain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Who the logical thread is.
    pub id: LogicalId,
    /// The priority it runs at.
    pub priority: Priority,
    /// When its caller gives up, if it set a deadline.
    pub deadline: Option<Instant>,
    /// Its run time before the call now being served (at the origin: the
    /// thread's own, when the runtime accounts it).
    pub cpu: Duration,
    /// The pids of the processes it visits, the origin first and this one
    /// last (a re-entrant chain names a process more than once).
    pub hops: Vec<u32>,
}

impl Chain {
    /// How many processes the chain visits (1 at the origin).
    pub fn depth(&self) -> usize {
        self.hops.len()
    }

    /// The chain of `t` as an origin: its own identity, in this process
    /// only.
    fn origin(t: &Thread) -> Chain {
        let (pid, start) = crate::sys::process_identity();
        Chain {
            id: LogicalId {
                pid,
                start,
                thread: t.id().as_u64(),
            },
            priority: t.priority(),
            deadline: None,
            cpu: Duration::ZERO,
            hops: vec![pid],
        }
    }
}

/// The chain the current code runs in: inside a call served on an
/// activation, the caller's logical thread with this process added; on any
/// other ferry thread, that thread as the origin of a chain of one. `None`
/// off a ferry thread.
pub fn chain() -> Option<Chain> {
    let t = thread::try_current()?;
    // The thread's own frame: only it changes the word's address part, so
    // it stays valid while we look.
    let f = t.header().rpc.load(Acquire) & !BUSY;
    if f != 0 {
        // SAFETY: a non-zero word names the current thread's live frame,
        // which it (we) clears before leaving.
        let frame = unsafe { &*(f as *const Frame) };
        if let Some(c) = &frame.incoming {
            return Some(c.to_chain());
        }
    }
    Some(Chain::origin(&t))
}

/// The chain of a call being served, as decoded (fixed size: serving a
/// call allocates nothing); [`chain`] makes a [`Chain`] of it on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub(crate) id: LogicalId,
    pub(crate) priority: Priority,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cpu: Duration,
    /// The processes visited, the origin first and the receiver last.
    hops: [u32; MAX_CHAIN_DEPTH],
    depth: u8,
}

impl Incoming {
    /// The processes visited, the origin first and the receiver last.
    pub(crate) fn hops(&self) -> &[u32] {
        &self.hops[..usize::from(self.depth)]
    }

    /// The chain as a remote transport received it (hops as given, the
    /// receiving process not added: the next call made under it adds it).
    ///
    /// # Errors
    /// [`Error::ChainTooDeep`] for no hop or more than a call may carry.
    pub(crate) fn from_chain(c: &Chain) -> Result<Incoming> {
        let depth = c.hops.len();
        if depth == 0 || depth >= MAX_CHAIN_DEPTH {
            return Err(Error::ChainTooDeep { depth: depth + 1 });
        }
        let mut hops = [0u32; MAX_CHAIN_DEPTH];
        hops[..depth].copy_from_slice(&c.hops);
        Ok(Incoming {
            id: c.id,
            priority: c.priority,
            deadline: c.deadline,
            cpu: c.cpu,
            hops,
            depth: depth as u8,
        })
    }

    fn to_chain(self) -> Chain {
        Chain {
            id: self.id,
            priority: self.priority,
            deadline: self.deadline,
            cpu: self.cpu,
            hops: self.hops().to_vec(),
        }
    }
}

/// The chain and client of the call the current thread serves, if it is an
/// activation serving one.
pub(crate) fn current_incoming() -> Option<(Chain, Credentials)> {
    let t = thread::try_current()?;
    let f = t.header().rpc.load(Acquire) & !BUSY;
    if f == 0 {
        return None;
    }
    // SAFETY: a non-zero word names the current thread's live frame, which
    // it (we) clears before leaving.
    let frame = unsafe { &*(f as *const Frame) };
    Some((frame.incoming?.to_chain(), frame.client?))
}

/// The context a call carries, decoded and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Context {
    /// The chain so far, with the receiving process added.
    pub(crate) incoming: Incoming,
    /// The logical thread was alerted before the call.
    pub(crate) alerted: bool,
}

/// Why a context was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadContext {
    /// Shorter than its fixed words, or than its hops need.
    Short,
    /// Not a context (its tag is wrong).
    Tag,
    /// More hops than [`MAX_CHAIN_DEPTH`], or none.
    Depth,
}

/// Encodes the context of a call the current thread `t` makes now (`now`:
/// the time stamp counter, read by the caller, who also times the call
/// from it), with `deadline` (its own; the chain's, if earlier, wins), into
/// `out`; returns its length. Off a ferry thread the call is its own
/// origin with the kernel thread's id 0.
///
/// # Errors
/// [`Error::ChainTooDeep`] if the call would visit more than
/// [`MAX_CHAIN_DEPTH`] processes.
pub(crate) fn encode_current(
    t: Option<&Thread>,
    deadline: Option<Instant>,
    out: &mut [u8; MAX_CONTEXT],
    now: u64,
) -> Result<usize> {
    let f = t.map_or(0, |t| t.header().rpc.load(Acquire) & !BUSY);
    // SAFETY: a non-zero word names the current thread's live frame (only
    // it clears the word, and it is running this).
    let incoming = (f != 0)
        .then(|| unsafe { &*(f as *const Frame) })
        .and_then(|frame| frame.incoming.as_ref());
    let (pid, start) = crate::sys::process_identity();
    let own = [pid];
    let (id, hops, chain_deadline, cpu) = match incoming {
        Some(c) => (c.id, c.hops(), c.deadline, c.cpu),
        None => (
            LogicalId {
                pid,
                start,
                thread: t.map_or(0, |t| t.id().as_u64()),
            },
            &own[..],
            None,
            crate::thread::current_cpu_ticks_at(now)
                .map_or(Duration::ZERO, crate::sys::cycles_to_duration),
        ),
    };
    if hops.len() >= MAX_CHAIN_DEPTH {
        return Err(Error::ChainTooDeep {
            depth: hops.len() + 1,
        });
    }
    let deadline = match (deadline, chain_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let deadline_ns = deadline.map_or(0, |d| {
        let left = d.saturating_duration_since(Instant::now());
        (crate::sys::monotonic_ns() + left.as_nanos() as u64).max(1)
    });
    let priority = t.map_or(Priority::Normal, Thread::priority);
    let alerted = t.is_some_and(Thread::is_alerted);
    let w0 = (MAGIC << 48)
        | ((hops.len() as u64) << 32)
        | ((priority.level() as u64) << 8)
        | if alerted { FLAG_ALERTED } else { 0 };
    let words = [
        w0,
        u64::from(id.pid),
        id.start,
        id.thread,
        deadline_ns,
        cpu.as_nanos() as u64,
    ];
    for (i, w) in words.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    for (i, pid) in hops.iter().enumerate() {
        let at = FIXED + i * 8;
        out[at..at + 8].copy_from_slice(&u64::from(*pid).to_ne_bytes());
    }
    Ok(FIXED + 8 * hops.len())
}

/// The priority a context's first word names (a look by the poller, before
/// the call is decoded; anything out of range is `Low`).
pub(crate) fn peek_priority(first: u64) -> Priority {
    if first >> 48 != MAGIC {
        return Priority::Low;
    }
    Priority::from_level((first >> 8) as u8)
}

/// Decodes the context at the head of `payload` (a copy, out of shared
/// memory); returns it and its length (where the arguments start). The
/// receiving process (`me`) is added to the chain.
///
/// # Errors
/// A [`BadContext`] for a context that does not check out.
pub(crate) fn decode(payload: &[u8], me: u32) -> std::result::Result<(Context, usize), BadContext> {
    let word = |i: usize| -> Option<u64> {
        payload
            .get(i * 8..i * 8 + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    };
    let w0 = word(0).ok_or(BadContext::Short)?;
    if w0 >> 48 != MAGIC {
        return Err(BadContext::Tag);
    }
    let hops = ((w0 >> 32) & 0xffff) as usize;
    if hops == 0 || hops >= MAX_CHAIN_DEPTH {
        return Err(BadContext::Depth);
    }
    let len = FIXED + 8 * hops;
    if payload.len() < len {
        return Err(BadContext::Short);
    }
    let fixed: [u64; 6] = std::array::from_fn(|i| word(i).expect("length checked"));
    let mut pids = [0u32; MAX_CHAIN_DEPTH];
    for (i, pid) in pids.iter_mut().enumerate().take(hops) {
        *pid = word(6 + i).expect("length checked") as u32;
    }
    pids[hops] = me;
    let deadline = (fixed[4] != 0).then(|| {
        let now_ns = crate::sys::monotonic_ns();
        Instant::now() + Duration::from_nanos(fixed[4].saturating_sub(now_ns))
    });
    let incoming = Incoming {
        id: LogicalId {
            pid: fixed[1] as u32,
            start: fixed[2],
            thread: fixed[3],
        },
        priority: Priority::from_level((w0 >> 8) as u8),
        deadline,
        cpu: Duration::from_nanos(fixed[5]),
        hops: pids,
        depth: (hops + 1) as u8,
    };
    let alerted = w0 & FLAG_ALERTED != 0;
    Ok((Context { incoming, alerted }, len))
}

/// The call a thread is making, as an alert finds it: the client's channel
/// implements it, to signal the call's slot.
pub(crate) trait Outgoing {
    /// Passes an alert of the calling thread to the server serving the call.
    fn alert(&self);
}

/// A thread's frame while it is in a call or serves one; lives on the
/// thread's own stack and is named by its header's `rpc` word.
pub(crate) struct Frame {
    /// The chain of the call this thread serves (an activation), if any.
    pub(crate) incoming: Option<Incoming>,
    /// The client whose call it serves.
    client: Option<Credentials>,
    /// The call it is making now, if any: changed only while holding the
    /// word (see the module docs).
    outgoing: Cell<Option<*const dyn Outgoing>>,
}

impl Frame {
    /// A frame serving `incoming` (an activation's), or none (a thread
    /// that only calls).
    pub(crate) fn new(incoming: Option<Incoming>) -> Frame {
        Frame {
            incoming,
            client: None,
            outgoing: Cell::new(None),
        }
    }

    /// The frame of a thread that serves nothing and makes the call `out`,
    /// named before the frame is installed (so that no hold of the word is
    /// needed to name it).
    ///
    /// # Safety
    /// The frame is left ([`leave`]), or never installed, before `out`
    /// goes: alerters reach `out` through the installed frame until then.
    pub(crate) unsafe fn calling(out: &dyn Outgoing) -> Frame {
        Frame {
            incoming: None,
            client: None,
            // SAFETY: the caller leaves the frame before `out` goes (the
            // function's contract).
            outgoing: Cell::new(Some(unsafe { erase(out) })),
        }
    }

    /// An activation's frame, serving `incoming` for `client`.
    pub(crate) fn serving(incoming: Incoming, client: Credentials) -> Frame {
        Frame {
            incoming: Some(incoming),
            client: Some(client),
            outgoing: Cell::new(None),
        }
    }

    /// Where the chain this frame serves lies (null for a frame that serves
    /// none): for a record that names it while the frame lives.
    pub(crate) fn incoming_ptr(&self) -> *const Incoming {
        self.incoming
            .as_ref()
            .map_or(std::ptr::null(), std::ptr::from_ref)
    }
}

/// Installs `frame` as the current thread `t`'s (its word must be 0).
pub(crate) fn enter(t: &Thread, frame: &Frame) {
    frame_word::install(&t.header().rpc, std::ptr::from_ref(frame) as usize);
}

/// Removes the current thread `t`'s frame, waiting out a holder; after this
/// nobody reaches the frame.
pub(crate) fn leave(t: &Thread) {
    let _off = crate::upcall::preemption_off();
    frame_word::clear(&t.header().rpc);
}

/// Clears the frame word of a thread that stopped for good in a call (run
/// by its terminator): its stack, where the frame was, is about to be
/// reused. Waits out an alerter holding it.
pub(crate) fn forget(word: &AtomicUsize) {
    let _off = crate::upcall::preemption_off();
    frame_word::clear(word);
}

/// `out` as a frame keeps it: without its lifetime.
///
/// # Safety
/// The caller makes sure nobody reaches `out` through the pointer after it
/// goes (it is cleared from, or leaves with, the frame first).
unsafe fn erase(out: &dyn Outgoing) -> *const dyn Outgoing {
    // SAFETY: only the lifetime is erased (the contract covers the rest).
    unsafe { std::mem::transmute::<*const (dyn Outgoing + '_), *const dyn Outgoing>(out) }
}

/// Sets (or clears) the call the current thread `t` makes, in its frame.
///
/// # Safety
/// `t` is the current thread, and a call set here is cleared (this with
/// `None`) before the object it names goes away: alerters reach it
/// through the frame until then.
pub(crate) unsafe fn set_outgoing(t: &Thread, out: Option<&dyn Outgoing>) {
    let word = &t.header().rpc;
    let _off = crate::upcall::preemption_off();
    if let Some(f) = frame_word::hold(word) {
        // SAFETY: the word names `t`'s live frame, and we hold it.
        let frame = unsafe { &*(f as *const Frame) };
        // SAFETY: the caller clears the outgoing call before the object it
        // names goes away (the function's contract).
        let p = out.map(|o| unsafe { erase(o) });
        frame.outgoing.set(p);
        frame_word::release(word, f);
    }
}

/// The alert hook: passes `t`'s alert to the call it makes, if any.
pub(crate) fn propagate(t: &Thread) {
    let word = &t.header().rpc;
    let _off = crate::upcall::preemption_off();
    if let Some(f) = frame_word::hold(word) {
        // SAFETY: the word names `t`'s live frame while we hold it.
        let frame = unsafe { &*(f as *const Frame) };
        if let Some(out) = frame.outgoing.get() {
            // SAFETY: the outgoing call is cleared under the hold before it
            // ends, so it is live while we hold the word.
            unsafe { (*out).alert() };
        }
        frame_word::release(word, f);
    }
}

/// The ceiling hook: the priority of the call `t` serves, if any. Called
/// by `t` itself only (`thread::set_priority`).
fn ceiling_hook(t: &Thread) -> Option<Priority> {
    let f = t.header().rpc.load(Acquire) & !BUSY;
    if f == 0 {
        return None;
    }
    // SAFETY: `t` is the current thread (the hook's contract): its frame is
    // live while it runs.
    let frame = unsafe { &*(f as *const Frame) };
    frame.incoming.as_ref().map(|c| c.priority)
}

/// Registers the hooks with the thread room (idempotent, cheap).
pub(crate) fn install_hooks() {
    thread::set_hooks(thread::Hooks {
        alert: propagate,
        ceiling: ceiling_hook,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_context_encoded_off_a_ferry_thread_decodes_with_the_receiver_added() {
        let mut buf = [0u8; MAX_CONTEXT];
        let deadline = Instant::now() + Duration::from_secs(5);
        let n = encode_current(None, Some(deadline), &mut buf, crate::sys::cycles()).unwrap();
        let (ctx, len) = decode(&buf[..n], 4242).unwrap();
        assert_eq!(len, n);
        let (pid, start) = crate::sys::process_identity();
        assert_eq!(ctx.incoming.id.pid, pid);
        assert_eq!(ctx.incoming.id.start, start);
        assert_eq!(ctx.incoming.hops(), [pid, 4242]);
        assert_eq!(ctx.incoming.priority, Priority::Normal);
        assert!(!ctx.alerted);
        let left = ctx.incoming.deadline.unwrap() - Instant::now();
        assert!(left <= Duration::from_secs(5), "{left:?}");
        assert_eq!(
            peek_priority(u64::from_ne_bytes(buf[..8].try_into().unwrap())),
            Priority::Normal
        );
    }

    #[test]
    fn contexts_that_do_not_check_out_are_refused() {
        let mut buf = [0u8; MAX_CONTEXT];
        let n = encode_current(None, None, &mut buf, crate::sys::cycles()).unwrap();
        assert_eq!(decode(&buf[..7], 1), Err(BadContext::Short));
        assert_eq!(decode(&buf[..n - 1], 1), Err(BadContext::Short));
        let mut bad = buf;
        bad[7] ^= 0xff; // the tag's top byte
        assert_eq!(decode(&bad[..n], 1), Err(BadContext::Tag));
        for hops in [0u64, MAX_CHAIN_DEPTH as u64, 0xffff] {
            let mut deep = buf;
            let w0 = u64::from_ne_bytes(deep[..8].try_into().unwrap());
            let w0 = (w0 & !(0xffff << 32)) | (hops << 32);
            deep[..8].copy_from_slice(&w0.to_ne_bytes());
            assert_eq!(decode(&deep, 1), Err(BadContext::Depth), "{hops} hops");
        }
        // A priority out of range is taken as the lowest.
        assert_eq!(peek_priority((MAGIC << 48) | (200 << 8)), Priority::Low);
        assert_eq!(peek_priority(0), Priority::Low);
    }

    proptest! {
        /// Whatever a peer writes, decoding returns a context or an error,
        /// never a panic, and a context's chain is never deeper than the
        /// most plus the receiver.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), tagged in any::<bool>()) {
            let mut bytes = bytes;
            if tagged && bytes.len() >= 8 {
                bytes[6..8].copy_from_slice(&(MAGIC as u16).to_ne_bytes());
            }
            if let Ok((ctx, len)) = decode(&bytes, 7) {
                prop_assert!(len <= bytes.len());
                prop_assert!(ctx.incoming.hops().len() <= MAX_CHAIN_DEPTH);
                prop_assert_eq!(*ctx.incoming.hops().last().unwrap(), 7);
            }
        }
    }
}
