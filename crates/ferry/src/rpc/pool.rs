//! The static model's pool of service threads (Mach): calls handed over by
//! the pollers wait in one line and run on reused threads in arrival order;
//! a thread that finds the line empty parks until a call comes.
//!
//! This module owns the line, the idle threads and growth; it must not
//! touch a channel (a [`Job`] serves itself through its channel).
//!
//! # State (under `state`'s spinlock)
//!
//! | field | written by | meaning |
//! |-------|------------|---------|
//! | `work` | pollers push, threads pop | calls not yet taken |
//! | `idle` | a thread pushes itself before parking; a poller pops one to wake it | threads parked for work |
//! | `threads` | the keeper (+1 per spawn), a thread that leaves (−1) | threads alive |
//! | `grow` | a poller that found no idle thread, below the maximum | the keeper should spawn |
//!
//! A poller never spawns (it runs inside a processor's scheduling): it
//! wakes the keeper, a ferry thread that spawns while calls wait and no
//! thread is idle, up to the maximum. A thread pushes itself on `idle` and
//! parks in the same critical section order as the poller pops and
//! unparks it, so a wake before the park is kept as the park token.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use super::call::Handler;
use super::error::Result;
use crate::runtime::Handle;
use crate::sync::SpinLock;
use crate::thread::{self, Thread};

/// The default most threads serving at once per server.
pub(crate) const DEFAULT_MAX_THREADS: usize = 64;

/// One call to serve (the server's: a channel and a slot).
pub(crate) trait Job: Send + 'static {
    /// Serves the call with `handler`, on a pool thread.
    fn run(self, handler: &dyn Handler);
}

struct State<J> {
    work: VecDeque<J>,
    idle: Vec<Thread>,
    threads: usize,
    grow: bool,
    stopping: bool,
}

impl<J> Default for State<J> {
    fn default() -> Self {
        State {
            work: VecDeque::new(),
            idle: Vec::new(),
            threads: 0,
            grow: false,
            stopping: false,
        }
    }
}

/// The pool of one server.
pub(crate) struct Pool<J> {
    state: SpinLock<State<J>>,
    handler: Arc<dyn Handler>,
    max: usize,
    keeper: OnceLock<Thread>,
}

impl<J: Job> Pool<J> {
    /// Starts a pool of `start` threads (at most `max`) in `runtime`,
    /// serving with `handler`; it grows on demand up to `max` (a fixed
    /// pool when `start` is `max`).
    pub(crate) fn start(
        runtime: &Handle,
        handler: Arc<dyn Handler>,
        start: usize,
        max: usize,
    ) -> Result<Arc<Pool<J>>> {
        let pool = Arc::new(Pool {
            state: SpinLock::new(State::default()),
            handler,
            max,
            keeper: OnceLock::new(),
        });
        let p = pool.clone();
        let keeper = runtime.spawn(move || p.keep())?;
        let _ = pool.keeper.set(keeper.thread());
        for _ in 0..start.min(max) {
            pool.state.lock().threads += 1;
            let p = pool.clone();
            runtime.spawn(move || p.work())?;
        }
        Ok(pool)
    }

    /// Hands a call over (from a poller).
    pub(crate) fn submit(&self, job: J) {
        let mut s = self.state.lock();
        if s.stopping {
            return;
        }
        s.work.push_back(job);
        if let Some(t) = s.idle.pop() {
            drop(s);
            t.unpark();
        } else if s.threads < self.max && !s.grow {
            s.grow = true;
            drop(s);
            if let Some(k) = self.keeper.get() {
                k.unpark();
            }
        }
    }

    /// Stops the pool: waiting calls are dropped, threads leave after
    /// their current call.
    pub(crate) fn stop(&self) {
        let (idle, work) = {
            let mut s = self.state.lock();
            s.stopping = true;
            (std::mem::take(&mut s.idle), std::mem::take(&mut s.work))
        };
        drop(work);
        for t in idle {
            t.unpark();
        }
        if let Some(k) = self.keeper.get() {
            k.unpark();
        }
    }

    /// Threads alive now.
    pub(crate) fn threads(&self) -> usize {
        self.state.lock().threads
    }

    /// A pool thread's loop.
    fn work(self: Arc<Self>) {
        let me = thread::current();
        loop {
            let mut s = self.state.lock();
            if let Some(job) = s.work.pop_front() {
                drop(s);
                job.run(&*self.handler);
                continue;
            }
            if s.stopping {
                s.threads -= 1;
                return;
            }
            if !s.idle.iter().any(|t| t.id() == me.id()) {
                s.idle.push(me.clone());
            }
            drop(s);
            thread::park();
        }
    }

    /// The keeper's loop: spawns threads while calls wait and none is idle.
    fn keep(self: Arc<Self>) {
        loop {
            thread::park();
            loop {
                let mut s = self.state.lock();
                if s.stopping {
                    return;
                }
                s.grow = false;
                if s.work.is_empty() || !s.idle.is_empty() || s.threads >= self.max {
                    break;
                }
                s.threads += 1;
                drop(s);
                let p = self.clone();
                if thread::Builder::new()
                    .name("ferry-rpc-serve")
                    .spawn(move || p.work())
                    .is_err()
                {
                    self.state.lock().threads -= 1;
                    break;
                }
            }
        }
    }
}
