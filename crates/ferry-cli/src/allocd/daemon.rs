//! The daemon's loop: one `poll` over the registration socket, each
//! process's pidfd and registration socket, and a tick; at each event and
//! tick it reads every page, judges it, recomputes the allocation with the
//! policy and writes new orders where a process's cores change.
//!
//! This file owns the per-process record (what was ordered, what was
//! acknowledged, since when an order waits, fencing, credit) and the
//! faults: a process whose pidfd or socket turns readable is gone and its
//! cores are free at once; one that leaves an order unacknowledged for
//! [`GRACE`] is fenced (its cores count as free for the others until it
//! acknowledges again); one whose page holds words that cannot mean
//! anything is fenced likewise. It must not trust a page (every read goes
//! through `RuntimeWords::check`) and must not panic on anything a
//! process does.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use ferry::alloc::{Ack, CoreSet, OrderInfo, Registrar, Registration};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::policy::{self, Credit, Policy, ProcState};

/// How often the daemon looks at every page without an event.
pub const TICK: Duration = Duration::from_millis(10);

/// How long a process may leave an order unacknowledged before it is
/// fenced.
pub const GRACE: Duration = Duration::from_millis(500);

/// One registered process.
struct Proc {
    reg: Registration,
    pidfd: OwnedFd,
    pid: i32,
    /// The last order's generation (the daemon's own count).
    issued: u32,
    /// The last acknowledgement accepted.
    accepted: u32,
    /// The cores of the last order.
    cores: CoreSet,
    /// When the oldest unacknowledged order was issued.
    waiting_since: Option<Instant>,
    /// Why the process is fenced, if it is.
    fenced: Option<String>,
    credit: Credit,
    /// What its page said at the last good look.
    state: ProcState,
}

/// The daemon.
pub struct Daemon {
    registrar: Registrar,
    policy: Policy,
    cores: CoreSet,
    procs: Vec<Proc>,
    start: Instant,
    /// The allocation last logged.
    logged: String,
}

impl Daemon {
    /// A daemon sharing `cores` under `policy` among the processes that
    /// register with `registrar`.
    pub fn new(registrar: Registrar, policy: Policy, cores: CoreSet) -> Daemon {
        Daemon {
            registrar,
            policy,
            cores,
            procs: Vec::new(),
            start: Instant::now(),
            logged: String::new(),
        }
    }

    /// Serves until `stop` is set (a signal, which also ends the wait) or
    /// the registration socket fails; the socket is removed as the daemon
    /// drops.
    pub fn run(mut self, stop: &std::sync::atomic::AtomicBool) -> io::Result<()> {
        let mut next_tick = Instant::now();
        loop {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            let (registering, gone) = self.wait(wait)?;
            let mut changed = false;
            for (i, why) in gone.into_iter().rev() {
                let p = self.procs.remove(i);
                tracing::info!("gone pid={} ({why}); cores {} free", p.pid, p.cores);
                changed = true;
            }
            if registering {
                changed |= self.register();
            }
            if changed || Instant::now() >= next_tick {
                self.tick();
                next_tick = Instant::now() + TICK;
            }
        }
    }

    /// Polls for at most `wait`: whether a process waits to register, and
    /// the processes gone (index, why), in increasing index order.
    fn wait(&self, wait: Duration) -> io::Result<(bool, Vec<(usize, &'static str)>)> {
        let mut fds = Vec::with_capacity(1 + 2 * self.procs.len());
        fds.push(PollFd::new(&self.registrar, PollFlags::IN));
        for p in &self.procs {
            fds.push(PollFd::new(&p.pidfd, PollFlags::IN));
        }
        let sockets: Vec<_> = self.procs.iter().map(|p| p.reg.socket()).collect();
        for s in &sockets {
            fds.push(PollFd::new(s, PollFlags::IN | PollFlags::RDHUP));
        }
        let timeout = Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let head = fds[0].revents();
        if head.intersects(PollFlags::ERR | PollFlags::NVAL) {
            return Err(io::Error::other("the registration socket failed"));
        }
        let n = self.procs.len();
        let gone = (0..n)
            .filter_map(|i| {
                if !fds[1 + i].revents().is_empty() {
                    Some((i, "exited"))
                } else if !fds[1 + n + i].revents().is_empty() {
                    Some((i, "closed its registration"))
                } else {
                    None
                }
            })
            .collect();
        Ok((head.contains(PollFlags::IN), gone))
    }

    /// Registers the process waiting on the socket; whether one was added.
    fn register(&mut self) -> bool {
        let reg = match self.registrar.accept() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("a registration failed: {e}");
                return false;
            }
        };
        let pid = reg.pid();
        let pidfd = match reg.pidfd() {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!("pid={pid} registered but is gone: {e}");
                return false;
            }
        };
        tracing::info!("registered pid={pid}");
        self.procs.push(Proc {
            reg,
            pidfd,
            pid,
            issued: 0,
            accepted: 0,
            cores: CoreSet::new(),
            waiting_since: None,
            fenced: None,
            credit: Credit::default(),
            state: ProcState::new(1, 0),
        });
        true
    }

    /// Reads every page, fences and lets go, recomputes and orders.
    fn tick(&mut self) {
        let now = Instant::now();
        let ncores = self.cores.len();
        for p in &mut self.procs {
            look_at(p, ncores, now);
        }
        let active: Vec<usize> = (0..self.procs.len())
            .filter(|&i| self.procs[i].fenced.is_none())
            .collect();
        let states: Vec<ProcState> = active
            .iter()
            .map(|&i| {
                let p = &self.procs[i];
                ProcState {
                    held: p.cores.len(),
                    priority: p.credit.priority(),
                    ..p.state
                }
            })
            .collect();
        let prev: Vec<CoreSet> = active.iter().map(|&i| self.procs[i].cores).collect();
        let epoch = (self.start.elapsed().as_millis() / policy::ROTATION.as_millis()) as u64;
        let sets = policy::allocate(self.policy, &self.cores, &states, &prev, epoch);
        let caps: Vec<usize> = states.iter().map(|s| s.desired).collect();
        let fair = policy::fair_shares(ncores, &caps);
        let mut target = vec![CoreSet::new(); self.procs.len()];
        for (k, &i) in active.iter().enumerate() {
            target[i] = sets[k];
            // With more processes than cores, each one's share is a
            // fraction of a core, whatever the turn.
            let share_milli = if active.len() > ncores {
                (ncores * 1000 / active.len()) as i64
            } else {
                fair[k] as i64 * 1000
            };
            self.procs[i].credit.sample(share_milli, sets[k].len());
        }
        for (i, p) in self.procs.iter_mut().enumerate() {
            let fair_share = active.iter().position(|&a| a == i).map_or(0, |k| fair[k]);
            if target[i] != p.cores || p.issued == 0 {
                order(p, target[i], fair_share, now);
            }
        }
        self.log_allocation();
    }

    /// Logs the allocation when it changed.
    fn log_allocation(&mut self) {
        let mut line = String::from("allocation");
        for p in &self.procs {
            let cores = if p.cores.is_empty() {
                "-".to_string()
            } else {
                p.cores.to_string()
            };
            let fenced = if p.fenced.is_some() { "(fenced)" } else { "" };
            line.push_str(&format!(" {}={cores}{fenced}", p.pid));
        }
        if line != self.logged {
            tracing::info!("{line}");
            self.logged = line;
        }
    }
}

/// Reads and judges one process's page: takes its desire and idle
/// processors, accepts its acknowledgement, fences it or lets it go.
fn look_at(p: &mut Proc, ncores: usize, now: Instant) {
    let words = p.reg.page().runtime_words();
    match words.check(ncores, p.issued, p.accepted) {
        Err(bad) => {
            if p.fenced.is_none() {
                fence(p, format!("malformed page: {bad}"));
            }
        }
        Ok(c) => {
            p.state.desired = c.desired;
            p.state.max_processors = c.max_processors;
            p.state.willing = c.willing;
            match c.ack {
                Ack::Current => {
                    p.accepted = p.issued;
                    p.waiting_since = None;
                    if p.fenced.take().is_some() {
                        p.reg.page().set_fenced(false);
                        tracing::info!(
                            "pid={} acknowledged order {}: no longer fenced",
                            p.pid,
                            p.issued
                        );
                    }
                }
                Ack::Behind => {
                    if let Some(since) = p.waiting_since
                        && now.duration_since(since) > GRACE
                        && p.fenced.is_none()
                    {
                        let why = format!(
                            "order {} not acknowledged within {} ms",
                            p.issued,
                            GRACE.as_millis()
                        );
                        fence(p, why);
                    }
                }
                // (`check` returns these as errors; fenced all the same.)
                Ack::Malformed => {
                    if p.fenced.is_none() {
                        fence(p, format!("malformed page: acked {:#x}", words.acked));
                    }
                }
            }
        }
    }
}

/// Fences `p`: its cores count as free for the others from this tick on.
fn fence(p: &mut Proc, why: String) {
    tracing::warn!("fenced pid={}: {why}", p.pid);
    p.reg.page().set_fenced(true);
    p.fenced = Some(why);
}

/// Orders `p` to own `cores`.
fn order(p: &mut Proc, cores: CoreSet, fair_share: usize, now: Instant) {
    let info = OrderInfo {
        fair_share: fair_share as u32,
        priority: p.credit.priority(),
        credit_milli: p.credit.milli(),
    };
    p.issued = p.reg.page().publish_order(p.issued, &cores, info);
    p.cores = cores;
    p.waiting_since.get_or_insert(now);
}
