//! CPU pinning for benchmark threads, via `sched_getaffinity` /
//! `sched_setaffinity` on the calling thread.
//!
//! This module owns which CPUs the benchmark threads run on: the first
//! allowed ones, picked in one place.
//! Failures are returned, never fatal: a benchmark on a machine where pinning is
//! not allowed still runs and says so on stderr.

use std::io;
use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a pinning failure has been reported, so the warning is printed
/// once per process rather than once per run.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is a plain bit array, for which all-zero is a valid
    // (empty) value.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: pid 0 means the calling thread; `set` is a valid, writable
    // `cpu_set_t` and we pass its exact size.
    let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * mem::size_of::<libc::cpu_set_t>();
    Ok((0..max)
        // SAFETY: `cpu < max`, the number of bits in `set`, so the macro's
        // index is in bounds.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to the single CPU `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let max = 8 * mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is beyond the cpu_set_t size ({max})"),
        ));
    }
    // SAFETY: all-zero is a valid, empty `cpu_set_t`.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `cpu < max` was checked above, so the bit index is in bounds.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 means the calling thread; `set` is a valid `cpu_set_t` and
    // we pass its exact size.
    let rc = unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to `cpu` if it is `Some`; on failure, warns once
/// per process on stderr (naming `role`) and carries on unpinned.
pub fn pin_or_warn(cpu: Option<usize>, role: &str) {
    let Some(cpu) = cpu else { return };
    if let Err(e) = pin_current_thread(cpu)
        && !WARNED.swap(true, Ordering::Relaxed)
    {
        eprintln!(
            "ferry-bench: warning: could not pin the {role} thread to cpu {cpu} ({e}); \
             running unpinned (further pinning failures not reported)"
        );
    }
}

/// The first CPU this process may use, if the mask can be read.
pub fn first_allowed() -> Option<usize> {
    allowed_cpus().ok().and_then(|c| c.first().copied())
}

/// The first two CPUs this process may use; the same CPU twice on a
/// one-CPU machine, `None` if the mask cannot be read.
pub fn two_cores() -> (Option<usize>, Option<usize>) {
    match allowed_cpus() {
        Ok(cpus) if !cpus.is_empty() => (Some(cpus[0]), Some(*cpus.get(1).unwrap_or(&cpus[0]))),
        _ => (None, None),
    }
}

/// A CPU for a progress line: its number, or `any` if not pinned.
pub fn name(cpu: Option<usize>) -> String {
    cpu.map_or_else(|| "any".to_owned(), |c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_cpus_is_nonempty_and_sorted() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn pinning_to_an_allowed_cpu_sticks() {
        let cpu = allowed_cpus().unwrap()[0];
        // In a fresh thread, so the test runner's thread keeps its mask.
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_beyond_the_set_is_an_error() {
        assert!(pin_current_thread(1 << 20).is_err());
    }
}
