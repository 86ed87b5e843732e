//! A page mapped into this process: the writer's (read-write) and a
//! reader's (read-only, [`MappedPage`]). A reader trusts nothing in the
//! page: it checks the file's length before mapping, the header words after,
//! and every count and value of the snapshot it copies out (`page`).
//!
//! This file owns the mappings and their views as atomic words; it must not
//! interpret the words beyond the header (`page` does).
//!
//! What a reader cannot guard against: the page's owner (only the user can
//! reach the 0700 directory) shrinking the file after it was mapped, which
//! would fault the reader's next load; the writer never changes the length.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

use super::atomic::AtomicU64;
use super::page::{self, DATA_AT, DATA_WORDS, MAGIC_AT, PAGE_SIZE, SEQ_AT, SIZE_AT, VERSION_AT};
use super::page::{PageError, Snapshot};
use super::seqlock;

/// The words of the page.
const WORDS: usize = PAGE_SIZE / 8;

/// How many times a reader tries to copy the page before it calls it busy.
const READ_TRIES: u32 = 1000;

/// A shared mapping of one page file, unmapped when dropped.
pub(super) struct Mapping {
    ptr: NonNull<AtomicU64>,
}

// SAFETY: the mapping is plain shared memory reached only through atomic
// words; it may be used and dropped from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above: every access is an atomic load or store.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first [`PAGE_SIZE`] bytes of `file` shared, writable if
    /// `write`. The file must be at least that long.
    pub(super) fn new(file: &File, write: bool) -> io::Result<Mapping> {
        let prot = if write {
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE
        } else {
            rustix::mm::ProtFlags::READ
        };
        // SAFETY: a fresh mapping at an address the kernel chooses, of a
        // file at least `PAGE_SIZE` long (checked by both callers); it
        // aliases no Rust object.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                prot,
                rustix::mm::MapFlags::SHARED,
                file,
                0,
            )
        }?;
        let ptr = NonNull::new(ptr.cast::<AtomicU64>()).ok_or(io::ErrorKind::InvalidData)?;
        Ok(Mapping { ptr })
    }

    /// The page as atomic words.
    pub(super) fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is `PAGE_SIZE` bytes, page-aligned, lives as
        // long as `self`, and is only ever reached through atomics (here
        // and in every other process that maps the file).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), WORDS) }
    }

    /// The data words (after the header).
    pub(super) fn data(&self) -> &[AtomicU64] {
        &self.words()[DATA_AT..DATA_AT + DATA_WORDS]
    }

    /// The sequence word.
    pub(super) fn seq(&self) -> &AtomicU64 {
        &self.words()[SEQ_AT]
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, `PAGE_SIZE` long; nothing
        // borrows it any more (`words` borrows `self`).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), PAGE_SIZE) };
    }
}

/// Another process's stats page, mapped read-only: what `ferry top` reads.
///
/// ```no_run
/// let dir = ferry::rpc::RuntimeDir::user().unwrap();
/// let page = ferry::stats::MappedPage::open(&dir.path().join("top").join("4242")).unwrap();
/// let snap = page.read().unwrap();
/// println!("{} holds {} processors", snap.pid, snap.processors);
/// ```
pub struct MappedPage {
    map: Mapping,
}

/// Why a page could not be opened or read.
#[derive(Debug)]
pub enum OpenError {
    /// Opening, inspecting or mapping the file failed.
    Io(io::Error),
    /// The file is not a good page.
    Page(PageError),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::Page(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OpenError {}

impl MappedPage {
    /// Opens and maps the page at `path` (not following a symbolic link),
    /// after checking that it is a regular file of at least a page.
    ///
    /// # Errors
    /// [`OpenError::Io`] if the file cannot be opened or mapped;
    /// [`OpenError::Page`] with [`PageError::TooShort`] if it is not a
    /// regular file or is shorter than [`PAGE_SIZE`].
    pub fn open(path: &Path) -> Result<MappedPage, OpenError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(OpenError::Io)?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if !meta.is_file() || meta.len() < PAGE_SIZE as u64 {
            return Err(OpenError::Page(PageError::TooShort(meta.len())));
        }
        let map = Mapping::new(&file, false).map_err(OpenError::Io)?;
        Ok(MappedPage { map })
    }

    /// Reads one whole snapshot: checks the header, copies the data words
    /// under the sequence lock (trying again while a write overlaps, a
    /// bounded number of times) and checks what it copied.
    ///
    /// # Errors
    /// [`PageError`] says what is wrong with the page.
    pub fn read(&self) -> Result<Snapshot, PageError> {
        read_mapping(&self.map)
    }
}

/// [`MappedPage::read`] of any mapping.
pub(super) fn read_mapping(map: &Mapping) -> Result<Snapshot, PageError> {
    use super::atomic::Ordering::Relaxed;
    let w = map.words();
    page::check_header(
        w[MAGIC_AT].load(Relaxed),
        w[VERSION_AT].load(Relaxed),
        w[SIZE_AT].load(Relaxed),
    )?;
    let mut data = Box::new([0u64; DATA_WORDS]);
    if !seqlock::read(map.seq(), map.data(), &mut data[..], READ_TRIES) {
        return Err(PageError::Busy);
    }
    page::decode(&data)
}
