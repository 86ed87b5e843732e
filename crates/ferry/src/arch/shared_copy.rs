//! [`copy_shared`]: a byte copy over memory that another party may write
//! while it runs (a channel's slots, which a peer process may scribble on,
//! and which a late reply may still be writing in this process when the
//! protocol has already given the slot to a new call).
//!
//! Owns that one copy, as assembly: the copy is a `rep movsb`, which the
//! compiler cannot see into, so a concurrent write makes the bytes copied
//! just values (whoever decodes them checks them) and is not a data race
//! between Rust loads and stores. It must not know what the bytes mean or
//! who may write them.

/// Copies `n` bytes from `src` to `dst` with one `rep movsb` (fast string
/// moves on every x86-64 CPU ferry runs on; the processor picks the width).
///
/// # Safety
/// `src` is readable and `dst` writable for `n` bytes; the two ranges do
/// not overlap. Either may be written by another thread or process
/// meanwhile: the bytes that arrive are then unspecified, nothing else.
#[inline(always)]
pub(crate) unsafe fn copy_shared(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract covers both ranges; the direction flag
    // is clear (the ABI's rule at every Rust call boundary), so the copy
    // runs forwards over exactly `n` bytes, and it touches no stack.
    unsafe {
        core::arch::asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_exactly_its_bytes() {
        let src: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        for n in [0, 1, 7, 8, 9, 127, 128, 129, 4096, 4999] {
            let mut dst = vec![0xEEu8; n + 2];
            // SAFETY: `src` has `n + 1` bytes from 1, `dst` `n + 2`; two
            // allocations.
            unsafe { copy_shared(src.as_ptr().add(1), dst.as_mut_ptr().add(1), n) };
            assert_eq!(&dst[1..1 + n], &src[1..1 + n]);
            assert_eq!((dst[0], dst[n + 1]), (0xEE, 0xEE));
        }
    }
}
