//! The parts every blocking primitive of [`crate::sync`] is built from
//! besides its [`SpinLock`](super::SpinLock) (`spin`): an intrusive FIFO of [`Waiter`]s that
//! live on the (parked) stacks of their threads, the park loop, and how a
//! terminated thread's waiter leaves.
//!
//! This room owns *how* a thread waits and is woken; it never decides *who*
//! is woken (each primitive does), and nothing here parks, switches or calls
//! out while a [`SpinLock`](super::SpinLock) is held.
//!
//! # A waiter's life
//!
//! A blocking thread builds a [`Waiter`] on its own stack, links it into a
//! primitive's [`WaitList`] under that primitive's spinlock, drops the
//! spinlock and parks until `woken` is set ([`Entry::wait`], or
//! [`Waiter::wait`]). A ferry thread's stack stays where it is while it is
//! parked, and so does a kernel thread's, so the list can point at the
//! waiter.
//!
//! | `Waiter::woken` | written by | meaning |
//! |-----------------|------------|---------|
//! | `false` | [`Entry::waiter`] | queued (or about to be); the list owns the links |
//! | `true` | the waker, under the list's spinlock, after it unlinked the waiter and cloned its [`Unparker`] (Release) | the wait is over; the waker never touches the waiter again, and unparks its clone after dropping the spinlock |
//!
//! The waiter reads `woken` with Acquire, so whatever the waker did before
//! (handing over a lock, a permit, a barrier generation) is visible once it
//! sees `true`. Because the waker unparks a *clone*, the waiter may already
//! have returned and freed its stack frame by then; the late unpark only
//! leaves a stale token, and every park loop here tolerates a spurious
//! return.
//!
//! # Where a waiter is
//!
//! Besides `woken`, a waiter records the list it was pushed on (`list`) and
//! that list's `epoch` then; a list's epoch moves on each time a waker
//! detaches its waiters as a batch ([`WaitList::take`]). All four fields
//! are written under the list's spinlock, except the batch's pops, which
//! the batch's one waker makes outside it. So, under the primitive's
//! spinlock, a waiter is in exactly one of these places:
//!
//! | place | fields | who may touch the waiter |
//! |-------|--------|--------------------------|
//! | out | `list` null, `woken` false | its owner only (new, or it took itself out: [`WaitList::remove`]) |
//! | queued | `list` = L, `epoch` = L's epoch, `woken` false | whoever holds L's spinlock |
//! | in a batch | `list` = L, `epoch` older than L's, `woken` false | the batch's waker, without a lock, until it marks the waiter woken |
//! | woken | `woken` true | nobody but its owner: the waker has let go of it |
//!
//! # Termination
//!
//! A ferry thread registers each waiter it pushes (and each batch it
//! wakes) with its thread (`thread::ended`), and unregisters it when it
//! drops it. If the thread is terminated, its terminator calls the
//! primitive's [`Site`] for each registered waiter, which takes the
//! primitive's spinlock and, by the waiter's place:
//!
//! | place | what the site does |
//! |-------|--------------------|
//! | out | nothing |
//! | queued | removes it and fixes the primitive's word (its `QUEUED` bit, its count), as a waiter that gives up would |
//! | in a batch | nothing yet: the terminator lets go of the spinlock and asks again, until the batch's waker has marked it woken |
//! | woken | passes on what the wake carried, as the primitive would give it next: a mutex's or condvar's wake to the next waiter, a semaphore permit or a lock grant back through the primitive's own release |
//!
//! A waker pops (or detaches) under the same spinlock, so a terminator and
//! a waker are ordered by it: either the terminator removes the waiter
//! first and the waker never sees it, or the waker took it first and the
//! terminator sees `woken` (or the batch) and passes the wake on. After the
//! site returns, nothing outside the thread points at the waiter, and the
//! terminator drops the waiter's reference to its thread; the thread's
//! stack can then be freed. A batch's waker pops and unparks a chunk of
//! waiters inside one entry (each pop with its unpark), so it is stopped
//! only between two chunks, with the rest of the batch whole; if it is
//! terminated there, its terminator wakes the rest of the batch.
//!
//! # One entry per wait or wake
//!
//! Naming the waiting thread, holding a spinlock, parking and queuing a
//! woken thread each need the kernel thread's critical level (see
//! [`SpinLock`](super::SpinLock)). A primitive enters once with an [`Entry`] and runs all of
//! its steps inside that level: a condition variable's wait enters once
//! instead of three times, its signal once instead of twice. The level is
//! never held across the program's code (`ParkWait`'s `ready` closure runs
//! outside it, and a woken thread's reference is dropped after it). A batch
//! of wakes (`notify_all`, a barrier's or a lock's batch; `batch`) enters
//! once per chunk of [`WAKE_CHUNK`](batch::WAKE_CHUNK) waiters, not once
//! per waiter nor once for the whole batch: one chunk is queued together,
//! in order, with one lock of the injector and as many processor wakes as
//! there is work for, and the level (which holds preemption off) lasts a
//! few microseconds.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomPinned;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};

use crate::header::wait_record::{
    WaitRecord, register as register_wait, unregister as unregister_wait,
};
use crate::header::{Header, Unparker};
use crate::upcall::Entered;
use crate::waits::WaitsOn;

mod batch;

/// One entry into the runtime for a whole wait or wake of a primitive.
///
/// Blocking takes three steps that each need the calling thread's critical
/// level (see [`SpinLock`](super::SpinLock)): naming the thread for its [`Waiter`], holding
/// the primitive's spinlock, and parking; waking takes two (the spinlock, and
/// queuing the woken thread). An `Entry` enters once and the steps run
/// inside that one level: [`Entry::waiter`], [`SpinLock::lock_entered`](super::SpinLock::lock_entered),
/// then [`Entry::wait`] or [`Entry::unpark`]. On a plain kernel thread (or
/// an activation between processors) it holds nothing, and each step enters
/// on its own as it would without it.
///
/// Held only for the few instructions of one step sequence: never across
/// the program's code, and never across anything that may block in the
/// kernel.
pub(crate) struct Entry(Option<Entered>);

impl Entry {
    /// Enters the runtime, if the calling kernel thread drives a processor.
    #[inline]
    pub(crate) fn enter() -> Entry {
        Entry(crate::upcall::enter())
    }

    /// Whether the entry holds a critical level (the calling kernel thread
    /// drives a processor).
    pub(super) fn is_entered(&self) -> bool {
        self.0.is_some()
    }

    /// A waiter for the calling thread (ferry or plain kernel thread), in
    /// the primitive `site` describes.
    #[inline]
    pub(crate) fn waiter(&self, site: Site) -> Waiter {
        Waiter::with(Unparker::current_entered(self.0.as_ref()), site)
    }

    /// The block of the ferry thread this entry runs, if any.
    fn thread_header(&self) -> Option<NonNull<Header>> {
        self.0
            .as_ref()
            .and_then(|e| e.p.current_ref(&e.tok))
            .map(|t| t.as_ptr())
    }

    /// Parks until `w` is woken, leaving the entry: after the first park
    /// returns (the thread may then run on another processor), or at once
    /// if a waker came first.
    pub(crate) fn wait(self, w: &Waiter) {
        if w.is_woken() {
            return;
        }
        match self.0 {
            Some(e) => crate::thread::park_entered(e),
            None => crate::thread::park(),
        }
        w.wait();
    }

    /// Wakes the thread a waker took out of its list, leaving the entry
    /// (see `Unparker::unpark_leaving`). Call it after dropping the
    /// spinlock.
    #[inline]
    pub(crate) fn unpark(self, w: Wake) {
        match self.0 {
            Some(e) => w.0.unpark_leaving(e),
            None => w.unpark(),
        }
    }
}

/// How to leave a primitive's wait for a terminated thread (see the
/// module's termination table): `abandon(at, aux, w)` takes the
/// primitive's spinlock and removes `w` or passes its wake on; false if
/// `w` is in a batch a waker still owns (ask again).
///
/// `at` and `aux` point at the primitive (or at its parts, for a generic
/// one whose address is not a thin pointer); the primitive outlives every
/// wait in it.
///
/// A site also says, for the deadlock report, what a thread waiting in it
/// waits on ([`Site::describing`]; `crate::waits`' code and the object's
/// address), carried in the waiter's registered record: the report reads
/// it there, so the wait path pays no store of its own for it.
#[derive(Clone, Copy)]
pub(crate) struct Site {
    abandon: unsafe fn(*const (), *const (), &Waiter) -> bool,
    at: *const (),
    aux: *const (),
    what: u32,
    obj: usize,
}

impl Site {
    /// The site `abandon` undoes waits of, on `at` (and `aux`).
    ///
    /// # Safety
    /// `abandon` may be called with `at` and `aux` for a waiter of this
    /// primitive whose thread has stopped for good, at any time the
    /// waiter is registered: while it is registered, `at` and `aux` point
    /// at live parts of the primitive.
    pub(crate) unsafe fn new<A, B>(
        abandon: unsafe fn(*const (), *const (), &Waiter) -> bool,
        at: &A,
        aux: Option<&B>,
    ) -> Site {
        Site {
            abandon,
            at: ptr::from_ref(at).cast(),
            aux: aux.map_or(ptr::null(), |b| ptr::from_ref(b).cast()),
            what: 0,
            obj: 0,
        }
    }

    /// The site, saying that its waiters wait on `what` at `obj`.
    #[inline]
    pub(crate) fn describing<O: ?Sized>(mut self, what: WaitsOn, obj: &O) -> Site {
        self.what = what as u32;
        self.obj = ptr::from_ref(obj).cast::<()>() as usize;
        self
    }
}

/// One blocked thread, on its own stack, linked into one [`WaitList`].
///
/// `#[repr(C)]` with the record first, so that the record (registered
/// with the thread) leads back to the waiter.
#[repr(C)]
pub(crate) struct Waiter {
    record: WaitRecord,
    /// Dropped by the waiter's drop, or by the terminator of its thread
    /// (whose stack is freed without running destructors).
    unparker: UnsafeCell<ManuallyDrop<Unparker>>,
    /// Links: touched only by whoever holds the spinlock guarding the list
    /// the waiter is in (or owns a list detached with [`WaitList::take`]).
    next: Cell<*const Waiter>,
    prev: Cell<*const Waiter>,
    /// See the module's tables.
    woken: AtomicBool,
    /// The list it was pushed on (null while out of every list), and that
    /// list's epoch then: written with the links.
    list: Cell<*const WaitList>,
    epoch: Cell<usize>,
    site: Site,
    /// Linked by address: must not move while in a list.
    _pinned: PhantomPinned,
}

// SAFETY: the `Cell` fields are only touched under the list's spinlock (see
// the field docs), `unparker` is only cloned (dropped only by the owner, or
// by its terminator once its thread has stopped for good), `site` is
// read-only, and `woken` is atomic.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// A waiter that `unparker` wakes, in `site`.
    #[inline]
    fn with(unparker: Unparker, site: Site) -> Waiter {
        Waiter {
            record: WaitRecord::describing(Waiter::abandon_record, site.what, site.obj),
            unparker: UnsafeCell::new(ManuallyDrop::new(unparker)),
            next: Cell::new(ptr::null()),
            prev: Cell::new(ptr::null()),
            woken: AtomicBool::new(false),
            list: Cell::new(ptr::null()),
            epoch: Cell::new(0),
            site,
            _pinned: PhantomPinned,
        }
    }

    fn unparker(&self) -> &Unparker {
        // SAFETY: only dropped by `drop` or `abandon_record`, after which
        // nobody reads it.
        unsafe { &*self.unparker.get() }
    }

    /// The block of the waiter's thread, if it is a ferry thread.
    fn thread_header(&self) -> Option<&Header> {
        match self.unparker() {
            Unparker::Ferry(t) => Some(t.header()),
            Unparker::Kernel(_) => None,
        }
    }

    /// Registers the waiter with its thread, as it is linked.
    fn register(&self) {
        if let Some(h) = self.thread_header() {
            // SAFETY: only the waiter's own thread links it (every caller of
            // `push_*` pushes its own waiter), and a linked waiter stays put
            // until it is out again and dropped, which unregisters it.
            unsafe { register_wait(&h.waits, &self.record) };
        }
    }

    /// The terminator's side of the record: leaves the primitive through
    /// the site, then drops the reference to the thread that the waiter's
    /// destructor, which never runs, would have dropped.
    ///
    /// # Safety
    /// `r` is the record of a live waiter whose thread has stopped for
    /// good; called by its terminator until it returns true, then never
    /// again.
    unsafe fn abandon_record(r: &WaitRecord) -> bool {
        // SAFETY: `Waiter` is `repr(C)` with `record` first, and records of
        // this kind are only made by `Waiter::with`.
        let w = unsafe { &*ptr::from_ref(r).cast::<Waiter>() };
        // SAFETY: the site's contract (`Site::new`): the waiter is
        // registered, so the primitive is alive.
        if !unsafe { (w.site.abandon)(w.site.at, w.site.aux, w) } {
            return false;
        }
        // SAFETY: the site let go of the waiter, nobody else reaches it, and
        // its owner never runs again; dropped once (the contract).
        unsafe { ManuallyDrop::drop(&mut *w.unparker.get()) };
        true
    }

    /// Parks the calling thread (only its user-level thread if it is a ferry
    /// thread) until a waker has taken this waiter out of its list.
    pub(crate) fn wait(&self) {
        while !self.woken.load(Acquire) {
            crate::thread::park();
        }
    }

    /// Whether a waker has taken this waiter out of its list. Only
    /// meaningful under the list's spinlock (or after [`Waiter::wait`]).
    pub(crate) fn is_woken(&self) -> bool {
        self.woken.load(Acquire)
    }

    /// Whether the waiter is in no list and was not woken: new, or its
    /// owner took it out. Only meaningful under the list's spinlock.
    pub(crate) fn is_out(&self) -> bool {
        self.list.get().is_null() && !self.is_woken()
    }

    /// Whether the waiter was last pushed on `list` (queued there, in a
    /// batch detached from it, or woken from it).
    pub(crate) fn was_on(&self, list: &WaitList) -> bool {
        ptr::eq(self.list.get(), list)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(h) = self.thread_header() {
            // SAFETY: a waiter is dropped by its own thread, running.
            unsafe { unregister_wait(&h.waits, &self.record) };
        }
        // SAFETY: dropped once, here (the terminator's drop happens only on
        // a thread that never runs again, so never before this one).
        unsafe { ManuallyDrop::drop(self.unparker.get_mut()) };
    }
}

/// Whom to unpark, once the spinlock is dropped.
#[must_use = "a popped waiter must be unparked, after the spinlock is dropped"]
pub(crate) struct Wake(Unparker);

impl Wake {
    /// Unparks the woken thread. Call it after dropping the spinlock.
    pub(crate) fn unpark(self) {
        self.0.unpark();
    }
}

/// A FIFO of waiters, linked through the waiters themselves. Lives inside a
/// [`SpinLock`](super::SpinLock) (or is a detached batch owned by one waker).
pub(crate) struct WaitList {
    head: *const Waiter,
    tail: *const Waiter,
    len: usize,
    /// Moves on at each [`WaitList::take`] (see the module's tables).
    epoch: usize,
}

// SAFETY: the list only holds pointers to `Sync` waiters; who may touch them
// is governed by the spinlock around the list.
unsafe impl Send for WaitList {}

impl Default for WaitList {
    fn default() -> Self {
        WaitList::new()
    }
}

impl WaitList {
    pub(crate) const fn new() -> WaitList {
        WaitList {
            head: ptr::null(),
            tail: ptr::null(),
            len: 0,
            epoch: 0,
        }
    }

    /// Whether `w` is queued in this list (not woken, not in a batch
    /// detached from it).
    pub(crate) fn holds(&self, w: &Waiter) -> bool {
        w.was_on(self) && w.epoch.get() == self.epoch && !w.is_woken()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Queues `w` last.
    ///
    /// # Safety
    /// `w` is in no list, and stays where it is, alive, until a waker takes it
    /// out (`pop_front`, after which its wait returns) or its owner removes
    /// it with [`WaitList::remove`].
    pub(crate) unsafe fn push_back(&mut self, w: &Waiter) {
        self.mark(w);
        w.next.set(ptr::null());
        w.prev.set(self.tail);
        if self.tail.is_null() {
            self.head = w;
        } else {
            // SAFETY: `tail` is a waiter in this list, alive by the contract
            // of `push_*`.
            unsafe { (*self.tail).next.set(w) };
        }
        self.tail = w;
        self.len += 1;
    }

    /// Queues `w` first (a waiter that was woken but lost the race again).
    ///
    /// # Safety
    /// As [`WaitList::push_back`].
    pub(crate) unsafe fn push_front(&mut self, w: &Waiter) {
        self.mark(w);
        w.prev.set(ptr::null());
        w.next.set(self.head);
        if self.head.is_null() {
            self.tail = w;
        } else {
            // SAFETY: `head` is a waiter in this list, alive by the contract
            // of `push_*`.
            unsafe { (*self.head).prev.set(w) };
        }
        self.head = w;
        self.len += 1;
    }

    /// Records that `w` is queued here now, and registers it with its
    /// thread.
    fn mark(&self, w: &Waiter) {
        debug_assert!(w.is_out(), "a waiter is pushed once");
        w.list.set(self);
        w.epoch.set(self.epoch);
        w.register();
    }

    /// Takes `w` out without waking it: its owner gives up waiting (or its
    /// terminator, for it).
    ///
    /// # Safety
    /// `w` is in this list (not woken).
    pub(crate) unsafe fn remove(&mut self, w: &Waiter) {
        w.list.set(ptr::null());
        let (prev, next) = (w.prev.get(), w.next.get());
        if prev.is_null() {
            self.head = next;
        } else {
            // SAFETY: a neighbour in this list is alive (contract of `push_*`).
            unsafe { (*prev).next.set(next) };
        }
        if next.is_null() {
            self.tail = prev;
        } else {
            // SAFETY: as above.
            unsafe { (*next).prev.set(prev) };
        }
        self.len -= 1;
    }

    /// Takes the first waiter out and marks it woken; the caller must
    /// [`Wake::unpark`] it after dropping the spinlock.
    pub(crate) fn pop_front(&mut self) -> Option<Wake> {
        let w = self.head;
        if w.is_null() {
            return None;
        }
        // SAFETY: `w` is in this list, so alive until it is marked woken
        // below (contract of `push_*`); after the `woken` store it is not
        // touched again.
        unsafe {
            let next = (*w).next.get();
            self.head = next;
            if next.is_null() {
                self.tail = ptr::null();
            } else {
                (*next).prev.set(ptr::null());
            }
            self.len -= 1;
            let unparker = (*w).unparker().clone();
            (*w).woken.store(true, Release);
            Some(Wake(unparker))
        }
    }

    /// Detaches every waiter as a batch the caller owns, leaving this list
    /// empty and moving its epoch on; wake the batch with
    /// [`WaitList::wake_all`].
    pub(crate) fn take(&mut self) -> WaitList {
        let batch = WaitList {
            head: self.head,
            tail: self.tail,
            len: self.len,
            epoch: self.epoch,
        };
        *self = WaitList {
            epoch: self.epoch.wrapping_add(1),
            ..WaitList::new()
        };
        batch
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;

    /// A site for waiters no thread is terminated in.
    fn site() -> Site {
        /// Never called: these tests terminate no thread.
        ///
        /// # Safety
        /// None: it is never called.
        unsafe fn abandon(_: *const (), _: *const (), _: &Waiter) -> bool {
            unreachable!("no waiter of these tests is abandoned")
        }
        // SAFETY: `abandon` is never called.
        unsafe { Site::new(abandon, &(), None::<&()>) }
    }

    /// The references a waiter and its wake take to the thread are dropped
    /// exactly once each, whichever way the waiter leaves: never queued,
    /// taken out by a waker, or removed by its owner.
    #[test]
    fn a_waiters_thread_reference_is_neither_lost_nor_leaked() {
        crate::Runtime::builder()
            .processors(1)
            .run(|| {
                let me = crate::thread::current();
                let base = me.ref_count();
                let entry = Entry::enter();

                let never_queued = entry.waiter(site());
                assert_eq!(me.ref_count(), base + 1);
                drop(never_queued);
                assert_eq!(me.ref_count(), base);

                // A queued waiter is registered with its thread by its
                // address: each is pinned and dropped where it stands, at
                // the end of its block (a `drop(w)` would move it).
                let mut list = WaitList::new();
                let wake = {
                    let woken = pin!(entry.waiter(site()));
                    // SAFETY: in no list, and it outlives its time in this
                    // one (popped below), pinned.
                    unsafe { list.push_back(&woken) };
                    let wake = list.pop_front().expect("queued above");
                    assert!(woken.is_woken());
                    wake
                };
                // The wake holds its own reference, which outlives the
                // woken waiter's.
                assert_eq!(me.ref_count(), base + 1);
                drop(wake);
                assert_eq!(me.ref_count(), base);

                {
                    let removed = pin!(entry.waiter(site()));
                    // SAFETY: as above (removed below).
                    unsafe {
                        list.push_back(&removed);
                        list.remove(&removed);
                    }
                }
                assert_eq!(me.ref_count(), base);
                assert!(list.is_empty());
            })
            .unwrap();
    }
}
