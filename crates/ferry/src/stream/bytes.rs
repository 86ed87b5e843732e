//! [`Bytes`]: the storage of one stream, a power-of-two array of bytes
//! indexed by unbounded stream positions (taken modulo its length).
//!
//! This room owns the allocation and the copies in and out, wrapping at
//! the end; it must not decide who may touch which bytes (the ring's
//! protocol does, `ring.rs`), and it never reads a byte nobody wrote: the
//! array starts uninitialised, and only positions the writer published are
//! read back. The array is the stream's own allocation, or memory it
//! borrows (a shared mapping of a cross-process stream, `remote/`), which
//! it then never frees.

use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

/// A stream's byte array. Shared between the two ends, which copy into and
/// out of disjoint ranges of it as the ring's protocol allows.
pub(super) struct Bytes {
    ptr: NonNull<MaybeUninit<u8>>,
    len: usize,
    /// Whether the array is this `Bytes`' allocation (freed on drop).
    owned: bool,
}

// SAFETY: `Bytes` owns its allocation (plain bytes); the methods that touch
// it are `unsafe` and their callers (the ring) keep two threads from
// touching one byte at once.
unsafe impl Send for Bytes {}
// SAFETY: as above.
unsafe impl Sync for Bytes {}

impl Bytes {
    /// An uninitialised array of `len` bytes, a power of two.
    pub(super) fn new(len: usize) -> Bytes {
        debug_assert!(len.is_power_of_two());
        let b: Box<[MaybeUninit<u8>]> = Box::new_uninit_slice(len);
        let ptr =
            NonNull::new(Box::into_raw(b).cast::<MaybeUninit<u8>>()).expect("Box is non-null");
        Bytes {
            ptr,
            len,
            owned: true,
        }
    }

    /// The `len` bytes at `ptr` (a power of two), borrowed: never freed
    /// here.
    ///
    /// # Safety
    /// The bytes stay mapped, readable and writable while the `Bytes`
    /// lives; in this process only its holders touch them, under the
    /// contracts of its methods (another process may write them at any
    /// time: what a read finds is then just a value).
    #[cfg_attr(ferry_loom, allow(dead_code))] // its user needs rpc
    pub(super) unsafe fn borrowed(ptr: NonNull<u8>, len: usize) -> Bytes {
        debug_assert!(len.is_power_of_two());
        Bytes {
            ptr: ptr.cast(),
            len,
            owned: false,
        }
    }

    /// How many bytes the array holds.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Where position `at` lives, and how many bytes follow it before the
    /// end of the array.
    #[inline(always)]
    fn place(&self, at: u64) -> (usize, usize) {
        let i = (at as usize) & (self.len - 1);
        (i, self.len - i)
    }

    /// Copies `src` to positions `at..at + src.len()`, wrapping.
    ///
    /// # Safety
    /// `src.len() <= self.len()`, and nobody else reads or writes those
    /// positions during the call.
    #[inline(always)]
    pub(super) unsafe fn write(&self, at: u64, src: &[u8]) {
        let (i, to_end) = self.place(at);
        let first = src.len().min(to_end);
        let base = self.ptr.as_ptr().cast::<u8>();
        // SAFETY: `i + first <= len` and `src.len() - first <= i` (the
        // contract bounds `src.len()` by `len`), so both copies stay in the
        // array; the positions are ours alone (the contract), and `src` is
        // a borrowed slice, so it does not overlap the array's range we
        // own.
        unsafe {
            copy(src.as_ptr(), base.add(i), first);
            copy(src.as_ptr().add(first), base, src.len() - first);
        }
    }

    /// Copies positions `at..at + dst.len()` into `dst`, wrapping.
    ///
    /// # Safety
    /// `dst.len() <= self.len()`, every one of those positions was written
    /// (and the write is visible to the caller), and nobody writes them
    /// during the call.
    #[inline(always)]
    pub(super) unsafe fn read(&self, at: u64, dst: &mut [u8]) {
        let (i, to_end) = self.place(at);
        let first = dst.len().min(to_end);
        let base = self.ptr.as_ptr().cast::<u8>().cast_const();
        // SAFETY: in bounds as in `write`; the bytes are initialised and
        // not written meanwhile (the contract), and `dst` is an exclusive
        // borrow outside the array.
        unsafe {
            copy(base.add(i), dst.as_mut_ptr(), first);
            copy(base, dst.as_mut_ptr().add(first), dst.len() - first);
        }
    }

    /// Copies `src` to positions `at..at + src.len()` if they lie before
    /// the end of the array (one copy, no wrap); false, copying nothing,
    /// if they would wrap.
    ///
    /// # Safety
    /// As [`write`](Bytes::write).
    #[inline(always)]
    pub(super) unsafe fn write_unwrapped(&self, at: u64, src: &[u8]) -> bool {
        let (i, to_end) = self.place(at);
        if src.len() > to_end {
            return false;
        }
        // SAFETY: `i + src.len() <= len`, so the copy stays in the array;
        // the positions are ours alone (the contract), and `src` is a
        // borrowed slice outside the array.
        unsafe {
            copy(
                src.as_ptr(),
                self.ptr.as_ptr().cast::<u8>().add(i),
                src.len(),
            )
        };
        true
    }

    /// Copies positions `at..at + dst.len()` into `dst` if they lie before
    /// the end of the array (one copy, no wrap); false, copying nothing,
    /// if they would wrap.
    ///
    /// # Safety
    /// As [`read`](Bytes::read).
    #[inline(always)]
    pub(super) unsafe fn read_unwrapped(&self, at: u64, dst: &mut [u8]) -> bool {
        let (i, to_end) = self.place(at);
        if dst.len() > to_end {
            return false;
        }
        // SAFETY: in bounds as in `write_unwrapped`; the bytes are
        // initialised and not written meanwhile (the contract), and `dst`
        // is an exclusive borrow outside the array.
        unsafe {
            copy(
                self.ptr.as_ptr().cast::<u8>().cast_const().add(i),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        true
    }

    /// The bytes at positions `at..at + n`, cut at the end of the array
    /// (the rest follows at its start).
    ///
    /// # Safety
    /// `n <= self.len()`; every one of those positions was written (and
    /// the write is visible to the caller), and nobody writes them while
    /// the slice lives.
    #[inline(always)]
    pub(super) unsafe fn slice(&self, at: u64, n: usize) -> &[u8] {
        let (i, to_end) = self.place(at);
        // SAFETY: `i + min(n, to_end) <= len`; the bytes are initialised and
        // left alone while the slice lives (the contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(i), n.min(to_end)) }
    }
}

/// Copies `n` bytes from `src` to `dst`: up to 16 bytes inline, in two
/// overlapping loads and stores of the largest width that fits (a call to
/// `memcpy` costs more than a one-byte write itself), more through
/// `copy_nonoverlapping`.
///
/// # Safety
/// As [`ptr::copy_nonoverlapping`]: `src` readable and `dst` writable for
/// `n` bytes, not overlapping.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    /// Copies `n` bytes, `size_of::<T>() <= n <= 2 * size_of::<T>()`, as
    /// the first and the last `T` of the range.
    ///
    /// # Safety
    /// As `copy`, with `n` in that range.
    #[inline(always)]
    unsafe fn two<T: Copy>(src: *const u8, dst: *mut u8, n: usize) {
        let last = n - size_of::<T>();
        // SAFETY: both `T`s lie within the `n` bytes (the contract).
        unsafe {
            let a = src.cast::<T>().read_unaligned();
            let b = src.add(last).cast::<T>().read_unaligned();
            dst.cast::<T>().write_unaligned(a);
            dst.add(last).cast::<T>().write_unaligned(b);
        }
    }
    // SAFETY: each arm copies exactly the `n` bytes of the contract.
    unsafe {
        match n {
            0 => {}
            1 => *dst = *src,
            2..=3 => two::<u16>(src, dst, n),
            4..=7 => two::<u32>(src, dst, n),
            8..=16 => two::<u64>(src, dst, n),
            _ => ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let slice = ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        // SAFETY: made by `Box::into_raw` of a slice of this length in
        // `new`, and dropped once.
        drop(unsafe { Box::from_raw(slice) });
    }
}
