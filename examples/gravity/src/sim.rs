//! The simulation: its settings, its workers' phases and its report.
//!
//! This room owns the time loop: which phase does what, which worker owns
//! which part of the shared state in each phase (the table below), and the
//! sums the report gives. It must not build trees or compute forces itself
//! (`tree` does) nor start threads (`threads` does); and nothing it
//! computes may depend on the number of workers or the kind of threads: a
//! body's force is found by one worker, from the same tree, in the same
//! order, whoever that worker is, and the sums are taken in the bodies'
//! order by one thread.
//!
//! # Phases of a round
//! The workers start once and meet at a barrier after each phase. Round 0
//! only finds the first forces and energy; each later round finishes one
//! time step (kick–drift–kick leapfrog, time step `dt`).
//!
//! | phase | who | writes | reads |
//! |-------|-----|--------|-------|
//! | 1 build | worker 0 alone (the others wait at the barrier) | everything: sorts the bodies, builds the tree, sizes the moments, sums the first round's energy | everything |
//! | 2 moments | each worker its share of the depth-2 subtrees | `moments` of those subtrees' nodes | tree, all bodies |
//! | 3 forces | each worker its body range | `acc`, `pot` of its bodies | tree, all bodies, all moments |
//! | 4 kick, sums | each worker its body range | its bodies (v += a dt/2 after round 0), `terms` of its bodies | its `acc`, `pot` |
//! | 5 kick, drift | each worker its body range (not in the last round) | its bodies (v += a dt/2, x += v dt) | its `acc` |
//!
//! A body range is `n w / W .. n (w + 1) / W` of the bodies in the tree's
//! order (bodies near each other walk the tree alike). The barrier between
//! phases 4 and 5 is not needed for their own sake (each touches only its
//! own bodies); it keeps the program's shape that of 004 §5.3, four
//! parallel phases with a barrier between each, because that shape is
//! what the program is for.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::body::{Body, axpy, plummer};
use crate::phased::{Phased, Slots};
use crate::threads::{Failed, Team, Threads, run_team};
use crate::tree::{Moment, Tree};

/// The settings of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Bodies (at least 2).
    pub bodies: usize,
    /// Time steps.
    pub steps: usize,
    /// Worker threads (at least 1).
    pub workers: usize,
    /// Opening angle: a cell of side s at distance r is taken whole when
    /// s < theta r (0 gives direct summation).
    pub theta: f64,
    /// Time step.
    pub dt: f64,
    /// Plummer softening length (positive).
    pub softening: f64,
    /// Seed of the initial conditions.
    pub seed: u64,
}

impl Default for Config {
    /// 4096 bodies, 10 steps, 1 worker, theta 0.5, dt 1/128, softening
    /// 0.05, seed 1.
    fn default() -> Config {
        Config {
            bodies: 4096,
            steps: 10,
            workers: 1,
            theta: 0.5,
            dt: 1.0 / 128.0,
            softening: 0.05,
            seed: 1,
        }
    }
}

/// Most bodies (body indices are 32-bit).
pub const MAX_BODIES: usize = u32::MAX as usize / 2;

/// A setting the simulation cannot run with.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// Fewer than 2 bodies, or more than [`MAX_BODIES`].
    Bodies(usize),
    /// No workers.
    Workers,
    /// An opening angle that is negative or not finite.
    Theta(f64),
    /// A time step that is not positive and finite.
    Dt(f64),
    /// A softening length that is not positive and finite.
    Softening(f64),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Bodies(n) => write!(f, "{n} bodies: need 2 to {MAX_BODIES}"),
            ConfigError::Workers => write!(f, "need at least one worker"),
            ConfigError::Theta(t) => write!(f, "opening angle {t}: need a finite value >= 0"),
            ConfigError::Dt(t) => write!(f, "time step {t}: need a finite value > 0"),
            ConfigError::Softening(e) => write!(f, "softening {e}: need a finite value > 0"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Checks every setting.
    ///
    /// # Errors
    /// The first setting out of its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(2..=MAX_BODIES).contains(&self.bodies) {
            return Err(ConfigError::Bodies(self.bodies));
        }
        if self.workers == 0 {
            return Err(ConfigError::Workers);
        }
        if !(self.theta.is_finite() && self.theta >= 0.0) {
            return Err(ConfigError::Theta(self.theta));
        }
        if !(self.dt.is_finite() && self.dt > 0.0) {
            return Err(ConfigError::Dt(self.dt));
        }
        if !(self.softening.is_finite() && self.softening > 0.0) {
            return Err(ConfigError::Softening(self.softening));
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug)]
pub enum Error {
    /// A bad setting.
    Config(ConfigError),
    /// The threads could not be run.
    Threads(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => write!(f, "bad setting: {e}"),
            Error::Threads(e) => write!(f, "cannot run the workers: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Energy and momentum of the whole system at one time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Kinetic energy.
    pub kinetic: f64,
    /// Potential energy (softened, as the forces).
    pub potential: f64,
    /// Total momentum.
    pub momentum: [f64; 3],
}

impl Totals {
    /// Kinetic plus potential energy.
    pub fn energy(&self) -> f64 {
        self.kinetic + self.potential
    }
}

/// What a run gives back.
#[derive(Debug, Clone)]
pub struct Report {
    /// Wall time of the run, from before the threads start to after they
    /// finished (a ferry runtime's start and end included).
    pub elapsed: Duration,
    /// Time worker 0 spent in each of the five phases over the run, each
    /// from the phase's start to its leaving the barrier that ends it (so
    /// the parallel phases include the wait for the slowest worker).
    pub phases: [Duration; 5],
    /// Energy and momentum at the start.
    pub start: Totals,
    /// Energy and momentum at the end.
    pub end: Totals,
    /// The bodies at the end, in id order.
    pub bodies: Vec<Body>,
}

impl Report {
    /// |E_end - E_start| / |E_start|.
    pub fn drift(&self) -> f64 {
        ((self.end.energy() - self.start.energy()) / self.start.energy()).abs()
    }
}

/// One body's share of the totals.
#[derive(Debug, Clone, Copy, Default)]
struct Terms {
    kinetic: f64,
    potential: f64,
    momentum: [f64; 3],
}

/// Everything the workers share (see the phase table).
struct State {
    tree: Tree,
    bodies: Slots<Body>,
    moments: Slots<Moment>,
    acc: Slots<[f64; 3]>,
    pot: Slots<f64>,
    terms: Slots<Terms>,
    start: Option<Totals>,
}

impl State {
    /// The totals of the `terms`, summed in the bodies' order.
    fn totals(&mut self) -> Totals {
        let mut t = Totals::default();
        for x in self.terms.as_mut().iter() {
            t.kinetic += x.kinetic;
            t.potential += x.potential;
            for d in 0..3 {
                t.momentum[d] += x.momentum[d];
            }
        }
        t
    }
}

/// Runs the simulation `cfg` from a Plummer sphere on threads of `kind`.
///
/// # Errors
/// [`Error::Config`] for a bad setting, [`Error::Threads`] if the workers
/// cannot run.
pub fn simulate<K: Threads>(cfg: &Config, kind: &K) -> Result<Report, Error> {
    cfg.validate().map_err(Error::Config)?;
    let n = cfg.bodies;
    let initial = plummer(n, cfg.seed);
    let mut bodies = Slots::new(n, initial[0]);
    bodies.as_mut().copy_from_slice(&initial);
    let state = Arc::new(Phased::new(State {
        tree: Tree::default(),
        bodies,
        moments: Slots::new(0, Moment::default()),
        acc: Slots::new(n, [0.0; 3]),
        pot: Slots::new(n, 0.0),
        terms: Slots::new(n, Terms::default()),
        start: None,
    }));
    let phases = Arc::new(Mutex::new([Duration::ZERO; 5]));
    let t0 = Instant::now();
    {
        let (state, cfg) = (Arc::clone(&state), cfg.clone());
        let phases = Arc::clone(&phases);
        run_team(kind, cfg.workers, move |w, team| {
            let times = worker(w, &cfg, &state, team);
            if let (0, Ok(times)) = (w, times) {
                *phases.lock().unwrap_or_else(PoisonError::into_inner) = times;
            }
        })
        .map_err(Error::Threads)?;
    }
    let elapsed = t0.elapsed();
    // SAFETY: every worker has finished (`run_team` returned `Ok` only
    // after joining them all): this is the only reference.
    let st = unsafe { &mut *state.get() };
    let end = st.totals();
    let mut bodies = st.bodies.as_mut().to_vec();
    bodies.sort_by_key(|b| b.id);
    let phases = *phases.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(Report {
        elapsed,
        phases,
        start: st.start.unwrap_or(end),
        end,
        bodies,
    })
}

/// The `w`-th of `workers` contiguous shares of `0..n`.
fn share(n: usize, w: usize, workers: usize) -> std::ops::Range<usize> {
    n * w / workers..n * (w + 1) / workers
}

/// Worker `w`'s rounds (see the phase table); returns the time it spent in
/// each phase, or [`Failed`] if another worker panicked.
fn worker<K: Threads>(
    w: usize,
    cfg: &Config,
    state: &Phased<State>,
    team: &Team<K>,
) -> Result<[Duration; 5], Failed> {
    let mut times = [Duration::ZERO; 5];
    let mut clock = Instant::now();
    let mut lap = |phase: usize| {
        let now = Instant::now();
        times[phase] += now - clock;
        clock = now;
    };
    let mine = share(cfg.bodies, w, cfg.workers);
    let (eps2, h) = (cfg.softening * cfg.softening, 0.5 * cfg.dt);
    let mut stack = Vec::new();
    for round in 0..=cfg.steps {
        if w == 0 {
            // SAFETY: phase 1: the other workers wait at the barrier below
            // and hold no reference (theirs ended before the barrier that
            // ended the last round).
            let st = unsafe { &mut *state.get() };
            if round == 1 {
                st.start = Some(st.totals());
            }
            st.tree.build(st.bodies.as_mut());
            let nodes = st.tree.nodes.len();
            st.moments.resize(nodes, Moment::default());
        }
        team.wait()?;
        lap(0);
        // SAFETY: phases 2 to 5: nobody holds a `&mut` of the state until worker 0's
        // next phase 1, after the round's last barrier.
        let st = unsafe { &*state.get() };

        // Phase 2: the moments of this worker's depth-2 subtrees, shared
        // out by node count.
        {
            let total: usize = st
                .tree
                .subtrees
                .iter()
                .map(|&r| st.tree.subtree(r).len())
                .sum();
            // SAFETY: phase 2 writes no body.
            let bodies = unsafe { st.bodies.all() };
            let mut before = 0;
            for &root in &st.tree.subtrees {
                let range = st.tree.subtree(root);
                let len = range.len();
                if before * cfg.workers / total == w {
                    // SAFETY: phase 2: subtrees are disjoint node ranges,
                    // each given to one worker; nobody reads moments.
                    let moments = unsafe { &mut *st.moments.range(range.clone()) };
                    st.tree.moments(range, bodies, moments);
                }
                before += len;
            }
        }
        team.wait()?;
        lap(1);

        // Phase 3: the forces on this worker's bodies.
        {
            // SAFETY: phase 3 writes no body and no moment.
            let (bodies, moments) = unsafe { (st.bodies.all(), st.moments.all()) };
            // SAFETY: phase 3: body ranges are disjoint, one per worker;
            // nobody reads `acc` or `pot`.
            let (acc, pot) = unsafe {
                (
                    &mut *st.acc.range(mine.clone()),
                    &mut *st.pot.range(mine.clone()),
                )
            };
            for (j, k) in mine.clone().enumerate() {
                let (a, p) = st
                    .tree
                    .force(bodies, moments, k, cfg.theta, eps2, &mut stack);
                acc[j] = a;
                pot[j] = p;
            }
        }
        team.wait()?;
        lap(2);

        // Phase 4: close the step (after round 0), and this worker's share
        // of the totals.
        {
            // SAFETY: phase 4 writes neither `acc` nor `pot`.
            let (acc, pot) = unsafe { (&st.acc.all()[mine.clone()], &st.pot.all()[mine.clone()]) };
            // SAFETY: phase 4: body ranges are disjoint, one per worker;
            // nobody reads other workers' bodies or terms.
            let (bodies, terms) = unsafe {
                (
                    &mut *st.bodies.range(mine.clone()),
                    &mut *st.terms.range(mine.clone()),
                )
            };
            for (j, b) in bodies.iter_mut().enumerate() {
                if round > 0 {
                    axpy(&mut b.vel, h, &acc[j]);
                }
                let v2 = b.vel[0] * b.vel[0] + b.vel[1] * b.vel[1] + b.vel[2] * b.vel[2];
                terms[j] = Terms {
                    kinetic: 0.5 * b.mass * v2,
                    potential: 0.5 * b.mass * pot[j],
                    momentum: b.vel.map(|v| b.mass * v),
                };
            }
        }
        team.wait()?;
        lap(3);

        // Phase 5: open the next step.
        if round < cfg.steps {
            // SAFETY: phase 5 writes no `acc`.
            let acc = unsafe { &st.acc.all()[mine.clone()] };
            // SAFETY: phase 5: body ranges are disjoint, one per worker.
            let bodies = unsafe { &mut *st.bodies.range(mine.clone()) };
            for (j, b) in bodies.iter_mut().enumerate() {
                axpy(&mut b.vel, h, &acc[j]);
                axpy(&mut b.pos, cfg.dt, &b.vel);
            }
        }
        team.wait()?;
        lap(4);
    }
    Ok(times)
}
