//! The shield: how code of this room that takes a lock the processors
//! take too runs with the calling ferry thread's preemption held off,
//! without this room knowing the runtime (which lies above it).
//!
//! The runtime installs one function at its start ([`install`]), which
//! runs a closure with preemption held off (`upcall::without_preemption`);
//! [`shielded`] runs through it, or runs the closure as it is when no
//! runtime was ever started. This file owns the hook; it must not take a
//! lock or know what the closure does.
//!
//! Why: the stack cache's locks are std mutexes that processors take to
//! refill their magazines, inside the runtime, where a processor that
//! waits is never taken over. A ferry thread switched out by a time slice
//! while holding one (on a spawn through a `Handle`, a terminated
//! thread's stack, or the public `StackCache` calls) would leave those
//! processors waiting in the kernel with nothing to run it.

use std::sync::OnceLock;

/// Runs its closure with the calling ferry thread's preemption held off.
pub(crate) type Hook = fn(&mut dyn FnMut());

/// The hook; set once, before any ferry thread runs (so reading it never
/// waits).
static HOOK: OnceLock<Hook> = OnceLock::new();

/// Installs the runtime's hook (the first installation stays).
pub(crate) fn install(hook: Hook) {
    let _ = HOOK.set(hook);
}

/// Runs `f` through the hook, if one is installed.
pub(crate) fn shielded<R>(f: impl FnOnce() -> R) -> R {
    let Some(hook) = HOOK.get() else {
        return f();
    };
    let mut f = Some(f);
    let mut out = None;
    hook(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    // A hook runs its closure exactly once (`without_preemption` does).
    out.expect("the shield's hook runs its closure")
}
