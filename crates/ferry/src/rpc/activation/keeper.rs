//! The keeper of a pool of activations: a ferry thread of the server that
//! does what a poller must not (it runs inside a processor's scheduling):
//! makes activations, delivers a client's signals to the activations
//! serving its calls, tells the server when the pool runs low, and retires
//! unoccupied activations as they decay.
//!
//! This file owns those steps; the pool's state and its protocol are the
//! parent's.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::{Activations, DECAY_PERIOD, Passive, PoolLow};
use crate::rpc::logical;
use crate::thread::{self, BLOCKED, PENDING};

impl Activations {
    /// The keeper's loop: delivers signals, grows the pool for waiting
    /// calls and re-entrant ones, tells the server when it runs low, and
    /// retires unoccupied activations above the minimum as they decay.
    pub(super) fn keep(self: Arc<Self>) {
        loop {
            let decaying = {
                let s = self.state.lock();
                if s.stopping {
                    return;
                }
                s.live > self.config.min && s.signalled.is_empty() && s.grow == 0
            };
            if decaying {
                let due = Instant::now() + DECAY_PERIOD;
                let timers = &self.runtime.shared().sources.timers;
                thread::with_timer(timers, due, |_| thread::park());
                self.decay();
            } else {
                thread::park();
            }
            self.deliver_signals();
            // The server first (000 §6.2), then what waiting calls need.
            self.tell_low();
            self.grow();
        }
    }

    fn deliver_signals(&self) {
        let signalled = std::mem::take(&mut self.state.lock().signalled);
        if signalled.is_empty() {
            return;
        }
        let all = self.state.lock().all.clone();
        for (chan, dead) in signalled {
            let key = Arc::as_ptr(&chan) as usize;
            for a in &all {
                let Some(t) = a.thread.get() else { continue };
                let allowed = {
                    let serving = a.serving.lock();
                    match *serving {
                        Some((k, index, generation, _)) if k == key => {
                            let call = crate::rpc::slots::IncomingCall {
                                index,
                                generation,
                                op: 0,
                                args: Vec::new(),
                            };
                            if dead || chan.slots.signal_of(&call) != 0 {
                                let before = t.alert_bits_or(PENDING);
                                logical::propagate(t);
                                Some(before & BLOCKED == 0)
                            } else {
                                None
                            }
                        }
                        _ => None,
                    }
                };
                if allowed == Some(true) {
                    // Its blocking call, if any, returns early.
                    let _ = t.abort();
                }
            }
        }
    }

    fn grow(self: &Arc<Self>) {
        loop {
            let (job, extra) = {
                let mut s = self.state.lock();
                if s.stopping {
                    return;
                }
                if let Some(job) = s.reentrant.pop_front() {
                    (Some(job), s.live >= self.config.max)
                } else if s.grow > 0 && s.live < self.config.max {
                    s.grow -= 1;
                    (s.waiting.pop().map(|w| w.job), false)
                } else {
                    s.grow = 0;
                    break;
                }
            };
            if self.make(job, extra).is_err() {
                break;
            }
        }
    }

    /// Tells the server its pool runs low, once per spell, and adds what it
    /// asks for.
    fn tell_low(self: &Arc<Self>) {
        let low = {
            let mut s = self.state.lock();
            if !s.low_told || !s.idle.is_empty() || s.live >= self.config.max {
                s.low_told = false;
                return;
            }
            PoolLow {
                live: s.live,
                idle: s.idle.len(),
                max: self.config.max,
            }
        };
        let add = match &self.config.on_low {
            // A server's callback that panics adds nothing (and the keeper
            // goes on).
            Some(f) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(low))).unwrap_or(0)
            }
            // By default one more, so that the next call finds one.
            None => 1,
        };
        let add = add.min(self.config.max.saturating_sub(low.live));
        for _ in 0..add {
            if self.make(None, false).is_err() {
                break;
            }
        }
        self.state.lock().low_told = false;
    }

    /// One decay period passed: if no call took an activation meanwhile,
    /// half of the unoccupied ones above the minimum retire.
    fn decay(&self) {
        let retiring: Vec<Arc<Passive>> = {
            let mut s = self.state.lock();
            if std::mem::take(&mut s.taken_since_decay) {
                return;
            }
            let above = s.idle.len().saturating_sub(self.config.min);
            let n = above.div_ceil(2);
            // The least recently used first (the bottom of the stack).
            let out: Vec<_> = s.idle.drain(..n).collect();
            for a in &out {
                a.idle.store(false, Relaxed);
            }
            out
        };
        for a in retiring {
            self.retire(&a);
        }
    }

    /// Retires `a`, taken out of `idle`: counted off here, it leaves at
    /// its next look (see `run`).
    fn retire(&self, a: &Arc<Passive>) {
        let mut s = self.state.lock();
        s.live -= 1;
        s.all.retain(|x| !Arc::ptr_eq(x, a));
        a.retired.store(true, Relaxed);
        drop(s);
        self.retired.fetch_add(1, Relaxed);
        if let Some(t) = a.thread.get() {
            t.unpark();
        }
    }
}
