//! The loops every system of `streams` runs, written once over
//! `std::io::{Read, Write}` so that a ferry stream, a pipe and a socket
//! run the very same code: [`rw`] (002 Table 1 programs 2-4: one thread
//! writes `size` bytes and reads them back), [`timed`] (an operation
//! repeated for a time budget, for open/close), [`produce`] /
//! [`consume`] (the two-thread flow) and [`ping_pong`] / [`echo`] (one
//! byte there and back between two threads).
//!
//! This module owns the loops, their checks and their clocks; it opens no
//! stream, pipe or socket (that is [`super::kernel`]'s and
//! [`super::ferry`]'s) and prints nothing.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::report::Error;

/// Operations between two looks at the clock.
const BATCH: u64 = 256;

/// How long one run warms up and then times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Untimed, before the clock starts.
    pub warmup: Duration,
    /// Timed: batches are run until this much has passed.
    pub timed: Duration,
}

/// What one timed run found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Mean ns per operation.
    pub ns_per_op: f64,
    /// Operations timed.
    pub ops: u64,
}

/// Repeats `op` for `budget.warmup` untimed, then in batches until
/// `budget.timed` has passed; the mean ns per `op`.
///
/// # Errors
/// The first error `op` returns.
pub fn timed(budget: Budget, mut op: impl FnMut() -> Result<(), Error>) -> Result<Timed, Error> {
    let mut run_for = |d: Duration| -> Result<(u64, Duration), Error> {
        let start = Instant::now();
        let mut ops = 0;
        loop {
            for _ in 0..BATCH {
                op()?;
            }
            ops += BATCH;
            let elapsed = start.elapsed();
            if elapsed >= d {
                return Ok((ops, elapsed));
            }
        }
    };
    run_for(budget.warmup)?;
    let (ops, elapsed) = run_for(budget.timed)?;
    Ok(Timed {
        ns_per_op: elapsed.as_nanos() as f64 / ops as f64,
        ops,
    })
}

/// One thread writes `size` bytes to `w` and reads them back from `r`,
/// repeated for the budget: the mean ns per write+read. Each write's
/// first byte is the iteration's number, checked when read back; a short
/// write or read is completed by further calls (none happen with the
/// capacities used here), and end-of-file or a wrong byte is an error.
///
/// # Errors
/// An I/O error, end-of-file, or a byte that is not the one written.
pub fn rw<W: Write, R: Read>(
    mut w: W,
    mut r: R,
    size: usize,
    budget: Budget,
) -> Result<Timed, Error> {
    if size == 0 {
        return Err(Error("rw: a size of 0 bytes moves nothing".into()));
    }
    let mut out = vec![0u8; size];
    let mut back = vec![0u8; size];
    let mut tag = 0u8;
    timed(budget, || {
        tag = tag.wrapping_add(1);
        out[0] = tag;
        write_all(&mut w, &out)?;
        read_exact(&mut r, &mut back)?;
        if back[0] != tag {
            return Err(Error(format!(
                "rw {size}: read back byte {} where {tag} was written",
                back[0]
            )));
        }
        Ok(())
    })
}

/// One side of a ping-pong: writes one byte to `w`, waits for it to come
/// back on `r` (echoed by [`echo`] on another thread), repeated for the
/// budget: the mean ns per round trip. Each byte is the round's number,
/// checked when it comes back.
///
/// # Errors
/// An I/O error, end-of-file, or a byte that is not the one sent.
pub fn ping_pong<W: Write, R: Read>(mut w: W, mut r: R, budget: Budget) -> Result<Timed, Error> {
    let mut tag = 0u8;
    timed(budget, || {
        tag = tag.wrapping_add(1);
        write_all(&mut w, &[tag])?;
        let mut back = [0u8];
        read_exact(&mut r, &mut back)?;
        if back[0] != tag {
            return Err(Error(format!(
                "ping-pong: byte {} came back where {tag} was sent",
                back[0]
            )));
        }
        Ok(())
    })
}

/// The other side of [`ping_pong`]: writes back to `w` every byte read
/// from `r`, one at a time, until end-of-file; how many it echoed.
///
/// # Errors
/// An I/O error.
pub fn echo<R: Read, W: Write>(mut r: R, mut w: W) -> Result<u64, Error> {
    let mut n = 0;
    let mut b = [0u8];
    loop {
        match r.read(&mut b) {
            Ok(0) => return Ok(n),
            Ok(_) => {
                write_all(&mut w, &b)?;
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error(format!("echo read: {e}"))),
        }
    }
}

/// `Write::write` until all of `buf` is written.
fn write_all<W: Write>(w: &mut W, mut buf: &[u8]) -> Result<(), Error> {
    while !buf.is_empty() {
        match w.write(buf) {
            Ok(0) => return Err(Error("write: wrote 0 bytes".into())),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error(format!("write: {e}"))),
        }
    }
    Ok(())
}

/// `Read::read` until `buf` is full.
fn read_exact<R: Read>(r: &mut R, mut buf: &mut [u8]) -> Result<(), Error> {
    while !buf.is_empty() {
        match r.read(buf) {
            Ok(0) => return Err(Error("read: end of file".into())),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error(format!("read: {e}"))),
        }
    }
    Ok(())
}

/// Calls between two looks at which CPU a side of the flow is on.
const CPU_EVERY: u32 = 16;

/// Which CPUs one side of the flow was seen on, and how often.
#[derive(Debug, Clone, Default)]
pub struct CpuTally {
    seen: Vec<(usize, u32)>,
    calls: u32,
}

impl CpuTally {
    /// Counts one call; every [`CPU_EVERY`]th (and the first) looks at
    /// the CPU.
    pub fn call(&mut self) {
        if self.calls.is_multiple_of(CPU_EVERY) {
            self.look();
        }
        self.calls = self.calls.wrapping_add(1);
    }

    /// Looks at the CPU now.
    fn look(&mut self) {
        let Some(cpu) = current_cpu() else { return };
        match self.seen.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, n)) => *n += 1,
            None => self.seen.push((cpu, 1)),
        }
    }

    /// The CPU seen most often, if any was seen.
    pub fn most(&self) -> Option<usize> {
        self.seen.iter().max_by_key(|(_, n)| *n).map(|(c, _)| *c)
    }
}

/// The producer of the flow: writes `total` bytes in writes of `chunk`,
/// then drops `w` (the consumer's end-of-file); returns the CPU it was
/// seen on most.
///
/// # Errors
/// A failed write.
pub fn produce<W: Write>(mut w: W, total: u64, chunk: usize) -> Result<Option<usize>, Error> {
    let buf = vec![0x5a_u8; chunk];
    let mut cpus = CpuTally::default();
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk as u64) as usize;
        write_all(&mut w, &buf[..n])?;
        cpus.call();
        left -= n as u64;
    }
    drop(w);
    Ok(cpus.most())
}

/// What the consumer of one flow saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flow {
    /// Bytes read in all.
    pub bytes: u64,
    /// Bytes read after the clock started (all but the first read's).
    pub timed_bytes: u64,
    /// From the end of the first read to end-of-file.
    pub elapsed: Duration,
    /// The CPU the consumer was seen on most.
    pub cpu: Option<usize>,
}

impl Flow {
    /// 10^6 bytes per second over the timed part.
    pub fn mb_per_s(&self) -> f64 {
        self.timed_bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// The consumer of the flow: reads in reads of up to `chunk` until
/// end-of-file. The clock starts when the first read returns, so neither
/// side's start-up is timed.
///
/// # Errors
/// A failed read, or end-of-file before any byte.
pub fn consume<R: Read>(mut r: R, chunk: usize) -> Result<Flow, Error> {
    let mut buf = vec![0u8; chunk];
    let read = |r: &mut R, buf: &mut [u8]| loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other.map_err(|e| Error(format!("read: {e}"))),
        }
    };
    let first = read(&mut r, &mut buf)?;
    if first == 0 {
        return Err(Error("flow: end of file before any byte".into()));
    }
    let start = Instant::now();
    let mut cpus = CpuTally::default();
    let mut timed_bytes = 0u64;
    loop {
        match read(&mut r, &mut buf)? {
            0 => break,
            n => timed_bytes += n as u64,
        }
        cpus.call();
    }
    Ok(Flow {
        bytes: first as u64 + timed_bytes,
        timed_bytes,
        elapsed: start.elapsed(),
        cpu: cpus.most(),
    })
}

/// The CPU the calling kernel thread is on, if the kernel says.
fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A loopback of bytes that hands out at most `step` per call: short
    /// reads and writes.
    #[derive(Clone)]
    struct Trickle {
        q: std::rc::Rc<std::cell::RefCell<VecDeque<u8>>>,
        step: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.step);
            self.q.borrow_mut().extend(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut q = self.q.borrow_mut();
            let n = buf.len().min(self.step).min(q.len());
            for b in &mut buf[..n] {
                *b = q.pop_front().unwrap_or_default();
            }
            Ok(n)
        }
    }

    const TINY: Budget = Budget {
        warmup: Duration::ZERO,
        timed: Duration::ZERO,
    };

    #[test]
    fn rw_completes_short_calls_and_times_whole_batches() {
        let t = Trickle {
            q: Default::default(),
            step: 3,
        };
        let timed = rw(t.clone(), t.clone(), 10, TINY).unwrap();
        assert_eq!(timed.ops, BATCH);
        assert!(timed.ns_per_op > 0.0);
        assert!(t.q.borrow().is_empty(), "every byte written was read back");
        assert!(rw(t.clone(), t, 0, TINY).is_err());
    }

    #[test]
    fn rw_fails_on_a_wrong_byte_and_on_end_of_file() {
        // Reads come from a different queue than writes go to.
        let w = Trickle {
            q: Default::default(),
            step: 64,
        };
        let r = Trickle {
            q: Default::default(),
            step: 64,
        };
        r.q.borrow_mut().extend([7u8; 4]);
        let e = rw(w.clone(), r.clone(), 4, TINY).unwrap_err();
        assert!(e.0.contains("read back byte 7 where 1"), "{e}");
        let e = rw(w, r, 4, TINY).unwrap_err();
        assert!(e.0.contains("end of file"), "{e}");
    }

    #[test]
    fn a_flow_counts_every_byte_and_times_all_but_the_first_read() {
        let (r, w) = std::io::pipe().unwrap();
        let producer = std::thread::spawn(move || produce(w, 100_000, 4096));
        let flow = consume(r, 4096).unwrap();
        producer.join().unwrap().unwrap();
        assert_eq!(flow.bytes, 100_000);
        assert!(flow.timed_bytes < flow.bytes);
        assert!(flow.mb_per_s() > 0.0);
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        assert!(consume(r, 16).is_err(), "end of file before any byte");
    }

    #[test]
    fn the_tally_names_the_cpu_seen_most() {
        let mut t = CpuTally::default();
        assert_eq!(t.most(), None);
        t.seen = vec![(3, 2), (1, 5), (0, 4)];
        assert_eq!(t.most(), Some(1));
        let mut t = CpuTally::default();
        for _ in 0..CPU_EVERY + 1 {
            t.call();
        }
        assert_eq!(
            t.seen.iter().map(|(_, n)| n).sum::<u32>(),
            2,
            "the first and the 17th"
        );
        assert!(t.most().is_some());
    }

    #[test]
    fn timed_stops_at_the_first_error() {
        let mut n = 0;
        let e = timed(TINY, || {
            n += 1;
            if n == 10 {
                Err(Error("tenth".into()))
            } else {
                Ok(())
            }
        });
        assert_eq!(e, Err(Error("tenth".into())));
    }
}
