//! The stack arena: large reserved regions carved into guarded stacks,
//! and the magazines that move carved stacks between processors and a
//! [`StackCache`](super::StackCache)'s depot without system calls. This
//! room owns the regions and the free lists of carved stacks; it must never
//! unmap a region while a stack carved from it is out, and never give a
//! page back (or take a lock) on the path of one spawn or one exit.
//!
//! # Regions and classes
//!
//! A class is a usable size that is a power of two from 64 KiB to 8 MiB
//! (the default size, 256 KiB, is one of them), with the guard
//! [`default_guard_size`] gives it. A [`Region`] is one anonymous mapping
//! of about [`REGION_BYTES`] (`PRIVATE | NORESERVE | STACK`, read-write,
//! `MADV_NOHUGEPAGE` over all of it) cut into equal slots of one class:
//! guard, then usable part, then the next slot's guard. Slots are carved
//! lazily, by raising the region's high-water mark under the arena lock;
//! each carved stack gets its guard (one `madvise(MADV_GUARD_INSTALL)`, or
//! one `mprotect` with the fallback) and its guard-registry slot once, when
//! carved, and keeps both for good. Two stacks side by side are therefore
//! separated by the upper one's guard by construction.
//!
//! Carving changes no VMA with guard markers: a region stays one mapping,
//! so a million default stacks take about 2,000 VMAs. With the `PROT_NONE`
//! fallback ([`GuardMethod::Mprotect`](super::GuardMethod)) each carved
//! guard splits the region, and a stack costs two VMAs as a stack with its
//! own mapping does: about 32,000 stacks fit under the default
//! `vm.max_map_count` of 65,530, after which carving fails with `ENOMEM`
//! (the error says which limit).
//!
//! A region is unmapped only by [`StackCache::clear`](super::StackCache::clear),
//! and only when every stack carved from it is back in that cache.
//!
//! # Magazines
//!
//! Free carved stacks move in magazines of [`MAGAZINE`] stacks (Bonwick's
//! magazines, see `depot.rs` and `local.rs`): a processor keeps a loaded
//! and a previous magazine and takes the cache lock only to swap a full or
//! empty one with the depot, once per 64 spawns or exits.

mod depot;
mod local;
mod release;

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::io::Errno;
use rustix::mm::{self, Advice, MapFlags, MprotectFlags, ProtFlags};

pub(crate) use depot::{Depot, Magazine};
pub(crate) use local::Local;
pub(crate) use release::release_runs;

use super::mapping::{
    METHOD, METHOD_MADVISE, METHOD_MPROTECT, Span, decide, install_guard_markers, map_failed,
};
use super::{
    Stack, default_guard_size, guard_method, install_overflow_handler, page_size, registry,
};

/// Stacks per magazine.
pub(crate) const MAGAZINE: usize = 64;

/// The size of one region, about: a whole number of slots of its class, at
/// least one.
pub const REGION_BYTES: usize = 256 * 1024 * 1024;

/// The smallest class's usable size.
const SMALLEST: usize = 64 * 1024;

/// Number of classes: 64 KiB, 128 KiB, ..., 8 MiB.
pub(crate) const CLASSES: usize = 8;

/// The class of stacks with `usable` bytes (already rounded to pages), if
/// the arena carves such stacks.
pub(crate) fn class_of(usable: usize) -> Option<usize> {
    if usable < SMALLEST || !usable.is_power_of_two() || usable < page_size() {
        return None;
    }
    let class = (usable / SMALLEST).trailing_zeros() as usize;
    (class < CLASSES).then_some(class)
}

/// The usable size of stacks of `class`.
pub(crate) fn class_size(class: usize) -> usize {
    SMALLEST << class
}

/// One reserved region: slots of one class, carved up to `carved`.
struct Region {
    base: NonNull<u8>,
    len: usize,
    class: usize,
    guard: usize,
    stride: usize,
    carved: usize,
    /// False once unmapped (indices stay stable; the entry is never reused).
    live: bool,
}

// SAFETY: a `Region` describes an address range; the arena lock guards
// every use of it, and nothing in it is tied to a kernel thread.
unsafe impl Send for Region {}

/// The arena's region table.
static REGIONS: Mutex<Vec<Region>> = Mutex::new(Vec::new());

/// Live regions (for `CacheStats::regions`).
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn lock() -> MutexGuard<'static, Vec<Region>> {
    REGIONS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Holds the arena lock (for a fork).
pub(crate) fn hold() -> Box<dyn std::any::Any> {
    Box::new(lock())
}

/// Regions mapped now, over all classes.
pub(crate) fn regions() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// How many stacks have been carved from region `region`.
pub(crate) fn carved_in(region: u32) -> usize {
    lock().get(region as usize).map_or(0, |r| r.carved)
}

/// Maps a new region for `class`.
fn map_region(class: usize) -> io::Result<Region> {
    let usable = class_size(class);
    let guard = default_guard_size(usable);
    let stride = usable + guard;
    let len = (REGION_BYTES / stride).max(1) * stride;
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses
    // cannot alias any existing Rust object.
    let base = unsafe {
        mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::STACK,
        )
    }
    .map_err(|e| map_failed("stack region", usable, guard, e))?;
    // SAFETY: advice on the mapping just made; it changes no contents, and
    // failure (a kernel without THP) is harmless.
    let _ = unsafe { mm::madvise(base, len, Advice::LinuxNoHugepage) };
    let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::from(Errno::NOMEM))?;
    LIVE.fetch_add(1, Ordering::Relaxed);
    Ok(Region {
        base,
        len,
        class,
        guard,
        stride,
        carved: 0,
        live: true,
    })
}

/// Takes up to `n` fresh slots of `class` (mapping a region if none has
/// room): the region's index, the spans and their guard size.
fn take_slots(class: usize, n: usize) -> io::Result<(u32, Vec<Span>)> {
    let mut regions = lock();
    let has_room = |r: &Region| r.live && r.class == class && r.carved * r.stride < r.len;
    let index = match regions.iter().rposition(has_room) {
        Some(i) => i,
        None => {
            regions.push(map_region(class)?);
            regions.len() - 1
        }
    };
    let r = &mut regions[index];
    let room = r.len / r.stride - r.carved;
    let spans = (r.carved..r.carved + n.min(room))
        .map(|i| Span {
            base: NonNull::new(r.base.as_ptr().wrapping_add(i * r.stride))
                .expect("inside a mapping"),
            len: r.stride,
            guard: r.guard,
        })
        .collect::<Vec<_>>();
    r.carved += spans.len();
    let index = u32::try_from(index).map_err(|_| io::Error::from(Errno::NOMEM))?;
    Ok((index, spans))
}

/// Makes the guard of a freshly carved `span`, by the process's method.
fn make_guard(span: &Span) -> io::Result<()> {
    if METHOD.load(Ordering::Relaxed) == METHOD_MADVISE {
        // SAFETY: the span was just carved from a region the arena owns and
        // nothing references it yet.
        match unsafe { install_guard_markers(span) } {
            Ok(()) => return Ok(()),
            Err(e) if e == Errno::INVAL || e == Errno::NOSYS => decide(METHOD_MPROTECT),
            Err(e) => return Err(e.into()),
        }
    }
    // SAFETY: as above; the guard pages become inaccessible, which is what
    // they are for. This splits the region's VMA (see the module docs).
    unsafe {
        mm::mprotect(
            span.base.as_ptr().cast(),
            span.guard,
            MprotectFlags::empty(),
        )
    }
    .map_err(|e| {
        map_failed(
            "stack guard (PROT_NONE, two mappings per stack)",
            span.usable(),
            span.guard,
            e,
        )
    })
}

/// Carves up to `n` new stacks of `class` (at least one unless it fails):
/// guard made, registered, no owner.
pub(crate) fn carve(class: usize, n: usize) -> io::Result<Vec<Stack>> {
    install_overflow_handler()?;
    guard_method()?;
    let (region, spans) = take_slots(class, n.max(1))?;
    let mut stacks = Vec::with_capacity(spans.len());
    for span in spans {
        // A slot whose guard or registration fails is left unused (its
        // address range stays reserved, never handed out).
        let made = make_guard(&span).and_then(|()| {
            let g = span.guard_range();
            registry::register(g.start, g.end, span.usable())
        });
        match made {
            // SAFETY: the span is a fresh slot of `region`, guarded, and
            // this is the only `Stack` made for it.
            Ok(slot) => stacks.push(unsafe { Stack::carved(span, region, slot) }),
            Err(e) if stacks.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(stacks)
}

/// Unmaps region `region`, whose every carved stack the caller holds in
/// `stacks`; unregisters them. Gives the stacks back when they are not all
/// there (or not all of that region).
pub(crate) fn unmap_region(region: u32, stacks: Vec<Stack>) -> Result<(), Vec<Stack>> {
    let mut regions = lock();
    let Some(r) = regions.get_mut(region as usize) else {
        return Err(stacks);
    };
    if !r.live || r.carved != stacks.len() || stacks.iter().any(|s| s.region() != Some(region)) {
        drop(regions);
        return Err(stacks);
    }
    for s in stacks {
        s.dissolve();
    }
    r.live = false;
    // SAFETY: every stack carved from the region was handed in and is gone
    // (dissolved), so nothing uses or refers to its memory.
    let _ = unsafe { mm::munmap(r.base.as_ptr().cast(), r.len) };
    LIVE.fetch_sub(1, Ordering::Relaxed);
    Ok(())
}
