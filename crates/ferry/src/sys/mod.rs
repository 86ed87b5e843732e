//! Small libc shims that the safe layers above need and rustix does not
//! offer: errno, thread ids and directed signals, a kernel thread's CPU
//! clock, the cycle counter, the preemption signal's installation and the
//! address ranges of the C library's code, `mincore` for the stack arena;
//! and what `/proc` says of the process and its threads (`procfs.rs`: a
//! kernel thread's scheduling state, the number of kernel threads, the
//! process's start time, `MemTotal`).
//!
//! Raw system calls and `libc` structures stay here; nothing here blocks.

use std::io;
use std::sync::OnceLock;

mod procfs;

pub(crate) use procfs::{
    TaskState, mem_total, open_own_stat, process_identity, task_state, thread_count,
};

/// The calling kernel thread's errno slot, valid for the kernel thread's
/// lifetime: asked afresh at every call.
///
/// `__errno_location` is known to the compiler as a function whose result
/// never changes on one kernel thread, so two calls in one function
/// (after inlining) become one. A user-level thread may run on another
/// kernel thread after a switch in between (the preemption handler puts
/// errno back after switching away and back), and a merged call then
/// writes the kernel thread it left. The call goes through a function
/// pointer the compiler cannot see into.
#[inline]
pub(crate) fn errno_location() -> *mut i32 {
    let f: unsafe extern "C" fn() -> *mut i32 = std::hint::black_box(libc::__errno_location);
    // SAFETY: `__errno_location` has no preconditions.
    unsafe { f() }
}

/// Makes one system call that does nothing, so that a signal already sent
/// to the calling kernel thread is delivered (a pending signal's handler
/// runs when the kernel returns to user code) before the caller goes on.
pub(crate) fn deliver_pending_signals() {
    // SAFETY: `getppid` takes nothing and changes nothing.
    unsafe { libc::syscall(libc::SYS_getppid) };
}

/// The calling kernel thread's id.
pub(crate) fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Sends `signal` to kernel thread `tid` of this process.
pub(crate) fn signal_thread(tid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: `tgkill` takes plain integers; a stale `tid` at worst hits a
    // thread that does not exist (ESRCH), since ids of this process are only
    // reused after the thread ended.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signal) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lets the calling kernel thread's timed sleeps end within `ns`
/// nanoseconds of their deadline (the default slack is 50 µs).
pub(crate) fn set_timer_slack(ns: u64) {
    // SAFETY: `PR_SET_TIMERSLACK` takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// Names the calling kernel thread (as `top -H` and `/proc/<pid>/task/*/comm`
/// show it; the kernel keeps the first 15 bytes). Best effort.
pub(crate) fn set_thread_name(name: &str) {
    if let Ok(name) = std::ffi::CString::new(name) {
        let _ = rustix::thread::set_name(&name);
    }
}

/// The calling kernel thread's thread pointer: a value no two live kernel
/// threads share (see `arch::thread_pointer`).
pub(crate) fn thread_pointer() -> usize {
    crate::arch::thread_pointer()
}

/// The instruction pointer saved in a signal handler's `ucontext`.
///
/// # Safety
/// `ucontext` is the third argument the kernel passed to an `SA_SIGINFO`
/// handler that is still running.
pub(crate) unsafe fn interrupted_pc(ucontext: *mut libc::c_void) -> usize {
    let uc = ucontext.cast::<libc::ucontext_t>();
    // SAFETY: the kernel's `ucontext_t`, valid while the handler runs.
    unsafe { (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
}

/// Whether a general-purpose register saved in a signal handler's
/// `ucontext` (any but the instruction pointer) holds an address in
/// `range`.
///
/// # Safety
/// As [`interrupted_pc`].
pub(crate) unsafe fn interrupted_registers_point_into(
    ucontext: *mut libc::c_void,
    range: std::ops::Range<usize>,
) -> bool {
    let uc = ucontext.cast::<libc::ucontext_t>();
    // SAFETY: the kernel's `ucontext_t`, valid while the handler runs.
    let gregs = unsafe { &(*uc).uc_mcontext.gregs };
    gregs[..=libc::REG_RSP as usize]
        .iter()
        .any(|&r| range.contains(&(r as usize)))
}

/// Whether the handler whose `ucontext` this is interrupted a system call
/// that then failed with `EINTR` (the handler's signal was installed
/// without `SA_RESTART`): the instruction before the interrupted one is
/// `syscall` and the result register holds `-EINTR`.
///
/// # Safety
/// As [`interrupted_pc`].
pub(crate) unsafe fn interrupted_system_call(ucontext: *mut libc::c_void) -> bool {
    let uc = ucontext.cast::<libc::ucontext_t>();
    // SAFETY: the kernel's `ucontext_t`, valid while the handler runs.
    let result = unsafe { (*uc).uc_mcontext.gregs[libc::REG_RAX as usize] };
    if result != -i64::from(libc::EINTR) {
        return false;
    }
    // SAFETY: as above.
    let pc = unsafe { interrupted_pc(ucontext) };
    // SAFETY: `pc` is the interrupted instruction, in mapped code; a
    // result of `-EINTR` is a system call's (the two bytes before it are
    // the `syscall` instruction, in the same mapping) in all but code that
    // happens to hold that value, where a read of the two bytes before an
    // instruction stays in the code it was fetched from unless it begins a
    // mapping.
    let before = unsafe { std::ptr::read_unaligned((pc - 2) as *const [u8; 2]) };
    before == [0x0f, 0x05]
}

/// Installs `handler` for `signal` with `SA_SIGINFO` (and `SA_RESTART` if
/// `restart`: interrupted system calls then resume, else they fail with
/// `EINTR`) on the interrupted stack (no `SA_ONSTACK`: the handler may
/// switch away from its frame and come back on another kernel thread, which
/// an alternate stack would not survive). The signal is blocked while the
/// handler runs; a handler that switches away unblocks it first
/// ([`unblock_signal`]).
pub(crate) fn install_handler(
    signal: i32,
    handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void),
    restart: bool,
) -> io::Result<()> {
    // SAFETY: zero is a valid `sigaction` to fill in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler as usize;
    action.sa_flags = libc::SA_SIGINFO | if restart { libc::SA_RESTART } else { 0 };
    // SAFETY: `action.sa_mask` is a valid set to clear.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is fully initialised; the old action is not wanted.
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unblocks `signal` for the calling kernel thread.
pub(crate) fn unblock_signal(signal: i32) {
    // SAFETY: zero is a valid `sigset_t` to fill in.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid set; `signal` a valid number.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Code of the C runtime whose per-kernel-thread state (malloc's caches,
/// stdio locks, the dynamic loader) a thread must not be moved away from in
/// the middle of: the executable ranges of libc, the loader, libgcc_s,
/// libstdc++ and the vDSO, as `[start, end)` pairs.
pub(crate) fn c_runtime_code() -> &'static [(usize, usize)] {
    static RANGES: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    RANGES.get_or_init(|| {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        // SAFETY: the callback only reads the `dl_phdr_info` it is given and
        // pushes into the `Vec` passed as `data`.
        unsafe {
            libc::dl_iterate_phdr(Some(collect_c_runtime), (&raw mut ranges).cast());
        }
        ranges
    })
}

/// `dl_iterate_phdr` callback for [`c_runtime_code`].
unsafe extern "C" fn collect_c_runtime(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `info` for the call's duration, and
    // `data` is the `Vec` `c_runtime_code` passed.
    let (info, ranges) = unsafe { (&*info, &mut *data.cast::<Vec<(usize, usize)>>()) };
    let name = if info.dlpi_name.is_null() {
        ""
    } else {
        // SAFETY: a NUL-terminated path owned by the loader.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
            .to_str()
            .unwrap_or("")
    };
    let wanted = [
        "libc.so",
        "ld-linux",
        "libgcc_s",
        "libstdc++",
        "libpthread",
        "linux-vdso",
    ];
    if !wanted.iter().any(|w| name.contains(w)) {
        return 0;
    }
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            ranges.push((start, start + ph.p_memsz as usize));
        }
    }
    0
}

/// The CPU's time-stamp counter: a count of reference cycles, read in a
/// few nanoseconds without a system call. On x86-64 Linux with a constant,
/// non-stop counter (the kernel's own clock source then) it ticks at one
/// rate on every core; only differences mean anything, and their rate is
/// the caller's to calibrate against a clock.
#[inline]
pub(crate) fn cycles() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 CPU and has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Nanoseconds per [`cycles`] tick, measured once against the monotonic
/// clock (over 2 ms, the first time it is needed). Each clock reading is
/// bracketed by two counter reads, taken again if the kernel preempted
/// the thread between them, so a preemption cannot skew the rate.
///
/// Threads that need it before it is known each measure it, and the first
/// to finish publishes its rate: none waits for another's measurement (a
/// ferry thread waiting in the kernel for a measuring thread that a time
/// slice switched out would cost its processor a takeover).
fn ns_per_cycle() -> f64 {
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::{Acquire, Release};
    /// The rate's bits; 0 until measured.
    static NS_PER_CYCLE: AtomicU64 = AtomicU64::new(0);
    /// A clock reading and the counter at it (the middle of a bracket
    /// narrower than 20,000 ticks, or of the narrowest of 100 tries).
    fn paired() -> (std::time::Instant, u64) {
        let mut best = (std::time::Instant::now(), 0, u64::MAX);
        for _ in 0..100 {
            let before = self::cycles();
            let t = std::time::Instant::now();
            let width = self::cycles().wrapping_sub(before);
            if width < best.2 {
                best = (t, before + width / 2, width);
            }
            if width < 20_000 {
                break;
            }
        }
        (best.0, best.1)
    }
    let known = NS_PER_CYCLE.load(Acquire);
    if known != 0 {
        return f64::from_bits(known);
    }
    let (t0, c0) = paired();
    while t0.elapsed() < std::time::Duration::from_millis(2) {
        std::hint::spin_loop();
    }
    let (t1, c1) = paired();
    let ns = (t1 - t0).as_nanos() as f64;
    let rate = (ns / (c1.wrapping_sub(c0).max(1) as f64)).max(f64::MIN_POSITIVE);
    match NS_PER_CYCLE.compare_exchange(0, rate.to_bits(), Release, Acquire) {
        Ok(_) => rate,
        Err(first) => f64::from_bits(first),
    }
}

/// Converts a difference of [`cycles`] to time.
pub(crate) fn cycles_to_duration(cycles: u64) -> std::time::Duration {
    std::time::Duration::from_nanos((cycles as f64 * ns_per_cycle()) as u64)
}

/// Converts time to a difference of [`cycles`].
pub(crate) fn duration_to_cycles(d: std::time::Duration) -> u64 {
    // Through `u64` (585 years of nanoseconds): a `u128` to `f64`
    // conversion is a library call, not an instruction.
    (u64::try_from(d.as_nanos()).unwrap_or(u64::MAX) as f64 / ns_per_cycle()) as u64
}

/// Sleeps on `word` while it holds `expected`: until [`futex_wake_one`] on
/// it, for at most `timeout` (`None`: no limit). May return early for no
/// reason; callers look at their condition again.
pub(crate) fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: Option<std::time::Duration>,
) {
    let timeout = timeout.map(futex_timespec);
    let _ = rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::PRIVATE,
        expected,
        timeout.as_ref(),
    );
}

/// Wakes one kernel thread sleeping in [`futex_wait`] on `word`.
pub(crate) fn futex_wake_one(word: &std::sync::atomic::AtomicU32) {
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::PRIVATE, 1);
}

/// CPU time consumed so far by kernel thread `tid` of this process, in
/// nanoseconds (its per-thread CPU clock); `None` if it cannot be read.
pub(crate) fn thread_cpu_ns(tid: i32) -> Option<u64> {
    // The kernel's clock id for a thread's scheduler CPU clock:
    // `(~tid << 3) | CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2)`.
    let clock = ((!tid) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter; a bad clock id gives EINVAL.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// A kernel scheduling class an activation may be in (all at priority 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum SchedClass {
    /// `SCHED_OTHER`: the normal class; a thread woken onto a core may
    /// preempt the one running there.
    Normal = 0,
    /// `SCHED_BATCH`: never woken *onto* a core ahead of the thread running
    /// there (no wakeup preemption), yet keeps its fair share. A spare
    /// waits for a when-idle handoff in it (see `upcall::activation`), and
    /// a processor's stand-in stands by in it (see `upcall::stand_in`).
    Batch = 1,
}

/// Puts kernel thread `tid` in `class`; `false` if the kernel refused.
///
/// Anyone may move between the two.
///
/// `tid` names another kernel thread of this process, or `0` the caller.
pub(crate) fn set_class(tid: i32, class: SchedClass) -> bool {
    let policy = match class {
        SchedClass::Normal => libc::SCHED_OTHER,
        SchedClass::Batch => libc::SCHED_BATCH,
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param`; a stale `tid` at worst names
    // no thread (ESRCH), as in `signal_thread`.
    unsafe { libc::sched_setscheduler(tid, policy, &raw const param) == 0 }
}

/// Offers the calling kernel thread's core to any other runnable thread
/// there (`sched_yield`); returns at once if there is none.
pub(crate) fn yield_core() {
    rustix::thread::sched_yield();
}

/// The CPU the calling kernel thread runs on now (through the vDSO), or
/// `None` if the kernel will not say.
#[inline]
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: `sched_getcpu` has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Wakes up to `n` kernel threads waiting on the futex `word` in memory
/// shared with another process (a shared futex, keyed by the file page, not
/// a private one).
pub(crate) fn futex_wake_shared(word: &std::sync::atomic::AtomicU32, n: u32) {
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), n);
}

/// Sleeps on the futex `word` in memory shared with another process while
/// it holds `expected`: until [`futex_wake_shared`] on it (from either
/// process), for at most `timeout`. May return early for no reason.
///
/// # Errors
/// `EAGAIN` if the word did not hold `expected` when the wait began;
/// `ETIMEDOUT`; `EINTR`.
pub(crate) fn futex_wait_shared(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) -> rustix::io::Result<()> {
    rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::empty(),
        expected,
        Some(&futex_timespec(timeout)),
    )
}

/// A relative futex timeout.
fn futex_timespec(t: std::time::Duration) -> rustix::thread::futex::Timespec {
    rustix::thread::futex::Timespec {
        tv_sec: t.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: t.subsec_nanos().into(),
    }
}

/// Sleeps until `own` (a private futex word) no longer holds `own_expected`
/// and is woken, or one of the `shared` words (futexes in memory shared
/// with other processes, each expected to hold `shared_expected`) is woken,
/// or `timeout` passes: one `futex_waitv` (at most 128 words; extra shared
/// words are not waited on).
///
/// # Errors
/// `EAGAIN` if a word did not hold its expected value when the wait began;
/// `ETIMEDOUT`; `EINTR`.
pub(crate) fn futex_waitv_own_and_shared(
    own: &std::sync::atomic::AtomicU32,
    own_expected: u32,
    shared: &[&std::sync::atomic::AtomicU32],
    shared_expected: u32,
    timeout: Option<std::time::Duration>,
) -> rustix::io::Result<usize> {
    use rustix::thread::futex::{Wait, WaitFlags, WaitPtr, WaitvFlags};
    let mut waiters = Vec::with_capacity(shared.len() + 1);
    let mut own_wait = Wait::new();
    own_wait.uaddr = WaitPtr::new(own.as_ptr().cast());
    own_wait.val = own_expected.into();
    own_wait.flags = WaitFlags::SIZE_U32 | WaitFlags::PRIVATE;
    waiters.push(own_wait);
    for word in shared.iter().take(127) {
        let mut w = Wait::new();
        w.uaddr = WaitPtr::new(word.as_ptr().cast());
        w.val = shared_expected.into();
        w.flags = WaitFlags::SIZE_U32;
        waiters.push(w);
    }
    let deadline = timeout.map(|t| {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid out-parameter; CLOCK_MONOTONIC exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let ns = now.tv_nsec as u64 + u64::from(t.subsec_nanos());
        rustix::thread::futex::Timespec {
            tv_sec: now
                .tv_sec
                .saturating_add(t.as_secs().try_into().unwrap_or(i64::MAX / 2))
                .saturating_add((ns / 1_000_000_000) as i64),
            tv_nsec: (ns % 1_000_000_000) as _,
        }
    });
    rustix::thread::futex::waitv(
        &waiters,
        WaitvFlags::empty(),
        deadline.as_ref(),
        rustix::thread::ClockId::Monotonic,
    )
}

/// How many pages of `[addr, addr + len)` (page-aligned, mapped) are
/// resident, by `mincore(2)`, which rustix does not offer; `None` if the
/// call fails.
pub(crate) fn resident_pages(addr: usize, len: usize) -> Option<usize> {
    let pages = len.div_ceil(rustix::param::page_size());
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` has one byte per page of the range, as mincore writes;
    // mincore only reads the page tables of the range.
    let r = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    (r == 0).then(|| vec.iter().filter(|&&b| b & 1 != 0).count())
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock every process of the
/// machine shares (what `Instant` reads), for deadlines that cross
/// processes.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists (served by the vDSO, no system call).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Where user `uid`'s runtime directory is, given the value of
/// `XDG_RUNTIME_DIR` (used only if it is an absolute path) and the temp
/// dir: `$XDG_RUNTIME_DIR/ferry`, else `<temp>/ferry-<uid>`.
pub(crate) fn user_runtime_dir(
    xdg: Option<std::ffi::OsString>,
    uid: u32,
    temp: &std::path::Path,
) -> std::path::PathBuf {
    match xdg.map(std::path::PathBuf::from) {
        Some(xdg) if xdg.is_absolute() => xdg.join("ferry"),
        _ => temp.join(format!("ferry-{uid}")),
    }
}

/// Why [`private_dir`] refused a directory.
#[derive(Debug)]
pub(crate) enum DirError {
    /// Making or inspecting it failed.
    Io(io::Error),
    /// It is not safe to use: what is wrong with it.
    Unsafe(&'static str),
}

/// Makes the directory `path` with mode 0700 if missing (its parent must
/// exist), then checks it with `lstat`: a real directory (not a symbolic
/// link), owned by `owner`, with no permission bit for the group or
/// others. A directory it did not make is never loosened, only refused.
pub(crate) fn private_dir(path: &std::path::Path, owner: u32) -> Result<(), DirError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        // The umask may have taken owner bits away; this sets exactly
        // 0700 on the directory just made (checked again below).
        Ok(()) => std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(DirError::Io)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(DirError::Io(e)),
    }
    let meta = std::fs::symlink_metadata(path).map_err(DirError::Io)?;
    if meta.file_type().is_symlink() {
        return Err(DirError::Unsafe("it is a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(DirError::Unsafe("it is not a directory"));
    }
    if meta.uid() != owner {
        return Err(DirError::Unsafe("it is owned by another user"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(DirError::Unsafe("it is open to the group or others"));
    }
    Ok(())
}
