//! What a blocked thread waits on: a record each blocking primitive sets
//! around its park ([`on`], [`join`]), kept in the guard registry's slot of
//! the thread's stack, for the deadlock report (`crate::deadlock`).
//!
//! This room owns the record and its wording; it must not decide anything
//! from it (the record says what a thread waits on, never whether it can
//! be woken) and must not block. Setting it costs two plain stores on the
//! waiting thread's own slot, and as many to put back what was there, on a
//! primitive's slow path only.

use std::sync::Arc;

use crate::processor;
use crate::runtime::Shared;
use crate::stack::{Stack, registry_for_each_of_runtime, registry_set_runtime, registry_set_waits};
use crate::thread::ThreadId;

/// What a thread waits on, as the report words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitsOn {
    /// A [`crate::sync::Mutex`]'s lock.
    Mutex = 1,
    /// A [`crate::sync::Condvar`]'s notification.
    Condvar,
    /// A [`crate::sync::RwLock`], to read.
    RwLockRead,
    /// A [`crate::sync::RwLock`], to write.
    RwLockWrite,
    /// A [`crate::sync::Semaphore`]'s permit.
    Semaphore,
    /// A [`crate::sync::Barrier`]'s other threads.
    Barrier,
    /// A channel (or another queue waiting through
    /// [`crate::sync::ParkWait`]): a value to receive or room to send.
    Queue,
    /// Another thread's end ([`crate::JoinHandle::join`]).
    Join,
}

impl WaitsOn {
    const ALL: [WaitsOn; 8] = [
        WaitsOn::Mutex,
        WaitsOn::Condvar,
        WaitsOn::RwLockRead,
        WaitsOn::RwLockWrite,
        WaitsOn::Semaphore,
        WaitsOn::Barrier,
        WaitsOn::Queue,
        WaitsOn::Join,
    ];

    /// The report's words for a record (`code`, `on`); `0` is no record.
    pub(crate) fn describe(code: u64, on: usize) -> String {
        let what = Self::ALL.into_iter().find(|w| *w as u64 == code);
        match what {
            Some(WaitsOn::Mutex) => format!("Mutex at {on:#x}"),
            Some(WaitsOn::Condvar) => format!("Condvar at {on:#x}"),
            Some(WaitsOn::RwLockRead) => format!("RwLock (to read) at {on:#x}"),
            Some(WaitsOn::RwLockWrite) => format!("RwLock (to write) at {on:#x}"),
            Some(WaitsOn::Semaphore) => format!("Semaphore at {on:#x}"),
            Some(WaitsOn::Barrier) => format!("Barrier at {on:#x}"),
            Some(WaitsOn::Queue) => format!("channel recv or send (queue waiters at {on:#x})"),
            Some(WaitsOn::Join) => format!("join of thread {on}"),
            None => "parked with no recorded wait (ferry::park, or suspended)".to_owned(),
        }
    }
}

/// A thread's record of what it waits on, set for as long as this lives:
/// dropping it puts back what was recorded before (a wait inside a wait:
/// a condition variable's wait relocking its mutex).
#[must_use = "the record lasts as long as the guard"]
pub(crate) struct Waiting {
    slot: u32,
    before: (u64, usize),
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = registry_set_waits(self.slot, self.before.0, self.before.1);
    }
}

/// Records that the calling ferry thread waits on `what` at `obj`, until the
/// returned guard drops; nothing on a plain kernel thread or an adopted
/// thread (which has no ferry stack).
#[inline]
pub(crate) fn on<T: ?Sized>(what: WaitsOn, obj: &T) -> Option<Waiting> {
    record(what, std::ptr::from_ref(obj).cast::<()>() as usize)
}

/// Records that the calling ferry thread waits for thread `id` to end.
#[inline]
pub(crate) fn join(id: ThreadId) -> Option<Waiting> {
    record(
        WaitsOn::Join,
        usize::try_from(id.as_u64()).unwrap_or(usize::MAX),
    )
}

fn record(what: WaitsOn, on: usize) -> Option<Waiting> {
    let e = processor::enter()?;
    // SAFETY: the processor's current thread is the caller, running.
    let slot = unsafe { e.p.current_ref()?.own_stack_slot()? };
    let before = registry_set_waits(slot, what as u64, on);
    Some(Waiting { slot, before })
}

/// Names `shared` as the runtime of the thread about to run on `stack`
/// (before it first runs).
pub(crate) fn set_runtime(stack: &Stack, shared: &Arc<Shared>) {
    registry_set_runtime(stack.registry_slot(), Arc::as_ptr(shared) as usize);
}

/// Forgets the thread that ran on `stack` (it ended): no report lists it.
pub(crate) fn forget_stack(stack: &Stack) {
    registry_set_runtime(stack.registry_slot(), 0);
}

/// One line per thread of `shared` that owns a ferry stack: id, name and
/// what it waits on, by id. The caller makes sure none of them runs.
pub(crate) fn describe_threads(shared: &Shared) -> Vec<String> {
    let mut threads = Vec::new();
    registry_for_each_of_runtime(std::ptr::from_ref(shared) as usize, |id, name, code, on| {
        let name = String::from_utf8_lossy(name);
        let name = if name.is_empty() {
            "(unnamed)".to_owned()
        } else {
            format!("\"{name}\"")
        };
        threads.push((
            id,
            format!("thread {id} {name}: {}", WaitsOn::describe(code, on)),
        ));
    });
    threads.sort_by_key(|(id, _)| *id);
    threads.into_iter().map(|(_, line)| line).collect()
}
