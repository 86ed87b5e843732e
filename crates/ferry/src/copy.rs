//! [`copy`]: the byte copy of the paths that move a message's bytes (a
//! stream's ring, a call's slot), sized for the short copies those paths
//! make most.
//!
//! Owns only the copy; it must not know what the bytes are or who may
//! touch them (its callers' protocols decide that).

use std::ptr;

/// Copies up to this many bytes inline, a word at a time; longer copies
/// go to `copy_nonoverlapping` (`memcpy`), whose call and size dispatch
/// cost more than a few word moves and which wins on long copies.
const SHORT: usize = 128;

/// Copies `n` bytes from `src` to `dst`: up to 16 bytes in two overlapping
/// loads and stores of the largest width that fits, up to [`SHORT`] bytes
/// in 8-byte words (the last one overlapping), more through
/// `copy_nonoverlapping`.
///
/// # Safety
/// As [`ptr::copy_nonoverlapping`]: `src` readable and `dst` writable for
/// `n` bytes, not overlapping.
#[inline(always)]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
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
    /// Copies `n` bytes, `8 < n`, as the 8-byte words from the start and
    /// then the last 8 bytes (overlapping the word before).
    ///
    /// # Safety
    /// As `copy`, with `n > 8`.
    #[inline(always)]
    unsafe fn words(src: *const u8, dst: *mut u8, n: usize) {
        let mut i = 0;
        while i + 8 < n {
            // SAFETY: `i + 8 < n`: the word lies within the `n` bytes.
            unsafe {
                let w = src.add(i).cast::<u64>().read_unaligned();
                dst.add(i).cast::<u64>().write_unaligned(w);
            }
            i += 8;
        }
        // SAFETY: `n > 8`, so `n - 8..n` lies within the `n` bytes.
        unsafe {
            let w = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.add(n - 8).cast::<u64>().write_unaligned(w);
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
            17..=SHORT => words(src, dst, n),
            _ => ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_copies_exactly_its_bytes() {
        let src: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        for n in 0..600 {
            for off in [0, 1, 7] {
                let mut dst = vec![0xEEu8; n + 16];
                // SAFETY: `src` has `off + n` bytes, `dst` `n + 16`; two
                // allocations, so no overlap.
                unsafe { copy(src.as_ptr().add(off), dst.as_mut_ptr().add(3), n) };
                assert_eq!(&dst[3..3 + n], &src[off..off + n], "n {n} off {off}");
                assert!(dst[..3].iter().all(|&b| b == 0xEE));
                assert!(
                    dst[3 + n..].iter().all(|&b| b == 0xEE),
                    "n {n}: wrote past the end"
                );
            }
        }
    }
}
