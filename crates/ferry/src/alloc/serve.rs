//! The daemon's end of registration: [`Registrar`], the socket
//! `allocd.sock` in the runtime directory, and [`Registration`], one
//! registered process with its page.
//!
//! Owns only the wiring of `rpc`'s binding to the page: a registration is
//! a binding of the interface [`SOCKET_NAME`] at [`PROTOCOL_HASH`] (the
//! kernel's credentials checked: the same user only), whose sealed memfd
//! of [`PAGE_LEN`] bytes is a [`Page`] the daemon initialised before
//! sending it. It must not decide allocations (the daemon's policy does)
//! or block without bound on a client (the handshake has a deadline).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use super::page::{PAGE_LEN, Page};
use crate::rpc::{Binding, Listener, Mapping, Policy, Result, RuntimeDir};

/// The interface name: the socket is `<runtime dir>/allocd.sock`.
pub const SOCKET_NAME: &str = "allocd";

/// The registration's version hash (the page layout's version in it).
pub const PROTOCOL_HASH: u64 = u64::from_le_bytes(*b"allocd\0\0") ^ super::page::VERSION as u64;

/// How long one registration's handshake may hold the daemon.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(250);

/// The daemon's registration socket.
#[derive(Debug)]
pub struct Registrar {
    listener: Listener,
}

/// Lays a fresh page out before it is handed to the process.
fn prepare(mapping: &Mapping) {
    // SAFETY: the mapping is `PAGE_LEN` bytes, page-aligned, alive for
    // this call and touched only atomically.
    if let Some(page) = unsafe { Page::from_raw(mapping.as_ptr(), mapping.len()) } {
        page.init();
    }
}

impl Registrar {
    /// Listens at `<dir>/allocd.sock`. A socket left by a daemon that is
    /// gone is replaced; a live daemon there is
    /// [`Error::NameInUse`](crate::rpc::Error::NameInUse).
    ///
    /// # Errors
    /// As [`Listener::bind_in`].
    pub fn bind_in(dir: &RuntimeDir) -> Result<Registrar> {
        let mut listener = Listener::bind_in(dir, SOCKET_NAME, PROTOCOL_HASH)?;
        listener.set_prepare(PAGE_LEN, prepare)?;
        listener.set_handshake_timeout(HANDSHAKE_TIMEOUT);
        Ok(Registrar { listener })
    }

    /// The socket file's path.
    pub fn path(&self) -> &std::path::Path {
        self.listener.path()
    }

    /// Registers one waiting process (call when the socket is readable):
    /// its credentials checked (the daemon's own user only), its request
    /// read within [`HANDSHAKE_TIMEOUT`], its page made and sent.
    ///
    /// # Errors
    /// This client's failure alone (the daemon goes on serving).
    pub fn accept(&self) -> Result<Registration> {
        let accepted = self.listener.accept(&Policy::SameUser)?;
        Ok(Registration {
            binding: accepted.binding,
        })
    }
}

impl AsFd for Registrar {
    /// The listening socket: readable when a process waits to register.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }
}

/// One registered process: its page and how to see it go.
#[derive(Debug)]
pub struct Registration {
    binding: Binding,
}

impl Registration {
    /// The process's id (from `SO_PEERCRED`).
    pub fn pid(&self) -> i32 {
        self.binding.peer_pid()
    }

    /// The shared page.
    pub fn page(&self) -> &Page {
        page_of(self.binding.mapping())
    }

    /// The registration socket: readable (end of file) once the process
    /// closed it or died.
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.binding.socket()
    }

    /// A pidfd of the process (readable once it exits).
    ///
    /// # Errors
    /// [`Error::PeerDied`](crate::rpc::Error::PeerDied) if it is gone already.
    pub fn pidfd(&self) -> Result<OwnedFd> {
        crate::rpc::watch::peer_pidfd(self.binding.socket(), self.pid())
    }
}

/// The page laid over a binding's mapping.
pub(crate) fn page_of(mapping: &Mapping) -> &Page {
    // SAFETY: the mapping lives as long as the returned borrow, is only
    // touched atomically, and was checked to be `PAGE_LEN` long (made so
    // by the daemon, or checked by `Mapping::from_peer` against the length
    // the reply announced, which the client compares with `PAGE_LEN`).
    unsafe { Page::from_raw(mapping.as_ptr(), mapping.len()) }
        .expect("an allocation page's mapping is PAGE_LEN bytes, page-aligned")
}
