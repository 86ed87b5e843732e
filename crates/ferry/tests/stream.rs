//! `ferry::stream`: bytes in order, none lost or doubled, with one and
//! several writers and readers (1x1, Nx1, 1xN, NxN), on one processor and
//! on two, with a clone switching a stream's path during traffic; a pipe's
//! end-of-file and `BrokenPipe`; threads terminated while they wait; the
//! cooked-tty pipeline of 002 §5; and random write and read sizes against
//! a checker. Run also with `FERRY_TIME_SLICE=500us`.
//!
//! Every test runs under a watchdog: a lost wakeup shows up as a failure
//! naming the test, not as a hung test binary.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, ErrorKind, Read, Write};

use ferry::Runtime;
use ferry::stream::{self, ATOMIC_WRITE, Builder, CapacityError, MAX_CAPACITY, Reader, Writer};
use proptest::prelude::*;

mod common;
use common::WATCHDOG;

/// Runs `f` on a runtime of 1 processor, then of 2, each under the watchdog.
fn on_one_and_two(what: &str, f: impl Fn() + Send + Sync + Clone + 'static) {
    for n in [1, 2] {
        let f = f.clone();
        common::within(
            WATCHDOG,
            &format!("{what} on {n} processor(s)"),
            move || {
                Runtime::builder().processors(n).run(f).unwrap();
            },
        );
    }
}

/// A record of 8 bytes: which writer, and its sequence number. Streams
/// whose capacity is a multiple of 8, written only in whole records and
/// read with 8-byte buffers, move whole records (a read returns
/// `min(there, asked)`, and what is there is always whole records).
fn record(w: u32, seq: u32) -> [u8; 8] {
    let mut r = [0; 8];
    r[..4].copy_from_slice(&w.to_le_bytes());
    r[4..].copy_from_slice(&seq.to_le_bytes());
    r
}

fn parse(r: [u8; 8]) -> (u32, u32) {
    (
        u32::from_le_bytes(r[..4].try_into().unwrap()),
        u32::from_le_bytes(r[4..].try_into().unwrap()),
    )
}

/// Writes `count` records of writer `w`.
fn write_records(mut out: Writer, w: u32, count: u32) {
    for seq in 0..count {
        out.write_all(&record(w, seq)).unwrap();
    }
}

/// Reads 8-byte records until end-of-file; each read must return a whole
/// record.
fn read_records(mut r: Reader) -> Vec<(u32, u32)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8];
    loop {
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            return got;
        }
        assert_eq!(n, 8, "a read split a record");
        got.push(parse(buf));
    }
}

/// Every reader's records are in order per writer, and together they are
/// every record of every writer exactly once.
fn check_records(per_reader: &[Vec<(u32, u32)>], writers: u32, count: u32) {
    let mut all = HashSet::new();
    for got in per_reader {
        let mut last: BTreeMap<u32, u32> = BTreeMap::new();
        for &(w, seq) in got {
            assert!(
                w < writers && seq < count,
                "a record never written: {w} {seq}"
            );
            if let Some(&prev) = last.get(&w) {
                assert!(seq > prev, "writer {w}: {seq} read after {prev}");
            }
            last.insert(w, seq);
            assert!(all.insert((w, seq)), "record {w} {seq} read twice");
        }
    }
    assert_eq!(all.len(), (writers * count) as usize, "records lost");
}

/// `writers` writers and `readers` readers, each on a thread of its own,
/// through a small stream (so both sides block often).
fn many_to_many(writers: u32, readers: u32, count: u32) {
    let (w, r) = Builder::new().capacity(64).pipe();
    assert!(!w.is_shared() && !r.is_shared());
    let ws: Vec<_> = (0..writers)
        .map(|i| {
            let w = w.clone();
            ferry::spawn(move || write_records(w, i, count))
        })
        .collect();
    let rs: Vec<_> = (0..readers)
        .map(|_| {
            let r = r.clone();
            ferry::spawn(move || read_records(r))
        })
        .collect();
    assert!(w.is_shared() && r.is_shared());
    drop(w);
    drop(r);
    for h in ws {
        h.join().unwrap();
    }
    let got: Vec<_> = rs.into_iter().map(|h| h.join().unwrap()).collect();
    check_records(&got, writers, count);
}

#[test]
fn one_writer_one_reader_in_order() {
    on_one_and_two("1x1", || {
        let (w, r) = Builder::new().capacity(64).pipe();
        let writer = ferry::spawn(move || write_records(w, 0, 5000));
        let got = read_records(r);
        writer.join().unwrap();
        check_records(&[got], 1, 5000);
    });
}

#[test]
fn many_writers_one_reader() {
    on_one_and_two("Nx1", || {
        let (w, r) = Builder::new().capacity(64).pipe();
        let ws: Vec<_> = (0..4)
            .map(|i| {
                let w = w.clone();
                ferry::spawn(move || write_records(w, i, 2000))
            })
            .collect();
        drop(w);
        let got = read_records(r);
        for h in ws {
            h.join().unwrap();
        }
        check_records(&[got], 4, 2000);
    });
}

#[test]
fn one_writer_many_readers() {
    on_one_and_two("1xN", || many_to_many(1, 4, 5000));
}

#[test]
fn many_writers_many_readers() {
    on_one_and_two("NxN", || many_to_many(3, 3, 3000));
}

#[test]
fn kernel_threads_and_ferry_threads_share_a_stream() {
    common::within(WATCHDOG, "kernel and ferry threads", || {
        let (w, r) = Builder::new().capacity(64).pipe();
        let w2 = w.clone();
        let kernel = std::thread::spawn(move || write_records(w2, 1, 3000));
        let got = Runtime::builder()
            .processors(1)
            .run(move || {
                let ferry_writer = ferry::spawn(move || write_records(w, 0, 3000));
                let got = read_records(r);
                ferry_writer.join().unwrap();
                got
            })
            .unwrap();
        kernel.join().unwrap();
        check_records(&[got], 2, 3000);
    });
}

#[test]
fn a_writer_cloned_during_traffic_switches_path_and_loses_nothing() {
    on_one_and_two("writer clone during traffic", || {
        let (mut w, r) = Builder::new().capacity(64).pipe();
        let reader = ferry::spawn(move || read_records(r));
        for seq in 0..1000 {
            w.write_all(&record(0, seq)).unwrap();
        }
        // Bytes are in flight (the reader is behind): switch now.
        assert!(!w.is_shared());
        let w2 = w.clone();
        assert!(w.is_shared() && w2.is_shared());
        let other = ferry::spawn(move || write_records(w2, 1, 2000));
        for seq in 1000..2000 {
            w.write_all(&record(0, seq)).unwrap();
        }
        drop(w);
        other.join().unwrap();
        check_records(&[reader.join().unwrap()], 2, 2000);
    });
}

#[test]
fn a_reader_cloned_during_traffic_switches_path_and_loses_nothing() {
    on_one_and_two("reader clone during traffic", || {
        let (w, mut r) = Builder::new().capacity(64).pipe();
        let writer = ferry::spawn(move || write_records(w, 0, 6000));
        let mut first = Vec::new();
        let mut buf = [0u8; 8];
        for _ in 0..500 {
            r.read_exact(&mut buf).unwrap();
            first.push(parse(buf));
        }
        assert!(!r.is_shared());
        let r2 = r.clone();
        assert!(r.is_shared() && r2.is_shared());
        let other = ferry::spawn(move || read_records(r2));
        first.extend(read_records(r));
        let second = other.join().unwrap();
        writer.join().unwrap();
        check_records(&[first, second], 1, 6000);
    });
}

/// Streams opened and closed over and over by threads on every processor
/// and by a kernel thread, each stream's ends dropped on two threads at
/// once: a closed stream's memory serves later opens (the shelf of
/// spares), and each new stream carries its own bytes only, then
/// end-of-file, never a byte or an end of an earlier stream.
#[test]
fn streams_opened_and_closed_over_and_over_carry_only_their_own_bytes() {
    const OPENERS: u32 = 4;
    let rounds: u32 = if cfg!(miri) { 3 } else { 2000 };
    /// A thread of either kind, to join.
    enum Helper<T> {
        Ferry(ferry::JoinHandle<T>),
        Kernel(std::thread::JoinHandle<T>),
    }
    impl<T: Send + 'static> Helper<T> {
        fn start(kernel: bool, f: impl FnOnce() -> T + Send + 'static) -> Helper<T> {
            if kernel {
                Helper::Kernel(std::thread::spawn(f))
            } else {
                Helper::Ferry(ferry::spawn(f))
            }
        }
        fn join(self) -> T {
            match self {
                Helper::Ferry(h) => h.join().unwrap(),
                Helper::Kernel(h) => h.join().unwrap(),
            }
        }
    }
    /// `rounds` streams opened by one thread, each read to end-of-file
    /// by a second while the opener writes, and a clone of its writer
    /// dropped by a third (`kernel`: the second and third are kernel
    /// threads).
    fn churn(who: u32, rounds: u32, kernel: bool) {
        for round in 0..rounds {
            // Several capacities the shelf keeps, so that spares of each
            // come back to later opens.
            let capacity = 64 << (round % 3);
            let (mut w, r) = Builder::new().capacity(capacity).pipe();
            let (first, count) = (round * 100, round % 40);
            let w2 = w.clone();
            let reader = Helper::start(kernel, move || read_records(r));
            let dropper = Helper::start(kernel, move || drop(w2));
            for seq in first..first + count {
                w.write_all(&record(who, seq)).unwrap();
            }
            drop(w);
            dropper.join();
            let want: Vec<_> = (first..first + count).map(|seq| (who, seq)).collect();
            assert_eq!(reader.join(), want, "opener {who}, round {round}");
        }
    }
    on_one_and_two("open and close", move || {
        let hs: Vec<_> = (0..OPENERS)
            .map(|who| ferry::spawn(move || churn(who, rounds, false)))
            .collect();
        let kernel = std::thread::spawn(move || churn(OPENERS, rounds / 10, true));
        for h in hs {
            h.join().unwrap();
        }
        kernel.join().unwrap();
    });
}

#[test]
fn end_of_file_once_every_writer_is_gone_and_the_bytes_are_drained() {
    on_one_and_two("eof", || {
        let (mut w, mut r) = stream::pipe();
        let w2 = w.clone();
        w.write_all(b"abc").unwrap();
        drop(w);
        let mut buf = [0u8; 8];
        assert_eq!(r.try_read(&mut buf).unwrap(), 3);
        // One writer is left: no end-of-file yet.
        assert_eq!(
            r.try_read(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        let blocked = ferry::spawn(move || {
            let mut buf = [0u8; 8];
            let n = r.read(&mut buf).unwrap();
            (n, r.read(&mut buf).unwrap(), r.try_read(&mut buf).unwrap())
        });
        ferry::yield_now();
        drop(w2);
        assert_eq!(blocked.join().unwrap(), (0, 0, 0));
    });
}

#[test]
fn the_last_writer_s_bytes_are_read_before_end_of_file() {
    on_one_and_two("eof after bytes", || {
        let (mut w, r) = stream::pipe();
        let reader = ferry::spawn(move || {
            let mut r = r;
            let mut s = Vec::new();
            r.read_to_end(&mut s).unwrap();
            s
        });
        w.write_all(&[9u8; 1000]).unwrap();
        drop(w);
        assert_eq!(reader.join().unwrap(), vec![9u8; 1000]);
    });
}

#[test]
fn broken_pipe_once_every_reader_is_gone() {
    on_one_and_two("broken pipe", || {
        let (mut w, r) = Builder::new().capacity(8).pipe();
        let r2 = r.clone();
        drop(r);
        assert_eq!(w.write(b"12345678").unwrap(), 8);
        assert_eq!(w.try_write(b"9").unwrap_err().kind(), ErrorKind::WouldBlock);
        // A writer blocked on a full stream sees the last reader go.
        let blocked = ferry::spawn(move || (w.write(b"9").unwrap_err().kind(), w));
        ferry::yield_now();
        drop(r2);
        let (kind, mut w) = blocked.join().unwrap();
        assert_eq!(kind, ErrorKind::BrokenPipe);
        assert_eq!(w.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
        assert_eq!(w.try_write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
        assert_eq!(w.write(b"").unwrap(), 0);
        assert_eq!(w.write_all(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
    });
}

#[test]
fn writes_are_partial_and_reads_return_what_is_there() {
    let (mut w, mut r) = Builder::new().capacity(16).pipe();
    assert_eq!(w.write(&[1u8; 20]).unwrap(), 16);
    assert_eq!(
        w.try_write(&[1u8; 1]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    let mut buf = [0u8; 10];
    assert_eq!(r.read(&mut buf).unwrap(), 10);
    assert_eq!(r.read(&mut buf).unwrap(), 6);
    assert_eq!(r.read(&mut []).unwrap(), 0);
    assert_eq!(
        r.try_read(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!((w.bytes_written(), r.bytes_read()), (16, 16));
    w.flush().unwrap();
}

#[test]
fn several_writers_keep_a_write_of_up_to_the_atomic_size_whole() {
    // Off any runtime: plain kernel threads block in the kernel.
    common::within(WATCHDOG, "atomic writes", || {
        let (w, mut r) = Builder::new().capacity(8192).pipe();
        let ws: Vec<_> = (0..3u8)
            .map(|i| {
                let mut w = w.clone();
                std::thread::spawn(move || {
                    for k in 0..200usize {
                        let len = 1 + (k * 997 + i as usize * 31) % ATOMIC_WRITE;
                        let mut rec = vec![i + 1; len];
                        rec[0] = 0; // a record starts with 0 ...
                        rec[len - 1] = 0xff; // ... and ends with 0xff
                        if len == 1 {
                            rec[0] = 0xfe;
                        }
                        assert_eq!(w.write(&rec).unwrap(), len, "a small write was split");
                    }
                })
            })
            .collect();
        drop(w);
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        for h in ws {
            h.join().unwrap();
        }
        // Parse: every record is [0, x, x, ..., 0xff] of one writer, or a
        // single 0xfe.
        let mut i = 0;
        let mut records = 0;
        while i < all.len() {
            if all[i] == 0xfe {
                i += 1;
            } else {
                assert_eq!(all[i], 0, "a record does not start at {i}");
                let end = i + all[i..]
                    .iter()
                    .position(|&b| b == 0xff)
                    .expect("unterminated");
                let body = &all[i + 1..end];
                assert!(body.windows(2).all(|p| p[0] == p[1]), "interleaved at {i}");
                i = end + 1;
            }
            records += 1;
        }
        assert_eq!(records, 600);
    });
}

#[test]
fn buf_read_in_place_and_shared() {
    on_one_and_two("BufRead", || {
        let (mut w, r) = Builder::new().capacity(16).pipe();
        let text = "alpha\nbeta\ngamma\ndelta epsilon zeta\n".repeat(50);
        let t = text.clone();
        let writer = ferry::spawn(move || w.write_all(t.as_bytes()).unwrap());
        let lines: Vec<String> = r.lines().map(Result::unwrap).collect();
        writer.join().unwrap();
        assert_eq!(lines.join("\n") + "\n", text);

        // A shared reader serves from its own buffer; consume past it is
        // clamped.
        let (mut w, mut r) = stream::pipe();
        let r2 = r.clone();
        w.write_all(b"hello").unwrap();
        assert_eq!(r.fill_buf().unwrap(), b"hello");
        r.consume(2);
        assert_eq!(r.fill_buf().unwrap(), b"llo");
        r.consume(100);
        drop((w, r2));
        assert_eq!(r.fill_buf().unwrap(), b"");
    });
}

#[test]
fn a_capacity_out_of_range_is_refused() {
    for bad in [0, MAX_CAPACITY + 1, usize::MAX] {
        let err = Builder::new().capacity(bad).try_pipe().unwrap_err();
        assert_eq!(err, CapacityError { requested: bad });
        assert!(err.to_string().contains(&bad.to_string()));
    }
    let (w, _r) = Builder::new().capacity(MAX_CAPACITY).try_pipe().unwrap();
    assert_eq!(w.capacity(), MAX_CAPACITY);
    let (w, _r) = Builder::new().capacity(1).pipe();
    assert_eq!(w.capacity(), 1);
    let p = std::panic::catch_unwind(|| Builder::new().capacity(0).pipe());
    assert!(p.is_err());
}

#[test]
fn a_reader_terminated_while_it_waits_leaves_no_reader_waiting_forever() {
    on_one_and_two("terminated reader", || {
        for _ in 0..20 {
            let (mut w, r) = stream::pipe();
            let read_one = |mut r: Reader| {
                move || {
                    let mut b = [0u8; 1];
                    r.read(&mut b).unwrap()
                }
            };
            let doomed = ferry::spawn(read_one(r.clone()));
            let survivor = ferry::spawn(read_one(r.clone()));
            ferry::yield_now();
            // The wakeup may go to the doomed reader just before it is
            // terminated: it must then be passed on.
            w.write_all(b"x").unwrap();
            // SAFETY: the closure holds only a stream handle, which a
            // terminated thread leaks (documented), and a byte buffer.
            let _ = unsafe { doomed.thread().terminate(0usize) };
            doomed.join().unwrap();
            if r.bytes_read() == 1 && !survivor.is_finished() {
                // The doomed reader took the byte before it went.
                w.write_all(b"y").unwrap();
            }
            assert_eq!(survivor.join().unwrap(), 1);
        }
    });
}

#[test]
fn a_writer_terminated_while_it_waits_leaves_no_writer_waiting_forever() {
    on_one_and_two("terminated writer", || {
        for _ in 0..20 {
            let (mut w, mut r) = Builder::new().capacity(8).pipe();
            w.write_all(&[0; 8]).unwrap();
            let write_four = |mut w: Writer, v: u8| move || w.write(&[v; 4]).unwrap();
            let doomed = ferry::spawn(write_four(w.clone(), 1));
            let survivor = ferry::spawn(write_four(w.clone(), 2));
            ferry::yield_now();
            let mut buf = [0u8; 8];
            assert_eq!(r.read(&mut buf).unwrap(), 8);
            // SAFETY: as for the reader above.
            let _ = unsafe { doomed.thread().terminate(0usize) };
            doomed.join().unwrap();
            assert_eq!(survivor.join().unwrap(), 4);
            // The survivor's four bytes are there, whole (and perhaps the
            // doomed one's, if it wrote before it went).
            let mut got = Vec::new();
            while let Ok(n) = r.try_read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            assert!(got.len() == 4 || got.len() == 8, "{got:?}");
            assert!(got.chunks(4).any(|c| c == [2; 4]), "{got:?}");
        }
    });
}

/// The cooked tty of 002 §5.1: a raw keyboard (a producer thread) feeds a
/// filter over an SP-SC stream; the filter applies erase (DEL) and kill
/// (^U) and hands whole lines to a program over another stream, echoing
/// each edited line to the screen, which the program also writes to: the
/// screen's stream has two writers (MP-SC).
#[test]
fn cooked_tty_pipeline() {
    on_one_and_two("cooked tty", || {
        const ERASE: u8 = 0x7f;
        const KILL: u8 = 0x15;
        let typed: &[u8] = b"lsx -l
rm -rf /echo hi
catdate
";
        let (mut keyboard, raw) = Builder::new().capacity(4).pipe();
        let (cooked_out, cooked_in) = stream::pipe();
        let (screen, screen_in) = stream::pipe();
        let echo = screen.clone();
        let raw_producer = ferry::spawn(move || {
            for &k in typed {
                keyboard.write_all(&[k]).unwrap(); // one interrupt per key
            }
        });
        let cooker = ferry::spawn(move || {
            let mut line = Vec::new();
            let mut echo = echo;
            stream::filter(raw, cooked_out, move |keys, out| {
                for &k in keys {
                    match k {
                        ERASE => {
                            line.pop();
                        }
                        KILL => line.clear(),
                        b'\n' => {
                            line.push(k);
                            echo.write_all(&line).unwrap();
                            out.append(&mut line);
                        }
                        _ => line.push(k),
                    }
                }
            })
        });
        let program = ferry::spawn(move || {
            let mut screen = screen;
            let mut commands = Vec::new();
            for l in std::io::BufReader::new(cooked_in).lines() {
                let l = l.unwrap();
                screen.write_all(format!("$ ran {l}\n").as_bytes()).unwrap();
                commands.push(l);
            }
            commands
        });
        raw_producer.join().unwrap();
        assert_eq!(
            cooker.join().unwrap().unwrap(),
            "ls -l\necho hi\ndate\n".len() as u64
        );
        assert_eq!(program.join().unwrap(), ["ls -l", "echo hi", "date"]);
        let mut shown = String::new();
        let mut screen_in = screen_in;
        screen_in.read_to_string(&mut shown).unwrap();
        let mut lines: Vec<&str> = shown.lines().collect();
        // Echoes in typing order, the program's lines in its order; each
        // write whole on its line.
        let ran: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("$ ran"))
            .collect();
        assert_eq!(ran, ["$ ran ls -l", "$ ran echo hi", "$ ran date"]);
        lines.retain(|l| !l.starts_with("$ ran"));
        assert_eq!(lines, ["ls -l", "echo hi", "date"]);
    });
}

/// Writes and reads of random sizes through a stream of random capacity,
/// one writer and one reader: the bytes come out as they went in.
fn one_to_one_random(capacity: usize, writes: Vec<usize>, reads: Vec<usize>) {
    let (mut w, mut r) = Builder::new().capacity(capacity).pipe();
    let total: usize = writes.iter().sum();
    let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 251) as u8).collect();
    let expect = data.clone();
    let writer = ferry::spawn(move || {
        let mut at = 0;
        for len in writes {
            w.write_all(&data[at..at + len]).unwrap();
            at += len;
        }
    });
    let mut got = Vec::with_capacity(total);
    let mut i = 0;
    loop {
        let mut buf = vec![0u8; reads[i % reads.len()]];
        i += 1;
        let n = if i % 3 == 0 {
            // BufRead, in place.
            let b = r.fill_buf().unwrap();
            let n = b.len().min(buf.len().max(1));
            got.extend_from_slice(&b[..n]);
            r.consume(n);
            n
        } else {
            let n = r.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            n
        };
        if n == 0 {
            break;
        }
    }
    writer.join().unwrap();
    assert_eq!(got.len(), expect.len());
    assert!(got == expect, "bytes differ");
}

/// Several writers write records of random sizes (each at most the
/// atomic size, so each comes out whole): a header (writer, sequence,
/// length) and a body derived from it; one reader reads with random
/// sizes; the checker parses the stream back into records, in order per
/// writer, each exactly once.
fn many_to_one_random(capacity: usize, writers: u8, sizes: Vec<usize>, reads: Vec<usize>) {
    let (w, mut r) = Builder::new().capacity(capacity).pipe();
    let ws: Vec<_> = (0..writers)
        .map(|id| {
            let mut w = w.clone();
            let sizes = sizes.clone();
            ferry::spawn(move || {
                for (seq, &body) in sizes.iter().enumerate() {
                    let mut rec = vec![id, seq as u8, (body >> 8) as u8, body as u8];
                    rec.extend((0..body).map(|k| id ^ seq as u8 ^ k as u8));
                    assert!(rec.len() <= ATOMIC_WRITE.min(w.capacity()));
                    w.write_all(&rec).unwrap();
                }
            })
        })
        .collect();
    drop(w);
    let mut all = Vec::new();
    let mut i = 0;
    loop {
        let mut buf = vec![0u8; reads[i % reads.len()]];
        i += 1;
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    for h in ws {
        h.join().unwrap();
    }
    let mut next = vec![0usize; writers as usize];
    let mut at = 0;
    while at < all.len() {
        let (id, seq) = (all[at], all[at + 1]);
        let body = ((all[at + 2] as usize) << 8) | all[at + 3] as usize;
        assert!(id < writers, "no writer {id}");
        let want = next[id as usize];
        assert_eq!(seq as usize, want % 256, "writer {id}: out of order");
        assert_eq!(body, sizes[want], "writer {id}: wrong length");
        let b = &all[at + 4..at + 4 + body];
        assert!(
            b.iter().enumerate().all(|(k, &x)| x == id ^ seq ^ k as u8),
            "writer {id}: record {want} torn"
        );
        next[id as usize] += 1;
        at += 4 + body;
    }
    assert!(
        next.iter().all(|&n| n == sizes.len()),
        "records lost: {next:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_sizes_one_to_one(
        capacity in 1usize..300,
        writes in prop::collection::vec(0usize..700, 1..40),
        reads in prop::collection::vec(1usize..700, 1..10),
        processors in 1usize..=2,
    ) {
        common::within(WATCHDOG, "random 1x1", move || {
            Runtime::builder()
                .processors(processors)
                .run(move || one_to_one_random(capacity, writes, reads))
                .unwrap();
        });
    }

    #[test]
    fn random_sizes_many_to_one(
        capacity in 300usize..3000,
        writers in 2u8..5,
        sizes in prop::collection::vec(0usize..250, 1..40),
        reads in prop::collection::vec(1usize..700, 1..10),
        processors in 1usize..=2,
    ) {
        common::within(WATCHDOG, "random Nx1", move || {
            Runtime::builder()
                .processors(processors)
                .run(move || many_to_one_random(capacity, writers, sizes, reads))
                .unwrap();
        });
    }
}
