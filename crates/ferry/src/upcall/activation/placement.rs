//! Where an activation's kernel thread runs: the CPUs it is pinned to and
//! the kernel's scheduling class it waits in, set by the activation itself
//! or, for one asleep in the pool, by the kernel thread that hands it work.
//!
//! This file owns the system calls that place a kernel thread, made only
//! when the placement changes; it must not decide which core a processor
//! runs on (`processor::Set` does) nor wake anyone.

use std::sync::atomic::Ordering::Relaxed;

use super::{Activation, PIN_UNKNOWN};
use crate::processor::{NO_CORE, Processor};
use crate::sys::{self, SchedClass};
use crate::upcall::Shared;

impl Activation {
    /// Pins this kernel thread to the core `p` runs on, if it changed.
    pub(crate) fn pin_for(&self, shared: &Shared, p: &Processor) {
        self.pin_to(p.core(shared));
    }

    /// Puts this kernel thread in `class` (own thread only; a system call
    /// only when it changes): `Batch` is the class spares and stand-ins
    /// wait in.
    pub(in crate::upcall) fn set_class(&self, class: SchedClass) {
        if self.class.load(Relaxed) != class as u8 && sys::set_class(0, class) {
            self.class.store(class as u8, Relaxed);
        }
    }

    /// [`set_class`](Self::set_class) from a handoff's kernel thread, while
    /// this activation sleeps in the pool: its wakeup must already be in
    /// the right class (a when-idle spare must not preempt the lender; an
    /// urgent one must; a stand-in must run only on an idle core).
    ///
    /// Also used by the monitor on a spare that is awake ([`take_at_once`](Self::take_at_once)):
    /// the only race is with that spare setting a class itself.
    pub(in crate::upcall) fn set_class_remotely(&self, class: SchedClass) {
        let tid = self.tid.load(Relaxed);
        if tid != 0 && self.class.load(Relaxed) != class as u8 && sys::set_class(tid as i32, class)
        {
            self.class.store(class as u8, Relaxed);
        }
    }

    /// Pins this kernel thread to `want` (`None`: every allowed CPU), if it
    /// changed.
    pub(in crate::upcall) fn pin_to(&self, want: Option<usize>) {
        let want = want.unwrap_or(NO_CORE);
        if self.pinned.load(Relaxed) != want {
            crate::processor::pin(None, want);
            self.pinned.store(want, Relaxed);
        }
    }

    /// Pins this kernel thread to `cpus` (every allowed CPU if empty; own
    /// thread only): the watcher, keeping off the processors' cores.
    pub(in crate::upcall) fn pin_to_cpus(&self, cpus: &[usize]) {
        crate::processor::pin_to_cpus(cpus);
        self.pinned.store(PIN_UNKNOWN, Relaxed);
    }

    /// Makes a when-idle spare that waits for its lender's core take over
    /// at once: back in the normal class, it competes for the core like any
    /// thread (the monitor's call, when a lend outlasts a tick).
    pub(crate) fn take_at_once(&self) {
        self.set_class_remotely(SchedClass::Normal);
    }

    /// Pins this pooled (sleeping) activation to `cpu` from the handing
    /// kernel thread, before `assign` wakes it: in the wait class it might
    /// not get to run where it is pinned now to move itself.
    pub(in crate::upcall) fn pin_remotely(&self, cpu: usize) {
        if self.pinned.load(Relaxed) != cpu {
            let tid = self.tid.load(Relaxed);
            if tid != 0 {
                crate::processor::pin(Some(tid as i32), cpu);
                self.pinned.store(cpu, Relaxed);
            }
        }
    }
}
