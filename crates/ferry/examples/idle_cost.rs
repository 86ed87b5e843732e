//! What an idle ferry process costs: `N` threads blocked on one gate, then
//! `SECS` seconds in which nothing runs; prints the CPU time (user+system)
//! and the context switches of every kernel thread of the process over the
//! idle window, and how many kernel threads there are.
//!
//! `cargo run --release -p ferry --example idle_cost -- [N] [SECS] [P]`

use std::sync::Arc;
use std::time::Duration;

/// (utime+stime in clock ticks, voluntary+involuntary switches, tasks).
fn sample() -> (u64, u64, usize) {
    let mut ticks = 0;
    let mut switches = 0;
    let mut tasks = 0;
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = e.unwrap().path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        ticks += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        for l in status.lines() {
            if l.starts_with("voluntary_ctxt_switches")
                || l.starts_with("nonvoluntary_ctxt_switches")
            {
                switches += l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            }
        }
        tasks += 1;
    }
    (ticks, switches, tasks)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let secs: u64 = args.next().map_or(10, |a| a.parse().unwrap());
    let p: usize = args.next().map_or(2, |a| a.parse().unwrap());
    ferry::Runtime::builder()
        .processors(p)
        .run(move || {
            let gate = Arc::new((ferry::sync::Mutex::new(false), ferry::sync::Condvar::new()));
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let g = Arc::clone(&gate);
                    ferry::spawn(move || {
                        let mut open = g.0.lock();
                        while !*open {
                            open = g.1.wait(open);
                        }
                    })
                })
                .collect();
            // Let every thread block and the spins end.
            ferry::sleep(Duration::from_millis(300));
            // The window is timed by a plain kernel thread outside the
            // runtime; this thread waits for it on a ferry condition
            // variable, so nothing of ferry runs meanwhile.
            let done = Arc::new((ferry::sync::Mutex::new(None), ferry::sync::Condvar::new()));
            let d = Arc::clone(&done);
            std::thread::spawn(move || {
                let (t0, s0, k0) = sample();
                std::thread::sleep(Duration::from_secs(secs));
                let (t1, s1, k1) = sample();
                *d.0.lock() = Some((t1 - t0, s1 - s0, k0, k1));
                d.1.notify_one();
            });
            let mut r = done.0.lock();
            while r.is_none() {
                r = done.1.wait(r);
            }
            let (ticks, switches, k0, k1) = r.take().unwrap();
            drop(r);
            let hz = 100;
            println!(
                "idle {secs} s with {n} blocked threads, P={p}: cpu {} ms, {switches} context switches, kernel threads {k0} -> {k1} (incl. the sampler)",
                ticks * 1000 / hz
            );
            *gate.0.lock() = true;
            gate.1.notify_all();
            for h in handles {
                h.join().unwrap();
            }
        })
        .unwrap();
}
