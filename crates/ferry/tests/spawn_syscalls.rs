//! Spawning and joining ferry threads in steady state makes no system call
//! for their stacks, and a blocked thread keeps few stack pages resident.
//!
//! The system-call test re-runs this binary as a child (selected by
//! `FERRY_SPAWN_CHILD`) under `strace -f`, and counts the calls made
//! between two `getppid` markers around 100,000 spawns and joins; it is
//! skipped, saying so, where `strace` is missing or cannot trace.

use std::env;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use ferry::Runtime;
use ferry::sync::{Condvar, Mutex};

mod common;

const CHILD: &str = "FERRY_SPAWN_CHILD";
const LOOP: u64 = 100_000;
const WARM_UP: u64 = 10_000;

/// Child: warm up, then spawn and join `LOOP` threads between two
/// `getppid` markers, on one processor.
fn child_spawn_loop() -> ! {
    let sum = Runtime::builder()
        .processors(1)
        .run(|| {
            let mut sum = 0u64;
            for i in 0..WARM_UP {
                sum += ferry::spawn(move || i).join().unwrap();
            }
            // SAFETY: getppid has no preconditions; it is the marker.
            unsafe { libc::getppid() };
            for i in 0..LOOP {
                sum += ferry::spawn(move || i).join().unwrap();
            }
            // SAFETY: as above.
            unsafe { libc::getppid() };
            sum
        })
        .unwrap();
    let expect = (0..WARM_UP).sum::<u64>() + (0..LOOP).sum::<u64>();
    std::process::exit(if sum == expect { 0 } else { 5 });
}

/// The system calls in an `strace -f` log between the first two `getppid`
/// lines, by name: those of the kernel thread that made the markers, and
/// those of every thread.
fn calls_between_markers(log: &str) -> Option<(Vec<String>, Vec<String>)> {
    let mut marker_pid: Option<&str> = None;
    let (mut own, mut all) = (Vec::new(), Vec::new());
    for line in log.lines() {
        // "pid  name(args...) = r" or "pid  <... name resumed> ..."
        let (pid, rest) = line.split_once(' ').unwrap_or(("", line));
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") || rest.starts_with("<... ") {
            continue; // exits, signals, second halves of calls counted
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        match marker_pid {
            None if name == "getppid" => marker_pid = Some(pid),
            None => {}
            Some(m) if name == "getppid" && m == pid => return Some((own, all)),
            Some(m) => {
                if m == pid {
                    own.push(name.clone());
                }
                all.push(name);
            }
        }
    }
    None
}

fn by_name(calls: &[String]) -> std::collections::BTreeMap<&str, usize> {
    let mut by_name = std::collections::BTreeMap::new();
    for c in calls {
        *by_name.entry(c.as_str()).or_default() += 1;
    }
    by_name
}

#[test]
fn spawn_and_join_in_steady_state_make_no_system_calls() {
    if env::var(CHILD).as_deref() == Ok("loop") {
        child_spawn_loop();
    }
    let log = env::temp_dir().join(format!("ferry-spawn-strace-{}.log", std::process::id()));
    let exe = env::current_exe().unwrap();
    let status = Command::new("strace")
        .arg("-f")
        .arg("-o")
        .arg(&log)
        .arg(&exe)
        .args([
            "spawn_and_join_in_steady_state_make_no_system_calls",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, "loop")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let out = match status {
        Err(e) => {
            eprintln!("skipped: strace is not available ({e})");
            return;
        }
        Ok(out) => out,
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    if !out.status.success() && text.is_empty() {
        eprintln!(
            "skipped: strace cannot trace here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(
        out.status.success(),
        "child failed: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (own, all) = calls_between_markers(&text).expect("both markers in the trace");
    let (own_names, all_names) = (by_name(&own), by_name(&all));
    eprintln!(
        "{LOOP} spawns and joins: {} system calls by the looping kernel thread {own_names:?}; \
         {} by all (the monitor's and the preemption timer's, which run by the clock) {all_names:?}",
        own.len(),
        all.len()
    );
    for stack_call in ["mmap", "munmap", "madvise", "mprotect", "mincore"] {
        assert!(
            !all_names.contains_key(stack_call),
            "{stack_call} during the steady-state loop: {all_names:?}"
        );
    }
    assert!(own.len() < 100, "{} calls: {own_names:?}", own.len());
}

#[test]
fn the_marker_parser_counts_only_between_markers() {
    let log = "1 mmap(NULL) = 0x1\n1 getppid() = 7\n2 futex(0x1, FUTEX_WAIT <unfinished ...>\n\
               2 getppid() = 7\n1 write(2, \"x\", 1) = 1\n2 <... futex resumed>) = 0\n\
               1 getppid() = 7\n1 munmap(0x1) = 0\n";
    let (own, all) = calls_between_markers(log).unwrap();
    assert_eq!(own, vec!["write".to_owned()]);
    assert_eq!(all, ["futex", "getppid", "write"].map(String::from));
    assert_eq!(
        calls_between_markers("1 getppid() = 7\n1 read() = 0\n"),
        None
    );
}

/// Resident pages of `[lo, hi)` by `mincore`.
fn resident_pages(lo: usize, hi: usize) -> usize {
    let page = ferry::stack::page_size();
    let mut vec = vec![0u8; (hi - lo).div_ceil(page)];
    // SAFETY: one byte per page of the range; mincore only reads page tables.
    let r = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

/// The address ranges of `/proc/self/maps`.
fn mappings() -> Vec<(usize, usize)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|line| {
            let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
            Some((
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
            ))
        })
        .collect()
}

/// (VmRSS, VmPTE) of this process in bytes.
fn rss_and_pte() -> (usize, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> usize {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<usize>()
            .unwrap()
            * 1024
    };
    (field("VmRSS:"), field("VmPTE:"))
}

/// Pages a thread blocked on a ferry condvar keeps resident on its stack
/// (default size): the window `[sp - size, sp + size)` around its stack
/// pointer, cut to the mapping (the region) that holds it, covers its own
/// usable part and guard, and only the never-touched guard of the stack
/// above, so `mincore` of it counts its own pages.
#[test]
fn a_blocked_thread_keeps_few_stack_pages_resident() {
    const N: usize = 10_000;
    const MOST_PAGES: usize = 2;
    let size = ferry::stack::DEFAULT_STACK_SIZE;
    let outcome = common::within(common::WATCHDOG, "blocked threads", move || {
        Runtime::builder()
            .processors(2)
            .run(move || {
                let gate = Arc::new((Mutex::new(false), Condvar::new()));
                let blocked = Arc::new(AtomicUsize::new(0));
                let sps = Arc::new(StdMutex::new(Vec::with_capacity(N)));
                let before = rss_and_pte();
                let handles: Vec<_> = (0..N)
                    .map(|_| {
                        let (gate, blocked, sps) = (gate.clone(), blocked.clone(), sps.clone());
                        ferry::spawn(move || {
                            let here = 0u8;
                            sps.lock().unwrap().push(std::ptr::addr_of!(here) as usize);
                            let (lock, cv) = &*gate;
                            let mut open = lock.lock();
                            blocked.fetch_add(1, Ordering::SeqCst);
                            while !*open {
                                open = cv.wait(open);
                            }
                        })
                    })
                    .collect();
                while blocked.load(Ordering::SeqCst) < N {
                    ferry::yield_now();
                }
                // Every thread holds the gate's lock last when it parks; take it
                // once so the last one is surely asleep.
                drop(gate.0.lock());
                let after = rss_and_pte();
                let page = ferry::stack::page_size();
                let maps = mappings();
                let pages: Vec<usize> = sps
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|&sp| {
                        let sp = sp & !(page - 1);
                        let &(start, end) = maps
                            .iter()
                            .find(|&&(lo, hi)| (lo..hi).contains(&sp))
                            .expect("a stack is mapped");
                        resident_pages((sp - size).max(start), (sp + size).min(end))
                    })
                    .collect();
                *gate.0.lock() = true;
                gate.1.notify_all();
                for h in handles {
                    h.join().unwrap();
                }
                (pages, before, after)
            })
            .unwrap()
    });
    let (pages, before, after) = outcome;
    let most = *pages.iter().max().unwrap();
    let total: usize = pages.iter().sum();
    eprintln!(
        "{N} blocked threads: stack pages resident: most {most}, mean {:.2}; \
         VmRSS +{} B and VmPTE +{} B per thread",
        total as f64 / N as f64,
        after.0.saturating_sub(before.0) / N,
        after.1.saturating_sub(before.1) / N,
    );
    assert!(
        pages.iter().all(|&p| p >= 1),
        "a parked stack has its top page"
    );
    assert!(
        most <= MOST_PAGES,
        "{most} pages on a parked thread's stack"
    );
    assert!(
        total <= 2 * N,
        "{total} pages on {N} parked threads' stacks"
    );
}
