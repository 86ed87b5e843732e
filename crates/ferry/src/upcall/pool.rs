//! The activations of a runtime and its pool of spares: making kernel
//! threads (up to the runtime's bound), handing a spare an assignment
//! (take over a lent processor, start one, keep the watch, stand in), and
//! retiring them at the end.
//!
//! This file owns the pool and the assignment word; it must not decide
//! when a processor needs a new driver (`Shared::hand_lent`, the monitor
//! and processor changes do).

use std::ptr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::activation::{Activation, Assignment};
use super::{Shared, Words};
use super::{StandInBy, Takeover};
use crate::processor::{NO_CORE, Processor};
use crate::sys::SchedClass;

/// An assignment as one word: the processor's address (aligned to at least
/// 8) with a tag in the low three bits: `0` an urgent `Take`, `1` `Start`,
/// `2` a when-idle `Take`, `3` a `StandIn` the runtime's monitor provided, `4`
/// one the activation took up itself; [`WATCH`] (tag 3, no address) for
/// `Watch`.
pub(super) fn encode(a: Assignment) -> usize {
    match a {
        Assignment::Take(p, how) => {
            ptr::from_ref(p) as usize | if how == Takeover::WhenIdle { 2 } else { 0 }
        }
        Assignment::Start(p) => ptr::from_ref(p) as usize | 1,
        Assignment::StandIn(p, by) => {
            ptr::from_ref(p) as usize | if by == StandInBy::Monitor { 3 } else { 4 }
        }
        Assignment::Watch => WATCH,
    }
}

/// How long a spare beyond the pool's [`reserve`] waits for an assignment
/// before it retires (its kernel thread ends).
pub(super) const RETIRE_AFTER: Duration = Duration::from_secs(1);

/// How many spares the pool keeps however long they idle: one per
/// processor and two more (the watch and a blocking call's handoff need one
/// at once; making a kernel thread then would cost tens of microseconds).
pub(super) fn reserve(shared: &Shared) -> usize {
    shared.processors.len() + 2
}

/// `Assignment::Watch`, encoded: no processor's address.
const WATCH: usize = 3;

pub(super) fn decode(word: usize) -> Assignment {
    if word == WATCH {
        return Assignment::Watch;
    }
    // SAFETY: encoded by `encode` from a processor of the live runtime.
    let p = unsafe { &*((word & !7) as *const Processor) };
    match word & 7 {
        0 => Assignment::Take(p, Takeover::AtOnce),
        1 => Assignment::Start(p),
        2 => Assignment::Take(p, Takeover::WhenIdle),
        3 => Assignment::StandIn(p, StandInBy::Monitor),
        _ => Assignment::StandIn(p, StandInBy::Itself),
    }
}

const _: () = assert!(std::mem::align_of::<Processor>() >= 8);

/// An activation and its kernel thread (none for the runtime's caller).
type Registered = (Arc<Activation>, Option<std::thread::JoinHandle<()>>);

/// Every activation of a runtime, and the pool of spare ones.
pub(crate) struct Activations {
    all: std::sync::Mutex<Vec<Registered>>,
    pool: std::sync::Mutex<Vec<Arc<Activation>>>,
    /// How many activations there are (read without the lock).
    count: AtomicUsize,
    max: usize,
    /// The activations of an ended run, joined: kept until the runtime
    /// itself goes, because a driver word may still name one (thread
    /// control on a `Thread` kept past the run reads the word and signals
    /// its kernel thread, which then has exited: the signal is refused).
    retired: std::sync::Mutex<Vec<Arc<Activation>>>,
}

impl Activations {
    pub(crate) fn new(max: usize) -> Activations {
        Activations {
            all: std::sync::Mutex::new(Vec::new()),
            pool: std::sync::Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            max,
            retired: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The most kernel threads the runtime runs as activations.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// How many kernel threads are activations now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// Registers the calling kernel thread's activation (the runtime's
    /// first), which the caller then runs.
    pub(crate) fn register_caller(&self) -> Arc<Activation> {
        let a = Arc::new(Activation::new());
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        all.push((Arc::clone(&a), None));
        // Room in the pool for every activation (see `to_pool`); at the
        // runtime's start, where a failure would abort anyway.
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve(all.len());
        // And among the retired (see `join_all`).
        self.retired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve(all.len());
        drop(all);
        self.count.fetch_add(1, Relaxed);
        a
    }

    /// Starts a new activation on a new kernel thread, running `first`;
    /// fails when the bound is reached or no thread can be made.
    pub(crate) fn spawn(
        &self,
        shared: &Arc<Shared>,
        first: Option<Assignment>,
    ) -> std::io::Result<()> {
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.is_shut_down() {
            return Err(std::io::Error::other("ferry: the runtime is shutting down"));
        }
        if all.len() >= self.max {
            return Err(std::io::Error::other(
                "ferry: the runtime's activation bound is reached",
            ));
        }
        // Room for the new activation in the list, in the pool and among
        // the retired, made now, where a failure is an error: an activation
        // going back to the pool (after a blocking call, with memory short),
        // and the end of the run (`join_all`), then never allocate.
        let out_of_memory = |_| std::io::Error::from(std::io::ErrorKind::OutOfMemory);
        all.try_reserve(1).map_err(out_of_memory)?;
        {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            let room = (all.len() + 1).saturating_sub(pool.len());
            pool.try_reserve(room).map_err(out_of_memory)?;
        }
        {
            let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
            // Those retired while idle are there already; every other
            // activation (the new one too) may join them at the end.
            retired.try_reserve(all.len() + 1).map_err(out_of_memory)?;
        }
        let a = Arc::new(Activation::new());
        if let Some(Assignment::Take(p, _) | Assignment::StandIn(p, _)) = first {
            a.put_on_standby(p);
        }
        let (mine, for_thread) = (Arc::clone(&a), Arc::clone(shared));
        let k = std::thread::Builder::new()
            .name(format!("ferry-activation-{}", all.len()))
            .spawn(move || mine.main(&for_thread, first))?;
        if first.is_none() {
            // A spare from birth: it waits in the pool.
            let _ = self.to_pool(shared, Arc::clone(&a));
        }
        all.push((a, Some(k)));
        self.count.store(all.len(), Relaxed);
        Ok(())
    }

    /// Puts an activation whose work ended into the pool, unless the watch
    /// is vacant: then it is `false` and the activation keeps the watch.
    /// Both under the pool's lock, which `hand_watch` holds to leave the
    /// watch vacant: either it finds this activation in the pool, or this
    /// finds the watch vacant.
    ///
    /// Never allocates: `spawn` and `register_caller` keep room in the pool
    /// for every activation there is.
    pub(super) fn to_pool(&self, shared: &Shared, a: Arc<Activation>) -> bool {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.monitor.claim_vacancy() {
            return false;
        }
        debug_assert!(pool.len() < pool.capacity(), "the pool's room was kept");
        pool.push(a);
        true
    }

    /// Hands `assignment` to a spare, making one if the pool is empty and
    /// the bound allows. Returns whether anyone got it.
    pub(crate) fn hand(&self, shared: &Arc<Shared>, assignment: Assignment) -> bool {
        let spare = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match spare {
            Some(a) => {
                crate::probe_mark!(crate::probe::SPARE_POPPED);
                match assignment {
                    Assignment::Take(p, Takeover::WhenIdle) => {
                        a.set_class_remotely(SchedClass::Batch);
                        crate::probe_mark!(crate::probe::SPARE_TO_WAIT_CLASS);
                        a.put_on_standby(p);
                        let lent_cpu = p.upcall().lent_cpu.load(Relaxed);
                        match p.core(shared) {
                            Some(core) => a.pin_remotely(core),
                            None if lent_cpu != NO_CORE => a.pin_remotely(lent_cpu),
                            None => {}
                        }
                    }
                    Assignment::Take(p, Takeover::AtOnce) => {
                        a.set_class_remotely(SchedClass::Normal);
                        a.put_on_standby(p);
                    }
                    Assignment::Start(_) => a.set_class_remotely(SchedClass::Normal),
                    // It must not preempt the driver of its core.
                    Assignment::StandIn(p, _) => {
                        a.set_class_remotely(super::stand_in::CLASS);
                        a.put_on_standby(p);
                        if let Some(core) = p.core(shared) {
                            a.pin_remotely(core);
                        }
                    }
                    // It must run soon: out of the wait class (a batch
                    // thread woken on a busy core waits for a scheduler
                    // tick; in the normal class it preempts), it then
                    // unpins itself.
                    Assignment::Watch => a.set_class_remotely(SchedClass::Normal),
                }
                crate::probe_mark!(crate::probe::SPARE_PINNED);
                a.assign(assignment);
                crate::probe_mark!(crate::probe::SPARE_WOKEN);
                true
            }
            None => self.spawn(shared, Some(assignment)).is_ok(),
        }
    }

    /// Whether a watcher that takes a processor could hand the watch on: a
    /// spare waits in the pool, or the bound leaves room for a new one.
    pub(crate) fn has_successor(&self) -> bool {
        self.count() < self.max
            || !self
                .pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Hands the watch to a spare (a new one if the pool is empty); leaves
    /// it vacant if there is none (see `monitor`): under the pool's lock,
    /// so that an activation on its way into the pool either is found
    /// there or finds the watch vacant (`to_pool`).
    pub(crate) fn hand_watch(&self, shared: &Arc<Shared>) {
        if self.hand(shared, Assignment::Watch) {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        match pool.pop() {
            Some(a) => {
                drop(pool);
                a.set_class_remotely(SchedClass::Normal);
                a.assign(Assignment::Watch);
            }
            None => shared.monitor.leave_vacant(),
        }
    }

    /// Whether more spares wait in the pool than the reserve kept however
    /// long they idle ([`reserve`]); those beyond it retire after
    /// [`RETIRE_AFTER`] in the pool.
    pub(super) fn beyond_reserve(&self, shared: &Shared) -> bool {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
            > reserve(shared)
    }

    /// Retires pooled spare `a`, idle for [`RETIRE_AFTER`]: out of the pool
    /// and the list of activations, its kernel thread detached (it ends
    /// when this returns `true` to it), the `Activation` kept among the
    /// retired until the runtime goes. `false` if it must stay: the pool
    /// is within its reserve now, a waker took `a` out of the pool to
    /// give it an assignment (which `hand` does under the pool's lock, held
    /// here), or `a` is the runtime's caller.
    pub(super) fn retire(&self, shared: &Shared, a: &Activation) -> bool {
        // The order `spawn` takes them in: the list, then the pool.
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.len() <= reserve(shared) || a.has_assignment() {
            return false;
        }
        // The runtime's caller (registered with no kernel thread of ours)
        // never retires: `run` is waiting on its kernel thread.
        let Some(j) = all
            .iter()
            .position(|(p, k)| ptr::eq(&**p, a) && k.is_some())
        else {
            return false;
        };
        let Some(i) = pool.iter().position(|p| ptr::eq(&**p, a)) else {
            return false;
        };
        pool.swap_remove(i);
        drop(pool);
        // Dropping the handle detaches the kernel thread.
        let (me, _detached) = all.swap_remove(j);
        self.count.store(all.len(), Relaxed);
        // `spawn` made room for every activation among the retired.
        self.retired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(me);
        true
    }

    /// Starts one spare, so that the first handoff need not make a kernel
    /// thread.
    pub(crate) fn add_spare(&self, shared: &Arc<Shared>) -> std::io::Result<()> {
        self.spawn(shared, None)
    }

    /// Calls `f` on every activation (the monitor's scan).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<Activation>)) {
        for (a, _) in self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            f(a);
        }
    }

    /// Wakes every pooled activation (at shutdown).
    pub(crate) fn wake_pool(&self) {
        for a in self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            a.wake_up();
        }
    }

    /// How many activations are away in a ferry thread's kernel call whose
    /// processor was taken over (a snapshot, for the stats page); `None`
    /// if the list is busy (the monitor asks, and must not make a driver
    /// wait for the list's lock while it counts).
    pub(crate) fn away(&self) -> Option<usize> {
        let all = crate::lock::try_lock(&self.all)?;
        Some(all.iter().filter(|(a, _)| a.away.load(Relaxed)).count())
    }

    /// Joins every activation's kernel thread that is not away in a
    /// ferry thread's kernel call (those end when their call returns).
    /// Allocates nothing: `spawn` made room among the retired for each.
    ///
    /// Called once the runtime is shut down, every activation woken. One
    /// that has not ended yet is woken again, at growing intervals, until
    /// it has: no sleep of an activation has a timeout, and a run's end
    /// under a short time slice was once seen to leave a spare asleep
    /// whose wake had not been found.
    pub(crate) fn join_all(&self) {
        let all = std::mem::take(&mut *self.all.lock().unwrap_or_else(PoisonError::into_inner));
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        for (a, k) in all {
            if let Some(k) = k
                && !a.away.load(Acquire)
            {
                let mut pause = Duration::from_micros(50);
                while !k.is_finished() {
                    a.wake_up();
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(10));
                }
                let _ = k.join();
            }
            retired.push(a);
        }
    }
}
