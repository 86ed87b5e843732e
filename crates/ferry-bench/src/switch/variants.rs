//! The variants of ferry's context switch that the `switch` experiment
//! measures beside `ferry::arch::switch`: naked functions and `asm!`
//! blocks that differ in how they continue (`ret`, `jmp`) and in what they
//! do with the FP control words, each behind the [`Switch`] trait so the
//! ping-pong loops are monomorphised per variant.
//!
//! This module owns the variants only; they exist to be measured and are
//! not part of `ferry`. Every variant keeps `ferry::arch`'s frame layout
//! (documented in `ferry/src/arch/x86_64.rs`), so it resumes contexts that
//! [`ferry::arch::prepare`] made and any other variant saved.

use std::arch::{asm, naked_asm};

use ferry::arch::{self, Context};

// `ferry::arch`'s frame, which every variant keeps: from the saved stack
// pointer up, the FP control words (8 bytes), r15, r14, r13, r12, rbx,
// rbp, the address to continue at.

/// Defines a naked `extern "C"` switch, entered by `call`, that pushes all
/// of rbx, rbp, r12–r15 and continues the other context with `$go`;
/// `$save` and `$load` are the FP-control instructions (or nothing).
macro_rules! naked_switch {
    ($(#[$doc:meta])* $name:ident, [$($save:literal),*], [$($load:literal),*], [$($go:literal),+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As for [`ferry::arch::switch`].
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name(from: *mut Context, to: *const Context) {
            naked_asm!(
                "push rbp",
                "push rbx",
                "push r12",
                "push r13",
                "push r14",
                "push r15",
                "sub rsp, 8",
                $($save,)*
                "mov [rdi], rsp",
                "mov rsp, [rsi]",
                $($load,)*
                "add rsp, 8",
                "pop r15",
                "pop r14",
                "pop r13",
                "pop r12",
                "pop rbx",
                "pop rbp",
                $($go,)+
            )
        }
    };
}

naked_switch!(
    /// A naked switch left by `ret` that saves the FP control words.
    switch_naked,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]"],
    ["ldmxcsr [rsp]", "fldcw [rsp + 4]"],
    ["ret"]
);

naked_switch!(
    /// [`switch_naked`] without the FP control words.
    switch_no_fp_control,
    [],
    [],
    ["ret"]
);

naked_switch!(
    /// [`switch_naked`] continuing with `pop rcx; jmp rcx` instead of `ret`
    /// (rcx is caller-saved, so free here).
    switch_pop_jmp,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]"],
    ["ldmxcsr [rsp]", "fldcw [rsp + 4]"],
    ["pop rcx", "jmp rcx"]
);

/// Defines an `asm!`-block switch: r12–r15 and the caller-saved registers
/// are declared clobbered, so the compiler saves what of them is live;
/// their slots in the frame are skipped on save (whatever is there is
/// restored into registers the compiler considers clobbered) and restored
/// from on resume (a context saved by the naked switch needs them). `$save`
/// and `$load` are the FP-control instructions (or nothing), `$go` how to
/// continue at the popped address (`ret`, or `pop rcx; jmp rcx`).
macro_rules! inline_switch {
    ($(#[$doc:meta])* $name:ident, [$($save:literal),*], [$($load:literal),*], [$($go:literal),+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As for [`ferry::arch::switch`].
        #[inline(always)]
        pub unsafe fn $name(from: *mut Context, to: *const Context) {
            // SAFETY: the caller upholds `ferry::arch::switch`'s contract;
            // the block leaves rsp, rbx and rbp as it found them when it is
            // resumed at `2:`, declares every other register it or the
            // resumed side may change, and may use the stack (no
            // `nostack`), so nothing lives in a red zone.
            unsafe {
                asm!(
                    "lea rax, [rip + 2f]",
                    "push rax",
                    "push rbp",
                    "push rbx",
                    "sub rsp, 40",
                    $($save,)*
                    "mov [rdi], rsp",
                    "mov rsp, [rsi]",
                    $($load,)*
                    "add rsp, 8",
                    "pop r15",
                    "pop r14",
                    "pop r13",
                    "pop r12",
                    "pop rbx",
                    "pop rbp",
                    $($go,)+
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
    };
}

inline_switch!(
    /// Inline switch continuing with `ret` (which no `call` pushed, so the
    /// return stack buffer mispredicts it every time).
    switch_inline,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]"],
    ["ldmxcsr [rsp]", "fldcw [rsp + 4]"],
    ["ret"]
);

inline_switch!(
    /// `ferry::arch::switch` loading each FP control word only when it
    /// differs from the one being left (rax keeps the outgoing frame). MXCSR
    /// is compared on its control bits (6–31): its exception flags, which
    /// the ABI does not preserve, do not force a load.
    switch_inline_jmp_fp_if_changed,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]", "mov rax, rsp"],
    [
        "mov ecx, [rsp]",
        "xor ecx, [rax]",
        "test ecx, -64",
        "jz 3f",
        "ldmxcsr [rsp]",
        "3:",
        "movzx ecx, word ptr [rsp + 4]",
        "cmp cx, [rax + 4]",
        "je 4f",
        "fldcw [rsp + 4]",
        "4:"
    ],
    ["pop rcx", "jmp rcx"]
);

inline_switch!(
    /// `ferry::arch::switch` loading both FP control words unconditionally.
    switch_inline_jmp_fp_always,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]"],
    ["ldmxcsr [rsp]", "fldcw [rsp + 4]"],
    ["pop rcx", "jmp rcx"]
);

inline_switch!(
    /// `ferry::arch::switch` storing the FP control words and loading
    /// neither: not a correct switch, a measure of what the stores cost.
    switch_inline_jmp_fp_stored_only,
    ["stmxcsr [rsp]", "fnstcw [rsp + 4]"],
    [],
    ["pop rcx", "jmp rcx"]
);

inline_switch!(
    /// `ferry::arch::switch` without the FP control words.
    switch_inline_jmp_no_fp,
    [],
    [],
    ["pop rcx", "jmp rcx"]
);

/// One of ferry's switches, as a type so the loops are monomorphised.
pub trait Switch {
    /// Name in the report.
    const NAME: &'static str;
    /// Saves into `from`, continues `to`.
    ///
    /// # Safety
    ///
    /// As for [`ferry::arch::switch`].
    unsafe fn switch(from: *mut Context, to: *const Context);
}

/// Defines a marker type per switch and its [`Switch`] impl forwarding to
/// the switch function.
macro_rules! switches {
    ($($(#[$doc:meta])* $ty:ident, $name:expr, $f:path;)*) => {$(
        $(#[$doc])*
        pub struct $ty;

        impl Switch for $ty {
            const NAME: &'static str = $name;
            #[inline(always)]
            unsafe fn switch(from: *mut Context, to: *const Context) {
                // SAFETY: forwarded contract; every variant keeps
                // `arch::switch`'s frame layout. Both sides of the
                // experiment keep the default FP environment, so a variant
                // that does not load the control words changes nothing
                // they compute.
                unsafe { $f(from, to) }
            }
        }
    )*};
}

/// Name of ferry's own switch, the first ratio baseline.
pub const FERRY: &str = "ferry switch";

switches! {
    /// `ferry switch`: `ferry::arch::switch`.
    Ferry, FERRY, arch::switch;
    /// `naked call, ret`.
    Naked, "naked call, ret", switch_naked;
    /// `naked call, ret, no FP control`.
    NakedNoFp, "naked call, ret, no FP control", switch_no_fp_control;
    /// `naked call, pop+jmp`.
    NakedPopJmp, "naked call, pop+jmp", switch_pop_jmp;
    /// `inline asm, ret`.
    InlineRet, "inline asm, ret", switch_inline;
    /// `inline asm, jmp, no FP control`.
    InlineJmpNoFp, "inline asm, jmp, no FP control", switch_inline_jmp_no_fp;
    /// `inline asm, jmp, MXCSR and FCW loaded if changed`.
    InlineJmpFpIfChanged, "inline asm, jmp, MXCSR and FCW loaded if changed", switch_inline_jmp_fp_if_changed;
    /// `inline asm, jmp, FP control always loaded`.
    InlineJmpFpAlways, "inline asm, jmp, FP control always loaded", switch_inline_jmp_fp_always;
    /// `inline asm, jmp, FP control stored, not loaded`.
    InlineJmpFpStoredOnly, "inline asm, jmp, FP control stored, not loaded", switch_inline_jmp_fp_stored_only;
}
