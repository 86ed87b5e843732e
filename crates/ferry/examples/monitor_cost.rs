//! The monitor's CPU cost under a few workloads (2 processors, 2 s each),
//! from its kernel thread's `/proc/self/task/<tid>/schedstat` (CPU time
//! and how often it ran), read by a kernel thread outside the runtime:
//! `cargo run --release -p ferry --example monitor_cost`.
//!
//! Workloads: nothing to run (the monitor should park); two threads that
//! never yield; two that yield at once; two that compute 30 µs between
//! yields (each dispatch then outlives the monitor's 10 µs question).
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The monitor's (CPU ns, times it ran) from its `schedstat`.
fn monitor_schedstat() -> (u64, u64) {
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = e.unwrap().path();
        if std::fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim()
            == "ferry-monitor"
        {
            let s = std::fs::read_to_string(p.join("schedstat")).unwrap();
            let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
            return (v[0], v[2]);
        }
    }
    (0, 0)
}

fn main() {
    let secs = 2.0;
    // (name, threads, µs of work between yields; 0: never yields)
    for (name, threads, work_us) in [
        ("idle", 0, 0),
        ("2 spinners", 2, 0),
        ("2 yielders", 2, 1),
        ("2 x 30us", 2, 30),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        // Timed from a kernel thread outside the runtime.
        let timer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                let (c0, n0) = monitor_schedstat();
                let t = Instant::now();
                std::thread::sleep(Duration::from_secs_f64(secs));
                let (c1, n1) = monitor_schedstat();
                let el = t.elapsed().as_secs_f64();
                stop.store(true, Relaxed);
                ((c1 - c0) as f64 / el / 1e9 * 100.0, (n1 - n0) as f64 / el)
            })
        };
        let s = stop.clone();
        ferry::Runtime::builder()
            .processors(2)
            .run(move || {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        let stop = s.clone();
                        ferry::spawn(move || {
                            while !stop.load(Relaxed) {
                                if work_us == 0 {
                                    std::hint::spin_loop();
                                    continue;
                                }
                                let t = Instant::now();
                                while t.elapsed() < Duration::from_micros(work_us) {
                                    std::hint::spin_loop();
                                }
                                ferry::yield_now();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                // Idle: one long sleep, so that the monitor may park.
                ferry::sleep(Duration::from_secs_f64(secs + 0.3));
            })
            .unwrap();
        let r = timer.join().unwrap();
        println!(
            "{name:12} monitor cpu {:.2}% of a core, {:.0} runs/s",
            r.0, r.1
        );
    }
}
