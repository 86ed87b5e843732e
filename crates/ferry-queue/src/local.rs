//! The in-process form: a [`Buffer`] of owned items shared by the handles of
//! one queue through an `Arc`, and the generic [`Producer`] / [`Consumer`]
//! handles that the four kind modules name.
//!
//! The buffer owns the items (moving them in and out, dropping the leftovers);
//! the kind's protocol decides when a slot may be touched. Handles add the wait
//! strategy and disconnection around the protocol's non-blocking steps; they
//! never touch a slot themselves.
//!
//! # Handle counts
//!
//! | word        | written by | meaning |
//! |-------------|------------|---------|
//! | `producers` | producer handles: `+1` on clone (Relaxed), `-1` on drop (AcqRel) | live producer handles; `0` = no item will ever arrive again; `1` = the lone handle may claim without a CAS (read Acquire) |
//! | `consumers` | consumer handles: `+1` on clone (Relaxed), `-1` on drop (AcqRel) | live consumer handles; `0` = blocked producers give up; `1` as for producers |
//!
//! The last handle of a side to drop notifies every waiter of the other side,
//! whose `ready` check then reads the count (Acquire) and, for a consumer, pops
//! once more so an item pushed just before the drop is never lost.

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

use crate::pad::CachePadded;
use crate::primitive::{Arc, AtomicU64, AtomicUsize, UnsafeCell};
use crate::ring::{MultiConsumer, MultiProducer, Protocol, Ring, Side, Step};
use crate::wait::{SpinPark, Wait};
use crate::{Disconnected, Kind};

/// Largest capacity accepted: 2^32 slots (2^30 on 32-bit targets). Beyond
/// that the allocation, not the protocol, is the problem.
pub const MAX_CAPACITY: usize = 1 << (if usize::BITS > 32 { 32 } else { 30 });

struct Slot<T> {
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// The storage of one in-process queue. Shared by all its handles.
pub(crate) struct Buffer<T, W> {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
    not_empty: CachePadded<W>,
    not_full: CachePadded<W>,
    /// Producers waiting for room for a whole batch (MP-SC `push_many`): kept
    /// apart from `not_full`, whose `notify_one` must reach a waiter that one
    /// free slot satisfies.
    not_full_batch: CachePadded<W>,
    producers: AtomicUsize,
    consumers: AtomicUsize,
    capacity: u64,
    slots: Box<[Slot<T>]>,
}

// SAFETY: the buffer moves `T`s between threads (needs `T: Send`) and hands
// out shared access to slots only under the protocols in `ring`, which give
// each slot to one party at a time; `W: Send + Sync` by the `Wait` bound.
unsafe impl<T: Send, W: Wait> Send for Buffer<T, W> {}
// SAFETY: as above: `&Buffer` never gives two threads access to one item.
unsafe impl<T: Send, W: Wait> Sync for Buffer<T, W> {}

/// Checks a requested capacity, panicking with a message that says what is wrong.
pub(crate) fn check_capacity(capacity: usize) -> u64 {
    assert!(
        capacity.is_power_of_two() && capacity <= MAX_CAPACITY,
        "ferry-queue: capacity must be a power of two between 1 and {MAX_CAPACITY}, got {capacity}"
    );
    capacity as u64
}

impl<T, W: Wait> Buffer<T, W> {
    fn new<K: Protocol>(capacity: usize) -> Self {
        let capacity = check_capacity(capacity);
        let slots = (0..capacity)
            .map(|i| Slot {
                stamp: AtomicU64::new(K::initial_stamp(i)),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Buffer {
            head: CachePadded(AtomicU64::new(0)),
            tail: CachePadded(AtomicU64::new(0)),
            not_empty: CachePadded(W::default()),
            not_full: CachePadded(W::default()),
            not_full_batch: CachePadded(W::default()),
            producers: AtomicUsize::new(1),
            consumers: AtomicUsize::new(1),
            capacity,
            slots,
        }
    }

    fn len(&self) -> usize {
        // Acquire on `tail`, then `head`: every kind publishes `head` past a
        // position before a consumer can move `tail` past it, so this `head`
        // is at least this `tail`.
        let tail = self.tail.load(Acquire);
        let head = self.head.load(Relaxed);
        head.wrapping_sub(tail).min(self.capacity) as usize
    }
}

// SAFETY: every slot index is below `slots.len() == capacity` (checked by
// indexing), and `capacity` is a power of two fixed at construction.
unsafe impl<T, W> Ring for Buffer<T, W> {
    type Item = T;
    const HOSTILE: bool = false;

    #[inline(always)]
    fn head(&self) -> &AtomicU64 {
        &self.head
    }

    #[inline(always)]
    fn tail(&self) -> &AtomicU64 {
        &self.tail
    }

    #[inline(always)]
    fn capacity(&self) -> u64 {
        self.capacity
    }

    #[inline(always)]
    fn stamp(&self, slot: usize) -> &AtomicU64 {
        &self.slots[slot].stamp
    }

    #[inline(always)]
    unsafe fn write(&self, slot: usize, item: T) {
        self.slots[slot].value.with_mut(|p| {
            // SAFETY: the caller has the slot to itself (trait contract), and
            // the slot holds no live item (the protocol freed it), so nothing
            // is overwritten without being dropped.
            unsafe { (*p).write(item) };
        });
    }

    #[inline(always)]
    unsafe fn read(&self, slot: usize) -> T {
        // SAFETY: the caller has the slot to itself and it holds an item that
        // `write` initialised; the protocol marks it free right after, so the
        // item is moved out exactly once.
        self.slots[slot]
            .value
            .with_mut(|p| unsafe { (*p).assume_init_read() })
    }
}

impl<T, W> Drop for Buffer<T, W> {
    fn drop(&mut self) {
        // Every handle is gone, so every claimed position was published: the
        // items are exactly the positions [tail, head).
        let head = self.head.load(Relaxed);
        let mut pos = self.tail.load(Relaxed);
        while pos != head {
            let slot = (pos & (self.capacity - 1)) as usize;
            // SAFETY: `slot` holds the unconsumed item of position `pos`, and
            // `&mut self` means no one else can touch it.
            self.slots[slot]
                .value
                .with_mut(|p| unsafe { (*p).assume_init_drop() });
            pos = pos.wrapping_add(1);
        }
    }
}

/// The sending handle of an in-process queue of kind `K` (see [`crate::spsc`],
/// [`crate::mpsc`], [`crate::spmc`], [`crate::mpmc`], which name it
/// `Producer<T, W>`).
///
/// `Send` (when `T: Send`) but not `Sync`: a handle keeps private cached
/// indices. Multi-producer kinds implement `Clone`: give each thread its own
/// clone. Single-producer kinds do not, which makes "one producer" a
/// compile-time fact.
pub struct Producer<T, K: Kind, W: Wait = SpinPark> {
    buffer: Arc<Buffer<T, W>>,
    side: Side,
    kind: PhantomData<fn() -> K>,
}

/// The receiving handle of an in-process queue of kind `K`; see [`Producer`].
pub struct Consumer<T, K: Kind, W: Wait = SpinPark> {
    buffer: Arc<Buffer<T, W>>,
    side: Side,
    kind: PhantomData<fn() -> K>,
}

/// Creates an in-process queue of kind `K` with `capacity` slots, waiting
/// through `W` in the synchronous operations.
///
/// # Panics
/// If `capacity` is not a power of two in `1..=`[`MAX_CAPACITY`].
pub(crate) fn channel<T, K: Kind, W: Wait>(
    capacity: usize,
) -> (Producer<T, K, W>, Consumer<T, K, W>) {
    let buffer = Arc::new(Buffer::<T, W>::new::<K>(capacity));
    let producer = Producer {
        buffer: buffer.clone(),
        side: Side::default(),
        kind: PhantomData,
    };
    let consumer = Consumer {
        buffer,
        side: Side::default(),
        kind: PhantomData,
    };
    (producer, consumer)
}

impl<T, K: Kind, W: Wait> Producer<T, K, W> {
    /// Pushes `item` if there is room, without waiting (an asynchronous
    /// operation); gives it back in `Err` when the queue is full.
    ///
    /// ```
    /// let (tx, rx) = ferry_queue::spsc::channel::<&str>(1);
    /// assert_eq!(tx.try_push("a"), Ok(()));
    /// assert_eq!(tx.try_push("b"), Err("b"));
    /// assert_eq!(rx.try_pop(), Some("a"));
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), T> {
        match K::push(&*self.buffer, &self.side, self.alone(), item) {
            Ok(()) => {
                self.buffer.not_empty.notify_one();
                Ok(())
            }
            Err((step, item)) => {
                debug_assert!(
                    matches!(step, Step::NotNow),
                    "an in-process ring is never corrupt"
                );
                Err(item)
            }
        }
    }

    /// Pushes `item`, waiting through `W` while the queue is full (a
    /// synchronous operation). Fails, giving the item back, only when every
    /// consumer handle has been dropped.
    #[inline]
    pub fn push(&self, item: T) -> Result<(), Disconnected<T>> {
        match self.try_push(item) {
            Ok(()) => Ok(()),
            Err(item) => self.push_slow(item),
        }
    }

    #[cold]
    fn push_slow(&self, item: T) -> Result<(), Disconnected<T>> {
        let mut item = Some(item);
        self.buffer.not_full.wait_until(|| {
            let value = item.take()?;
            match self.try_push(value) {
                Ok(()) => Some(Ok(())),
                Err(value) if self.buffer.consumers.load(Acquire) == 0 => {
                    Some(Err(Disconnected(value)))
                }
                Err(value) => {
                    item = Some(value);
                    None
                }
            }
        })
    }

    /// The number of items in the queue at some moment during the call.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// True if the queue held no items at some moment during the call.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fixed number of slots.
    pub fn capacity(&self) -> usize {
        self.buffer.capacity as usize
    }

    /// True when every consumer handle has been dropped: nothing pushed from
    /// now on will be taken out.
    pub fn is_disconnected(&self) -> bool {
        self.buffer.consumers.load(Acquire) == 0
    }

    /// Whether this is the only producer handle now (see `Protocol::pop`).
    #[inline(always)]
    pub(crate) fn alone(&self) -> bool {
        !K::MULTI_PRODUCER || self.buffer.producers.load(Acquire) == 1
    }

    /// A new handle on the same queue, with its own private indices.
    fn clone_handle(&self) -> Self {
        self.buffer.producers.fetch_add(1, Relaxed);
        Producer {
            buffer: self.buffer.clone(),
            side: self.side.clone(),
            kind: PhantomData,
        }
    }

    pub(crate) fn buffer_side(&self) -> (&Buffer<T, W>, &Side) {
        (&self.buffer, &self.side)
    }

    pub(crate) fn notify_consumers_all(&self) {
        self.buffer.not_empty.notify_all();
    }

    /// Waits, among the batch producers, until `ready` says the batch went in.
    pub(crate) fn wait_for_batch_room<R>(&self, ready: impl FnMut() -> Option<R>) -> R {
        self.buffer.not_full_batch.wait_until(ready)
    }
}

impl<T, K: Kind, W: Wait> Consumer<T, K, W> {
    /// Takes the oldest item if there is one, without waiting (an
    /// asynchronous operation).
    #[inline]
    pub fn try_pop(&self) -> Option<T> {
        match K::pop(&*self.buffer, &self.side, self.alone()) {
            Step::Done(item) => {
                self.buffer.not_full.notify_one();
                if K::BATCHES {
                    // Batch producers need different amounts of room: wake
                    // them all to re-check (free when none waits).
                    self.buffer.not_full_batch.notify_all();
                }
                Some(item)
            }
            step => {
                debug_assert!(
                    matches!(step, Step::NotNow),
                    "an in-process ring is never corrupt"
                );
                None
            }
        }
    }

    /// Takes the oldest item, waiting through `W` while the queue is empty
    /// (a synchronous operation). Fails only when the queue is empty and
    /// every producer handle has been dropped.
    ///
    /// ```
    /// let (tx, rx) = ferry_queue::mpsc::channel::<u32>(4);
    /// let t = std::thread::spawn(move || tx.push(5).unwrap());
    /// assert_eq!(rx.pop(), Ok(5));
    /// t.join().unwrap();
    /// assert!(rx.pop().is_err()); // the producer is gone
    /// ```
    #[inline]
    pub fn pop(&self) -> Result<T, Disconnected> {
        match self.try_pop() {
            Some(item) => Ok(item),
            None => self.pop_slow(),
        }
    }

    #[cold]
    fn pop_slow(&self) -> Result<T, Disconnected> {
        self.buffer.not_empty.wait_until(|| {
            if let Some(item) = self.try_pop() {
                return Some(Ok(item));
            }
            if self.buffer.producers.load(Acquire) == 0 {
                // The last producer may have pushed just before it dropped.
                return Some(self.try_pop().ok_or(Disconnected(())));
            }
            None
        })
    }

    /// The number of items in the queue at some moment during the call.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// True if the queue held no items at some moment during the call.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fixed number of slots.
    pub fn capacity(&self) -> usize {
        self.buffer.capacity as usize
    }

    /// True when every producer handle has been dropped: once the queue is
    /// empty, nothing more will arrive.
    pub fn is_disconnected(&self) -> bool {
        self.buffer.producers.load(Acquire) == 0
    }

    /// Whether this is the only consumer handle now (see `Protocol::pop`).
    #[inline(always)]
    fn alone(&self) -> bool {
        !K::MULTI_CONSUMER || self.buffer.consumers.load(Acquire) == 1
    }

    /// A new handle on the same queue, with its own private indices.
    fn clone_handle(&self) -> Self {
        self.buffer.consumers.fetch_add(1, Relaxed);
        Consumer {
            buffer: self.buffer.clone(),
            side: self.side.clone(),
            kind: PhantomData,
        }
    }
}

impl<T, K: Kind + MultiProducer, W: Wait> Clone for Producer<T, K, W> {
    fn clone(&self) -> Self {
        self.clone_handle()
    }
}

impl<T, K: Kind + MultiConsumer, W: Wait> Clone for Consumer<T, K, W> {
    fn clone(&self) -> Self {
        self.clone_handle()
    }
}

impl<T, K: Kind, W: Wait> Drop for Producer<T, K, W> {
    fn drop(&mut self) {
        if self.buffer.producers.fetch_sub(1, AcqRel) == 1 {
            self.buffer.not_empty.notify_all();
        }
    }
}

impl<T, K: Kind, W: Wait> Drop for Consumer<T, K, W> {
    fn drop(&mut self) {
        if self.buffer.consumers.fetch_sub(1, AcqRel) == 1 {
            self.buffer.not_full.notify_all();
            self.buffer.not_full_batch.notify_all();
        }
    }
}

impl<T, K: Kind, W: Wait> fmt::Debug for Producer<T, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl<T, K: Kind, W: Wait> fmt::Debug for Consumer<T, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}
