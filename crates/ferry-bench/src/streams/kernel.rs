//! The kernel's side of `streams`: a Linux pipe (`pipe2(2)`, then
//! `write(2)` and `read(2)`), a Unix socket pair (`socketpair(2)`,
//! `SOCK_STREAM`: `write(2)` and `recv(2)`), `open("/dev/null")` +
//! `close(2)` as 002's program 6 does, the two-thread flow over a pipe
//! between two kernel threads pinned to two cores, and a ping-pong of one
//! byte over two pipes between two kernel threads.
//!
//! This module owns opening the kernel's objects and the kernel threads
//! of the flow; the loops are [`super::harness`]'s, the same ones the
//! ferry side runs.

use std::os::unix::net::UnixStream;

use super::harness::{self, Budget, Flow, Timed};
use crate::affinity;
use crate::report::Error;

/// One thread writes then reads back `size` bytes through a pipe.
///
/// # Errors
/// If the pipe cannot be made, or as [`harness::rw`].
pub fn rw_pipe(size: usize, budget: Budget) -> Result<Timed, Error> {
    let (r, w) = std::io::pipe().map_err(|e| Error(format!("pipe: {e}")))?;
    harness::rw(w, r, size, budget)
}

/// One thread writes then reads back `size` bytes through a connected
/// pair of Unix stream sockets (written at one end, read at the other).
///
/// # Errors
/// If the pair cannot be made, or as [`harness::rw`].
pub fn rw_socket(size: usize, budget: Budget) -> Result<Timed, Error> {
    let (a, b) = UnixStream::pair().map_err(|e| Error(format!("socketpair: {e}")))?;
    harness::rw(a, b, size, budget)
}

/// ns per `open("/dev/null", O_RDONLY)` + `close`.
///
/// # Errors
/// If either call fails.
pub fn open_close(budget: Budget) -> Result<Timed, Error> {
    harness::timed(budget, || {
        // SAFETY: the path is a NUL-terminated static string; open reads
        // it and keeps nothing.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error(format!(
                "open /dev/null: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: `fd` was just opened here and is owned by nothing else.
        if unsafe { libc::close(fd) } != 0 {
            return Err(Error(format!("close: {}", std::io::Error::last_os_error())));
        }
        Ok(())
    })
}

/// The flow through a pipe: a producer kernel thread on `cpus.0` writes
/// `total` bytes in writes of `chunk`, the calling side's consumer thread
/// on `cpus.1` reads them; the consumer's view, and the producer's CPU.
///
/// # Errors
/// If the pipe cannot be made, a thread fails, or bytes go missing.
pub fn flow_pipe(
    total: u64,
    chunk: usize,
    cpus: (Option<usize>, Option<usize>),
) -> Result<(Flow, Option<usize>), Error> {
    let (r, w) = std::io::pipe().map_err(|e| Error(format!("pipe: {e}")))?;
    std::thread::scope(|s| {
        let producer = s.spawn(move || {
            affinity::pin_or_warn(cpus.0, "streams producer");
            harness::produce(w, total, chunk)
        });
        let consumer = s.spawn(move || {
            affinity::pin_or_warn(cpus.1, "streams consumer");
            harness::consume(r, chunk)
        });
        let flow = consumer
            .join()
            .unwrap_or_else(|_| Err(Error("the consumer thread panicked".into())));
        let made = producer
            .join()
            .unwrap_or_else(|_| Err(Error("the producer thread panicked".into())));
        let (flow, cpu) = (flow?, made?);
        if flow.bytes != total {
            return Err(Error(format!(
                "flow: {} bytes read of {total} written",
                flow.bytes
            )));
        }
        Ok((flow, cpu))
    })
}

/// Round trips of one byte between two kernel threads through two pipes
/// (one each way): the pinging thread on `cpus.0`, the echoing one on
/// `cpus.1`. The pinging side's view.
///
/// # Errors
/// If a pipe cannot be made, a side fails, or a byte comes back wrong.
pub fn ping_pong_pipes(
    budget: Budget,
    cpus: (Option<usize>, Option<usize>),
) -> Result<Timed, Error> {
    let (r_there, w_there) = std::io::pipe().map_err(|e| Error(format!("pipe: {e}")))?;
    let (r_back, w_back) = std::io::pipe().map_err(|e| Error(format!("pipe: {e}")))?;
    std::thread::scope(|s| {
        let echo = s.spawn(move || {
            affinity::pin_or_warn(cpus.1, "streams echo");
            harness::echo(r_there, w_back)
        });
        let timed = s
            .spawn(move || {
                affinity::pin_or_warn(cpus.0, "streams ping");
                harness::ping_pong(w_there, r_back, budget)
            })
            .join()
            .unwrap_or_else(|_| Err(Error("the pinging thread panicked".into())));
        echo.join()
            .unwrap_or_else(|_| Err(Error("the echoing thread panicked".into())))?;
        timed
    })
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
    fn every_kernel_system_runs_and_counts() {
        for size in [1, 1024, 4096] {
            assert!(rw_pipe(size, TINY).unwrap().ops > 0);
            assert!(rw_socket(size, TINY).unwrap().ops > 0);
        }
        assert!(open_close(TINY).unwrap().ops > 0);
        let cpus = affinity::two_cores();
        for on in [(cpus.0, cpus.0), cpus] {
            assert!(ping_pong_pipes(TINY, on).unwrap().ops > 0);
        }
        let (flow, _) = flow_pipe(1 << 20, 4096, cpus).unwrap();
        assert_eq!(flow.bytes, 1 << 20);
    }
}
