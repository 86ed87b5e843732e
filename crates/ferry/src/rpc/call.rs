//! The vocabulary both ends of a call share: what a caller may ask for
//! ([`CallOptions`]), what a server answers instead of a result ([`Fault`])
//! and how that travels (the status in a reply's op word), what serves
//! calls ([`Handler`]), and the channel's size ([`ChannelConfig`]).
//!
//! This module owns those definitions only; it must not touch a channel.

use std::time::{Duration, Instant};

use super::error::Error;
use super::layout::{ChannelLayout, LINE};

/// The largest arguments or result of one call, in bytes (1 MiB) with the
/// default [`ChannelConfig`].
pub const MAX_CALL_LEN: usize = 1 << 20;

/// How one call is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Give up at this moment with [`Error::TimedOut`] (the slot is
    /// reclaimed safely); `None`: wait as long as the server lives.
    pub deadline: Option<Instant>,
    /// Wake the server's processor even if the doorbell says one is awake
    /// (the wake call is made for every urgent call).
    pub urgent: bool,
}

impl CallOptions {
    /// Options with a deadline `timeout` from now.
    pub fn timeout(timeout: Duration) -> CallOptions {
        CallOptions {
            deadline: Some(Instant::now() + timeout),
            urgent: false,
        }
    }
}

/// What a [`Handler`] answers instead of a result; the caller gets the
/// matching [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The server has no operation of this number
    /// ([`Error::UnknownOp`]).
    UnknownOp,
    /// The arguments could not be decoded ([`Error::BadArgs`]).
    BadArgs,
    /// The handler panicked ([`Error::ServerPanicked`]); the server keeps
    /// serving.
    Panicked,
    /// The result is larger than the channel carries ([`Error::TooLarge`]).
    TooLarge,
}

/// Serves calls: one per interface, shared by the server's threads.
pub trait Handler: Send + Sync + 'static {
    /// Answers a call of operation `op` with arguments `args`.
    ///
    /// # Errors
    /// A [`Fault`], which the caller sees as the matching [`Error`].
    fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>, Fault>;
}

impl<F> Handler for F
where
    F: Fn(u32, &[u8]) -> Result<Vec<u8>, Fault> + Send + Sync + 'static,
{
    fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
        self(op, args)
    }
}

/// A reply's status: a result.
pub(crate) const STATUS_OK: u32 = 0;
/// A reply's status: refused, every activation taken ([`Error::Busy`]).
pub(crate) const STATUS_BUSY: u32 = 5;

impl Fault {
    /// The status a reply carries for this fault (never [`STATUS_OK`]).
    pub(crate) fn status(self) -> u32 {
        match self {
            Fault::UnknownOp => 1,
            Fault::BadArgs => 2,
            Fault::Panicked => 3,
            Fault::TooLarge => 4,
        }
    }
}

/// The caller's error for a reply's non-zero `status` to a call of `op`.
pub(crate) fn status_error(status: u32, op: u32) -> Error {
    match status {
        1 => Error::UnknownOp { op },
        2 => Error::BadArgs,
        3 => Error::ServerPanicked,
        4 => Error::TooLarge,
        STATUS_BUSY => Error::Busy,
        _ => Error::BadReply,
    }
}

/// The size of the channels a server makes (the server decides; the
/// client takes what the header says, checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Calls in flight at once on one channel (a power of two, 1 to 65,536).
    pub slots: usize,
    /// Argument and result bytes carried inline in a slot (a multiple of 8,
    /// 8 to 65,536); larger ones go to the slot's extent.
    pub inline: usize,
    /// The largest arguments or result (the extent of each slot holds it
    /// and the call's context; up to 16 MiB in all; memory a slot never
    /// uses is never touched).
    pub max_call: usize,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            slots: 64,
            inline: 496 - 16,
            max_call: MAX_CALL_LEN,
        }
    }
}

impl ChannelConfig {
    /// The channel layout of this configuration.
    ///
    /// # Errors
    /// [`Error::BadLayout`] for a configuration out of the ranges above.
    pub(crate) fn layout(&self) -> Result<ChannelLayout, Error> {
        // Each payload also carries the call's context (or the reply's run
        // time): room for the largest one, beyond `max_call`.
        let payload = self.max_call.next_multiple_of(LINE) + super::logical::CONTEXT_ROOM;
        let extent = if payload > self.inline { payload } else { 0 };
        ChannelLayout::with_extents(self.slots, self.inline, extent).map_err(Error::from)
    }
}
