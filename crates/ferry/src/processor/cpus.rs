//! Which CPUs a processor's kernel thread may run on: the process's
//! affinity mask as the runtime first saw it, each processor's default
//! core, and pinning (best effort: a refused `sched_setaffinity` leaves the
//! thread where it was).
//!
//! This file only reads the mask and pins; it must not decide where a
//! processor lives (its `core` and `home` words do).

use std::sync::atomic::Ordering::Relaxed;

use super::{NO_CORE, STOPPED, Set};

/// The number of CPUs this process may run on.
pub(crate) fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The `index`-th CPU of the process's affinity mask (wrapping), counted
/// from the CPU the runtime first ran on, if the mask has more than one.
/// (Counted from there, not from the mask's first CPU: every process's
/// first processor would then share that CPU, and one-processor processes
/// calling each other would take turns on it while the others idled. The
/// kernel starts a new process on an idle CPU when there is one.)
pub(crate) fn default_core(index: usize) -> Option<usize> {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        return None;
    }
    Some(cpus[(first_index() + index) % cpus.len()])
}

/// Notes the CPU the calling kernel thread runs on as the one the runtime
/// first ran on, unless one was noted already: called by the kernel thread
/// that starts a runtime, before any helper it starts (which the kernel
/// may put on another, idle CPU) asks for a processor's core.
pub(crate) fn note_first_cpu() {
    first_index();
}

/// Where in [`allowed_cpus`] the CPU was that the process ran on when it
/// first asked (0 if it cannot tell): the CPU of the kernel thread that
/// started its first runtime ([`note_first_cpu`]).
fn first_index() -> usize {
    static FIRST: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FIRST.get_or_init(|| {
        crate::sys::current_cpu()
            .and_then(|c| allowed_cpus().iter().position(|&a| a == c))
            .unwrap_or(0)
    })
}

/// The one CPU the process may run on, if its affinity mask has exactly
/// one (as under `taskset -c N` or a one-CPU cpuset): every processor
/// lives there whether pinned or not.
pub(crate) fn only_cpu() -> Option<usize> {
    match allowed_cpus() {
        [cpu] => Some(*cpu),
        _ => None,
    }
}

/// The CPUs the process may run on, as the runtime first saw them (before
/// any processor was pinned: the calling kernel thread's mask may be
/// narrower by now).
pub(crate) fn allowed_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| match rustix::thread::sched_getaffinity(None) {
        Ok(allowed) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| allowed.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    })
}

/// Pins kernel thread `tid` (`None`: the caller) to `cpu`, or lets it run
/// on every CPU the process may use for [`NO_CORE`];
/// best effort.
pub(crate) fn pin(tid: Option<i32>, cpu: usize) {
    let one = [cpu];
    let cpus: &[usize] = if cpu == NO_CORE { &[] } else { &one };
    pin_to_set(tid, cpus);
}

/// Pins the calling kernel thread to `cpus` (all the process may use if
/// empty); best effort.
pub(crate) fn pin_to_cpus(cpus: &[usize]) {
    pin_to_set(None, cpus);
}

/// Pins kernel thread `tid` (`None`: the caller) to `cpus`, or to every
/// CPU the process may use if empty; best effort.
fn pin_to_set(tid: Option<i32>, cpus: &[usize]) {
    let cpus = if cpus.is_empty() {
        allowed_cpus()
    } else {
        cpus
    };
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    let tid = tid.and_then(rustix::process::Pid::from_raw);
    let _ = rustix::thread::sched_setaffinity(tid, &set);
}

/// The CPUs the process may use on which no processor of the set lives
/// (pinned, or at home), into `out` (cleared first).
pub(crate) fn cpus_without_processors(set: &Set, out: &mut Vec<usize>) {
    out.clear();
    out.extend(allowed_cpus().iter().copied().filter(|&c| {
        !set.processors
            .iter()
            .any(|p| p.membership.load(Relaxed) != STOPPED && p.core(set) == Some(c))
    }));
}
