//! Misuse and faults get clear answers: a spawn on a runtime that has shut
//! down is an error, a spawn or a wake the allocator refuses memory for
//! does not abort, a deadlock is reported with who waits on what, and a
//! busy loop does not starve the other threads of its processor.
//!
//! Each case runs in a child process of its own (this binary, run again
//! with `FERRY_MISUSE_CASE` naming the case): an abort ends only that case,
//! and the deadlock check, which reports only in a process whose kernel
//! threads are all the runtime's own, sees just the case's runtime (a test
//! harness's threads would hide every deadlock). The parent checks how
//! each child ended. Arguments that do not start with `-` select cases by
//! substring.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::ErrorKind;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

use ferry::sync::{Barrier, Mutex, RwLock, Semaphore, channel};
use ferry::thread::Builder;
use ferry::{Deadlock, Handle, Runtime};

/// The process's allocator: the system's, refusing every request made on a
/// kernel thread that asked it to (as an allocator under a memory cap
/// does), so that a case can make one call run out of memory.
struct Refusing;

thread_local! {
    static REFUSE: Cell<bool> = const { Cell::new(false) };
    /// Requests still to refuse on this kernel thread, whatever runs on it,
    /// until a deadline (so that refusals a case did not use expire).
    static REFUSE_NEXT: Cell<(u32, Option<Instant>)> = const { Cell::new((0, None)) };
}

fn refusing() -> bool {
    REFUSE.with(Cell::get)
        || REFUSE_NEXT.with(|n| {
            let (left, until) = n.get();
            if left == 0 || until.is_none_or(|u| Instant::now() >= u) {
                return false;
            }
            n.set((left - 1, until));
            true
        })
}

// SAFETY: forwards to `System`, or returns null (a refusal, which the
// `GlobalAlloc` contract allows).
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if refusing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if refusing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if refusing() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refusing = Refusing;

/// Runs `f` with every allocation on the calling kernel thread refused.
/// The caller keeps the flow on this kernel thread meanwhile (no switch).
fn with_memory_refused<R>(f: impl FnOnce() -> R) -> R {
    REFUSE.with(|r| r.set(true));
    let out = f();
    REFUSE.with(|r| r.set(false));
    out
}

/// How a case's child process must end.
enum Expect {
    /// Exit status 0.
    Success,
    /// Killed by `SIGABRT`, its standard error holding every string.
    Abort(&'static [&'static str]),
}

struct Case {
    name: &'static str,
    run: fn(),
    expect: Expect,
}

const CASES: &[Case] = &[
    Case {
        name: "spawn_after_shutdown_is_an_error",
        run: spawn_after_shutdown_is_an_error,
        expect: Expect::Success,
    },
    Case {
        name: "spawns_racing_the_shutdown_run_or_are_reported",
        run: spawns_racing_the_shutdown_run_or_are_reported,
        expect: Expect::Success,
    },
    Case {
        name: "a_spawn_without_memory_is_an_error",
        run: a_spawn_without_memory_is_an_error,
        expect: Expect::Success,
    },
    Case {
        name: "waking_threads_without_memory_loses_none",
        run: waking_threads_without_memory_loses_none,
        expect: Expect::Success,
    },
    Case {
        name: "blocking_calls_returning_without_memory_lose_nothing",
        run: blocking_calls_returning_without_memory_lose_nothing,
        expect: Expect::Success,
    },
    Case {
        name: "a_two_mutex_deadlock_is_an_error_naming_both",
        run: a_two_mutex_deadlock_is_an_error_naming_both,
        expect: Expect::Success,
    },
    Case {
        name: "a_two_mutex_deadlock_aborts_naming_both",
        run: a_two_mutex_deadlock_aborts_naming_both,
        expect: Expect::Abort(&[
            "deadlock",
            "\"alpha\": Mutex at 0x",
            "\"beta\": Mutex at 0x",
            "\"main\": join of thread",
        ]),
    },
    Case {
        name: "a_self_deadlock_is_reported",
        run: a_self_deadlock_is_reported,
        expect: Expect::Success,
    },
    Case {
        name: "sleeping_and_outside_threads_are_not_a_deadlock",
        run: sleeping_and_outside_threads_are_not_a_deadlock,
        expect: Expect::Success,
    },
    Case {
        name: "a_busy_loop_does_not_starve_its_processor",
        run: a_busy_loop_does_not_starve_its_processor,
        expect: Expect::Success,
    },
];

/// A handle on a runtime kept after its `run` returned.
fn finished_runtime() -> Handle {
    Runtime::builder()
        .processors(2)
        .run(Handle::current)
        .unwrap()
}

fn spawn_after_shutdown_is_an_error() {
    let rt = finished_runtime();
    let err = rt.spawn(|| 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(err.to_string().contains("shut down"), "{err}");
    let err = Builder::new().name("late").spawn_on(&rt, || 2).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    // From another kernel thread, too.
    let err = std::thread::spawn(move || rt.spawn(|| 3).unwrap_err())
        .join()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
}

/// A kernel thread spawns on a runtime until a spawn fails, while the
/// runtime's first thread ends: every spawn that returned `Ok` either ran
/// (its join gives its value) or is reported by its join; none hangs.
fn spawns_racing_the_shutdown_run_or_are_reported() {
    for _ in 0..20 {
        let (tx, rx) = std::sync::mpsc::channel::<Handle>();
        let spawned = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&spawned);
        let spawner = std::thread::spawn(move || {
            let rt = rx.recv().unwrap();
            let mut joins = Vec::new();
            let err = loop {
                match rt.spawn(|| 7u32) {
                    Ok(j) => joins.push(j),
                    Err(e) => break e,
                }
                counted.fetch_add(1, Release);
            };
            assert_eq!(err.kind(), ErrorKind::BrokenPipe);
            let (mut ran, mut reported) = (0, 0);
            for j in joins {
                match j.join() {
                    Ok(v) => {
                        assert_eq!(v, 7);
                        ran += 1;
                    }
                    Err(p) => {
                        assert!(
                            p.message().is_some_and(|m| m.contains("ended before")),
                            "{p}"
                        );
                        reported += 1;
                    }
                }
            }
            (ran, reported)
        });
        Runtime::builder()
            .processors(2)
            .run(move || {
                tx.send(Handle::current()).unwrap();
                while spawned.load(Acquire) < 50 {
                    ferry::yield_now();
                }
            })
            .unwrap();
        let (ran, reported) = spawner.join().unwrap();
        assert!(ran + reported >= 50);
    }
}

fn a_spawn_without_memory_is_an_error() {
    Runtime::builder()
        .processors(1)
        .time_slice(None)
        .run(|| {
            // Large enough for a block of its own (no cached block serves it).
            let big = [1u8; 1024];
            // Warm: a stack in this processor's cache.
            ferry::spawn(move || big[0]).join().unwrap();
            let err = with_memory_refused(|| Builder::new().spawn(move || big[1]).unwrap_err());
            assert_eq!(err.kind(), ErrorKind::OutOfMemory);
            // From outside the runtime: a small block, freshly allocated.
            let rt = Handle::current();
            let err =
                std::thread::spawn(move || with_memory_refused(|| rt.spawn(|| 5u8).unwrap_err()))
                    .join()
                    .unwrap();
            assert_eq!(err.kind(), ErrorKind::OutOfMemory);
            // Nothing was lost: the runtime spawns as before.
            assert_eq!(ferry::spawn(move || big[2]).join().unwrap(), 1);
        })
        .unwrap();
}

/// Threads woken off the runtime queue on its injector; with the waker's
/// allocations refused, every one is still queued and runs.
fn waking_threads_without_memory_loses_none() {
    const WAITERS: usize = 256;
    Runtime::builder()
        .processors(1)
        .time_slice(None)
        .run(|| {
            let sem = Arc::new(Semaphore::new(0));
            let parked = Arc::new(AtomicUsize::new(0));
            let waiters: Vec<_> = (0..WAITERS)
                .map(|i| {
                    let (sem, parked) = (Arc::clone(&sem), Arc::clone(&parked));
                    ferry::spawn(move || {
                        parked.fetch_add(1, Relaxed);
                        sem.acquire();
                        i
                    })
                })
                .collect();
            // One processor: each waiter runs until it parks before we run
            // again.
            while parked.load(Relaxed) < WAITERS {
                ferry::yield_now();
            }
            let done = Arc::new(AtomicBool::new(false));
            let (s, d) = (Arc::clone(&sem), Arc::clone(&done));
            let waker = std::thread::spawn(move || {
                s.release();
                with_memory_refused(|| s.release_many(WAITERS - 1));
                d.store(true, Release);
            });
            // Keep the processor busy, so that every woken thread waits in
            // the injector until the waker is done.
            while !done.load(Acquire) {
                std::hint::spin_loop();
            }
            waker.join().unwrap();
            for (i, w) in waiters.into_iter().enumerate() {
                assert_eq!(w.join().unwrap(), i);
            }
        })
        .unwrap();
}

/// A blocking call that outlasts the handoff gives its processor away (a
/// spare takes it to run a thread that computes meanwhile); on return the
/// thread is handed back through the runtime's upcall queue, on the kernel
/// thread that made the call. With that kernel thread's allocations refused
/// for a moment after the call (the queue's growth among them), every
/// thread still comes back.
fn blocking_calls_returning_without_memory_lose_nothing() {
    Runtime::builder()
        .processors(1)
        .handoff_after(Duration::from_micros(20))
        .run(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let s = Arc::clone(&stop);
            // Keeps the processor busy, so that it is not free to reclaim.
            let busy = ferry::spawn(move || {
                while !s.load(Acquire) {
                    ferry::yield_now();
                }
            });
            let threads: Vec<_> = (0..8)
                .map(|i| {
                    ferry::spawn(move || {
                        ferry::blocking(|| {
                            std::thread::sleep(Duration::from_millis(20));
                            // This kernel thread's next two allocations in
                            // the next 3 ms (the handback's first) fail.
                            let until = Instant::now() + Duration::from_millis(3);
                            REFUSE_NEXT.with(|n| n.set((2, Some(until))));
                        });
                        i
                    })
                })
                .collect();
            for (i, t) in threads.into_iter().enumerate() {
                assert_eq!(t.join().unwrap(), i);
            }
            stop.store(true, Release);
            busy.join().unwrap();
        })
        .unwrap();
}

/// `alpha` holds `a` and waits for `b`, `beta` holds `b` and waits for
/// `a`, `main` joins `alpha`.
fn two_mutex_deadlock(mode: Deadlock) -> std::io::Result<()> {
    Runtime::builder().on_deadlock(mode).run(|| {
        let a = Arc::new(Mutex::new(0u32));
        let b = Arc::new(Mutex::new(0u32));
        let both = Arc::new(Barrier::new(3));
        let (a1, b1, both1) = (Arc::clone(&a), Arc::clone(&b), Arc::clone(&both));
        let alpha = Builder::new()
            .name("alpha")
            .spawn(move || {
                let _a = a1.lock();
                both1.wait();
                *b1.lock() += 1;
            })
            .unwrap();
        let (a2, b2, both2) = (a, b, Arc::clone(&both));
        let _beta = Builder::new()
            .name("beta")
            .spawn(move || {
                let _b = b2.lock();
                both2.wait();
                *a2.lock() += 1;
            })
            .unwrap();
        both.wait();
        alpha.join().unwrap();
    })
}

fn a_two_mutex_deadlock_is_an_error_naming_both() {
    let err = two_mutex_deadlock(Deadlock::Error).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock);
    let report = err.to_string();
    assert!(report.contains("\"alpha\": Mutex at 0x"), "{report}");
    assert!(report.contains("\"beta\": Mutex at 0x"), "{report}");
    assert!(report.contains("\"main\": join of thread"), "{report}");
}

fn a_two_mutex_deadlock_aborts_naming_both() {
    let _ = two_mutex_deadlock(Deadlock::Abort);
    unreachable!("the deadlock aborts the process");
}

/// A thread that waits for itself, through a channel it keeps the only
/// sender of, and through a lock it holds.
fn a_self_deadlock_is_reported() {
    let err = ferry::run(|| {
        let (tx, rx) = channel::<u32>(1);
        let _ = rx.recv();
        drop(tx);
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock);
    assert!(err.to_string().contains("\"main\": channel recv"), "{err}");

    let err = ferry::run(|| {
        let lock = Arc::new(RwLock::new(0));
        let l = Arc::clone(&lock);
        let t = Builder::new()
            .name("loner")
            .spawn(move || {
                let _w = l.write();
                *l.read()
            })
            .unwrap();
        t.join().unwrap()
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock);
    let report = err.to_string();
    assert!(
        report.contains("\"loner\": RwLock (to read) at 0x"),
        "{report}"
    );
}

/// All processors asleep while a thread sleeps on a timer, or while a
/// plain kernel thread holds the lock a ferry thread waits for: neither is
/// a deadlock (both wait longer than the check's grace).
fn sleeping_and_outside_threads_are_not_a_deadlock() {
    let got = ferry::run(|| {
        let (tx, rx) = channel::<u32>(1);
        let sleeper = Builder::new()
            .name("sleeper")
            .spawn(move || {
                ferry::sleep(Duration::from_millis(300));
                tx.send(9).unwrap();
            })
            .unwrap();
        let v = rx.recv().unwrap();
        sleeper.join().unwrap();
        v
    })
    .unwrap();
    assert_eq!(got, 9);

    let lock = Arc::new(Mutex::new(0u32));
    let held = Arc::new(AtomicBool::new(false));
    let (l, h) = (Arc::clone(&lock), Arc::clone(&held));
    let outside = std::thread::spawn(move || {
        let mut g = l.lock();
        h.store(true, Release);
        std::thread::sleep(Duration::from_millis(300));
        *g = 4;
    });
    while !held.load(Acquire) {
        std::thread::yield_now();
    }
    let got = ferry::run(move || *lock.lock()).unwrap();
    assert_eq!(got, 4);
    outside.join().unwrap();
}

/// Two threads on one processor: one spins on a flag only the other sets.
/// With the default settings (a time slice) the spinner is preempted and
/// the setter runs.
fn a_busy_loop_does_not_starve_its_processor() {
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            let flag = Arc::new(AtomicBool::new(false));
            let f = Arc::clone(&flag);
            let spinner = ferry::spawn(move || {
                while !f.load(Acquire) {
                    std::hint::spin_loop();
                }
            });
            let setter = ferry::spawn(move || flag.store(true, Release));
            spinner.join().unwrap();
            setter.join().unwrap();
        })
        .unwrap();
}

fn main() -> ExitCode {
    if let Ok(name) = std::env::var("FERRY_MISUSE_CASE") {
        let case = CASES.iter().find(|c| c.name == name).expect("a known case");
        (case.run)();
        return ExitCode::SUCCESS;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let exe = std::env::current_exe().expect("this test's own path");
    let mut failed = 0;
    for case in CASES {
        if !filters.is_empty() && !filters.iter().any(|f| case.name.contains(f.as_str())) {
            continue;
        }
        let out = Command::new(&exe)
            .env("FERRY_MISUSE_CASE", case.name)
            .env_remove("FERRY_TIME_SLICE")
            .env_remove("FERRY_DEADLOCK")
            .output()
            .expect("run the case's child process");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let verdict = match case.expect {
            Expect::Success if out.status.success() => Ok(()),
            Expect::Success => Err(format!("ended with {}", out.status)),
            Expect::Abort(needles) => {
                use std::os::unix::process::ExitStatusExt;
                if out.status.signal() != Some(libc_sigabrt()) {
                    Err(format!("ended with {}, not an abort", out.status))
                } else if let Some(n) = needles.iter().find(|n| !stderr.contains(*n)) {
                    Err(format!("the report lacks {n:?}"))
                } else {
                    Ok(())
                }
            }
        };
        match verdict {
            Ok(()) => println!("test {} ... ok", case.name),
            Err(why) => {
                failed += 1;
                println!(
                    "test {} ... FAILED: {why}\n--- stderr:\n{stderr}",
                    case.name
                );
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{failed} case(s) failed");
        ExitCode::FAILURE
    }
}

/// `SIGABRT`'s number on Linux.
fn libc_sigabrt() -> i32 {
    6
}
