//! Guarded stacks for user-level threads: their mappings, their cache, and the
//! report that names a thread which ran off the end of one. This room owns the
//! stack memory, the guard registry and the SIGSEGV/SIGBUS handler; it must
//! never know how threads are scheduled, and its signal handler must never
//! lock, allocate or touch anything but atomics, the stack and `write(2)`.
//!
//! # Layout of one stack
//!
//! ```text
//!   low addresses                                          high addresses
//!   | guard             | usable: read-write, committed page by page      |
//!   ^ mapping start     ^ bottom()                                  top() ^
//! ```
//!
//! A stack is either a mapping of its own ([`Stack::new`]) or a slot carved
//! from one of the arena's regions (what a [`StackCache`], and so every
//! spawn, hands out for the sizes 64 KiB, 128 KiB, ..., 8 MiB): anonymous
//! private memory made with `MAP_NORESERVE | MAP_STACK`, so the kernel
//! commits a page only when it is first touched, and a stack costs address
//! space, not memory, until it is used. In a region, slots lie side by side
//! with the same layout, each stack's guard directly above the top of the
//! stack below. The guard is at
//! the low end because stacks grow down; a thread that runs into it faults,
//! and the fault handler ([`install_overflow_handler`]) looks the address up
//! in a lock-free registry of guard ranges and prints which thread overflowed
//! (id, name, stack size) before the process dies with SIGSEGV.
//!
//! # The guard's size, and what lies below it
//!
//! A function moves the stack pointer down by its whole frame at once and
//! then touches the frame wherever its code does. Rust, and C built with
//! `-fstack-clash-protection`, touch every page of a large frame in order
//! (a probe), so they cannot pass a guard of any size without faulting in
//! it. C built without it (the default of upstream gcc and clang, and of
//! Debian's gcc; Ubuntu's and Fedora's gcc turn it on) does not: a frame
//! with a 5,000-byte local array touched at both ends skips 5,000 bytes at
//! a time, and a one-page guard is stepped over into whatever lies below. The kernel places mappings top-down and
//! side by side, so what lies below a stack's guard is usually the *top*
//! of the stack mapped after it: the oldest, live frames of another thread.
//!
//! So the guard is as large as the frames that can be expected to skip it
//! ([`default_guard_size`]): **the stack's own usable size, at least
//! 64 KiB and at most 1 MiB** (256 KiB for the default stack). A program
//! whose code is all probed may choose one smaller size for every stack of
//! the process instead ([`set_guard_size`], `FERRY_STACK_GUARD`, down to
//! one page as a pthread's), which makes carving stacks cheaper
//! (`guard_size.rs` has the numbers).
//!
//! - **A frame that fits the stack is caught.** A frame of `f` bytes
//!   starting anywhere in the stack touches nothing lower than `bottom() -
//!   f`; with a guard of at least the stack size, every frame the stack
//!   could hold at all lands in the guard, never below it (for stacks up
//!   to 1 MiB; larger ones catch frames up to 1 MiB). Realistic C
//!   frames without probes are far smaller: `PATH_MAX` (4 KiB) and `BUFSIZ`
//!   (8 KiB) buffers, a 64 KiB I/O buffer at the most (portable threaded
//!   code also has to fit musl's 128 KiB default thread stack).
//! - **64 KiB at least**: the guard AArch64 Linux, glibc and gcc's own
//!   `-fstack-clash-protection` assume there (gcc on AArch64 probes only
//!   every 64 KiB, and lets a caller leave up to 1 KiB unprobed), so a
//!   smaller guard would let even protected C code through; and the largest
//!   single buffer above.
//! - **1 MiB at most**: the gap Linux itself keeps below a growing main
//!   stack since the Stack Clash disclosure (`stack_guard_gap`, 256 pages).
//!   A frame larger than that is not a realistic frame but an unchecked
//!   `alloca` or a mistake, and is what `-fstack-clash-protection` (in
//!   `ferry.pc`'s `Cflags`) exists for: with it every page is probed, and
//!   any guard is hit.
//!
//! Since each stack's guard lies right below its own usable part (in its
//! own mapping, or in its own slot of a region), two stacks side by side
//! are always separated by the upper one's guard: a stride of up to the
//! guard's size from any stack lands in its own guard (and the handler
//! reports it, by the faulting address), never in its neighbour, whatever
//! the kernel placed below.
//!
//! What the guard costs: no memory (it is never committed) and no extra
//! system call (the same one `madvise` or `mprotect` as a one-page guard,
//! made once per stack: when it is mapped, or when its slot is carved).
//! Address space: 512 KiB per default
//! stack, guard included: 50 GiB for 100,000 stacks out of 128 TiB.
//! Page tables: guard markers live in page-table entries, so the guard's
//! range needs its page-table pages; with stacks packed side by side every
//! 2 MiB of them holds some stack's touched top anyway, so the cost is one
//! 4 KiB page-table page per 2 MiB of stacks: about 100 MiB for 100,000
//! default stacks (the `PROT_NONE` method needs none for the guard).
//!
//! # Two ways to make the guard, and `vm.max_map_count`
//!
//! Linux caps a process at `vm.max_map_count` kernel mappings (VMAs): 65,530
//! by default (Fedora, Ubuntu 24.04 and Arch ship 1,048,576). How many VMAs a
//! stack takes depends on how its guard is made ([`GuardMethod`]):
//!
//! - **Guard markers** ([`GuardMethod::Madvise`], Linux 6.13+): the whole
//!   stack is mapped read-write and `madvise(MADV_GUARD_INSTALL)` puts guard
//!   markers in the page-table entries of the guard pages. A marker is not a
//!   VMA and not a protection change, so a stack is **one VMA**, and stacks
//!   the kernel places side by side even merge into one. A stack no longer
//!   counts against `vm.max_map_count` on its own: 100,000 stacks fit under
//!   the default cap. Carved stacks share their region's one VMA: a
//!   million default stacks take about 2,000. (Freeing stacks out of order splits merged VMAs again,
//!   but never into more than one VMA per live stack plus one.) Touching a
//!   marker faults with SIGSEGV like `PROT_NONE` does, with `si_code`
//!   `SEGV_MAPERR` rather than `SEGV_ACCERR`; the handler accepts any
//!   kernel-raised code. Markers survive `MADV_DONTNEED` and `MADV_FREE`
//!   (checked on Linux 6.18, as documented), so releasing a cached stack's
//!   pages keeps its guard; they are gone only with the mapping. A marker
//!   needs a page-table entry, so the guard may cost one page-table page
//!   when it is the only page of its 2 MiB region that is used. The guard
//!   no longer shows in `/proc/self/maps` (the stack is one `rw-p` line);
//!   `/proc/self/pagemap` flags its pages (bit 58) on Linux 6.15+.
//! - **`PROT_NONE`** ([`GuardMethod::Mprotect`], the fallback): the stack is
//!   mapped `PROT_NONE` and its usable part opened read-write with
//!   `mprotect`. Guard and usable part differ in protection and cannot
//!   merge, so each stack is **two VMAs**: with the 65,530 default about
//!   32,000 stacks can be alive at once, and 100,000 threads need `sysctl
//!   vm.max_map_count=262144` or more. Carving a guard out of a region
//!   splits the region's VMA the same way, so carved stacks cost two VMAs
//!   each too. When the cap is hit [`Stack::new`] (or the carving behind
//!   a [`StackCache`]) fails with an error that says so.
//!
//! The method is decided once per process, by the first mapping made (a
//! stack, a signal stack or [`guard_method`]): it tries the markers, and if
//! the kernel answers `EINVAL` (too old: unknown advice) or `ENOSYS`, that
//! mapping gets a `PROT_NONE` guard and every later one is made the old way.
//! Should the kernel refuse markers after having accepted them (a process
//! that called `mlockall(MCL_FUTURE)`: locked VMAs take no markers), that one
//! mapping gets a `PROT_NONE` guard. Alternate signal stacks are made the
//! same way.
//!
//! One cost of merging: unmapping a stack from the middle of a merged VMA
//! splits it, and the kernel refuses that split when the process is exactly
//! at `vm.max_map_count`. A dropped stack whose `munmap` fails has its pages
//! released instead and its (still guarded) address range leaked.
//!
//! # The default size
//!
//! [`DEFAULT_STACK_SIZE`] is 256 KiB (plus a 256 KiB guard). A stack
//! cannot grow or move (pointers into it are everywhere), so its size is the
//! thread's lifetime maximum, unlike Go's 8 KiB stacks that are copied when
//! they grow. What a stack costs is what it touches, not what it reserves:
//!
//! - **memory**: only touched pages are committed. A thread that calls a few
//!   functions deep touches 2–4 pages, so 100,000 such threads commit about
//!   0.8–1.6 GiB of a 24 GiB machine. (If every one of them touched its whole
//!   256 KiB they would need 25 GiB: the size is an upper bound, not a
//!   budget.)
//! - **page tables**: stacks are packed side by side, so one page-table page
//!   (covering 2 MiB) serves four 512 KiB stacks (guard included): 100,000
//!   stacks need about 100 MiB of page tables. Stacks of 2 MiB (Rust's
//!   `std::thread` default) or 8 MiB (glibc's) need at least one
//!   page-table page each: 400 MiB for 100,000.
//! - **huge pages**: a 256 KiB usable part never contains an aligned 2 MiB extent,
//!   so transparent huge pages can never turn one touched byte into 2 MiB of
//!   committed memory (Linux 6.7+ also excludes `MAP_STACK` mappings from
//!   THP; larger stacks get `MADV_NOHUGEPAGE` for older kernels).
//! - **address space**: 100,000 × 512 KiB is 50 GiB of the 128 TiB user half.
//!
//! 256 KiB is enough for ordinary Rust: formatting, I/O, a panic with its
//! message. 64 KiB would be tight for a panic that prints a backtrace; 2 MiB
//! would buy nothing but page tables. Threads that recurse deeply ask for
//! more when they are spawned.
//!
//! # What a blocked thread costs
//!
//! Resident memory per blocked thread is its touched stack pages, plus its
//! thread block (256 bytes), its guard-registry slot (120 bytes) and its
//! share of page tables: one 4 KiB page-table page per 2 MiB of stacks,
//! guards included, so 1 KiB at the default 512 KiB stride. Measured with
//! 10,000 threads blocked on a `ferry::sync::Condvar` on two processors
//! (`cargo test -p ferry --test spawn_syscalls
//! a_blocked_thread_keeps_few_stack_pages_resident -- --nocapture`, a debug
//! build: `mincore` of each stack, `VmRSS` and `VmPTE` of
//! `/proc/self/status`), Linux 6.18, x86_64, three runs:
//!
//! | stack pages resident per thread | `VmRSS` per thread | `VmPTE` per thread |
//! |---------------------------------|--------------------|--------------------|
//! | mean 1.5–1.8, at most 2         | 6.6–7.7 KB         | 1,038 B            |
//!
//! (`VmRSS` also counts what the test itself allocates per thread.) Most
//! threads park within their top page or two; the pages are those the
//! thread touched, whatever its size, so a smaller default would save
//! address space and page-table entries, not resident memory, and would
//! give deep Rust code (formatting, a panic's backtrace) less room. The
//! default stays 256 KiB. A stack with a hardware guard cannot cost less
//! than one page; goroutines start at 2 KiB because Go checks the stack
//! in every function prologue and copies stacks that grow, which ferry
//! cannot do for C code or for pointers into a stack.
//!
//! Address space and page tables are not given back until
//! [`StackCache::clear`]: after a burst of a million threads, about 1 GiB
//! of page-table pages stays (`MADV_DONTNEED` keeps them).
//!
//! # Reuse
//!
//! [`StackCache`] keeps freed stacks per size for the next spawn, as C-Threads
//! kept exited threads; see its documentation for the limits, the
//! magazines that make a spawn and an exit free of system calls in steady
//! state, why released stacks are released with `MADV_DONTNEED`, and the
//! scavenger thread that releases the global cache's in the background. The
//! arena's regions, and why a carved stack costs one VMA with guard markers
//! but two with the `PROT_NONE` fallback, are described in `arena`'s
//! documentation (the source of `stack/arena/mod.rs`).

mod arena;
mod cache;
mod guard_size;
mod mapping;
mod overflow;
mod registry;
mod shield;

use std::io;
use std::ops::Range;

use mapping::{Mapping, Span, release_usable, too_big};

pub(crate) use arena::Local as LocalStacks;
pub use arena::REGION_BYTES;
pub(crate) use arena::hold as hold_arena;
pub use cache::{CacheLimits, CacheStats, StackCache};
pub use guard_size::{GuardSizeError, set_guard_size};
pub use mapping::{GuardMethod, guard_method};
pub use overflow::{TagNamer, ensure_signal_stack, install_overflow_handler, set_tag_namer};
pub(crate) use registry::hold as hold_registry;
pub(crate) use registry::set_thread as registry_set_thread;
pub(crate) use shield::install as install_shield;

/// Calls `f(id, name, thread)` for every thread of `runtime` that owns a
/// stack (`thread`: the address [`registry_set_thread`] recorded), named
/// as the overflow report names it (the registered [`TagNamer`]'s name for
/// its tag, else its spawn name). The caller makes sure none of them runs.
pub(crate) fn registry_for_each_of_runtime(runtime: usize, mut f: impl FnMut(u64, &[u8], usize)) {
    registry::for_each_of_runtime(runtime, |mut owner, thread| {
        overflow::tag_name(&mut owner);
        f(owner.id, owner.name(), thread);
    });
}

/// The usable size of a stack made without an explicit size: 256 KiB.
///
/// Only touched pages are committed, so 100,000 threads that each touch a few
/// pages cost a few hundred MiB of memory, not 25 GiB; see the module
/// documentation for the full reasoning.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// The smallest guard the default rule gives a stack: 64 KiB, the guard
/// AArch64 Linux and gcc's stack-clash protection assume; see the module
/// documentation (a process may choose a smaller one, [`set_guard_size`]).
pub const MIN_GUARD_SIZE: usize = 64 * 1024;

/// The largest guard [`Stack::new`] gives a stack: 1 MiB, the gap Linux
/// keeps below a growing main stack; see the module documentation. Also
/// the largest a process may choose ([`set_guard_size`]).
pub const MAX_GUARD_SIZE: usize = 1024 * 1024;

/// The guard [`Stack::new`] gives a stack of `size` usable bytes: the
/// process's size if one was chosen ([`set_guard_size`],
/// `FERRY_STACK_GUARD`), else `size` rounded up to pages, clamped to
/// [`MIN_GUARD_SIZE`]..=[`MAX_GUARD_SIZE`] (both rounded up to pages), so
/// that any frame the stack can hold faults in the guard even when the code
/// that makes it does not probe its pages.
pub fn default_guard_size(size: usize) -> usize {
    if let Some(g) = guard_size::chosen() {
        return g;
    }
    let size = round_to_pages(size).unwrap_or(usize::MAX);
    let lo = round_to_pages(MIN_GUARD_SIZE).unwrap_or(MIN_GUARD_SIZE);
    let hi = round_to_pages(MAX_GUARD_SIZE).unwrap_or(MAX_GUARD_SIZE);
    size.clamp(lo, hi.max(lo))
}

/// Bytes of a thread's name kept for the overflow report; longer names are
/// cut at a character boundary.
pub const OWNER_NAME_MAX: usize = registry::NAME_CAP;

/// The system page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// `bytes` rounded up to a whole number of pages, or `None` on overflow.
pub(crate) fn round_to_pages(bytes: usize) -> Option<usize> {
    let page = page_size();
    bytes.checked_add(page - 1).map(|b| b & !(page - 1))
}

/// A thread stack: a guarded range (guard markers or `PROT_NONE`, see
/// [`GuardMethod`]) below a read-write part that the kernel commits page by
/// page as it is touched. Either its own mapping ([`Stack::new`]) or a piece
/// carved from one of the arena's regions (handed out by a [`StackCache`]
/// for the arena's sizes; see the module documentation).
///
/// Every stack is entered in the guard registry when it is made (or
/// carved), so a thread that overflows it is reported even before
/// [`set_owner`](Stack::set_owner) names it. Dropping a stack with its own
/// mapping unregisters and unmaps it; dropping a carved stack gives it back
/// to the arena (the global [`StackCache`]), since its memory belongs to a
/// region.
///
/// The memory of a fresh stack reads as zero; a stack reused from a
/// [`StackCache`] keeps whatever its previous thread left, unless the cache
/// released its pages.
pub struct Stack {
    span: Span,
    /// Who owns the memory: [`OWN_MAPPING`] for a mapping of its own
    /// (exactly `span`, unmapped with it), else the index in the arena's
    /// table of the region it was carved from (it only ever goes back to
    /// the arena). One word with `slot`, not an enum holding the mapping:
    /// a stack lives in every thread's header, which must stay within a
    /// small block (`header::raw`).
    region: u32,
    slot: u32,
}

/// [`Stack::region`] of a stack with its own mapping.
const OWN_MAPPING: u32 = u32::MAX;

impl Stack {
    /// Maps a stack with `size` usable bytes (rounded up to whole pages) and
    /// a guard of [`default_guard_size`]`(size)` bytes, in a mapping of its
    /// own (a [`StackCache`] hands out carved stacks instead).
    ///
    /// Installs the overflow handler the first time it is called in the
    /// process. Fails with `InvalidInput` for a zero or absurd size and with
    /// the kernel's error (usually `OutOfMemory`, with a message naming the
    /// likely limit) when the mapping cannot be made.
    pub fn new(size: usize) -> io::Result<Stack> {
        Stack::with_guard(size, default_guard_size(size))
    }

    /// Like [`Stack::new`] with `guard` bytes of guard (rounded up to whole
    /// pages, at least one page). A guard smaller than the default lets a
    /// frame that does not probe its pages (C built without
    /// `-fstack-clash-protection`) step over it into the mapping below; Rust
    /// probes every page of a large frame. Stacks with another guard than
    /// the default are not kept by a [`StackCache`].
    pub fn with_guard(size: usize, guard: usize) -> io::Result<Stack> {
        let usable = round_to_pages(size)
            .filter(|&s| s > 0)
            .ok_or_else(|| invalid_size(size))?;
        let guard = round_to_pages(guard.max(1)).ok_or_else(|| too_big(usable, guard))?;
        install_overflow_handler()?;
        let map = Mapping::new(usable, guard, "stack")?;
        let span = map.span;
        let g = span.guard_range();
        // The registry's lock is the processors' too (`shield`).
        let slot = shield::shielded(|| registry::register(g.start, g.end, usable))?;
        // Owned by the stack from here, by its span: `Drop` rebuilds the
        // mapping to unmap it.
        map.into_span();
        Ok(Stack {
            span,
            region: OWN_MAPPING,
            slot,
        })
    }

    /// A stack carved from region `region` at `span`, registered in `slot`.
    ///
    /// # Safety
    /// `span` lies in the arena's region `region`, its guard is installed,
    /// and no other `Stack` covers it.
    pub(crate) unsafe fn carved(span: Span, region: u32, slot: u32) -> Stack {
        debug_assert_ne!(region, OWN_MAPPING);
        Stack { span, region, slot }
    }

    /// The arena region this stack was carved from, if it was.
    pub(crate) fn region(&self) -> Option<u32> {
        (self.region != OWN_MAPPING).then_some(self.region)
    }

    /// Where the stack lies, guard included.
    pub(crate) fn span(&self) -> Span {
        self.span
    }

    /// Forgets a carved stack without giving it back (its region is being
    /// unmapped): unregisters it and returns nothing.
    pub(crate) fn dissolve(self) {
        let this = std::mem::ManuallyDrop::new(self);
        registry::unregister(this.slot);
    }

    /// One past the highest usable address: the initial stack pointer.
    /// Page-aligned, so 16-byte aligned as every supported ABI requires.
    pub fn top(&self) -> *mut u8 {
        self.span.top()
    }

    /// The lowest usable address, just above the guard.
    pub fn bottom(&self) -> *mut u8 {
        self.span.bottom()
    }

    /// Usable bytes: `top() - bottom()`.
    pub fn size(&self) -> usize {
        self.span.usable()
    }

    /// Bytes of guard below [`bottom`](Stack::bottom).
    pub fn guard_size(&self) -> usize {
        self.span.guard
    }

    /// Whether the guard is the one [`Stack::new`] gives a stack of this
    /// size (only such stacks are cached for reuse).
    pub fn has_default_guard(&self) -> bool {
        self.span.guard == default_guard_size(self.size())
    }

    /// The guard's address range (`guard_range().end == bottom()`).
    pub fn guard_range(&self) -> Range<usize> {
        self.span.guard_range()
    }

    /// Address space the stack occupies, guard included.
    pub fn reserved(&self) -> usize {
        self.span.len
    }

    /// Whether this stack was carved from one of the arena's regions
    /// rather than mapped on its own.
    pub fn is_carved(&self) -> bool {
        self.region != OWN_MAPPING
    }

    /// Whether `addr` lies in the usable part.
    pub fn contains(&self, addr: usize) -> bool {
        (self.bottom() as usize..self.top() as usize).contains(&addr)
    }

    /// Names the thread that runs on this stack, for the overflow report.
    /// Call it before the thread first runs. `name` is cut to
    /// [`OWNER_NAME_MAX`] bytes at a character boundary.
    pub fn set_owner(&mut self, id: u64, name: Option<&str>) {
        self.set_owner_tagged(id, name, 0);
    }

    /// [`set_owner`](Stack::set_owner) with the thread's embedder word
    /// (its tag), which the overflow report hands to the namer an embedder
    /// registered ([`set_tag_namer`]) to learn a name given later.
    pub fn set_owner_tagged(&mut self, id: u64, name: Option<&str>, tag: usize) {
        let name = name.unwrap_or("");
        let mut n = name.len().min(OWNER_NAME_MAX);
        while !name.is_char_boundary(n) {
            n -= 1;
        }
        registry::set_owner(self.slot, id, tag, &name.as_bytes()[..n]);
    }

    /// The stack's slot in the guard registry, where the runtime's deadlock
    /// report finds its owner and what the owner waits on
    /// (`crate::waits`).
    pub(crate) fn registry_slot(&self) -> u32 {
        self.slot
    }

    /// Forgets the owner; an overflow is then reported as an unowned stack's.
    pub fn clear_owner(&mut self) {
        registry::clear_owner(self.slot);
    }

    /// The owner as registered: id and (possibly cut) name, empty when none
    /// was given.
    pub fn owner(&self) -> Option<(u64, String)> {
        registry::owner(self.slot)
            .map(|(id, name)| (id, String::from_utf8_lossy(&name).into_owned()))
    }

    /// Returns the usable part's pages to the kernel (`MADV_DONTNEED`): the
    /// stack keeps its address range and its guard and reads as zero
    /// afterwards. Must not
    /// be called for a stack a thread is running on, which `&mut` ensures.
    pub fn release_pages(&mut self) -> io::Result<()> {
        // SAFETY: `&mut self` means no thread runs on this memory and no
        // reference into it exists.
        unsafe { release_usable(&self.span) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // The registry's and the cache's locks are the processors' too:
        // on a ferry thread, with its preemption held off.
        shield::shielded(|| self.give_back());
    }
}

impl Stack {
    /// [`Drop`]'s work: unmap a stack of its own, or give a carved one
    /// back to the cache.
    fn give_back(&mut self) {
        if self.region == OWN_MAPPING {
            // Unregister before the mapping goes, so a new mapping at the
            // same address is never mistaken for this stack's guard.
            registry::unregister(self.slot);
            // SAFETY: `span` is exactly the mapping `with_guard` made and
            // gave to this stack, which is being dropped: nothing else owns
            // or uses it.
            drop(unsafe { Mapping::from_span(self.span) });
        } else {
            // The memory belongs to a region: give the stack back to the
            // arena, still registered.
            // SAFETY: this value is being dropped, so the new one is the
            // only `Stack` covering the span.
            let back = unsafe { Stack::carved(self.span, self.region, self.slot) };
            StackCache::global().put(back);
        }
    }
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("bottom", &self.bottom())
            .field("top", &self.top())
            .field("size", &self.size())
            .field("guard", &self.guard_size())
            .field("carved", &self.is_carved())
            .finish()
    }
}

fn invalid_size(size: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("ferry: invalid stack size {size} (must be between 1 byte and the address space)"),
    )
}
