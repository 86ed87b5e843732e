//! Mach-style thread control on ferry threads: suspension (003 §4), exiting
//! from inside a closure, run-time accounting, and adopting a kernel
//! thread's own flow of control as a runtime's first thread.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use ferry::thread::Suspension;

mod common;
use common::WATCHDOG;

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
        .thread_cpu_time(false)
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

// ---------------------------------------------------------------------------
// Thread control that takes effect: a thread that computes without ever
// switching, and one blocked in a long system call, are stopped, resumed,
// terminated and aborted. Each runtime runs under a watchdog (as in
// `sync.rs`): a stop that never comes fails the test instead of hanging it.

/// Runs `f` as the first thread of a runtime of `n` processors with no
/// time slice (whatever `FERRY_TIME_SLICE` says), under the watchdog.
fn unsliced<T: Send + 'static>(what: &str, n: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    let what = format!("{what}: a thread that was told to stop did not");
    common::within(WATCHDOG, &what, move || {
        rt(n).time_slice(None).run(f).unwrap()
    })
}

/// [`unsliced`], with `ferry::fs` on its blocking handoff (no io_uring): the
/// reader tests below are about a thread inside a blocking kernel call,
/// which a read of `ferry::fs` is only on that path (through the ring, a
/// read that must wait parks the thread instead; `tests/fs_ring.rs`).
fn unsliced_blocking_fs<T: Send + 'static>(
    what: &str,
    n: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let what = format!("{what}: a thread that was told to stop did not");
    common::within(WATCHDOG, &what, move || {
        rt(n).time_slice(None).io_uring(false).run(f).unwrap()
    })
}

/// Spawns a thread that counts in a loop that never switches, until `stop`.
fn spinner(count: &Arc<AtomicU64>, stop: &Arc<AtomicBool>) -> ferry::JoinHandle<u64> {
    let (c, s) = (Arc::clone(count), Arc::clone(stop));
    ferry::spawn(move || {
        while !s.load(Relaxed) {
            c.fetch_add(1, Relaxed);
            std::hint::spin_loop();
        }
        0
    })
}

/// Waits (yielding) until `count` moves past `from`.
fn until_past(count: &AtomicU64, from: u64) {
    while count.load(Relaxed) <= from {
        ferry::yield_now();
    }
}

#[test]
fn a_spinning_thread_is_suspended_waited_for_and_resumed_without_a_time_slice() {
    unsliced("suspend a spinner", 2, || {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let h = spinner(&count, &stop);
        let t = h.thread();
        for _ in 0..20 {
            until_past(&count, 0);
            t.suspend();
            t.wait_suspended(true);
            assert_eq!(t.suspension(), Suspension::Stopped);
            let frozen = count.load(Relaxed);
            for _ in 0..200 {
                ferry::yield_now();
            }
            assert_eq!(count.load(Relaxed), frozen, "a stopped thread ran");
            t.resume();
            until_past(&count, frozen);
        }
        stop.store(true, Relaxed);
        h.join().unwrap();
    });
}

#[test]
fn a_spinning_thread_is_terminated_without_a_time_slice() {
    unsliced("terminate a spinner", 2, || {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let h = spinner(&count, &stop);
        until_past(&count, 0);
        let t = h.thread();
        // SAFETY: the spinner's stack holds nothing that needs dropping.
        assert!(unsafe { t.terminate(7u64) }.is_ok());
        assert_eq!(h.join().unwrap(), 7);
        let frozen = count.load(Relaxed);
        for _ in 0..200 {
            ferry::yield_now();
        }
        assert_eq!(count.load(Relaxed), frozen, "a terminated thread ran");
    });
}

#[test]
fn a_thread_holding_a_spinlock_stops_only_once_it_lets_go() {
    unsliced("suspend a lock holder", 2, || {
        let lock = Arc::new(ferry::sync::SpinLock::new(0u64));
        let rounds = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, r, s) = (Arc::clone(&lock), Arc::clone(&rounds), Arc::clone(&stop));
        // Nearly all of its time under the lock.
        let h = ferry::spawn(move || {
            while !s.load(Relaxed) {
                let mut g = l.lock();
                for _ in 0..10_000 {
                    *g += 1;
                    std::hint::spin_loop();
                }
                drop(g);
                r.fetch_add(1, Relaxed);
            }
        });
        let t = h.thread();
        for _ in 0..50 {
            until_past(&rounds, rounds.load(Relaxed));
            t.suspend();
            t.wait_suspended(true);
            assert!(
                lock.try_lock().is_some(),
                "stopped while it held the spinlock"
            );
            t.resume();
        }
        stop.store(true, Relaxed);
        h.join().unwrap();
    });
}

/// A pipe nobody writes to yet: the read end as a `ferry::fs::File`, and
/// the write end.
fn pipe() -> (ferry::fs::File, std::io::PipeWriter) {
    let (r, w) = std::io::pipe().unwrap();
    let r = std::fs::File::from(std::os::fd::OwnedFd::from(r));
    (ferry::fs::File::from_std(r), w)
}

/// Spawns a thread that reads one byte from `r` (through ferry's wrapper)
/// and then sets `after`; it returns what the read returned.
fn reader(
    mut r: ferry::fs::File,
    after: &Arc<AtomicBool>,
) -> ferry::JoinHandle<std::io::Result<usize>> {
    let after = Arc::clone(after);
    ferry::spawn(move || {
        let mut byte = [0u8; 1];
        let n = std::io::Read::read(&mut r, &mut byte);
        after.store(true, SeqCst);
        n
    })
}

/// Suspends `t` and waits until it has stopped inside its blocking call:
/// a suspension that catches it before the call is undone and tried again.
fn stop_in_call(t: &ferry::Thread) {
    loop {
        t.suspend();
        t.wait_suspended(true);
        if t.suspension() == Suspension::StoppedInCall {
            return;
        }
        t.resume();
        ferry::yield_now();
    }
}

#[test]
fn a_thread_in_a_blocking_read_is_stopped_in_the_call_and_stops_when_it_returns() {
    for n in [1, 2] {
        unsliced_blocking_fs("suspend a reader", n, || {
            let (r, mut w) = pipe();
            let after = Arc::new(AtomicBool::new(false));
            let h = reader(r, &after);
            let t = h.thread();
            stop_in_call(&t);
            // The read returns; the thread must run nothing after it.
            std::io::Write::write_all(&mut w, b"x").unwrap();
            while t.suspension() != Suspension::Stopped {
                ferry::yield_now();
            }
            for _ in 0..200 {
                ferry::yield_now();
            }
            assert!(!after.load(SeqCst), "ran after its call while suspended");
            t.resume();
            assert_eq!(h.join().unwrap().unwrap(), 1);
            assert!(after.load(SeqCst));
        });
    }
}

#[test]
fn a_thread_in_a_blocking_read_is_terminated() {
    for n in [1, 2] {
        unsliced_blocking_fs("terminate a reader", n, || {
            let (r, _w) = pipe();
            let after = Arc::new(AtomicBool::new(false));
            let h = reader(r, &after);
            let t = h.thread();
            stop_in_call(&t);
            t.resume();
            // SAFETY: the reader's stack holds only the file and a buffer.
            assert!(unsafe { t.terminate(std::io::Result::Ok(99usize)) }.is_ok());
            assert_eq!(h.join().unwrap().unwrap(), 99);
            assert!(!after.load(SeqCst), "a terminated thread ran");
        });
    }
}

#[test]
fn abort_makes_a_blocking_read_fail_with_eintr() {
    for n in [1, 2] {
        unsliced_blocking_fs("abort a reader", n, || {
            let (r, _w) = pipe();
            let after = Arc::new(AtomicBool::new(false));
            let h = reader(r, &after);
            let t = h.thread();
            stop_in_call(&t);
            // Aborted while suspended: the read fails, and the thread
            // still stops on its way out of the call.
            assert!(t.abort());
            while t.suspension() != Suspension::Stopped {
                ferry::yield_now();
            }
            assert!(!after.load(SeqCst));
            t.resume();
            let err = h.join().unwrap().unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
            assert_eq!(err.raw_os_error(), Some(libc::EINTR));
            // Not in a call: nothing to abort.
            let idle = ferry::spawn(ferry::yield_now);
            assert!(!idle.thread().abort());
            idle.join().unwrap();
            assert!(!ferry::current().abort());
        });
    }
}

#[test]
fn a_thread_built_suspended_runs_only_once_resumed() {
    unsliced("a suspended start", 2, || {
        let ran = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&ran);
        let h = ferry::thread::Builder::new()
            .suspended(true)
            .spawn(move || r.store(true, SeqCst))
            .unwrap();
        let t = h.thread();
        assert_eq!(t.suspension(), Suspension::Stopped);
        for _ in 0..200 {
            ferry::yield_now();
        }
        assert!(!ran.load(SeqCst), "ran before it was resumed");
        t.resume();
        h.join().unwrap();
        assert!(ran.load(SeqCst));
    });
}

/// Terminations that race the target's own end, on two processors: the
/// thread either finishes on its own (its joiner gets its value, and the
/// terminate gives the value back) or is terminated (its joiner gets the
/// terminator's), and the join always returns: a termination that lands
/// while the thread publishes its result must not lose its joiner's wakeup.
#[test]
fn a_termination_racing_the_threads_end_never_loses_its_joiner() {
    unsliced("terminate racing the end", 2, || {
        let mut own = 0u32;
        for i in 0..20_000u64 {
            let h = ferry::spawn(move || {
                let mut x = i;
                for _ in 0..(i % 64) {
                    x = std::hint::black_box(x.wrapping_mul(3));
                }
                std::hint::black_box(x);
                i
            });
            let t = h.thread();
            // Give way now and then, so that the thread has run a little.
            if i % 3 == 0 {
                ferry::yield_now();
            }
            // SAFETY: the thread's closure holds nothing that relies on
            // running to its end.
            let r = unsafe { t.terminate(u64::MAX) };
            let v = h.join().unwrap();
            match r {
                Ok(()) => assert_eq!(v, u64::MAX),
                Err(back) => {
                    assert_eq!(back, u64::MAX);
                    assert_eq!(v, i);
                    own += 1;
                }
            }
        }
        own
    });
}
