//! What the kernel's `/proc` says of this process and its threads: a
//! kernel thread's scheduling state (through a stat file the thread opens
//! for itself), the number of kernel threads, the process's start time,
//! the machine's memory.
//!
//! Every file is read through a path outside the process's
//! `/proc/<pid>/task/` tree, and nothing lists that tree: see
//! [`open_own_stat`] for what entries there cost the process's parent.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::gettid;

/// What the kernel says a thread is doing, from its `/proc` stat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskState {
    /// `R`: running or runnable.
    Running,
    /// `S` or `D`: asleep in the kernel (a blocking call, a page fault).
    Blocked,
    /// Anything else (stopped, traced, exiting) or unreadable.
    Other,
}

/// The calling kernel thread's stat file, `/proc/<tid>/stat`, kept open so
/// that another thread can read its state with one `pread`.
///
/// Opened through the thread's own top-level directory, `/proc/<tid>`, not
/// through the process's `/proc/<pid>/task/<tid>` (where
/// `/proc/thread-self` leads). The parent that reaps a dead process drops
/// the `/proc` entries of its whole `/proc/<pid>` tree (`release_task` ->
/// `proc_invalidate_siblings_dcache` -> `shrink_dcache_parent`), and each
/// exiting thread drops its own in its exit, the last one possibly after
/// the parent has been told the process is gone. With the files under
/// `/proc/<pid>/task/`, `ferry-capi`'s `fork_child` test (a parent that
/// computes on both cores and reaps ten forked ferry children) took
/// 1.5-19 s in 17 runs of 60, each time with the parent's `wait` in that
/// kernel walk, where the rest take 0.1 s; with the files opened here, no
/// run of 120 took over a second. Entries under `/proc/<tid>` are outside
/// the tree the parent walks.
pub(crate) fn open_own_stat() -> Option<File> {
    File::open(format!("/proc/{}/stat", gettid())).ok()
}

/// The state in a `/proc/<tid>/stat` file opened by
/// [`open_own_stat`].
pub(crate) fn task_state(stat: &File) -> TaskState {
    let mut buf = [0u8; 512];
    let Ok(n) = stat.read_at(&mut buf, 0) else {
        return TaskState::Other;
    };
    match after_comm(&buf[..n]).first() {
        Some(b'R') => TaskState::Running,
        Some(b'S' | b'D') => TaskState::Blocked,
        _ => TaskState::Other,
    }
}

/// How many kernel threads the process has (`num_threads` of
/// `/proc/self/stat`); `None` if it cannot be read.
///
/// Read from the process's own stat file rather than by listing
/// `/proc/self/task`: a listing makes an entry for each thread inside the
/// `/proc/<pid>/task` tree, which a parent reaping the process walks (see
/// [`open_own_stat`]).
pub(crate) fn thread_count() -> Option<usize> {
    usize::try_from(own_stat_field(20)?).ok()
}

/// Field `n` (numbered from 1, as in `proc(5)`; 3 or more) of
/// `/proc/self/stat`, as a number.
fn own_stat_field(n: usize) -> Option<u64> {
    let line = std::fs::read("/proc/self/stat").ok()?;
    let field = after_comm(&line)
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty())
        .nth(n.checked_sub(3)?)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// What follows the command name of a stat line ("pid (comm) S ..."),
/// from field 3 on; empty if there is no command name. The name may hold
/// spaces and parentheses, so it ends at the last `)`.
fn after_comm(line: &[u8]) -> &[u8] {
    match line.iter().rposition(|&b| b == b')') {
        Some(close) => line.get(close + 2..).unwrap_or(&[]),
        None => &[],
    }
}

/// `MemTotal` of `/proc/meminfo` in bytes, if readable.
pub(crate) fn mem_total() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// This process's pid and start time in clock ticks since boot
/// (`/proc/self/stat` field 22): the pair names the process uniquely while
/// the machine runs (a pid is reused, the pair is not). Read once; a forked
/// child reads its own (a `pthread_atfork` handler forgets the parent's).
/// The start time is 0 if unreadable.
pub(crate) fn process_identity() -> (u32, u64) {
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    use std::sync::atomic::{AtomicU32, AtomicU64};
    static PID: AtomicU32 = AtomicU32::new(0);
    static START: AtomicU64 = AtomicU64::new(0);
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Relaxed);
    }
    let pid = PID.load(Acquire);
    if pid != 0 {
        return (pid, START.load(Relaxed));
    }
    AT_FORK.call_once(|| {
        // SAFETY: `forget` is a plain function touching one atomic, safe
        // to run in a forked child.
        unsafe { libc::pthread_atfork(None, None, Some(forget)) };
    });
    let pid = std::process::id();
    let start = own_stat_field(22).unwrap_or(0);
    START.store(start, Relaxed);
    PID.store(pid, Release);
    (pid, start)
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_is_read_and_a_stat_file_reads_its_threads_state() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, stop) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(open_own_stat()).unwrap();
            let _ = stop.recv();
        });
        let stat = rx.recv().unwrap().expect("/proc/<tid>/stat");
        // Other tests' threads come and go: the count is at least ours.
        assert!(thread_count().expect("num_threads") >= 2);
        // The start time (field 22) is read past the command name too.
        assert_ne!(process_identity().1, 0);
        let mut state = task_state(&stat);
        for _ in 0..1000 {
            if state == TaskState::Blocked {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            state = task_state(&stat);
        }
        assert_eq!(state, TaskState::Blocked, "a thread asleep in recv");
        drop(go);
        t.join().unwrap();
    }
}
