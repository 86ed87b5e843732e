//! Scheduler activations: announced and unannounced blocking, preemption
//! with lock-holder care, and processor changes. Every check is on progress
//! counters and exact results, never on elapsed time.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use ferry::sync::{Mutex, SpinLock};
use ferry::{Handle, Runtime};

mod common;
use common::WATCHDOG;

/// Runs `f` on its own kernel thread and fails if it does not finish in time.
fn within(what: &str, f: impl FnOnce() + Send + 'static) {
    common::within(WATCHDOG, &format!("{what}: a processor stalled"), f);
}

/// A thread that counts and yields until told to stop.
fn compute(stop: &Arc<AtomicBool>, progress: &Arc<AtomicU64>) -> ferry::JoinHandle<()> {
    let (stop, progress) = (Arc::clone(stop), Arc::clone(progress));
    ferry::spawn(move || {
        while !stop.load(SeqCst) {
            progress.fetch_add(1, SeqCst);
            ferry::yield_now();
        }
    })
}

/// Yields until `progress` has moved `by` past `from`.
fn wait_for_progress(progress: &AtomicU64, from: u64, by: u64) {
    while progress.load(SeqCst) < from + by {
        ferry::yield_now();
    }
}

#[test]
fn announced_blocking_reads_leave_the_processor_running() {
    within("announced blocking reads", || {
        Runtime::builder()
            .processors(1)
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let progress = Arc::new(AtomicU64::new(0));
                let worker = compute(&stop, &progress);
                let entered = Arc::new(AtomicUsize::new(0));
                let mut writers = Vec::new();
                let readers: Vec<_> = (0..4)
                    .map(|i| {
                        let (mut r, w) = std::io::pipe().unwrap();
                        writers.push(w);
                        let (progress, entered) = (Arc::clone(&progress), Arc::clone(&entered));
                        ferry::spawn(move || {
                            let before = progress.load(SeqCst);
                            entered.fetch_add(1, SeqCst);
                            let mut buf = [0u8; 1];
                            ferry::blocking(|| r.read_exact(&mut buf)).unwrap();
                            assert_eq!(buf[0], i as u8);
                            progress.load(SeqCst) - before
                        })
                    })
                    .collect();
                while entered.load(SeqCst) < 4 {
                    ferry::yield_now();
                }
                // The compute thread advances while all four readers block.
                let start = progress.load(SeqCst);
                wait_for_progress(&progress, start, 10_000);
                for (i, w) in writers.iter_mut().enumerate() {
                    w.write_all(&[i as u8]).unwrap();
                }
                for r in readers {
                    assert!(r.join().unwrap() >= 10_000, "compute stalled during a read");
                }
                stop.store(true, SeqCst);
                worker.join().unwrap();
                let stats = Handle::current().upcall_stats();
                assert!(stats.blocked.count >= 4, "{stats:?}");
                assert!(stats.unblocked.count >= 4, "{stats:?}");
                let (threads, bound) = Handle::current().kernel_threads();
                assert!(threads <= bound);
            })
            .unwrap();
    });
}

#[test]
fn unannounced_reads_and_sleeps_are_taken_over() {
    within("unannounced blocking", || {
        Runtime::builder()
            .processors(1)
            .take_over_unannounced(true)
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let progress = Arc::new(AtomicU64::new(0));
                let worker = compute(&stop, &progress);
                let entered = Arc::new(AtomicUsize::new(0));
                let mut writers = Vec::new();
                let mut blocked = Vec::new();
                for i in 0..2 {
                    let (r, w) = std::io::pipe().unwrap();
                    writers.push(w);
                    let (progress, entered) = (Arc::clone(&progress), Arc::clone(&entered));
                    blocked.push(ferry::spawn(move || {
                        let before = progress.load(SeqCst);
                        entered.fetch_add(1, SeqCst);
                        let mut byte = 0u8;
                        // A raw read, not announced to ferry.
                        // SAFETY: a valid fd and a one-byte buffer.
                        let n = unsafe { libc::read(r.as_raw_fd(), (&raw mut byte).cast(), 1) };
                        assert_eq!(n, 1);
                        assert_eq!(byte, i as u8);
                        progress.load(SeqCst) - before
                    }));
                }
                for _ in 0..2 {
                    let (progress, entered) = (Arc::clone(&progress), Arc::clone(&entered));
                    blocked.push(ferry::spawn(move || {
                        let before = progress.load(SeqCst);
                        entered.fetch_add(1, SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        progress.load(SeqCst) - before
                    }));
                }
                while entered.load(SeqCst) < 4 {
                    ferry::yield_now();
                }
                let start = progress.load(SeqCst);
                wait_for_progress(&progress, start, 10_000);
                for (i, w) in writers.iter_mut().enumerate() {
                    w.write_all(&[i as u8]).unwrap();
                }
                for b in blocked {
                    assert!(b.join().unwrap() > 0, "compute stalled during a block");
                }
                stop.store(true, SeqCst);
                worker.join().unwrap();
                let stats = Handle::current().upcall_stats();
                assert!(stats.unannounced_blocks >= 1, "{stats:?}");
            })
            .unwrap();
    });
}

/// The watch moves to another kernel thread at every takeover (the watcher
/// takes the processor itself and hands the watch on): it must go on
/// through many takeovers in a row, also with the fewest kernel threads
/// allowed, where a successor is not always free at once. Each raw read
/// below ends only because the writer ran, and on one processor the writer
/// runs only if the reader's processor was taken over.
#[test]
fn the_watch_goes_on_through_many_takeovers_at_the_kernel_thread_bound() {
    within("takeovers in a row", || {
        Runtime::builder()
            .processors(1)
            .max_processors(1)
            .max_kernel_threads(3)
            .take_over_unannounced(true)
            .run(|| {
                const ROUNDS: usize = if cfg!(miri) { 3 } else { 40 };
                let (r, mut w) = std::io::pipe().unwrap();
                let entered = Arc::new(AtomicUsize::new(0));
                let reader = {
                    let entered = Arc::clone(&entered);
                    ferry::spawn(move || {
                        for round in 1..=ROUNDS {
                            entered.store(round, SeqCst);
                            let mut byte = 0u8;
                            // A raw read, not announced to ferry, and no
                            // switch between the store above and it.
                            // SAFETY: a valid fd and a one-byte buffer.
                            let n = unsafe { libc::read(r.as_raw_fd(), (&raw mut byte).cast(), 1) };
                            assert_eq!(n, 1);
                            assert_eq!(usize::from(byte), round % 256);
                            // Back into ferry: the thread is handed back.
                            ferry::yield_now();
                        }
                    })
                };
                for round in 1..=ROUNDS {
                    while entered.load(SeqCst) < round {
                        ferry::yield_now();
                    }
                    // Running here, with the reader past its store, means
                    // its processor was taken over.
                    w.write_all(&[(round % 256) as u8]).unwrap();
                    let (threads, bound) = Handle::current().kernel_threads();
                    assert!(threads <= bound, "{threads} kernel threads, bound {bound}");
                }
                reader.join().unwrap();
                let stats = Handle::current().upcall_stats();
                assert!(stats.unannounced_blocks >= ROUNDS as u64, "{stats:?}");
            })
            .unwrap();
    });
}

/// A processor's stand-in (on by default, for a pinned processor: one of
/// two) takes the processor over from raw reads and announced ones, round
/// after round, while a thread computes; each read ends only because the
/// writer ran, which on one processor needs a takeover. Checked: every
/// round ends, the compute thread advanced across each block, and the
/// kernel threads stay within the bound. (Whether the stand-in or the
/// monitor's watcher made a takeover depends on the load: a core busy with
/// other processes never runs the stand-in, so the watcher does.)
#[test]
fn stand_ins_take_over_round_after_round() {
    within("stand-in takeovers", || {
        Runtime::builder()
            .processors(1)
            .max_processors(2)
            .stand_ins(true)
            .run(|| {
                const ROUNDS: usize = if cfg!(miri) { 4 } else { 200 };
                let stop = Arc::new(AtomicBool::new(false));
                let progress = Arc::new(AtomicU64::new(0));
                let worker = compute(&stop, &progress);
                let (r, mut w) = std::io::pipe().unwrap();
                let entered = Arc::new(AtomicUsize::new(0));
                let reader = {
                    let (entered, progress) = (Arc::clone(&entered), Arc::clone(&progress));
                    ferry::spawn(move || {
                        for round in 1..=ROUNDS {
                            let before = progress.load(SeqCst);
                            entered.store(round, SeqCst);
                            let mut byte = 0u8;
                            let mut read = || {
                                // SAFETY: a valid fd and a one-byte buffer.
                                unsafe { libc::read(r.as_raw_fd(), (&raw mut byte).cast(), 1) }
                            };
                            // Odd rounds unannounced, even ones announced.
                            let n = if round % 2 == 1 {
                                read()
                            } else {
                                ferry::blocking(read)
                            };
                            assert_eq!(n, 1);
                            assert_eq!(usize::from(byte), round % 256);
                            assert!(
                                progress.load(SeqCst) > before,
                                "compute stalled in round {round}"
                            );
                            ferry::yield_now();
                        }
                    })
                };
                for round in 1..=ROUNDS {
                    while entered.load(SeqCst) < round {
                        ferry::yield_now();
                    }
                    // Let the compute thread run past the reader's block.
                    let seen = progress.load(SeqCst);
                    while progress.load(SeqCst) < seen + 10 {
                        ferry::yield_now();
                    }
                    w.write_all(&[(round % 256) as u8]).unwrap();
                    let (threads, bound) = Handle::current().kernel_threads();
                    assert!(threads <= bound, "{threads} kernel threads, bound {bound}");
                }
                reader.join().unwrap();
                stop.store(true, SeqCst);
                worker.join().unwrap();
                let stats = Handle::current().upcall_stats();
                assert!(stats.blocked.count >= ROUNDS as u64, "{stats:?}");
            })
            .unwrap();
    });
}

/// The kernel threads of this process with their scheduling policies
/// (`SCHED_OTHER`, `SCHED_BATCH`, ...) and whether each may run on one CPU
/// only; threads that end while being looked at are left out.
fn task_classes() -> Vec<(libc::c_int, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let Some(tid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: plain system calls on a thread id of this process; a
        // thread that ended meanwhile gives an error, skipped.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid out-parameter of the size passed.
        let got =
            unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &raw mut set) };
        if policy >= 0 && got == 0 {
            // SAFETY: `set` was filled in by the kernel.
            out.push((policy, unsafe { libc::CPU_COUNT(&set) } == 1));
        }
    }
    out
}

/// No kernel thread of a busy runtime waits in `SCHED_IDLE`, stand-ins
/// included (they stand by in `SCHED_BATCH`): a process dies only once
/// each of its kernel threads has run its own exit, and the kernel gives
/// an idle-class thread almost no time on a core that other processes keep
/// busy, so a ferry process that exited beside a busy parent held up the
/// parent's `wait` for seconds. Two processors compute, so each gets a
/// stand-in pinned to its core; every kernel thread's class is read until
/// a pinned thread in `SCHED_BATCH` other than the drivers has been seen
/// many times.
#[test]
#[cfg_attr(miri, ignore = "reads /proc and asks the kernel for classes")]
fn no_kernel_thread_of_a_busy_runtime_waits_in_the_idle_class() {
    within("classes of a busy runtime", || {
        Runtime::builder()
            .processors(2)
            .stand_ins(true)
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let progress = Arc::new(AtomicU64::new(0));
                let workers = [compute(&stop, &progress), compute(&stop, &progress)];
                let mut pinned_batch_seen = 0;
                while pinned_batch_seen < 50 {
                    let classes = task_classes();
                    assert!(
                        classes
                            .iter()
                            .all(|&(policy, _)| policy != libc::SCHED_IDLE),
                        "a kernel thread in SCHED_IDLE: {classes:?}"
                    );
                    if classes
                        .iter()
                        .any(|&(policy, pinned)| policy == libc::SCHED_BATCH && pinned)
                    {
                        pinned_batch_seen += 1;
                    }
                    let seen = progress.load(SeqCst);
                    wait_for_progress(&progress, seen, 100);
                }
                stop.store(true, SeqCst);
                for w in workers {
                    w.join().unwrap();
                }
            })
            .unwrap();
    });
}

/// The files this process holds open inside its own `/proc/<pid>/task/`
/// tree (the targets of `/proc/self/fd`).
fn own_task_files_open() -> Vec<String> {
    let tree = format!("/proc/{}/task/", std::process::id());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with(&tree))
        .collect()
}

/// A runtime whose drivers block unannounced, so that stand-ins and the
/// monitor read their states, holds no file open inside its
/// `/proc/<pid>/task/` tree: a parent reaping the process walks that tree,
/// and entries a dying thread of it is still dropping held the parent's
/// `wait` for seconds (see `sys::open_own_stat`; each kernel thread's stat
/// file is `/proc/<tid>/stat`). The fds are listed while drivers sleep and
/// a processor computes, until stand-ins have taken over unannounced
/// blocks.
#[test]
#[cfg_attr(miri, ignore = "reads /proc")]
fn the_runtime_holds_no_file_in_its_proc_task_tree() {
    within("proc files of a runtime", || {
        Runtime::builder()
            .processors(2)
            .stand_ins(true)
            .take_over_unannounced(true)
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let progress = Arc::new(AtomicU64::new(0));
                let worker = compute(&stop, &progress);
                for _ in 0..20 {
                    let sleepers: Vec<_> = (0..2)
                        .map(|_| {
                            // Not announced to ferry.
                            ferry::spawn(|| std::thread::sleep(Duration::from_millis(5)))
                        })
                        .collect();
                    let open = own_task_files_open();
                    assert!(open.is_empty(), "files open in the task tree: {open:?}");
                    for s in sleepers {
                        s.join().unwrap();
                    }
                }
                stop.store(true, SeqCst);
                worker.join().unwrap();
                let stats = Handle::current().upcall_stats();
                assert!(stats.unannounced_blocks >= 1, "{stats:?}");
                let open = own_task_files_open();
                assert!(open.is_empty(), "files open in the task tree: {open:?}");
            })
            .unwrap();
    });
}

#[test]
fn blocking_passes_panics_and_values_and_works_off_the_runtime() {
    assert_eq!(ferry::blocking(|| 7), 7);
    Runtime::builder()
        .processors(1)
        .run(|| {
            assert_eq!(ferry::blocking(|| 6 * 7), 42);
            let r = std::panic::catch_unwind(|| ferry::blocking(|| panic!("inside")));
            assert!(r.is_err());
            // Still a working ferry thread afterwards.
            assert_eq!(ferry::spawn(|| 1).join().unwrap(), 1);
        })
        .unwrap();
}

#[test]
fn a_spinning_thread_does_not_starve_another_with_a_time_slice() {
    within("time slice", || {
        Runtime::builder()
            .processors(1)
            .time_slice(Some(Duration::from_millis(1)))
            .run(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let s = Arc::clone(&stop);
                let spinner = ferry::spawn(move || {
                    let mut n = 0u64;
                    while !s.load(SeqCst) {
                        n = std::hint::black_box(n + 1);
                    }
                    n
                });
                let other = ferry::spawn(|| {
                    let mut sum = 0u64;
                    for i in 0..100u64 {
                        ferry::yield_now();
                        sum += i;
                    }
                    sum
                });
                assert_eq!(other.join().unwrap(), 4950);
                stop.store(true, SeqCst);
                assert!(spinner.join().unwrap() > 0);
                assert!(Handle::current().upcall_stats().preempted.count > 0);
            })
            .unwrap();
    });
}

#[test]
fn a_spinlock_holder_is_preempted_only_after_release() {
    within("lock-holder care", || {
        Runtime::builder()
            .processors(1)
            .time_slice(Some(Duration::from_micros(200)))
            .run(|| {
                let lock = Arc::new(SpinLock::new(0u64));
                let inside = Arc::new(AtomicBool::new(false));
                let done = Arc::new(AtomicBool::new(false));
                let (l, i, d) = (Arc::clone(&lock), Arc::clone(&inside), Arc::clone(&done));
                let holder = ferry::spawn(move || {
                    for _ in 0..4000 {
                        let mut g = l.lock();
                        i.store(true, SeqCst);
                        // ~20 µs of work inside the lock, then out for
                        // a few instructions only.
                        let mut x = *g;
                        for k in 0..20_000u64 {
                            x = std::hint::black_box(x.wrapping_add(k));
                        }
                        *g = x;
                        i.store(false, SeqCst);
                        drop(g);
                    }
                    d.store(true, SeqCst);
                });
                let (i, d) = (Arc::clone(&inside), Arc::clone(&done));
                let observer = ferry::spawn(move || {
                    let mut runs = 0u64;
                    while !d.load(SeqCst) {
                        // On one processor this runs only while the holder
                        // is switched out: never inside its lock.
                        assert!(!i.load(SeqCst), "preempted inside a SpinLock");
                        runs += 1;
                        ferry::yield_now();
                    }
                    runs
                });
                holder.join().unwrap();
                let runs = observer.join().unwrap();
                assert!(runs > 1, "the holder was never preempted");
                let stats = Handle::current().upcall_stats();
                assert!(stats.chained_preemptions > 0, "{stats:?}");
            })
            .unwrap();
    });
}

#[test]
fn processors_come_and_go_under_a_mutex_workload() {
    within("processor changes", || {
        Runtime::builder()
            .processors(2)
            .max_processors(2)
            .max_kernel_threads(8)
            .time_slice(Some(Duration::from_millis(1)))
            .run(|| {
                let counter = Arc::new(Mutex::new(0u64));
                let finished = Arc::new(AtomicUsize::new(0));
                let workers: Vec<_> = (0..1000)
                    .map(|_| {
                        let (c, f) = (Arc::clone(&counter), Arc::clone(&finished));
                        ferry::spawn(move || {
                            for _ in 0..50 {
                                *c.lock() += 1;
                                ferry::yield_now();
                            }
                            f.fetch_add(1, SeqCst);
                        })
                    })
                    .collect();
                let rt = Handle::current();
                let mut n = 1;
                let mut changes = 0;
                while finished.load(SeqCst) < 1000 || changes < 4 {
                    rt.set_processors(n).unwrap();
                    changes += 1;
                    n = 3 - n;
                    let (threads, bound) = rt.kernel_threads();
                    assert!(threads <= bound, "{threads} kernel threads, bound {bound}");
                    ferry::sleep(Duration::from_millis(2));
                }
                for w in workers {
                    w.join().unwrap();
                }
                assert_eq!(*counter.lock(), 50_000);
                rt.set_processors(2).unwrap();
                let stats = rt.upcall_stats();
                assert!(stats.processor_removed.count >= 1, "{stats:?}");
                assert!(stats.processor_added.count >= 3, "{stats:?}");
            })
            .unwrap();
    });
}

#[test]
fn processor_changes_reject_bad_input() {
    Runtime::builder()
        .processors(1)
        .max_processors(2)
        .run(|| {
            let rt = Handle::current();
            assert_eq!(rt.max_processors(), 2);
            rt.set_processors(0).unwrap(); // clamped to one
            assert_eq!(rt.processors(), 1);
            rt.set_processors(99).unwrap(); // clamped to the maximum
            assert_eq!(rt.processors(), 2);
            let e = rt.processor_on(5, 0).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            let e = rt.processor_on(0, 100_000).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            rt.processor_on(0, 0).unwrap();
            ferry::yield_now();
        })
        .unwrap();
}

#[test]
fn a_processor_goes_to_any_core_of_the_process_whichever_core_the_caller_is_pinned_to() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return;
    }
    Runtime::builder()
        .processors(2)
        .run(move || {
            let rt = Handle::current();
            // The calling processor's kernel thread is pinned to one core
            // (processors are, with two CPUs or more): a core outside its
            // own mask but in the process's is still accepted.
            let mine = rustix::thread::sched_getaffinity(None).unwrap();
            let other = (0..cpus).find(|&c| !mine.is_set(c));
            if let Some(c) = other {
                rt.processor_on(1, c).unwrap();
            }
            for c in 0..cpus {
                rt.processor_on(0, c).unwrap();
            }
            ferry::yield_now();
        })
        .unwrap();
}

/// The runtime's end wakes every kernel thread that waits with no timeout
/// (pooled spares, stand-ins asleep beside parked processors, the parked
/// monitor): many short runs, each leaving such sleepers behind, all end.
#[test]
fn many_short_runs_end() {
    common::within(WATCHDOG, "a run did not end", || {
        for round in 0..500 {
            ferry::Runtime::builder()
                .processors(2)
                .run(move || {
                    // Busy processors get stand-ins; the sleep parks them
                    // (and their stand-ins) before the run ends.
                    let spinners: Vec<_> = (0..4)
                        .map(|i| ferry::spawn(move || (0..10_000u64).fold(i, |a, b| a ^ b)))
                        .collect();
                    for s in spinners {
                        s.join().unwrap();
                    }
                    ferry::sleep(std::time::Duration::from_micros(200 + (round % 7) * 100));
                    ferry::blocking(|| ());
                })
                .unwrap();
        }
    });
}
