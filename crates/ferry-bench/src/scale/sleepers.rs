//! The timers case of `scale`: `N` threads (goroutines, tasks) each wait
//! at a gate until all are started, then sleep until a deadline 1 to 100
//! ms away ([`delay`], the same pseudo-random sequence in every system) and
//! record how late they woke. A run gives the median, the 99th percentile
//! and the maximum of the lateness, and the share of sleepers that woke
//! within one ferry timer tick ([`TICK_NS`], 65.5 us) of their deadline.
//!
//! | system | the sleep |
//! |--------|-----------|
//! | `ferry P=1`, `ferry P=2` | `ferry::thread::sleep_until`, in a fresh process (`scale-ferry --sleepers`) |
//! | `go P=1`, `go P=2` | `time.Sleep` (the Go program's `-sleepers`) |
//! | `tokio` | `tokio::time::sleep_until` on a multi-thread runtime of 2 workers (its timer wheel counts whole milliseconds) |
//!
//! This module owns the case's runs, its sample and its section of the
//! report; it prints nothing.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::{EXPERIMENT, System, count_label};
use crate::peers::go::Program;
use crate::report::{Ratio, Section, row_median};
use crate::row::{Row, Unit};

/// ferry's timer tick in ns: the bound of "within a tick".
pub const TICK_NS: u64 = 1 << 16;

/// Sleeper `i`'s delay: 1 to 100 ms, from splitmix64 (as in
/// `crates/ferry/tests/timers.rs` and the Go program).
pub fn delay(i: u64) -> Duration {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    Duration::from_micros(1_000 + z % 99_001)
}

/// One run's lateness: ns past the deadline, and the share within a tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lateness {
    /// Median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// The latest sleeper.
    pub max_ns: f64,
    /// Sleepers that woke within [`TICK_NS`] of their deadline, 0 to 1.
    pub in_tick: f64,
}

impl Lateness {
    /// The lateness of a run from each sleeper's ns past its deadline.
    pub fn of(mut late: Vec<u64>) -> Option<Lateness> {
        if late.is_empty() {
            return None;
        }
        late.sort_unstable();
        let q = |p: usize| late[(late.len() - 1) * p / 100] as f64;
        let in_tick = late.iter().filter(|&&l| l <= TICK_NS).count();
        Some(Lateness {
            p50_ns: q(50),
            p99_ns: q(99),
            max_ns: *late.last().expect("not empty") as f64,
            in_tick: in_tick as f64 / late.len() as f64,
        })
    }

    /// The lines a run prints (ferry's child and the Go program alike).
    pub fn lines(&self) -> String {
        format!(
            "p50_ns {}\np99_ns {}\nmax_ns {}\nin_tick {}\n",
            self.p50_ns, self.p99_ns, self.max_ns, self.in_tick
        )
    }

    /// Parses [`Lateness::lines`] (from `who`, for the errors).
    pub fn parse(stdout: &str, who: &str) -> Result<Lateness, String> {
        let mut v = [None; 4];
        for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!("unexpected line from {who}: {line:?}"));
            };
            let k = ["p50_ns", "p99_ns", "max_ns", "in_tick"]
                .iter()
                .position(|n| *n == name)
                .ok_or_else(|| format!("unexpected line from {who}: {line:?}"))?;
            let x: f64 = value
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("unexpected number from {who}: {line:?}"))?;
            if v[k].replace(x).is_some() {
                return Err(format!("{who} printed {name:?} twice"));
            }
        }
        match v {
            [Some(p50_ns), Some(p99_ns), Some(max_ns), Some(in_tick)] => Ok(Lateness {
                p50_ns,
                p99_ns,
                max_ns,
                in_tick,
            }),
            _ => Err(format!("{who} printed too few lines: {stdout:?}")),
        }
    }
}

/// ns from `due` to `now` (0 if `now` is earlier: a wake before its
/// deadline, which no system here allows, counts as on time).
fn late_ns(due: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(due).as_nanos()).unwrap_or(u64::MAX)
}

/// The child's side of a ferry run: `n` sleepers on `processors`
/// processors, printed as [`Lateness::lines`].
pub fn ferry_child(n: usize, processors: usize) -> ExitCode {
    let run = ferry::Runtime::builder()
        .processors(processors)
        .run(move || ferry_sleepers(n));
    match run {
        Ok(Ok(l)) => {
            print!("{}", l.lines());
            ExitCode::SUCCESS
        }
        Ok(Err(why)) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("cannot start a ferry runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `n` ferry threads wait at a barrier, then each sleeps until its own
/// deadline and records how late it woke.
fn ferry_sleepers(n: usize) -> Result<Lateness, String> {
    let late: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let gate = Arc::new(ferry::sync::Barrier::new(n + 1));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (late, gate) = (Arc::clone(&late), Arc::clone(&gate));
        let h = ferry::thread::Builder::new()
            .spawn(move || {
                gate.wait();
                let due = Instant::now() + delay(i as u64);
                ferry::thread::sleep_until(due);
                late[i].store(late_ns(due, Instant::now()), Relaxed);
            })
            .map_err(|e| format!("spawn of sleeper {} of {n} failed: {e}", i + 1))?;
        handles.push(h);
    }
    gate.wait();
    for h in handles {
        h.join().map_err(|p| format!("a sleeper panicked: {p}"))?;
    }
    Lateness::of(late.iter().map(|l| l.load(Relaxed)).collect())
        .ok_or_else(|| "no sleepers".to_owned())
}

/// One ferry run of `n` sleepers on `processors` processors, in a fresh
/// process.
pub fn run_ferry(n: usize, processors: usize) -> Result<Lateness, String> {
    let out = super::ferry_child(n, processors, &["--sleepers"])?;
    Lateness::parse(&out, "the ferry run")
}

/// One Go run of `n` sleeping goroutines with `GOMAXPROCS=procs`.
pub fn run_go(program: &Program, n: usize, procs: usize) -> Result<Lateness, String> {
    let out = super::go_child(program, procs, &["-sleepers", "-n", &n.to_string()])?;
    Lateness::parse(&out, "the Go program")
}

/// One Tokio run of `n` sleeping tasks, started once every task waits at
/// a `Notify` gate.
pub fn run_tokio(n: usize) -> Result<Lateness, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(super::peers::TOKIO_WORKERS)
        .enable_time()
        .build()
        .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
    rt.block_on(async move {
        let gate = Arc::new(tokio::sync::Notify::new());
        let all_waiting = Arc::new(tokio::sync::Notify::new());
        let waiting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (gate, all, waiting) = (gate.clone(), all_waiting.clone(), waiting.clone());
                tokio::spawn(async move {
                    let mut wait = std::pin::pin!(gate.notified());
                    wait.as_mut().enable();
                    if waiting.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1 == n {
                        all.notify_one();
                    }
                    wait.await;
                    let due = Instant::now() + delay(i as u64);
                    tokio::time::sleep_until(due.into()).await;
                    late_ns(due, Instant::now())
                })
            })
            .collect();
        all_waiting.notified().await;
        gate.notify_waiters();
        let mut late = Vec::with_capacity(n);
        for h in handles {
            late.push(h.await.map_err(|e| format!("a Tokio task failed: {e}"))?);
        }
        Lateness::of(late).ok_or_else(|| "no sleepers".to_owned())
    })
}

/// The case's name at `n` sleepers.
pub fn case(n: usize) -> String {
    format!("sleep N={}", count_label(n))
}

/// The section: per N and system, the median over runs of each run's p99
/// lateness, with the medians of p50, max and the share within a tick as
/// extra columns; the goal lines (every ferry sleeper within a tick, and
/// ferry's p99 at most Go's).
pub fn section(counts: &[usize], found: &super::SleepFound) -> Section {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut rows = Vec::new();
    for &n in counts {
        for system in super::SYSTEMS {
            let label = system.label();
            let unit = Unit::Ns;
            rows.push(match found.get(&(n, system)) {
                Some(Ok(runs)) if !runs.is_empty() => {
                    let pick = |f: fn(&Lateness) -> f64| median(runs.iter().map(f).collect());
                    Row::new(
                        EXPERIMENT,
                        case(n),
                        label,
                        unit,
                        runs.iter().map(|l| l.p99_ns).collect(),
                        n as u64,
                    )
                    .with("p50 ns", pick(|l| l.p50_ns))
                    .with("max ns", pick(|l| l.max_ns))
                    .with("in a tick %", 100.0 * pick(|l| l.in_tick))
                }
                Some(Err(why)) => Row::absent(EXPERIMENT, case(n), label, unit, why.clone()),
                _ => Row::absent(EXPERIMENT, case(n), label, unit, "not run"),
            });
        }
    }
    let mut notes = String::new();
    for &n in counts {
        for p in [1, 2] {
            let ferry = System::Ferry(p).label();
            let go = System::Go(p).label();
            let row = rows.iter().find(|r| r.case == case(n) && r.system == ferry);
            let share = row.and_then(|r| r.extra.iter().find(|(k, _)| *k == "in a tick %"));
            let verdict = match share {
                Some((_, s)) if *s >= 100.0 => format!("{s:.2}% (met)"),
                Some((_, s)) => format!("{s:.2}% (not met)"),
                None => "absent".to_owned(),
            };
            let _ = writeln!(
                notes,
                "goal: {}, {ferry}: every sleeper wakes within a tick ({} us) of its deadline: {verdict}",
                case(n),
                TICK_NS / 1000
            );
            let verdict = crate::report::ratio_verdict(
                row_median(&rows, &case(n), &ferry),
                row_median(&rows, &case(n), &go),
                |f, g| f <= g,
            );
            let _ = writeln!(
                notes,
                "goal: {}, p99 lateness: {ferry} <= {go}: {verdict}",
                case(n)
            );
        }
    }
    Section {
        title:
            "Timers: N threads each sleep until a deadline 1-100 ms away (random), all at once; \
                p99 ns past the deadline at which a sleeper ran"
                .into(),
        rows,
        ratios: vec![
            Ratio::to_system("vs go P=1", "go P=1"),
            Ratio::to_system("vs go P=2", "go P=2"),
        ],
        notes,
        ..Section::default()
    }
}
