//! `ferry alloc-probe` (hidden): a ferry process that keeps its threads
//! busy and reports its processors, for the daemon's tests. It starts a
//! runtime (which registers with a daemon if one listens), runs
//! `--threads` computing threads, prints `processors N` each time the
//! number of processors it runs changes, and after `--seconds` or at the
//! end of its standard input (`--until-eof`) stops its threads and prints
//! `done` (else it runs until killed).
//!
//! This module owns only the probe; it must not talk to the daemon itself
//! (the runtime does).

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of `ferry alloc-probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Computing threads (default: one per CPU)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Stop after this many seconds (default: run until killed)
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Stop when standard input ends
    #[arg(long)]
    pub until_eof: bool,
}

/// Runs the probe.
pub fn run(args: &Args) -> io::Result<()> {
    let rt = ferry::Runtime::builder().start()?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers = (0..threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            rt.spawn(move || {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) ^ 1);
                    }
                }
                x
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    let deadline = args
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    if args.until_eof {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let _ = io::copy(&mut io::stdin().lock(), &mut io::sink());
            stop.store(true, Ordering::Relaxed);
        });
    }
    let mut out = io::stdout().lock();
    writeln!(out, "ready {}", std::process::id())?;
    let mut last = 0;
    loop {
        let n = rt.processors();
        if n != last {
            writeln!(out, "processors {n}")?;
            out.flush()?;
            last = n;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) || stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join()
            .map_err(|e| io::Error::other(format!("a worker failed: {e:?}")))?;
    }
    writeln!(out, "done")?;
    out.flush()
}
