//! The `unannounced` scenario of `ferry-bench upcalls` in short: 200 raw
//! `read`s on a pipe (not announced to ferry) on a 1-processor runtime
//! with a compute thread; prints the stall (from the call to the compute
//! thread running again: 10th, 50th, 90th percentile) and the `Blocked`
//! mean. The first argument sets `max_processors` (default 2: processor 0
//! is then pinned to the first CPU; 1 leaves it unpinned).
//!
//! Built with `RUSTFLAGS="--cfg ferry_probe"` (best in a target directory
//! of its own), it also prints the steps of each takeover from the
//! runtime's `rdtsc` marks (`ferry::probe`): the monitor finding the block,
//! the fence, the watcher back in its activation, `Blocked`, the watch
//! handed on, the thread name restored, the compute thread running.
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

/// The probe marks of one takeover in order (see `ferry::probe`), each
/// with the step that ends there.
#[cfg(ferry_probe)]
const ORDER: [(usize, &str); 7] = [
    (14, "the reader calls read"),
    (16, "call -> monitor finds the block"),
    (
        19,
        "-> heavy_fence, lend confirmed, back in the watcher's activation",
    ),
    (13, "-> the policy has Blocked"),
    (21, "-> the watch handed on (FUTEX_WAKE of a pooled spare)"),
    (22, "-> the thread name restored"),
    (15, "-> the compute thread runs"),
];

fn main() {
    let maxp: usize = std::env::args().nth(1).map_or(2, |s| s.parse().unwrap());
    ferry::Runtime::builder()
        .processors(1)
        .max_processors(maxp)
        .run(move || {
            let base = Instant::now();
            let first_run = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (fr, st) = (first_run.clone(), stop.clone());
            let compute = ferry::spawn(move || {
                while !st.load(Relaxed) {
                    let now = base.elapsed().as_nanos() as u64;
                    if fr.load(Relaxed) == 0 {
                        #[cfg(ferry_probe)]
                        ferry::probe::mark(15);
                        fr.store(now, Relaxed);
                    }
                    ferry::yield_now();
                }
            });
            let mut stalls = Vec::new();
            #[cfg(ferry_probe)]
            let (t0, c0) = (Instant::now(), ferry::probe::now());
            #[cfg(ferry_probe)]
            let mut steps: Vec<Vec<f64>> = vec![Vec::new(); ORDER.len() - 1];
            for _ in 0..200 {
                #[cfg(ferry_probe)]
                ferry::probe::reset();
                let (r, mut w) = std::io::pipe().unwrap();
                let call_at = Arc::new(AtomicU64::new(0));
                let ca = call_at.clone();
                let fr = first_run.clone();
                let reader = ferry::spawn(move || {
                    let mut b = 0u8;
                    fr.store(0, Relaxed);
                    ca.store(base.elapsed().as_nanos() as u64, Relaxed);
                    #[cfg(ferry_probe)]
                    ferry::probe::mark(14);
                    // SAFETY: valid fd, 1-byte buffer.
                    unsafe { libc::read(r.as_raw_fd(), (&raw mut b).cast(), 1) };
                    ferry::yield_now();
                });
                while call_at.load(Relaxed) == 0 || first_run.load(Relaxed) == 0 {
                    ferry::yield_now();
                }
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(300) {
                    ferry::yield_now();
                }
                use std::io::Write;
                w.write_all(&[1]).unwrap();
                reader.join().unwrap();
                stalls.push((first_run.load(Relaxed) - call_at.load(Relaxed)) as f64 / 1000.0);
                #[cfg(ferry_probe)]
                {
                    let st = ferry::probe::stamps();
                    if ORDER.iter().all(|&(i, _)| st[i] != 0) {
                        for (k, w) in ORDER.windows(2).enumerate() {
                            steps[k].push(st[w[1].0].wrapping_sub(st[w[0].0]) as i64 as f64);
                        }
                    }
                }
            }
            stop.store(true, Relaxed);
            compute.join().unwrap();
            #[cfg(ferry_probe)]
            let ns_per_cycle =
                t0.elapsed().as_nanos() as f64 / ferry::probe::now().wrapping_sub(c0) as f64;
            #[cfg(ferry_probe)]
            for (k, mut v) in steps.into_iter().enumerate() {
                v.iter_mut().for_each(|x| *x *= ns_per_cycle);
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                if !v.is_empty() {
                    println!(
                        "{:66} n {} p10 {:.0} p50 {:.0} p90 {:.0} ns",
                        ORDER[k + 1].1,
                        v.len(),
                        v[v.len() / 10],
                        v[v.len() / 2],
                        v[v.len() * 9 / 10]
                    );
                }
            }
            stalls.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let s = ferry::Handle::current().upcall_stats();
            println!(
                "max_processors {maxp}: stall p10 {:.1} p50 {:.1} p90 {:.1} us; blocked mean {:?} unannounced {}",
                stalls[20], stalls[100], stalls[180], s.blocked.mean, s.unannounced_blocks
            );
        })
        .unwrap();
}
