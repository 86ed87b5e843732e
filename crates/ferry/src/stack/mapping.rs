//! The mappings behind stacks and signal stacks, and how their guards are
//! made: the process's [`GuardMethod`], decided once; [`Mapping`], one
//! anonymous mapping with a guard at its low end; [`Span`], where a guarded
//! range lies whoever owns it. It must never hand out a range before its
//! guard is in place.

use std::io;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::io::Errno;
use rustix::mm::{self, Advice, MapFlags, MprotectFlags, ProtFlags};

use super::page_size;

/// Transparent huge page size on the platforms ferry supports; stacks at
/// least this large are marked `MADV_NOHUGEPAGE`.
const HUGE_PAGE: usize = 2 * 1024 * 1024;

/// How this process makes the guards of its stacks (and of the alternate
/// signal stacks); see the module documentation. Chosen once per process, on
/// the first mapping made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardMethod {
    /// Guard markers installed with `madvise(MADV_GUARD_INSTALL)` in the low
    /// pages of one read-write mapping: one VMA per stack (Linux 6.13+).
    Madvise,
    /// A `PROT_NONE` part made with `mprotect` below the read-write part:
    /// two VMAs per stack.
    Mprotect,
}

/// `MADV_GUARD_INSTALL` (Linux 6.13+); neither rustix nor libc names it yet.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Values of [`METHOD`].
pub(super) const METHOD_UNKNOWN: u8 = 0;
pub(super) const METHOD_MADVISE: u8 = 1;
pub(super) const METHOD_MPROTECT: u8 = 2;

/// The process's guard method: unknown until the first mapping tries
/// `MADV_GUARD_INSTALL`; the first answer is kept for good.
pub(super) static METHOD: AtomicU8 = AtomicU8::new(METHOD_UNKNOWN);

/// The guard method this process uses. Decides it first if no stack has been
/// made yet, by mapping (and unmapping) a one-page stack; fails only when
/// that mapping cannot be made.
pub fn guard_method() -> io::Result<GuardMethod> {
    if METHOD.load(Ordering::Relaxed) == METHOD_UNKNOWN {
        drop(Mapping::new(page_size(), page_size(), "probe stack")?);
    }
    Ok(match METHOD.load(Ordering::Relaxed) {
        METHOD_MADVISE => GuardMethod::Madvise,
        _ => GuardMethod::Mprotect,
    })
}

/// Records the first decision about the guard method; later ones are
/// ignored (a concurrent first mapping may have decided already).
pub(super) fn decide(method: u8) {
    let _ = METHOD.compare_exchange(METHOD_UNKNOWN, method, Ordering::Relaxed, Ordering::Relaxed);
}

/// One anonymous mapping: `guard` bytes of guard at the low end (markers or
/// `PROT_NONE`, see [`GuardMethod`]), the rest read-write. Unmapped on drop.
/// Used for thread stacks and for the alternate signal stacks.
pub(crate) struct Mapping {
    pub(super) span: Span,
}

/// Where one guarded range lies: `guard` bytes of guard at `base`, then the
/// usable part up to `base + len`. Owns nothing; a [`Mapping`] or an arena
/// region owns the memory.
#[derive(Clone, Copy)]
pub(crate) struct Span {
    pub(crate) base: NonNull<u8>,
    pub(crate) len: usize,
    pub(crate) guard: usize,
}

impl Span {
    /// Lowest usable address (just above the guard).
    pub(crate) fn bottom(&self) -> *mut u8 {
        self.base.as_ptr().wrapping_add(self.guard)
    }

    /// One past the highest usable address.
    pub(crate) fn top(&self) -> *mut u8 {
        self.base.as_ptr().wrapping_add(self.len)
    }

    /// Usable bytes.
    pub(crate) fn usable(&self) -> usize {
        self.len - self.guard
    }

    /// The guard's address range.
    pub(crate) fn guard_range(&self) -> Range<usize> {
        let lo = self.base.as_ptr() as usize;
        lo..lo + self.guard
    }
}

// SAFETY: a `Span` is an address range; nothing in it is tied to the kernel
// thread that made it, so it may move between threads, and `&Span` only hands
// out addresses. (Who may use the memory is up to its owner.)
unsafe impl Send for Span {}
// SAFETY: see `Send`; shared references expose no interior mutability.
unsafe impl Sync for Span {}

impl Mapping {
    /// Gives up ownership: the range stays mapped, and whoever keeps the
    /// returned span owns it (and may rebuild the mapping with
    /// [`Mapping::from_span`] to unmap it).
    pub(crate) fn into_span(self) -> Span {
        let span = self.span;
        std::mem::forget(self);
        span
    }

    /// The mapping of `span` again, owned (unmapped on drop).
    ///
    /// # Safety
    /// `span` came from [`Mapping::into_span`], and no other value owns
    /// the range.
    pub(crate) unsafe fn from_span(span: Span) -> Mapping {
        Mapping { span }
    }

    /// Maps `guard + usable` bytes (both already page multiples, `usable > 0`)
    /// with the guard at the low end, made by the process's [`GuardMethod`]
    /// (deciding it on the first call). `what` names the mapping in error
    /// messages.
    pub(crate) fn new(usable: usize, guard: usize, what: &str) -> io::Result<Mapping> {
        let len = guard
            .checked_add(usable)
            .ok_or_else(|| too_big(usable, guard))?;
        let map = if METHOD.load(Ordering::Relaxed) == METHOD_MPROTECT {
            Mapping::with_prot_none_guard(len, guard)
        } else {
            Mapping::with_guard_markers(len, guard)
        }
        .map_err(|e| map_failed(what, usable, guard, e))?;
        if len >= HUGE_PAGE {
            // SAFETY: advice on our own mapping; it changes no contents. The
            // whole range, so a guard-marker stack stays one VMA. Failure (a
            // kernel without THP) is harmless and ignored.
            let _ =
                unsafe { mm::madvise(map.span.base.as_ptr().cast(), len, Advice::LinuxNoHugepage) };
        }
        Ok(map)
    }

    /// An anonymous private mapping of `len` bytes with protection `prot`,
    /// owned (and unmapped on drop) by the returned value.
    fn map(len: usize, guard: usize, prot: ProtFlags) -> Result<Mapping, Errno> {
        // SAFETY: a fresh anonymous mapping at an address the kernel chooses
        // cannot alias any existing Rust object.
        let base = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                prot,
                MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::STACK,
            )
        }?;
        // mmap never returns null for a non-fixed mapping.
        let base = NonNull::new(base.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Mapping {
            span: Span { base, len, guard },
        })
    }

    /// The fallback: a `PROT_NONE` mapping whose usable part is then opened
    /// read-write, leaving the guard a separate `PROT_NONE` VMA.
    fn with_prot_none_guard(len: usize, guard: usize) -> Result<Mapping, Errno> {
        let map = Mapping::map(len, guard, ProtFlags::empty())?;
        // SAFETY: `[base + guard, base + len)` lies inside the mapping just
        // made, which nothing else references yet.
        unsafe {
            mm::mprotect(
                map.bottom().cast(),
                map.usable(),
                MprotectFlags::READ | MprotectFlags::WRITE,
            )
        }?;
        Ok(map)
    }

    /// A read-write mapping whose guard pages get guard markers; if the
    /// kernel has none (`EINVAL`, `ENOSYS`) the guard is made `PROT_NONE`
    /// instead and, if this was the first try, the process switches to the
    /// `mprotect` method for good.
    fn with_guard_markers(len: usize, guard: usize) -> Result<Mapping, Errno> {
        let map = Mapping::map(len, guard, ProtFlags::READ | ProtFlags::WRITE)?;
        match map.install_guard_markers() {
            Ok(()) => {
                decide(METHOD_MADVISE);
                Ok(map)
            }
            Err(e) if e == Errno::INVAL || e == Errno::NOSYS => {
                decide(METHOD_MPROTECT);
                // A kernel that refuses markers after accepting them (the
                // process called `mlockall(MCL_FUTURE)`, say) still gets a
                // guard: protect this mapping's guard the old way.
                // SAFETY: `[base, base + guard)` lies inside the mapping just
                // made, which nothing references yet.
                unsafe {
                    mm::mprotect(map.span.base.as_ptr().cast(), guard, MprotectFlags::empty())
                }?;
                Ok(map)
            }
            Err(e) => Err(e),
        }
    }

    /// `madvise(MADV_GUARD_INSTALL)` over the guard pages.
    fn install_guard_markers(&self) -> Result<(), Errno> {
        // SAFETY: the guard pages are the low end of the mapping this value
        // owns, fresh and handed to nobody yet.
        unsafe { install_guard_markers(&self.span) }
    }

    /// Lowest usable address (just above the guard).
    pub(crate) fn bottom(&self) -> *mut u8 {
        self.span.bottom()
    }

    /// Usable bytes.
    pub(crate) fn usable(&self) -> usize {
        self.span.usable()
    }
}

/// `madvise(MADV_GUARD_INSTALL)` over the guard pages of `span`, retried
/// when the kernel asks for it.
///
/// # Safety
/// `span` lies in a read-write anonymous mapping the caller owns, and
/// nothing references the guard pages (their contents are discarded).
pub(crate) unsafe fn install_guard_markers(span: &Span) -> Result<(), Errno> {
    let mut tries = 0;
    loop {
        // SAFETY: the caller's contract: the guard pages belong to a
        // mapping it owns and nothing references them. The advice turns
        // them into guard markers and touches nothing else. libc rather
        // than rustix because rustix's `Advice` has no guard value; 102 is
        // the kernel's `MADV_GUARD_INSTALL`.
        let r = unsafe { libc::madvise(span.base.as_ptr().cast(), span.guard, MADV_GUARD_INSTALL) };
        if r == 0 {
            return Ok(());
        }
        let e = Errno::from_io_error(&io::Error::last_os_error()).unwrap_or(Errno::INVAL);
        tries += 1;
        if (e != Errno::INTR && e != Errno::AGAIN) || tries >= 8 {
            return Err(e);
        }
    }
}

/// Gives the usable part of `span` back to the kernel (`MADV_DONTNEED`):
/// the next touch of each page gets a fresh zero page. The guard is not in
/// the range, and would survive it anyway: `MADV_DONTNEED` keeps guard
/// markers (checked on Linux 6.18), as it keeps `PROT_NONE`.
///
/// # Safety
/// No thread runs on the usable part and no reference into it exists.
pub(super) unsafe fn release_usable(span: &Span) -> io::Result<()> {
    // SAFETY: the caller's contract; discarding the contents is then only a
    // change of values (to zero).
    unsafe { mm::madvise(span.bottom().cast(), span.usable(), Advice::LinuxDontNeed) }
        .map_err(io::Error::from)
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let (base, len) = (self.span.base.as_ptr().cast(), self.span.len);
        // SAFETY: the range is exactly the mapping this value owns, and
        // dropping it means nothing uses the memory any more.
        if unsafe { mm::munmap(base, len) }.is_err() {
            // Only ENOMEM: with guard markers, neighbouring stacks may have
            // merged into one VMA, and unmapping one from the middle splits
            // it, which the kernel refuses when the process is exactly at
            // vm.max_map_count. Give the memory back and leak the address
            // range (still guarded, never reused) rather than fail a drop.
            // SAFETY: as above; discarding the contents of memory nobody
            // uses changes nothing observable.
            let _ = unsafe { mm::madvise(base, len, Advice::LinuxDontNeed) };
        }
    }
}

pub(super) fn too_big(usable: usize, guard: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "ferry: a stack of {usable} bytes with a {guard}-byte guard does not fit the address space"
        ),
    )
}

pub(super) fn map_failed(what: &str, usable: usize, guard: usize, e: Errno) -> io::Error {
    let hint = if e == Errno::NOMEM {
        let cap = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "?".to_owned());
        format!(
            "; the address space, the overcommit limit or vm.max_map_count ({cap}; each stack takes {}) is exhausted",
            match METHOD.load(Ordering::Relaxed) {
                METHOD_MADVISE => "one mapping, guard markers in use",
                _ => "two mappings, PROT_NONE guards in use",
            }
        )
    } else {
        String::new()
    };
    let err = io::Error::from(e);
    io::Error::new(
        err.kind(),
        format!(
            "ferry: cannot map a {} KiB {what} with a {} KiB guard: {err}{hint}",
            usable / 1024,
            guard / 1024
        ),
    )
}
