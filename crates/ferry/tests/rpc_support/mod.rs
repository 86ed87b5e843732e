//! What the channel tests share: the `rpc` sources (`src/rpc/layout.rs`,
//! `region.rs`, `slots.rs`, and `src/arch/shared_copy.rs` that `slots`
//! copies with)
//! included as they are, and shared mappings of a
//! memfd standing for the client's and the server's processes.

#![allow(dead_code)]

use std::ptr::null_mut;
use std::sync::atomic::AtomicU64;

use rustix::fd::OwnedFd;
use rustix::fs::{MemfdFlags, ftruncate, memfd_create};
use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

#[path = "../../src/rpc"]
pub mod rpc {
    pub(crate) mod layout;
    pub(crate) mod region;
    #[path = "../arch/shared_copy.rs"]
    pub(crate) mod shared_copy;
    pub(crate) mod slots;
}

use rpc::layout::{ChannelLayout, ChannelRegion, ChannelView, slot_stride};

/// One shared mapping of a memfd.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is only touched through `ChannelRegion` and `words`,
// whose accesses are all atomic (or the slots' assembly copies of long
// payloads), so threads may share it.
unsafe impl Sync for Mapping {}
// SAFETY: as above; the mapping belongs to no thread.
unsafe impl Send for Mapping {}

impl Mapping {
    pub fn new(fd: &OwnedFd, len: usize) -> Mapping {
        // SAFETY: a fresh shared mapping of `len` bytes of the memfd at an
        // address the kernel picks; nothing else is mapped over.
        let ptr = unsafe {
            mmap(
                null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .expect("mmap");
        Mapping {
            ptr: ptr.cast(),
            len,
        }
    }

    pub fn region(&self) -> ChannelRegion<'_> {
        // SAFETY: the mapping is page-aligned, `len` bytes, lives as long as
        // `self`, and is accessed as `Sync` above says.
        unsafe { ChannelRegion::from_raw(self.ptr, self.len) }.expect("page-aligned")
    }

    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: as in `region`.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are this mapping's, and no borrow of it outlives `self`.
        unsafe { munmap(self.ptr.cast(), self.len) }.expect("munmap");
    }
}

/// A memfd of the layout's size, mapped twice: (server's, client's).
pub fn two_mappings(layout: &ChannelLayout) -> (Mapping, Mapping) {
    let fd = memfd_create("ferry-rpc-test", MemfdFlags::CLOEXEC).expect("memfd_create");
    ftruncate(&fd, layout.total_size() as u64).expect("ftruncate");
    (
        Mapping::new(&fd, layout.total_size()),
        Mapping::new(&fd, layout.total_size()),
    )
}

/// Slot `index`'s word `word` (0 control, 1 op/length, 2.. payload).
pub fn slot_word<'r>(view: &ChannelView<'r>, index: u32, word: usize) -> &'r AtomicU64 {
    let stride = slot_stride(view.layout().slot_size()) / 8;
    &view.slot_words()[index as usize * stride + word]
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
