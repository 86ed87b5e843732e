//! An idle runtime costs nothing: with every ferry thread blocked, on a
//! gate or reading an idle socket, no kernel thread of the runtime wakes
//! (no timed sleeps of spares, stand-ins or the monitor, no poll of the
//! reactor), and the spares a burst of blocking calls made retire,
//! down to the pool's small reserve. Every check is on counts read from
//! `/proc/self/task`, never on elapsed time.
//!
//! One test function: the counts are of the whole process, which other
//! tests running beside it would disturb.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

/// The kernel threads of this process: (tid, voluntary + involuntary
/// context switches).
fn tasks() -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let e = e.unwrap();
        let tid: u32 = e.file_name().to_str().unwrap().parse().unwrap();
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue; // it ended meanwhile
        };
        let switches = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        out.push((tid, switches));
    }
    out
}

/// Context switches of every kernel thread but `except`, between two
/// samples (threads present in both): the total, and who switched.
fn switches_between(before: &[(u32, u64)], after: &[(u32, u64)], except: u32) -> (u64, String) {
    let mut total = 0;
    let mut who = String::new();
    for (tid, n) in after.iter().filter(|(tid, _)| *tid != except) {
        let Some((_, m)) = before.iter().find(|(t, _)| t == tid) else {
            continue;
        };
        if n > m {
            total += n - m;
            let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"));
            who += &format!(" {}:{}", comm.unwrap_or_default().trim(), n - m);
        }
    }
    (total, who)
}

/// The counts the plain kernel thread outside the runtime reports.
struct Report {
    switches: u64,
    who: String,
}

const BLOCKED: usize = 10_000;
/// Idle TCP connections, each with a ferry thread reading its server end
/// (both ends are in this process, under its descriptor limit).
const SOCKETS: usize = 1_000;
const PROCESSORS: usize = 2;
/// Kernel threads of an idle runtime beside its caller's (counted in the
/// baseline; it may have lost its processor to a takeover and wait in the
/// pool, where it never retires): a driver per processor, the monitor, the
/// pool's reserve (processors + 2) and a stand-in per processor; and the
/// stack cache's scavenger, a thread of the process that the exits of this
/// many threads may start (in a debug build their stacks pass the cache's
/// resident bound), asleep while nothing is due.
const BOUND: usize = PROCESSORS + 1 + (PROCESSORS + 2) + PROCESSORS + 1;
/// How long the idle runtime settles before the quiet window opens: well
/// over the monitor's idle looks before it parks and the deadlock watch's
/// grace.
const SETTLE: Duration = Duration::from_millis(500);
/// Blocking calls in flight at once: each takes a spare.
const BURST: usize = 40;

#[test]
fn idle_runtime_wakes_nobody_and_spares_retire() {
    let baseline = tasks().len();
    let extra = ferry::Runtime::builder()
        .processors(PROCESSORS)
        .run(move || {
            // 10,000 threads blocked on one gate.
            let gate = Arc::new((
                ferry::sync::Mutex::new((0usize, false)),
                ferry::sync::Condvar::new(),
            ));
            let all_in = Arc::new(ferry::sync::Condvar::new());
            let handles: Vec<_> = (0..BLOCKED)
                .map(|_| {
                    let (g, all_in) = (Arc::clone(&gate), Arc::clone(&all_in));
                    ferry::spawn(move || {
                        let mut s = g.0.lock();
                        s.0 += 1;
                        if s.0 == BLOCKED {
                            all_in.notify_one();
                        }
                        while !s.1 {
                            s = g.1.wait(s);
                        }
                    })
                })
                .collect();
            {
                let mut s = gate.0.lock();
                while s.0 < BLOCKED {
                    s = all_in.wait(s);
                }
            }
            // Idle sockets: a reader parked on each server end.
            let listener = ferry::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let clients = std::thread::spawn(move || {
                (0..SOCKETS)
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect::<Vec<_>>()
            });
            let reading = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let readers: Vec<_> = (0..SOCKETS)
                .map(|_| {
                    let (mut s, _) = listener.accept().unwrap();
                    let reading = Arc::clone(&reading);
                    ferry::spawn(move || {
                        use std::io::Read;
                        reading.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let mut b = [0u8; 16];
                        // Zero: the client end closed.
                        assert_eq!(s.read(&mut b).unwrap(), 0);
                    })
                })
                .collect();
            let clients = clients.join().unwrap();
            while reading.load(std::sync::atomic::Ordering::Relaxed) < SOCKETS {
                ferry::sleep(Duration::from_millis(1));
            }
            // Let the processors' idle spins end before sampling.
            ferry::sleep(Duration::from_millis(200));

            // The window is watched by a plain kernel thread; this ferry
            // thread waits for its report on a ferry condition variable, so
            // nothing of the runtime has reason to run meanwhile. The
            // window opens once the runtime has settled into that wait:
            // going idle, the monitor takes its last looks before it parks
            // and the last processor to sleep looks for a deadlock, a
            // grace apart; an idle runtime then wakes nobody.
            let done = Arc::new((ferry::sync::Mutex::new(None), ferry::sync::Condvar::new()));
            let d = Arc::clone(&done);
            std::thread::spawn(move || {
                let me = rustix::thread::gettid().as_raw_nonzero().get() as u32;
                std::thread::sleep(SETTLE);
                let before = tasks();
                std::thread::sleep(Duration::from_secs(2));
                let after = tasks();
                let (switches, who) = switches_between(&before, &after, me);
                *d.0.lock() = Some(Report { switches, who });
                d.1.notify_one();
            });
            let report = {
                let mut r = done.0.lock();
                while r.is_none() {
                    r = done.1.wait(r);
                }
                r.take().unwrap()
            };
            // Settled, it is 0 here: nothing of an idle runtime sleeps
            // with a timeout. One timed sleep shows: a spare of the pool's
            // reserve (here the runtime's caller) woken once a second is 2
            // switches in the window, the monitor napping 640 us thousands.
            assert!(
                report.switches < 2,
                "an idle runtime's kernel threads switched {} times in the window:{}",
                report.switches,
                report.who
            );
            gate.0.lock().1 = true;
            gate.1.notify_all();
            for h in handles {
                h.join().unwrap();
            }
            drop(clients);
            for r in readers {
                r.join().unwrap();
            }

            // A burst of blocking calls: each takes a spare, made on demand.
            let start = Arc::new(std::sync::Barrier::new(BURST));
            let calls: Vec<_> = (0..BURST)
                .map(|_| {
                    let start = Arc::clone(&start);
                    ferry::spawn(move || ferry::blocking(move || start.wait()))
                })
                .collect();
            for c in calls {
                c.join().unwrap();
            }
            let peak = tasks().len();
            assert!(
                peak >= BURST,
                "the burst made {peak} kernel threads, fewer than its {BURST} calls"
            );
            // Spares beyond the reserve retire after a second in the pool.
            // A plain kernel thread watches the count come down (bounded by
            // the watchdog) while this one waits, so that the runtime is
            // idle meanwhile.
            let done = Arc::new((ferry::sync::Mutex::new(None), ferry::sync::Condvar::new()));
            let d = Arc::clone(&done);
            std::thread::spawn(move || {
                let limit = Instant::now() + common::WATCHDOG;
                // Less the watcher itself.
                let count = || tasks().len() - 1;
                while count() > baseline + BOUND && Instant::now() < limit {
                    std::thread::sleep(Duration::from_millis(50));
                }
                *d.0.lock() = Some(count() - baseline);
                d.1.notify_one();
            });
            let mut r = done.0.lock();
            while r.is_none() {
                r = done.1.wait(r);
            }
            r.take().unwrap()
        })
        .unwrap();
    assert!(
        extra <= BOUND,
        "{extra} kernel threads stayed after the burst of {BURST} blocking calls ended"
    );
}
