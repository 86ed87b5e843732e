//! Which stack the caller runs on: a ferry thread's own, the stack an
//! adopted flow ran on before its adoption, or a plain kernel thread's
//! pthread stack. `sync::owner` asks it to tell whether a lock's holder
//! mark is the caller's.
//!
//! This room owns those ranges; it must not block or switch (it runs
//! inside lock and unlock paths).

use std::cell::Cell;
use std::ops::Range;

crate::thread_local! {
    /// The stack range an adopted flow runs on (ferry did not make it, so
    /// its header has none); set by [`note_adopted_stack`].
    static ADOPTED_STACK: Cell<Option<(usize, usize)>> = Cell::new(None);
}

std::thread_local! {
    /// The calling kernel thread's pthread stack, once asked.
    static KERNEL_STACK: Cell<Option<Option<(usize, usize)>>> = const { Cell::new(None) };
}

/// The range of the stack the caller runs on, if known.
pub(crate) fn caller_stack() -> Option<Range<usize>> {
    if let Some(e) = crate::upcall::enter()
        && let Some(t) = e.p.current_ref(&e.tok)
    {
        if let Some(r) = t.stack_range() {
            return Some(r);
        }
        // An adopted flow: the entry must not be held across the
        // thread-local's lookup, which enters on its own.
        drop(e);
        return ADOPTED_STACK.with(Cell::get).map(|(lo, hi)| lo..hi);
    }
    let (lo, hi) = KERNEL_STACK.with(|c| {
        if let Some(known) = c.get() {
            return known;
        }
        let asked = kernel_thread_stack();
        c.set(Some(asked));
        asked
    })?;
    Some(lo..hi)
}

/// Records `stack` as the range the calling (just adopted) ferry thread runs
/// on; `Builder::adopt` calls it with what [`caller_stack`] said before the
/// adoption.
pub(crate) fn note_adopted_stack(stack: Option<Range<usize>>) {
    ADOPTED_STACK.with(|c| c.set(stack.map(|r| (r.start, r.end))));
}

/// The calling kernel thread's stack as the C library describes it.
fn kernel_thread_stack() -> Option<(usize, usize)> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `attr` is written by a successful `pthread_getattr_np`, read
    // only then, and destroyed once.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut base = std::ptr::null_mut();
        let mut size = 0;
        let got = libc::pthread_attr_getstack(attr.as_ptr(), &mut base, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        (got == 0 && size != 0).then(|| (base as usize, base as usize + size))
    }
}
