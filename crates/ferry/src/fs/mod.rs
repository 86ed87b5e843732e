//! Files that block in the kernel without stopping the runtime: [`File`],
//! [`OpenOptions`], the whole-file [`read`], [`read_to_string`] and
//! [`write()`], mirroring `std::fs`, and a file's status ([`stat()`],
//! [`symlink_stat`], [`File::stat`]), so the calling thread's processor
//! keeps running other ferry threads meanwhile.
//!
//! This module owns thin wrappers around the std types (and the crate-private
//! plumbing that [`crate::net`] and [`crate::process`] share); it must not
//! hold a ferry lock, park, or switch threads inside a blocking call, and
//! keeps no state beside the std handle it wraps (and the options std does
//! not show). Outside a ferry runtime every call is just the std call.
//!
//! # Two paths
//!
//! On a runtime, reads, writes (at the file position and at an offset,
//! [`FileExt`]), opens, `fsync`/`fdatasync` and `statx` ([`Stat`]) are
//! submitted to the
//! runtime's io_uring, made at the first file operation, and the calling
//! thread parks until the completion arrives: no kernel thread is lent
//! (see `ring`). Every other call, and every call when the runtime has no
//! ring, runs through [`crate::blocking`] (the *blocking handoff*). The
//! ring is not used with [`Builder::io_uring(false)`](crate::Builder::io_uring),
//! with `FERRY_IO_URING=0` in the environment, or when the kernel refuses
//! it (`io_uring_setup` fails: `kernel.io_uring_disabled`, a seccomp
//! filter, an old kernel); [`Handle::fs_backend`](crate::Handle::fs_backend)
//! says which [`Backend`] a runtime uses. `metadata` and `set_len` always
//! take the blocking handoff (std's `Metadata` can only be made by std:
//! [`File::stat`] says the same through the ring); so do vectored reads
//! and writes and `seek`. One read or write through
//! the ring moves at most 2 MiB (a longer one is short, as `read(2)` may
//! be); its data is copied through a buffer the ring owns. A read first
//! tries `preadv2` with `RWF_NOWAIT` on the calling thread: data in the
//! page cache is read with that one system call, with no ring entry, park
//! or copy ([`RingStats::reads_without_ring`]); only a read the kernel
//! refuses that way (`EAGAIN`: not cached) goes to the ring. Writes have
//! no such path: many file systems refuse `RWF_NOWAIT` on a buffered
//! write (`EOPNOTSUPP`), and a write that dirties pages may be throttled
//! while they are written back, so every write goes to the ring.
//!
//! # Cost
//!
//! `cargo test --release -p ferry --test fs_ring -- --ignored --nocapture`:
//! 4 KiB `read_at` of a cached 1 MiB file on a one-processor runtime, one
//! thread in a loop, then 8 threads sharing the file (medians of 5 runs on
//! 2 shared cores):
//!
//! | path | 1 thread | 8 threads |
//! |------|----------|-----------|
//! | io_uring runtime (`RWF_NOWAIT` hit) | 500 ns per read | 1,920,000 reads/s |
//! | blocking handoff | 560 ns per read | 1,740,000 reads/s |
//!
//! Both are one `pread`-like system call on the calling thread (the
//! handoff calls it in place, and lends a kernel thread only if the call
//! blocks). A read that goes to the ring, whose completion arrives inside
//! the submission (the thread reaps it at once and does not park), costs
//! about 1,600 ns, 800,000 reads/s with 8 threads: the record, its buffer
//! and the copy. A read the kernel completes later parks its thread; a
//! processor reaps it at its next switch, or the idle poller when its
//! `epoll_wait` returns for the ring's eventfd.
//!
//! ```
//! use std::io::{Read, Seek, SeekFrom, Write};
//!
//! ferry::run(|| {
//!     let path = std::env::temp_dir().join(format!("ferry-fs-doc-{}", std::process::id()));
//!     let mut file = ferry::fs::File::create(&path).unwrap();
//!     file.write_all(b"hello, ferry").unwrap();
//!     file.sync_all().unwrap();
//!
//!     let mut file = ferry::fs::File::open(&path).unwrap();
//!     file.seek(SeekFrom::Start(7)).unwrap();
//!     let mut text = String::new();
//!     file.read_to_string(&mut text).unwrap();
//!     assert_eq!(text, "ferry");
//!     std::fs::remove_file(&path).unwrap();
//! })
//! .unwrap();
//! ```
//!
//! # Interrupted calls
//!
//! A single operation (one `open`, `read`, `write`, `seek`, `fsync`, ...)
//! that fails with [`io::ErrorKind::Interrupted`] is retried inside the
//! wrapper, still inside the same blocking call: ferry may use a signal to
//! preempt, and `SA_RESTART` restarts most system calls but not all of them.
//! Composite operations (`read_to_end`, `read_exact`, `write_all`, the
//! whole-file functions) are run once: std already retries `Interrupted`
//! inside them, and running them again would repeat work already done.
//! A call aborted by [`Thread::abort`](crate::Thread::abort) is not
//! retried: a single operation returns `Interrupted` (a composite one goes
//! on, as std retries it).
//!
//! # Abort and termination
//!
//! [`Thread::abort`](crate::Thread::abort) and
//! [`Thread::terminate`](crate::Thread::terminate) reach a thread waiting
//! in a file operation on either path:
//!
//! - **Blocking handoff**: the thread's kernel thread is in the system
//!   call. An abort interrupts it with a signal (`EINTR`); a terminate
//!   aborts it the same way and stops the thread when the call returns.
//! - **Ring**: the thread is parked, and no kernel thread waits. An abort
//!   submits `IORING_OP_ASYNC_CANCEL` for its operation, which completes
//!   with `-ECANCELED` (or `-EINTR`), and the call returns `Interrupted`;
//!   an operation that completed before the cancel keeps its result. A
//!   terminate stops the parked thread at once, and cancels its
//!   operation the same way; the operation's buffer, which the ring owns,
//!   is freed when the cancelled completion is reaped
//!   ([`RingStats::records`]).
//!
//! Either way a read of an empty pipe, or of a FIFO or terminal with
//! nothing to read, is ended. An operation the kernel cannot interrupt (a
//! disk read in uninterruptible sleep, or a regular file's read the ring
//! already started) runs to its end first.
//!
//! # Why errno is safe here
//!
//! A failing system call reports its error in `errno`, which lives in the
//! kernel thread, while a ferry thread may move between kernel threads at
//! every switch. Each std call used here reads errno right after its system
//! call, on the same kernel thread, and turns it into an [`io::Error`] before
//! it returns: the closure given to [`crate::blocking`] runs from start to
//! finish on one kernel thread, with no ferry switch inside it, so errno is
//! never read across a switch. The closure is also called through a small
//! `#[inline(never)]` function, so the compiler cannot compute errno's
//! address (std declares `__errno_location` `ffi_const`) before a switch
//! inside `blocking` and reuse it after one; see [`crate::thread`].

mod open;
mod ring;
mod stat;

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub use crate::event::ring::{Backend, Fallback, RingStats};
pub use open::OpenOptions;
pub use stat::{Stat, stat, symlink_stat};

/// Runs one system-call-sized operation through [`crate::blocking`], again
/// as long as it fails with [`io::ErrorKind::Interrupted`].
///
/// Only for operations that did nothing when they were interrupted (a
/// `read`, `write`, `accept`, `connect` on a fresh socket, `waitpid`).
pub(crate) fn call<R>(mut op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
    crate::blocking(move || retry_interrupted(&mut op))
}

/// Runs a composite operation (one std already retries `Interrupted`
/// inside, or one that must not run twice) through [`crate::blocking`],
/// once.
pub(crate) fn call_once<R>(op: impl FnOnce() -> R) -> R {
    crate::blocking(move || run_once(op))
}

/// `op` until it does not fail with `Interrupted`. Never inlined, so the
/// system calls in `op` and their errno reads stay in a frame that holds no
/// ferry switch (see the module docs).
#[inline(never)]
fn retry_interrupted<R>(op: &mut impl FnMut() -> io::Result<R>) -> io::Result<R> {
    // A call aborted at its entry (an alert pending) makes no system call.
    if crate::upcall::call_aborted() {
        return Err(io::Error::from_raw_os_error(libc::EINTR));
    }
    loop {
        match op() {
            // Unless thread control aborted the call (`Thread::abort`).
            Err(e) if e.kind() == io::ErrorKind::Interrupted && !crate::upcall::call_aborted() => {
                continue;
            }
            done => return done,
        }
    }
}

/// `op()`, in a frame of its own for the same reason as
/// [`retry_interrupted`].
#[inline(never)]
fn run_once<R>(op: impl FnOnce() -> R) -> R {
    op()
}

/// An open file, as [`std::fs::File`], whose operations block only the
/// calling ferry thread: through the runtime's io_uring or the blocking
/// handoff (see the [module docs](self)).
///
/// [`Read`], [`Write`] and [`Seek`] are implemented
/// for `File` and for `&File` (as std does), so one file may be read and
/// written from several threads through shared references; they share one
/// file offset. A single `read`, `write` or `seek` interrupted by a signal
/// is retried; `flush` does nothing, as std's does nothing for a file. See
/// the [module docs](self).
#[derive(Debug)]
pub struct File(std::fs::File);

impl File {
    /// Opens `path` read-only, as [`std::fs::File::open`]; retried if
    /// interrupted.
    ///
    /// # Errors
    /// As [`std::fs::File::open`]: [`io::ErrorKind::NotFound`] if `path`
    /// does not exist, and so on.
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    /// Opens `path` write-only, creating it if it does not exist and
    /// truncating it if it does, as [`std::fs::File::create`]; retried if
    /// interrupted.
    ///
    /// # Errors
    /// As [`std::fs::File::create`].
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// Creates `path` read-write, failing if it exists, as
    /// [`std::fs::File::create_new`]; retried if interrupted.
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] if `path` exists, else as
    /// [`std::fs::File::create_new`].
    pub fn create_new<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }

    /// A builder with every option off, as [`std::fs::File::options`].
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Flushes the file's data and metadata to the device (`fsync`), as
    /// [`std::fs::File::sync_all`]; retried if interrupted.
    ///
    /// # Errors
    /// As [`std::fs::File::sync_all`].
    pub fn sync_all(&self) -> io::Result<()> {
        ring::fsync(self.0.as_raw_fd(), false).unwrap_or_else(|| call(|| self.0.sync_all()))
    }

    /// Flushes the file's data (not necessarily its metadata) to the device
    /// (`fdatasync`), as [`std::fs::File::sync_data`]; retried if
    /// interrupted.
    ///
    /// # Errors
    /// As [`std::fs::File::sync_data`].
    pub fn sync_data(&self) -> io::Result<()> {
        ring::fsync(self.0.as_raw_fd(), true).unwrap_or_else(|| call(|| self.0.sync_data()))
    }

    /// Truncates or extends the file to `size` bytes, as
    /// [`std::fs::File::set_len`]; retried if interrupted.
    ///
    /// # Errors
    /// As [`std::fs::File::set_len`], e.g. if the file is not open for
    /// writing.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        call(|| self.0.set_len(size))
    }

    /// The file's metadata (`fstat`, which may go to the server on a network
    /// file system), as [`std::fs::File::metadata`].
    ///
    /// # Errors
    /// As [`std::fs::File::metadata`].
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        call(|| self.0.metadata())
    }

    /// Wraps an open std file.
    pub fn from_std(file: std::fs::File) -> File {
        File(file)
    }

    /// The std file inside, whose operations block the whole kernel thread
    /// (and the processor with it) again.
    pub fn into_std(self) -> std::fs::File {
        self.0
    }

    /// The std file inside, for what this type does not wrap (permissions,
    /// times, locks); its operations block the processor.
    pub fn as_std(&self) -> &std::fs::File {
        &self.0
    }
}

/// `&File` through the ring alone (or the blocking handoff per call):
/// std's composite algorithms (`read_to_end`, `write_all`, ...) run over
/// it, one operation at a time.
struct Ops<'a>(&'a File);

impl Read for Ops<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        ring::read(self.0.as_raw_fd(), buf, None)
            .unwrap_or_else(|| call(|| Read::read(&mut &self.0.0, buf)))
    }
}

impl Write for Ops<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        ring::write(self.0.as_raw_fd(), buf, None)
            .unwrap_or_else(|| call(|| Write::write(&mut &self.0.0, buf)))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl File {
    /// Whether this thread's operations go through a ring.
    fn through_ring() -> bool {
        crate::thread::try_current().is_some_and(|me| {
            let sources = &me.shared().sources;
            ring::made_ring(&sources.ring, &sources.readiness).is_some()
        })
    }
}

impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ops(self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        call(|| Read::read_vectored(&mut &self.0, bufs))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if File::through_ring() {
            Ops(self).read_to_end(buf)
        } else {
            call_once(|| Read::read_to_end(&mut &self.0, buf))
        }
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        if File::through_ring() {
            Ops(self).read_to_string(buf)
        } else {
            call_once(|| Read::read_to_string(&mut &self.0, buf))
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if File::through_ring() {
            Ops(self).read_exact(buf)
        } else {
            call_once(|| Read::read_exact(&mut &self.0, buf))
        }
    }
}

impl Write for &File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ops(self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        call(|| Write::write_vectored(&mut &self.0, bufs))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if File::through_ring() {
            Ops(self).write_all(buf)
        } else {
            call_once(|| Write::write_all(&mut &self.0, buf))
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        (&*self).read_to_end(buf)
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        (&*self).read_to_string(buf)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        (&*self).read_exact(buf)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (&*self).write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads and writes at an offset (`pread`/`pwrite`), leaving the file
/// position alone, as std's `FileExt` for its `File`; through the ring
/// on a runtime that has one.
impl FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        ring::read(self.0.as_raw_fd(), buf, Some(offset))
            .unwrap_or_else(|| call(|| self.0.read_at(buf, offset)))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        ring::write(self.0.as_raw_fd(), buf, Some(offset))
            .unwrap_or_else(|| call(|| self.0.write_at(buf, offset)))
    }
}

impl Seek for &File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        // Usually cheap, but `SeekFrom::End` on a network file system may
        // have to ask the server for the size.
        call(|| Seek::seek(&mut &self.0, pos))
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl From<std::fs::File> for File {
    fn from(file: std::fs::File) -> File {
        File(file)
    }
}

impl From<File> for std::fs::File {
    fn from(file: File) -> std::fs::File {
        file.0
    }
}

/// The whole contents of the file at `path`, as [`std::fs::read`]: through
/// the ring, or in one blocking call (std retries interrupted reads inside
/// it).
///
/// # Errors
/// As [`std::fs::read`].
pub fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    let path = path.as_ref();
    if File::through_ring() {
        let mut contents = Vec::new();
        File::open(path)?.read_to_end(&mut contents)?;
        return Ok(contents);
    }
    call_once(|| std::fs::read(path))
}

/// The whole contents of the file at `path` as UTF-8, as
/// [`std::fs::read_to_string`], in one blocking call (std retries
/// interrupted reads inside it).
///
/// # Errors
/// As [`std::fs::read_to_string`]; [`io::ErrorKind::InvalidData`] if the
/// contents are not UTF-8.
pub fn read_to_string<P: AsRef<Path>>(path: P) -> io::Result<String> {
    let path = path.as_ref();
    if File::through_ring() {
        let mut contents = String::new();
        File::open(path)?.read_to_string(&mut contents)?;
        return Ok(contents);
    }
    call_once(|| std::fs::read_to_string(path))
}

/// Makes `contents` the whole contents of the file at `path`, creating or
/// truncating it, as [`std::fs::write`], in one blocking call (std retries
/// interrupted writes inside it).
///
/// # Errors
/// As [`std::fs::write`].
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    let (path, contents) = (path.as_ref(), contents.as_ref());
    if File::through_ring() {
        return File::create(path)?.write_all(contents);
    }
    call_once(|| std::fs::write(path, contents))
}
