//! A thread's run time (`ferry::thread::cpu_time`) under every way a turn
//! on a processor ends: a park woken from outside the runtime, a yield, an
//! announced blocking call (`ferry::blocking`) whose processor a spare may
//! take, a kernel sleep the runtime was not told of (the monitor finds it
//! and a spare takes the processor), and a timed sleep. Whatever happens,
//! a thread's own reading never goes back, and never grows by more than
//! the wall-clock time between two readings (each turn counted once).

use std::time::{Duration, Instant};

mod common;
use common::{WATCHDOG, within};

/// One step of a thread's loop, chosen in turn.
fn step(op: u64) {
    match op {
        0 => {
            let (tx, rx) = ferry::sync::channel(1);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(100));
                let _ = tx.send(1u32);
            });
            rx.recv().unwrap();
        }
        1 => ferry::blocking(|| std::thread::sleep(Duration::from_micros(200))),
        // Unannounced: the runtime finds the kernel thread asleep.
        2 => std::thread::sleep(Duration::from_micros(300)),
        3 => ferry::yield_now(),
        4 => {
            let start = Instant::now();
            while start.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
        }
        _ => ferry::thread::sleep(Duration::from_micros(150)),
    }
}

#[test]
fn run_time_never_goes_back_nor_outgrows_the_wall_clock() {
    steps_keep_run_time_honest(None);
}

/// The same with a time slice: preemption ends turns too, and its signal
/// interrupts the kernel sleeps the runtime was not told of. (Run beside
/// the test above, two runtimes share the process's two cores.)
#[test]
fn run_time_never_goes_back_nor_outgrows_the_wall_clock_under_preemption() {
    steps_keep_run_time_honest(Some(Duration::from_micros(200)));
}

/// Six threads on two processors take the steps of [`step`] in turn for
/// 1.5 s, checking each step's growth of their run time.
fn steps_keep_run_time_honest(slice: Option<Duration>) {
    let run_for = Duration::from_millis(1500);
    within(WATCHDOG, "six threads stepping for 1.5 s", move || {
        ferry::Runtime::builder()
            .processors(2)
            .time_slice(slice)
            .thread_cpu_time(true)
            .run(move || {
                let end = Instant::now() + run_for;
                let threads: Vec<_> = (0..6u64)
                    .map(|k| {
                        ferry::spawn(move || {
                            let mut steps = 0u64;
                            while Instant::now() < end {
                                let op = (steps + k) % 6;
                                steps += 1;
                                // Wall clock outside, run time inside: the run
                                // time between the two readings is a part of
                                // the wall time between them.
                                let t0 = Instant::now();
                                let c0 = ferry::thread::cpu_time().unwrap();
                                step(op);
                                let c1 = ferry::thread::cpu_time().unwrap();
                                let wall = t0.elapsed();
                                assert!(
                                    c1 >= c0,
                                    "step {op}: run time went back from {c0:?} to {c1:?}"
                                );
                                // (The counter's rate is calibrated once: allow
                                // a hundredth of error in it, and a microsecond.)
                                let bound = wall + wall / 100 + Duration::from_micros(1);
                                assert!(
                                    c1 - c0 <= bound,
                                    "step {op}: run time grew {:?} in {wall:?}",
                                    c1 - c0
                                );
                            }
                            steps
                        })
                    })
                    .collect();
                for t in threads {
                    assert!(t.join().unwrap() > 0);
                }
            })
            .unwrap();
    });
}
