//! Tests of `ferry::stack`: the mappings and their guard pages, the cache, and
//! the overflow report. The overflow tests re-run this test binary as a
//! child process (selected by the `FERRY_STACK_TEST_CHILD` variable) that
//! really overflows a ferry stack, and check how the child died.

use std::env;
use std::ffi::{c_int, c_void};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ferry::stack::{
    CacheLimits, DEFAULT_STACK_SIZE, GuardMethod, MAX_GUARD_SIZE, MIN_GUARD_SIZE, OWNER_NAME_MAX,
    Stack, StackCache, default_guard_size, guard_method, page_size, set_tag_namer,
};

const CHILD_ROLE: &str = "FERRY_STACK_TEST_CHILD";

/// Held by the tests that count /proc/self/maps lines or map very many
/// stacks, so they do not disturb each other's counts.
static MAPS_LOCK: Mutex<()> = Mutex::new(());

fn maps_lock() -> MutexGuard<'static, ()> {
    MAPS_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn method() -> GuardMethod {
    guard_method().expect("guard method")
}

/// One line of /proc/self/maps: start, end, permissions.
fn maps() -> Vec<(usize, usize, String)> {
    let text = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?.to_owned();
            let (lo, hi) = range.split_once('-')?;
            Some((
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
                perms,
            ))
        })
        .collect()
}

/// The mapping containing `addr`, if any.
fn mapping_at(addr: usize) -> Option<(usize, usize, String)> {
    maps()
        .into_iter()
        .find(|(lo, hi, _)| (*lo..*hi).contains(&addr))
}

#[test]
fn stack_geometry_and_alignment() {
    let page = page_size();
    let s = Stack::new(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(s.size(), DEFAULT_STACK_SIZE);
    assert_eq!(s.top() as usize - s.bottom() as usize, s.size());
    assert_eq!(s.top() as usize % 16, 0, "top must be 16-byte aligned");
    assert_eq!(s.bottom() as usize % page, 0);
    assert_eq!(
        s.guard_size(),
        DEFAULT_STACK_SIZE,
        "the guard is as large as the stack"
    );
    assert_eq!(s.guard_size(), default_guard_size(DEFAULT_STACK_SIZE));
    assert!(s.has_default_guard());
    assert_eq!(s.guard_range().end, s.bottom() as usize);
    assert_eq!(s.guard_range().len(), s.guard_size());
    assert_eq!(s.reserved(), s.size() + s.guard_size());
    assert!(s.contains(s.bottom() as usize));
    assert!(s.contains(s.top() as usize - 1));
    assert!(!s.contains(s.top() as usize));
    assert!(!s.contains(s.bottom() as usize - 1));

    // Sizes round up to pages; the default guard is the stack's size
    // within 64 KiB..=1 MiB; an explicit guard rounds up to at least one
    // page.
    let small = Stack::new(1).unwrap();
    assert_eq!(small.size(), page);
    assert_eq!(small.guard_size(), MIN_GUARD_SIZE.max(page));
    assert_eq!(Stack::new(page + 1).unwrap().size(), 2 * page);
    let big = Stack::new(4 << 20).unwrap();
    assert_eq!(big.guard_size(), MAX_GUARD_SIZE.max(page));
    assert!(big.has_default_guard());
    let g = Stack::with_guard(3 * page, page + 1).unwrap();
    assert_eq!((g.size(), g.guard_size()), (3 * page, 2 * page));
    assert!(!g.has_default_guard());
    assert_eq!(Stack::with_guard(page, 0).unwrap().guard_size(), page);
}

#[test]
fn bad_sizes_are_errors_not_panics() {
    for size in [0, usize::MAX, usize::MAX - page_size() + 2] {
        let e = Stack::new(size).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "size {size}: {e}");
    }
    // Larger than the whole user address space: the kernel refuses, and the
    // error says what was asked and what may be exhausted.
    let e = Stack::new(1 << 60).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::OutOfMemory, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("cannot map") && msg.contains("vm.max_map_count"),
        "{msg}"
    );
}

/// The running kernel's (major, minor) version.
fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Whether /proc/self/pagemap flags the page at `addr` as a guard region
/// (bit 58, `PM_GUARD_REGION`); `None` on kernels before 6.15, which lack
/// the bit.
fn pagemap_guard(addr: usize) -> Option<bool> {
    if kernel_version() < (6, 15) {
        return None;
    }
    let file = std::fs::File::open("/proc/self/pagemap").expect("open pagemap");
    let mut entry = [0u8; 8];
    file.read_exact_at(&mut entry, (addr / page_size() * 8) as u64)
        .expect("read pagemap");
    Some(u64::from_ne_bytes(entry) >> 58 & 1 == 1)
}

/// Checks that the page at `addr` is a guard as the process's method makes
/// it: `PROT_NONE`, or a guard marker inside a read-write mapping.
fn assert_guard_page(addr: usize) {
    let (_, _, perms) = mapping_at(addr).expect("guard is mapped");
    match method() {
        GuardMethod::Mprotect => assert!(perms.starts_with("---"), "guard perms {perms}"),
        GuardMethod::Madvise => {
            assert!(
                perms.starts_with("rw-"),
                "a guard marker lies in the stack's read-write mapping: {perms}"
            );
            if let Some(guard) = pagemap_guard(addr) {
                assert!(guard, "pagemap flags {addr:#x} as a guard region");
            }
        }
    }
}

#[test]
fn guard_is_a_guard_and_usable_part_is_read_write() {
    let page = page_size();
    let s = Stack::new(16 * page).unwrap();
    let guard = s.guard_range();
    assert_guard_page(guard.start);
    let (lo, hi, perms) = mapping_at(s.bottom() as usize).expect("stack is mapped");
    assert!(lo <= s.bottom() as usize && s.top() as usize <= hi);
    assert!(perms.starts_with("rw-"), "stack perms {perms}");
    if method() == GuardMethod::Madvise {
        // Guard and usable part are one mapping.
        assert!(lo <= guard.start, "guard {guard:x?} in {lo:x}-{hi:x}");
    }
    // Every usable page, first and last byte included, takes a write, and
    // none of them is a guard.
    for addr in (s.bottom() as usize..s.top() as usize).step_by(page) {
        // SAFETY: `addr` is in the read-write part of `s`, which nobody runs
        // on.
        unsafe { (addr as *mut u8).write_volatile(0x5A) };
        assert!(
            !pagemap_guard(addr).unwrap_or(false),
            "{addr:#x} is no guard"
        );
    }
    // SAFETY: as above.
    unsafe { s.top().sub(1).write_volatile(0xA5) };
    // SAFETY: as above.
    assert_eq!(unsafe { s.bottom().read_volatile() }, 0x5A);
    // That touching the guard faults is checked in a child process:
    // `touching_the_guard_dies_with_the_overflow_report`.
}

#[test]
fn whole_usable_range_is_zeroed_and_writable() {
    let s = Stack::new(DEFAULT_STACK_SIZE).unwrap();
    // SAFETY: [bottom, top) is the stack's read-write part, owned by `s`,
    // and no thread runs on it.
    let mem = unsafe { std::slice::from_raw_parts_mut(s.bottom(), s.size()) };
    assert!(mem.iter().all(|&b| b == 0), "a fresh stack reads as zero");
    for (i, b) in mem.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    assert!(mem.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
}

#[test]
fn ten_thousand_default_stacks_map_and_unmap() {
    const N: usize = 10_000;
    let _maps = maps_lock();
    let before = maps().len();
    let mut stacks = Vec::with_capacity(N);
    for i in 0..N {
        let s = Stack::new(DEFAULT_STACK_SIZE).unwrap_or_else(|e| panic!("stack {i}: {e}"));
        // Touch the top word of each, as a thread's first call would.
        // SAFETY: top - 8 is inside the read-write part, owned by `s`.
        unsafe { s.top().cast::<u64>().sub(1).write(i as u64) };
        stacks.push(s);
    }
    for (i, s) in stacks.iter().enumerate() {
        // SAFETY: as above.
        assert_eq!(unsafe { s.top().cast::<u64>().sub(1).read() }, i as u64);
    }
    let mut bottoms: Vec<usize> = stacks.iter().map(|s| s.bottom() as usize).collect();
    bottoms.sort_unstable();
    bottoms.dedup();
    assert_eq!(bottoms.len(), N, "stacks are distinct");
    let during = maps().len();
    match method() {
        GuardMethod::Mprotect => assert!(
            during >= before + 2 * N - 200,
            "two mappings per stack: {before} -> {during}"
        ),
        GuardMethod::Madvise => assert!(
            during < before + N * 3 / 2,
            "at most one mapping per stack: {before} -> {during}"
        ),
    }
    drop(stacks);
    let after = maps().len();
    assert!(
        after < before + 200,
        "stacks unmapped on drop: {before} -> {during} -> {after}"
    );
}

#[test]
fn a_stack_with_guard_markers_is_one_mapping() {
    const N: usize = 1000;
    if method() == GuardMethod::Mprotect {
        println!(
            "note: MADV_GUARD_INSTALL is unavailable (Linux < 6.13?); guards are PROT_NONE \
             and each stack is two mappings, so the one-mapping check is skipped"
        );
        return;
    }
    let _maps = maps_lock();
    let before = maps().len();
    let stacks: Vec<Stack> = (0..N)
        .map(|i| {
            let s = Stack::new(DEFAULT_STACK_SIZE).unwrap_or_else(|e| panic!("stack {i}: {e}"));
            // SAFETY: top - 1 is in the read-write part of `s`.
            unsafe { s.top().sub(1).write_volatile(1) };
            s
        })
        .collect();
    let during = maps().len();
    drop(stacks);
    let added = during.saturating_sub(before);
    println!("{N} stacks with guard markers: /proc/self/maps {before} -> {during} lines");
    assert!(
        added * 2 < N * 3,
        "fewer than 1.5 mappings per stack: {before} -> {during} for {N} stacks"
    );
}

#[test]
fn a_hundred_thousand_default_stacks_are_alive_at_once() {
    const N: usize = 100_000;
    if method() == GuardMethod::Mprotect {
        println!(
            "note: MADV_GUARD_INSTALL is unavailable (Linux < 6.13?); with PROT_NONE guards \
             {N} stacks need vm.max_map_count > {}, so this test is skipped",
            2 * N
        );
        return;
    }
    let _maps = maps_lock();
    let start = Instant::now();
    let mut stacks = Vec::with_capacity(N);
    for i in 0..N {
        let s = Stack::new(DEFAULT_STACK_SIZE).unwrap_or_else(|e| panic!("stack {i}: {e}"));
        // One byte each, as a thread's first frame would: commits one page.
        // SAFETY: top - 1 is in the read-write part of `s`.
        unsafe { s.top().sub(1).write_volatile(i as u8) };
        stacks.push(s);
    }
    let made = start.elapsed();
    let lines = maps().len();
    for (i, s) in stacks.iter().enumerate().step_by(997) {
        // SAFETY: as above.
        assert_eq!(unsafe { s.top().sub(1).read_volatile() }, i as u8);
    }
    drop(stacks);
    println!(
        "{N} default stacks: made and touched in {made:?}, all dropped after {:?}; \
         /proc/self/maps had {lines} lines",
        start.elapsed()
    );
}

#[test]
fn owner_is_recorded_cut_and_cleared() {
    let mut s = Stack::new(page_size()).unwrap();
    assert_eq!(s.owner(), None);
    s.set_owner(7, Some("deep-recursion"));
    assert_eq!(s.owner(), Some((7, "deep-recursion".to_owned())));
    s.set_owner(8, None);
    assert_eq!(s.owner(), Some((8, String::new())));
    // A long name is cut at OWNER_NAME_MAX bytes, on a character boundary.
    let long = "é".repeat(OWNER_NAME_MAX); // 2 bytes each
    s.set_owner(9, Some(&format!("x{long}")));
    let (id, name) = s.owner().unwrap();
    assert_eq!(id, 9);
    assert!(name.len() <= OWNER_NAME_MAX && name.len() >= OWNER_NAME_MAX - 1);
    assert!(name.starts_with("xé"));
    // A shorter name over a longer one reads as itself alone.
    s.set_owner(10, Some("ab"));
    assert_eq!(s.owner(), Some((10, "ab".to_owned())));
    s.clear_owner();
    assert_eq!(s.owner(), None);
}

#[test]
fn stacks_move_between_threads() {
    let mut s = Stack::new(page_size()).unwrap();
    s.set_owner(1, Some("mover"));
    let s = std::thread::spawn(move || {
        assert_eq!(s.owner(), Some((1, "mover".to_owned())));
        s
    })
    .join()
    .unwrap();
    assert_eq!(s.size(), page_size());
}

fn small_cache(max_stacks: usize, max_warm: usize, size: usize) -> StackCache {
    let reserved = size + default_guard_size(size);
    StackCache::new(CacheLimits {
        max_stacks,
        max_bytes: usize::MAX,
        max_warm_bytes: max_warm * reserved,
        max_resident_bytes: 0,
    })
}

#[test]
fn cache_reuses_the_same_mapping_without_its_owner() {
    let size = 16 * page_size();
    let cache = small_cache(8, 8, size);
    let mut s = cache.get(size).unwrap();
    let bottom = s.bottom();
    s.set_owner(3, Some("first"));
    cache.put(s);
    assert_eq!(cache.stats().stacks, 1);
    let again = cache.get(size - 100).unwrap(); // rounds to the same class
    assert_eq!(again.bottom(), bottom, "the cached mapping is reused");
    assert_eq!(again.owner(), None, "a cached stack has no owner");
    let other = cache.get(2 * size).unwrap();
    assert_ne!(other.bottom(), bottom);
    let st = cache.stats();
    assert_eq!((st.hits, st.misses, st.stacks), (1, 2, 0));
}

#[test]
fn cache_respects_its_count_and_byte_bounds() {
    let size = 4 * page_size();
    let cache = small_cache(4, 4, size);
    let stacks: Vec<Stack> = (0..10).map(|_| cache.get(size).unwrap()).collect();
    for s in stacks {
        cache.put(s);
    }
    let st = cache.stats();
    assert_eq!(st.stacks, 4);
    assert_eq!(st.dropped, 6);
    assert_eq!(st.bytes, 4 * (size + default_guard_size(size)));

    let reserved = size + default_guard_size(size);
    let cache = StackCache::new(CacheLimits {
        max_stacks: 100,
        max_bytes: 3 * reserved,
        max_warm_bytes: usize::MAX,
        max_resident_bytes: 0,
    });
    for _ in 0..5 {
        cache.put(Stack::new(size).unwrap());
    }
    let st = cache.stats();
    assert_eq!((st.stacks, st.bytes, st.dropped), (3, 3 * reserved, 2));

    // A stack with a non-default guard is not cached.
    cache.clear();
    cache.put(Stack::with_guard(size, 2 * page_size()).unwrap());
    assert_eq!(cache.stats().stacks, 0);
}

/// Fills a stack with a byte and says whether it still holds it.
fn fill(s: &Stack, byte: u8) {
    // SAFETY: the read-write part of a stack nobody runs on.
    unsafe { std::ptr::write_bytes(s.bottom(), byte, s.size()) };
}

fn holds(s: &Stack, byte: u8) -> bool {
    // SAFETY: as in `fill`.
    let mem = unsafe { std::slice::from_raw_parts(s.bottom(), s.size()) };
    mem.iter().all(|&b| b == byte)
}

#[test]
fn cache_keeps_warm_stacks_and_releases_cold_ones() {
    let size = 8 * page_size();
    let cache = small_cache(16, 2, size);
    let stacks: Vec<Stack> = (0..4).map(|_| cache.get(size).unwrap()).collect();
    for s in &stacks {
        fill(s, 0xAB);
    }
    for s in stacks {
        cache.put(s);
    }
    let st = cache.stats();
    assert_eq!((st.stacks, st.warm), (4, 2), "warm budget is two stacks");
    // Warm stacks come back first, with their contents; cold ones were
    // released with MADV_DONTNEED and read as zero.
    let got: Vec<Stack> = (0..4).map(|_| cache.get(size).unwrap()).collect();
    assert!(holds(&got[0], 0xAB) && holds(&got[1], 0xAB));
    assert!(holds(&got[2], 0) && holds(&got[3], 0));
    assert_eq!(cache.stats().hits, 8 - 4);

    // trim() makes warm stacks cold.
    for s in got {
        fill(&s, 0xCD);
        cache.put(s);
    }
    assert_eq!(cache.trim(), 2);
    let st = cache.stats();
    assert_eq!((st.stacks, st.warm, st.warm_bytes), (4, 0, 0));
    for _ in 0..4 {
        assert!(holds(&cache.get(size).unwrap(), 0));
    }
}

#[test]
fn cache_survives_concurrent_use() {
    let size = 4 * page_size();
    let cache = small_cache(8, 4, size);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let cache = &cache;
            scope.spawn(move || {
                for i in 0..500 {
                    let mut s = cache.get(size).unwrap();
                    s.set_owner(t, Some("churn"));
                    // SAFETY: top - 8 is in the read-write part of our stack.
                    unsafe { s.top().cast::<u64>().sub(1).write(i) };
                    cache.put(s);
                }
            });
        }
    });
    let st = cache.stats();
    assert!(st.stacks <= 8 && st.warm <= 4, "{st:?}");
    assert_eq!(st.hits + st.misses, 2000);
    assert!(st.hits > 0);
}

/// This kernel thread's alternate signal stack: (address, size, flags).
fn current_altstack() -> (usize, usize, i32) {
    // SAFETY: zero is a valid stack_t to be overwritten; query only.
    let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer, query only.
    assert_eq!(unsafe { libc::sigaltstack(std::ptr::null(), &mut cur) }, 0);
    (cur.ss_sp as usize, cur.ss_size, cur.ss_flags)
}

/// Turns off this kernel thread's alternate signal stack (whoever made it
/// keeps its memory).
fn disable_altstack() {
    let off = libc::stack_t {
        ss_sp: std::ptr::null_mut(),
        ss_flags: libc::SS_DISABLE,
        ss_size: 0,
    };
    // SAFETY: disabling is always allowed when not running on it.
    assert_eq!(unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) }, 0);
}

#[test]
fn ensure_signal_stack_gives_a_thread_one_when_it_has_none() {
    std::thread::spawn(|| {
        disable_altstack();
        assert_ne!(current_altstack().2 & libc::SS_DISABLE, 0);
        ferry::stack::ensure_signal_stack().unwrap();
        let (sp, size, flags) = current_altstack();
        assert_eq!(flags & libc::SS_DISABLE, 0, "an alternate stack is set");
        assert!(size >= 64 * 1024, "size {size}");
        // It has a guard page below it.
        assert_guard_page(sp - 1);
        // A second call keeps it.
        ferry::stack::ensure_signal_stack().unwrap();
        assert_eq!(current_altstack().0, sp);
    })
    .join()
    .unwrap();
}

// ---- overflow: child processes ----

/// Runs this test binary's test `name` alone in a child with the child role
/// `role`; returns how it ended and its stderr. A child that is still alive
/// after a minute (a handler that returned into the fault forever) is killed
/// and the test fails.
fn run_child(name: &str, role: &str) -> (ExitStatus, String) {
    let mut child = Command::new(env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run child");
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {role} hung; stderr:\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status, reader.join().unwrap())
}

fn child_role() -> Option<String> {
    env::var(CHILD_ROLE).ok()
}

/// No core files from the children that die on purpose.
fn no_core_dumps() {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit; lowering a limit is always allowed.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
}

/// Sets the stack pointer to `top` and calls `f` there; never returns.
///
/// # Safety
///
/// `top` must be the 16-byte aligned top of a stack that stays mapped and
/// unused by anything else for the rest of the process.
#[cfg(target_arch = "x86_64")]
unsafe fn run_on(top: *mut u8, f: extern "C" fn() -> !) -> ! {
    // SAFETY: the caller gives us a private, aligned stack; `call` pushes
    // the return address so `f` starts with the ABI's alignment, and `f`
    // never returns (ud2 guards that).
    unsafe {
        std::arch::asm!(
            "mov rsp, {top}",
            "call {f}",
            "ud2",
            top = in(reg) top,
            f = in(reg) f,
            options(noreturn)
        )
    }
}

/// See the x86_64 version.
///
/// # Safety
///
/// As for the x86_64 version.
#[cfg(target_arch = "aarch64")]
unsafe fn run_on(top: *mut u8, f: extern "C" fn() -> !) -> ! {
    // SAFETY: as for x86_64; `blr` puts the return address in x30.
    unsafe {
        std::arch::asm!(
            "mov sp, {top}",
            "blr {f}",
            "brk #0",
            top = in(reg) top,
            f = in(reg) f,
            options(noreturn)
        )
    }
}

/// Recursion that only ends by overflowing: every frame keeps a live local
/// array and adds to the callee's result, so it is not a tail call.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 512];
    frame[(depth % 512) as usize] = depth as u8;
    std::hint::black_box(&mut frame);
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(frame[(depth % 512) as usize])
}

extern "C" fn overflow_entry() -> ! {
    let r = recurse(0);
    eprintln!("recursion returned {r}");
    std::process::exit(3);
}

/// Child: overflow a 128 KiB ferry stack, with or without an owner.
fn child_overflow(owner: Option<(u64, &str)>) -> ! {
    no_core_dumps();
    // Use an alternate stack made by ferry, not the one std gave this thread.
    disable_altstack();
    ferry::stack::ensure_signal_stack().unwrap();
    let mut stack = Stack::new(128 * 1024).unwrap();
    if let Some((id, name)) = owner {
        stack.set_owner(id, Some(name));
    }
    let top = stack.top();
    std::mem::forget(stack);
    eprintln!("child: recursing on a ferry stack");
    // SAFETY: the stack is leaked, so it stays mapped, and nothing else
    // uses it.
    unsafe { run_on(top, overflow_entry) }
}

fn assert_died_by_signal(status: ExitStatus, stderr: &str, signals: &[i32]) {
    assert!(
        status.signal().is_some_and(|s| signals.contains(&s)),
        "child should die by one of signals {signals:?}, got {status:?}; stderr:\n{stderr}"
    );
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn overflow_is_reported_with_thread_id_name_and_size() {
    const NAME: &str = "overflow_is_reported_with_thread_id_name_and_size";
    if child_role().as_deref() == Some("owned") {
        child_overflow(Some((7, "deep-recursion")));
    }
    let (status, stderr) = run_child(NAME, "owned");
    assert_died_by_signal(status, &stderr, &[libc::SIGSEGV, libc::SIGABRT]);
    assert!(stderr.contains("child: recursing"), "child ran: {stderr}");
    assert!(
        stderr.contains(r#"ferry: thread 7 "deep-recursion" overflowed its 128 KiB stack"#),
        "report names the thread and stack size; stderr:\n{stderr}"
    );
    assert!(stderr.contains("fault at 0x"), "{stderr}");
    assert!(!stderr.contains("recursion returned"), "{stderr}");
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn overflow_of_an_unowned_stack_is_still_reported() {
    const NAME: &str = "overflow_of_an_unowned_stack_is_still_reported";
    if child_role().as_deref() == Some("unowned") {
        child_overflow(None);
    }
    let (status, stderr) = run_child(NAME, "unowned");
    assert_died_by_signal(status, &stderr, &[libc::SIGSEGV, libc::SIGABRT]);
    assert!(
        stderr.contains("ferry: a thread with no registered owner overflowed its 128 KiB stack"),
        "stderr:\n{stderr}"
    );
}

/// Child: with the handler installed, fault with the stack pointer inside a
/// guard page but the faulting address elsewhere (as when a large frame
/// jumps the stack pointer past `bottom()` and its first access misses the
/// guard).
#[cfg(target_arch = "x86_64")]
fn child_sp_in_guard() -> ! {
    no_core_dumps();
    ferry::stack::ensure_signal_stack().unwrap();
    let mut stack = Stack::new(64 * 1024).unwrap();
    stack.set_owner(11, Some("big-frame"));
    let sp = stack.guard_range().start + 64;
    std::mem::forget(stack);
    eprintln!("child: faulting with sp in the guard");
    // SAFETY: the process dies at the load; the stack pointer is never used
    // for a push before that.
    unsafe {
        std::arch::asm!(
            "mov rsp, {sp}",
            "mov {sp}, qword ptr [{wild}]",
            "ud2",
            sp = in(reg) sp,
            wild = in(reg) 8usize,
            options(noreturn)
        )
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn fault_with_stack_pointer_in_a_guard_is_reported() {
    const NAME: &str = "fault_with_stack_pointer_in_a_guard_is_reported";
    if child_role().as_deref() == Some("sp") {
        child_sp_in_guard();
    }
    let (status, stderr) = run_child(NAME, "sp");
    assert_died_by_signal(status, &stderr, &[libc::SIGSEGV, libc::SIGABRT]);
    assert!(
        stderr
            .contains(r#"ferry: thread 11 "big-frame" overflowed its 64 KiB stack (fault at 0x8,"#),
        "stderr:\n{stderr}"
    );
}

/// Child: an ordinary wild-pointer fault, with the ferry handler installed.
fn child_wild_pointer() -> ! {
    no_core_dumps();
    ferry::stack::ensure_signal_stack().unwrap();
    let mut stack = Stack::new(64 * 1024).unwrap();
    stack.set_owner(5, Some("bystander"));
    eprintln!("child: reading a wild pointer");
    let wild = std::ptr::without_provenance::<u64>(16);
    // SAFETY: not safe at all: this is the fault under test. A volatile read
    // is emitted as a real load.
    let v = unsafe { std::ptr::read_volatile(wild) };
    eprintln!("read {v}");
    std::process::exit(3);
}

#[test]
fn wild_pointer_fault_dies_by_sigsegv_without_an_overflow_report() {
    const NAME: &str = "wild_pointer_fault_dies_by_sigsegv_without_an_overflow_report";
    if child_role().as_deref() == Some("wild") {
        child_wild_pointer();
    }
    let (status, stderr) = run_child(NAME, "wild");
    assert!(stderr.contains("child: reading a wild pointer"), "{stderr}");
    assert_died_by_signal(status, &stderr, &[libc::SIGSEGV]);
    assert!(
        !stderr.contains("ferry:"),
        "no overflow report for a wild pointer:\n{stderr}"
    );
    assert!(!stderr.contains("overflowed"), "{stderr}");
}

/// ferry's SIGSEGV handler, as found by `record_si_code` when it went in
/// front of it.
static FERRY_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// A SIGSEGV handler put in front of ferry's: writes the fault's `si_code`
/// to stderr, then hands the fault to ferry's handler.
extern "C" fn record_si_code(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t.
    let code = unsafe { (*info).si_code };
    let digit = if (0..10).contains(&code) {
        b'0' + code as u8
    } else {
        b'?'
    };
    let line = [
        b'c', b'h', b'i', b'l', b'd', b':', b' ', b's', b'i', b'_', b'c', b'o', b'd', b'e', b'=',
        digit, b'\n',
    ];
    // SAFETY: a valid buffer; write is async-signal-safe.
    unsafe { libc::write(libc::STDERR_FILENO, line.as_ptr().cast(), line.len()) };
    let handler = FERRY_HANDLER.load(Ordering::Relaxed);
    // SAFETY: ferry installs its handler with SA_SIGINFO, so it has this
    // signature; it gets the arguments we were given.
    let ferry: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
        unsafe { std::mem::transmute::<usize, _>(handler) };
    ferry(sig, info, ctx);
}

/// Child: touch the guard of a 64 KiB stack (after releasing its pages with
/// `MADV_DONTNEED` when `released`), with a handler in front of ferry's that
/// reports the fault's `si_code`.
fn child_touch_guard(released: bool) -> ! {
    no_core_dumps();
    let mut stack = Stack::new(64 * 1024).unwrap();
    stack.set_owner(21, Some("guard-toucher"));
    let guard = stack.guard_range();
    if released {
        fill(&stack, 0xEE);
        stack.release_pages().unwrap();
        assert!(holds(&stack, 0), "released pages read as zero");
        // Also release the whole mapping, guard included, as a careless
        // release would: guard markers must survive MADV_DONTNEED.
        // SAFETY: the stack's own mapping, which nobody runs on; its
        // contents are discarded, which is the point.
        let r = unsafe {
            libc::madvise(
                guard.start as *mut c_void,
                stack.reserved(),
                libc::MADV_DONTNEED,
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
    }
    // SAFETY: zero is a valid sigaction to be overwritten.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = record_si_code as *const () as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; `record_si_code` has the SA_SIGINFO signature.
    assert_eq!(unsafe { libc::sigaction(libc::SIGSEGV, &new, &mut old) }, 0);
    assert_ne!(
        old.sa_flags & libc::SA_SIGINFO,
        0,
        "ferry's handler is in place"
    );
    FERRY_HANDLER.store(old.sa_sigaction, Ordering::Relaxed);
    let addr = guard.start + guard.len() / 2;
    eprintln!("child: {:?} guard, touching {addr:#x}", method());
    // SAFETY: not safe at all: this is the fault under test.
    unsafe { (addr as *mut u8).write_volatile(1) };
    eprintln!("child: wrote to the guard");
    std::process::exit(3);
}

/// Checks how a `child_touch_guard` child ended.
fn check_guard_child(status: ExitStatus, stderr: &str) {
    assert_died_by_signal(status, stderr, &[libc::SIGSEGV]);
    assert!(!stderr.contains("wrote to the guard"), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("child: ") && l.contains(" guard, touching "))
        .unwrap_or_else(|| panic!("child ran:\n{stderr}"));
    let addr = line.rsplit(' ').next().unwrap();
    // A guard marker faults like an unmapped page, PROT_NONE like a
    // forbidden access; the overflow handler accepts either.
    // (SEGV_MAPERR = 1, SEGV_ACCERR = 2; the libc crate names neither.)
    let code = if line.contains("Madvise") { 1 } else { 2 };
    assert!(
        stderr.contains(&format!("child: si_code={code}\n")),
        "si_code {code} expected; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            r#"ferry: thread 21 "guard-toucher" overflowed its 64 KiB stack (fault at {addr}, guard "#
        )),
        "stderr:\n{stderr}"
    );
}

#[test]
fn touching_the_guard_dies_with_the_overflow_report() {
    const NAME: &str = "touching_the_guard_dies_with_the_overflow_report";
    match child_role().as_deref() {
        Some("guard") => child_touch_guard(false),
        Some("guard-released") => child_touch_guard(true),
        _ => {}
    }
    let (status, stderr) = run_child(NAME, "guard");
    check_guard_child(status, &stderr);
    // The guard survives MADV_DONTNEED (the cache's release of a cold
    // stack), even one that covers it.
    let (status, stderr) = run_child(NAME, "guard-released");
    check_guard_child(status, &stderr);
}

/// Recursion whose every frame holds a 60,000-byte array touched at its far
/// (low) end first, then at its near end: a stride of more than a page
/// between touches, which Rust's stack probes turn into page-by-page
/// touches.
#[inline(never)]
fn wide_recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 60_000];
    // SAFETY: both indices are inside the array; volatile keeps the
    // stores (and so the frame) in the program.
    unsafe {
        std::ptr::write_volatile(&mut frame[0], depth as u8);
        std::ptr::write_volatile(&mut frame[59_999], depth as u8);
    }
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    wide_recurse(depth + 1) + u64::from(std::hint::black_box(&frame)[59_999])
}

/// Child: a named ferry thread on a running runtime recurses with
/// 60,000-byte frames until its (default, 256 KiB) stack runs out.
fn child_wide_frames() -> ! {
    no_core_dumps();
    let r = ferry::Runtime::builder().processors(2).run(|| {
        let h = ferry::thread::Builder::new()
            .name("wide-frames")
            .spawn(|| {
                eprintln!("child: thread {} recursing", ferry::current().id().as_u64());
                wide_recurse(0)
            })
            .unwrap();
        h.join()
    });
    eprintln!("child: recursion ended: {r:?}");
    std::process::exit(3);
}

#[test]
fn a_ferry_thread_with_large_frames_is_reported_when_it_overflows() {
    const NAME: &str = "a_ferry_thread_with_large_frames_is_reported_when_it_overflows";
    if child_role().as_deref() == Some("wide") {
        child_wide_frames();
    }
    let (status, stderr) = run_child(NAME, "wide");
    assert_died_by_signal(status, &stderr, &[libc::SIGSEGV]);
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("child: thread ")?.strip_suffix(" recursing"))
        .unwrap_or_else(|| panic!("child ran:\n{stderr}"));
    assert!(
        stderr.contains(&format!(
            r#"ferry: thread {id} "wide-frames" overflowed its 256 KiB stack"#
        )),
        "stderr:\n{stderr}"
    );
    assert!(!stderr.contains("recursion ended"), "{stderr}");
}

/// A [`ferry::stack::TagNamer`] for the namer tests: tag 1 is named
/// "named-by-tag", tag 2 points at an address that is not mapped.
fn test_namer(tag: usize) -> *const std::ffi::c_char {
    match tag {
        1 => c"named-by-tag".as_ptr(),
        2 => std::ptr::without_provenance(16),
        _ => std::ptr::null(),
    }
}

/// Child: overflow a stack whose owner has `tag`, with `test_namer`
/// registered.
fn child_overflow_tagged(tag: usize) -> ! {
    no_core_dumps();
    disable_altstack();
    ferry::stack::ensure_signal_stack().unwrap();
    // SAFETY: `test_namer` only matches on its argument: async-signal-safe.
    unsafe { set_tag_namer(test_namer) };
    let mut stack = Stack::new(128 * 1024).unwrap();
    stack.set_owner_tagged(9, Some("spawn-name"), tag);
    let top = stack.top();
    std::mem::forget(stack);
    eprintln!("child: recursing on a tagged stack");
    // SAFETY: as in `child_overflow`.
    unsafe { run_on(top, overflow_entry) }
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn the_report_asks_the_tag_namer_and_survives_a_bad_name() {
    const NAME: &str = "the_report_asks_the_tag_namer_and_survives_a_bad_name";
    match child_role().as_deref() {
        Some("tag-named") => child_overflow_tagged(1),
        Some("tag-unmapped") => child_overflow_tagged(2),
        Some("tag-unknown") => child_overflow_tagged(3),
        _ => {}
    }
    for (role, name) in [
        ("tag-named", "named-by-tag"),
        ("tag-unmapped", "spawn-name"),
        ("tag-unknown", "spawn-name"),
    ] {
        let (status, stderr) = run_child(NAME, role);
        assert_died_by_signal(status, &stderr, &[libc::SIGSEGV]);
        assert!(
            stderr.contains(&format!(
                r#"ferry: thread 9 "{name}" overflowed its 128 KiB stack"#
            )),
            "{role}: stderr:\n{stderr}"
        );
    }
}

// ---- carved stacks: regions, the resident bound, overflow in mid-region ----

/// Resident pages of `[lo, hi)` by `mincore`.
fn resident_pages(lo: usize, hi: usize) -> usize {
    let mut vec = vec![0u8; (hi - lo).div_ceil(page_size())];
    // SAFETY: one byte per page of the range; mincore only reads page tables.
    let r = unsafe { libc::mincore(lo as *mut c_void, hi - lo, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

/// Child: three rounds of 10,000 gets and puts of carved 128 KiB stacks (a
/// stride of 256 KiB, so 1,024 per region): ten regions, mapped in round
/// one only, and no more `/proc/self/maps` lines than regions.
fn child_rounds() -> ! {
    const N: usize = 10_000;
    let size = 128 * 1024;
    let cache = StackCache::new(CacheLimits {
        max_resident_bytes: 1 << 30,
        ..CacheLimits::DEFAULT
    });
    let regions0 = cache.stats().regions;
    let maps0 = maps().len();
    for round in 0..3u64 {
        let stacks: Vec<Stack> = (0..N).map(|_| cache.get(size).unwrap()).collect();
        for s in &stacks {
            assert!(s.is_carved() && s.size() == size && s.has_default_guard());
            // SAFETY: the top word of the usable part of a stack we hold.
            unsafe { s.top().cast::<u64>().sub(1).write_volatile(round) };
        }
        let st = cache.stats();
        assert_eq!(
            st.regions - regions0,
            N.div_ceil(1024),
            "round {round}: {st:?}"
        );
        assert_eq!(
            st.misses, N as u64,
            "round {round}: misses only in round one"
        );
        assert_eq!(st.hits, round * N as u64, "round {round}");
        if method() == GuardMethod::Madvise {
            let grown = maps().len().saturating_sub(maps0);
            assert!(grown <= st.regions - regions0 + 2, "{grown} new mappings");
        }
        for s in stacks {
            cache.put(s);
        }
        assert_eq!(cache.stats().stacks, N);
    }
    std::process::exit(0);
}

#[test]
fn carved_stacks_keep_their_regions_over_rounds() {
    const NAME: &str = "carved_stacks_keep_their_regions_over_rounds";
    if child_role().as_deref() == Some("rounds") {
        child_rounds();
    }
    let (status, stderr) = run_child(NAME, "rounds");
    assert!(status.success(), "child failed: {status:?}\n{stderr}");
}

/// `n` carved stacks of `size` from `cache`, each with its top `touched`
/// pages written, and their usable ranges.
fn touched_stacks(
    cache: &StackCache,
    n: usize,
    size: usize,
    touched: usize,
) -> (Vec<Stack>, Vec<(usize, usize)>) {
    let page = page_size();
    let stacks: Vec<Stack> = (0..n).map(|_| cache.get(size).unwrap()).collect();
    let ranges = stacks
        .iter()
        .map(|s| (s.bottom() as usize, s.top() as usize))
        .collect();
    for s in &stacks {
        assert!(s.is_carved());
        // SAFETY: the top pages of the usable part of a stack we hold.
        unsafe { std::ptr::write_bytes(s.top().sub(touched * page), 0x5A, touched * page) };
    }
    (stacks, ranges)
}

#[test]
fn the_resident_bound_is_kept_with_few_release_calls() {
    const N: usize = 10_000;
    const TOUCHED: usize = 4;
    let bound = 8 << 20;
    let size = 64 * 1024;
    let page = page_size();
    let cache = StackCache::new(CacheLimits {
        max_resident_bytes: bound,
        ..CacheLimits::DEFAULT
    });
    let (stacks, ranges) = touched_stacks(&cache, N, size, TOUCHED);
    for s in stacks {
        cache.put(s);
    }
    let st = cache.stats();
    // The bound is enforced once it is passed by up to a magazine (at most
    // a quarter of the bound), back down to 3/4 of it.
    let slack = bound / 4;
    assert_eq!(st.stacks, N);
    assert!(st.resident <= bound + slack, "{st:?}");
    assert!(
        st.releases > 0 && st.releases <= (N / 64 + 8) as u64,
        "{st:?}"
    );
    let pages: Vec<usize> = ranges
        .iter()
        .map(|&(lo, hi)| resident_pages(lo, hi))
        .collect();
    let resident = pages.iter().sum::<usize>() * page;
    assert!(
        resident <= bound + slack,
        "{resident} bytes resident, {st:?}"
    );
    let gone = pages.iter().filter(|&&p| p == 0).count();
    assert!(
        gone >= N - (bound + slack) / (TOUCHED * page),
        "{gone} of {N} stacks released"
    );
    assert!(
        pages.iter().all(|&p| p == 0 || p == TOUCHED),
        "no partial release"
    );
    // trim() gives back the rest, and every stack reads as zero after.
    assert!(cache.trim() > 0);
    assert_eq!(cache.stats().resident, 0);
    assert!(ranges.iter().all(|&(lo, hi)| resident_pages(lo, hi) == 0));
}

#[test]
fn a_scavenger_brings_the_cache_back_under_its_bound_and_the_ceiling_holds() {
    const N: usize = 10_000;
    const TOUCHED: usize = 4;
    let bound = 8 << 20;
    // Another class than the inline test's: its regions, its runs.
    let size = 256 * 1024;
    let page = page_size();
    let cache: &'static StackCache = Box::leak(Box::new(StackCache::new(CacheLimits {
        max_resident_bytes: bound,
        ..CacheLimits::DEFAULT
    })));
    cache.release_in_background();
    let (stacks, ranges) = touched_stacks(cache, N, size, TOUCHED);
    // Given back faster than the scavenger's pace: the estimate may pass
    // the bound, never the ceiling (four times it) by more than the
    // puts' own batch.
    let slack = bound / 4;
    let mut highest = 0;
    for s in stacks {
        cache.put(s);
        highest = highest.max(cache.stats().resident);
    }
    assert!(
        highest <= 4 * bound + slack,
        "{highest} bytes resident at most"
    );
    assert!(
        highest > bound + slack,
        "puts past the bound wait for the scavenger"
    );
    // The scavenger brings it down to 3/4 of the bound in the background
    // (a batch it is releasing is out of the counts until it is back).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cache.stats().resident > bound / 4 * 3 || cache.stats().stacks != N {
        assert!(
            std::time::Instant::now() < give_up,
            "the scavenger left {:?}",
            cache.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let st = cache.stats();
    assert_eq!(st.stacks, N);
    let pages: Vec<usize> = ranges
        .iter()
        .map(|&(lo, hi)| resident_pages(lo, hi))
        .collect();
    let resident = pages.iter().sum::<usize>() * page;
    assert!(resident <= bound, "{resident} bytes resident, {st:?}");
    assert!(
        pages.iter().all(|&p| p == 0 || p == TOUCHED),
        "no partial release"
    );
    let scavenger = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .any(|c| c.trim() == "ferry-scavenger");
    assert!(scavenger, "the scavenger is a thread named ferry-scavenger");
}

/// Child: overflow (or stride into the guard of) a carved 128 KiB stack
/// with carved neighbours on both sides, after its guard went through a
/// release in a run.
fn child_carved_overflow(stride: bool) -> ! {
    no_core_dumps();
    disable_altstack();
    ferry::stack::ensure_signal_stack().unwrap();
    let size = 128 * 1024;
    let cache = StackCache::new(CacheLimits::DEFAULT);
    let stacks: Vec<Stack> = (0..9).map(|_| cache.get(size).unwrap()).collect();
    for s in stacks {
        cache.put(s);
    }
    assert_eq!(cache.trim(), 9);
    let mut stacks: Vec<Stack> = (0..9).map(|_| cache.get(size).unwrap()).collect();
    stacks.sort_by_key(|s| s.bottom() as usize);
    let mut mid = stacks.remove(4);
    assert!(mid.is_carved());
    assert_eq!(
        stacks[3].top() as usize,
        mid.guard_range().start,
        "neighbour below"
    );
    assert_eq!(
        mid.top() as usize,
        stacks[4].guard_range().start,
        "neighbour above"
    );
    mid.set_owner(21, Some("carved-deep"));
    let (top, bottom, guard) = (mid.top(), mid.bottom(), mid.guard_size());
    std::mem::forget(mid);
    std::mem::forget(stacks);
    if stride {
        eprintln!("child: striding into the guard");
        let addr = bottom as usize - (guard - page_size());
        // SAFETY: the address is in the stack's guard, so the write faults
        // and the process dies; nothing is written.
        unsafe { (addr as *mut u8).write_volatile(1) };
        eprintln!("wrote into the guard");
        std::process::exit(3);
    }
    eprintln!("child: recursing on a ferry stack");
    // SAFETY: the stack is leaked, so it stays mapped, and nothing else
    // uses it.
    unsafe { run_on(top, overflow_entry) }
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn overflow_of_a_carved_stack_in_mid_region_names_the_thread() {
    const NAME: &str = "overflow_of_a_carved_stack_in_mid_region_names_the_thread";
    match child_role().as_deref() {
        Some("carved") => child_carved_overflow(false),
        Some("carved-stride") => child_carved_overflow(true),
        _ => {}
    }
    for role in ["carved", "carved-stride"] {
        let (status, stderr) = run_child(NAME, role);
        assert_died_by_signal(status, &stderr, &[libc::SIGSEGV, libc::SIGABRT]);
        assert!(stderr.contains("child: "), "child ran: {stderr}");
        assert!(
            stderr.contains(r#"ferry: thread 21 "carved-deep" overflowed its 128 KiB stack"#),
            "{role}: the report names the thread; stderr:\n{stderr}"
        );
        assert!(!stderr.contains("recursion returned"), "{stderr}");
        assert!(!stderr.contains("wrote into the guard"), "{stderr}");
    }
}
