//! The allocation policies, as pure functions: from the cores and what
//! each registered process said (and had), the cores each process owns
//! next.
//!
//! This file owns the decisions: [`Policy`] (Dynamic, Equipartition,
//! PassThrough), fair shares, credit and priority, gang rotation when
//! processes outnumber cores, and the placement that keeps a process's
//! cores where they were. It must not read pages, clocks or sockets: the
//! daemon hands it numbers and writes what it returns.
//!
//! Dynamic (004 §3, McCann, Vaswani and Zahorjan), over the processes in
//! turn, starting from what each held, capped at what it desires:
//!
//! 0. each process in turn owns at least one core (the runtime's minimum
//!    is one processor);
//! 1. free cores go to processes whose count < desired, in decreasing
//!    priority order (one at a time: among equals, the one with fewest
//!    first);
//! 2. then cores whose processors are marked willing to yield (idle) go
//!    the same way, each process keeping at least one core;
//! 3. then cores are taken from the lowest-priority processes (down to
//!    one core each) and given to the highest-priority ones still short,
//!    while the giver's priority is below the taker's;
//! 4. what remains is shared by equipartition among processes of equal
//!    priority: a process above its fair share gives to one of the same
//!    priority below its own (unless that one has idle processors);
//! 5. cores nobody took stay with the process that held them, beyond its
//!    desire: a core is taken from a process only for another that wants
//!    it, so a sequential phase costs no processor change each way.
//!
//! `fair_share` is the equipartition of the cores with each process capped
//! at its desire (water-filling); `credit` is the running mean of
//! `fair_share - count` (positive for a process that used less than its
//! share); `priority` is the credit discretised to half processors, from
//! 0 to 16 (8 is no credit), higher first.
//!
//! When processes outnumber cores (Dynamic and Equipartition), only as
//! many processes as cores are in turn, one core each; the turn moves by
//! that many processes every [`ROTATION`] (the daemon counts the epochs),
//! so whole cores rotate and no process has two processors on one core.

use std::time::Duration;

use ferry::alloc::CoreSet;

/// How long one turn lasts when processes outnumber cores.
pub const ROTATION: Duration = Duration::from_millis(100);

/// The priority of a process with no credit.
pub const NEUTRAL_PRIORITY: u32 = 8;

/// How many samples the running mean of credit averages over at most
/// (then it forgets the oldest gradually: 10 s at the daemon's tick).
pub const CREDIT_WINDOW: i64 = 1000;

/// Which policy the daemon runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// 004 §3: by desire and priority, idle cores moved, then equipartition.
    Dynamic,
    /// Each process the same number of cores (capped by its processors).
    Equipartition,
    /// Every process owns every core (as without a daemon).
    PassThrough,
}

/// What the policy knows of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcState {
    /// Processors it wants (clamped by the daemon: at least 1).
    pub desired: usize,
    /// Processors it may have at most.
    pub max_processors: usize,
    /// Cores it owned after the last allocation.
    pub held: usize,
    /// Of those, how many have a processor willing to yield.
    pub willing: usize,
    /// Its priority (higher first).
    pub priority: u32,
}

impl ProcState {
    /// A process that wants `desired` of up to 64 processors and held
    /// `held` cores, none idle, of neutral priority.
    pub fn new(desired: usize, held: usize) -> ProcState {
        ProcState {
            desired,
            max_processors: 64,
            held,
            willing: 0,
            priority: NEUTRAL_PRIORITY,
        }
    }
}

/// Equipartition of `cores` among processes capped at `caps`
/// (water-filling: nobody gets more than its cap, and what a capped
/// process leaves is shared by the others). Ties for the remainder go to
/// the lower index.
pub fn fair_shares(cores: usize, caps: &[usize]) -> Vec<usize> {
    let mut share = vec![0usize; caps.len()];
    let mut left = cores;
    loop {
        let open: Vec<usize> = (0..caps.len()).filter(|&i| share[i] < caps[i]).collect();
        if open.is_empty() || left == 0 {
            return share;
        }
        let each = (left / open.len()).max(1);
        for i in open {
            if left == 0 {
                break;
            }
            let add = each.min(caps[i] - share[i]).min(left);
            share[i] += add;
            left -= add;
        }
    }
}

/// Which processes are in turn in rotation `epoch`: all if they do not
/// outnumber the cores, else `cores` of them, moving on by `cores` each
/// epoch.
pub fn in_turn(processes: usize, cores: usize, epoch: u64) -> Vec<bool> {
    if processes <= cores {
        return vec![true; processes];
    }
    let start = (epoch as u128 * cores as u128 % processes as u128) as usize;
    let mut turn = vec![false; processes];
    for k in 0..cores {
        turn[(start + k) % processes] = true;
    }
    turn
}

/// How many cores each process owns next under `policy`, with `cores`
/// cores, in rotation `epoch`.
pub fn counts(policy: Policy, cores: usize, procs: &[ProcState], epoch: u64) -> Vec<usize> {
    if policy == Policy::PassThrough {
        return procs.iter().map(|p| cores.min(p.max_processors)).collect();
    }
    let turn = in_turn(procs.len(), cores, epoch);
    let idx: Vec<usize> = (0..procs.len()).filter(|&i| turn[i]).collect();
    let sub: Vec<ProcState> = idx.iter().map(|&i| procs[i]).collect();
    let sub_counts = match policy {
        Policy::Equipartition => {
            let caps: Vec<usize> = sub.iter().map(|p| p.max_processors.max(1)).collect();
            fair_shares(cores, &caps)
        }
        Policy::Dynamic => dynamic(cores, &sub),
        Policy::PassThrough => unreachable!("handled above"),
    };
    let mut out = vec![0; procs.len()];
    for (k, &i) in idx.iter().enumerate() {
        out[i] = sub_counts[k];
    }
    out
}

/// Dynamic over processes all in turn (no more of them than cores).
fn dynamic(cores: usize, procs: &[ProcState]) -> Vec<usize> {
    let want: Vec<usize> = procs
        .iter()
        .map(|p| p.desired.clamp(1, p.max_processors.max(1)))
        .collect();
    let fair = fair_shares(cores, &want);
    let mut c: Vec<usize> = procs
        .iter()
        .zip(&want)
        .map(|(p, &w)| p.held.min(w))
        .collect();
    // A previous allocation over more cores than now: trim the largest.
    while c.iter().sum::<usize>() > cores {
        let i = (0..c.len())
            .max_by_key(|&i| (c[i], i))
            .expect("some process");
        c[i] -= 1;
    }
    let pri = |i: usize| procs[i].priority;
    let needy = |c: &[usize], i: usize| c[i] < want[i];
    // The neediest process by priority, then fewest cores, then index.
    let next_taker = |c: &[usize], skip: Option<usize>| {
        (0..c.len())
            .filter(|&i| needy(c, i) && Some(i) != skip)
            .max_by_key(|&i| (pri(i), std::cmp::Reverse(c[i]), std::cmp::Reverse(i)))
    };
    let mut free = cores - c.iter().sum::<usize>();
    // 0. Every process in turn owns a core (the runtime's minimum is one
    // processor): from the free cores, else from the largest holder.
    for t in 0..c.len() {
        if c[t] > 0 {
            continue;
        }
        if free > 0 {
            free -= 1;
        } else {
            let d = (0..c.len())
                .max_by_key(|&i| (c[i], i))
                .expect("some process");
            if c[d] < 2 {
                break;
            }
            c[d] -= 1;
        }
        c[t] = 1;
    }
    // 1. Free cores.
    while free > 0 {
        let Some(t) = next_taker(&c, None) else {
            break;
        };
        c[t] += 1;
        free -= 1;
    }
    // 2. Cores willing to yield.
    let mut yielding: Vec<usize> = (0..c.len())
        .map(|i| procs[i].willing.min(c[i].saturating_sub(1)))
        .collect();
    for d in 0..c.len() {
        while yielding[d] > 0 {
            let Some(t) = next_taker(&c, Some(d)) else {
                break;
            };
            c[d] -= 1;
            c[t] += 1;
            yielding[d] -= 1;
        }
    }
    // 3. From low priority to high.
    while let Some(t) = next_taker(&c, None) {
        let giver = (0..c.len())
            .filter(|&d| d != t && c[d] > 1 && pri(d) < pri(t))
            .min_by_key(|&d| (pri(d), std::cmp::Reverse(c[d]), std::cmp::Reverse(d)));
        let Some(d) = giver else {
            break;
        };
        c[d] -= 1;
        c[t] += 1;
    }
    // 4. Equipartition among equal priority.
    loop {
        let taker = (0..c.len())
            .filter(|&i| c[i] < fair[i].min(want[i]) && procs[i].willing == 0)
            .max_by_key(|&i| (fair[i] - c[i], std::cmp::Reverse(i)));
        let Some(t) = taker else {
            break;
        };
        let giver = (0..c.len())
            .filter(|&d| d != t && pri(d) == pri(t) && c[d] > fair[d].max(1))
            .max_by_key(|&d| (c[d] - fair[d], std::cmp::Reverse(d)));
        let Some(d) = giver else {
            break;
        };
        c[d] -= 1;
        c[t] += 1;
    }
    // 5. Cores nobody wants stay where they were: a process whose desire
    // fell keeps what it held until another wants it (its idle processors
    // say so by yielding), so a brief dip (a sequential phase) costs no
    // processor change each way.
    let mut free = cores.saturating_sub(c.iter().sum::<usize>());
    for i in 0..c.len() {
        let back = procs[i]
            .held
            .min(procs[i].max_processors.max(1))
            .saturating_sub(c[i])
            .min(free);
        c[i] += back;
        free -= back;
    }
    c
}

/// Which cores each process owns, given how many (`counts`), what each
/// owned before (`prev`) and the cores to share: each keeps as many of its
/// own as it may (lowest first), and takes the rest from the free cores,
/// lowest first. The sets are disjoint (PassThrough's are not placed: each
/// gets `cores` whole, see [`allocate`]).
pub fn place(cores: &CoreSet, prev: &[CoreSet], counts: &[usize]) -> Vec<CoreSet> {
    let mut taken = CoreSet::new();
    let mut out = vec![CoreSet::new(); counts.len()];
    for (i, &n) in counts.iter().enumerate() {
        let own = prev
            .get(i)
            .map_or(CoreSet::new(), |p| p.intersection(cores));
        let keep: Vec<usize> = own.iter().filter(|&c| !taken.contains(c)).take(n).collect();
        for core in keep {
            out[i].insert(core);
            taken.insert(core);
        }
    }
    for (i, &n) in counts.iter().enumerate() {
        while out[i].len() < n {
            let Some(core) = cores.iter().find(|&c| !taken.contains(c)) else {
                break;
            };
            out[i].insert(core);
            taken.insert(core);
        }
    }
    out
}

/// The whole decision: each process's cores under `policy` in rotation
/// `epoch`, given what each owned before (`prev`).
pub fn allocate(
    policy: Policy,
    cores: &CoreSet,
    procs: &[ProcState],
    prev: &[CoreSet],
    epoch: u64,
) -> Vec<CoreSet> {
    let n = counts(policy, cores.len(), procs, epoch);
    if policy == Policy::PassThrough {
        return n.iter().map(|&k| cores.iter().take(k).collect()).collect();
    }
    place(cores, prev, &n)
}

/// A process's credit: the running mean of `fair_share - count`, in
/// thousandths of a processor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Credit {
    mean_milli: i64,
    samples: i64,
}

impl Credit {
    /// Adds one sample (taken at each tick): the fair share in
    /// thousandths of a processor (a fraction when processes outnumber
    /// cores) and the cores owned.
    pub fn sample(&mut self, fair_share_milli: i64, count: usize) {
        let x = fair_share_milli - count as i64 * 1000;
        self.samples = (self.samples + 1).min(CREDIT_WINDOW);
        self.mean_milli += (x - self.mean_milli) / self.samples;
    }

    /// The mean, in thousandths of a processor.
    pub fn milli(&self) -> i64 {
        self.mean_milli
    }

    /// The priority: the credit in half processors, rounded to nearest,
    /// clamped to ±8, plus [`NEUTRAL_PRIORITY`].
    pub fn priority(&self) -> u32 {
        let halves = (self.mean_milli + 250 * self.mean_milli.signum()) / 500;
        (halves.clamp(-8, 8) + NEUTRAL_PRIORITY as i64) as u32
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
