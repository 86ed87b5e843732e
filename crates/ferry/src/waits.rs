//! What a blocked thread waits on, for the deadlock report
//! (`upcall::deadlock`): the words for it ([`WaitsOn`]), and where the
//! report finds each thread of a runtime (the guard registry's slot of the
//! thread's stack names its block).
//!
//! This room owns the wording and the slot's naming of the block; it must
//! not decide anything from what it reads (a wait says what a thread waits
//! on, never whether it can be woken) and must not block. The wait path
//! pays nothing for it: a primitive's waiter says what it waits on in the
//! record its thread registers anyway (`sync::waiter::Site::describing`,
//! `thread::WaitRecord`), and a join registers one of its own.

use std::ptr::NonNull;

use crate::header::Header;
use crate::header::wait_record::waits_on as thread_waits_on;
use crate::stack::{Stack, registry_for_each_of_runtime, registry_set_thread};

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
    /// A socket of [`crate::net`] to become readable.
    Readable,
    /// A socket of [`crate::net`] to become writable.
    Writable,
    /// The reply to a call into another process ([`crate::rpc::Client`]).
    Reply,
}

impl WaitsOn {
    const ALL: [WaitsOn; 11] = [
        WaitsOn::Mutex,
        WaitsOn::Condvar,
        WaitsOn::RwLockRead,
        WaitsOn::RwLockWrite,
        WaitsOn::Semaphore,
        WaitsOn::Barrier,
        WaitsOn::Queue,
        WaitsOn::Join,
        WaitsOn::Readable,
        WaitsOn::Writable,
        WaitsOn::Reply,
    ];

    /// The report's words for a record (`code`, `on`); `0` is no record.
    pub(crate) fn describe(code: u32, on: usize) -> String {
        let what = Self::ALL.into_iter().find(|w| *w as u32 == code);
        match what {
            Some(WaitsOn::Mutex) => format!("Mutex at {on:#x}"),
            Some(WaitsOn::Condvar) => format!("Condvar at {on:#x}"),
            Some(WaitsOn::RwLockRead) => format!("RwLock (to read) at {on:#x}"),
            Some(WaitsOn::RwLockWrite) => format!("RwLock (to write) at {on:#x}"),
            Some(WaitsOn::Semaphore) => format!("Semaphore at {on:#x}"),
            Some(WaitsOn::Barrier) => format!("Barrier at {on:#x}"),
            Some(WaitsOn::Queue) => format!("channel recv or send (queue waiters at {on:#x})"),
            Some(WaitsOn::Join) => format!("join of thread {on}"),
            Some(WaitsOn::Readable) => format!("socket to be readable (registration at {on:#x})"),
            Some(WaitsOn::Writable) => format!("socket to be writable (registration at {on:#x})"),
            Some(WaitsOn::Reply) => format!("the reply to a call (channel at {on:#x})"),
            None => "parked with no recorded wait (ferry::park, or suspended)".to_owned(),
        }
    }
}

/// Names `runtime` as the runtime, and `header` as the block, of the thread
/// about to run on a stack (before it first runs)
/// (`slot`: the stack's registry slot; `runtime`: the runtime's `Shared`'s
/// address.)
pub(crate) fn set_thread(slot: u32, runtime: usize, header: NonNull<Header>) {
    registry_set_thread(slot, runtime, header.as_ptr() as usize);
}

/// Forgets the thread that ran on `stack` (it ended): no report lists it.
pub(crate) fn forget_stack(stack: &Stack) {
    registry_set_thread(stack.registry_slot(), 0, 0);
}

/// One line per thread of the runtime named `runtime` (the address of its
/// shared state, as `set_thread` was given it) that owns a ferry stack: id,
/// name and what it waits on, by id. The caller makes sure none of them
/// runs.
pub(crate) fn describe_threads(runtime: usize) -> Vec<String> {
    let mut threads = Vec::new();
    registry_for_each_of_runtime(runtime, |id, name, thread| {
        let name = String::from_utf8_lossy(name);
        let name = if name.is_empty() {
            "(unnamed)".to_owned()
        } else {
            format!("\"{name}\"")
        };
        // SAFETY: a stack's registry entry names its thread's block from the
        // spawn until the block gives the stack up (`forget_stack`, while
        // the block is still alive), and the caller makes sure no thread of
        // the runtime runs: the block is alive and its thread parked or held.
        let waits = NonNull::new(thread as *mut Header)
            .and_then(|h| unsafe { thread_waits_on(&h.as_ref().waits) });
        let (code, on) = waits.unwrap_or((0, 0));
        threads.push((
            id,
            format!("thread {id} {name}: {}", WaitsOn::describe(code, on)),
        ));
    });
    threads.sort_by_key(|(id, _)| *id);
    threads.into_iter().map(|(_, line)| line).collect()
}
