//! Giving carved stacks' memory back in batches: the stacks of the given
//! magazines are sorted by address, neighbours joined into runs, and each
//! run released with one `madvise(MADV_DONTNEED)`, guards included (guard
//! markers and `PROT_NONE` both survive it). It must be called with no lock
//! held, on stacks nobody runs on.

use rustix::mm::{self, Advice};

use super::Magazine;
use crate::stack::page_size;

/// What one batch did.
#[derive(Default)]
pub(crate) struct Released {
    /// `madvise` calls made (one per run).
    pub(crate) calls: u64,
    /// Per class seen in a sampled run: (class, resident pages, stacks).
    pub(crate) samples: Vec<(usize, usize, usize)>,
}

/// Releases the pages of every stack in `mags` (each tagged with its
/// class), one `madvise` per run of adjacent stacks, and samples the
/// resident pages of the first run of each class with `mincore` first.
///
/// The caller owns the magazines, so no thread runs on their stacks.
pub(crate) fn release_runs(mags: &[(usize, Magazine)]) -> Released {
    let mut spans: Vec<(usize, usize, usize)> = mags
        .iter()
        .flat_map(|(class, m)| {
            m.stacks().iter().map(move |s| {
                let span = s.span();
                let lo = span.base.as_ptr() as usize;
                (lo, lo + span.len, *class)
            })
        })
        .collect();
    spans.sort_unstable_by_key(|&(lo, _, _)| lo);
    let mut out = Released::default();
    let mut i = 0;
    while i < spans.len() {
        let (lo, mut hi, class) = spans[i];
        let mut same_class = true;
        let mut j = i + 1;
        while j < spans.len() && spans[j].0 == hi {
            same_class &= spans[j].2 == class;
            hi = spans[j].1;
            j += 1;
        }
        if same_class
            && !out.samples.iter().any(|&(c, _, _)| c == class)
            && let Some(pages) = crate::sys::resident_pages(lo, hi - lo)
        {
            out.samples.push((class, pages, j - i));
        }
        // SAFETY: `[lo, hi)` is covered by stacks the caller's magazines
        // own (adjacent ones, in live regions): no thread runs on them and
        // no reference into them exists, so discarding their contents only
        // changes values to zero. Guards keep their markers or protection.
        let _ = unsafe { mm::madvise(lo as *mut _, hi - lo, Advice::LinuxDontNeed) };
        out.calls += 1;
        i = j;
    }
    debug_assert!(spans.iter().all(|&(lo, _, _)| lo % page_size() == 0));
    out
}
