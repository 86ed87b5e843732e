//! 004 Figure 2: two threads ping-pong on a shared structure on two cores
//! while one core is disrupted, under three regimes (suspension and
//! time-slicing of kernel threads, ferry's activations), and the rows,
//! notes and plot made of the runs.
//!
//! This module owns the regimes, their disruptors and the figure; the
//! schedule is [`super`]'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::sys::*;
use super::{EXPERIMENT, Plan};
use crate::affinity;
use crate::plot;
use crate::report::{Ratio, Section};
use crate::row::{Row, Unit};
use crate::watchdog::hang;

/// The regimes of Figure 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Regime {
    /// Kernel threads; the victim is stopped by a signal whose handler sleeps.
    Suspension,
    /// Kernel threads; a hog spins on the victim core.
    TimeSlicing,
    /// ferry threads; the victim processor is removed from the set.
    Ferry,
}

impl Regime {
    /// Every regime, in report order.
    const ALL: [Regime; 3] = [Regime::Suspension, Regime::TimeSlicing, Regime::Ferry];

    /// The regime's name in tables, JSON and the plot.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Suspension => "suspension",
            Regime::TimeSlicing => "time-slicing",
            Regime::Ferry => "ferry activations",
        }
    }

    /// The plot colour.
    fn color(self) -> plotters::style::RGBColor {
        match self {
            Regime::Suspension => plotters::style::RGBColor(200, 40, 40),
            Regime::TimeSlicing => plotters::style::RGBColor(40, 90, 200),
            Regime::Ferry => plotters::style::RGBColor(30, 150, 60),
        }
    }

    /// The colour's name, for captions.
    fn color_name(self) -> &'static str {
        match self {
            Regime::Suspension => "red",
            Regime::TimeSlicing => "blue",
            Regime::Ferry => "green",
        }
    }
}

/// The disruptions of one Figure 2 run: `count` of `m` each followed by
/// `m` without; `m == 0`: none, for `undisturbed`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    pub m: Duration,
    pub count: u32,
    pub undisturbed: Duration,
}

impl Schedule {
    /// When disruption `i` starts and ends, from `start`.
    pub(super) fn window(&self, start: Instant, i: u32) -> (Instant, Instant) {
        let on = start + self.m * (2 * i);
        (on, on + self.m)
    }

    /// When the run's disruptions (and the gaps after them) are over.
    pub(super) fn end(&self, start: Instant) -> Instant {
        if self.m.is_zero() {
            start + self.undisturbed
        } else {
            start + self.m * (2 * self.count)
        }
    }
}

/// The state of a ping-pong: whose turn, and whether to stop.
#[derive(Debug, Default)]
pub(super) struct Turn {
    turn: u8,
    stop: bool,
}

/// One Figure 2 run's result.
#[derive(Debug, Clone, Copy)]
pub(super) struct PingPongRun {
    round_trips: u64,
    elapsed: Duration,
    /// ferry: the `ProcessorRemoved` events delivered during the run.
    removals: Option<Delta>,
}

/// How many ns `SIGUSR1`'s handler sleeps.
static SUSPEND_NS: AtomicU64 = AtomicU64::new(0);

/// `SIGUSR1`'s handler: sleeps [`SUSPEND_NS`] (the suspension regime's
/// disruption). `nanosleep` is async-signal-safe.
pub(super) extern "C" fn suspend_handler(_: libc::c_int) {
    let ns = SUSPEND_NS.load(Ordering::Relaxed);
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// One side of the Figure 2 ping-pong, over any mutex and condition
/// variable: holding `g`, it waits (`wait`) for its turn, passes the turn
/// and wakes the other side (`notify_one`), until `done` (then it stops
/// both sides, `notify_all`); returns the turns it took.
pub(super) fn pingpong_side<G: std::ops::DerefMut<Target = Turn>>(
    mut g: G,
    wait: impl Fn(G) -> G,
    notify_one: impl Fn(),
    notify_all: impl Fn(),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let mut turns = 0;
    loop {
        while g.turn != me && !g.stop {
            g = wait(g);
        }
        if g.stop {
            return turns;
        }
        if done.load(Ordering::Relaxed) {
            g.stop = true;
            notify_all();
            return turns;
        }
        turns += 1;
        g.turn = 1 - me;
        notify_one();
    }
}

/// One side of the kernel-thread ping-pong; returns the turns it took.
pub(super) fn std_side(
    shared: &(std::sync::Mutex<Turn>, std::sync::Condvar),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let (m, c) = shared;
    pingpong_side(
        m.lock().unwrap_or_else(|e| e.into_inner()),
        |g| c.wait(g).unwrap_or_else(|e| e.into_inner()),
        || c.notify_one(),
        || c.notify_all(),
        done,
        me,
    )
}

/// A Figure 2 run of a kernel-thread regime.
pub(super) fn std_pingpong(regime: Regime, s: Schedule) -> Result<PingPongRun, String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    if regime == Regime::Suspension {
        INSTALLED
            .get_or_init(|| install_handler(libc::SIGUSR1, suspend_handler))
            .clone()?;
        SUSPEND_NS.store(
            u64::try_from(s.m.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
    let (core0, core1) = affinity::two_cores();
    let shared = (
        std::sync::Mutex::new(Turn::default()),
        std::sync::Condvar::new(),
    );
    let done = AtomicBool::new(false);
    let victim = OnceLock::<libc::pthread_t>::new();
    let barrier = Barrier::new(3);
    thread::scope(|sc| {
        let b = sc.spawn(|| {
            affinity::pin_or_warn(core1, "ping-pong (victim core)");
            // SAFETY: pthread_self has no preconditions.
            let _ = victim.set(unsafe { libc::pthread_self() });
            barrier.wait();
            std_side(&shared, &done, 1)
        });
        let disruptor = sc.spawn(|| {
            if regime == Regime::TimeSlicing {
                affinity::pin_or_warn(core1, "hog");
            }
            barrier.wait();
            let start = Instant::now();
            if !s.m.is_zero() {
                for i in 0..s.count {
                    let (on, off) = s.window(start, i);
                    sleep_until(on);
                    match regime {
                        Regime::Suspension => {
                            if let Some(&t) = victim.get() {
                                // SAFETY: `t` is the victim's pthread_t; it
                                // is alive until `done` is set after this
                                // loop; SIGUSR1's handler is installed.
                                unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
                            }
                        }
                        Regime::TimeSlicing => {
                            while Instant::now() < off {
                                std::hint::spin_loop();
                            }
                        }
                        Regime::Ferry => unreachable!("not a kernel-thread regime"),
                    }
                }
            }
            sleep_until(s.end(start));
            done.store(true, Ordering::Relaxed);
        });
        // On a thread of its own: the caller's affinity stays as it was.
        let a = sc.spawn(|| {
            affinity::pin_or_warn(core0, "ping-pong");
            barrier.wait();
            let start = Instant::now();
            let turns = std_side(&shared, &done, 0);
            (turns, start.elapsed())
        });
        let a = a.join();
        let d = disruptor.join();
        let other = b.join();
        match (a, d, other) {
            (Ok((turns, elapsed)), Ok(()), Ok(_)) => Ok(PingPongRun {
                round_trips: turns,
                elapsed,
                removals: None,
            }),
            _ => Err("a ping-pong thread panicked".to_owned()),
        }
    })
}

/// One side of the ferry ping-pong; returns the turns it took.
pub(super) fn ferry_side(
    shared: &(ferry::sync::Mutex<Turn>, ferry::sync::Condvar),
    done: &AtomicBool,
    me: u8,
) -> u64 {
    let (m, c) = shared;
    pingpong_side(
        m.lock(),
        |g| c.wait(g),
        || c.notify_one(),
        || c.notify_all(),
        done,
        me,
    )
}

/// A Figure 2 run of the ferry regime. The disruptor is a kernel thread
/// started before the runtime (so it does not inherit processor 0's
/// pinning), handed a [`ferry::Handle`] from inside it.
pub(super) fn ferry_pingpong(s: Schedule) -> Result<PingPongRun, String> {
    let (tx, rx) = std::sync::mpsc::channel::<ferry::Handle>();
    let done = Arc::new(AtomicBool::new(false));
    let disruptor = {
        let done = Arc::clone(&done);
        thread::Builder::new()
            .name("disruptor".into())
            .spawn(move || -> Result<(), String> {
                // No handle: the runtime did not start; nothing to disrupt.
                let Ok(h) = rx.recv() else { return Ok(()) };
                let start = Instant::now();
                let mut result = Ok(());
                if !s.m.is_zero() {
                    for i in 0..s.count {
                        let (on, off) = s.window(start, i);
                        sleep_until(on);
                        if let Err(e) = h.set_processors(1) {
                            result = Err(format!("set_processors(1): {e}"));
                            break;
                        }
                        sleep_until(off);
                        if let Err(e) = h.set_processors(2) {
                            result = Err(format!("set_processors(2): {e}"));
                            break;
                        }
                    }
                }
                sleep_until(s.end(start));
                done.store(true, Ordering::Relaxed);
                result
            })
            .map_err(|e| format!("cannot spawn the disruptor: {e}"))?
    };
    let r = on_runtime(
        |b| {
            b.processors(2).max_processors(2);
        },
        move || -> Result<PingPongRun, String> {
            let h = ferry::Handle::current();
            type Shared = (ferry::sync::Mutex<Turn>, ferry::sync::Condvar);
            let shared: Arc<Shared> = Arc::new((
                ferry::sync::Mutex::new(Turn::default()),
                ferry::sync::Condvar::new(),
            ));
            let before = h.upcall_stats();
            let b = {
                let (shared, done) = (Arc::clone(&shared), Arc::clone(&done));
                ferry::spawn(move || ferry_side(&shared, &done, 1))
            };
            if tx.send(h.clone()).is_err() {
                done.store(true, Ordering::Relaxed);
            }
            let start = Instant::now();
            let turns = ferry_side(&shared, &done, 0);
            let elapsed = start.elapsed();
            let other = b.join();
            let after = h.upcall_stats();
            other.map_err(|p| format!("a ping-pong thread panicked: {p}"))?;
            Ok(PingPongRun {
                round_trips: turns,
                elapsed,
                removals: Some(delta(&before.processor_removed, &after.processor_removed)),
            })
        },
    );
    let d = disruptor
        .join()
        .map_err(|_| "the disruptor panicked".to_owned());
    let run = r??;
    d??;
    Ok(run)
}

/// Figure 2's samples: per (regime, M ms), round trips per second and
/// elapsed ms of each run.
#[derive(Debug, Default)]
pub(super) struct Figure2 {
    pub rate: BTreeMap<(Regime, u64), Vec<f64>>,
    elapsed_ms: BTreeMap<(Regime, u64), Vec<f64>>,
    /// ferry's `ProcessorRemoved` events, per M.
    removals: BTreeMap<u64, Removals>,
    failures: Vec<String>,
}

/// The ferry regime's `ProcessorRemoved` events at one M, over the runs.
#[derive(Debug, Default)]
pub(super) struct Removals {
    /// Events delivered.
    got: u64,
    /// Removals asked (`set_processors(1)` calls).
    asked: u64,
    /// Each run's mean latency, ns.
    means: Vec<f64>,
    /// The longest latency of any run, ns.
    max: f64,
}

/// Round `round` of Figure 2: every M (0 first), every regime (rotated by
/// round), once each, into `fig`.
pub(super) fn figure2_round(plan: &Plan, round: u32, fig: &mut Figure2) {
    let mut ms = vec![0];
    ms.extend(&plan.disruption_ms);
    for &m in &ms {
        let s = Schedule {
            m: Duration::from_millis(m),
            count: plan.disruptions,
            undisturbed: plan.undisturbed,
        };
        for k in 0..Regime::ALL.len() {
            let regime = Regime::ALL[(k + round as usize) % Regime::ALL.len()];
            let now = Instant::now();
            hang::watch(
                &format!("figure 2, {} M={m} ms", regime.name()),
                s.end(now) - now + Duration::from_secs(30),
            );
            let r = match regime {
                Regime::Ferry => ferry_pingpong(s),
                _ => std_pingpong(regime, s),
            };
            hang::unwatch();
            match r {
                Ok(run) => {
                    let secs = run.elapsed.as_secs_f64();
                    fig.rate
                        .entry((regime, m))
                        .or_default()
                        .push(run.round_trips as f64 / secs);
                    fig.elapsed_ms
                        .entry((regime, m))
                        .or_default()
                        .push(secs * 1e3);
                    if let Some(d) = run.removals
                        && m != 0
                    {
                        let e = fig.removals.entry(m).or_default();
                        e.got += d.count;
                        e.asked += u64::from(plan.disruptions);
                        if d.count > 0 {
                            e.means.push(d.mean_ns);
                            e.max = e.max.max(d.max_ns);
                        }
                    }
                }
                Err(e) => {
                    let e = format!("{} M={m} ms: {e}", regime.name());
                    if !fig.failures.contains(&e) {
                        fig.failures.push(e);
                    }
                }
            }
        }
    }
}

/// The case name of disruption length `m` ms.
fn case_name(m: u64) -> String {
    if m == 0 {
        "figure2 undisturbed".to_owned()
    } else {
        format!("figure2 M={m}ms")
    }
}

/// Figure 2 as a section: a row per (M, regime) of round trips per second
/// with the median elapsed ms, each rate over the regime's undisturbed
/// one; the notes say what ferry's removals did, which runs failed, and
/// where the plot (drawn into `plot_path`) is.
pub(super) fn section(plan: &Plan, fig: &Figure2, plot_path: &Path) -> Section {
    let mut ms = vec![0];
    ms.extend(&plan.disruption_ms);
    let unit = Unit::Rate("round trips/s");
    let mut rows = Vec::new();
    for &m in &ms {
        for regime in Regime::ALL {
            let case = case_name(m);
            let row = match fig.rate.get(&(regime, m)) {
                Some(rates) => {
                    let items = if m == 0 {
                        0
                    } else {
                        u64::from(plan.disruptions)
                    };
                    let elapsed = fig
                        .elapsed_ms
                        .get(&(regime, m))
                        .map_or(f64::NAN, |v| median(v));
                    Row::new(EXPERIMENT, case, regime.name(), unit, rates.clone(), items)
                        .with("elapsed_ms", elapsed)
                        .with("disruption_ms", m as f64)
                }
                None => Row::absent(EXPERIMENT, case, regime.name(), unit, "no run finished"),
            };
            rows.push(row);
        }
    }
    let mut notes = String::new();
    for (m, r) in &fig.removals {
        let _ = writeln!(
            notes,
            "ferry M={m} ms: {} ProcessorRemoved events for {} set_processors(1) calls, latency \
             (call -> policy) median of run means {:.1} us, max {:.1} us{}",
            r.got,
            r.asked,
            median(&r.means) / 1e3,
            r.max / 1e3,
            if r.got < r.asked {
                " (a removal not finished when set_processors(2) comes is cancelled, no event)"
            } else {
                ""
            }
        );
    }
    for e in &fig.failures {
        let _ = writeln!(notes, "failed run: {e}");
    }
    let series: Vec<plot::Series> = Regime::ALL
        .iter()
        .map(|&regime| plot::Series {
            name: regime.name().into(),
            color: regime.color(),
            color_name: regime.color_name(),
            points: rows
                .iter()
                .filter(|r| r.system == regime.name())
                .filter_map(|r| {
                    let m = r.extra.iter().find(|(k, _)| *k == "disruption_ms")?.1;
                    Some((m, r.median()?))
                })
                .collect(),
        })
        .collect();
    let labels = plot::Labels {
        title: "ping-pong under disruptions of one of two cores (004 Figure 2)",
        x: "disruption length M (ms); 0 = undisturbed",
        y: "round trips per second (log scale)",
        y_format: &plot::fmt_rate,
    };
    let _ = match plot::log_y_lines(plot_path, &labels, &series) {
        Ok(true) => writeln!(
            notes,
            "plot: {} (x = M ms, 0 = undisturbed; y = round trips/s, log scale; legend inside)",
            plot_path.display()
        ),
        Ok(false) => {
            let colors: Vec<String> = series
                .iter()
                .map(|s| format!("{} = {}", s.color_name, s.name))
                .collect();
            writeln!(
                notes,
                "plot: {} drawn WITHOUT text (no font found): x = M ms from 0 (undisturbed) to {} \
                 ms, y = round trips/s on a log scale, a grey line at each power of ten; {}",
                plot_path.display(),
                plan.disruption_ms.last().copied().unwrap_or(0),
                colors.join(", ")
            )
        }
        Err(e) => writeln!(notes, "plot: not written: {e}"),
    };
    Section {
        title: format!(
            "Figure 2 (004): ping-pong on 2 cores, {} disruptions of M ms of the second core, \
             each followed by M ms without",
            plan.disruptions
        ),
        headers: ("case", "regime"),
        rows,
        ratios: vec![Ratio::ToCase {
            header: "vs undisturbed",
            case: case_name(0),
        }],
        notes,
    }
}
