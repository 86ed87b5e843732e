//! The guard registry: which address ranges are stack guards and whose stack
//! each one guards, readable from a signal handler with loads only.
//! It must never free a slot's memory or make a reader wait for a writer.
//!
//! # Layout
//!
//! Slots live in chunks of [`CHUNK_SLOTS`], allocated on demand and never
//! freed; a fixed array of chunk pointers (null until allocated) finds them.
//! `HIGH` bounds the slot indices ever handed out, so a lookup scans
//! `0..HIGH`. Free slot indices wait in a mutex-protected list: only
//! [`register`] and [`unregister`] (ordinary code, never the handler) take it.
//!
//! # Protocol of one slot (a sequence lock with one writer)
//!
//! A slot belongs to exactly one writer at a time: to [`register`] between
//! taking its index from the free list and returning it, then to the owning
//! [`Stack`](super::Stack) (whose `&mut self` methods write it), then to
//! [`unregister`] until the index is back in the free list. The free-list
//! mutex orders one writer's stores before the next writer's.
//!
//! | word | written by | when | read by |
//! |------|------------|------|---------|
//! | `seq` | the slot's writer | odd before a change, even (+2) after | readers: before and after their loads |
//! | `guard_lo`, `guard_hi` | register / unregister | set at registration; both 0 = free | lookup: candidate test, then validated |
//! | `size` | register | registration | lookup |
//! | `id`, `tag`, `meta`, `name[]` | set_owner / clear_owner / register | before the thread first runs; cleared on registration and by the cache; `set_owner` writes only the name words its name covers (readers stop at the length in `meta`) | lookup, `owner()` |
//!
//! Beside them, outside the sequence lock (ordinary code reads them, never
//! the handler), each slot keeps for the runtime's deadlock report the
//! runtime its owner belongs to and the owner's thread block (see
//! `crate::waits`), both opaque addresses here:
//!
//! | word | written by | read by |
//! |------|------------|---------|
//! | `runtime`, `thread` | [`set_thread`] (the spawn, before the thread runs; 0 when its stack is released), cleared with the owner | [`for_each_of_runtime`], once every processor of that runtime sleeps |
//!
//! Writer: `seq = s + 1` (Relaxed), Release fence, field stores (Relaxed),
//! `seq = s + 2` (Release). Reader: `s1 = seq` (Acquire), skip if odd, field
//! loads (Relaxed), Acquire fence, `s2 = seq`; the snapshot is consistent
//! when `s1 == s2`. A reader retries a bounded number of times; if the writer
//! was interrupted by this very signal (same kernel thread, `seq` stays odd),
//! the handler uses its last, possibly torn, snapshot — the name may be
//! garbled, the process still dies with a report. All words are atomics, so
//! a torn read is a wrong value, never undefined behaviour.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Mutex, PoisonError};

/// Bytes of an owner's name kept.
pub(crate) const NAME_CAP: usize = 48;
const NAME_WORDS: usize = NAME_CAP / 8;
const CHUNK_SLOTS: usize = 1024;
const MAX_CHUNKS: usize = 4096;
/// Consistent-read attempts before a reader settles for a torn snapshot.
const READ_RETRIES: usize = 64;
/// `meta` bit saying an owner is registered; the low bits hold the name
/// length.
const OWNED: u64 = 1 << 63;

struct Slot {
    seq: AtomicU64,
    guard_lo: AtomicUsize,
    guard_hi: AtomicUsize,
    size: AtomicUsize,
    id: AtomicU64,
    /// The owner's embedder word (a ferry thread's tag), for the namer.
    tag: AtomicUsize,
    meta: AtomicU64,
    name: [AtomicU64; NAME_WORDS],
    runtime: AtomicUsize,
    thread: AtomicUsize,
}

impl Slot {
    fn empty() -> Slot {
        Slot {
            seq: AtomicU64::new(0),
            guard_lo: AtomicUsize::new(0),
            guard_hi: AtomicUsize::new(0),
            size: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            tag: AtomicUsize::new(0),
            meta: AtomicU64::new(0),
            name: std::array::from_fn(|_| AtomicU64::new(0)),
            runtime: AtomicUsize::new(0),
            thread: AtomicUsize::new(0),
        }
    }

    /// Runs `f`'s relaxed stores as one change under the sequence lock.
    /// Only the slot's single writer (see the module protocol) may call it.
    fn write(&self, f: impl FnOnce(&Slot)) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        f(self);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    fn load(&self) -> Snapshot {
        let mut name = [0u8; NAME_CAP];
        for (i, w) in self.name.iter().enumerate() {
            let bytes = w.load(Ordering::Relaxed).to_ne_bytes();
            name[i * 8..i * 8 + 8].copy_from_slice(&bytes);
        }
        let meta = self.meta.load(Ordering::Relaxed);
        Snapshot {
            guard_lo: self.guard_lo.load(Ordering::Relaxed),
            guard_hi: self.guard_hi.load(Ordering::Relaxed),
            size: self.size.load(Ordering::Relaxed),
            owned: meta & OWNED != 0,
            id: self.id.load(Ordering::Relaxed),
            tag: self.tag.load(Ordering::Relaxed),
            name_len: ((meta & !OWNED) as usize).min(NAME_CAP),
            name,
        }
    }

    /// A consistent snapshot if one can be had in [`READ_RETRIES`] attempts,
    /// else the last torn one. Loads only: safe in a signal handler.
    fn read(&self) -> Snapshot {
        let mut last = self.load();
        for _ in 0..READ_RETRIES {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            last = self.load();
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                break;
            }
        }
        last
    }
}

/// What the registry knows about one stack.
#[derive(Clone, Copy)]
pub(crate) struct Snapshot {
    pub(crate) guard_lo: usize,
    pub(crate) guard_hi: usize,
    pub(crate) size: usize,
    pub(crate) owned: bool,
    pub(crate) id: u64,
    pub(crate) tag: usize,
    pub(crate) name_len: usize,
    pub(crate) name: [u8; NAME_CAP],
}

impl Snapshot {
    pub(crate) fn name(&self) -> &[u8] {
        &self.name[..self.name_len]
    }
}

struct FreeList {
    free: Vec<u32>,
    next: usize,
}

static CHUNKS: [AtomicPtr<Slot>; MAX_CHUNKS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_CHUNKS];
static HIGH: AtomicUsize = AtomicUsize::new(0);
static FREE: Mutex<FreeList> = Mutex::new(FreeList {
    free: Vec::new(),
    next: 0,
});

/// The slot at `index`, if its chunk exists. Loads only.
/// Holds the free list's lock (for a fork: see `stack::hold_for_fork`).
pub(crate) fn hold() -> Box<dyn std::any::Any> {
    Box::new(FREE.lock().unwrap_or_else(PoisonError::into_inner))
}

fn slot(index: usize) -> Option<&'static Slot> {
    let chunk = CHUNKS.get(index / CHUNK_SLOTS)?.load(Ordering::Acquire);
    if chunk.is_null() {
        return None;
    }
    // SAFETY: a non-null chunk pointer comes from a leaked `Box<[Slot]>` of
    // `CHUNK_SLOTS` slots (see `claim`) that is never freed, and
    // `index % CHUNK_SLOTS` is within it; the Acquire load pairs with the
    // Release store that published the initialised chunk.
    Some(unsafe { &*chunk.add(index % CHUNK_SLOTS) })
}

/// Takes a free slot index, allocating a chunk when the last one is full.
fn claim() -> io::Result<usize> {
    let mut list = FREE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(i) = list.free.pop() {
        return Ok(i as usize);
    }
    let index = list.next;
    let chunk = index / CHUNK_SLOTS;
    if chunk >= MAX_CHUNKS {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "ferry: more than {} stacks alive at once",
                CHUNK_SLOTS * MAX_CHUNKS
            ),
        ));
    }
    if CHUNKS[chunk].load(Ordering::Relaxed).is_null() {
        let slots: Box<[Slot]> = (0..CHUNK_SLOTS).map(|_| Slot::empty()).collect();
        let leaked: &'static mut [Slot] = Box::leak(slots);
        CHUNKS[chunk].store(leaked.as_mut_ptr(), Ordering::Release);
    }
    list.next = index + 1;
    HIGH.store(list.next, Ordering::Release);
    Ok(index)
}

/// Enters a guard range and its stack's usable size; returns the slot index.
pub(crate) fn register(guard_lo: usize, guard_hi: usize, size: usize) -> io::Result<u32> {
    let index = claim()?;
    let s = slot(index).expect("claimed slot's chunk is allocated");
    s.runtime.store(0, Ordering::Relaxed);
    s.thread.store(0, Ordering::Relaxed);
    s.write(|s| {
        s.size.store(size, Ordering::Relaxed);
        s.id.store(0, Ordering::Relaxed);
        s.tag.store(0, Ordering::Relaxed);
        s.meta.store(0, Ordering::Relaxed);
        s.guard_hi.store(guard_hi, Ordering::Relaxed);
        s.guard_lo.store(guard_lo, Ordering::Relaxed);
    });
    // Indices stay below CHUNK_SLOTS * MAX_CHUNKS = 2^22.
    Ok(index as u32)
}

/// Removes a stack's entry and frees its slot.
pub(crate) fn unregister(index: u32) {
    let Some(s) = slot(index as usize) else {
        return;
    };
    s.write(|s| {
        s.guard_lo.store(0, Ordering::Relaxed);
        s.guard_hi.store(0, Ordering::Relaxed);
        s.meta.store(0, Ordering::Relaxed);
    });
    FREE.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .free
        .push(index);
}

/// Records the owner of the stack in slot `index`: its id, its embedder
/// word `tag` and its `name` (at most [`NAME_CAP`] bytes).
pub(crate) fn set_owner(index: u32, id: u64, tag: usize, name: &[u8]) {
    let Some(s) = slot(index as usize) else {
        return;
    };
    let name = &name[..name.len().min(NAME_CAP)];
    s.write(|s| {
        s.id.store(id, Ordering::Relaxed);
        s.tag.store(tag, Ordering::Relaxed);
        // Only the words the name covers: readers stop at its length (an
        // unnamed thread, the common case, writes none).
        for (w, chunk) in s.name.iter().zip(name.chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            w.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        s.meta.store(OWNED | name.len() as u64, Ordering::Relaxed);
    });
}

/// Forgets the owner of the stack in slot `index`.
pub(crate) fn clear_owner(index: u32) {
    let Some(s) = slot(index as usize) else {
        return;
    };
    s.runtime.store(0, Ordering::Relaxed);
    s.thread.store(0, Ordering::Relaxed);
    s.write(|s| {
        s.id.store(0, Ordering::Relaxed);
        s.tag.store(0, Ordering::Relaxed);
        s.meta.store(0, Ordering::Relaxed);
    });
}

/// The owner of the stack in slot `index`, if one is registered.
pub(crate) fn owner(index: u32) -> Option<(u64, Vec<u8>)> {
    let snap = slot(index as usize)?.read();
    snap.owned.then(|| (snap.id, snap.name().to_vec()))
}

/// The entry whose guard contains `addr`. Loads only, no locks, no
/// allocation: callable from a signal handler.
pub(crate) fn lookup(addr: usize) -> Option<Snapshot> {
    let high = HIGH.load(Ordering::Acquire);
    let mut index = 0;
    while index < high {
        let chunk = CHUNKS
            .get(index / CHUNK_SLOTS)
            .map_or(ptr::null_mut(), |c| c.load(Ordering::Acquire));
        let end = (index - index % CHUNK_SLOTS + CHUNK_SLOTS).min(high);
        if chunk.is_null() {
            index = end;
            continue;
        }
        while index < end {
            // SAFETY: as in `slot`: a published chunk of `CHUNK_SLOTS` slots
            // that is never freed, and `index % CHUNK_SLOTS` is within it.
            let s = unsafe { &*chunk.add(index % CHUNK_SLOTS) };
            let lo = s.guard_lo.load(Ordering::Relaxed);
            if lo != 0 && lo <= addr && addr < s.guard_hi.load(Ordering::Relaxed) {
                let snap = s.read();
                if snap.guard_lo <= addr && addr < snap.guard_hi {
                    return Some(snap);
                }
            }
            index += 1;
        }
    }
    None
}

/// Records the runtime and the thread block (addresses naming them, 0 for
/// none) of the thread that owns the stack in slot `index`.
pub(crate) fn set_thread(index: u32, runtime: usize, thread: usize) {
    if let Some(s) = slot(index as usize) {
        s.thread.store(thread, Ordering::Relaxed);
        s.runtime.store(runtime, Ordering::Relaxed);
    }
}

/// Calls `f(owner, thread)` for every owned stack whose owner belongs to
/// `runtime`. The caller makes sure those owners are not running (their
/// last writes happen before this reads).
pub(crate) fn for_each_of_runtime(runtime: usize, mut f: impl FnMut(Snapshot, usize)) {
    let high = HIGH.load(Ordering::Acquire);
    for index in 0..high {
        let Some(s) = slot(index) else {
            continue;
        };
        if s.runtime.load(Ordering::Relaxed) != runtime {
            continue;
        }
        let snap = s.read();
        if snap.owned && snap.guard_lo != 0 {
            f(snap, s.thread.load(Ordering::Relaxed));
        }
    }
}
