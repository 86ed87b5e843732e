//! ferry's side of `streams`: an in-process `ferry::stream` inside a
//! ferry runtime, run through the same loops as the kernel's pipe and
//! socket ([`super::harness`]).
//!
//! | measurement | runtime | stream |
//! |-------------|---------|--------|
//! | `rw N` | one processor, pinned to the first core (`processor_on`) | `stream::Builder::new().capacity(CAPACITY).pipe()`, one writer and one reader, on the runtime's first thread |
//! | `open/close` | the same | `stream::pipe()`, both ends dropped |
//! | ping-pong | one processor pinned to the first core, or two processors as the flow's | two streams, one each way; the pinging side the first thread, the echoing side a spawned ferry thread |
//! | flow | two processors, on the first two CPUs of the process's mask (the runtime's default) | as `rw`; the producer a spawned ferry thread, the consumer the first thread; blocking reads and writes, or ([`Spinning`]) `try_read`/`try_write` with `ferry::yield_now` while they would block |
//!
//! This module owns making those runtimes and streams; it times nothing
//! itself.

use std::hint::black_box;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferry::stream;

use super::harness::{self, Budget, Flow, Timed};
use crate::report::Error;

/// The bytes a benchmark stream holds: a Linux pipe's default (16 pages).
pub const CAPACITY: usize = 64 * 1024;

/// Runs `f` as the first thread of a runtime of one processor, pinned to
/// `core` where that is known.
fn on_one_processor<T: Send + 'static>(
    core: Option<usize>,
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            if let Some(core) = core {
                ferry::Handle::current()
                    .processor_on(0, core)
                    .map_err(|e| Error(format!("processor 0 on core {core}: {e}")))?;
                // The pin takes effect at the processor's next pass through
                // its scheduler loop: before the clock starts.
                ferry::yield_now();
            }
            f()
        })
        .map_err(|e| Error(format!("cannot start a ferry runtime: {e}")))?
}

/// A stream of [`CAPACITY`] bytes.
fn stream() -> (stream::Writer, stream::Reader) {
    stream::Builder::new().capacity(CAPACITY).pipe()
}

/// One ferry thread writes then reads back `size` bytes through a stream.
///
/// # Errors
/// If the runtime cannot start, or as [`harness::rw`].
pub fn rw(size: usize, budget: Budget, core: Option<usize>) -> Result<Timed, Error> {
    on_one_processor(core, move || {
        let (w, r) = stream();
        harness::rw(w, r, size, budget)
    })
}

/// ns per `stream::pipe()` with both ends dropped.
///
/// # Errors
/// If the runtime cannot start.
pub fn open_close(budget: Budget, core: Option<usize>) -> Result<Timed, Error> {
    on_one_processor(core, move || {
        harness::timed(budget, || {
            let (w, r) = black_box(stream::pipe());
            drop(w);
            drop(r);
            Ok(())
        })
    })
}

/// How long the flow's consumer holds its processor waiting for the other
/// processor to start the producer, before it goes on regardless.
const START_LIMIT: Duration = Duration::from_millis(100);

/// One end of a stream that never parks its thread: `try_write` or
/// `try_read`, and `ferry::yield_now` while they would block, so that
/// neither side of the flow leaves its processor idle and both stay where
/// they are.
pub struct Spinning<T>(T);

impl Write for Spinning<stream::Writer> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.0.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ferry::yield_now(),
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Read for Spinning<stream::Reader> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ferry::yield_now(),
                other => return other,
            }
        }
    }
}

/// The flow through a stream between two ferry threads on a runtime of
/// two processors, which the runtime pins to the first two CPUs of the
/// process's mask (`affinity::two_cores`), with blocking calls or, if
/// `spin`, with [`Spinning`] ends: the consumer's view, and the CPU the
/// producer was seen on most.
///
/// # Errors
/// If the runtime cannot start, a thread fails, or bytes go missing.
pub fn flow(total: u64, chunk: usize, spin: bool) -> Result<(Flow, Option<usize>), Error> {
    let run = ferry::Runtime::builder().processors(2).run(move || {
        let (w, r) = stream();
        let started = Arc::new(AtomicBool::new(false));
        let up = Arc::clone(&started);
        let producer = ferry::spawn(move || {
            up.store(true, Ordering::Release);
            if spin {
                harness::produce(Spinning(w), total, chunk)
            } else {
                harness::produce(w, total, chunk)
            }
        });
        // Hold this processor until the other one has taken the producer,
        // so that the two start on two processors.
        let deadline = Instant::now() + START_LIMIT;
        while !started.load(Ordering::Acquire) && Instant::now() < deadline {
            std::hint::spin_loop();
        }
        let flow = if spin {
            harness::consume(Spinning(r), chunk)
        } else {
            harness::consume(r, chunk)
        };
        let made = producer
            .join()
            .map_err(|p| Error(format!("the producer thread panicked: {p}")))?;
        let (flow, cpu) = (flow?, made?);
        if flow.bytes != total {
            return Err(Error(format!(
                "flow: {} bytes read of {total} written",
                flow.bytes
            )));
        }
        Ok((flow, cpu))
    });
    run.map_err(|e| Error(format!("cannot start a ferry runtime: {e}")))?
}

/// Round trips of one byte between two ferry threads through two
/// streams (one each way): on a runtime of one processor pinned to
/// `core`, or (`two`) of two processors, the runtime's default placement,
/// with the first thread holding its processor until the other one has
/// taken the echoing thread. The pinging side's view.
///
/// # Errors
/// If the runtime cannot start, a side fails, or a byte comes back wrong.
pub fn ping_pong(two: bool, budget: Budget, core: Option<usize>) -> Result<Timed, Error> {
    let body = move || {
        let (w_there, r_there) = stream();
        let (w_back, r_back) = stream();
        let started = Arc::new(AtomicBool::new(false));
        let up = Arc::clone(&started);
        let echo = ferry::spawn(move || {
            up.store(true, Ordering::Release);
            harness::echo(r_there, w_back)
        });
        if two {
            let deadline = Instant::now() + START_LIMIT;
            while !started.load(Ordering::Acquire) && Instant::now() < deadline {
                std::hint::spin_loop();
            }
        }
        let timed = harness::ping_pong(w_there, r_back, budget);
        // The ends moved into `ping_pong` are dropped: the echo sees
        // end-of-file.
        let echoed = echo
            .join()
            .map_err(|p| Error(format!("the echoing thread panicked: {p}")))?;
        echoed?;
        timed
    };
    if two {
        ferry::Runtime::builder()
            .processors(2)
            .run(body)
            .map_err(|e| Error(format!("cannot start a ferry runtime: {e}")))?
    } else {
        on_one_processor(core, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TINY: Budget = Budget {
        warmup: Duration::ZERO,
        timed: Duration::from_millis(1),
    };

    #[test]
    fn every_ferry_measurement_runs_and_counts() {
        let core = crate::affinity::first_allowed();
        for size in [1, 1024, 4096] {
            assert!(rw(size, TINY, core).unwrap().ops > 0);
        }
        assert!(open_close(TINY, core).unwrap().ops > 0);
        for two in [false, true] {
            assert!(ping_pong(two, TINY, core).unwrap().ops > 0);
        }
        for spin in [false, true] {
            let (flow, _) = flow(1 << 20, 4096, spin).unwrap();
            assert_eq!(flow.bytes, 1 << 20);
        }
    }
}
