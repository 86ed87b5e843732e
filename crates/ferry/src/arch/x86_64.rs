//! The x86-64 (System V, Linux) context switch: an inlined `asm!` switch,
//! two naked functions (resume, first frame) and the layout of a suspended
//! context's stack frame.
//!
//! This file owns every instruction that moves `rsp` from one stack to
//! another; it must never touch anything but the callee-saved state the
//! SysV ABI lists (rbx, rbp, r12–r15, the MXCSR control bits, the x87
//! control word) — the rest, and r12–r15 when they are live, the compiler
//! saves, because the switch declares them clobbered.
//!
//! ## Frame of a suspended context
//!
//! A [`Context`] holds the stack pointer of its frame; the frame, from that
//! address upwards, is eight 8-byte words:
//!
//! | word | holds |
//! |------|-------|
//! | 0 | MXCSR (bytes 0–3), x87 control word (bytes 4–5), scratch (bytes 6–7) |
//! | 1–4 | r15, r14, r13, r12 |
//! | 5–6 | rbx, rbp |
//! | 7 | where to continue (just past the `switch`, or the trampoline) |
//!
//! Bytes 6–7 hold nothing: [`prepare`] zeroes them, [`switch`] leaves them
//! as it finds them, and [`resume`] stores the outgoing x87 control word
//! there (in the frame it is about to consume) to compare it.
//!
//! ## FP control words: always stored, MXCSR always loaded, FCW if changed
//!
//! [`switch`] stores both words of the outgoing context (`stmxcsr`,
//! `fnstcw`), loads the incoming MXCSR (`ldmxcsr`) and loads the incoming
//! x87 control word (`fldcw`) only when it differs from the outgoing one: a
//! 16-bit compare and a branch that is predicted right whenever neighbours
//! keep the same word (in practice always, as Rust code keeps the default).
//! The x87 control word has no status bits, so skipping the load of an equal
//! word changes nothing. MXCSR is not treated the same way because reading
//! back what `stmxcsr` stored is slow on the development CPU (AMD Zen 3:
//! about 1.4 ns per switch), far more than the `ldmxcsr` it would save
//! (about 0.15 ns); `stmxcsr` itself (about 3 ns) is the expensive part and
//! cannot be skipped, since a thread may have changed its MXCSR since it was
//! resumed. Numbers in the module docs of `super`.
//!
//! `ferry-bench` measures variants of [`switch`] (without the FP control
//! words, inlined, ...) that keep this layout, so that [`prepare`]'s frames
//! fit them too: change the layout and those variants together.

use core::arch::{asm, naked_asm};

use super::Context;

/// MXCSR at power-on and in a fresh process: all exceptions masked, round to
/// nearest, no flush-to-zero, no denormals-are-zero, no flags.
pub const MXCSR_DEFAULT: u32 = 0x1F80;

/// x87 control word of a fresh process (`FNINIT`): all exceptions masked,
/// 64-bit precision, round to nearest.
pub const FCW_DEFAULT: u16 = 0x037F;

/// Words in the frame that [`switch`] leaves on a suspended stack.
const FRAME_WORDS: usize = 8;

/// Word of the frame that [`switch`] pops into r12: the entry function, for a
/// fresh context.
const R12_WORD: usize = 4;

/// Word that [`switch`] pops into r13: the entry's argument, for a fresh
/// context.
const R13_WORD: usize = 3;

/// Word where [`switch`] continues.
const RETURN_WORD: usize = 7;

/// Zeroed bytes left at the very top of a fresh stack, above the first frame:
/// nothing reads them, they only make a walk that ignores CFI and overruns
/// the trampoline find zeros rather than whatever lay beyond the stack.
const TOP_PAD: usize = 16;

/// Lays out a first frame below `stack_top` that [`switch`] resumes into
/// [`trampoline`], which calls `entry(arg)`.
///
/// # Safety
///
/// `stack_top` must be the (exclusive) upper end of a writable region of at
/// least `TOP_PAD + 8 * FRAME_WORDS + 15` bytes (plus whatever `entry` needs)
/// that stays valid and otherwise unused for as long as the context runs.
pub unsafe fn prepare(
    stack_top: *mut u8,
    entry: unsafe extern "C" fn(arg: *mut ()) -> !,
    arg: *mut (),
) -> Context {
    // `frame_end` is 16-byte aligned: it is the stack pointer when the
    // trampoline starts, so its `call` leaves the entry function with
    // rsp + 8 aligned to 16, as the SysV ABI requires.
    let top = stack_top.wrapping_sub(stack_top as usize % 16);
    let frame_end = top.wrapping_sub(TOP_PAD);
    let frame = frame_end.wrapping_sub(8 * FRAME_WORDS).cast::<u64>();
    let fp_control = u64::from(MXCSR_DEFAULT) | (u64::from(FCW_DEFAULT) << 32);
    let mut words = [0u64; FRAME_WORDS];
    words[0] = fp_control;
    words[R12_WORD] = entry as *const () as u64;
    words[R13_WORD] = arg as u64;
    // rbx, rbp, r14, r15 start at zero; rbp = 0 ends frame-pointer walks.
    words[RETURN_WORD] = trampoline as *const () as u64;
    // SAFETY: by the caller's promise the `TOP_PAD + 8 * FRAME_WORDS` bytes
    // below the 16-aligned `top` (at most 15 below `stack_top`) are writable
    // and unused; `frame` is 8-aligned because `top` is 16-aligned.
    unsafe {
        frame_end.write_bytes(0, TOP_PAD);
        frame.cast::<[u64; FRAME_WORDS]>().write(words);
    }
    Context { sp: frame.cast() }
}

/// First code a fresh context runs: calls `entry(arg)` from r12 and r13,
/// which [`switch`] or [`resume`] popped from the frame [`prepare`] built.
///
/// Its call frame information says the return address is undefined, so a
/// DWARF unwinder (backtraces, panics, debuggers, `perf --call-graph dwarf`)
/// stops here instead of walking off the top of the stack. `entry` must not
/// return (its type says so); if it does anyway, `ud2` traps.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip",
        "mov rdi, r13",
        "call r12",
        "ud2",
        ".cfi_endproc",
    )
}

/// Saves rbx, rbp and the FP control words on the current stack, stores the
/// stack pointer into `*from`, loads `*to`'s, restores what is saved there
/// (the x87 control word only if it differs from the one being left; see
/// the module docs) and jumps to where `to` left off. Continues past itself
/// only when something switches back to `from`.
///
/// An `asm!` block, inlined into its caller: it declares every caller-saved
/// register and r12–r15 clobbered, so the compiler saves only those that
/// hold live values (once per function, not once per switch). rbx and rbp
/// cannot be declared clobbered, so the block saves them; it leaves the
/// frame's r12–r15 slots unwritten on save (the code resumed here treats
/// those registers as clobbered) but restores them on resume (a fresh frame
/// from [`prepare`] passes entry and argument in them).
///
/// It continues with `pop rcx; jmp rcx`, not `ret`: no `call` pushed that
/// address, so a `ret` would be mispredicted by the return stack buffer on
/// every switch; an indirect jump is predicted from the jump's history.
///
/// # Safety
///
/// See [`super::switch`]: `from` writable, `to` a suspended context whose
/// stack is still valid.
#[inline(always)]
pub unsafe fn switch(from: *mut Context, to: *const Context) {
    // SAFETY: the caller upholds `super::switch`'s contract. The block
    // leaves rsp, rbx and rbp as it found them when it is continued at `2:`
    // (it pushed them, and whoever resumes this frame pops them), declares
    // every other register it or the resumed code may change, and uses the
    // stack (no `nostack`), so the compiler keeps nothing in a red zone
    // below rsp.
    unsafe {
        asm!(
            // Save, in the frame layout of the module docs.
            "lea rax, [rip + 2f]",
            "push rax",
            "push rbp",
            "push rbx",
            "sub rsp, 40",
            "stmxcsr [rsp]",
            "fnstcw [rsp + 4]",
            // The outgoing x87 control word, to compare with the incoming.
            "movzx eax, word ptr [rsp + 4]",
            "mov [rdi], rsp",
            // Restore from `to`.
            "mov rsp, [rsi]",
            "ldmxcsr [rsp]",
            "cmp ax, [rsp + 4]",
            "je 3f",
            "fldcw [rsp + 4]",
            "3:",
            "add rsp, 8",
            "pop r15",
            "pop r14",
            "pop r13",
            "pop r12",
            "pop rbx",
            "pop rbp",
            "pop rcx",
            "jmp rcx",
            "2:",
            in("rdi") from,
            in("rsi") to,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
}

/// The restoring half of [`switch`]: continues `to` and saves nothing.
///
/// Like [`switch`], it loads the x87 control word only if it differs from
/// the live one, which it stores into the scratch bytes 6–7 of `to`'s frame
/// to compare (that frame is consumed here, and nothing else reads those
/// bytes).
///
/// # Safety
///
/// See [`super::resume`].
#[unsafe(naked)]
pub unsafe extern "C" fn resume(to: *const Context) -> ! {
    naked_asm!(
        "mov rsp, [rdi]",
        "fnstcw [rsp + 6]",
        "ldmxcsr [rsp]",
        "movzx eax, word ptr [rsp + 6]",
        "cmp ax, [rsp + 4]",
        "je 3f",
        "fldcw [rsp + 4]",
        "3:",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "pop rcx",
        "jmp rcx",
    )
}

/// The calling kernel thread's thread pointer (`%fs:0`, which the x86-64
/// TLS ABI makes the address of the thread's own control block): a value
/// no two live kernel threads share.
#[inline(always)]
pub(crate) fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: on x86-64 Linux `%fs` always addresses the thread control
    // block, whose first word points to itself.
    unsafe {
        core::arch::asm!(
            "mov {}, qword ptr fs:[0]",
            out(reg) tp,
            options(nostack, readonly, preserves_flags)
        );
    }
    tp
}

/// Raises `*count` by one if the calling kernel thread's thread pointer is
/// `*home`, and returns the count before; returns `u32::MAX` (and writes
/// nothing) if it is not. The check and the store are one block: a signal
/// handler that moves the code to another kernel thread cannot come between
/// them if it leaves the code of the function this is inlined into alone.
///
/// # Safety
/// `home` and `count` point at live words; `*count` is written only from
/// the kernel thread whose thread pointer `*home` holds, with plain stores.
#[inline(always)]
pub(crate) unsafe fn raise_on_home(home: *const usize, count: *mut u32) -> u32 {
    let before: u32;
    // SAFETY: the caller's contract: both pointers are live, and the count
    // is read and written as a plain load and store only after the thread
    // pointer matched its owner's.
    unsafe {
        core::arch::asm!(
            "mov {tp}, qword ptr fs:[0]",
            "cmp {tp}, qword ptr [{home}]",
            "jne 2f",
            "mov {before:e}, dword ptr [{count}]",
            "lea {tp:e}, [{before:r} + 1]",
            "mov dword ptr [{count}], {tp:e}",
            "jmp 3f",
            "2:",
            "mov {before:e}, -1",
            "3:",
            home = in(reg) home,
            count = in(reg) count,
            tp = out(reg) _,
            before = out(reg) before,
            options(nostack),
        );
    }
    before
}
