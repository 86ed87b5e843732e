//! `ferry::fs` through io_uring against the blocking handoff: the ring is
//! really used (its completions count, and no thread blocks in the
//! kernel), both paths give std's errors and short reads, and a thread
//! terminated while its operation is in the ring leaves no record behind
//! once the kernel completes it. `ring_and_handoff_pread_4k` (ignored)
//! prints a latency and throughput comparison; no test measures time.
//!
//! Where the kernel refuses io_uring the ring cases say so and check the
//! fallback instead.

use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use ferry::fs::{self, Backend, Fallback, File, OpenOptions};
use ferry::{Handle, Runtime};

mod common;
use common::WATCHDOG;

/// A path in the temporary directory unique to this process and `name`,
/// removed (if it exists) when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> TempPath {
        let path =
            std::env::temp_dir().join(format!("ferry-fs-ring-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        TempPath(path)
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `f` on a one-processor runtime with the ring on or off, under the
/// watchdog; `f` is told whether the ring is the path.
fn on<T: Send + 'static>(what: &str, ring: bool, f: impl FnOnce(bool) -> T + Send + 'static) -> T {
    on_processors(what, 1, ring, f)
}

/// As [`on`], on `processors` processors.
fn on_processors<T: Send + 'static>(
    what: &str,
    processors: usize,
    ring: bool,
    f: impl FnOnce(bool) -> T + Send + 'static,
) -> T {
    let what = format!("{what} (io_uring {ring}, P={processors})");
    common::within(WATCHDOG, &what, move || {
        Runtime::builder()
            .processors(processors)
            .io_uring(ring)
            .run(move || {
                let used = match Handle::current().fs_backend() {
                    Backend::IoUring => true,
                    Backend::Blocking(Fallback::Kernel(errno)) if ring => {
                        eprintln!("io_uring refused here (errno {errno}): checking the fallback");
                        false
                    }
                    Backend::Blocking(_) => false,
                    other => panic!("unexpected backend {other:?}"),
                };
                f(used)
            })
            .unwrap()
    })
}

#[test]
fn ring_operations_complete_in_the_ring_and_lend_no_kernel_thread() {
    let tmp = TempPath::new("used");
    std::fs::write(&tmp.0, vec![7u8; 8192]).unwrap();
    let path = tmp.0.clone();
    on("ring_used", true, move |used| {
        if !used {
            return;
        }
        let h = Handle::current();
        let (before, blocked) = (h.fs_ring_stats(), h.upcall_stats().blocked.count);
        let file = File::open(&path).unwrap();
        let mut buf = [0u8; 4096];
        for i in 0..10u64 {
            assert_eq!(file.read_at(&mut buf, (i % 2) * 4096).unwrap(), 4096);
            assert!(buf.iter().all(|&b| b == 7));
        }
        file.sync_all().unwrap();
        let after = h.fs_ring_stats();
        // One open, one fsync, and each of the ten reads either served
        // from the page cache without the ring or completed in it.
        let now = after.reads_without_ring - before.reads_without_ring;
        assert_eq!(after.completed - before.completed, 2 + (10 - now));
        assert!(
            now > 0,
            "no read of a cached file was served without the ring"
        );
        assert_eq!((after.in_flight, after.records), (0, 0));
        assert_eq!(
            h.upcall_stats().blocked.count,
            blocked,
            "a ring operation lent a kernel thread"
        );
    });
}

#[test]
fn a_read_that_would_block_goes_to_the_ring() {
    on("pipe", true, move |used| {
        if !used {
            return;
        }
        let h = Handle::current();
        let before = h.fs_ring_stats();
        let (r, mut w) = std::io::pipe().unwrap();
        let mut r = File::from(std::fs::File::from(std::os::fd::OwnedFd::from(r)));
        let reader = ferry::spawn(move || {
            let mut buf = [0u8; 16];
            let n = r.read(&mut buf).unwrap();
            buf[..n].to_vec()
        });
        // The reader finds the pipe empty (`RWF_NOWAIT` refuses, or the
        // pipe does not take the flag) and parks on a ring read.
        while h.fs_ring_stats().in_flight == 0 {
            ferry::yield_now();
        }
        w.write_all(b"ring").unwrap();
        assert_eq!(reader.join().unwrap(), b"ring");
        let after = h.fs_ring_stats();
        assert_eq!(after.completed - before.completed, 1);
        assert_eq!(after.reads_without_ring, before.reads_without_ring);
        assert_eq!((after.in_flight, after.records), (0, 0));
    });
}

#[test]
fn the_blocking_path_uses_no_ring() {
    let tmp = TempPath::new("unused");
    std::fs::write(&tmp.0, b"abc").unwrap();
    let path = tmp.0.clone();
    on("no_ring", false, move |used| {
        assert!(!used);
        assert_eq!(
            Handle::current().fs_backend(),
            Backend::Blocking(Fallback::Builder)
        );
        assert_eq!(fs::read(&path).unwrap(), b"abc");
        assert_eq!(Handle::current().fs_ring_stats(), Default::default());
    });
}

#[test]
fn errors_and_short_reads_match_std_on_both_paths() {
    for ring in [true, false] {
        let tmp = TempPath::new(&format!("errors-{ring}"));
        let missing = TempPath::new(&format!("missing-{ring}"));
        std::fs::write(&tmp.0, b"0123456789").unwrap();
        // What std says for a write to a file opened read-only.
        let std_err = std::fs::File::open(&tmp.0)
            .unwrap()
            .write(b"x")
            .unwrap_err()
            .raw_os_error();
        let (path, missing) = (tmp.0.clone(), missing.0.clone());
        on("errors", ring, move |_| {
            assert_eq!(
                File::open(&missing).unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            assert_eq!(
                fs::read(&missing).unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            let mut f = File::open(&path).unwrap();
            let mut buf = [0u8; 100];
            assert_eq!(f.read_at(&mut buf, 5).unwrap(), 5, "short at the end");
            assert_eq!(&buf[..5], b"56789");
            assert_eq!(f.read_at(&mut buf, 10).unwrap(), 0, "at the end");
            assert_eq!(f.read(&mut buf).unwrap(), 10);
            assert_eq!(f.read(&mut buf).unwrap(), 0, "the position is at the end");
            assert_eq!(f.write(b"x").unwrap_err().raw_os_error(), std_err);
            assert_eq!(f.write_at(b"x", 0).unwrap_err().raw_os_error(), std_err);
            let e = OpenOptions::new().open(&path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "no access mode");
            assert_eq!(
                File::create_new(&path).unwrap_err().kind(),
                io::ErrorKind::AlreadyExists
            );
        });
    }
}

/// Every operation of `ferry::fs` on both paths, each against std's
/// answer for the same file: the whole surface runs through the ring (its
/// completions counted) and through the blocking handoff.
#[test]
fn every_operation_matches_std_on_both_paths() {
    for ring in [true, false] {
        let tmp = TempPath::new(&format!("every-{ring}"));
        let link = TempPath::new(&format!("every-link-{ring}"));
        let missing = TempPath::new(&format!("every-missing-{ring}"));
        let (path, link, missing) = (tmp.0.clone(), link.0.clone(), missing.0.clone());
        on("every_operation", ring, move |used| {
            let h = Handle::current();
            let before = h.fs_ring_stats();

            // Writes: at the position, at an offset, flushed both ways.
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            f.write_all(b"hello, ring").unwrap();
            assert_eq!(f.write_at(b"HELLO", 0).unwrap(), 5);
            f.sync_all().unwrap();
            f.sync_data().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"HELLO, ring");

            // Reads: at an offset, from the position after a seek, whole.
            let mut buf = [0u8; 4];
            assert_eq!(f.read_at(&mut buf, 7).unwrap(), 4);
            assert_eq!(&buf, b"ring");
            f.seek(io::SeekFrom::Start(2)).unwrap();
            let mut rest = Vec::new();
            f.read_to_end(&mut rest).unwrap();
            assert_eq!(rest, b"LLO, ring");

            // Length and status, against std's for the same file.
            f.set_len(5).unwrap();
            let statted = h.fs_ring_stats().completed;
            let ours = f.stat().unwrap();
            let std_meta = std::fs::metadata(&path).unwrap();
            {
                use std::os::unix::fs::MetadataExt;
                assert_eq!(ours.size(), 5);
                assert_eq!(ours.size(), std_meta.len());
                assert_eq!(ours.mode(), std_meta.mode());
                assert_eq!(ours.permissions(), std_meta.permissions());
                assert_eq!((ours.uid(), ours.gid()), (std_meta.uid(), std_meta.gid()));
                assert_eq!((ours.ino(), ours.dev()), (std_meta.ino(), std_meta.dev()));
                assert_eq!(ours.nlink(), std_meta.nlink());
                assert_eq!(ours.blocks(), std_meta.blocks());
                assert_eq!(ours.modified().unwrap(), std_meta.modified().unwrap());
                assert!(ours.is_file() && !ours.is_dir() && !ours.is_symlink());
            }
            assert_eq!(f.metadata().unwrap().len(), 5);
            let by_path = fs::stat(&path).unwrap();
            assert_eq!((by_path.ino(), by_path.size()), (ours.ino(), 5));

            // A directory, a link followed and not, nothing, a bad name.
            assert!(fs::stat(std::env::temp_dir()).unwrap().is_dir());
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert!(fs::symlink_stat(&link).unwrap().is_symlink());
            assert_eq!(fs::stat(&link).unwrap().ino(), ours.ino());
            assert_eq!(
                fs::stat(&missing).unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            assert_eq!(
                fs::symlink_stat(&missing).unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            assert_eq!(
                fs::stat("a\0b").unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
            std::fs::remove_file(&link).unwrap();
            // Seven `statx` calls went to the kernel (the NUL name never
            // does; `metadata` is std's `fstat` through the handoff).
            let statx_in_ring = h.fs_ring_stats().completed - statted;
            assert_eq!(statx_in_ring, if used { 7 } else { 0 });

            // The whole-file functions.
            fs::write(&path, b"whole").unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"whole");
            assert_eq!(fs::read_to_string(&path).unwrap(), "whole");
            drop(f);

            let after = h.fs_ring_stats();
            if used {
                assert!(after.completed > before.completed + statx_in_ring);
            } else {
                assert_eq!(after, Default::default());
            }
            assert_eq!((after.in_flight, after.records), (0, 0));
        });
    }
}

/// A pipe's read end as a ferry file, and its write end.
fn pipe() -> (File, io::PipeWriter) {
    let (r, w) = std::io::pipe().unwrap();
    let r = File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(r)));
    (r, w)
}

/// Waits (yielding) until `n` operations are in flight in the ring.
fn until_in_flight(h: &Handle, n: usize) {
    while h.fs_ring_stats().in_flight != n {
        ferry::yield_now();
    }
}

#[test]
fn a_thread_terminated_in_the_ring_returns_promptly_and_leaves_no_record() {
    for processors in [1, 2] {
        on_processors("terminated", processors, true, |used| {
            if !used {
                return;
            }
            let h = Handle::current();
            let before = h.fs_ring_stats();
            // The write end stays open and empty: only the cancel ends
            // the read.
            let (reader, _writer) = pipe();
            let waiter = ferry::spawn(move || {
                let mut buf = [0u8; 16];
                (&reader).read(&mut buf).map_err(|e| e.kind())
            });
            until_in_flight(&h, 1);
            assert_eq!(h.fs_ring_stats().records, 1);
            // SAFETY: the waiter's frame holds nothing whose destructor
            // must run, and nothing outside points into it but ferry's
            // own wait.
            unsafe { waiter.thread().terminate(Ok::<usize, io::ErrorKind>(4242)) }.unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(4242), "the termination value");
            // The cancel completes the read; a processor reaps it and
            // frees the abandoned record.
            until_in_flight(&h, 0);
            let after = h.fs_ring_stats();
            assert_eq!(after.records, 0, "the reaper freed the record");
            assert_eq!(after.cancels - before.cancels, 1);
            assert_eq!(after.completed - before.completed, 1);
        });
    }
}

#[test]
fn an_abort_cancels_a_ring_read_of_an_empty_pipe() {
    for processors in [1, 2] {
        on_processors("abort", processors, true, move |used| {
            if !used {
                return;
            }
            let h = Handle::current();
            let before = h.fs_ring_stats();
            let (reader, mut writer) = pipe();
            let waiter = ferry::spawn(move || {
                let mut buf = [0u8; 16];
                let first = (&reader).read(&mut buf).map_err(|e| e.kind());
                // The file is still usable after the abort.
                let n = (&reader).read(&mut buf).unwrap();
                (first, buf[..n].to_vec())
            });
            until_in_flight(&h, 1);
            // On one processor the reader parked before this runs: it
            // waits in the ring. On two it may still be between its
            // submission and its wait, where there is nothing to abort
            // (false); the watchdog fails an abort that never lands.
            if processors == 1 {
                assert!(waiter.thread().abort(), "the thread waits in the ring");
            } else {
                while !waiter.thread().abort() {
                    ferry::yield_now();
                }
            }
            // The second read waits in the ring again.
            while h.fs_ring_stats().completed - before.completed != 1
                || h.fs_ring_stats().in_flight != 1
            {
                ferry::yield_now();
            }
            writer.write_all(b"after").unwrap();
            let (first, data) = waiter.join().unwrap();
            assert_eq!(first, Err(io::ErrorKind::Interrupted));
            assert_eq!(data, b"after");
            until_in_flight(&h, 0);
            let after = h.fs_ring_stats();
            assert_eq!((after.records, after.in_flight), (0, 0));
            assert_eq!(after.cancels - before.cancels, 1);
            assert_eq!(after.completed - before.completed, 2);
            assert!(!ferry::current().abort(), "a thread in no wait");
        });
    }
}

#[test]
fn an_abort_after_the_read_completed_leaves_its_data() {
    on("abort late", true, |used| {
        if !used {
            return;
        }
        let h = Handle::current();
        let before = h.fs_ring_stats();
        let (reader, mut writer) = pipe();
        let waiter = ferry::spawn(move || {
            let mut buf = [0u8; 16];
            let n = (&reader).read(&mut buf).unwrap();
            buf[..n].to_vec()
        });
        until_in_flight(&h, 1);
        // Held once its completion wakes it: it is still in its ring wait,
        // its operation complete, when the abort comes.
        let t = waiter.thread();
        t.suspend();
        t.wait_suspended(true);
        writer.write_all(b"data").unwrap();
        while h.fs_ring_stats().completed == before.completed {
            ferry::yield_now();
        }
        assert!(t.abort(), "the thread has not left its ring wait");
        t.resume();
        assert_eq!(waiter.join().unwrap(), b"data", "the read's own result");
        until_in_flight(&h, 0);
        let after = h.fs_ring_stats();
        assert_eq!(after.records, 0);
        assert_eq!(after.cancels - before.cancels, 1);
    });
}

/// `FERRY_IO_URING=0` forces the fallback (a child process, since the
/// environment is the whole process's).
#[test]
fn the_environment_turns_the_ring_off() {
    if std::env::var_os("FERRY_FS_RING_CHILD").is_some() {
        let backend = Runtime::builder()
            .processors(1)
            .run(|| Handle::current().fs_backend())
            .unwrap();
        assert_eq!(backend, Backend::Blocking(Fallback::Environment));
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_environment_turns_the_ring_off", "--quiet"])
        .env("FERRY_FS_RING_CHILD", "1")
        .env("FERRY_IO_URING", "0")
        .status()
        .unwrap();
    assert!(status.success());
}

/// 4 KiB `pread`s of a cached file, one thread and eight at once, through
/// the ring and through the blocking handoff; prints the numbers.
#[test]
#[ignore = "a measurement: cargo test --release --test fs_ring -- --ignored --nocapture"]
fn ring_and_handoff_pread_4k() {
    let tmp = TempPath::new("bench");
    std::fs::write(&tmp.0, vec![1u8; 1 << 20]).unwrap();
    for ring in [true, false] {
        let path = tmp.0.clone();
        on("bench", ring, move |used| {
            const N: u64 = 20_000;
            let file = std::sync::Arc::new(File::open(&path).unwrap());
            let mut buf = [0u8; 4096];
            for i in 0..1000 {
                file.read_at(&mut buf, (i % 256) * 4096).unwrap();
            }
            let t = Instant::now();
            for i in 0..N {
                file.read_at(&mut buf, (i % 256) * 4096).unwrap();
            }
            let one = t.elapsed().as_nanos() as f64 / N as f64;
            let t = Instant::now();
            let threads: Vec<_> = (0..8u64)
                .map(|k| {
                    let file = std::sync::Arc::clone(&file);
                    ferry::spawn(move || {
                        let mut buf = [0u8; 4096];
                        for i in 0..N / 8 {
                            file.read_at(&mut buf, ((i + k) % 256) * 4096).unwrap();
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            let per_s = N as f64 / t.elapsed().as_secs_f64();
            let path = if used { "io_uring" } else { "blocking handoff" };
            println!("{path:>16}: 1 thread {one:8.0} ns/pread; 8 threads {per_s:10.0} preads/s");
        });
    }
}
