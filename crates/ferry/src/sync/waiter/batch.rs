//! Waking a batch of waiters detached from a list ([`WaitList::take`]):
//! in chunks, each inside one entry into the runtime, queued together on
//! the waker's processor; and what the waker's terminator does with the
//! rest of a batch.
//!
//! This room owns the batch's walk and its hand-off to the processor
//! (`Processor::make_ready_batch`); it must not decide who is in the batch
//! (the primitive did, under its spinlock) nor change a waiter's place
//! other than as `WaitList::pop_front` does (the parent's tables hold).

use std::cell::UnsafeCell;
use std::ptr;

use super::{Entry, WaitList, Wake};
use crate::header::Unparker;
use crate::header::park_word;
use crate::header::wait_record::{
    WaitRecord, register as register_wait, unregister as unregister_wait,
};
use crate::sched::Chain;

impl WaitList {
    /// Wakes every waiter of a batch detached with [`WaitList::take`],
    /// leaving `entry` first; call it with the entry that detached the
    /// batch, after dropping the spinlock. The waiters are woken in chunks
    /// of up to [`WAKE_CHUNK`], each inside one entry of its own: each
    /// waiter is popped and its park word changed by its own
    /// read-modify-write, as one wake does, and the chunk's parked threads
    /// are queued together (`Processor::make_ready_batch`: in order, never
    /// in the next-to-run slot, with as many sleeping processors woken as
    /// there is work for). A waiter that needs a wake of its own (a kernel
    /// thread, another runtime's thread, or a thread not yet parked, which
    /// gets a token) ends its chunk and is woken as `Entry::unpark` wakes
    /// one. Off a processor each waiter is woken on its own. The batch is
    /// registered with the calling ferry thread meanwhile, so that if it
    /// is terminated between two chunks, its terminator wakes the rest.
    ///
    /// # Safety
    /// The waiters of this batch never [`remove`](WaitList::remove)
    /// themselves (they only leave when woken), so no one but the caller
    /// touches their links.
    pub(crate) unsafe fn wake_all(self, entry: Entry) {
        if self.is_empty() {
            return;
        }
        let batch = Batch {
            record: WaitRecord::new(Batch::abandon_record),
            list: UnsafeCell::new(self),
        };
        let me = entry.thread_header();
        if let Some(h) = me {
            // SAFETY: our own block, alive while we run; `batch` stays on
            // this frame until unregistered below.
            unsafe { register_wait(&h.as_ref().waits, &batch.record) };
        }
        drop(entry);
        // SAFETY: only this thread touches the batch while it runs (its
        // terminator only once it has stopped for good, which cannot
        // happen inside an entry, where every chunk is popped and queued).
        while unsafe { wake_chunk(&mut *batch.list.get()) } {}
        if let Some(h) = me {
            // SAFETY: as above.
            unsafe { unregister_wait(&h.as_ref().waits, &batch.record) };
        }
    }
}

/// Waiters of a batch queued under one entry (the size of a processor's
/// ring, so that one chunk fits an empty ring): long enough to take the
/// injector's lock and the sleepers' once per chunk rather than once per
/// thread, short enough that the entry's critical level, which keeps
/// preemption off, lasts a few microseconds.
pub(crate) const WAKE_CHUNK: usize = crate::sched::RING_SLOTS;

/// Wakes the next chunk of `list` inside one entry (see
/// [`WaitList::wake_all`]); false once the list is empty.
///
/// # Safety
/// As [`WaitList::wake_all`]: the list is a batch the caller owns.
unsafe fn wake_chunk(list: &mut WaitList) -> bool {
    let e = Entry::enter();
    let Some(entered) = e.0 else {
        // Off a processor: one wake at a time, as `Entry::unpark` makes it.
        return match list.pop_front() {
            Some(w) => {
                w.unpark();
                true
            }
            None => false,
        };
    };
    let mut chain = Chain::new();
    // The waiter that ends the chunk early: a thread of this runtime that
    // got a token (its reference is dropped outside the level: it may be
    // the last), or anyone woken as `unpark` wakes.
    let mut token_left = None;
    let mut wake_after = None;
    while chain.len() < WAKE_CHUNK {
        let Some(Wake(who)) = list.pop_front() else {
            break;
        };
        match who {
            Unparker::Ferry(t) if ptr::eq(entered.p.shared(), &t.shared().set) => {
                if park_word::unpark(&t.header().state) {
                    chain.push(t);
                } else {
                    token_left = Some(t);
                    break;
                }
            }
            other => {
                wake_after = Some(other);
                break;
            }
        }
    }
    let mut entered = entered;
    entered.p.make_ready_batch(entered.tok.rb(), chain);
    drop(entered);
    drop(token_left);
    if let Some(who) = wake_after {
        who.unpark();
    }
    !list.is_empty()
}

/// A batch of waiters being woken, registered with the waking thread.
#[repr(C)]
struct Batch {
    record: WaitRecord,
    list: UnsafeCell<WaitList>,
}

impl Batch {
    /// The terminator's side: wakes what is left of the batch.
    ///
    /// # Safety
    /// `r` is the record of a live batch whose waker has stopped for good.
    unsafe fn abandon_record(r: &WaitRecord) -> bool {
        // SAFETY: `Batch` is `repr(C)` with `record` first, and records of
        // this kind are only made by `wake_all`.
        let batch = unsafe { &*ptr::from_ref(r).cast::<Batch>() };
        // SAFETY: the waker never runs again, so the batch is ours.
        let list = unsafe { &mut *batch.list.get() };
        while let Some(w) = list.pop_front() {
            w.unpark();
        }
        true
    }
}
