//! Liveness: one kernel thread per process ("ferry-rpc-watch", started at
//! the first channel) waits in `epoll_wait` on a pidfd of every peer and on
//! every binding socket, and tells a channel's end the moment its peer is
//! gone ([`Watched::peer_gone`]).
//!
//! This module owns the watcher and its registry; it must not touch a
//! channel's memory (the end it tells does).
//!
//! A peer is gone when its pidfd becomes readable (the process exited, by
//! any means, `kill -9` included) or its binding socket does (it closed its
//! end, or sent something: nothing is ever sent after binding, so anything
//! arriving ends the channel). The pidfd comes from the socket itself
//! (`SO_PEERPIDFD`, free of pid reuse) where the kernel has it, else from
//! `pidfd_open` on the pid `SO_PEERCRED` gave. The watcher costs nothing
//! while nobody dies: it sleeps in the kernel.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use rustix::event::epoll;

use super::error::{Error, Result};

/// A channel end that wants to hear of its peer's death.
pub(crate) trait Watched: Send + Sync {
    /// The peer is gone (exited, or hung up its binding socket). Called
    /// once, on the watcher's kernel thread.
    fn peer_gone(&self);
}

/// A registration; [`unwatch`] ends it.
#[derive(Debug)]
pub(crate) struct Token(u64);

struct Entry {
    who: Weak<dyn Watched>,
    pidfd: OwnedFd,
    socket: OwnedFd,
}

struct Watcher {
    epoll: OwnedFd,
    entries: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

static WATCHER: OnceLock<std::result::Result<Watcher, rustix::io::Errno>> = OnceLock::new();

fn watcher() -> Result<&'static Watcher> {
    WATCHER
        .get_or_init(|| {
            let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
            std::thread::Builder::new()
                .name("ferry-rpc-watch".into())
                .spawn(run)
                .map_err(|_| rustix::io::Errno::AGAIN)?;
            Ok(Watcher {
                epoll,
                entries: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
            })
        })
        .as_ref()
        .map_err(|e| Error::Io((*e).into()))
}

/// Tells `who` when the process `pid`, the peer on `socket`, is gone.
///
/// # Errors
/// [`Error::PeerDied`] if the peer is already gone (no pidfd can be had);
/// [`Error::Io`] if the watcher cannot be started or the fds not watched.
pub(crate) fn watch(who: Arc<dyn Watched>, pid: i32, socket: BorrowedFd<'_>) -> Result<Token> {
    // The watcher's making (once) and its entries' lock are std ones that
    // other ferry threads may reach at once (clients connecting together):
    // a thread switched out holding one would leave each of them waiting
    // in the kernel, each costing its processor a takeover. So no switch
    // here: the section is a few system calls long.
    let _off = crate::upcall::preemption_off();
    let w = watcher()?;
    let pidfd = peer_pidfd(socket, pid)?;
    let socket = socket.try_clone_to_owned()?;
    let id = w.next.fetch_add(1, Relaxed);
    let data = epoll::EventData::new_u64(id);
    let mut entries = w.entries.lock().unwrap_or_else(PoisonError::into_inner);
    epoll::add(&w.epoll, &pidfd, data, epoll::EventFlags::IN)?;
    if let Err(e) = epoll::add(
        &w.epoll,
        &socket,
        data,
        epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
    ) {
        let _ = epoll::delete(&w.epoll, &pidfd);
        return Err(e.into());
    }
    entries.insert(
        id,
        Entry {
            who: Arc::downgrade(&who),
            pidfd,
            socket,
        },
    );
    Ok(Token(id))
}

/// Stops watching (the fds are closed); nothing if the peer was already
/// reported gone.
pub(crate) fn unwatch(token: &Token) {
    // As in `watch`.
    let _off = crate::upcall::preemption_off();
    let Ok(w) = watcher() else { return };
    let entry = w
        .entries
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&token.0);
    if let Some(e) = entry {
        forget(w, &e);
    }
}

fn forget(w: &Watcher, e: &Entry) {
    let _ = epoll::delete(&w.epoll, &e.pidfd);
    let _ = epoll::delete(&w.epoll, &e.socket);
}

/// The watcher's loop.
fn run() {
    // The watcher is stored by `get_or_init` after this thread starts:
    // wait for it.
    let w = loop {
        match WATCHER.get() {
            Some(Ok(w)) => break w,
            Some(Err(_)) => return,
            None => std::thread::yield_now(),
        }
    };
    let mut events = Vec::with_capacity(64);
    loop {
        events.clear();
        if epoll::wait(&w.epoll, rustix::buffer::spare_capacity(&mut events), None).is_err() {
            continue;
        }
        for ev in &events {
            let id = ev.data.u64();
            let entry = w
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(e) = entry {
                forget(w, &e);
                if let Some(who) = e.who.upgrade() {
                    who.peer_gone();
                }
            }
        }
    }
}

/// A pidfd for the peer on `socket`: from the socket where the kernel
/// supports it (Linux 6.5), else `pidfd_open(pid)`.
pub(crate) fn peer_pidfd(socket: BorrowedFd<'_>, pid: i32) -> Result<OwnedFd> {
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut fd: libc::c_int = -1;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` and `len` are valid out-parameters of the sizes given;
    // an unknown option gives ENOPROTOOPT.
    let r = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket.as_fd()),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &mut len,
        )
    };
    if r == 0 && fd >= 0 {
        // SAFETY: the kernel just gave us this new fd; nothing else owns it.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let pid = rustix::process::Pid::from_raw(pid).ok_or(Error::PeerDied)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).map_err(|e| {
        if e == rustix::io::Errno::SRCH {
            Error::PeerDied
        } else {
            Error::Io(e.into())
        }
    })
}
