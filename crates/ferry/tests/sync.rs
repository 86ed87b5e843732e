//! `ferry::sync`: Mutex, Condvar, Semaphore, RwLock, Barrier and channel, on
//! one processor and on two, from ferry threads, from plain kernel threads,
//! and from both at once.
//!
//! Every test runs under a watchdog: a lost wakeup or a blocked processor
//! shows up as a failure naming the test, not as a hung test binary.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ferry::Runtime;
use ferry::sync::{
    Barrier, Condvar, Mutex, NotOwner, RecvError, RwLock, Semaphore, SendError, TryRecvError,
    TrySendError, WouldDeadlock, channel,
};

mod common;
use common::WATCHDOG;

/// Runs `f` on a runtime of 1 processor, then of 2, each under the watchdog.
fn on_one_and_two(f: impl Fn(usize) + Send + Sync + Clone + 'static) {
    for n in [1, 2] {
        let f = f.clone();
        within(WATCHDOG, &format!("{n} processor(s)"), move || {
            Runtime::builder().processors(n).run(move || f(n)).unwrap();
        });
    }
}

/// Runs `f` on its own kernel thread and fails if it does not finish in time
/// (the hung thread is abandoned; the test binary exits anyway).
fn within(limit: Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    common::within(
        limit,
        &format!("{what}: lost wakeup or blocked processor"),
        f,
    );
}

/// A plain kernel thread started from a ferry thread, joinable without
/// blocking the processor: it signals its end on a ferry semaphore (std's
/// `join` would block the kernel thread under the joining ferry thread, and
/// with it every ferry thread the joined thread may be waiting for).
struct Kernel<T> {
    k: std::thread::JoinHandle<T>,
    done: Arc<Semaphore>,
}

fn spawn_kernel<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Kernel<T> {
    struct ReleaseOnDrop(Arc<Semaphore>);
    impl Drop for ReleaseOnDrop {
        fn drop(&mut self) {
            self.0.release();
        }
    }
    let done = Arc::new(Semaphore::new(0));
    let release = ReleaseOnDrop(Arc::clone(&done));
    let k = std::thread::spawn(move || {
        let _release = release;
        f()
    });
    Kernel { k, done }
}

impl<T> Kernel<T> {
    fn join(self) -> T {
        self.done.acquire();
        self.k.join().unwrap()
    }
}

fn scaled(n: usize) -> usize {
    if cfg!(miri) { n / 100 + 1 } else { n }
}

// ---------------------------------------------------------------- Mutex

#[test]
fn mutex_counter_1000_threads_x_1000() {
    on_one_and_two(|_| {
        let threads = scaled(1000);
        let rounds = scaled(1000);
        let m = Arc::new(Mutex::new(0u64));
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let m = Arc::clone(&m);
                ferry::spawn(move || {
                    for _ in 0..rounds {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*m.lock(), (threads * rounds) as u64);
    });
}

#[test]
fn mutex_holders_that_yield_inside_stay_exclusive() {
    // Yielding inside the critical section makes the others queue (even on
    // one processor), so the slow paths run.
    on_one_and_two(|_| {
        let m = Arc::new(Mutex::new(0u64));
        let inside = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..50)
            .map(|_| {
                let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
                ferry::spawn(move || {
                    for _ in 0..scaled(200) {
                        let mut g = m.lock();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        ferry::yield_now();
                        *g += 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*m.lock(), 50 * scaled(200) as u64);
    });
}

#[test]
fn mutex_try_lock_and_into_inner() {
    on_one_and_two(|_| {
        let m = Mutex::new(vec![1]);
        let g = m.lock();
        assert!(m.try_lock().is_none());
        assert!(m.is_locked());
        drop(g);
        m.try_lock().unwrap().push(2);
        assert_eq!(m.into_inner(), [1, 2]);
    });
}

#[test]
fn relocking_ones_own_mutex_panics_naming_the_thread() {
    on_one_and_two(|_| {
        let m = Arc::new(Mutex::new(0u32));
        let m2 = Arc::clone(&m);
        let t = ferry::thread::Builder::new()
            .name("relocker")
            .spawn(move || {
                let _held = m2.lock();
                let _again = m2.lock();
            })
            .unwrap();
        let id = t.thread().id().as_u64();
        let panic = t.join().unwrap_err();
        let msg = panic.message().unwrap();
        assert!(
            msg.contains(&format!("ferry thread {id} ('relocker')"))
                && msg.contains("already holds this mutex"),
            "{msg}"
        );
        // The unwinding dropped the first guard: the mutex is free.
        *m.try_lock().expect("unlocked by the unwinding") += 1;
    });
    within(WATCHDOG, "a kernel thread", || {
        let m = Mutex::new(());
        let r = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("kernel-relocker".into())
                .spawn_scoped(s, || {
                    let _held = m.lock();
                    let _again = m.lock();
                })
                .unwrap()
                .join()
        });
        let payload = r.unwrap_err();
        let msg = payload.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("kernel thread 'kernel-relocker'") && msg.contains("already holds"),
            "{msg}"
        );
        assert!(!m.is_locked());
    });
}

#[test]
fn raw_mutex_misuse_returns_errors_and_changes_nothing() {
    on_one_and_two(|_| {
        let m = Arc::new(Mutex::new(()));
        let cv = Arc::new(Condvar::new());
        m.lock_raw().unwrap();
        assert_eq!(m.lock_raw(), Err(WouldDeadlock));
        // Another ferry thread and a kernel thread may not unlock it, nor
        // wait on it, and neither call changes it.
        let (m2, cv2) = (Arc::clone(&m), Arc::clone(&cv));
        let other = ferry::spawn(move || {
            // SAFETY: no guard of this thread's is alive.
            assert_eq!(unsafe { m2.unlock_raw() }, Err(NotOwner));
            // SAFETY: as above.
            assert_eq!(unsafe { cv2.wait_raw(&m2) }, Err(NotOwner));
            assert!(!m2.try_lock_raw());
        });
        other.join().unwrap();
        let (m2, cv2) = (Arc::clone(&m), Arc::clone(&cv));
        spawn_kernel(move || {
            // SAFETY: no guard of this thread's is alive.
            assert_eq!(unsafe { m2.unlock_raw() }, Err(NotOwner));
            // SAFETY: as above.
            assert_eq!(unsafe { cv2.wait_raw(&m2) }, Err(NotOwner));
            assert!(!m2.try_lock_raw());
        })
        .join();
        assert!(m.is_locked());
        // The holder, after switches that may have moved it, unlocks.
        for _ in 0..10 {
            ferry::yield_now();
        }
        // SAFETY: no guard is alive.
        assert_eq!(unsafe { m.unlock_raw() }, Ok(()));
        assert!(!m.is_locked());
        // A free mutex is nobody's: neither unlocked nor waited on.
        // SAFETY: as above.
        assert_eq!(unsafe { m.unlock_raw() }, Err(NotOwner));
        // SAFETY: as above.
        assert_eq!(unsafe { cv.wait_raw(&m) }, Err(NotOwner));
        assert!(!m.is_locked());
        // A raw wait by the holder waits, and returns holding the mutex.
        m.lock_raw().unwrap();
        let (m2, cv2) = (Arc::clone(&m), Arc::clone(&cv));
        let notifier = ferry::spawn(move || {
            while !cv2.has_waiters() {
                ferry::yield_now();
            }
            let _g = m2.lock();
            cv2.notify_one();
        });
        // SAFETY: no guard is alive.
        assert_eq!(unsafe { cv.wait_raw(&m) }, Ok(()));
        assert!(m.is_locked());
        // SAFETY: as above.
        assert_eq!(unsafe { m.unlock_raw() }, Ok(()));
        notifier.join().unwrap();
    });
}

#[test]
fn a_thread_blocked_on_a_mutex_does_not_block_its_processor() {
    within(WATCHDOG, "1 processor", || {
        Runtime::builder()
            .processors(1)
            .run(|| {
                let m = Arc::new(Mutex::new(0));
                let b_trying = Arc::new(AtomicBool::new(false));
                let flag = Arc::new(AtomicBool::new(false));
                let locked = Arc::new(AtomicBool::new(false));
                let a = {
                    let (m, flag, locked) = (m.clone(), flag.clone(), locked.clone());
                    ferry::spawn(move || {
                        let mut g = m.lock();
                        locked.store(true, Ordering::SeqCst);
                        // Hold the lock until C has run.
                        while !flag.load(Ordering::SeqCst) {
                            ferry::yield_now();
                        }
                        *g += 1;
                    })
                };
                let b = {
                    let (m, b_trying, locked) = (m.clone(), b_trying.clone(), locked.clone());
                    ferry::spawn(move || {
                        while !locked.load(Ordering::SeqCst) {
                            ferry::yield_now();
                        }
                        b_trying.store(true, Ordering::SeqCst);
                        *m.lock() += 10; // blocks: A holds it
                    })
                };
                let c = {
                    let (b_trying, flag) = (b_trying.clone(), flag.clone());
                    ferry::spawn(move || {
                        // Runs only if B, blocked on the lock, let the
                        // processor go.
                        while !b_trying.load(Ordering::SeqCst) {
                            ferry::yield_now();
                        }
                        ferry::yield_now();
                        flag.store(true, Ordering::SeqCst);
                    })
                };
                a.join().unwrap();
                b.join().unwrap();
                c.join().unwrap();
                assert_eq!(*m.lock(), 11);
            })
            .unwrap();
    });
}

#[test]
fn mutex_shared_by_std_threads_and_ferry_threads() {
    on_one_and_two(|_| {
        let rounds = scaled(2000);
        let m = Arc::new(Mutex::new(0u64));
        let kernel: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                spawn_kernel(move || {
                    for i in 0..rounds {
                        let mut g = m.lock();
                        *g += 1;
                        if i % 64 == 0 {
                            // Hold it a while so ferry threads queue behind.
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let ferry: Vec<_> = (0..50)
            .map(|_| {
                let m = Arc::clone(&m);
                ferry::spawn(move || {
                    for i in 0..rounds {
                        let mut g = m.lock();
                        *g += 1;
                        if i % 64 == 0 {
                            ferry::yield_now();
                        }
                    }
                })
            })
            .collect();
        for h in ferry {
            h.join().unwrap();
        }
        for k in kernel {
            k.join();
        }
        assert_eq!(*m.lock(), 52 * rounds as u64);
    });
}

// ---------------------------------------------------------------- Condvar

/// A bounded buffer on one Mutex and two Condvars.
struct Buffer {
    items: Mutex<Vec<u64>>,
    not_empty: Condvar,
    not_full: Condvar,
    cap: usize,
}

#[test]
fn condvar_producers_and_consumers_lose_and_double_nothing() {
    on_one_and_two(|_| {
        let (producers, consumers, per) = (4u64, 3, scaled(2000) as u64);
        let buf = Arc::new(Buffer {
            items: Mutex::new(Vec::new()),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            cap: 8,
        });
        let ps: Vec<_> = (0..producers)
            .map(|p| {
                let buf = Arc::clone(&buf);
                ferry::spawn(move || {
                    for i in 0..per {
                        let mut g = buf
                            .not_full
                            .wait_while(buf.items.lock(), |v| v.len() >= buf.cap);
                        g.push(p * per + i);
                        drop(g);
                        buf.not_empty.notify_one();
                    }
                })
            })
            .collect();
        let total = producers * per;
        let taken = Arc::new(AtomicUsize::new(0));
        let cs: Vec<_> = (0..consumers)
            .map(|_| {
                let (buf, taken) = (Arc::clone(&buf), Arc::clone(&taken));
                ferry::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let mut g = buf.items.lock();
                        while g.is_empty() && taken.load(Ordering::SeqCst) < total as usize {
                            g = buf.not_empty.wait(g);
                        }
                        let Some(v) = g.pop() else {
                            return got; // all taken
                        };
                        drop(g);
                        got.push(v);
                        if taken.fetch_add(1, Ordering::SeqCst) + 1 == total as usize {
                            // Let the other consumers see the end.
                            buf.not_empty.notify_all();
                        }
                        buf.not_full.notify_one();
                    }
                })
            })
            .collect();
        for p in ps {
            p.join().unwrap();
        }
        let mut all = Vec::new();
        for c in cs {
            all.extend(c.join().unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..total).collect::<Vec<_>>());
    });
}

#[test]
fn condvar_notify_all_wakes_every_waiter() {
    on_one_and_two(|_| {
        let state = Arc::new((Mutex::new(false), Condvar::new(), AtomicUsize::new(0)));
        let hs: Vec<_> = (0..20)
            .map(|_| {
                let state = Arc::clone(&state);
                ferry::spawn(move || {
                    let (m, cv, waiting) = &*state;
                    let mut g = m.lock();
                    waiting.fetch_add(1, Ordering::SeqCst);
                    while !*g {
                        g = cv.wait(g);
                    }
                })
            })
            .collect();
        let (m, cv, waiting) = &*state;
        while waiting.load(Ordering::SeqCst) < 20 {
            ferry::yield_now();
        }
        *m.lock() = true;
        cv.notify_all();
        for h in hs {
            h.join().unwrap();
        }
    });
}

#[test]
fn condvar_between_a_std_thread_and_ferry_threads() {
    on_one_and_two(|_| {
        let rounds = scaled(500) as u64;
        // Ping-pong: the kernel thread makes the counter odd, ferry threads
        // make it even.
        let state = Arc::new((Mutex::new(0u64), Condvar::new()));
        let s = Arc::clone(&state);
        let k = spawn_kernel(move || {
            let (m, cv) = &*s;
            for i in 0..rounds {
                let mut g = cv.wait_while(m.lock(), |v| *v != 2 * i);
                *g += 1;
                drop(g);
                cv.notify_all();
            }
        });
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let s = Arc::clone(&state);
                ferry::spawn(move || {
                    let (m, cv) = &*s;
                    loop {
                        let mut g = cv.wait_while(m.lock(), |v| *v % 2 == 0 && *v < 2 * rounds);
                        if *g >= 2 * rounds {
                            return;
                        }
                        *g += 1;
                        drop(g);
                        cv.notify_all();
                    }
                })
            })
            .collect();
        k.join();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*state.0.lock(), 2 * rounds);
    });
}

// ---------------------------------------------------------------- RwLock

#[test]
fn rwlock_readers_share_writers_exclude() {
    on_one_and_two(|n| {
        // readers inside, and a writer-inside flag.
        let lock = Arc::new(RwLock::new(0u64));
        let readers_in = Arc::new(AtomicUsize::new(0));
        let writer_in = Arc::new(AtomicBool::new(false));
        let max_readers = Arc::new(AtomicUsize::new(0));
        let rounds = scaled(300);
        let mut hs = Vec::new();
        for _ in 0..8 {
            let (lock, readers_in, writer_in, max_readers) = (
                Arc::clone(&lock),
                Arc::clone(&readers_in),
                Arc::clone(&writer_in),
                Arc::clone(&max_readers),
            );
            hs.push(ferry::spawn(move || {
                for _ in 0..rounds {
                    let g = lock.read();
                    let n = readers_in.fetch_add(1, Ordering::SeqCst) + 1;
                    max_readers.fetch_max(n, Ordering::SeqCst);
                    assert!(!writer_in.load(Ordering::SeqCst), "a reader with a writer");
                    ferry::yield_now(); // let others in (one processor)
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    assert!(!writer_in.load(Ordering::SeqCst), "a reader with a writer");
                    let _ = *g;
                    readers_in.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
        for _ in 0..2 {
            let (lock, readers_in, writer_in) = (
                Arc::clone(&lock),
                Arc::clone(&readers_in),
                Arc::clone(&writer_in),
            );
            hs.push(ferry::spawn(move || {
                for _ in 0..rounds / 2 {
                    let mut g = lock.write();
                    assert!(!writer_in.swap(true, Ordering::SeqCst), "two writers");
                    assert_eq!(
                        readers_in.load(Ordering::SeqCst),
                        0,
                        "a writer with readers"
                    );
                    ferry::yield_now();
                    *g += 1;
                    assert_eq!(
                        readers_in.load(Ordering::SeqCst),
                        0,
                        "a writer with readers"
                    );
                    writer_in.store(false, Ordering::SeqCst);
                    drop(g);
                    ferry::yield_now();
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*lock.read(), 2 * (rounds / 2) as u64);
        if n == 1 {
            // Deterministic on one processor: the first reader yields inside
            // and the next one comes in. (Two processors: see
            // `rwlock_readers_run_concurrently_on_two_processors`.)
            assert!(
                max_readers.load(Ordering::SeqCst) >= 2,
                "readers never overlapped"
            );
        }
    });
}

#[test]
fn rwlock_readers_run_concurrently_on_two_processors() {
    within(WATCHDOG, "2 processors", || {
        Runtime::builder()
            .processors(2)
            .run(|| {
                // Two readers must both be inside at once: each waits inside
                // its read section until it has seen the other there.
                let lock = Arc::new(RwLock::new(()));
                let inside = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..2)
                    .map(|_| {
                        let (lock, inside) = (Arc::clone(&lock), Arc::clone(&inside));
                        ferry::spawn(move || {
                            let _g = lock.read();
                            inside.fetch_add(1, Ordering::SeqCst);
                            while inside.load(Ordering::SeqCst) < 2 {
                                std::hint::spin_loop();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                // And a writer excludes them: try_read fails while it holds.
                let g = lock.write();
                assert!(lock.try_read().is_none());
                assert!(lock.try_write().is_none());
                drop(g);
                assert!(lock.try_read().is_some());
            })
            .unwrap();
    });
}

#[test]
fn rwlock_blocks_readers_behind_a_writer_and_a_writer_behind_readers() {
    on_one_and_two(|_| {
        let lock = Arc::new(RwLock::new(0u32));
        // A writer holds: a reader must wait until it unlocks.
        let w = lock.write();
        let entered = Arc::new(AtomicBool::new(false));
        let (l, e) = (Arc::clone(&lock), Arc::clone(&entered));
        let reader = ferry::spawn(move || {
            let v = *l.read();
            e.store(true, Ordering::SeqCst);
            v
        });
        for _ in 0..20 {
            ferry::yield_now();
        }
        assert!(
            !entered.load(Ordering::SeqCst),
            "a reader got in past a writer"
        );
        let mut w = w;
        *w = 5;
        drop(w);
        assert_eq!(reader.join().unwrap(), 5);

        // A reader holds: a writer must wait until it unlocks.
        let r = lock.read();
        entered.store(false, Ordering::SeqCst);
        let (l, e) = (Arc::clone(&lock), Arc::clone(&entered));
        let writer = ferry::spawn(move || {
            *l.write() += 1;
            e.store(true, Ordering::SeqCst);
        });
        for _ in 0..20 {
            ferry::yield_now();
        }
        assert!(
            !entered.load(Ordering::SeqCst),
            "a writer got in past a reader"
        );
        drop(r);
        writer.join().unwrap();
        assert_eq!(*lock.read(), 6);
    });
}

#[test]
fn rwlock_waiting_writer_is_not_starved_by_readers() {
    on_one_and_two(|_| {
        let lock = Arc::new(RwLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        // Readers that keep re-reading, overlapping each other.
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (lock, stop) = (Arc::clone(&lock), Arc::clone(&stop));
                ferry::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let _g = lock.read();
                        ferry::yield_now();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        ferry::yield_now();
        // The writer must get in even though readers always overlap.
        for _ in 0..10 {
            *lock.write() += 1;
        }
        stop.store(true, Ordering::SeqCst);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(*lock.read(), 10);
    });
}

// ---------------------------------------------------------------- Semaphore

#[test]
fn semaphore_bounds_concurrency() {
    on_one_and_two(|n| {
        let sem = Arc::new(Semaphore::new(3));
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..30)
            .map(|_| {
                let (sem, inside, max) = (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&max));
                ferry::spawn(move || {
                    for _ in 0..scaled(100) {
                        let _p = sem.access();
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(n <= 3, "{n} threads inside a 3-permit semaphore");
                        max.fetch_max(n, Ordering::SeqCst);
                        ferry::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(sem.available_permits(), 3, "a permit was lost");
        if n == 1 {
            // Deterministic on one processor: the first three yield inside.
            // (On two, timing decides how many overlap; the bound is what
            // matters there.)
            assert_eq!(max.load(Ordering::SeqCst), 3);
        }
    });
}

#[test]
fn semaphore_acquire_release_across_threads() {
    on_one_and_two(|_| {
        let sem = Arc::new(Semaphore::new(0));
        assert!(!sem.try_acquire());
        // Waiters block until a kernel thread and a ferry thread release.
        let hs: Vec<_> = (0..10)
            .map(|_| {
                let sem = Arc::clone(&sem);
                ferry::spawn(move || sem.acquire())
            })
            .collect();
        let s = Arc::clone(&sem);
        let k = spawn_kernel(move || s.release_many(5));
        let s = Arc::clone(&sem);
        let f = ferry::spawn(move || s.release_many(5));
        for h in hs {
            h.join().unwrap();
        }
        k.join();
        f.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
        sem.release();
        assert!(sem.try_acquire());
    });
}

// ---------------------------------------------------------------- Barrier

#[test]
fn barrier_generations() {
    on_one_and_two(|_| {
        let n = 10;
        let generations = scaled(50);
        let barrier = Arc::new(Barrier::new(n));
        let arrived = Arc::new(AtomicUsize::new(0));
        let leaders = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (b, arrived, leaders) = (
                    Arc::clone(&barrier),
                    Arc::clone(&arrived),
                    Arc::clone(&leaders),
                );
                ferry::spawn(move || {
                    for g in 0..generations {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        if b.wait().is_leader() {
                            leaders.fetch_add(1, Ordering::SeqCst);
                        }
                        // Nobody passes generation g before all n arrived.
                        assert!(arrived.load(Ordering::SeqCst) >= (g + 1) * n);
                        // And nobody arrives at g+1 before all passed g:
                        // checked by the second barrier.
                        b.wait();
                        assert!(arrived.load(Ordering::SeqCst) <= (g + 1) * n + n);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(leaders.load(Ordering::SeqCst), generations);
        assert_eq!(arrived.load(Ordering::SeqCst), generations * n);
    });
}

#[test]
fn barrier_with_std_and_ferry_threads() {
    on_one_and_two(|_| {
        let barrier = Arc::new(Barrier::new(4));
        let leaders = Arc::new(AtomicUsize::new(0));
        let gens = scaled(100);
        let ks: Vec<_> = (0..2)
            .map(|_| {
                let (b, l) = (Arc::clone(&barrier), Arc::clone(&leaders));
                spawn_kernel(move || {
                    for _ in 0..gens {
                        if b.wait().is_leader() {
                            l.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let fs: Vec<_> = (0..2)
            .map(|_| {
                let (b, l) = (Arc::clone(&barrier), Arc::clone(&leaders));
                ferry::spawn(move || {
                    for _ in 0..gens {
                        if b.wait().is_leader() {
                            l.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for f in fs {
            f.join().unwrap();
        }
        for k in ks {
            k.join();
        }
        assert_eq!(leaders.load(Ordering::SeqCst), gens);
    });
}

// ---------------------------------------------------------------- channel

/// Receives everything `rx` yields and checks the set is exactly `0..total`.
fn check_exactly(mut got: Vec<u64>, total: u64) {
    got.sort_unstable();
    let distinct: HashSet<_> = got.iter().copied().collect();
    assert_eq!(distinct.len(), got.len(), "an item arrived twice");
    assert_eq!(got, (0..total).collect::<Vec<_>>(), "an item was lost");
}

#[test]
fn channel_producers_and_consumers_lose_and_double_nothing() {
    on_one_and_two(|_| {
        let (producers, consumers, per) = (5u64, 4, scaled(5000) as u64);
        let (tx, rx) = channel::<u64>(16);
        let ps: Vec<_> = (0..producers)
            .map(|p| {
                let tx = tx.clone();
                ferry::spawn(move || {
                    for i in 0..per {
                        tx.send(p * per + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let cs: Vec<_> = (0..consumers)
            .map(|_| {
                let rx = rx.clone();
                ferry::spawn(move || rx.iter().collect::<Vec<_>>())
            })
            .collect();
        drop(rx);
        for p in ps {
            p.join().unwrap();
        }
        let all: Vec<u64> = cs.into_iter().flat_map(|c| c.join().unwrap()).collect();
        check_exactly(all, producers * per);
    });
}

#[test]
fn channel_std_producer_ferry_consumers() {
    on_one_and_two(|_| {
        let total = scaled(20_000) as u64;
        let (tx, rx) = channel::<u64>(4);
        let k = spawn_kernel(move || {
            for i in 0..total {
                tx.send(i).unwrap();
            }
        });
        let cs: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                ferry::spawn(move || rx.iter().collect::<Vec<_>>())
            })
            .collect();
        drop(rx);
        k.join();
        let all: Vec<u64> = cs.into_iter().flat_map(|c| c.join().unwrap()).collect();
        check_exactly(all, total);
    });
}

#[test]
fn channel_ferry_producers_std_consumers() {
    on_one_and_two(|_| {
        let (producers, per) = (4u64, scaled(5000) as u64);
        let (tx, rx) = channel::<u64>(4);
        let ks: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                spawn_kernel(move || rx.iter().collect::<Vec<_>>())
            })
            .collect();
        drop(rx);
        let ps: Vec<_> = (0..producers)
            .map(|p| {
                let tx = tx.clone();
                ferry::spawn(move || {
                    for i in 0..per {
                        tx.send(p * per + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for p in ps {
            p.join().unwrap();
        }
        let all: Vec<u64> = ks.into_iter().flat_map(Kernel::join).collect();
        check_exactly(all, producers * per);
    });
}

#[test]
fn channel_disconnection_both_ways() {
    on_one_and_two(|_| {
        // Senders gone: receivers drain, then get RecvError.
        let (tx, rx) = channel::<u32>(4);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(rx.try_recv(), Ok(1));
        drop(tx);
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));

        // Receivers gone: send gives the item back.
        let (tx, rx) = channel::<String>(1);
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        tx.send("a".into()).unwrap();
        assert!(matches!(tx.try_send("b".into()), Err(TrySendError::Full(s)) if s == "b"));
        drop(rx);
        assert!(matches!(tx.send("c".into()), Err(SendError(s)) if s == "c"));
        assert!(matches!(tx.try_send("d".into()), Err(TrySendError::Disconnected(s)) if s == "d"));

        // A receiver blocked on an empty channel wakes with RecvError when
        // the last sender drops.
        let (tx, rx) = channel::<u32>(2);
        let tx2 = tx.clone();
        let r = ferry::spawn(move || rx.recv());
        ferry::yield_now();
        drop(tx);
        ferry::yield_now();
        drop(tx2);
        assert_eq!(r.join().unwrap(), Err(RecvError));

        // A sender blocked on a full channel wakes with SendError(item) when
        // the last receiver drops.
        let (tx, rx) = channel::<u32>(1);
        tx.send(7).unwrap();
        let s = ferry::spawn(move || tx.send(8));
        ferry::yield_now();
        drop(rx);
        assert_eq!(s.join().unwrap(), Err(SendError(8)));

        // The same from a plain kernel thread blocked in recv.
        let (tx, rx) = channel::<u32>(2);
        let k = spawn_kernel(move || rx.recv());
        std::thread::sleep(Duration::from_millis(5));
        drop(tx);
        assert_eq!(k.join(), Err(RecvError));
    });
}

#[test]
fn channel_capacity_rounds_up_and_blocks_when_full() {
    on_one_and_two(|_| {
        let (tx, rx) = channel::<u32>(3);
        assert_eq!(tx.capacity(), 4);
        for i in 0..4 {
            tx.try_send(i).unwrap();
        }
        assert!(matches!(tx.try_send(9), Err(TrySendError::Full(9))));
        let sent = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&sent);
        let h = ferry::spawn(move || {
            tx.send(4).unwrap();
            s.store(true, Ordering::SeqCst);
        });
        for _ in 0..10 {
            ferry::yield_now();
        }
        assert!(
            !sent.load(Ordering::SeqCst),
            "send did not block on a full channel"
        );
        assert_eq!(rx.recv(), Ok(0));
        h.join().unwrap();
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
    });
}

// ---------------------------------------------------------------- ParkWait

/// `ParkWait::wait_until` calls its `ready` closure, which is the caller's
/// code, outside the runtime's critical level: a closure that switches
/// (here, yields to threads that are spawned meanwhile and start on the
/// processor it gives up) switches as any thread does. (When the closure
/// ran inside the waiter's entry, a debug build failed the new threads'
/// start check, and a release build left preemption off.)
#[test]
fn park_wait_ready_closures_may_switch() {
    use ferry_queue::wait::Wait;
    on_one_and_two(|_| {
        let wait = Arc::new(ferry::sync::ParkWait::default());
        let done = Arc::new(AtomicBool::new(false));
        let looks = Arc::new(AtomicUsize::new(0));
        let (w, d, l) = (Arc::clone(&wait), Arc::clone(&done), Arc::clone(&looks));
        let waiter = ferry::spawn(move || {
            w.wait_until(|| {
                l.fetch_add(1, Ordering::Relaxed);
                ferry::yield_now();
                d.load(Ordering::Acquire).then_some(())
            });
        });
        // Let the waiter get past its spinning looks into the queued ones,
        // spawning threads all the while (each starts on a processor the
        // waiter's closure gave up).
        for _ in 0..scaled(2000) {
            ferry::spawn(|| {}).join().unwrap();
        }
        assert!(looks.load(Ordering::Relaxed) > 0);
        done.store(true, Ordering::Release);
        wait.notify_one();
        waiter.join().unwrap();
    });
}

// ---------------------------------------------------------------- fairness

/// Two threads that wake each other through a condition variable and block
/// hand one processor between them through its next-to-run slot; with no
/// time slice, a third runnable thread must still get its turn (it used to
/// wait for ever).
#[test]
fn a_pair_that_wakes_each_other_does_not_starve_a_third_thread() {
    within(WATCHDOG, "1 processor, no time slice", || {
        Runtime::builder()
            .processors(1)
            .time_slice(None)
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
                let side = |me: u32| {
                    let (stop, pair) = (Arc::clone(&stop), Arc::clone(&pair));
                    ferry::spawn(move || {
                        let mut turns = 0u64;
                        while !stop.load(Ordering::Acquire) {
                            let mut turn = pair.0.lock();
                            while *turn != me && !stop.load(Ordering::Acquire) {
                                turn = pair.1.wait(turn);
                            }
                            *turn = 1 - me;
                            turns += 1;
                            pair.1.notify_one();
                        }
                        turns
                    })
                };
                let (a, b) = (side(0), side(1));
                // Let the pair get going, then queue a third thread behind it.
                ferry::yield_now();
                let s = Arc::clone(&stop);
                let third = ferry::spawn(move || s.store(true, Ordering::Release));
                third.join().unwrap();
                pair.1.notify_all();
                let turns = a.join().unwrap() + b.join().unwrap();
                assert!(turns > 0, "the pair never ran");
            })
            .unwrap();
    });
}
