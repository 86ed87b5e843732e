//! One side's hold on a channel's memory: the binding (its mapping, its
//! socket, the peer's credentials) and the checked view of the channel laid
//! over the mapping.
//!
//! This module owns the lifetime trick every channel end needs: the views
//! and queue endpoints borrow the mapping, and the end that holds them also
//! holds the mapping. [`Memory`] keeps the binding and hands out views
//! borrowed from itself; the ends built on it ([`super::client`],
//! [`super::server`]) keep their `'static` queue endpoints in fields
//! declared before their `Memory`, so that the endpoints are dropped first,
//! and never let a `'static` borrow out. It must not interpret the channel
//! (that is `layout`, `slots` and the ends).

use std::os::fd::BorrowedFd;

use super::bind::{Binding, Credentials};
use super::error::{Error, Result};
use super::layout::{self, ChannelLayout, ChannelRegion, ChannelView, Side};

/// A channel's memory, mapped, with its layout checked.
#[derive(Debug)]
pub(crate) struct Memory {
    view: ChannelView<'static>,
    binding: Binding,
}

impl Memory {
    /// The server's side: lays a fresh channel of `layout` over the
    /// binding's memory (done before the memfd is sent, see
    /// `Listener::set_layout`, so this only checks and views it).
    pub(crate) fn server(binding: Binding, layout: &ChannelLayout) -> Result<Memory> {
        let region = Memory::region(&binding)?;
        let view = ChannelView::new(region, layout).map_err(Error::from)?;
        Ok(Memory { view, binding })
    }

    /// The client's side: checks the channel the server laid out.
    pub(crate) fn client(binding: Binding) -> Result<Memory> {
        let region = Memory::region(&binding)?;
        let layout = layout::attach(region).map_err(Error::from)?;
        let view = ChannelView::new(region, &layout).map_err(Error::from)?;
        Ok(Memory { view, binding })
    }

    fn region(binding: &Binding) -> Result<ChannelRegion<'static>> {
        let m = binding.mapping();
        // SAFETY: the mapping stays mapped, readable and writable as long as
        // `binding` lives; `Memory` owns the binding and hands the region
        // out only through `view`, borrowed from `self`, and the channel
        // ends keep their `'static` endpoints in fields dropped before their
        // `Memory` (module docs). Every access through a region is atomic
        // or `arch::shared_copy`'s (`ChannelRegion`).
        unsafe { ChannelRegion::from_raw(m.as_ptr(), m.len()) }.map_err(Error::from)
    }

    /// The channel's areas, borrowed from `self`.
    pub(crate) fn view(&self) -> ChannelView<'_> {
        self.view
    }

    /// The view with the lifetime of the mapping stretched to `'static`.
    ///
    /// # Safety
    /// Whatever is built from the returned view must be dropped before
    /// `self` (declare it in a field before the `Memory` of the same
    /// struct) and never handed out with the `'static` lifetime.
    pub(crate) unsafe fn view_static(&self) -> ChannelView<'static> {
        self.view
    }

    /// The peer's credentials.
    pub(crate) fn peer(&self) -> Credentials {
        self.binding.peer()
    }

    /// The binding socket (it becomes readable when the peer goes away).
    pub(crate) fn socket(&self) -> BorrowedFd<'_> {
        self.binding.socket()
    }

    /// The binding's interface name.
    pub(crate) fn name(&self) -> &str {
        self.binding.name()
    }

    /// Closes `side`'s end: marks it closed in the liveness words and hangs
    /// up the binding socket, so the peer's watcher tells it at once.
    pub(crate) fn close(&self, side: Side) {
        self.view
            .closed(side)
            .store(1, core::sync::atomic::Ordering::Release);
        self.binding.hang_up();
    }
}
