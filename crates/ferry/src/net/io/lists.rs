//! The reactor's wait lists of the sockets: a reader and a writer list per
//! registration, the table of parked threads `Thread::abort` consults, and
//! the park of one operation on them (step 4 of the parent's docs).
//!
//! This file owns the lists and the park; it must not hold a list's
//! spinlock across a park or a system call, nor try an operation (the
//! parent does).

use std::any::Any;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::sync::atomic::fence;

use once_cell::race::OnceBox;
use std::time::Instant;

use super::{Dir, closed};
use crate::event::readiness::state::{self, READ_INTEREST, WRITE_INTEREST};
use crate::event::readiness::{CHUNK, MAX_CHUNKS, Reactor, Token, Waiters};
use crate::sync::SpinLock;
use crate::sync::waiter::{Entry, Site, WaitList, Waiter};
use crate::waits::WaitsOn;

/// The reader and writer lists of one registration.
#[derive(Default)]
struct DirLists {
    read: SpinLock<WaitList>,
    write: SpinLock<WaitList>,
}

/// A parked thread, for `Thread::abort`.
struct Parked {
    index: u32,
    dir: Dir,
    aborted: bool,
}

/// The wait lists of every registration of one reactor, in chunks laid
/// out as the reactor's slab; the reactor's [`Waiters`] hook.
pub(crate) struct Lists {
    chunks: Box<[OnceBox<[DirLists; CHUNK]>]>,
    /// Threads parked (by thread id), for `Thread::abort`.
    parked: SpinLock<HashMap<u64, Parked>>,
}

impl Lists {
    pub(super) fn new() -> Lists {
        Lists {
            chunks: (0..MAX_CHUNKS).map(|_| OnceBox::new()).collect(),
            parked: SpinLock::new(HashMap::new()),
        }
    }

    fn of(&self, index: u32) -> &DirLists {
        let (c, i) = (index as usize / CHUNK, index as usize % CHUNK);
        // Racers for a new chunk each make one and the first installed
        // wins: none waits in the kernel for a maker that a time slice may
        // have switched out (thousands of sockets' first parks at once
        // would each cost a kernel thread, up to the runtime's limit).
        &self.chunks[c].get_or_init(|| {
            let lists: Box<[DirLists]> = (0..CHUNK).map(|_| DirLists::default()).collect();
            lists.try_into().ok().expect("CHUNK lists")
        })[i]
    }

    fn list(&self, index: u32, dir: Dir) -> &SpinLock<WaitList> {
        let l = self.of(index);
        match dir {
            Dir::Read => &l.read,
            Dir::Write => &l.write,
        }
    }

    /// Wakes every waiter of `list`.
    fn wake_list(list: &SpinLock<WaitList>) {
        let entry = Entry::enter();
        let batch = list.lock_entered(&entry).take();
        // SAFETY: socket waiters never remove themselves from a batch (a
        // timed-out or aborted one removes itself only while `holds` says
        // it is queued); the batch is ours.
        unsafe { batch.wake_all(entry) };
    }

    /// Leaves the wait of a terminated waiter `w` (see `sync::waiter`'s
    /// termination table): a readiness wake is a broadcast, so there is
    /// nothing to pass on; and the reactor stops counting it.
    ///
    /// # Safety
    /// As `Site::new`'s `abandon`: `list` is a registration's list of
    /// `reactor`, both alive (the slab and the lists are never freed while
    /// a socket of theirs exists), and `w` a waiter of it whose thread has
    /// stopped for good.
    unsafe fn abandon(list: *const (), reactor: *const (), w: &Waiter) -> bool {
        // SAFETY: the contract.
        let (list, reactor) = unsafe {
            (
                &*list.cast::<SpinLock<WaitList>>(),
                &*reactor.cast::<Reactor>(),
            )
        };
        let entry = Entry::enter();
        let mut l = list.lock_entered(&entry);
        if l.holds(w) {
            // SAFETY: queued here (checked under the lock).
            unsafe { l.remove(w) };
        } else if !w.is_woken() && !w.is_out() {
            return false;
        }
        drop(l);
        drop(entry);
        reactor.wait_ends();
        true
    }
}

impl Waiters for Lists {
    fn wake(&self, index: u32, bits: u64) {
        let l = self.of(index);
        if bits & READ_INTEREST != 0 {
            Lists::wake_list(&l.read);
        }
        if bits & WRITE_INTEREST != 0 {
            Lists::wake_list(&l.write);
        }
    }

    fn has_parked(&self, index: u32) -> bool {
        let l = self.of(index);
        !l.read.lock().is_empty() || !l.write.lock().is_empty()
    }

    fn abort(&self, thread: u64) -> bool {
        let target = {
            let mut parked = self.parked.lock();
            match parked.get_mut(&thread) {
                Some(p) => {
                    p.aborted = true;
                    (p.index, p.dir)
                }
                None => return false,
            }
        };
        Lists::wake_list(self.list(target.0, target.1));
        true
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Parks the calling ferry thread until registration `t` of `reactor`
/// changes from `seen` in direction `dir` (see the module docs), or until
/// `deadline`.
pub(super) fn wait(
    reactor: &Arc<Reactor>,
    t: Token,
    dir: Dir,
    seen: u64,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let lists = reactor
        .hook()
        .as_any()
        .downcast_ref::<Lists>()
        .expect("the reactor's hook is net's lists");
    let list = lists.list(t.index, dir);
    let word = reactor.word(t.index);
    let me = crate::thread::current();
    let id = me.id().as_u64();
    lists.parked.lock().insert(
        id,
        Parked {
            index: t.index,
            dir,
            aborted: false,
        },
    );
    // An alert that came before the wait aborts it here; one that comes
    // later finds it in `parked` (`thread::alert`'s module docs).
    fence(SeqCst);
    if me.alert_aborts_calls() {
        lists.parked.lock().remove(&id);
        return Err(aborted());
    }
    reactor.wait_begins();
    let what = match dir {
        Dir::Read => WaitsOn::Readable,
        Dir::Write => WaitsOn::Writable,
    };
    let outcome = {
        let entry = Entry::enter();
        // SAFETY: `abandon` takes a list of `reactor`'s lists and the
        // reactor, which outlive every wait on them (this thread holds an
        // `Arc` of the reactor, which holds the lists).
        let w = entry.waiter(
            unsafe { Site::new(Lists::abandon, list, Some(&**reactor)) }.describing(what, word),
        );
        let queued = {
            let mut l = list.lock_entered(&entry);
            let now = word.load(Acquire);
            if state::generation(now) != t.generation {
                Err(closed())
            } else if state::flags(now) & dir.interest() != 0
                || state::tick(now) != state::tick(seen)
            {
                Ok(false)
            } else {
                // SAFETY: `w` is in no list and stays on this frame until
                // it is woken or removes itself below under the lock.
                unsafe { l.push_back(&w) };
                Ok(true)
            }
        };
        drop(entry);
        match queued {
            Ok(true) => match deadline {
                // The timer is armed in the wheel for the park only, and
                // taken out when it ends.
                Some(d) => crate::thread::with_timer(&me.shared().sources.timers, d, |fired| {
                    park_until(list, &w, lists, id, Some(fired))
                }),
                None => park_until(list, &w, lists, id, None),
            },
            other => other.map(|_| ()),
        }
    };
    reactor.wait_ends();
    let aborted_wait = lists.parked.lock().remove(&id).is_some_and(|p| p.aborted);
    if aborted_wait {
        return Err(aborted());
    }
    outcome
}

/// The error of an aborted wait.
fn aborted() -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        "the wait on the socket was aborted",
    )
}

/// Parks until `w` is woken, or until the timer `fired` fires or the
/// thread is aborted: then takes `w` out of `list` itself (unless a waker
/// took it first).
fn park_until(
    list: &SpinLock<WaitList>,
    w: &Waiter,
    lists: &Lists,
    id: u64,
    fired: Option<&dyn Fn() -> bool>,
) -> io::Result<()> {
    loop {
        if w.is_woken() {
            return Ok(());
        }
        let aborted = || lists.parked.lock().get(&id).is_some_and(|p| p.aborted);
        let timed_out = fired.is_some_and(|f| f());
        if timed_out || aborted() {
            let entry = Entry::enter();
            let mut l = list.lock_entered(&entry);
            if l.holds(w) {
                // SAFETY: queued here (checked under the lock).
                unsafe { l.remove(w) };
                return if timed_out {
                    Err(super::timed_out())
                } else {
                    Ok(())
                };
            }
            if w.is_woken() {
                return Ok(());
            }
            // In a batch a waker is waking: it wakes us soon.
        }
        crate::thread::park();
    }
}
