//! The thread control block: one allocation per thread that holds its
//! header (identity, park state, saved context, stack, locals), the closure
//! it runs and, once it has run, the closure's result — as C-Threads keeps a
//! thread's whole state in one record. A [`Thread`] is one pointer to it,
//! reference-counted by hand.
//!
//! This room owns the block's layout, its reference count and the join
//! protocol; it must not schedule (it never decides where a thread runs)
//! and must not touch a stage it does not own (see the `join` table).
//!
//! # The block
//!
//! `Cell<F, T>` is `#[repr(C)]` with the [`Header`] first, so a pointer to
//! the cell is a pointer to its header: the rest of the runtime sees only
//! `NonNull<Header>` and reaches the typed parts through the header's
//! [`Vtable`], filled in for each `(F, T)`.
//!
//! | `Header::refs` | meaning |
//! |----------------|---------|
//! | `n > 0` | `n` [`Thread`] values and [`RawJoin`]s point at the block; the last one to go frees it |
//!
//! A new block starts at 2: the runtime's own reference (the one that moves
//! through run queues and ends as the processor's `current`) and the join
//! handle's.
//!
//! # The `join` word
//!
//! | bit | set by | meaning |
//! |-----|--------|---------|
//! | `COMPLETE` | the thread, after it wrote its result into the stage (AcqRel) | the result is in the stage, and from now on only the join side touches the stage |
//! | `JOIN_WAITING` | the joiner, after it wrote `joiner` (AcqRel) | `joiner` holds whom to wake when `COMPLETE` is set; the thread takes it out |
//! | `DETACHED` | the join handle's drop (AcqRel), unless the join took the result (then the thread reads the word no more) | nobody will take the result: the thread drops it itself when it completes |
//!
//! The stage is touched by the thread alone until `COMPLETE`, by the join
//! side alone after it; `DETACHED` set before `COMPLETE` keeps the join side
//! away for good, so the thread drops the result right after storing it.
//!
//! # Small blocks
//!
//! A block whose `Cell<F, T>` fits [`SMALL_BLOCK`] (most do: the header is
//! 216 bytes, a closure that captures a few words and a small result fit
//! beside it) is always allocated with that layout, so that a freed one
//! can serve any other such thread: a spawn by a thread on a processor
//! (`spawn`, `Builder::spawn`) takes one from that processor's cache
//! (`Entered::take_block`), and the last reference's drop gives it back,
//! through the function the spawn left in the header (`upcall::keep_block`),
//! to the cache of the processor it runs on. A full cache gives a magazine
//! of them to the process's block depot and an empty one takes one from it
//! (`processor::block_depot`).
//! Other spawns (from outside the runtime, its first thread) take a fresh
//! one, and a drop off a processor, or with the depot at its bound, frees
//! it to the global allocator. C-Threads kept exited threads' records for
//! the next fork the same way. A larger cell is a `Box` of its own.

use std::alloc::Layout;
use std::any::TypeId;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize};

mod join;
mod refs;
mod small_block;

pub(crate) use join::RawJoin;
use refs::release;
use small_block::SMALL_BLOCK;
pub(crate) use small_block::SmallBlock;

use super::locals::LocalTable;
use super::wait_record::WaitRecord;
use super::{Panic, Priority, Schedule, Thread, ThreadId, Unparker};
use crate::arch::Context;
use crate::stack::Stack;

const COMPLETE: u32 = 1;
const JOIN_WAITING: u32 = 2;
const DETACHED: u32 = 4;

/// What every thread's block starts with; see the module docs.
#[repr(C)]
pub(crate) struct Header {
    refs: AtomicUsize,
    /// The park state (see `thread`'s module docs).
    pub(crate) state: AtomicU32,
    /// The join protocol word; see the module docs.
    join: AtomicU32,
    /// Suspension (Mach's running / will-suspend / suspended); see
    /// `thread`'s module docs.
    pub(crate) control: AtomicU32,
    /// Bytes the thread moved through streams since a fine-grain policy
    /// last picked it (saturating; see `sched::fine_grain`): written by the
    /// thread itself while it runs (a load and a store through
    /// [`Header::add_stream_bytes`], not a locked add), reset by the
    /// processor that takes it out of a run queue to run it
    /// ([`Header::take_stream_bytes`]), when it runs nowhere. The run queue
    /// orders the two. A preemption between the thread's load and store
    /// can undo one reset: the next interval then counts the previous
    /// one's bytes too (a rate a little high once, never a wrong thread).
    stream_bytes: AtomicU32,
    /// Time stamp counter ticks the thread has run, when the runtime
    /// accounts them (`Builder::thread_cpu_time`); written (a load and a
    /// store, not a locked add) by one writer at a time, the processor
    /// running it or the kernel thread that lost that processor while the
    /// thread was away (`processor::switch::add_ticks` says which), read by
    /// anyone.
    pub(crate) cpu_ticks: AtomicU64,
    /// The embedder's word (`Thread::tag`); ferry never reads it.
    pub(crate) tag: AtomicUsize,
    /// The thread's [`Priority`] (`Priority::level` order: 0 `High`); any
    /// thread may change it (`Thread::set_priority`), read when the thread
    /// is queued.
    pub(crate) priority: AtomicU8,
    /// Alert bits (`thread::alert`'s module docs): pending, blocked.
    pub(crate) alert: AtomicU8,
    /// Set by the thread itself as it begins to exit (`thread::begin_exit`),
    /// cleared again only if a termination came first; read by the
    /// preemption handler on the thread's own kernel thread, by a processor
    /// about to run the thread, and by its terminator (each after the
    /// thread's switch or park that orders the store).
    pub(crate) exiting: AtomicBool,
    /// When a fine-grain policy last picked the thread to run: the low 32
    /// bits of the monotonic clock in microseconds, `0` for never. Written
    /// and read only by the processor that takes the thread out of a run
    /// queue ([`Header::swap_picked_at`]), ordered by the queue as
    /// `stream_bytes`' reset is. (Sits in the padding before `id`, as
    /// `stream_bytes` sits in the one after `control`: the header keeps
    /// its size.)
    picked_at: AtomicU32,
    pub(crate) id: ThreadId,
    pub(crate) name: Option<Box<str>>,
    /// Saved while the thread is not running; written by the kernel thread
    /// switching it out, read by the one switching it in (ordered by the run
    /// queue or park state hand-over between them).
    pub(crate) context: UnsafeCell<Context>,
    /// Its stack, until it has exited and switched away; then taken by the
    /// processor that finishes the switch.
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    /// Its `thread_local!` values; touched only by the thread itself (and
    /// by its terminator once it has stopped for good).
    pub(crate) locals: UnsafeCell<LocalTable>,
    /// The innermost wait it registered (see `wait_record`): written only by the
    /// thread itself, read by its terminator once it has stopped for good.
    pub(crate) waits: AtomicPtr<WaitRecord>,
    /// Whom to wake when the thread completes: written by the joiner before
    /// it sets `JOIN_WAITING`, taken by the thread after it saw the bit.
    joiner: UnsafeCell<Option<Unparker>>,
    /// How the thread reaches its runtime's scheduler.
    pub(crate) scheduler: Arc<dyn Schedule>,
    /// Where the block goes when the last reference drops, if it is a
    /// small one: the cache of the processor the dropping kernel thread
    /// drives (given at spawn, by the runtime that knows processors).
    keep_block: fn(SmallBlock),
    /// The processor that last switched to this thread: written by that
    /// processor just before the switch, read by the thread right after it
    /// (same kernel thread, so program order suffices). Others read it only
    /// as a hint (`Thread::last_processor`; a join asks whether the thread
    /// has run yet: null until it first has).
    pub(crate) processor: AtomicPtr<()>,
    /// The next thread in the runtime's injector list while this one
    /// waits there (`sched::queue`); touched only under the injector's
    /// lock, by whoever holds the runtime's reference in that list.
    pub(crate) queue_next: AtomicPtr<Header>,
    /// The word `rpc` keeps for the thread's logical-thread frame (its
    /// protocol is in `rpc::logical`); 0 when the thread is in no call.
    pub(crate) rpc: AtomicUsize,
    vtable: &'static Vtable,
}

impl Header {
    /// Adds `n` bytes to the stream bytes the thread moved (saturating).
    /// The thread itself only, while it runs: a load and a store, no
    /// locked instruction (see the field).
    #[inline]
    pub(crate) fn add_stream_bytes(&self, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let was = self.stream_bytes.load(Relaxed);
        self.stream_bytes.store(was.saturating_add(n), Relaxed);
    }

    /// The stream bytes the thread moved since the last call, and starts
    /// counting again from zero. Only the processor taking the thread out
    /// of a run queue (the thread runs nowhere).
    #[inline]
    pub(crate) fn take_stream_bytes(&self) -> u32 {
        let n = self.stream_bytes.load(Relaxed);
        self.stream_bytes.store(0, Relaxed);
        n
    }

    /// Records `now` as when the thread was last picked and returns the
    /// previous record (`0`: never). Only the processor taking the thread
    /// out of a run queue.
    #[inline]
    pub(crate) fn swap_picked_at(&self, now: u32) -> u32 {
        let was = self.picked_at.load(Relaxed);
        self.picked_at.store(now, Relaxed);
        was
    }
}

/// The typed operations on a block, for its `(F, T)`.
struct Vtable {
    /// Runs the closure and completes the join protocol. Called once, by the
    /// thread itself.
    run: unsafe fn(NonNull<Header>),
    /// Moves the result out into `*mut Option<Result<T, Panic>>`.
    take_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops and frees the block.
    dealloc: unsafe fn(NonNull<Header>),
    /// The type of the closure's result.
    output_type: fn() -> TypeId,
    /// Completes the thread with the `T` read out of `*mut T` (as if its
    /// closure had returned it).
    finish_with: unsafe fn(NonNull<Header>, *mut ()),
    /// Completes a thread that never ran with a panic saying the runtime
    /// ended first, dropping its closure.
    abandon: unsafe fn(NonNull<Header>),
}

/// Where the closure and then its result live.
enum Stage<F, T> {
    Ready(F),
    Done(Result<T, Panic>),
    Taken,
}

#[repr(C)]
struct Cell<F, T> {
    header: Header,
    stage: UnsafeCell<Stage<F, T>>,
}

impl<F: FnOnce() -> T + Send + 'static, T: Send + 'static> Cell<F, T> {
    const VTABLE: Vtable = Vtable {
        run: Self::run,
        take_output: Self::take_output,
        dealloc: Self::dealloc,
        output_type: TypeId::of::<T>,
        finish_with: Self::finish_with,
        abandon: Self::abandon,
    };

    /// # Safety
    /// `ptr` is the header of a live `Cell<F, T>`, and the caller is the
    /// thread itself, running for the first time.
    unsafe fn run(ptr: NonNull<Header>) {
        let cell = ptr.cast::<Cell<F, T>>().as_ptr();
        // SAFETY: until `COMPLETE` only the thread touches the stage, and
        // the caller is the thread; the block lives while the thread runs
        // (the runtime's reference is its `current`). The borrow ends before
        // the closure runs, which may end the thread with `finish_with`.
        let f = match std::mem::replace(unsafe { &mut *(*cell).stage.get() }, Stage::Taken) {
            Stage::Ready(f) => f,
            _ => return,
        };
        let result = catch_unwind(AssertUnwindSafe(f)).map_err(Panic);
        // SAFETY: as above: the block lives while the thread runs.
        if !super::begin_exit(unsafe { ptr.as_ref() }) {
            // Terminated first: its terminator completes it. The result
            // goes (a panicking destructor is kept from the runtime).
            let _ = catch_unwind(AssertUnwindSafe(move || drop(result)));
            // SAFETY: as above.
            unsafe { ptr.as_ref() }.scheduler.stop_terminated();
        }
        // SAFETY: as above; called once, by the thread.
        unsafe { Self::complete(ptr, result) };
    }

    /// Stores the thread's result and completes the join protocol.
    ///
    /// # Safety
    /// As `run`; called once per thread, by the thread itself.
    unsafe fn complete(ptr: NonNull<Header>, result: Result<T, Panic>) {
        let cell = ptr.cast::<Cell<F, T>>().as_ptr();
        // SAFETY: the caller is the thread, before `COMPLETE`.
        let stage = unsafe { &mut *(*cell).stage.get() };
        *stage = Stage::Done(result);
        // SAFETY: `cell` is live (see above).
        let header = unsafe { &(*cell).header };
        let prev = header.join.fetch_or(COMPLETE, AcqRel);
        if prev & DETACHED != 0 {
            // Nobody will join: the result goes now, on this thread.
            *stage = Stage::Taken;
        }
        if prev & JOIN_WAITING != 0 {
            // SAFETY: the joiner wrote `joiner` before setting the bit, and
            // touches it no more; the AcqRel above saw its write.
            let joiner = unsafe { (*header.joiner.get()).take() };
            if let Some(j) = joiner {
                j.unpark();
            }
        }
    }

    /// # Safety
    /// As `complete`, and `value` points at a `T` the callee moves out.
    unsafe fn finish_with(ptr: NonNull<Header>, value: *mut ()) {
        // SAFETY: the caller hands over the `T` behind `value`.
        let value = unsafe { value.cast::<T>().read() };
        // SAFETY: forwarded.
        unsafe { Self::complete(ptr, Ok(value)) };
    }

    /// # Safety
    /// `ptr` is the header of a live `Cell<F, T>` whose thread never ran
    /// and never will (its runtime stopped every processor), so nobody
    /// else touches its stage.
    unsafe fn abandon(ptr: NonNull<Header>) {
        let cell = ptr.cast::<Cell<F, T>>().as_ptr();
        // SAFETY: the thread never runs, so its stage is ours (the
        // contract); the borrow ends before `complete` borrows it again.
        let stage = std::mem::replace(unsafe { &mut *(*cell).stage.get() }, Stage::Taken);
        if !matches!(stage, Stage::Ready(_)) {
            return;
        }
        // The closure's captures go now; a panicking destructor is kept
        // from the caller (the runtime's end).
        let _ = catch_unwind(AssertUnwindSafe(move || drop(stage)));
        let why: Box<dyn std::any::Any + Send> = Box::new(ABANDONED);
        // SAFETY: as above; completed once (the stage was `Ready`).
        unsafe { Self::complete(ptr, Err(Panic(why))) };
    }

    /// # Safety
    /// `ptr` is the header of a live `Cell<F, T>` whose `join` word has
    /// `COMPLETE` (seen with Acquire) and no `DETACHED`; the caller is the
    /// only join side, and `out` points at an `Option<Result<T, Panic>>`.
    unsafe fn take_output(ptr: NonNull<Header>, out: *mut ()) {
        let cell = ptr.cast::<Cell<F, T>>().as_ptr();
        // SAFETY: after `COMPLETE` the stage is the join side's alone.
        let stage = unsafe { &mut *(*cell).stage.get() };
        if let Stage::Done(r) = std::mem::replace(stage, Stage::Taken) {
            // SAFETY: the caller passes the output slot of this `T`.
            unsafe { *out.cast::<Option<Result<T, Panic>>>() = Some(r) };
        }
    }

    /// Whether this cell is allocated as a [`SmallBlock`] (see the module
    /// docs).
    const SMALL: bool = size_of::<Cell<F, T>>() <= SMALL_BLOCK.size()
        && align_of::<Cell<F, T>>() <= SMALL_BLOCK.align();

    /// # Safety
    /// `ptr` came from [`new`] for this `(F, T)` and nothing refers to the
    /// block any more.
    unsafe fn dealloc(ptr: NonNull<Header>) {
        let cell = ptr.cast::<Cell<F, T>>().as_ptr();
        if Self::SMALL {
            // SAFETY: the cell is live until the drop below.
            let keep_block = unsafe { (*cell).header.keep_block };
            // Owned first, so that a panicking drop of the result still
            // frees the memory.
            // SAFETY: `new` allocated a small cell's memory with the small
            // layout, and nothing refers to it any more (the contract).
            let block = unsafe { SmallBlock::from_raw(ptr.cast()) };
            // SAFETY: the cell is live and ours; it is not used again.
            unsafe { ptr::drop_in_place(cell) };
            keep_block(block);
        } else {
            // SAFETY: `Block::alloc` got a large cell's memory with its own
            // layout, as a `Box` does, and the box is ours to drop (the
            // contract).
            drop(unsafe { Box::from_raw(cell) });
        }
    }
}

/// What the join of a thread that never ran before its runtime ended
/// returns, as the panic's message.
pub(crate) const ABANDONED: &str = "ferry: the runtime ended before this thread ran";

/// Completes thread `ptr`, which never ran, as [`ABANDONED`], if it has not
/// completed: its joiner is woken with that error.
///
/// # Safety
/// The thread never ran and never will: its runtime stopped every
/// processor, and the caller holds the reference a queue held.
pub(crate) unsafe fn abandon(ptr: NonNull<Header>) {
    // SAFETY: the caller holds a reference, so the block is live.
    let header = unsafe { ptr.as_ref() };
    if !header.processor.load(Relaxed).is_null() || header.join.load(Acquire) & COMPLETE != 0 {
        return;
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe { (header.vtable.abandon)(ptr) }
}

/// Runs the thread's closure and completes its join protocol.
///
/// # Safety
/// `ptr` is the running thread's own block (which the processor's `current`
/// keeps alive whenever the thread runs); called once, by that thread.
pub(crate) unsafe fn run_main(ptr: NonNull<Header>) {
    // SAFETY: the block is live (the contract); its vtable is its own.
    unsafe { (ptr.as_ref().vtable.run)(ptr) }
}

/// Completes the running thread with `value` as its result, without
/// returning from its closure; false (and `value` dropped) if the closure's
/// result is not a `T`.
///
/// # Safety
/// As [`run_main`], called by the thread from inside its closure; the
/// thread then exits without returning to the closure.
pub(crate) unsafe fn finish_with<T: 'static>(ptr: NonNull<Header>, value: T) -> bool {
    // SAFETY: the block is live (the contract).
    let vtable = unsafe { ptr.as_ref().vtable };
    if (vtable.output_type)() != TypeId::of::<T>() {
        return false;
    }
    let mut value = ManuallyDrop::new(value);
    // SAFETY: the vtable's `T` is this `T` (checked above); the callee
    // moves the value out, and `ManuallyDrop` keeps us from dropping it.
    unsafe { (vtable.finish_with)(ptr, (&raw mut value).cast()) };
    true
}

/// Whether the closure of block `ptr` returns a `T`.
pub(crate) fn returns<T: 'static>(ptr: NonNull<Header>) -> bool {
    // SAFETY: callers hold a reference to the block.
    (unsafe { ptr.as_ref() }.vtable.output_type)() == TypeId::of::<T>()
}

/// Whether the thread of block `ptr` has completed.
pub(crate) fn is_complete(ptr: NonNull<Header>) -> bool {
    // SAFETY: callers hold a reference to the block.
    unsafe { ptr.as_ref() }.join.load(Acquire) & COMPLETE != 0
}

/// Takes the thread's locals out of its block.
///
/// # Safety
/// As [`run_main`]; nothing else borrows the table meanwhile.
pub(crate) unsafe fn take_locals(ptr: NonNull<Header>) -> LocalTable {
    // SAFETY: the block is live and only the thread touches its table.
    unsafe { std::mem::take(&mut *ptr.as_ref().locals.get()) }
}

/// Takes the stack out of the block of a thread that never runs again.
///
/// # Safety
/// Nothing runs on the stack any more and the thread's context is never
/// resumed; the caller is the only one touching the field (the processor
/// that finished the thread's last switch, or its terminator).
pub(crate) unsafe fn take_stack(ptr: NonNull<Header>) -> Option<Stack> {
    // SAFETY: the block is live (callers hold a reference); exclusive by
    // the contract.
    unsafe { (*ptr.as_ref().stack.get()).take() }
}

/// Settings of a block being made.
pub(crate) struct Spec {
    pub(crate) id: ThreadId,
    pub(crate) name: Option<Box<str>>,
    pub(crate) priority: Priority,
    pub(crate) context: Context,
    /// `None` for an adopted thread, which runs on a stack ferry does not own.
    pub(crate) stack: Option<Stack>,
    pub(crate) scheduler: Arc<dyn Schedule>,
    /// See `Header::keep_block`.
    pub(crate) keep_block: fn(SmallBlock),
    /// The embedder's word to start with (`Thread::tag`).
    pub(crate) tag: usize,
}

/// The memory of one thread's block, not yet filled in: a spawn takes it
/// before anything else (its id, its stack), so that a spawn the allocator
/// refuses fails having taken nothing. Dropped unused, it is freed.
pub(crate) struct Block<F, T> {
    p: NonNull<Cell<F, T>>,
}

impl<F: FnOnce() -> T + Send + 'static, T: Send + 'static> Block<F, T> {
    /// Memory for a `Cell<F, T>`: a small block from the cache of the
    /// processor the caller has entered, if given and it has one, else from
    /// the global allocator; `None` if that has no memory.
    #[inline(always)]
    pub(crate) fn alloc(cached: impl FnOnce() -> Option<SmallBlock>) -> Option<Block<F, T>> {
        let p: *mut u8 = if Cell::<F, T>::SMALL {
            match cached() {
                Some(block) => block.into_raw().as_ptr(),
                None => SmallBlock::try_alloc()?.into_raw().as_ptr(),
            }
        } else {
            // SAFETY: a cell has a header, so its size is not zero.
            unsafe { std::alloc::alloc(Layout::new::<Cell<F, T>>()) }
        };
        NonNull::new(p.cast::<Cell<F, T>>()).map(|p| Block { p })
    }
}

impl<F, T> Drop for Block<F, T> {
    fn drop(&mut self) {
        let small = size_of::<Cell<F, T>>() <= SMALL_BLOCK.size()
            && align_of::<Cell<F, T>>() <= SMALL_BLOCK.align();
        let layout = if small {
            SMALL_BLOCK
        } else {
            Layout::new::<Cell<F, T>>()
        };
        // SAFETY: `alloc` got this memory with this layout (a small cell's
        // from a small block), nothing was built in it, and it is ours.
        unsafe { std::alloc::dealloc(self.p.as_ptr().cast(), layout) };
    }
}

/// Makes a thread's block, in `block`, with two references: the returned
/// [`Thread`] (the runtime's) and [`RawJoin`] (the handle's).
// Always inlined into `Builder::make`, so the header is written in place
// with the spawn's constants folded.
#[inline(always)]
pub(crate) fn new<F, T>(block: Block<F, T>, spec: Spec, f: F) -> (Thread, RawJoin<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // Allocated first and filled in place: the block is not built on the
    // stack and copied. From here the memory belongs to the cell.
    let p: *mut Cell<F, T> = ManuallyDrop::new(block).p.as_ptr();
    // SAFETY: `p` points at memory for an uninitialised `Cell` (a small
    // block's layout holds it: `SMALL`); both of its fields are written
    // here, once.
    unsafe {
        (&raw mut (*p).header).write(Header {
            refs: AtomicUsize::new(2),
            state: AtomicU32::new(super::park_word::EMPTY),
            join: AtomicU32::new(0),
            control: AtomicU32::new(0),
            stream_bytes: AtomicU32::new(0),
            cpu_ticks: AtomicU64::new(0),
            tag: AtomicUsize::new(spec.tag),
            priority: AtomicU8::new(spec.priority.level() as u8),
            alert: AtomicU8::new(0),
            exiting: AtomicBool::new(false),
            picked_at: AtomicU32::new(0),
            id: spec.id,
            name: spec.name,
            context: UnsafeCell::new(spec.context),
            stack: UnsafeCell::new(spec.stack),
            locals: UnsafeCell::new(LocalTable::new()),
            waits: AtomicPtr::new(std::ptr::null_mut()),
            joiner: UnsafeCell::new(None),
            scheduler: spec.scheduler,
            keep_block: spec.keep_block,
            processor: AtomicPtr::new(std::ptr::null_mut()),
            queue_next: AtomicPtr::new(std::ptr::null_mut()),
            rpc: AtomicUsize::new(0),
            vtable: &Cell::<F, T>::VTABLE,
        });
        (&raw mut (*p).stage).write(UnsafeCell::new(Stage::<F, T>::Ready(f)));
    }
    // SAFETY: a block's memory is never null; `Cell` is `repr(C)` with the
    // header first, so the cast points at the header.
    let ptr = unsafe { NonNull::new_unchecked(p).cast::<Header>() };
    (
        Thread { ptr },
        RawJoin {
            ptr,
            _output: PhantomData,
        },
    )
}

#[cfg(test)]
mod size_tests {
    /// The fine-grain words sit in padding: the header did not grow (a
    /// larger one would push more closures out of the small blocks).
    #[test]
    fn header_keeps_its_size() {
        assert_eq!(size_of::<super::Header>(), 216);
    }
}
