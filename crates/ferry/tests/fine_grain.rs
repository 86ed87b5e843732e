//! The fine-grain policy's experiment (Synthesis, 002 §4.4), checked by
//! counts: a "device" standing for a 44.1 kHz A/D converter — a plain
//! kernel thread, outside ferry, that puts each sample number into a small
//! lock-free buffer at its due time (every 22.7 µs, a few at a wakeup of
//! an absolute-clock loop) and wakes the ferry thread that reads it; a
//! sample that does not fit is dropped and counted — feeds a ferry
//! pipeline (device reader -> stream -> filter -> stream -> consumer)
//! while CPU-bound ferry threads compete for the same two processors. With
//! the fine-grain policy no sample is dropped over three seconds, and the
//! consumer gets every sample once, in order.
//!
//! The buffer holds 16,384 samples (372 ms of the device's output). Under
//! the default policy the reader, woken off the processors into the
//! injector, waits behind the competing threads' 10 ms slices (the
//! injector goes before the rings only every 61st pick): the same run
//! with that policy dropped three quarters of its samples with half this
//! buffer, and `ferry-bench streams` measures both policies (99.4% of the
//! samples dropped with a 64-sample buffer, against 15%). Under the
//! fine-grain policy the competing threads get 200 µs quanta and a woken
//! thread goes before them, so on a quiet machine the buffer holds a few
//! ms of samples at most; the rest of it is for what the kernel does to
//! the processors' kernel threads when other processes load both cores: a
//! processor's kernel thread the kernel keeps off its core holds the
//! thread it runs (or is about to run) with it, and no policy can move
//! that thread. With six CPU-bound processes of another session on the
//! two cores, the longest the reader went without running was 160 ms.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use ferry::SchedPolicy;
use rustix::thread::{ClockId, Timespec, clock_nanosleep_absolute};

/// The device's sample period: 1 / 44.1 kHz, in nanoseconds.
const PERIOD_NS: u64 = 1_000_000_000 / 44_100;

/// Samples in a run: three seconds of the device's output.
const SAMPLES: u64 = 3 * 44_100;

/// Samples the device puts per wakeup (181 µs of them): one wakeup per
/// sample, at 44.1 kHz, took two thirds of a core of a 2-core VM (timer
/// wakeups are expensive there), which a real converter's FIFO saves.
const SAMPLES_PER_WAKE: u64 = 8;

/// The device buffer, in samples.
const DEVICE_BUFFER: usize = 16384;

/// CPU-bound threads competing with the pipeline.
const HOGS: usize = 4;

/// What one run counted (all of it shown in a failure's message).
#[derive(Debug)]
#[allow(dead_code)] // some fields are only shown
struct Outcome {
    produced: u64,
    dropped: u64,
    received: u64,
    out_of_order: u64,
    /// The most samples the device buffer held at once.
    max_backlog: usize,
    /// How late the device itself ran at worst, in µs.
    device_late_us: u64,
    /// Whether the device ran at the highest nice level.
    raised: bool,
}

/// The monotonic clock, in nanoseconds.
fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_MONOTONIC exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The device's buffer: a lock-free SP-SC ring (a push never waits, as a
/// device's never does).
type Buffer = ferry_queue::spsc::Producer<u64, ferry_queue::wait::Spin>;

/// The device: sample `i` is due `(i + 1) * PERIOD_NS` after the start.
/// It wakes on the absolute monotonic clock once per
/// [`SAMPLES_PER_WAKE`] samples (as a converter's FIFO interrupts), puts
/// every sample due by then into `buffer` (dropping, and counting, one
/// that does not fit) and wakes `reader`. A late wakeup puts every sample
/// due since. At the end it raises `done` and wakes the reader once more.
/// Returns the samples dropped, the most the buffer held, and how late
/// the device itself ran at worst (in µs).
fn device(buffer: Buffer, reader: ferry::Thread, done: &AtomicBool) -> (u64, usize, u64) {
    let (mut dropped, mut max_backlog, mut late_ns) = (0, 0, 0);
    let start = now_ns();
    let mut i = 0;
    while i < SAMPLES {
        let wake = start + (i + SAMPLES_PER_WAKE).min(SAMPLES) * PERIOD_NS;
        let at = Timespec {
            tv_sec: (wake / 1_000_000_000) as i64,
            tv_nsec: (wake % 1_000_000_000) as i64,
        };
        while clock_nanosleep_absolute(ClockId::Monotonic, &at).is_err() {}
        let now = now_ns();
        late_ns = late_ns.max(now.saturating_sub(wake));
        let due = ((now - start) / PERIOD_NS).min(SAMPLES);
        while i < due {
            if buffer.try_push(i).is_err() {
                dropped += 1;
            }
            i += 1;
        }
        max_backlog = max_backlog.max(buffer.len());
        reader.unpark();
    }
    done.store(true, Release);
    reader.unpark();
    (dropped, max_backlog, late_ns / 1000)
}

/// Raises the calling kernel thread's priority to the highest nice level,
/// as a device's interrupt goes before the threads: a busy machine then
/// delays the device's samples by little, and what is measured is how
/// promptly ferry runs their reader. Whether it could (it needs the
/// privilege). Not a real-time class: a wakeup may take the runtime's
/// injector lock, whose holder may share the device's core.
fn as_a_device() -> bool {
    // SAFETY: `gettid` has no preconditions; `setpriority` on the calling
    // thread's own id.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) == 0
    }
}

/// One run of the experiment with `policy` on two processors: the device
/// is a kernel thread of the test's, made outside the runtime (so on no
/// processor's core), started once the pipeline and the hogs are there.
fn experiment(policy: SchedPolicy) -> Outcome {
    let (buffer, samples) =
        ferry_queue::spsc::channel_with::<u64, ferry_queue::wait::Spin>(DEVICE_BUFFER);
    let (go, started) = std::sync::mpsc::channel::<ferry::Thread>();
    let done = Arc::new(AtomicBool::new(false));
    let end = Arc::clone(&done);
    let dev = std::thread::spawn(move || {
        let raised = as_a_device();
        let reader = started.recv().unwrap();
        (device(buffer, reader, &end), raised)
    });
    let (received, out_of_order) = ferry::Runtime::builder()
        .processors(2)
        .policy(policy)
        .run(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let hogs: Vec<_> = (0..HOGS)
                .map(|_| {
                    let stop = Arc::clone(&stop);
                    ferry::spawn(move || {
                        let mut x = 0u64;
                        while !stop.load(Relaxed) {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                        x
                    })
                })
                .collect();

            let (mut w1, r1) = ferry::stream::pipe();
            let (w2, mut r2) = ferry::stream::pipe();
            let reader = ferry::spawn(move || {
                // Everything the buffer holds at each wakeup, in one write;
                // parks until the device puts more (its unpark after a push
                // leaves a token if the reader was still draining).
                let mut out = Vec::with_capacity(DEVICE_BUFFER * 8);
                loop {
                    let end = done.load(Acquire);
                    out.clear();
                    while let Some(s) = samples.try_pop() {
                        out.extend_from_slice(&s.to_le_bytes());
                    }
                    if !out.is_empty() {
                        w1.write_all(&out).unwrap();
                    }
                    // `done` was set after the device's last push and read
                    // before these pops, so they took every sample left:
                    // nothing will unpark us again.
                    if end {
                        return;
                    }
                    ferry::park();
                }
            });
            let filter = ferry::spawn(move || {
                ferry::stream::filter(std::io::BufReader::new(r1), w2, |chunk, out| {
                    out.extend_from_slice(chunk)
                })
                .unwrap()
            });
            let consumer = ferry::spawn(move || {
                let (mut received, mut out_of_order) = (0u64, 0u64);
                let mut sample = [0u8; 8];
                while r2.read_exact(&mut sample).is_ok() {
                    if u64::from_le_bytes(sample) != received {
                        out_of_order += 1;
                    }
                    received += 1;
                }
                (received, out_of_order)
            });
            go.send(reader.thread().clone()).unwrap();

            // The device's end: the reader, then each stage, sees the end
            // in turn.
            reader.join().unwrap();
            filter.join().unwrap();
            let counts = consumer.join().unwrap();
            stop.store(true, Relaxed);
            for h in hogs {
                h.join().unwrap();
            }
            counts
        })
        .unwrap();
    let ((dropped, max_backlog, device_late_us), raised) = dev.join().unwrap();
    Outcome {
        produced: SAMPLES,
        dropped,
        received,
        out_of_order,
        max_backlog,
        device_late_us,
        raised,
    }
}

#[test]
fn with_the_fine_grain_policy_no_sample_is_dropped_beside_cpu_bound_threads() {
    let o = common::within(common::WATCHDOG, "the fine-grain experiment", || {
        experiment(SchedPolicy::FineGrain)
    });
    eprintln!("fine-grain: {o:?} (buffer {DEVICE_BUFFER})");
    assert_eq!(o.dropped, 0, "{o:?}");
    assert_eq!(o.received, o.produced, "{o:?}");
    assert_eq!(o.out_of_order, 0, "{o:?}");
    assert!(o.max_backlog <= DEVICE_BUFFER);
}
