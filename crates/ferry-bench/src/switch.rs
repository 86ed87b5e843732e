//! The `switch` experiment: nanoseconds per one-way user-level context
//! switch, in a ping-pong between two contexts on one thread, for ferry's
//! switch (`ferry::arch`), variants of it, and corosensei.
//!
//! This module owns the systems under test, the two cases and their
//! correctness checks; summarising and printing go through
//! [`crate::measure`] and [`crate::report`]. The variants of ferry's switch
//! live here, not in `ferry`: they exist only to be measured.
//!
//! ## Systems
//! * `ferry switch`: [`ferry::arch::switch`], an inlined `asm!` block that
//!   declares r12–r15 and the caller-saved registers clobbered (the compiler
//!   saves what of them is live), pushes rbx and rbp, stores MXCSR and the
//!   x87 control word, loads the incoming MXCSR and the incoming x87 control
//!   word only if it differs from the outgoing one, and continues the other
//!   context with an indirect `jmp`.
//! * `inline asm, jmp, FP control always loaded`: the same loading both
//!   words unconditionally (ferry's switch until the x87 word became
//!   conditional).
//! * `inline asm, jmp, no FP control`: the same without
//!   `stmxcsr`/`ldmxcsr` and `fnstcw`/`fldcw`: what saving the FP control
//!   words costs. corosensei does not save them either, so this is its like.
//! * `inline asm, jmp, FP control stored, not loaded`: stores both words and
//!   loads neither. Not a usable switch (a context would run with the
//!   control words of the one before it); it measures what the two stores
//!   alone cost.
//! * `inline asm, jmp, MXCSR and FCW loaded if changed`: stores both words
//!   and loads each only when it differs from the one being left (MXCSR
//!   compared on its control bits), which needs what `stmxcsr` stored read
//!   back.
//! * `inline asm, ret`: continues with `ret`, which no `call` pushed, so the
//!   return stack buffer mispredicts it every time.
//! * `naked call, ret`: a naked `extern "C"` function entered by `call` and
//!   left by `ret`, pushing all six callee-saved registers (the first
//!   version of ferry's switch); `, no FP control` and `, pop+jmp` (an
//!   indirect jump instead of `ret`) are variants of it.
//! * `corosensei`: `Coroutine::resume` and `Yielder::suspend`, a round trip
//!   of two switches passing a `u64` each way: resume is a `call` into the
//!   coroutine and suspend a `ret` out of it, so the return predictor is
//!   right both ways; it saves no FP control word.
//!
//! The variants keep `ferry::arch`'s frame layout (documented in
//! `ferry/src/arch/x86_64.rs`), so they resume contexts that
//! [`ferry::arch::prepare`] made.
//!
//! ## Cases
//! * `ping-pong`: the main loop switches to the context, whose own loop
//!   switches back: two different call sites, as between a thread and a
//!   scheduler, or two threads in different code.
//! * `ping-pong, same site`: both sides run one loop function, so every
//!   switch returns to the very instruction the other side called it from:
//!   the best case for a `ret`, and what a runtime whose threads all switch
//!   from one place (its `yield`/`block` path) sees. Not for corosensei,
//!   whose resume and suspend are different code by design.
//!
//! ## Method
//! As in `queues`: every (case, system) pair runs `--runs` times,
//! interleaved (round *k* of every pair before round *k+1*) with the order of
//! systems rotated per round, after one untimed warm-up round of a tenth of
//! the round trips. A run times N round trips (2N switches) on one thread
//! pinned to the first allowed CPU and reports elapsed / 2N. Every run
//! checks that both sides counted exactly N turns.

use std::arch::{asm, naked_asm};
use std::fmt;
use std::hint::black_box;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult};
use ferry::arch::{self, Context};

use crate::affinity;
use crate::machine::{self, CpuSnapshot};
use crate::measure::Stats;
use crate::report::{Align, Record, Table};

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "switch";

/// Round trips per run by default.
const DEFAULT_ITEMS: u64 = 2_000_000;
/// Runs per (case, system) by default.
const DEFAULT_RUNS: u32 = 7;
/// Round trips per run with `--quick`.
const QUICK_ITEMS: u64 = 200_000;
/// Runs per (case, system) with `--quick`.
const QUICK_RUNS: u32 = 5;
/// Fewest runs accepted.
const MIN_RUNS: u32 = 5;
/// Fewest round trips per run accepted.
const MIN_ITEMS: u64 = 1_000;
/// Stack size of the context under test.
const STACK_SIZE: usize = 64 * 1024;

/// Name of ferry's own switch, the first ratio baseline.
const FERRY: &str = "ferry switch";
/// Name of the corosensei system, the second ratio baseline.
const COROSENSEI: &str = "corosensei";

/// Command-line arguments of `ferry-bench switch`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Timed runs per (case, system); the median is reported (at least 5)
    /// [default: 7, or 5 with --quick]
    #[arg(long, value_parser = clap::value_parser!(u32).range(i64::from(MIN_RUNS)..))]
    pub runs: Option<u32>,

    /// Round trips (2 switches each) per run [default: 2000000, or 200000
    /// with --quick]
    #[arg(long, value_parser = clap::value_parser!(u64).range(MIN_ITEMS..))]
    pub items: Option<u64>,

    /// Fewer round trips and runs (200000, 5 runs), for a fast look; an
    /// explicit --items or --runs still wins
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON object per line per (case, system) instead of a table
    #[arg(long)]
    pub json: bool,
}

impl Args {
    fn runs(&self) -> u32 {
        self.runs
            .unwrap_or(if self.quick { QUICK_RUNS } else { DEFAULT_RUNS })
    }

    fn items(&self) -> u64 {
        self.items.unwrap_or(if self.quick {
            QUICK_ITEMS
        } else {
            DEFAULT_ITEMS
        })
    }
}

/// A run whose two sides did not take exactly the expected turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    /// Case of the failed run.
    pub case: &'static str,
    /// System of the failed run.
    pub system: &'static str,
    /// What went wrong.
    pub detail: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {}: the ping-pong went wrong: {}",
            self.case, self.system, self.detail
        )
    }
}

impl std::error::Error for VerifyError {}

/// The two cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Main's loop and the context's loop are different code.
    PingPong,
    /// Both sides run the same loop function.
    SameSite,
}

impl Case {
    const ALL: [Case; 2] = [Case::PingPong, Case::SameSite];

    fn name(self) -> &'static str {
        match self {
            Case::PingPong => "ping-pong",
            Case::SameSite => "ping-pong, same site",
        }
    }
}

// ---------------------------------------------------------------------------
// Variants of ferry's switch. Each keeps `ferry::arch`'s frame: from the saved
// stack pointer up, the FP control words (8 bytes), r15, r14, r13, r12, rbx,
// rbp, the address to continue at.

/// A naked `extern "C"` switch, entered by `call` and left by `ret`, that
/// pushes all of rbx, rbp, r12–r15 and saves the FP control words: the
/// first version of `ferry::arch::switch`.
#[unsafe(naked)]
unsafe extern "C" fn switch_naked(from: *mut Context, to: *const Context) {
    naked_asm!(
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "stmxcsr [rsp]",
        "fnstcw [rsp + 4]",
        "mov [rdi], rsp",
        "mov rsp, [rsi]",
        "ldmxcsr [rsp]",
        "fldcw [rsp + 4]",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
    )
}

/// [`switch_naked`] without the FP control words.
#[unsafe(naked)]
unsafe extern "C" fn switch_no_fp_control(from: *mut Context, to: *const Context) {
    naked_asm!(
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "mov [rdi], rsp",
        "mov rsp, [rsi]",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
    )
}

/// [`switch_naked`] continuing with `pop rcx; jmp rcx` instead of `ret`
/// (rcx is caller-saved, so free here).
#[unsafe(naked)]
unsafe extern "C" fn switch_pop_jmp(from: *mut Context, to: *const Context) {
    naked_asm!(
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "stmxcsr [rsp]",
        "fnstcw [rsp + 4]",
        "mov [rdi], rsp",
        "mov rsp, [rsi]",
        "ldmxcsr [rsp]",
        "fldcw [rsp + 4]",
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
        unsafe fn $name(from: *mut Context, to: *const Context) {
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
trait Switch {
    /// Name in the report.
    const NAME: &'static str;
    /// Saves into `from`, continues `to`.
    ///
    /// # Safety
    ///
    /// As for [`ferry::arch::switch`].
    unsafe fn switch(from: *mut Context, to: *const Context);
}

/// `ferry switch`.
struct Ferry;
/// `naked call, ret`.
struct Naked;
/// `naked call, ret, no FP control`.
struct NakedNoFp;
/// `naked call, pop+jmp`.
struct NakedPopJmp;
/// `inline asm, ret`.
struct InlineRet;
/// `inline asm, jmp, no FP control`.
struct InlineJmpNoFp;
/// `inline asm, jmp, MXCSR and FCW loaded if changed`.
struct InlineJmpFpIfChanged;
/// `inline asm, jmp, FP control always loaded`.
struct InlineJmpFpAlways;
/// `inline asm, jmp, FP control stored, not loaded`.
struct InlineJmpFpStoredOnly;

impl Switch for Ferry {
    const NAME: &'static str = FERRY;
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract.
        unsafe { arch::switch(from, to) }
    }
}

impl Switch for Naked {
    const NAME: &'static str = "naked call, ret";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_naked(from, to) }
    }
}

impl Switch for NakedNoFp {
    const NAME: &'static str = "naked call, ret, no FP control";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_no_fp_control(from, to) }
    }
}

impl Switch for NakedPopJmp {
    const NAME: &'static str = "naked call, pop+jmp";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_pop_jmp(from, to) }
    }
}

impl Switch for InlineRet {
    const NAME: &'static str = "inline asm, ret";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_inline(from, to) }
    }
}

impl Switch for InlineJmpFpIfChanged {
    const NAME: &'static str = "inline asm, jmp, MXCSR and FCW loaded if changed";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_inline_jmp_fp_if_changed(from, to) }
    }
}

impl Switch for InlineJmpFpAlways {
    const NAME: &'static str = "inline asm, jmp, FP control always loaded";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_inline_jmp_fp_always(from, to) }
    }
}

impl Switch for InlineJmpFpStoredOnly {
    const NAME: &'static str = "inline asm, jmp, FP control stored, not loaded";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        // Both sides of the experiment keep the default FP environment, so
        // not loading the control words changes nothing they compute.
        unsafe { switch_inline_jmp_fp_stored_only(from, to) }
    }
}

impl Switch for InlineJmpNoFp {
    const NAME: &'static str = "inline asm, jmp, no FP control";
    #[inline(always)]
    unsafe fn switch(from: *mut Context, to: *const Context) {
        // SAFETY: forwarded contract; same frame layout as `arch::switch`.
        unsafe { switch_inline_jmp_no_fp(from, to) }
    }
}

// ---------------------------------------------------------------------------
// The ping-pong on ferry's switches.

/// What main and the context share. Boxed, so that its address is stable;
/// accessed only through a raw pointer, by one side at a time.
struct PingPong {
    main: Context,
    other: Context,
    /// Turns taken by main.
    main_turns: u64,
    /// Turns taken by the context.
    other_turns: u64,
}

/// A 16-byte-aligned heap stack for the context under test.
struct Stack(Vec<u128>);

impl Stack {
    fn new() -> Stack {
        Stack(vec![0; STACK_SIZE / 16])
    }

    fn top(&mut self) -> *mut u8 {
        self.0.as_mut_ptr_range().end.cast()
    }
}

/// The `ping-pong` context: its own loop, forever (main abandons it).
unsafe extern "C" fn other_side<S: Switch>(arg: *mut ()) -> ! {
    let p = arg.cast::<PingPong>();
    loop {
        // SAFETY: `arg` is the run's `PingPong`, alive while main can still
        // resume us; main is suspended, so only we touch it.
        unsafe {
            (*p).other_turns += 1;
            S::switch(&raw mut (*p).other, &raw const (*p).main);
        }
    }
}

/// The `ping-pong, same site` loop, run by both sides: `n` turns of
/// "count, switch to `other`".
///
/// # Safety
///
/// `me` and `other` as for [`ferry::arch::switch`]; `turns` valid while we
/// run.
#[inline(never)]
unsafe fn bounce<S: Switch>(me: *mut Context, other: *const Context, turns: *mut u64, n: u64) {
    for _ in 0..n {
        // SAFETY: the caller's promise; one side runs at a time.
        unsafe {
            *turns += 1;
            S::switch(me, other);
        }
    }
}

/// The `ping-pong, same site` context: bounces forever (main abandons it).
unsafe extern "C" fn same_site_side<S: Switch>(arg: *mut ()) -> ! {
    let p = arg.cast::<PingPong>();
    // SAFETY: as in `other_side`.
    unsafe {
        bounce::<S>(
            &raw mut (*p).other,
            &raw const (*p).main,
            &raw mut (*p).other_turns,
            u64::MAX,
        );
    }
    // 2^64 round trips later.
    std::process::abort()
}

/// One timed run of `n` round trips on switch `S`.
fn ferry_run<S: Switch>(case: Case, n: u64) -> Result<Duration, String> {
    let mut stack = Stack::new();
    let p = Box::into_raw(Box::new(PingPong {
        main: Context::empty(),
        other: Context::empty(),
        main_turns: 0,
        other_turns: 0,
    }));
    let entry: unsafe extern "C" fn(*mut ()) -> ! = match case {
        Case::PingPong => other_side::<S>,
        Case::SameSite => same_site_side::<S>,
    };
    // SAFETY: the stack lives until after the last switch into the context
    // (it is dropped at the end of this function, after it is abandoned);
    // the entries never unwind (they loop, or abort).
    let other = unsafe { arch::prepare(stack.top(), entry, p.cast()) };
    // SAFETY: `p` is a fresh, exclusively owned allocation.
    unsafe { (*p).other = other };
    let start = Instant::now();
    match case {
        Case::PingPong => {
            for _ in 0..n {
                // SAFETY: `other` is fresh or suspended in its loop on the
                // live stack; `main` stays in place in the box.
                unsafe {
                    (*p).main_turns += 1;
                    S::switch(&raw mut (*p).main, &raw const (*p).other);
                }
            }
        }
        Case::SameSite => {
            // SAFETY: as above.
            unsafe {
                bounce::<S>(
                    &raw mut (*p).main,
                    &raw const (*p).other,
                    &raw mut (*p).main_turns,
                    n,
                );
            }
        }
    }
    let elapsed = start.elapsed();
    // SAFETY: made by `Box::into_raw` above; the context is abandoned, so
    // nothing else uses it any more.
    let p = unsafe { Box::from_raw(p) };
    drop(stack);
    if p.main_turns != n || p.other_turns != n {
        return Err(format!(
            "{n} round trips, but main took {} turns and the context {}",
            p.main_turns, p.other_turns
        ));
    }
    Ok(elapsed)
}

/// One timed run of `n` round trips through a corosensei coroutine: resume
/// with `i`, which suspends with `i + 1`.
fn corosensei_run(n: u64) -> Result<Duration, String> {
    let stack = DefaultStack::new(STACK_SIZE).map_err(|e| format!("corosensei stack: {e}"))?;
    let mut co = Coroutine::with_stack(stack, |yielder, mut x: u64| {
        loop {
            x = yielder.suspend(x + 1);
        }
    });
    let start = Instant::now();
    let mut x = 0u64;
    for i in 0..n {
        match co.resume(black_box(x)) {
            CoroutineResult::Yield(y) if y == i + 1 => x = y,
            CoroutineResult::Yield(y) => {
                return Err(format!("resume #{i} with {x} came back with {y}"));
            }
            CoroutineResult::Return(()) => return Err("the coroutine returned".to_owned()),
        }
    }
    let elapsed = start.elapsed();
    // Dropping `co` unwinds its suspended stack, outside the timed part.
    Ok(elapsed)
}

/// A system under test.
struct System {
    name: &'static str,
    /// Runs `n` round trips of a case; `None` if the system has no such case.
    run: fn(Case, u64) -> Option<Result<Duration, String>>,
}

impl System {
    fn ferry<S: Switch>() -> System {
        System {
            name: S::NAME,
            run: |case, n| Some(ferry_run::<S>(case, n)),
        }
    }

    fn corosensei() -> System {
        System {
            name: COROSENSEI,
            run: |case, n| match case {
                Case::PingPong => Some(corosensei_run(n)),
                Case::SameSite => None,
            },
        }
    }
}

/// Every system, in report order.
fn systems() -> Vec<System> {
    vec![
        System::ferry::<Ferry>(),
        System::ferry::<InlineJmpFpAlways>(),
        System::ferry::<InlineJmpNoFp>(),
        System::ferry::<InlineJmpFpStoredOnly>(),
        System::ferry::<InlineJmpFpIfChanged>(),
        System::ferry::<InlineRet>(),
        System::ferry::<Naked>(),
        System::ferry::<NakedNoFp>(),
        System::ferry::<NakedPopJmp>(),
        System::corosensei(),
    ]
}

/// Runs the experiment like [`run`], printing an error as `main` prints
/// those of the other experiments. (`main`'s dispatch `match` has the error
/// type of `queues::run`, so `switch` returns its own exit code.)
pub fn main(args: &Args) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the `switch` experiment and prints its table or JSON lines.
pub fn run(args: &Args) -> Result<(), VerifyError> {
    let runs = args.runs();
    let items = args.items();
    let cpu = affinity::allowed_cpus()
        .ok()
        .and_then(|c| c.first().copied());
    let started = Instant::now();
    let cpu_before = CpuSnapshot::now();
    let systems = systems();
    eprintln!(
        "ferry-bench switch: {runs} runs x {} cases x {} systems, {items} round trips per run, on cpu {}",
        Case::ALL.len(),
        systems.len(),
        cpu.map_or_else(|| "any".to_owned(), |c| c.to_string()),
    );
    // In a fresh thread, so that pinning does not touch the main thread.
    let samples = thread::scope(|s| {
        s.spawn(|| {
            affinity::pin_or_warn(cpu, "switch");
            measure_all(&systems, runs, items)
        })
        .join()
        .unwrap_or_else(|_| {
            Err(VerifyError {
                case: "-",
                system: "-",
                detail: "the benchmark thread panicked".to_owned(),
            })
        })
    })?;

    let mut records = Vec::new();
    for (ci, &case) in Case::ALL.iter().enumerate() {
        for (si, sys) in systems.iter().enumerate() {
            if let Some(stats) = Stats::from_samples(&samples[ci][si]) {
                records.push(Record::new(
                    EXPERIMENT,
                    case.name(),
                    sys.name,
                    &stats,
                    items,
                ));
            }
        }
    }
    if args.json {
        for r in &records {
            println!("{}", r.json_line());
        }
    } else {
        print!("{}", table(&records));
    }
    eprintln!(
        "ferry-bench switch: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    machine::report_interference("switch", cpu_before);
    Ok(())
}

/// samples[case][system] = ns per one-way switch of each timed run; empty
/// for a (case, system) pair that does not exist.
fn measure_all(
    systems: &[System],
    runs: u32,
    items: u64,
) -> Result<Vec<Vec<Vec<f64>>>, VerifyError> {
    let mut samples = vec![vec![Vec::with_capacity(runs as usize); systems.len()]; Case::ALL.len()];
    // Round 0 is an untimed warm-up on a tenth of the round trips.
    for round in 0..=runs {
        let warmup = round == 0;
        let n = if warmup { items / 10 } else { items };
        for (ci, &case) in Case::ALL.iter().enumerate() {
            for k in 0..systems.len() {
                let si = (k + round as usize) % systems.len();
                let sys = &systems[si];
                let Some(result) = (sys.run)(case, n) else {
                    continue;
                };
                let elapsed = result.map_err(|detail| VerifyError {
                    case: case.name(),
                    system: sys.name,
                    detail,
                })?;
                if !warmup {
                    samples[ci][si].push(elapsed.as_nanos() as f64 / (2 * n) as f64);
                }
            }
        }
    }
    Ok(samples)
}

/// The text table: one row per record, with ratios against ferry's switch
/// and corosensei in the same case.
fn table(records: &[Record]) -> String {
    let baseline = |case: &str, system: &str| {
        records
            .iter()
            .find(|r| r.case == case && r.system == system)
            .map(|r| r.ns_per_op)
    };
    let ratio = |x: f64, base: Option<f64>| match base {
        Some(b) if b > 0.0 => format!("{:.2}x", x / b),
        _ => "-".to_owned(),
    };
    let mut t = Table::new(&[
        ("case", Align::Left),
        ("system", Align::Left),
        ("median ns/switch", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
        ("vs ferry switch", Align::Right),
        ("vs corosensei", Align::Right),
    ]);
    for r in records {
        t.push_row(vec![
            r.case.clone(),
            r.system.clone(),
            format!("{:.2}", r.ns_per_op),
            format!("{:.2}", r.min),
            format!("{:.2}", r.max),
            ratio(r.ns_per_op, baseline(&r.case, FERRY)),
            ratio(r.ns_per_op, baseline(&r.case, COROSENSEI)),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_passes_every_case_it_has() {
        for sys in systems() {
            for case in Case::ALL {
                if let Some(r) = (sys.run)(case, 10_000) {
                    assert!(r.is_ok(), "{} / {}: {r:?}", case.name(), sys.name);
                }
            }
        }
    }

    #[test]
    fn variants_interoperate_with_ferrys_frames() {
        // A context saved by one variant is resumed by another: the frame
        // layout is shared. Each step switches with a different variant.
        let mut stack = Stack::new();
        let p = Box::into_raw(Box::new(PingPong {
            main: Context::empty(),
            other: Context::empty(),
            main_turns: 0,
            other_turns: 0,
        }));
        // SAFETY: as in `ferry_run`; the context loops with `arch::switch`.
        unsafe {
            (*p).other = arch::prepare(stack.top(), other_side::<Ferry>, p.cast());
            switch_inline(&raw mut (*p).main, &raw const (*p).other);
            switch_naked(&raw mut (*p).main, &raw const (*p).other);
            switch_inline_jmp_no_fp(&raw mut (*p).main, &raw const (*p).other);
            switch_inline_jmp_fp_if_changed(&raw mut (*p).main, &raw const (*p).other);
            switch_inline_jmp_fp_always(&raw mut (*p).main, &raw const (*p).other);
            switch_inline_jmp_fp_stored_only(&raw mut (*p).main, &raw const (*p).other);
            switch_no_fp_control(&raw mut (*p).main, &raw const (*p).other);
            switch_pop_jmp(&raw mut (*p).main, &raw const (*p).other);
            arch::switch(&raw mut (*p).main, &raw const (*p).other);
            assert_eq!((*p).other_turns, 9);
            drop(Box::from_raw(p));
        }
        drop(stack);
    }

    #[test]
    fn json_lines_carry_the_experiment_and_case() {
        let systems = systems();
        let samples = measure_all(&systems, 5, 2_000).unwrap();
        let coro = systems.iter().position(|s| s.name == COROSENSEI).unwrap();
        assert!(
            samples[1][coro].is_empty(),
            "corosensei has no same-site case"
        );
        let stats = Stats::from_samples(&samples[0][0]).unwrap();
        let line = Record::new(EXPERIMENT, Case::PingPong.name(), FERRY, &stats, 2_000).json_line();
        assert!(
            line.starts_with(
                r#"{"experiment":"switch","case":"ping-pong","system":"ferry switch","ns_per_op":"#
            ),
            "{line}"
        );
    }
}
