//! Event sources behind one seam: a processor parked with both a timer and
//! an upcall pending sleeps in one kernel wait, and wakes for whichever
//! comes first. A lost wakeup hangs the test, which the watchdog turns into
//! a failure; nothing here checks elapsed time.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use ferry::{Handle, Runtime};

mod common;
use common::WATCHDOG;

/// Waits (on a kernel thread outside the runtime) until the runtime's one
/// processor was taken from the thread blocked in the kernel and has gone
/// idle: it is parked (or about to park) with nothing to run.
fn until_parked_after_blocked(handle: &Handle) {
    while handle.upcall_stats().blocked.count == 0 || handle.idle_processors() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_parked_processor_wakes_for_an_upcall_before_its_timer() {
    common::within(
        WATCHDOG,
        "upcall before timer: the parked processor was not woken",
        || {
            Runtime::builder()
                .processors(1)
                .run(|| {
                    // A timer due in an hour keeps the processor's wait bounded,
                    // far away.
                    let slept = Arc::new(AtomicBool::new(false));
                    let sleeper = {
                        let slept = Arc::clone(&slept);
                        ferry::spawn(move || {
                            ferry::sleep(Duration::from_secs(3600));
                            slept.store(true, SeqCst);
                        })
                    };
                    let (tx, rx) = std::sync::mpsc::channel::<u32>();
                    let handle = Handle::current();
                    // Released once the processor is parked: the call's return
                    // finds the processor taken and posts `Unblocked`.
                    let releaser = std::thread::spawn(move || {
                        until_parked_after_blocked(&handle);
                        tx.send(7).unwrap();
                    });
                    let blocked = ferry::spawn(move || ferry::blocking(|| rx.recv().unwrap()));
                    assert_eq!(blocked.join().unwrap(), 7);
                    releaser.join().unwrap();
                    let stats = Handle::current().upcall_stats();
                    assert!(stats.unblocked.count >= 1, "{stats:?}");
                    assert!(!slept.load(SeqCst), "the hour-long sleep ended early");
                    assert!(!sleeper.is_finished());
                })
                .unwrap();
        },
    );
}

#[test]
fn a_parked_processor_wakes_for_a_timer_before_an_upcall() {
    common::within(
        WATCHDOG,
        "timer before upcall: the parked processor was not woken",
        || {
            Runtime::builder()
                .processors(1)
                .run(|| {
                    let (tx, rx) = std::sync::mpsc::channel::<u32>();
                    let (parked_tx, parked_rx) = std::sync::mpsc::channel::<()>();
                    let handle = Handle::current();
                    // Tells the sleeper (through a flag it polls after its
                    // sleep) that the processor parked while the call blocked.
                    let watcher = std::thread::spawn(move || {
                        until_parked_after_blocked(&handle);
                        parked_tx.send(()).unwrap();
                    });
                    // Blocked in the kernel until the sleeper's timer fires
                    // and it sends: only the timer can wake the processor.
                    let blocked = ferry::spawn(move || ferry::blocking(|| rx.recv().unwrap()));
                    let sleeper = ferry::spawn(move || {
                        let mut naps = 0u32;
                        loop {
                            ferry::sleep(Duration::from_millis(5));
                            naps += 1;
                            if parked_rx.try_recv().is_ok() {
                                break;
                            }
                        }
                        tx.send(naps).unwrap();
                    });
                    sleeper.join().unwrap();
                    assert!(blocked.join().unwrap() >= 1);
                    watcher.join().unwrap();
                    let stats = Handle::current().upcall_stats();
                    assert!(stats.blocked.count >= 1, "{stats:?}");
                })
                .unwrap();
        },
    );
}
