//! An activation's life: made on demand (by the keeper, or for a pool's
//! first calls), parked in the pool while unoccupied, and serving the
//! calls given to it: each copied out of its slot once and run as the
//! caller's logical thread, its answer and run time posted back.
//!
//! This file owns what one activation does; it must not decide how many
//! there are or who gets the next call (the parent's pool does).

use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{Activations, ChainAt, Job, Passive};
use crate::rpc::call::Fault;
use crate::rpc::error::Result;
use crate::rpc::logical::{self, Frame};
use crate::sync::SpinLock;
use crate::thread::{self, BLOCKED, PENDING};

impl Activations {
    /// Makes one activation (on the keeper or at start), with `first` as
    /// its first call.
    pub(super) fn make(self: &Arc<Self>, first: Option<Job>, extra: bool) -> Result<()> {
        let a = Arc::new(Passive {
            thread: OnceLock::new(),
            mail: SpinLock::new(None),
            serving: SpinLock::new(None),
            idle: std::sync::atomic::AtomicBool::new(false),
            extra,
            retired: std::sync::atomic::AtomicBool::new(false),
        });
        if let Some(job) = first {
            *a.mail.lock() = Some(job);
        }
        {
            let mut s = self.state.lock();
            s.live += 1;
            s.all.push(a.clone());
        }
        let (p, me) = (self.clone(), a.clone());
        match thread::Builder::new()
            .name("ferry-rpc-activation")
            .spawn(move || p.run(&me))
        {
            Ok(h) => {
                let t = h.thread();
                if let Some(job) = &*a.mail.lock() {
                    t.set_priority(job.priority);
                }
                let _ = a.thread.set(t.clone());
                t.unpark();
                self.made.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(e) => {
                let mut s = self.state.lock();
                s.live -= 1;
                s.all.retain(|x| !Arc::ptr_eq(x, &a));
                Err(e.into())
            }
        }
    }

    /// An activation's life: serve the call in its mail, or a waiting one,
    /// else go back to the pool and park.
    fn run(self: &Arc<Self>, me: &Arc<Passive>) {
        // The thread handle is set just after spawn: wait for it (one
        // park at most; `make` unparks once it is set).
        while me.thread.get().is_none() {
            thread::park();
        }
        let mut buf = Vec::new();
        loop {
            let job = {
                let mut s = self.state.lock();
                if let Some(job) = me.mail.lock().take() {
                    Some(job)
                } else if !me.extra
                    && let Some(w) = s.waiting.pop()
                {
                    Some(w.job)
                } else if me.retired.load(Relaxed) {
                    // Counted off by `retire`.
                    return;
                } else if s.stopping || me.extra {
                    s.live -= 1;
                    s.all.retain(|x| !Arc::ptr_eq(x, me));
                    drop(s);
                    self.retired.fetch_add(1, Relaxed);
                    return;
                } else {
                    if !me.idle.swap(true, Relaxed) {
                        s.idle.push(me.clone());
                    }
                    None
                }
            };
            let Some(mut job) = job else {
                thread::park();
                continue;
            };
            loop {
                let chan = job.chan.clone();
                self.serve(me, job, &mut buf);
                // Unoccupied again with nothing else to run on this
                // processor: the activation takes its channel's next call
                // itself (no poller, no hand-off, no wake).
                let Some(index) = chan.next_call() else {
                    break;
                };
                let first = chan.slots.peek_word(index, 0).unwrap_or(0);
                job = Job {
                    seen: chan.stamp(),
                    chan,
                    index,
                    priority: logical::peek_priority(first),
                };
            }
        }
    }

    /// Serves one call on the current thread, the activation `me`.
    fn serve(&self, me: &Passive, job: Job, buf: &mut Vec<u8>) {
        let chan = &job.chan;
        if chan.closed.load(Relaxed) {
            return;
        }
        let Ok((call, len)) = chan.slots.read_call_into(job.index, buf) else {
            // Not a call (withdrawn, or scribbled on): nothing to answer.
            return;
        };
        let t = me.thread.get().expect("set before the first call");
        let pid = crate::sys::process_identity().0;
        let Ok((ctx, head)) = logical::decode(&buf[..len], pid) else {
            chan.answer(&call, Err(Fault::BadArgs), Duration::ZERO);
            return;
        };
        t.set_priority(ctx.incoming.priority);
        // Not moved again until it goes, after the record is cleared below.
        let frame = Frame::serving(ctx.incoming, chan.mem.peer());
        {
            // A new activation starts with alerts blocked (000 §5); one the
            // caller had before the call is pending.
            let mut serving = me.serving.lock();
            *serving = Some((
                Arc::as_ptr(chan) as usize,
                call.index,
                call.generation,
                ChainAt(frame.incoming_ptr()),
            ));
            let pending = ctx.alerted || chan.slots.signal_of(&call) != 0;
            t.header()
                .alert
                .store(BLOCKED | if pending { PENDING } else { 0 }, Release);
        }
        logical::enter(t, &frame);
        let run = crate::thread::RunSpan::start();
        let entered = chan.stamp();
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.handler.call(call.op, &buf[head..len])
        }))
        .unwrap_or(Err(Fault::Panicked));
        let returned = chan.stamp();
        // Its run time, or without accounting the time the call held the
        // activation.
        let spent = run.spent();
        logical::leave(t);
        *me.serving.lock() = None;
        chan.cpu_ns.fetch_add(spent.as_nanos() as u64, Relaxed);
        chan.answer(&call, answer, spent);
        chan.account_path(job.seen, entered, returned);
        // Its priority and alert bits are set afresh by the next call it
        // serves (an unoccupied activation runs nothing).
    }
}
