//! The stack-overflow reporter: a process-wide SIGSEGV/SIGBUS handler that
//! names the thread whose guard was hit, and the alternate signal stacks
//! it runs on. The handler must never lock, allocate, panic or call anything
//! but async-signal-safe functions (`write`, `sigaction`, `raise`, `getpid`,
//! `process_vm_readv`) and the registered [`TagNamer`].
//!
//! A fault is an overflow when the kernel raised it (`si_code > 0`) and
//! either the faulting address or the interrupted stack pointer lies in a
//! registered guard. Any kernel code will do: touching a `PROT_NONE` guard
//! gives `SEGV_ACCERR`, touching a guard marker (`MADV_GUARD_INSTALL`, see
//! [`GuardMethod`](super::GuardMethod)) gives `SEGV_MAPERR`, both with the
//! faulting address in `si_addr`. Then the handler writes one line to
//! stderr, e.g.
//!
//! ```text
//! ferry: thread 42 "worker" overflowed its 256 KiB stack (fault at 0x7f3a1c2fefff, guard 0x7f3a1c2fe000..0x7f3a1c2ff000)
//! ```
//!
//! restores the default action and re-raises the signal, so the process dies
//! by SIGSEGV (or SIGBUS) with a core dump where enabled. Any other fault is
//! passed to the handler that was installed before ours (Rust's own stack
//! overflow handler, a sanitizer, ...) or, when there was none, gets the
//! default action: chaining never turns a crash into a silent one.
//!
//! The thread is named by its ferry id and by the name it was spawned with,
//! or, when the embedder registered a [`TagNamer`] and the namer knows a
//! name for the thread's tag, by that name (the C API's `cthread_set_name`
//! names a thread after it started). The handler copies that name with
//! `process_vm_readv(2)` on its own process, which fails with `EFAULT`
//! instead of faulting on a string that is no longer mapped; if it fails
//! (a seccomp filter may forbid the call) the report goes without it.
//!
//! A handler for an overflow cannot run on the overflowed stack, so every
//! kernel thread that runs ferry threads needs an alternate signal stack:
//! [`ensure_signal_stack`] gives it one if it has none.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::io;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::mapping::Mapping;
use super::registry::{self, Snapshot};
use super::{page_size, round_to_pages};

/// The signals we handle, and for each the action that was installed before
/// ours: handler address (`SIG_DFL` = 0 until stored) and `sa_flags`.
const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];
static PREV_HANDLER: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static PREV_FLAGS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();

/// Asks an embedder for the name of the thread whose tag
/// ([`Thread::tag`](crate::Thread::tag), as given at spawn) is the
/// argument: a pointer to a NUL-terminated string, or null when it knows
/// none. Called from the SIGSEGV handler, so it must be async-signal-safe:
/// atomic loads only, no lock, no allocation. The string need not be
/// mapped any more (the report copies it without faulting).
pub type TagNamer = fn(usize) -> *const std::ffi::c_char;

/// The registered [`TagNamer`] as an address; 0 when none.
static NAMER: AtomicUsize = AtomicUsize::new(0);

/// Registers the function the overflow report asks for a thread's name by
/// its tag (replacing any earlier one). The C API registers one that
/// answers the name `cthread_set_name` gave a cthread.
///
/// # Safety
/// `namer` is called from the SIGSEGV handler, on any thread, at any
/// moment: it must be async-signal-safe (atomic loads only; no lock, no
/// allocation, no panic) for every tag.
pub unsafe fn set_tag_namer(namer: TagNamer) {
    NAMER.store(namer as usize, Ordering::Release);
}

/// Installs the overflow handler for SIGSEGV and SIGBUS, once per process;
/// later calls return the first call's result. [`Stack::new`](super::Stack::new)
/// and [`ensure_signal_stack`] call it, so the thread layer need not.
///
/// The previous actions are kept and chained to for faults outside ferry
/// guards. A handler installed later that does not chain to ours disables
/// the report (the fault is then its handler's business).
pub fn install_overflow_handler() -> io::Result<()> {
    match INSTALLED.get_or_init(install) {
        Ok(()) => Ok(()),
        Err(errno) => Err(io::Error::from_raw_os_error(*errno)),
    }
}

fn install() -> Result<(), i32> {
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: an all-zero `sigaction` is a valid value (SIG_DFL, empty
        // mask, no flags) of this plain C struct.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_fault as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `new.sa_mask` is a valid, exclusively borrowed sigset_t.
        // Blocking everything keeps other handlers off the small alternate
        // stack while we run.
        unsafe { libc::sigfillset(&mut new.sa_mask) };
        // SAFETY: as above, zero is a valid `sigaction` to be overwritten.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call; `on_fault` has the
        // signature SA_SIGINFO requires and is async-signal-safe. The swap is
        // atomic; a fault between it and the stores below finds handler 0 =
        // SIG_DFL, the safe fallback.
        if unsafe { libc::sigaction(sig, &new, &mut old) } != 0 {
            return Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL));
        }
        PREV_FLAGS[i].store(old.sa_flags as usize, Ordering::Relaxed);
        PREV_HANDLER[i].store(old.sa_sigaction, Ordering::Release);
    }
    Ok(())
}

/// The SIGSEGV/SIGBUS handler.
extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t (a chaining
    // handler that calls us passes on the one it got); `si_addr` is the
    // faulting address for kernel-raised SIGSEGV/SIGBUS and is only
    // interpreted then.
    let (code, addr) = unsafe {
        if info.is_null() {
            (0, 0)
        } else {
            ((*info).si_code, (*info).si_addr() as usize)
        }
    };
    let from_kernel = code > 0;
    if from_kernel {
        let hit = registry::lookup(addr).or_else(|| stack_pointer(ctx).and_then(registry::lookup));
        if let Some(mut snap) = hit {
            tag_name(&mut snap);
            report(&snap, addr);
            die(sig);
            return;
        }
    }
    chain(sig, info, ctx, from_kernel);
}

/// Replaces `snap`'s name with the one the registered [`TagNamer`] knows
/// for its tag, if any; copies it with `process_vm_readv`, which reports a
/// bad address as an error instead of faulting.
pub(super) fn tag_name(snap: &mut Snapshot) {
    let namer = NAMER.load(Ordering::Acquire);
    if !snap.owned || snap.tag == 0 || namer == 0 {
        return;
    }
    // SAFETY: NAMER only ever holds a `TagNamer` stored by `set_tag_namer`,
    // whose contract makes it async-signal-safe.
    let namer = unsafe { std::mem::transmute::<usize, TagNamer>(namer) };
    let at = namer(snap.tag) as usize;
    if at == 0 {
        return;
    }
    let mut buf = [0u8; registry::NAME_CAP];
    // Two pieces, split at the next 4 KiB boundary (a page boundary for
    // every page size, and no call to learn it here): the call never
    // splits one piece, so a string at the end of the last mapped page
    // still reads.
    const SMALLEST_PAGE: usize = 4096;
    let first = (SMALLEST_PAGE - at % SMALLEST_PAGE).min(buf.len());
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = [
        libc::iovec {
            iov_base: at as *mut c_void,
            iov_len: first,
        },
        libc::iovec {
            iov_base: at.wrapping_add(first) as *mut c_void,
            iov_len: buf.len() - first,
        },
    ];
    let pieces = if first < buf.len() { 2 } else { 1 };
    // SAFETY: reads the caller's own memory into `buf`, which `local`
    // describes exactly; the kernel checks the remote range and answers
    // EFAULT (or a short count) instead of faulting. getpid and
    // process_vm_readv are plain system calls, safe in a signal handler.
    let n =
        unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), pieces, 0) };
    if n <= 0 {
        return;
    }
    let read = &buf[..(n as usize).min(buf.len())];
    let len = read.iter().position(|&b| b == 0).unwrap_or(read.len());
    if len == 0 {
        return;
    }
    snap.name[..len].copy_from_slice(&read[..len]);
    snap.name_len = len;
}

/// The interrupted context's stack pointer.
fn stack_pointer(ctx: *mut c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    let uc = ctx.cast::<libc::ucontext_t>();
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: with SA_SIGINFO the third argument is the interrupted
        // `ucontext_t`, valid for the duration of the handler.
        Some(unsafe { (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] } as usize)
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above.
        Some(unsafe { (*uc).uc_mcontext.sp } as usize)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = uc;
        None
    }
}

/// Sets `sig` back to its default action and raises it: the process dies by
/// `sig` as soon as the handler returns and the signal is unblocked.
fn die(sig: c_int) {
    set_default(sig);
    // SAFETY: raise is async-signal-safe; `sig` is blocked while we run, so
    // it stays pending until the handler returns.
    unsafe { libc::raise(sig) };
}

fn set_default(sig: c_int) {
    // SAFETY: zero is SIG_DFL with an empty mask and no flags; sigaction is
    // async-signal-safe and the pointer is valid.
    unsafe {
        let dfl: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}

/// Hands a fault that is not an overflow to the previous action.
fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void, from_kernel: bool) {
    let i = if sig == libc::SIGBUS { 1 } else { 0 };
    let handler = PREV_HANDLER[i].load(Ordering::Acquire);
    let flags = PREV_FLAGS[i].load(Ordering::Relaxed) as c_int;
    if handler == libc::SIG_IGN && !from_kernel {
        // Someone sent a signal that was being ignored: keep ignoring it.
        return;
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // A fault cannot be ignored (the instruction would fault forever).
        die(sig);
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous action was installed with SA_SIGINFO, so its
        // handler has this signature; we pass it the arguments we were given.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute::<usize, _>(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the previous handler takes the signal
        // number only.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute::<usize, _>(handler) };
        f(sig);
    }
}

/// A fixed buffer for building the report without allocating; overflowing
/// bytes are dropped.
struct Line {
    buf: [u8; 320],
    len: usize,
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }

    fn dec(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn hex(&mut self, n: usize) {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        let mut n = n as u64;
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(n & 15) as usize];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        self.push(b"0x");
        self.push(&digits[i..]);
    }
}

/// Formats `snap`'s report into `line`. Separate from [`report`] so the
/// format can be tested without a signal.
fn format_report(line: &mut Line, snap: &Snapshot, addr: usize) {
    line.push(b"ferry: ");
    if snap.owned {
        line.push(b"thread ");
        line.dec(snap.id);
        if !snap.name().is_empty() {
            line.push(b" \"");
            for &b in snap.name() {
                // Names come from the program, but keep control characters
                // and quotes out of the terminal line.
                line.push(&[if b < 0x20 || b == 0x7f || b == b'"' {
                    b'?'
                } else {
                    b
                }]);
            }
            line.push(b"\"");
        }
    } else {
        line.push(b"a thread with no registered owner");
    }
    line.push(b" overflowed its ");
    if snap.size.is_multiple_of(1024) {
        line.dec((snap.size / 1024) as u64);
        line.push(b" KiB");
    } else {
        line.dec(snap.size as u64);
        line.push(b"-byte");
    }
    line.push(b" stack (fault at ");
    line.hex(addr);
    line.push(b", guard ");
    line.hex(snap.guard_lo);
    line.push(b"..");
    line.hex(snap.guard_hi);
    line.push(b")\n");
}

/// Writes the overflow report to stderr with `write(2)` only.
fn report(snap: &Snapshot, addr: usize) {
    let mut line = Line {
        buf: [0; 320],
        len: 0,
    };
    format_report(&mut line, snap, addr);
    let mut rest = &line.buf[..line.len];
    while !rest.is_empty() {
        // SAFETY: `rest` is a valid initialised buffer; write is
        // async-signal-safe.
        let n = unsafe { libc::write(libc::STDERR_FILENO, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            rest = &rest[(n as usize).min(rest.len())..];
        } else if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            break;
        }
    }
}

/// Size of the alternate signal stacks we make: room for our handler, for a
/// chained handler (Rust's, a sanitizer's) and for the kernel's signal frame
/// with the largest register state the CPU reports (`AT_MINSIGSTKSZ`).
fn signal_stack_size() -> usize {
    let min = rustix::param::linux_minsigstksz();
    let size = (64 * 1024).max(4 * min).max(libc::SIGSTKSZ);
    round_to_pages(size).unwrap_or(64 * 1024)
}

/// An alternate signal stack we installed for this kernel thread; dropped
/// (disabled, then unmapped) when the thread exits.
struct AltStack {
    map: ManuallyDrop<Mapping>,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: zero is a valid `stack_t` to be overwritten.
        let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: querying the current alternate stack; the pointer is valid.
        unsafe { libc::sigaltstack(std::ptr::null(), &mut cur) };
        if cur.ss_sp.cast::<u8>() == self.map.bottom() && cur.ss_flags & libc::SS_DISABLE == 0 {
            if cur.ss_flags & libc::SS_ONSTACK != 0 {
                // Still running on it (only possible from inside a handler):
                // leak it rather than unmap a live stack.
                return;
            }
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disables this thread's alternate stack, which is ours
            // and not in use, before its memory is unmapped below.
            unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) };
        }
        // SAFETY: the kernel no longer delivers signals onto this memory
        // (disabled above, or replaced by another stack), and `self.map` is
        // not used after this.
        unsafe { ManuallyDrop::drop(&mut self.map) };
    }
}

thread_local! {
    static ALT_STACK: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// Makes sure the calling kernel thread has an alternate signal stack, so the
/// overflow handler can run when a ferry thread overflows on it; installs the
/// handler too. A thread that already has one (Rust's `main` and
/// `std::thread`s usually do) keeps it. One we make has a guard page, is
/// at least 64 KiB (four times the kernel's `AT_MINSIGSTKSZ` on CPUs with
/// large register files), lazily committed, and is
/// freed when the thread exits. The thread layer calls this on every
/// processor's kernel thread.
pub fn ensure_signal_stack() -> io::Result<()> {
    install_overflow_handler()?;
    // SAFETY: zero is a valid `stack_t` to be overwritten.
    let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying only; the pointer is valid.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut cur) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if cur.ss_flags & libc::SS_DISABLE == 0 {
        return Ok(());
    }
    let size = signal_stack_size();
    let map = Mapping::new(size, page_size(), "signal stack")?;
    let ss = libc::stack_t {
        ss_sp: map.bottom().cast(),
        ss_flags: 0,
        ss_size: size,
    };
    // SAFETY: `ss` describes the read-write part of a mapping that lives in
    // this thread's `ALT_STACK` until the thread exits, where `AltStack::drop`
    // disables it before unmapping.
    if unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut alt = Some(AltStack {
        map: ManuallyDrop::new(map),
    });
    let _ = ALT_STACK.try_with(|cell| *cell.borrow_mut() = alt.take());
    if let Some(alt) = alt {
        // Thread-locals are being destroyed: keep the stack for the rest of
        // the thread's life rather than unmap it under the kernel.
        std::mem::forget(alt);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formatted(snap: &Snapshot, addr: usize) -> String {
        let mut line = Line {
            buf: [0; 320],
            len: 0,
        };
        format_report(&mut line, snap, addr);
        String::from_utf8(line.buf[..line.len].to_vec()).unwrap()
    }

    fn snap(owned: bool, id: u64, name: &[u8], size: usize) -> Snapshot {
        let mut bytes = [0u8; registry::NAME_CAP];
        bytes[..name.len()].copy_from_slice(name);
        Snapshot {
            guard_lo: 0x1000,
            guard_hi: 0x2000,
            size,
            owned,
            id,
            tag: 0,
            name_len: name.len(),
            name: bytes,
        }
    }

    #[test]
    fn report_names_thread_and_size() {
        assert_eq!(
            formatted(&snap(true, 42, b"worker", 256 * 1024), 0x1ff8),
            "ferry: thread 42 \"worker\" overflowed its 256 KiB stack \
             (fault at 0x1ff8, guard 0x1000..0x2000)\n"
        );
        assert_eq!(
            formatted(&snap(true, u64::MAX, b"", 1000), 0),
            "ferry: thread 18446744073709551615 overflowed its 1000-byte stack \
             (fault at 0x0, guard 0x1000..0x2000)\n"
        );
        assert!(
            formatted(&snap(false, 0, b"", 4096), 1)
                .starts_with("ferry: a thread with no registered owner overflowed its 4 KiB stack")
        );
    }

    #[test]
    fn report_defuses_control_characters_and_quotes() {
        let s = formatted(&snap(true, 1, b"a\"b\x1b[2Jc\n", 4096), 0);
        assert!(s.contains("thread 1 \"a?b?[2Jc?\""), "{s}");
        assert_eq!(s.matches('\n').count(), 1);
    }

    #[test]
    fn long_lines_are_cut_not_overrun() {
        let mut line = Line {
            buf: [0; 320],
            len: 0,
        };
        for _ in 0..100 {
            line.push(b"0123456789");
        }
        assert_eq!(line.len, 320);
    }
}
