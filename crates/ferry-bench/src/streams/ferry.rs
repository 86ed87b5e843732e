//! ferry's side of `streams`: an in-process `ferry::stream` inside a
//! ferry runtime, run through the same loops as the kernel's pipe and
//! socket ([`super::harness`]).
//!
//! | measurement | runtime | stream |
//! |-------------|---------|--------|
//! | `rw N` | one processor, pinned to the first core (`processor_on`) | `stream::Builder::new().capacity(CAPACITY).pipe()`, one writer and one reader, on the runtime's first thread |
//! | `open/close` | the same | `stream::pipe()`, both ends dropped |
//! | flow | two processors, on the first two CPUs of the process's mask (the runtime's default) | as `rw`; the producer a spawned ferry thread, the consumer the first thread |
//!
//! This module owns making those runtimes and streams; it times nothing
//! itself.

use std::hint::black_box;

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

/// The flow through a stream between two ferry threads on a runtime of
/// two processors, which the runtime pins to the first two CPUs of the
/// process's mask (`affinity::two_cores`): the consumer's view, and the
/// producer's CPU.
///
/// # Errors
/// If the runtime cannot start, a thread fails, or bytes go missing.
pub fn flow(total: u64, chunk: usize) -> Result<(Flow, Option<usize>), Error> {
    let run = ferry::Runtime::builder().processors(2).run(move || {
        let (w, r) = stream();
        let producer = ferry::spawn(move || harness::produce(w, total, chunk));
        let flow = harness::consume(r, chunk);
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
        let (flow, _) = flow(1 << 20, 4096).unwrap();
        assert_eq!(flow.bytes, 1 << 20);
    }
}
