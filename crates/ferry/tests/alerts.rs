//! Alerts, priorities and run time at the thread level: what
//! `Thread::alert`, `ferry::alerted`, `thread::allow_alerts`,
//! `thread::clear_alert` and `Thread::is_alerted` report, on and off a
//! ferry thread; an alert aborting a blocking call (during it, and before
//! it, at its entry: a `ferry::blocking` pipe read, a `ferry::fs` read on
//! both of its paths, a `ferry::net` socket wait); blocked alerts that
//! abort nothing and are seen once allowed; `thread::set_priority`
//! ordering two threads on one processor; and `thread::cpu_time` against
//! the kernel's CPU clock of the thread. Each runtime runs under a
//! watchdog: an abort that never comes fails the test instead of hanging
//! it.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{WATCHDOG, within};
use ferry::Runtime;
use ferry::thread::Priority;
use ferry::thread::{self, Suspension};

/// Runs `f` as the first thread of a runtime of `n` processors with no
/// time slice, io_uring as `ring` says, under the watchdog.
fn run<T: Send + 'static>(
    what: &str,
    n: usize,
    ring: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    within(WATCHDOG, &watched(what), move || {
        Runtime::builder()
            .processors(n)
            .time_slice(None)
            .io_uring(ring)
            .run(f)
            .unwrap()
    })
}

/// What [`run`] names the runtime it watches for `what` (and what
/// [`common::step`] takes to report its steps).
fn watched(what: &str) -> String {
    format!("{what}: a call that should have been aborted was not")
}

/// Suspends `t` until it has stopped inside its blocking call, then
/// resumes it: on return `t` is in the call (blocked in the kernel, or
/// about to be).
fn until_in_call(t: &ferry::Thread) {
    loop {
        t.suspend();
        t.wait_suspended(true);
        let in_call = t.suspension() == Suspension::StoppedInCall;
        t.resume();
        if in_call {
            return;
        }
        ferry::yield_now();
    }
}

/// One `read(2)` of a pipe inside `ferry::blocking` (std's `read` does not
/// retry `EINTR`).
fn blocking_read(r: &mut std::io::PipeReader) -> std::io::Result<usize> {
    let mut byte = [0u8; 1];
    ferry::blocking(|| r.read(&mut byte))
}

fn assert_interrupted<T: std::fmt::Debug>(r: std::io::Result<T>) {
    let err = r.expect_err("the call should have been aborted");
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
}

#[test]
fn alert_bits_on_the_current_thread() {
    run("bits", 1, true, || {
        let me = ferry::current();
        assert!(!ferry::alerted());
        assert!(!me.is_alerted());
        assert!(!thread::clear_alert());
        // Alerting oneself outside a call aborts nothing.
        me.alert();
        assert!(ferry::alerted());
        assert!(me.is_alerted());
        // Blocked: pending, but not seen.
        assert!(thread::allow_alerts(false));
        assert!(!ferry::alerted());
        assert!(me.is_alerted());
        assert!(!thread::allow_alerts(false));
        // Allowed again: seen.
        assert!(!thread::allow_alerts(true));
        assert!(ferry::alerted());
        assert!(thread::allow_alerts(true));
        // Cleared once.
        assert!(thread::clear_alert());
        assert!(!thread::clear_alert());
        assert!(!ferry::alerted());
        assert!(!me.is_alerted());
    });
}

#[test]
fn off_a_ferry_thread_the_calls_do_nothing() {
    assert!(!ferry::alerted());
    assert!(!thread::clear_alert());
    assert!(!thread::allow_alerts(true));
    assert!(!thread::allow_alerts(false));
    assert_eq!(thread::cpu_time(), None);
    assert_eq!(thread::set_priority(Priority::High), Priority::High);
    assert_eq!(thread::set_priority(Priority::Low), Priority::Low);
}

#[test]
fn an_alert_from_another_thread_and_from_off_the_runtime_is_seen() {
    run("alert seen", 2, true, || {
        for from_kernel_thread in [false, true] {
            let h = ferry::spawn(|| {
                while !ferry::alerted() {
                    ferry::yield_now();
                }
                thread::clear_alert()
            });
            let t = h.thread();
            if from_kernel_thread {
                std::thread::spawn(move || t.alert()).join().unwrap();
            } else {
                t.alert();
            }
            assert!(h.join().unwrap(), "the alert was pending until cleared");
        }
    });
}

#[test]
fn an_alert_aborts_a_blocking_pipe_read_in_the_call() {
    for n in [1, 2] {
        run("alert during a read", n, true, || {
            let (mut r, _w) = std::io::pipe().unwrap();
            let h = ferry::spawn(move || {
                let got = blocking_read(&mut r);
                (got, thread::clear_alert())
            });
            let t = h.thread();
            until_in_call(&t);
            t.alert();
            let (got, was_pending) = h.join().unwrap();
            let err = got.expect_err("the alert should have aborted the read");
            assert_eq!(err.kind(), ErrorKind::Interrupted);
            assert_eq!(err.raw_os_error(), Some(libc::EINTR));
            assert!(was_pending, "the alert stays pending after the abort");
        });
    }
}

#[test]
fn an_alert_pending_before_the_call_aborts_it_at_entry() {
    for n in [1, 2] {
        run("alert before a read", n, true, || {
            let (mut r, _w) = std::io::pipe().unwrap();
            let h = ferry::spawn(move || {
                ferry::current().alert();
                // No writer ever writes: only the abort ends these reads.
                let first = blocking_read(&mut r);
                let second = blocking_read(&mut r);
                assert!(thread::clear_alert());
                (first, second)
            });
            let (first, second) = h.join().unwrap();
            for got in [first, second] {
                let err = got.expect_err("the pending alert should abort the read");
                assert_eq!(err.raw_os_error(), Some(libc::EINTR));
            }
        });
    }
}

#[test]
fn blocked_alerts_abort_nothing_and_are_seen_once_allowed() {
    run("blocked alerts", 1, true, || {
        let (mut r, mut w) = std::io::pipe().unwrap();
        let h = ferry::spawn(move || {
            assert!(thread::allow_alerts(false));
            let got = blocking_read(&mut r);
            let seen_blocked = ferry::alerted();
            let pending = ferry::current().is_alerted();
            thread::allow_alerts(true);
            let seen_allowed = ferry::alerted();
            // Entered with the alert allowed and pending: aborted at entry
            // (the pipe is empty, so nothing else would end it).
            let next = blocking_read(&mut r);
            (got, seen_blocked, pending, seen_allowed, next)
        });
        let t = h.thread();
        until_in_call(&t);
        // The thread blocks alerts: this aborts nothing.
        t.alert();
        w.write_all(b"x").unwrap();
        let (got, seen_blocked, pending, seen_allowed, next) = h.join().unwrap();
        assert_eq!(got.unwrap(), 1, "a blocked alert aborted the read");
        assert!(!seen_blocked);
        assert!(pending);
        assert!(seen_allowed);
        assert_interrupted(next);
    });
}

#[test]
fn an_alert_aborts_file_reads_of_ferry_fs_at_entry_and_during() {
    for ring in [false, true] {
        let step = move |s: &str| common::step(&watched("fs reads"), format!("ring {ring}: {s}"));
        run("fs reads", 2, ring, move || {
            let (r, _w) = std::io::pipe().unwrap();
            let file = ferry::fs::File::from(std::fs::File::from(std::os::fd::OwnedFd::from(r)));
            let file = Arc::new(file);
            // Before: aborted at entry.
            let f = Arc::clone(&file);
            step("before: spawned");
            let h = ferry::spawn(move || {
                ferry::current().alert();
                let mut byte = [0u8; 1];
                let got = (&*f).read(&mut byte);
                step("before: read returned");
                thread::clear_alert();
                got
            });
            assert_interrupted(h.join().unwrap());
            // During: the alert's abort.
            step("during: spawned");
            let f = Arc::clone(&file);
            let parked = Arc::new(AtomicBool::new(false));
            let p = Arc::clone(&parked);
            let h = ferry::spawn(move || {
                p.store(true, SeqCst);
                let mut byte = [0u8; 1];
                (&*f).read(&mut byte)
            });
            while !parked.load(SeqCst) {
                ferry::yield_now();
            }
            // Alert until the read is over (an alert that came before the
            // wait aborted it at entry, one during it by its abort).
            let t = h.thread();
            let mut alerts = 0u64;
            while !h.is_finished() {
                t.alert();
                alerts += 1;
                step(&format!("during: {alerts} alerts given"));
                ferry::sleep(Duration::from_millis(1));
            }
            step(&format!("during: finished after {alerts} alerts"));
            assert_interrupted(h.join().unwrap());
            step("runtime ends");
        });
    }
}

#[test]
fn an_alert_aborts_a_socket_wait_of_ferry_net_at_entry_and_during() {
    run("socket waits", 2, true, || {
        let (a, _b) = ferry::net::UnixStream::pair().unwrap();
        let a = Arc::new(a);
        let s = Arc::clone(&a);
        let h = ferry::spawn(move || {
            ferry::current().alert();
            let mut byte = [0u8; 1];
            let got = (&*s).read(&mut byte);
            thread::clear_alert();
            got
        });
        assert_interrupted(h.join().unwrap());
        let s = Arc::clone(&a);
        let h = ferry::spawn(move || {
            let mut byte = [0u8; 1];
            (&*s).read(&mut byte)
        });
        let t = h.thread();
        while !h.is_finished() {
            t.alert();
            ferry::sleep(Duration::from_millis(1));
        }
        assert_interrupted(h.join().unwrap());
    });
}

#[test]
fn a_raised_priority_runs_first_on_one_processor() {
    run("priorities", 1, true, || {
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |name: &'static str| {
            let o = Arc::clone(&order);
            thread::Builder::new()
                .suspended(true)
                .spawn(move || o.lock().unwrap().push(name))
                .unwrap()
        };
        // Spawned first, queued first: only the priorities put `high`
        // ahead.
        let low = spawn("low");
        let high = spawn("high");
        low.thread().set_priority(Priority::Low);
        high.thread().set_priority(Priority::High);
        assert_eq!(high.thread().priority(), Priority::High);
        low.thread().resume();
        high.thread().resume();
        // The main thread (Normal) waits; both are queued behind it.
        low.join().unwrap();
        high.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["high", "low"]);
        // A thread raising itself: no ceiling outside a call.
        assert_eq!(thread::set_priority(Priority::High), Priority::High);
        assert_eq!(ferry::current().priority(), Priority::High);
        thread::set_priority(Priority::Normal);
    });
}

/// The calling kernel thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
fn kernel_thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn cpu_time_rises_by_at_least_a_burn_on_the_kernel_clock() {
    run("cpu time", 1, true, || {
        let before = thread::cpu_time().expect("accounting is on by default");
        // The thread neither switches nor blocks while it burns, so it
        // stays on one kernel thread, whose clock counts only time on a
        // core: a lower bound of the time ferry counts.
        let k0 = kernel_thread_cpu_time();
        let mut x = 0u64;
        while kernel_thread_cpu_time() - k0 < Duration::from_millis(20) {
            for i in 0..1000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        let burn = kernel_thread_cpu_time() - k0;
        let after = thread::cpu_time().unwrap();
        assert!(
            after - before >= burn,
            "cpu_time rose by {:?}, the kernel counted {burn:?}",
            after - before
        );
        // And it keeps what it counted across a switch.
        ferry::yield_now();
        assert!(thread::cpu_time().unwrap() >= after);
    });
}

#[test]
fn without_accounting_cpu_time_is_none() {
    let got = Runtime::builder()
        .processors(1)
        .thread_cpu_time(false)
        .run(|| {
            (
                thread::cpu_time(),
                ferry::spawn(thread::cpu_time).join().unwrap(),
            )
        })
        .unwrap();
    assert_eq!(got, (None, None));
}
