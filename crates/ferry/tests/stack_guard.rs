//! The process's choice of stack guard size (`ferry::stack::set_guard_size`
//! and `FERRY_STACK_GUARD`): decided once, before the first stack, and
//! then every stack (made alone, carved for threads, cached) has that
//! guard. The choice is per process, so this file holds one test that
//! sets it, and one that runs this binary again as a child with the
//! variable set.

use std::process::Command;

use ferry::stack::{
    DEFAULT_STACK_SIZE, GuardSizeError, MAX_GUARD_SIZE, Stack, StackCache, default_guard_size,
    page_size, set_guard_size,
};

/// The child's test: runs only with `FERRY_STACK_GUARD` set (by
/// `the_environment_chooses_the_guard_for_a_process`).
#[test]
fn child_reads_the_environment() {
    let Ok(v) = std::env::var("FERRY_STACK_GUARD") else {
        return;
    };
    let want: usize = v.parse().unwrap();
    assert_eq!(default_guard_size(DEFAULT_STACK_SIZE), want);
    assert_eq!(
        set_guard_size(want + page_size()),
        Err(GuardSizeError::AlreadyDecided {
            current: Some(want)
        })
    );
    let s = StackCache::global().get(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(s.guard_size(), want);
    if std::env::var_os("STACK_GUARD_CHILD_OVERFLOWS").is_some() {
        // SAFETY: setrlimit with a valid struct: no core file for the
        // crash under test.
        unsafe {
            libc::setrlimit(
                libc::RLIMIT_CORE,
                &libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                },
            )
        };
        let _ = ferry::run(|| {
            ferry::thread::Builder::new()
                .name("deep")
                .spawn(|| deeper(0))
                .unwrap()
                .join()
        });
        unreachable!("the overflow kills the process");
    }
}

/// Recurses until the stack runs out, a kilobyte of stack per call.
fn deeper(n: usize) -> usize {
    let buf = std::hint::black_box([n as u8; 1024]);
    if std::hint::black_box(n) == usize::MAX {
        return 0;
    }
    deeper(n + 1) + buf[n % 1024] as usize
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process")]
fn the_environment_chooses_the_guard_for_a_process() {
    let guard = 2 * page_size();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_reads_the_environment", "--nocapture"])
        .env("FERRY_STACK_GUARD", guard.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");

    // A thread that overflows its stack hits the small guard and is named.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_reads_the_environment", "--nocapture"])
        .env("FERRY_STACK_GUARD", guard.to_string())
        .env("STACK_GUARD_CHILD_OVERFLOWS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{stderr}");
    assert!(
        stderr.contains(r#""deep" overflowed its 256 KiB stack"#),
        "{stderr}"
    );
}

#[test]
#[cfg_attr(miri, ignore = "maps stacks")]
fn a_guard_size_is_chosen_once_and_every_stack_gets_it() {
    if std::env::var_os("FERRY_STACK_GUARD").is_some() {
        return;
    }
    assert_eq!(
        set_guard_size(0),
        Err(GuardSizeError::OutOfRange { bytes: 0 })
    );
    assert_eq!(
        set_guard_size(MAX_GUARD_SIZE + 1),
        Err(GuardSizeError::OutOfRange {
            bytes: MAX_GUARD_SIZE + 1
        })
    );
    // Rounded up to whole pages.
    let page = page_size();
    assert_eq!(set_guard_size(page + 1), Ok(()));
    let guard = 2 * page;
    assert_eq!(set_guard_size(guard), Ok(()), "the size chosen, again");
    let refused = set_guard_size(page).unwrap_err();
    assert_eq!(
        refused,
        GuardSizeError::AlreadyDecided {
            current: Some(guard)
        }
    );
    assert!(refused.to_string().contains("already"), "{refused}");
    assert_eq!(default_guard_size(DEFAULT_STACK_SIZE), guard);
    assert_eq!(default_guard_size(8 * 1024 * 1024), guard);

    // A stack of its own, a carved one, and a thread's.
    assert_eq!(Stack::new(DEFAULT_STACK_SIZE).unwrap().guard_size(), guard);
    let carved = StackCache::global().get(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(carved.guard_size(), guard);
    assert!(carved.has_default_guard());
    StackCache::global().put(carved);
    let depth = ferry::run(|| {
        ferry::spawn(|| {
            // Deeper than the guard: a probed frame of two guards' size.
            let buf = std::hint::black_box([7u8; 16 * 1024]);
            buf.iter().map(|&b| b as usize).sum::<usize>()
        })
        .join()
        .unwrap()
    })
    .unwrap();
    assert_eq!(depth, 7 * 16 * 1024);
}
