//! Mach-style thread control on ferry threads: suspension (003 §4), exiting
//! from inside a closure, run-time accounting, and adopting a kernel
//! thread's own flow of control as a runtime's first thread.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use ferry::thread::Suspension;

fn rt(n: usize) -> ferry::Builder {
    let mut b = ferry::Runtime::builder();
    b.processors(n);
    b
}

/// The P/V semaphore of 003 §4, written as printed there, on
/// `suspend`/`resume`/`wait_suspended` and a spinlock-guarded queue.
struct Semaphore {
    inner: ferry::sync::SpinLock<(bool, std::collections::VecDeque<ferry::Thread>)>,
}

impl Semaphore {
    fn p(&self) {
        let mut g = self.inner.lock();
        while g.0 {
            let me = ferry::current();
            me.suspend();
            g.1.push_back(me.clone());
            drop(g);
            me.wait_suspended(true);
            g = self.inner.lock();
        }
        g.0 = true;
    }

    fn v(&self) {
        let mut g = self.inner.lock();
        g.0 = false;
        let next = g.1.pop_front();
        drop(g);
        if let Some(t) = next {
            t.resume();
        }
    }
}

#[test]
fn suspend_then_resume_before_wait_does_not_stop() {
    rt(1)
        .run(|| {
            let me = ferry::current();
            assert_eq!(me.suspension(), Suspension::Running);
            me.suspend();
            assert_eq!(me.suspension(), Suspension::WillSuspend);
            me.resume();
            me.wait_suspended(true);
            assert_eq!(me.suspension(), Suspension::Running);
        })
        .unwrap();
}

#[test]
fn a_thread_that_stops_itself_runs_again_once_resumed() {
    rt(1)
        .run(|| {
            let stage = Arc::new(AtomicU64::new(0));
            let s = Arc::clone(&stage);
            let t = ferry::spawn(move || {
                let me = ferry::current();
                me.suspend();
                s.store(1, SeqCst);
                me.wait_suspended(true);
                s.store(2, SeqCst);
            });
            let th = t.thread();
            while th.suspension() != Suspension::Stopped {
                ferry::yield_now();
            }
            for _ in 0..100 {
                ferry::yield_now();
            }
            assert_eq!(stage.load(SeqCst), 1, "a suspended thread must not run");
            th.resume();
            t.join().unwrap();
            assert_eq!(stage.load(SeqCst), 2);
        })
        .unwrap();
}

#[test]
fn a_queued_thread_suspended_from_outside_is_held_until_resumed() {
    rt(2)
        .run(|| {
            let count = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (c, s) = (Arc::clone(&count), Arc::clone(&stop));
            let t = ferry::spawn(move || {
                while !s.load(Relaxed) {
                    c.fetch_add(1, Relaxed);
                    ferry::yield_now();
                }
            });
            let th = t.thread();
            while count.load(Relaxed) < 10 {
                ferry::yield_now();
            }
            th.suspend();
            th.wait_suspended(true);
            assert_eq!(th.suspension(), Suspension::Stopped);
            let frozen = count.load(Relaxed);
            for _ in 0..1000 {
                ferry::yield_now();
            }
            assert_eq!(count.load(Relaxed), frozen, "a stopped thread must not run");
            th.resume();
            while count.load(Relaxed) == frozen {
                ferry::yield_now();
            }
            stop.store(true, Relaxed);
            t.join().unwrap();
        })
        .unwrap();
}

#[test]
fn p_and_v_from_003_keep_mutual_exclusion_under_contention() {
    let threads = 16;
    let rounds = if cfg!(miri) { 10 } else { 2_000 };
    let total = rt(2)
        .run(move || {
            let sem = Arc::new(Semaphore {
                inner: ferry::sync::SpinLock::new((false, Default::default())),
            });
            let inside = Arc::new(AtomicU64::new(0));
            let counter = Arc::new(AtomicU64::new(0));
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let (sem, inside, counter) =
                        (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&counter));
                    ferry::spawn(move || {
                        for i in 0..rounds {
                            sem.p();
                            assert_eq!(inside.fetch_add(1, SeqCst), 0, "two inside P..V");
                            let v = counter.load(Relaxed);
                            if i % 7 == 0 {
                                ferry::yield_now();
                            }
                            counter.store(v + 1, Relaxed);
                            inside.fetch_sub(1, SeqCst);
                            sem.v();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            counter.load(Relaxed)
        })
        .unwrap();
    assert_eq!(total, threads * rounds);
}

#[test]
fn exit_with_ends_the_thread_and_hands_the_value_to_its_joiner() {
    fn deep(n: u32) -> u32 {
        if n == 0 {
            // SAFETY: nothing on this stack needs its destructor.
            unsafe { ferry::thread::exit_with(77u32) }
        }
        deep(n - 1) + 1
    }
    let r = rt(1)
        .run(|| ferry::spawn(|| deep(10)).join().unwrap())
        .unwrap();
    assert_eq!(r, 77);
}

#[test]
fn cpu_time_is_accounted_only_when_asked() {
    rt(1)
        .run(|| assert_eq!(ferry::current().cpu_time(), None))
        .unwrap();
    let t = rt(1)
        .thread_cpu_time(true)
        .run(|| {
            let t = ferry::spawn(|| {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(5) {
                    std::hint::spin_loop();
                }
            });
            let th = t.thread();
            t.join().unwrap();
            th.cpu_time().unwrap()
        })
        .unwrap();
    assert!(t >= std::time::Duration::from_millis(4), "{t:?}");
}

/// Two threads that hand the processor back and forth: each one's run time
/// is its own turns, not the other's (the switch's one clock read ends one
/// thread's time and starts the next's). One spins 40 ms in 200 turns, the
/// other only yields back (its turns take well under a microsecond each);
/// time the kernel takes the processor's core from a turn counts as that
/// thread's, so the yielder is not held to zero, only to far below the
/// spinner (it would be charged about as much if charged the other's
/// turns).
#[test]
fn cpu_time_is_each_threads_own() {
    const TURNS: u32 = 200;
    let spin = Duration::from_millis(40);
    let (long, short) = rt(1)
        .thread_cpu_time(true)
        .run(move || {
            let a = ferry::spawn(move || {
                for _ in 0..TURNS {
                    let start = std::time::Instant::now();
                    while start.elapsed() < spin / TURNS {
                        std::hint::spin_loop();
                    }
                    ferry::yield_now();
                }
            });
            let b = ferry::spawn(|| (0..TURNS).for_each(|_| ferry::yield_now()));
            let (ta, tb) = (a.thread(), b.thread());
            a.join().unwrap();
            b.join().unwrap();
            (ta.cpu_time().unwrap(), tb.cpu_time().unwrap())
        })
        .unwrap();
    assert!(long >= spin, "{long:?}");
    assert!(short < long / 4, "long {long:?}, short {short:?}");
}

/// Runs in a child process (the flow it adopts may end on any kernel
/// thread, so it ends the process, as a C `main` does).
#[test]
fn adopted_flow_child() {
    if std::env::var_os("FERRY_ADOPT_CHILD").is_none() {
        return;
    }
    let rt = rt(2).adopt().unwrap();
    assert_eq!(rt.processors(), 2);
    let me = ferry::current();
    assert_eq!(me.name(), Some("main"));
    // Blocking at user level and spawning work as any ferry thread.
    let hs: Vec<_> = (0..100u64).map(|i| ferry::spawn(move || i)).collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 4950);
    let m = Arc::new(ferry::sync::Mutex::new(0u64));
    let hs: Vec<_> = (0..8)
        .map(|_| {
            let m = Arc::clone(&m);
            ferry::spawn(move || {
                for _ in 0..1000 {
                    *m.lock() += 1;
                    ferry::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), 8000);
    println!("adopted flow done");
    std::process::exit(0);
}

#[test]
fn adopt_makes_the_calling_kernel_thread_a_ferry_thread() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "adopted_flow_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FERRY_ADOPT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("adopted flow done"),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn terminate_stops_a_running_a_parked_and_a_held_thread() {
    rt(2)
        .run(|| {
            let count = Arc::new(AtomicU64::new(0));
            let c = Arc::clone(&count);
            let busy = ferry::spawn(move || {
                loop {
                    c.fetch_add(1, Relaxed);
                    ferry::yield_now();
                }
            });
            let (_tx, rx) = ferry::sync::channel::<u32>(1);
            let parked = ferry::spawn(move || rx.recv().map_or(0, |v| v as u64));
            let held = ferry::spawn(|| {
                let me = ferry::current();
                me.suspend();
                me.wait_suspended(true);
                1u64
            });
            while count.load(Relaxed) < 10 {
                ferry::yield_now();
            }
            while held.thread().suspension() != Suspension::Stopped {
                ferry::yield_now();
            }
            for (h, v) in [(busy, 7u64), (parked, 8), (held, 9)] {
                let t = h.thread();
                // SAFETY: these closures hold nothing that needs dropping.
                assert!(unsafe { t.terminate(v) }.is_ok());
                assert_eq!(t.suspension(), Suspension::Terminated);
                t.resume(); // leaves it terminated
                assert_eq!(h.join().unwrap(), v);
            }
            let frozen = count.load(Relaxed);
            for _ in 0..100 {
                ferry::yield_now();
            }
            assert_eq!(count.load(Relaxed), frozen, "a terminated thread ran");
        })
        .unwrap();
}

#[test]
fn terminating_a_finished_thread_gives_the_value_back() {
    rt(1)
        .run(|| {
            let h = ferry::spawn(|| 1u8);
            let t = h.thread();
            assert_eq!(h.join().unwrap(), 1);
            // SAFETY: the thread has finished; nothing is abandoned.
            assert_eq!(unsafe { t.terminate(2u8) }, Err(2));
        })
        .unwrap();
}
