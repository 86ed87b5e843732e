//! The runtime's side of processor allocation: finding the daemon at
//! start, registering, and a plain kernel thread (the follower) that runs
//! as many processors as the daemon gives the process cores, pinned to
//! them.
//!
//! Owns the follower and what it publishes (`max_processors`, `desired`,
//! `acked`, `held`) and the installation of the processors' willing words.
//! It must not change processors other than through the runtime's own
//! machinery (`Handle::set_processors`, `Handle::processor_on`, which
//! deliver `ProcessorAdded`/`ProcessorRemoved` with the lock-holder care),
//! must not trust the daemon's words (cores outside the process's mask or
//! beyond its processors are skipped), and must cost nothing without a
//! daemon: at start one `lstat` of the socket, and no thread.
//!
//! The follower's loop, every [`FOLLOW_TICK`] or when the daemon's futex wake
//! ends its wait on `order`:
//!
//! 1. the daemon gone (the registration socket readable: end of file)?
//!    The process keeps the processors and cores it has and tries to
//!    register again every [`REGISTER_RETRY`] (a follower whose first
//!    registration fails, at a socket a dead daemon left, ends at once);
//! 2. a new order (`order` even and changed)? As many processors as its
//!    usable cores, processor `i` pinned to the `i`-th, then `acked`; the
//!    change is timestamped from the order (`ordered_at`), so the
//!    runtime's `ProcessorAdded`/`ProcessorRemoved` latencies count from
//!    the daemon's decision;
//! 3. `desired` = threads running + threads queued (on the processors in
//!    the set and in the injector), clamped to `1..=max_processors`:
//!    stored only when it differs from the value last stored, so a spawn
//!    costs nothing and the daemon sees a change within a tick.
//!
//! The processors' willing words point into the page, so each page's
//! mapping (with its registration socket) is kept by the runtime until it
//! ends (`Set::keep`): a registration again after a daemon's restart keeps
//! one more page of 4 KiB and one descriptor.
//!
//! Ordered no core at all (more processes than cores, out of turn), the
//! process runs no processor until its turn comes: its threads wait
//! queued, none runs on a core another process owns. Ordered cores of
//! which none is in its affinity mask, it keeps one processor, unpinned.
//! When the daemon goes away while the process holds no processor, the
//! process takes one back at once (it keeps what it had otherwise).

use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cores::CoreSet;
use super::page::{PAGE_LEN, Page};
use super::serve::{PROTOCOL_HASH, SOCKET_NAME, page_of};
use crate::rpc::{Binding, RuntimeDir, connect_raw_with};
use crate::runtime::{Handle, WeakHandle};

/// How often the follower looks when no order wakes it.
pub const FOLLOW_TICK: Duration = Duration::from_millis(10);

/// How often a process whose daemon went away tries to register again.
pub const REGISTER_RETRY: Duration = Duration::from_secs(1);

/// How long one registration may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// At runtime start: if `on` and a daemon's socket is in the user's
/// runtime directory, starts the follower (which registers).
pub(crate) fn start(handle: &Handle, on: bool) {
    if !on {
        return;
    }
    let socket = RuntimeDir::user_path().join(format!("{SOCKET_NAME}.sock"));
    if !std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
        return;
    }
    let weak = handle.downgrade();
    let _ = std::thread::Builder::new()
        .name("ferry-allocd".into())
        .spawn(move || Follower::new(weak).run());
}

/// A registration the follower holds: the binding (kept by the set too,
/// since processors' willing words point into its page).
struct Registered {
    binding: Arc<Binding>,
    /// The last order followed.
    followed: u32,
    /// The last order read (followed, or failed to follow: tried again
    /// at the next tick).
    seen: u32,
    /// The last `desired` stored.
    desired: usize,
    /// The processors the last order followed left running.
    held: Option<usize>,
}

impl Registered {
    fn page(&self) -> &Page {
        page_of(self.binding.mapping())
    }
}

/// The follower's state.
struct Follower {
    weak: WeakHandle,
    registered: Option<Registered>,
    /// When registering was last tried.
    tried: Option<Instant>,
}

impl Follower {
    fn new(weak: WeakHandle) -> Follower {
        Follower {
            weak,
            registered: None,
            tried: None,
        }
    }

    /// Until the runtime ends.
    fn run(mut self) {
        loop {
            let Some(handle) = self.weak.upgrade() else {
                return;
            };
            if handle.shared().is_shut_down() {
                return;
            }
            if !self.step(&handle) {
                return;
            }
            drop(handle);
            match &self.registered {
                Some(r) => r.page().wait_order(r.seen, FOLLOW_TICK),
                None => std::thread::sleep(FOLLOW_TICK.max(REGISTER_RETRY / 10)),
            }
        }
    }

    /// One look: register if due, else follow and publish. False if the
    /// first registration failed: the follower ends.
    fn step(&mut self, handle: &Handle) -> bool {
        if let Some(r) = &self.registered
            && daemon_gone(&r.binding)
        {
            // Keep the processors and cores as they are; but a process
            // out of turn must not wait for a daemon that may never come.
            if r.held == Some(0) {
                let _ = handle.set_processors(1);
            }
            self.registered = None;
            crate::stats::set_allocation(None);
            self.tried = Some(Instant::now());
        }
        if self.registered.is_none() {
            if self.tried.is_some_and(|t| t.elapsed() < REGISTER_RETRY) {
                return true;
            }
            let first = self.tried.is_none();
            self.tried = Some(Instant::now());
            self.registered = register(handle);
            if first && self.registered.is_none() {
                // A socket left by a daemon that is gone: nothing changes.
                return false;
            }
        }
        let Some(r) = &mut self.registered else {
            return true;
        };
        let page = page_of(r.binding.mapping());
        if let Some((g, cores)) = page.read_order()
            && g != r.followed
            && g != 0
        {
            r.seen = g;
            if let Ok(held) = obey(handle, &cores, page.order_age()) {
                page.ack(g, held);
                r.followed = g;
                r.held = Some(held);
            }
        }
        let desired = desired(handle);
        if desired != r.desired {
            page.set_desired(desired);
            r.desired = desired;
        }
        // What `ferry top` shows of the grant (the daemon's words, as read).
        let (count, _, priority, credit) = page.daemon_words();
        crate::stats::set_allocation(Some(crate::stats::Allocation {
            desired: desired as u64,
            cores: u64::from(count),
            priority: i64::from(priority),
            credit,
        }));
        true
    }
}

/// Registers with the daemon: maps its page, says how many processors the
/// runtime may have and wants, and points the processors' willing words
/// into it. `None` if there is no daemon or it does not answer properly.
fn register(handle: &Handle) -> Option<Registered> {
    let dir = RuntimeDir::user().ok()?;
    let binding = connect_raw_with(&dir, SOCKET_NAME, PROTOCOL_HASH, CONNECT_TIMEOUT).ok()?;
    let mapping = binding.mapping();
    if mapping.len() != PAGE_LEN {
        return None;
    }
    // SAFETY: the mapping is `PAGE_LEN` bytes (checked), lives in
    // `binding`, and is only touched atomically.
    let page = unsafe { Page::from_raw(mapping.as_ptr(), mapping.len()) }?;
    if !page.is_valid() {
        return None;
    }
    let binding = Arc::new(binding);
    let shared = handle.shared();
    page.set_max_processors(handle.max_processors());
    let desired = desired(handle);
    page.set_desired(desired);
    // The page must outlive every processor that may write into it.
    shared.keep(Box::new(Arc::clone(&binding)));
    for p in shared.processors.iter() {
        let word = page
            .willing_word(p.index)
            .map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: the page's mapping is kept by the set (above) for as
        // long as the processors live.
        unsafe { p.mirror_willing_to(word) };
    }
    Some(Registered {
        binding,
        followed: 0,
        seen: 0,
        desired,
        held: None,
    })
}

/// Whether the daemon's end of the registration closed (it sends nothing
/// after binding, so a readable socket means end of file).
fn daemon_gone(binding: &Binding) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let socket = binding.socket();
    let mut fds = [PollFd::new(&socket, PollFlags::IN | PollFlags::RDHUP)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// Follows an order, given `age` ago, to own `cores`: as many processors
/// as usable cores, processor `i` pinned to the `i`-th; none for no core;
/// one, unpinned, for cores of which none is usable. Returns the
/// processors held.
fn obey(handle: &Handle, cores: &CoreSet, age: Duration) -> std::io::Result<usize> {
    let allowed = crate::processor::allowed_cpus();
    let usable: Vec<usize> = cores
        .iter()
        .filter(|c| allowed.is_empty() || allowed.contains(c))
        .take(handle.max_processors())
        .collect();
    let n = if cores.is_empty() {
        0
    } else {
        usable.len().max(1)
    };
    handle.shared().change_processors(n, age)?;
    for (i, &core) in usable.iter().enumerate() {
        handle.processor_on(i, core)?;
    }
    Ok(n)
}

/// The processors the runtime's work wants now: threads running on the
/// processors in the set, plus threads queued on them and in the
/// injector, clamped to `1..=max_processors`.
fn desired(handle: &Handle) -> usize {
    let shared = handle.shared();
    let on_processors: usize = shared
        .processors
        .iter()
        .filter(|p| {
            matches!(
                p.membership.load(std::sync::atomic::Ordering::Relaxed),
                crate::processor::ACTIVE | crate::processor::STARTING
            )
        })
        .map(|p| usize::from(p.runs_a_thread()) + p.queued_hint())
        .sum();
    (on_processors + shared.injector.len()).clamp(1, handle.max_processors())
}
