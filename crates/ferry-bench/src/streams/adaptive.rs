//! The adaptive-quantum experiment (Synthesis 002 §4.4, fine-grain
//! scheduling): a "device" standing for a 44.1 kHz A/D converter feeds a
//! ferry pipeline while CPU-bound threads compete for the same two
//! processors; dropped samples and producer-to-consumer latency with the
//! fine-grain policy and with the default one (FIFO rings, work stealing,
//! a 10 ms time slice), in one run.
//!
//! The device is a plain kernel thread (outside ferry, at the highest nice
//! level it may take, as an interrupt goes before threads): sample `i` is
//! due `(i + 1) / 44,100` s after the start; it wakes on the absolute
//! monotonic clock once per [`SAMPLES_PER_WAKE`] samples (a converter's
//! FIFO interrupt), puts every sample due by then into a lock-free ring of
//! [`DEVICE_BUFFER`] samples (1.45 ms of them; a sample that does not fit
//! is dropped and counted), stamps each with the time it went in, and
//! wakes the ferry thread that reads the ring. The pipeline is device
//! reader -> stream -> filter -> stream -> consumer on two processors,
//! beside [`HOGS`] threads that only compute. The consumer takes each
//! sample's latency (now minus its stamp).
//!
//! Each variant runs in a child process of its own (`ferry-bench
//! streams-adaptive`): a runtime with the fine-grain policy makes every
//! stream call of the process count its bytes (`ferry::SchedPolicy`), which
//! must not reach the other rows of `streams`.
//!
//! This module owns the experiment, its child and its rows; it must not
//! touch the other cases of `streams`.

use std::io::{Read, Write};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use ferry::SchedPolicy;

use crate::report::{Error, Section};
use crate::row::{Row, Unit};

/// The experiment's case names.
pub const DROPPED: &str = "44.1 kHz + 4 hogs: dropped samples";
/// The latency rows' case names.
pub const P50: &str = "44.1 kHz + 4 hogs: latency p50";
/// See [`P50`].
pub const P99: &str = "44.1 kHz + 4 hogs: latency p99";

/// The device's sample period: 1 / 44.1 kHz, in nanoseconds.
const PERIOD_NS: u64 = 1_000_000_000 / 44_100;

/// Samples the device puts per wakeup (181 µs of them).
const SAMPLES_PER_WAKE: u64 = 8;

/// The device's buffer, in samples (1.45 ms of the device's output).
pub const DEVICE_BUFFER: usize = 64;

/// CPU-bound threads beside the pipeline.
pub const HOGS: usize = 4;

/// The default policy's time slice in this experiment (its default, set
/// here so that `FERRY_TIME_SLICE` does not change it).
const FIFO_SLICE: Duration = Duration::from_millis(10);

/// The two variants: the system name and the policy.
pub const VARIANTS: [(&str, SchedPolicy); 2] = [
    ("fine-grain", SchedPolicy::FineGrain),
    ("work-stealing (10 ms slice)", SchedPolicy::WorkStealing),
];

/// Arguments of the child process (`ferry-bench streams-adaptive`).
#[derive(Debug, Clone, clap::Args)]
pub struct OnceArgs {
    /// Unused; there for the shape every subcommand shares.
    #[command(flatten)]
    pub common: crate::common::Common,
    /// `fine-grain` or `work-stealing`.
    #[arg(long)]
    pub policy: String,
    /// How long the device runs, in milliseconds.
    #[arg(long)]
    pub ms: u64,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Samples the device made.
    pub produced: u64,
    /// Samples that did not fit in its buffer.
    pub dropped: u64,
    /// Samples the consumer got, each once and in order (else the run fails).
    pub received: u64,
    /// Producer-to-consumer latency, ns: median and 99th percentile.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
}

impl Outcome {
    /// The child's output: one `key value` line each.
    fn lines(&self) -> String {
        format!(
            "produced {}\ndropped {}\nreceived {}\np50_ns {}\np99_ns {}\n",
            self.produced, self.dropped, self.received, self.p50_ns, self.p99_ns
        )
    }

    /// Reads a child's output back.
    fn parse(out: &str) -> Result<Outcome, Error> {
        let field = |key: &str| -> Result<u64, Error> {
            out.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                .ok_or_else(|| Error(format!("no {key} in the child's output: {out:?}")))?
                .trim()
                .parse()
                .map_err(|e| Error(format!("bad {key} in the child's output: {e}")))
        };
        Ok(Outcome {
            produced: field("produced")?,
            dropped: field("dropped")?,
            received: field("received")?,
            p50_ns: field("p50_ns")?,
            p99_ns: field("p99_ns")?,
        })
    }
}

/// The `q`-quantile (0..=1) of `sorted`, by nearest rank; 0 if empty.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The monotonic clock, in nanoseconds.
fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_MONOTONIC exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleeps until `ns` on the monotonic clock.
fn sleep_until(ns: u64) {
    let at = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; no remainder is asked for (absolute).
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &at,
            std::ptr::null_mut(),
        )
    } != 0
    {}
}

/// The device's buffer.
type Buffer = ferry_queue::spsc::Producer<u64, ferry_queue::wait::Spin>;

/// The device (see the module docs): returns the samples it dropped.
fn device(
    samples: u64,
    buffer: Buffer,
    stamps: &[AtomicU64],
    reader: ferry::Thread,
    done: &AtomicBool,
) -> u64 {
    // SAFETY: `gettid` has no preconditions; `setpriority` and `prctl` act
    // on the calling thread alone. Failing (no privilege) leaves the
    // defaults.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 50_000 as libc::c_ulong);
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20);
    }
    let mut dropped = 0;
    let start = now_ns();
    let mut i = 0;
    while i < samples {
        sleep_until(start + (i + SAMPLES_PER_WAKE).min(samples) * PERIOD_NS);
        let now = now_ns();
        let due = ((now - start) / PERIOD_NS).min(samples);
        while i < due {
            stamps[i as usize].store(now, Relaxed);
            if buffer.try_push(i).is_err() {
                dropped += 1;
            }
            i += 1;
        }
        reader.unpark();
    }
    done.store(true, Release);
    reader.unpark();
    dropped
}

/// One run of `ms` milliseconds with `policy`, in this process.
pub fn run_once(policy: SchedPolicy, ms: u64) -> Result<Outcome, Error> {
    let samples = ms * 44_100 / 1000;
    let stamps: Arc<Vec<AtomicU64>> = Arc::new((0..samples).map(|_| AtomicU64::new(0)).collect());
    let (buffer, ring) =
        ferry_queue::spsc::channel_with::<u64, ferry_queue::wait::Spin>(DEVICE_BUFFER);
    let (go, started) = std::sync::mpsc::channel::<ferry::Thread>();
    let done = Arc::new(AtomicBool::new(false));
    let (end, st) = (Arc::clone(&done), Arc::clone(&stamps));
    let dev = std::thread::spawn(move || {
        let reader = started
            .recv()
            .map_err(|_| Error("the runtime did not start".into()))?;
        Ok::<u64, Error>(device(samples, buffer, &st, reader, &end))
    });
    let mut b = ferry::Runtime::builder();
    b.processors(2).policy(policy).time_slice(Some(FIFO_SLICE));
    let (received, latencies) = b
        .run(move || pipeline(ring, done, stamps, go))
        .map_err(|e| Error(format!("cannot start a ferry runtime: {e}")))??;
    let dropped = dev
        .join()
        .map_err(|_| Error("the device panicked".into()))??;
    let mut latencies = latencies;
    latencies.sort_unstable();
    Ok(Outcome {
        produced: samples,
        dropped,
        received,
        p50_ns: quantile(&latencies, 0.5),
        p99_ns: quantile(&latencies, 0.99),
    })
}

/// The pipeline and the hogs, on the runtime: the samples the consumer
/// got (all in order, else an error) and each one's latency.
fn pipeline(
    ring: ferry_queue::spsc::Consumer<u64, ferry_queue::wait::Spin>,
    done: Arc<AtomicBool>,
    stamps: Arc<Vec<AtomicU64>>,
    go: std::sync::mpsc::Sender<ferry::Thread>,
) -> Result<(u64, Vec<u64>), Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let stop = Arc::clone(&stop);
            ferry::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                x
            })
        })
        .collect();
    let (mut w1, r1) = ferry::stream::pipe();
    let (w2, mut r2) = ferry::stream::pipe();
    let reader = ferry::spawn(move || {
        let mut out = Vec::with_capacity(DEVICE_BUFFER * 8);
        loop {
            let end = done.load(Acquire);
            out.clear();
            while let Some(s) = ring.try_pop() {
                out.extend_from_slice(&s.to_le_bytes());
            }
            if !out.is_empty() && w1.write_all(&out).is_err() {
                return;
            }
            // `done` was set after the device's last push and read before
            // these pops, so they took every sample left: nothing will
            // unpark us again.
            if end {
                return;
            }
            ferry::park();
        }
    });
    let filter = ferry::spawn(move || {
        ferry::stream::filter(std::io::BufReader::new(r1), w2, |chunk, out| {
            out.extend_from_slice(chunk)
        })
    });
    let consumer = ferry::spawn(move || {
        let mut latencies = Vec::with_capacity(stamps.len());
        let mut expected = 0u64;
        let mut sample = [0u8; 8];
        while r2.read_exact(&mut sample).is_ok() {
            let s = u64::from_le_bytes(sample);
            if s < expected {
                return Err(Error(format!("sample {s} after {expected}: out of order")));
            }
            expected = s + 1;
            latencies.push(now_ns().saturating_sub(stamps[s as usize].load(Relaxed)));
        }
        Ok(latencies)
    });
    go.send(reader.thread())
        .map_err(|_| Error("the device is gone".into()))?;
    let joined = reader
        .join()
        .map_err(|_| Error("the reader panicked".into()));
    let filtered = filter
        .join()
        .map_err(|_| Error("the filter panicked".into()));
    let consumed = consumer
        .join()
        .map_err(|_| Error("the consumer panicked".into()));
    stop.store(true, Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    joined?;
    filtered?.map_err(|e| Error(format!("the filter failed: {e}")))?;
    let latencies = consumed??;
    Ok((latencies.len() as u64, latencies))
}

/// The child's side: one run, printed as `key value` lines, or the failure
/// on stderr.
pub fn once_main(args: &OnceArgs) -> ExitCode {
    let run = args
        .policy
        .parse::<SchedPolicy>()
        .map_err(|e| Error(e.to_string()))
        .and_then(|p| run_once(p, args.ms));
    match run {
        Ok(o) => {
            print!("{}", o.lines());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", e.0);
            ExitCode::FAILURE
        }
    }
}

/// One run of `policy` for `ms` milliseconds in a child process.
fn run_child(policy: SchedPolicy, ms: u64) -> Result<Outcome, Error> {
    let me = std::env::current_exe()
        .map_err(|e| Error(format!("cannot find the benchmark's binary: {e}")))?;
    let out = Command::new(me)
        .args([
            "streams-adaptive",
            "--policy",
            policy.name(),
            "--ms",
            &ms.to_string(),
        ])
        .output()
        .map_err(|e| Error(format!("cannot start an adaptive run: {e}")))?;
    if !out.status.success() {
        return Err(Error(format!(
            "the adaptive run failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Outcome::parse(&String::from_utf8_lossy(&out.stdout))
}

/// Runs both variants `runs` times each, alternating, `ms` milliseconds a
/// run, and gives their section: dropped samples, latency p50 and p99,
/// medians over the runs.
pub fn section(experiment: &'static str, runs: u32, ms: u64) -> Section {
    let mut got: Vec<Vec<Outcome>> = vec![Vec::new(); VARIANTS.len()];
    let mut failed = String::new();
    for round in 0..runs {
        for (k, (name, policy)) in VARIANTS.iter().enumerate() {
            eprintln!(
                "ferry-bench streams: adaptive {name}, run {}/{runs}",
                round + 1
            );
            match run_child(*policy, ms) {
                Ok(o) => got[k].push(o),
                Err(e) => failed.push_str(&format!("failed: adaptive / {name}: {}\n", e.0)),
            }
        }
    }
    let mut rows = Vec::new();
    for (case, unit) in [(DROPPED, Unit::Count), (P50, Unit::Ns), (P99, Unit::Ns)] {
        for ((name, _), outcomes) in VARIANTS.iter().zip(&got) {
            let values: Vec<f64> = outcomes
                .iter()
                .map(|o| match case {
                    DROPPED => o.dropped as f64,
                    P50 => o.p50_ns as f64,
                    _ => o.p99_ns as f64,
                })
                .collect();
            let items = outcomes.first().map_or(0, |o| o.produced);
            rows.push(if values.is_empty() {
                Row::absent(experiment, case, *name, unit, "no run succeeded")
            } else {
                Row::new(experiment, case, *name, unit, values, items)
            });
        }
    }
    Section {
        title: format!(
            "The adaptive-quantum experiment (002 §4.4): a 44.1 kHz device ({DEVICE_BUFFER}-sample \
             buffer, {:.2} ms) feeding reader -> stream -> filter -> stream -> consumer beside \
             {HOGS} CPU-bound threads on 2 processors; {} s per run, medians of {runs} runs",
            DEVICE_BUFFER as f64 * PERIOD_NS as f64 / 1e6,
            ms as f64 / 1000.0
        ),
        headers: ("case", "policy"),
        rows,
        ratios: Vec::new(),
        notes: failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_ranks() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&[7], 0.99), 7);
        assert_eq!(quantile(&[], 0.5), 0);
    }

    #[test]
    fn a_childs_output_reads_back_and_bad_output_is_an_error() {
        let o = Outcome {
            produced: 88200,
            dropped: 3,
            received: 88197,
            p50_ns: 120_000,
            p99_ns: 900_000,
        };
        assert_eq!(Outcome::parse(&o.lines()), Ok(o));
        assert!(Outcome::parse("produced 1\n").is_err());
        assert!(Outcome::parse(&o.lines().replace("dropped 3", "dropped x")).is_err());
    }

    #[test]
    fn a_short_run_delivers_every_sample_it_does_not_drop() {
        let o = run_once(SchedPolicy::FineGrain, 100).unwrap();
        assert_eq!(o.produced, 4410);
        assert_eq!(o.received + o.dropped, o.produced);
        assert!(o.p50_ns <= o.p99_ns);
    }
}
