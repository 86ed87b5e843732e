//! The reply side of a client's channel: taking replies off the reply
//! queue and waking their callers, failing every waiter when the channel
//! breaks, and the channel's part as an event source (`Polled`) and as a
//! watched peer (`Watched`).
//!
//! This file owns what a poller does with a reply; it must not make calls
//! or wait for them (the parent does).

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::super::layout::Side;
use super::super::slots::Ticket;
use super::super::waiter::Reply;
use super::super::watch::Watched;
use super::ClientChan;
use crate::event::polled::Polled;

impl ClientChan {
    /// Takes the replies off the queue (one poller at a time).
    pub(super) fn take_replies(&self) {
        let Some(replies) = self.replies.try_lock() else {
            return;
        };
        loop {
            match replies.try_pop() {
                Ok(Some(index)) => self.replied(index),
                Ok(None) => break,
                Err(_) => {
                    drop(replies);
                    self.break_channel();
                    return;
                }
            }
        }
    }

    fn replied(&self, index: u32) {
        let Some(w) = self.waiters.get(index as usize) else {
            self.refused.fetch_add(1, Relaxed);
            return;
        };
        let mut who = w.who.lock();
        match w.word.reply() {
            Reply::Wake => {
                let taken = who.take();
                drop(who);
                if let Some(t) = taken {
                    t.unpark();
                }
            }
            Reply::Abandoned => {
                drop(who);
                let ticket = Ticket {
                    index,
                    generation: w.generation.load(Relaxed),
                };
                let mut slots = self.slots.lock();
                if slots.arena().read_answer(&ticket).is_ok() {
                    // The late reply: whoever claims the call frees it.
                    if w.word.claim_abandoned(&self.pending) {
                        let _ = slots.release(&ticket);
                    }
                } else {
                    self.refused.fetch_add(1, Relaxed);
                }
            }
            Reply::Refused => {
                drop(who);
                self.refused.fetch_add(1, Relaxed);
            }
        }
    }

    /// The peer broke the protocol in a way that leaves the channel
    /// unusable, or died: every call fails with `PeerDied`.
    pub(in crate::rpc) fn break_channel(&self) {
        self.dead.store(true, Release);
        self.fail_waiters();
    }

    pub(super) fn fail_waiters(&self) {
        for w in self.waiters.iter() {
            // An abandoned call is counted off too; its slot stays out of
            // use (the channel is dead).
            let mut who = w.who.lock();
            let taken = if w.word.fail(&self.pending) {
                who.take()
            } else {
                None
            };
            drop(who);
            if let Some(t) = taken {
                t.unpark();
            }
        }
    }
}

impl Polled for ClientChan {
    #[inline]
    fn is_ready(&self) -> bool {
        self.pending.load(Relaxed) != 0
            && (!self.replies_seen.is_empty() || self.dead.load(Relaxed))
    }

    fn deliver(&self) {
        if self.dead.load(Acquire) {
            self.fail_waiters();
        } else {
            self.take_replies();
        }
    }

    fn doorbell(&self) -> Option<&AtomicU32> {
        Some(self.mem.view().doorbell(Side::Client))
    }
}

impl Watched for ClientChan {
    fn peer_gone(&self) {
        self.break_channel();
    }
}
