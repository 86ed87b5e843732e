//! A channel's shared memory: a sealed memfd and its shared mapping.
//!
//! Owns [`Mapping`]: the server's creation of the memfd (sized, then sealed
//! against shrinking and against further seals), the client's checks of the
//! memfd a peer handed over, and the `mmap`/`munmap` of both. It must not
//! map a file whose size or seals it has not checked: a file that could
//! shrink under the mapping would make a later access fault (SIGBUS).
//! It knows nothing of what the memory holds.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::rpc::error::{Error, Result};

/// The largest channel memory, in bytes (1 GiB).
pub const MAX_CHANNEL_LEN: usize = 1 << 30;

/// The seals a channel's memfd must carry: it can never shrink under a
/// mapping, and no other seal (such as one against writing) can be added.
const REQUIRED_SEALS: SealFlags = SealFlags::SHRINK.union(SealFlags::SEAL);

/// A channel's memory: a sealed memfd mapped shared, read-write, by this
/// process (and, through the same memfd, by the peer). Owns both the file
/// descriptor and the mapping; dropping it unmaps and closes.
///
/// The peer can write any byte of it at any time: whoever reads it must
/// treat what it finds as untrusted input.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: a `Mapping` is an address range and a file descriptor; it hands
// out only raw pointers (every access through them is the user's unsafe
// code), and `munmap`/`close` on drop may run on any thread.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` gives only the pointer and the length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Creates a channel memory of `len` bytes (zeroed): a memfd, sized,
    /// sealed with `F_SEAL_SHRINK | F_SEAL_SEAL`, and mapped.
    pub(crate) fn create(len: usize) -> Result<Mapping> {
        check_len(len as u64)?;
        let fd =
            rustix::fs::memfd_create("ferry-rpc", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, REQUIRED_SEALS)?;
        map(fd, len)
    }

    /// Checks a memfd received from a peer, which promised `len` bytes: it
    /// must be a regular file of exactly `len` bytes carrying the seals
    /// `F_SEAL_SHRINK` and `F_SEAL_SEAL` (else [`Error::BadLayout`]); then
    /// maps it.
    pub(crate) fn from_peer(fd: OwnedFd, len: u64) -> Result<Mapping> {
        check_len(len)?;
        let stat = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(Error::BadLayout("the memory is not a regular file"));
        }
        if u64::try_from(stat.st_size) != Ok(len) {
            return Err(Error::BadLayout(
                "the memory's size differs from the size announced",
            ));
        }
        let seals = rustix::fs::fcntl_get_seals(&fd)
            .map_err(|_| Error::BadLayout("the memory cannot carry seals (not a memfd)"))?;
        if !seals.contains(REQUIRED_SEALS) {
            return Err(Error::BadLayout(
                "the memory is not sealed against shrinking and further seals",
            ));
        }
        map(fd, len as usize).map_err(|e| match e {
            Error::Io(_) => Error::BadLayout("the memory cannot be mapped shared and writable"),
            e => e,
        })
    }

    /// The first byte of the mapping. Valid for [`len`](Self::len) bytes
    /// while `self` lives; the peer may write any of them at any time, so
    /// access them with atomic or volatile operations and check what is read.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The mapping's length in bytes (never 0).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a channel memory has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsFd for Mapping {
    /// The memfd behind the mapping.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is the mapping `map` made and only this
        // `Mapping` owns it; the pointers handed out are valid only while it
        // lives. The fd closes after, by `OwnedFd`'s drop.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A channel length must be at least 1 and at most [`MAX_CHANNEL_LEN`].
fn check_len(len: u64) -> Result<()> {
    if len == 0 {
        return Err(Error::BadLayout("the memory is empty"));
    }
    if len > MAX_CHANNEL_LEN as u64 {
        return Err(Error::TooLarge);
    }
    Ok(())
}

/// Maps the first `len` bytes of `fd` shared and read-write, and takes
/// ownership of `fd`. The caller has checked that the file is at least
/// `len` bytes long and cannot shrink.
fn map(fd: OwnedFd, len: usize) -> Result<Mapping> {
    // SAFETY: a fresh mapping at an address the kernel chooses (null hint,
    // no MAP_FIXED) cannot overlap any memory Rust knows of; the file is
    // sealed against shrinking, so every page of `len` stays backed.
    let ptr = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            &fd,
            0,
        )
    }?;
    let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::BadLayout("mapped at address 0"))?;
    Ok(Mapping { ptr, len, fd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_outside_the_bounds_are_refused() {
        assert!(matches!(Mapping::create(0), Err(Error::BadLayout(_))));
        assert!(matches!(
            Mapping::create(MAX_CHANNEL_LEN + 1),
            Err(Error::TooLarge)
        ));
    }

    #[test]
    fn a_created_mapping_is_sealed_zeroed_and_can_be_remapped_as_a_peer_would() {
        let m = Mapping::create(10_000).unwrap();
        let seals = rustix::fs::fcntl_get_seals(&m).unwrap();
        assert!(seals.contains(REQUIRED_SEALS));
        // SAFETY: 10,000 bytes are mapped; nobody else writes them.
        unsafe {
            assert_eq!(*m.as_ptr().add(9_999), 0);
            *m.as_ptr().add(9_999) = 7;
        }
        let dup = m.fd.try_clone().unwrap();
        let peer = Mapping::from_peer(dup, 10_000).unwrap();
        // SAFETY: as above; the two mappings share the memfd's pages.
        assert_eq!(unsafe { *peer.as_ptr().add(9_999) }, 7);
        let dup = m.fd.try_clone().unwrap();
        assert!(matches!(
            Mapping::from_peer(dup, 4096),
            Err(Error::BadLayout(_))
        ));
    }
}
