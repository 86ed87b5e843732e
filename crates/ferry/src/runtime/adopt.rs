//! Adopting the calling flow of control: [`Builder::adopt`] starts a
//! runtime in the background and makes the caller's own flow, on the
//! stack it already runs on, the runtime's first user-level thread, while
//! the kernel thread that called goes on to drive processor 0 from a stack
//! of its own (004 §2.1's start of a program; the C API's way in, and a
//! fork child's, [`Builder::adopt_after_fork`]).
//!
//! This file owns that hand-over of the calling kernel thread; it must not
//! build the runtime's shared state (`Builder::prepare` does).

use std::io;
use std::sync::Arc;

use super::{Builder, Handle};
use crate::header::raw::{self, Block, Spec};
use crate::header::{Ready, Schedule, Thread, ThreadId};
use crate::thread;
use crate::upcall::{self, Activation, Assignment, Shared};

impl Builder {
    /// Starts the runtime in the background and makes the calling kernel
    /// thread's own flow of control its first user-level thread, on the
    /// stack it already runs on: when this returns, the caller is a ferry
    /// thread (it may [`spawn`](crate::spawn), block at user level, and be
    /// moved to another kernel thread at any switch), and the kernel thread
    /// that called drives processor 0 from a stack of its own. This is how
    /// scheduler activations start a program (004 §2.1), and how ferry's C
    /// API starts on its first call.
    ///
    /// The runtime runs until the process exits; it is not shut down. The
    /// adopted flow may be on any kernel thread when it ends, so it must end
    /// the process (`exit`, as a C `main` returning does) rather than
    /// return into code tied to the kernel thread it started on (it must not,
    /// say, end a `std::thread`).
    ///
    /// ```no_run
    /// // In a program's `main`:
    /// let rt = ferry::Runtime::builder().processors(2).adopt().unwrap();
    /// let t = ferry::spawn(|| 6 * 7);
    /// assert_eq!(t.join().unwrap(), 42);
    /// assert_eq!(rt.processors(), 2);
    /// std::process::exit(0);
    /// ```
    ///
    /// # Errors
    /// If a kernel thread or a stack cannot be made.
    ///
    /// # Panics
    /// If the calling kernel thread already runs ferry threads.
    pub fn adopt(&self) -> io::Result<Handle> {
        self.adopt_on(crate::thread::caller_stack())
    }

    /// [`adopt`](Builder::adopt), for a flow that runs on `stack` (what
    /// `sync::owner` tells locks the adopted thread holds by).
    fn adopt_on(&self, stack: Option<std::ops::Range<usize>>) -> io::Result<Handle> {
        let (shared, count) = self.prepare("ferry::Builder::adopt")?;
        let page = crate::stats::start(&shared, self.stats);
        // The first thread: a block without a stack of its own, whose
        // context the switch below fills in.
        let first = || {};
        let block =
            Block::alloc(|| None).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let (main, join) = raw::new(
            block,
            Spec {
                id: ThreadId(shared.next_thread_ids(1).start),
                name: Some("main".into()),
                priority: thread::Priority::default(),
                context: crate::arch::Context::empty(),
                stack: None,
                scheduler: Arc::clone(&shared) as Arc<dyn Schedule>,
                keep_block: upcall::keep_block,
                tag: 0,
            },
            first,
        );
        drop(join);
        let driver_stack = crate::stack::StackCache::global().get(shared.stack_size)?;
        Self::start_helpers(&shared, count)?;
        if let Some(page) = page {
            page.keep_until_exit();
        }
        let caller = shared.activations.register_caller();
        let from = main.context_ptr();
        let header = main.as_ptr();
        let start = Box::new(AdoptedStart {
            shared: Arc::clone(&shared),
            caller,
            main,
            stack: driver_stack,
        });
        let top = start.stack.top();
        // SAFETY: the driver stack is owned by `start`, which is leaked for
        // as long as the process runs; the entry catches every panic.
        let driver =
            unsafe { crate::arch::prepare(top, adopted_driver, Box::into_raw(start).cast()) };
        // SAFETY: `from` is the first thread's context slot, which its block
        // (queued by the driver only once it runs) keeps in place; `driver`
        // was just prepared and is resumed once.
        let _p = unsafe { thread::switch_in_adopted(from, &driver, header) };
        crate::thread::note_adopted_stack(stack);
        let handle = Handle { shared };
        crate::runtime_started(&handle, self.allocd);
        Ok(handle)
    }

    /// In the child of a `fork()` made by a ferry thread: abandons the
    /// parent's runtime (the child holds only the calling kernel thread;
    /// the other threads and their memory stay behind, unreachable) and
    /// [`adopt`](Builder::adopt)s the calling flow into a fresh runtime, so
    /// the child keeps using ferry (003 §6: "the child task contains exactly
    /// one thread corresponding to the calling thread").
    ///
    /// # Errors
    /// As [`adopt`](Builder::adopt).
    ///
    /// # Safety
    /// Only in a fork child, on the flow that called `fork`, before any
    /// other ferry call in the child: the parent's runtime state copied
    /// into the child is abandoned, never touched again.
    pub unsafe fn adopt_after_fork(&self) -> io::Result<Handle> {
        // The stack the flow runs on, read through the parent's state (the
        // forking thread's header) before that state is abandoned.
        let stack = crate::thread::caller_stack();
        // SAFETY: the caller's contract: a fork child, nothing else of
        // ferry's has run in it.
        unsafe { upcall::forget_local() };
        self.adopt_on(stack)
    }
}

/// What the kernel thread that adopts its flow of control as a runtime's
/// first thread needs on the stack it continues on.
struct AdoptedStart {
    shared: Arc<Shared>,
    caller: Arc<Activation>,
    main: Thread,
    stack: crate::stack::Stack,
}

/// Where the adopting kernel thread continues after its first thread's
/// context was saved: queues that thread and drives processor 0, for good.
unsafe extern "C" fn adopted_driver(arg: *mut ()) -> ! {
    // SAFETY: `adopt` passes a leaked `Box<AdoptedStart>` and resumes here
    // once; the box (and the stack we run on, inside it) is never freed.
    let start: &'static mut AdoptedStart = unsafe { &mut *arg.cast::<AdoptedStart>() };
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let shared = Arc::clone(&start.shared);
        let main = start.main.clone();
        shared.schedule(main, Ready::Spawned);
        start.caller.main(
            &shared,
            Some(Assignment::Start(shared.processors[0].as_static())),
        );
    }));
    if run.is_err() {
        eprintln!("ferry: the adopted runtime's first driver panicked");
        std::process::abort();
    }
    // An adopted runtime is never shut down, so its driver never returns;
    // should it, this kernel thread just waits for the process to end.
    loop {
        std::thread::park();
    }
}
