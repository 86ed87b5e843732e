//! A file's status through the ring: [`Stat`], [`stat()`], [`symlink_stat`]
//! and [`File::stat`](super::File::stat), each one `statx(2)` submitted to
//! the runtime's io_uring (`IORING_OP_STATX`), or made through the
//! blocking handoff where the ring is not the path.
//!
//! This room owns the `statx` request and the status it answers; it must
//! not cache a status or touch the file otherwise. std's
//! [`Metadata`](std::fs::Metadata) can only be made by std, so
//! [`File::metadata`](super::File::metadata) stays a blocking `fstat`;
//! `Stat` carries what it does (size, type, permissions, owner, times,
//! inode) and is what a thread that must not lend a kernel thread asks
//! for.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Statx, StatxFlags, StatxTimestamp};

use super::{File, call, ring};

/// What every `statx` here asks for: the basic fields and the birth time.
fn mask() -> StatxFlags {
    StatxFlags::BASIC_STATS | StatxFlags::BTIME
}

/// A file's status as `statx(2)` gives it: what
/// [`std::fs::Metadata`] and its [`MetadataExt`](std::os::unix::fs::MetadataExt)
/// say, read through the ring (see the [`fs` module docs](super)).
#[derive(Clone, Copy)]
pub struct Stat(Statx);

impl Stat {
    /// The size in bytes (`st_size`), as [`std::fs::Metadata::len`].
    pub fn size(&self) -> u64 {
        self.0.stx_size
    }

    /// The type and permission bits (`st_mode`), as
    /// [`MetadataExt::mode`](std::os::unix::fs::MetadataExt::mode).
    pub fn mode(&self) -> u32 {
        u32::from(self.0.stx_mode)
    }

    /// The permissions, as [`std::fs::Metadata::permissions`].
    pub fn permissions(&self) -> std::fs::Permissions {
        std::fs::Permissions::from_mode(self.mode())
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind() == libc::S_IFREG
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind() == libc::S_IFDIR
    }

    /// Whether it is a symbolic link (only a [`symlink_stat`] of one says
    /// so: [`stat()`] follows links).
    pub fn is_symlink(&self) -> bool {
        self.kind() == libc::S_IFLNK
    }

    fn kind(&self) -> u32 {
        self.mode() & libc::S_IFMT
    }

    /// The owner's user id.
    pub fn uid(&self) -> u32 {
        self.0.stx_uid
    }

    /// The owner's group id.
    pub fn gid(&self) -> u32 {
        self.0.stx_gid
    }

    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.0.stx_ino
    }

    /// The device the file lives on, as
    /// [`MetadataExt::dev`](std::os::unix::fs::MetadataExt::dev).
    pub fn dev(&self) -> u64 {
        libc::makedev(self.0.stx_dev_major, self.0.stx_dev_minor)
    }

    /// The number of hard links.
    pub fn nlink(&self) -> u64 {
        u64::from(self.0.stx_nlink)
    }

    /// The 512-byte blocks allocated.
    pub fn blocks(&self) -> u64 {
        self.0.stx_blocks
    }

    /// The preferred I/O block size.
    pub fn blksize(&self) -> u64 {
        u64::from(self.0.stx_blksize)
    }

    /// The last modification, as [`std::fs::Metadata::modified`].
    ///
    /// # Errors
    /// `Unsupported` if the file system gave no such time.
    pub fn modified(&self) -> io::Result<SystemTime> {
        self.time(StatxFlags::MTIME, self.0.stx_mtime)
    }

    /// The last access, as [`std::fs::Metadata::accessed`].
    ///
    /// # Errors
    /// `Unsupported` if the file system gave no such time.
    pub fn accessed(&self) -> io::Result<SystemTime> {
        self.time(StatxFlags::ATIME, self.0.stx_atime)
    }

    /// The creation (birth) time, as [`std::fs::Metadata::created`].
    ///
    /// # Errors
    /// `Unsupported` if the file system keeps no birth time.
    pub fn created(&self) -> io::Result<SystemTime> {
        self.time(StatxFlags::BTIME, self.0.stx_btime)
    }

    fn time(&self, field: StatxFlags, t: StatxTimestamp) -> io::Result<SystemTime> {
        if !StatxFlags::from_bits_retain(self.0.stx_mask).contains(field) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "ferry: the file system gave no such time",
            ));
        }
        let nanos = Duration::from_nanos(u64::from(t.tv_nsec));
        let moment = match u64::try_from(t.tv_sec) {
            Ok(secs) => SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs) + nanos),
            Err(_) => SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(t.tv_sec.unsigned_abs()))
                .and_then(|s| s.checked_add(nanos)),
        };
        moment.ok_or_else(|| io::Error::other("ferry: a time out of SystemTime's range"))
    }
}

impl fmt::Debug for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stat")
            .field("size", &self.size())
            .field("mode", &format_args!("{:o}", self.mode()))
            .field("uid", &self.uid())
            .field("gid", &self.gid())
            .field("ino", &self.ino())
            .field("nlink", &self.nlink())
            .finish_non_exhaustive()
    }
}

/// One `statx` of `path` from `dirfd` with `flags`: through the ring, or
/// through the blocking handoff; retried if interrupted.
fn statx(dirfd: BorrowedFd<'_>, path: &Path, flags: AtFlags) -> io::Result<Stat> {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file name contained an unexpected NUL byte",
        ));
    };
    if let Some(done) = ring::statx(
        dirfd.as_raw_fd(),
        &c_path,
        flags.bits() as i32,
        mask().bits(),
    ) {
        return done.map(Stat);
    }
    call(|| {
        rustix::fs::statx(dirfd, c_path.as_c_str(), flags, mask())
            .map(Stat)
            .map_err(io::Error::from)
    })
}

/// The status of the file at `path`, following symbolic links, as
/// [`std::fs::metadata`]: one `statx` through the ring (see the
/// [`fs` module docs](super)).
///
/// # Errors
/// As [`std::fs::metadata`]: [`io::ErrorKind::NotFound`] if nothing is
/// at `path`, and so on.
pub fn stat<P: AsRef<Path>>(path: P) -> io::Result<Stat> {
    statx(rustix::fs::CWD, path.as_ref(), AtFlags::empty())
}

/// The status of the file at `path`, not following a symbolic link (the
/// link's own), as [`std::fs::symlink_metadata`].
///
/// # Errors
/// As [`std::fs::symlink_metadata`].
pub fn symlink_stat<P: AsRef<Path>>(path: P) -> io::Result<Stat> {
    statx(rustix::fs::CWD, path.as_ref(), AtFlags::SYMLINK_NOFOLLOW)
}

impl File {
    /// The open file's status: one `statx` through the ring (see
    /// [`Stat`]); [`File::metadata`] gives std's type through the
    /// blocking handoff.
    ///
    /// # Errors
    /// What `statx(2)` reports (`EIO`, a network file system's errors).
    pub fn stat(&self) -> io::Result<Stat> {
        statx(self.as_fd(), Path::new(""), AtFlags::EMPTY_PATH)
    }
}
