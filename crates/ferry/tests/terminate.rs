//! Terminating a thread that waits in a ferry primitive: it leaves the wait
//! list, a wakeup it was already given goes on to the next waiter (as
//! POSIX asks of a cancelled waiter), and its stack and thread-locals are
//! freed.
//!
//! Every scenario runs on one processor, so that "spawn, then yield until
//! it blocks" is deterministic, and under a deadline: a lost wakeup shows
//! as a hang, which the deadline turns into a failure.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use ferry::sync::{Barrier, Condvar, Mutex, RwLock, Semaphore};
use ferry::thread::Suspension;

mod common;
use common::WATCHDOG;

/// Runs `f` as a one-processor runtime's first thread; fails if it has
/// not returned within a minute (a thread slept for ever).
fn within_deadline(f: impl FnOnce() + Send + 'static) {
    common::within(
        WATCHDOG,
        "a waiter slept for ever: the wakeup was lost",
        move || {
            let mut b = ferry::Runtime::builder();
            b.processors(1).time_slice(None);
            b.run(f).unwrap();
        },
    );
}

/// Lets every other runnable thread run until it blocks.
fn settle() {
    for _ in 0..20 {
        ferry::yield_now();
    }
}

/// Terminates `h`'s thread with `v` and checks that it ended so.
fn terminate<T: Send + PartialEq + std::fmt::Debug + 'static>(
    h: ferry::thread::JoinHandle<T>,
    v: T,
    expect: T,
) {
    let t = h.thread();
    // SAFETY: the waiting closures hold nothing whose destructor matters.
    assert!(unsafe { t.terminate(v) }.is_ok());
    assert_eq!(t.suspension(), Suspension::Terminated);
    assert_eq!(h.join().unwrap(), expect);
}

#[test]
fn a_terminated_mutex_waiter_leaves_the_queue() {
    within_deadline(|| {
        let m = Arc::new(Mutex::new(0u32));
        let g = m.lock();
        let (ma, mb) = (Arc::clone(&m), Arc::clone(&m));
        let a = ferry::spawn(move || *ma.lock() + 100);
        settle();
        let b = ferry::spawn(move || {
            let mut g = mb.lock();
            *g += 1;
            *g
        });
        settle();
        terminate(a, 7, 7);
        drop(g); // the one wakeup must reach b
        assert_eq!(b.join().unwrap(), 1);
        assert!(!m.is_locked());
    });
}

#[test]
fn a_mutex_wakeup_given_to_a_terminated_waiter_goes_to_the_next() {
    within_deadline(|| {
        let m = Arc::new(Mutex::new(0u32));
        let g = m.lock();
        let (ma, mb) = (Arc::clone(&m), Arc::clone(&m));
        let a = ferry::spawn(move || *ma.lock() + 100);
        settle();
        let b = ferry::spawn(move || {
            let mut g = mb.lock();
            *g += 1;
            *g
        });
        settle();
        drop(g); // wakes a, which has not run yet
        terminate(a, 7, 7);
        assert_eq!(b.join().unwrap(), 1);
    });
}

#[test]
fn a_condvar_signal_reaches_the_waiter_left_after_one_is_terminated() {
    for signal_first in [false, true] {
        within_deadline(move || {
            let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
            let waiter = |p: Arc<(Mutex<u32>, Condvar)>| {
                move || {
                    let (m, cv) = &*p;
                    let g = m.lock();
                    let mut g = cv.wait(g);
                    *g += 1;
                    *g
                }
            };
            let a = ferry::spawn(waiter(Arc::clone(&pair)));
            settle();
            let b = ferry::spawn(waiter(Arc::clone(&pair)));
            settle();
            if signal_first {
                pair.1.notify_one(); // to a, which has not run yet
                terminate(a, 7, 7);
            } else {
                terminate(a, 7, 7);
                pair.1.notify_one();
            }
            assert_eq!(b.join().unwrap(), 1);
            assert!(
                !pair.0.is_locked(),
                "a terminated condvar waiter holds no lock"
            );
        });
    }
}

#[test]
fn a_semaphore_permit_reaches_the_waiter_left_after_one_is_terminated() {
    for release_first in [false, true] {
        within_deadline(move || {
            let sem = Arc::new(Semaphore::new(0));
            let (sa, sb) = (Arc::clone(&sem), Arc::clone(&sem));
            let a = ferry::spawn(move || {
                sa.acquire();
                1u32
            });
            settle();
            let b = ferry::spawn(move || {
                sb.acquire();
                2u32
            });
            settle();
            if release_first {
                sem.release(); // handed to a, which has not run yet
                terminate(a, 7, 7);
            } else {
                terminate(a, 7, 7);
                sem.release();
            }
            assert_eq!(b.join().unwrap(), 2);
            assert_eq!(sem.available_permits(), 0);
            sem.release();
            assert_eq!(sem.available_permits(), 1, "the queue emptied cleanly");
        });
    }
}

#[test]
fn a_terminated_rwlock_waiter_passes_its_grant_on() {
    for unlock_first in [false, true] {
        within_deadline(move || {
            let l = Arc::new(RwLock::new(0u32));
            let g = l.write();
            let (la, lb) = (Arc::clone(&l), Arc::clone(&l));
            let a = ferry::spawn(move || {
                *la.write() += 100;
                1u32
            });
            settle();
            let b = ferry::spawn(move || {
                *lb.write() += 1;
                2u32
            });
            settle();
            if unlock_first {
                drop(g); // grants a, which has not run yet
                terminate(a, 7, 7);
            } else {
                terminate(a, 7, 7);
                drop(g);
            }
            assert_eq!(b.join().unwrap(), 2);
            assert_eq!(*l.read(), 1);
            assert!(l.try_write().is_some(), "the lock is free again");
        });
    }
}

#[test]
fn a_terminated_barrier_waiter_does_not_count() {
    within_deadline(|| {
        let bar = Arc::new(Barrier::new(2));
        let ba = Arc::clone(&bar);
        let a = ferry::spawn(move || ba.wait().is_leader());
        settle();
        terminate(a, true, true);
        let bb = Arc::clone(&bar);
        let b = ferry::spawn(move || bb.wait().is_leader());
        settle();
        // b waits for a second live arrival: ours.
        assert!(!b.is_finished());
        bar.wait();
        b.join().unwrap();
    });
}

#[test]
fn a_terminated_receiver_passes_its_wakeup_on() {
    within_deadline(|| {
        let (tx, rx) = ferry::sync::channel::<u32>(4);
        let rb = rx.clone();
        let a = ferry::spawn(move || rx.recv().unwrap());
        settle();
        let b = ferry::spawn(move || rb.recv().unwrap());
        settle();
        terminate(a, 7, 7);
        tx.send(5).unwrap();
        assert_eq!(b.join().unwrap(), 5);
    });
}

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct CountsDrop;

impl Drop for CountsDrop {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
    }
}

ferry::thread_local! {
    static LOCAL: std::cell::RefCell<Option<CountsDrop>> = std::cell::RefCell::new(None);
}

#[test]
fn terminating_a_waiting_thread_frees_its_stack_and_drops_its_locals() {
    // A size no other test uses, so that the stack cache's class for it
    // holds only this test's stacks.
    const STACK: usize = 200 * 4096;
    within_deadline(|| {
        let m = Arc::new(Mutex::new(()));
        let g = m.lock();
        let ma = Arc::clone(&m);
        let a_at = Arc::new(AtomicUsize::new(0));
        let at = Arc::clone(&a_at);
        let a = ferry::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                LOCAL.with(|l| *l.borrow_mut() = Some(CountsDrop));
                let here = 0u8;
                at.store(std::hint::black_box(&here) as *const u8 as usize, SeqCst);
                drop(ma.lock());
            })
            .unwrap();
        settle();
        let t = a.thread();
        assert_eq!(DROPPED.load(SeqCst), 0);
        // SAFETY: the closure holds only `Arc`s (which leak).
        assert!(unsafe { t.terminate(()) }.is_ok());
        assert_eq!(
            DROPPED.load(SeqCst),
            1,
            "terminate drops the thread's locals"
        );
        a.join().unwrap();
        // The next thread with that stack size gets the freed stack.
        let b = ferry::thread::Builder::new()
            .stack_size(STACK)
            .spawn(|| {
                let here = 0u8;
                std::hint::black_box(&here) as *const u8 as usize
            })
            .unwrap();
        let b_at = b.join().unwrap();
        let a_at = a_at.load(SeqCst);
        assert!(
            a_at.abs_diff(b_at) < STACK,
            "the terminated thread's stack ({a_at:#x}) was not reused ({b_at:#x})"
        );
        drop(g);
        assert_eq!(DROPPED.load(SeqCst), 1);
    });
}

#[test]
fn a_late_wakeup_of_a_terminated_joiner_or_sleeper_touches_no_freed_stack() {
    within_deadline(|| {
        let m = Arc::new(Mutex::new(()));
        let g = m.lock();
        let mk = Arc::clone(&m);
        let joinee = ferry::spawn(move || drop(mk.lock()));
        settle();
        let joiner = ferry::spawn(move || {
            joinee.join().unwrap();
            1u32
        });
        let sleeper = ferry::spawn(|| {
            ferry::sleep(Duration::from_millis(20));
            2u32
        });
        settle();
        terminate(joiner, 7, 7);
        terminate(sleeper, 8, 8);
        // Reuse the freed stacks at once, and write over them.
        let scribblers: Vec<_> = (0..4)
            .map(|_| {
                ferry::spawn(|| {
                    let buf = [0xa5u8; 16 * 1024];
                    std::hint::black_box(&buf)[..]
                        .iter()
                        .map(|&b| b as u32)
                        .sum::<u32>()
                })
            })
            .collect();
        // The joinee ends and wakes its dead joiner; the timer fires for
        // the dead sleeper: each finds only the thread's block.
        drop(g);
        ferry::sleep(Duration::from_millis(40));
        for s in scribblers {
            assert_eq!(s.join().unwrap(), 0xa5 * 16 * 1024);
        }
    });
}

#[test]
fn a_send_to_a_terminated_oneshot_receiver_wakes_only_its_block() {
    within_deadline(|| {
        let (tx, rx) = ferry::sync::oneshot::channel::<u32>();
        let waiter = ferry::spawn(move || rx.recv().unwrap_or(0));
        settle();
        terminate(waiter, 9, 9);
        // The receiver never ran its destructor (termination runs none):
        // the send finds it parked, wakes what is left of the thread and
        // succeeds; nothing hangs.
        assert!(!tx.is_closed());
        assert_eq!(tx.send(5), Ok(()));
        settle();
    });
}
