//! The `blocked` scenario of `ferry-bench upcalls` alone, beside the
//! same-core futex baseline and the short-call cost (`blocking(getppid)`
//! with a runnable peer), all in one time window: medians over `ROUNDS`
//! rounds (the first argument, default 5).
//!
//! Built with `RUSTFLAGS="--cfg ferry_probe"` (best in a target directory
//! of its own), it also prints where the time of each takeover goes: the
//! median of each step of the handoff path, from `rdtsc` stamps the
//! runtime takes along it (`ferry::probe`).
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

fn futex_wait(w: &AtomicU32, v: u32) {
    // SAFETY: `w` is a live, aligned 32-bit atomic for the whole call; a
    // null timeout means none; the caller's loop rechecks the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            v,
            0usize,
        );
    }
}
fn futex_wake(w: &AtomicU32) {
    // SAFETY: `w` is a live, aligned 32-bit atomic; waking touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}
fn take(w: &AtomicU32) {
    while w.swap(0, Acquire) != 1 {
        futex_wait(w, 0);
    }
}
fn pin(cpu: usize) {
    // SAFETY: `s` is a zeroed (empty) CPU set owned here, then filled in;
    // the call reads it only.
    unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut s);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &s);
    }
}
fn futex_rt(n: u32) -> f64 {
    let (ping, pong) = (AtomicU32::new(0), AtomicU32::new(0));
    let b = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(0);
            b.wait();
            for _ in 0..n {
                take(&ping);
                pong.store(1, Release);
                futex_wake(&pong);
            }
        });
        s.spawn(|| {
            pin(0);
            b.wait();
            let t = Instant::now();
            for _ in 0..n {
                ping.store(1, Release);
                futex_wake(&ping);
                take(&pong);
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .join()
        .unwrap()
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Returns (blocked mean ns, stall median ns, unblocked mean ns, per-step deltas).
fn blocked_run(calls: u32) -> (f64, f64, f64, Vec<Vec<f64>>) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 wants.
    unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    let (rfd, wfd) = (fds[0], fds[1]);
    // `PROBE_TRACE=1`: a trace marker before each lend (ftrace).
    let trace_lends = std::env::var_os("PROBE_TRACE").is_some();
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let entered = Arc::new(AtomicU32::new(0));
            let go = Arc::new(AtomicU32::new(0));
            let done = Arc::new(AtomicU32::new(0));
            let first = Arc::new(AtomicU64::new(0));
            let base = Instant::now();
            let h = ferry::Handle::current();
            let compute = {
                let (stop, entered, first) = (stop.clone(), entered.clone(), first.clone());
                ferry::spawn(move || {
                    let mut seen = 0;
                    while !stop.load(Relaxed) {
                        let g = entered.load(Acquire);
                        if g != seen {
                            seen = g;
                            first.store(base.elapsed().as_nanos() as u64, Relaxed);
                            #[cfg(ferry_probe)]
                            ferry::probe::mark(15);
                        }
                        ferry::yield_now();
                    }
                })
            };
            let call_at = Arc::new(AtomicU64::new(0));
            let reader = {
                let (stop, entered, go, done, call_at) = (
                    stop.clone(),
                    entered.clone(),
                    go.clone(),
                    done.clone(),
                    call_at.clone(),
                );
                ferry::spawn(move || {
                    for g in 1..=calls {
                        while go.load(Acquire) < g {
                            if stop.load(Relaxed) {
                                return;
                            }
                            ferry::yield_now();
                        }
                        if trace_lends {
                            let _ = std::fs::write(
                                "/sys/kernel/tracing/trace_marker",
                                format!("lend {g}"),
                            );
                        }
                        call_at.store(base.elapsed().as_nanos() as u64, Relaxed);
                        entered.store(g, Release);
                        ferry::blocking(|| {
                            let mut b = 0u8;
                            #[cfg(ferry_probe)]
                            ferry::probe::mark(14);
                            // SAFETY: `b` is a writable byte; `rfd` is the
                            // pipe's open read end.
                            unsafe { libc::read(rfd, (&raw mut b).cast(), 1) }
                        });
                        ferry::yield_now();
                        done.store(g, Release);
                    }
                })
            };
            let before = h.upcall_stats();
            let mut stalls = vec![];
            let mut steps: Vec<Vec<f64>> = vec![vec![]; 16];
            #[cfg(ferry_probe)]
            let ghz = {
                let t = Instant::now();
                let c = ferry::probe::now();
                while t.elapsed() < Duration::from_millis(20) {}
                (ferry::probe::now() - c) as f64 / t.elapsed().as_nanos() as f64
            };
            for g in 1..=calls {
                #[cfg(ferry_probe)]
                ferry::probe::reset();
                go.store(g, Release);
                while entered.load(Acquire) < g {
                    ferry::yield_now();
                }
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(50) {
                    ferry::yield_now();
                }
                let b = 1u8;
                // SAFETY: `b` is a readable byte; `wfd` is the pipe's open
                // write end.
                unsafe { libc::write(wfd, (&raw const b).cast(), 1) };
                while done.load(Acquire) < g {
                    ferry::yield_now();
                }
                stalls.push(first.load(Relaxed).saturating_sub(call_at.load(Relaxed)) as f64);
                #[cfg(ferry_probe)]
                {
                    let s = ferry::probe::stamps();
                    if s[13] != 0 && s[0] != 0 {
                        // Deltas along the path, in order: lender 0..7,14;
                        // spare 8..13; then 15.
                        let order = [0, 1, 2, 3, 5, 6, 7, 14, 8, 9, 10, 12, 13, 11, 15];
                        // Slot 4 is not stamped: it keeps the whole
                        // lend -> `Blocked` time of each event.
                        let total = (s[13] as f64 - s[0] as f64) / ghz;
                        steps[4].push(total);
                        // `PROBE_SLOW=<ns>`: each takeover slower than that,
                        // stamp by stamp since the lend.
                        if let Some(slow) = std::env::var("PROBE_SLOW")
                            .ok()
                            .and_then(|v| v.parse::<f64>().ok())
                            && total > slow
                        {
                            let mut line = format!("slow takeover of lend {g}: {total:.0} ns:");
                            for (i, &t) in s.iter().enumerate() {
                                if t != 0 {
                                    line += &format!(" {i}@{:.0}", (t as f64 - s[0] as f64) / ghz);
                                }
                            }
                            println!("{line}");
                            let _ = std::fs::write("/sys/kernel/tracing/trace_marker", &line);
                        }
                        // `PROBE_ABS=1`: each stamp since the lend instead
                        // (when stamps come out of order, as when a spare is
                        // put on its way before the lend).
                        let abs = std::env::var_os("PROBE_ABS").is_some();
                        let mut prev = s[0];
                        for &i in &order {
                            if s[i] != 0 {
                                steps[i].push((s[i] as f64 - prev as f64) / ghz);
                                if !abs {
                                    prev = s[i];
                                }
                            }
                        }
                    }
                }
            }
            let _ = &mut steps;
            let after = h.upcall_stats();
            stop.store(true, Relaxed);
            compute.join().unwrap();
            reader.join().unwrap();
            let mean = |a: ferry::upcall::EventLatency, b: ferry::upcall::EventLatency| {
                let n = a.count - b.count;
                let tot = a.mean.as_nanos() as f64 * a.count as f64
                    - b.mean.as_nanos() as f64 * b.count as f64;
                tot / n.max(1) as f64
            };
            (
                mean(after.blocked, before.blocked),
                median(&mut stalls),
                mean(after.unblocked, before.unblocked),
                steps,
            )
        })
        .unwrap()
}

fn getppid_run(ms: u64) -> (f64, f64) {
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let h = ferry::Handle::current();
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            let other = ferry::spawn(move || {
                while !s2.load(Relaxed) {
                    ferry::yield_now();
                }
            });
            ferry::yield_now();
            let before = h.upcall_stats();
            let t = Instant::now();
            let mut n = 0u64;
            while t.elapsed() < Duration::from_millis(ms) {
                for _ in 0..1000 {
                    // SAFETY: `getppid` has no arguments and touches no memory.
                    std::hint::black_box(ferry::blocking(|| unsafe { libc::getppid() }));
                }
                n += 1000;
            }
            let d = t.elapsed();
            let after = h.upcall_stats();
            stop.store(true, Relaxed);
            other.join().unwrap();
            (
                d.as_nanos() as f64 / n as f64,
                (after.blocked.count - before.blocked.count) as f64 / n as f64,
            )
        })
        .unwrap()
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let calls = 200;
    let (mut fx, mut bl, mut st, mut gp, mut gpb, mut ub) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut all_steps: Vec<Vec<f64>> = vec![vec![]; 16];
    for _ in 0..rounds {
        fx.push(futex_rt(20000) / 2.0);
        let (b, s, u, steps) = blocked_run(calls);
        ub.push(u);
        bl.push(b);
        st.push(s);
        for (i, v) in steps.into_iter().enumerate() {
            all_steps[i].extend(v);
        }
        let (g, gb) = getppid_run(200);
        gp.push(g);
        gpb.push(gb);
    }
    let (f, b) = (median(&mut fx), median(&mut bl));
    println!(
        "futex wake+wait {f:.0} ns | Blocked mean {b:.0} ns ({:.2}x) | stall {:.0} ns | getppid+peer {:.0} ns/call ({:.4} Blocked/call) | Unblocked mean {:.0} ns",
        b / f,
        median(&mut st),
        median(&mut gp),
        median(&mut gpb),
        median(&mut ub)
    );
    println!("  runs: futex {fx:.0?}\n        blocked {bl:.0?}\n        getppid {gp:.0?}");
    if !all_steps[13].is_empty() {
        let names = [
            "0 lend: lent_at taken",
            "1 hand_lent: standby swapped",
            "2 hand: pool popped (mutex)",
            "3 set_class(spare, batch) done",
            "4 (all of it: lend -> Blocked, per event)",
            "5 pin + standby named",
            "6 FUTEX_WAKE done",
            "7 lend returned, before f",
            "8 spare: back from futex wait",
            "9 spare: take begins",
            "10 spare: driver CAS done",
            "11 spare: set_class(self, normal) done",
            "12 spare: begin done",
            "13 spare: policy got Blocked",
            "14 closure: before read()",
            "15 compute thread runs",
        ];
        println!(
            "  per step, ns since the previous step (median over {} takeovers; p10/p90):",
            all_steps[13].len()
        );
        for i in [0, 1, 2, 3, 5, 6, 7, 14, 8, 9, 10, 12, 13, 11, 15, 4] {
            let v = &mut all_steps[i];
            if v.is_empty() {
                continue;
            }
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
            println!(
                "    {:<40} {:>8.0} {:>8.0} {:>8.0}  ({} stamped)",
                names[i],
                q(0.5),
                q(0.1),
                q(0.9),
                v.len()
            );
        }
    }
}
