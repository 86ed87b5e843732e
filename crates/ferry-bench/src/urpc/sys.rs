//! The raw system calls of the `urpc` peers: a shared mapping of a memfd
//! ([`Shared`]), the process-shared futex words, clearing close-on-exec,
//! and the parent-death signal of a server process.
//!
//! This module owns these wrappers and their `unsafe`; it knows no
//! protocol and no system (the word protocols are in [`super::shm`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

/// A `MAP_SHARED` read-write mapping of a whole memfd, unmapped on drop.
#[derive(Debug)]
pub struct Shared {
    ptr: NonNull<u8>,
    len: usize,
    file: File,
}

// SAFETY: the mapping is plain shared memory that lives as long as the
// value; every access to it goes through raw pointers or atomics whose use
// the protocol of `shm` orders, so moving the owner to another thread
// changes nothing.
unsafe impl Send for Shared {}

impl Shared {
    /// A new memfd of `len` bytes (zeroed), mapped.
    pub fn create(name: &str, len: usize) -> io::Result<Shared> {
        let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
        // SAFETY: `cname` is a valid NUL-terminated string; the flags are
        // plain bits.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create and nothing else
        // owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(len as u64)?;
        Shared::map(file, len)
    }

    /// Maps the memfd `fd`, which must be at least `len` bytes long
    /// (checked: a shorter file is an error, not a fault later).
    pub fn open(fd: OwnedFd, len: usize) -> io::Result<Shared> {
        let file = File::from(fd);
        let have = file.metadata()?.len();
        if have < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("shared file of {have} bytes, {len} needed"),
            ));
        }
        Shared::map(file, len)
    }

    fn map(file: File, len: usize) -> io::Result<Shared> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        // SAFETY: a fresh mapping at an address the kernel chooses, of a
        // file at least `len` bytes long; nothing else is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Shared { ptr, len, file })
    }

    /// The memfd, to hand to the server process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The first byte of the mapping (page-aligned).
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, and
        // no reference into it outlives `self` (accessors hand out raw
        // pointers only, used while `self` is borrowed).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Sleeps while `*word == expected` (process-shared `FUTEX_WAIT`, no
/// timeout). Returns on a wake-up, a changed word (`EAGAIN`) or a signal;
/// the caller re-checks the word.
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call;
    // a shared (not private) futex, as the word lives in a MAP_SHARED
    // mapping both processes use; a null timeout waits without limit.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes at most one sleeper on `word` (process-shared `FUTEX_WAKE`).
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE only reads its
    // address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1);
    }
}

/// Takes ownership of descriptor `fd`, named on this process's command
/// line by the parent that left it open across exec; an error if no such
/// descriptor is open.
pub fn inherited(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD on a number only reads its flags; a closed number
    // is reported as EBADF.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not open"),
        ));
    }
    // SAFETY: `fd` is open (checked above) and was left open across exec
    // by the parent for this process alone; nothing else in this process
    // owns it, and the caller takes it once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Clears `FD_CLOEXEC` on `fd`, so that it survives the next exec.
/// Async-signal-safe: meant for a `pre_exec` hook between fork and exec.
pub fn keep_across_exec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(F_SETFD) on a descriptor number changes only its flag;
    // a bad number is reported as EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks for SIGKILL when the thread that forked this process ends (it is
/// the thread that runs the turn, which outlives its server), then checks
/// the parent is still `parent` (it may have died before the request).
/// Async-signal-safe: meant for a `pre_exec` hook.
pub fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG with a signal number; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err(io::Error::other("parent already gone"));
    }
    Ok(())
}

/// CLOCK_MONOTONIC in ns: one clock for every process of the machine, so
/// a reading in the server can be set against one in the client.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's id.
pub fn pid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_mapping_sees_the_first_and_a_short_file_is_refused() {
        let a = Shared::create("t", 4096).unwrap();
        // SAFETY: offset 100 is inside the 4096-byte mapping.
        unsafe { a.base().add(100).write(7) };
        let b = Shared::open(a.fd().try_clone_to_owned().unwrap(), 4096).unwrap();
        // SAFETY: offset 100 is inside b's 4096-byte mapping.
        assert_eq!(unsafe { b.base().add(100).read() }, 7);
        assert!(Shared::open(a.fd().try_clone_to_owned().unwrap(), 8192).is_err());
    }

    #[test]
    fn the_clock_moves_on_in_ns() {
        let a = mono_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = mono_ns();
        assert!(b - a >= 2_000_000 && b - a < 10_000_000_000, "{a} {b}");
    }

    #[test]
    fn only_open_descriptors_are_inherited() {
        assert!(inherited(-1).is_err());
        assert!(inherited(1 << 20).is_err());
    }
}
