//! Tests of `ferry::arch`, the context switch: values survive switches
//! (integer and FP registers, the FP control words), handoff chains go
//! straight from context to context, fresh contexts start aligned and with a
//! sane FP environment, stacks hold deep recursion, panics are caught inside
//! the entry (and abort when they are not).
//!
//! Stacks here are plain heap allocations (and one `mmap`); the guarded
//! stacks of `ferry::stack` are tested there.

use std::alloc::{self, Layout};
use std::any::Any;
use std::cell::Cell;
use std::hint::black_box;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use ferry::arch::{self, Context, FCW_DEFAULT, MXCSR_DEFAULT};

// ---------------------------------------------------------------------------
// Helpers: a heap stack, an mmap'd stack, and a small fiber on top of
// `prepare`/`switch`/`resume`.

/// A stack from the global allocator, 16-byte aligned.
struct HeapStack {
    base: *mut u8,
    layout: Layout,
}

impl HeapStack {
    fn new(size: usize) -> HeapStack {
        let layout = Layout::from_size_align(size, 16).unwrap();
        // SAFETY: `size` is non-zero in every use here.
        let base = unsafe { alloc::alloc(layout) };
        assert!(!base.is_null(), "out of memory for a test stack");
        HeapStack { base, layout }
    }

    /// One past the highest byte.
    fn top(&self) -> *mut u8 {
        self.base.wrapping_add(self.layout.size())
    }
}

impl Drop for HeapStack {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.base, self.layout) }
    }
}

/// An anonymous private mapping with its lowest page made inaccessible, so an
/// overflow faults instead of corrupting the heap.
struct MmapStack {
    base: *mut u8,
    len: usize,
}

impl MmapStack {
    const PAGE: usize = 4096;

    fn new(len: usize) -> MmapStack {
        // SAFETY: an anonymous mapping at an address of the kernel's choosing
        // touches no existing memory.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap of a test stack failed");
        // SAFETY: the first page lies inside the mapping just made.
        let rc = unsafe { libc::mprotect(base, Self::PAGE, libc::PROT_NONE) };
        assert_eq!(rc, 0, "mprotect of the guard page failed");
        MmapStack {
            base: base.cast(),
            len,
        }
    }

    fn top(&self) -> *mut u8 {
        self.base.wrapping_add(self.len)
    }
}

impl Drop for MmapStack {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

type Body<'a> = Box<dyn FnOnce(&Yielder) + 'a>;

/// What a fiber and its resumer share. Only ever accessed through a raw
/// pointer, from one side at a time.
struct Inner<'a> {
    /// Where the fiber goes when it suspends or finishes.
    caller: Context,
    /// The fiber, while suspended.
    me: Context,
    body: Option<Body<'a>>,
    finished: bool,
    panic: Option<Box<dyn Any + Send>>,
}

/// A closure running on its own stack, resumed by [`Fiber::resume`] and
/// suspending itself with [`Yielder::suspend`].
struct Fiber<'a> {
    inner: *mut Inner<'a>,
    _stack_guard: Box<dyn Any>,
    _body: PhantomData<Body<'a>>,
}

/// The fiber's side: how to go back to whoever resumed it.
struct Yielder {
    inner: *mut Inner<'static>,
}

impl Yielder {
    /// Switches back to the resumer; returns when resumed again.
    fn suspend(&self) {
        // SAFETY: `inner` outlives the fiber (it is freed only after the
        // fiber finished or with its stack); `caller` was saved by the
        // `switch` in `Fiber::resume` that got us here.
        unsafe { arch::switch(&raw mut (*self.inner).me, &raw const (*self.inner).caller) }
    }
}

unsafe extern "C" fn fiber_entry(arg: *mut ()) -> ! {
    let inner = arg.cast::<Inner<'static>>();
    {
        // SAFETY: `arg` is the `Inner` that `Fiber::new` prepared us with;
        // its resumer is suspended in `switch`, so only we touch it.
        let body = unsafe { (*inner).body.take() }.expect("body runs once");
        let yielder = Yielder { inner };
        let result = panic::catch_unwind(AssertUnwindSafe(|| body(&yielder)));
        // SAFETY: as above.
        unsafe {
            (*inner).panic = result.err();
            (*inner).finished = true;
        }
    }
    // SAFETY: `caller` holds the resumer, saved by `Fiber::resume`; nothing
    // on this stack needs dropping any more (the block above ended).
    unsafe { arch::resume(&raw const (*inner).caller) }
}

impl<'a> Fiber<'a> {
    /// A fiber on a fresh heap stack of `stack_size` bytes.
    fn new(stack_size: usize, body: impl FnOnce(&Yielder) + 'a) -> Fiber<'a> {
        let stack = HeapStack::new(stack_size);
        let top = stack.top();
        Fiber::on_stack(Box::new(stack), top, body)
    }

    /// A fiber whose stack ends at `top`, inside `stack` (kept alive here).
    fn on_stack(stack: Box<dyn Any>, top: *mut u8, body: impl FnOnce(&Yielder) + 'a) -> Fiber<'a> {
        let inner = Box::into_raw(Box::new(Inner {
            caller: Context::empty(),
            me: Context::empty(),
            body: Some(Box::new(body)),
            finished: false,
            panic: None,
        }));
        // SAFETY: `top` ends a writable stack of ample size that `stack`
        // keeps alive as long as the fiber; `fiber_entry` catches panics.
        let me = unsafe { arch::prepare(top, fiber_entry, inner.cast()) };
        // SAFETY: `inner` is a fresh, exclusively owned allocation.
        unsafe { (*inner).me = me };
        Fiber {
            inner,
            _stack_guard: stack,
            _body: PhantomData,
        }
    }

    /// Runs the fiber until it suspends or finishes; true once finished.
    fn resume(&mut self) -> bool {
        assert!(!self.finished(), "resumed a finished fiber");
        // SAFETY: `me` holds the suspended (or fresh) fiber on a live stack;
        // `caller` stays in place inside `inner` while we are away.
        unsafe { arch::switch(&raw mut (*self.inner).caller, &raw const (*self.inner).me) };
        self.finished()
    }

    fn finished(&self) -> bool {
        // SAFETY: the fiber is suspended or finished, so only we touch it.
        unsafe { (*self.inner).finished }
    }

    /// The panic the body ended with, if any.
    fn take_panic(&mut self) -> Option<Box<dyn Any + Send>> {
        // SAFETY: as in `finished`.
        unsafe { (*self.inner).panic.take() }
    }

    /// Resumes until the body finishes; re-raises its panic, if any.
    fn run_to_end(mut self) {
        while !self.resume() {}
        if let Some(p) = self.take_panic() {
            panic::resume_unwind(p);
        }
    }
}

impl Drop for Fiber<'_> {
    fn drop(&mut self) {
        // An unfinished fiber's stack is freed with its frames (leaking what
        // they own); the tests finish theirs.
        // SAFETY: made by `Box::into_raw` in `on_stack`, freed only here.
        drop(unsafe { Box::from_raw(self.inner) });
    }
}

/// `switch`, entered with every callee-saved register (rbx, rbp, r12–r15)
/// set to `mark + 0..6`; returns what those registers hold when the switch
/// returns, which must be the same if the switch restored them. Independent
/// of what the compiler happens to keep in those registers (nothing, in
/// debug builds).
///
/// # Safety
///
/// As for [`arch::switch`].
unsafe fn switch_with_marked_registers(
    from: *mut Context,
    to: *const Context,
    mark: u64,
) -> [u64; 6] {
    extern "C" fn do_switch(from: *mut Context, to: *const Context) {
        // SAFETY: only called from the asm below, which forwards its
        // caller's promise.
        unsafe { arch::switch(from, to) }
    }
    let mut seen = [0u64; 6];
    // SAFETY: rbx and rbp are saved and restored around the marks; r12–r15
    // and the caller-saved registers are declared clobbered; the stack is
    // 16-byte aligned at the call (aligned on entry, four pushes/subs of 8
    // bytes); `seen` is written through a pointer kept on the stack.
    unsafe {
        std::arch::asm!(
            "push rbx",
            "push rbp",
            "push r8",
            "sub rsp, 8",
            "mov rbx, rdx",
            "lea rbp, [rdx + 1]",
            "lea r12, [rdx + 2]",
            "lea r13, [rdx + 3]",
            "lea r14, [rdx + 4]",
            "lea r15, [rdx + 5]",
            "call {switch}",
            "add rsp, 8",
            "pop rax",
            "mov [rax], rbx",
            "mov [rax + 8], rbp",
            "mov [rax + 16], r12",
            "mov [rax + 24], r13",
            "mov [rax + 32], r14",
            "mov [rax + 40], r15",
            "pop rbp",
            "pop rbx",
            switch = sym do_switch,
            in("rdi") from,
            in("rsi") to,
            in("rdx") mark,
            in("r8") seen.as_mut_ptr(),
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
    seen
}

fn marks(mark: u64) -> [u64; 6] {
    std::array::from_fn(|i| mark + i as u64)
}

fn mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: `stmxcsr` stores 4 bytes to the given, writable address.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &raw mut v, options(nostack)) };
    v
}

/// # Safety
///
/// Rust code assumes the default FP environment: only change the control
/// bits where no Rust FP arithmetic runs before they are restored.
unsafe fn set_mxcsr(v: u32) {
    // SAFETY: `ldmxcsr` loads 4 bytes from the given, readable address; the
    // caller answers for the FP environment.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &raw const v, options(nostack)) };
}

fn fcw() -> u16 {
    let mut v = 0u16;
    // SAFETY: `fnstcw` stores 2 bytes to the given, writable address.
    unsafe { std::arch::asm!("fnstcw [{}]", in(reg) &raw mut v, options(nostack)) };
    v
}

/// # Safety
///
/// As for [`set_mxcsr`], for x87 arithmetic (which Rust does not use on
/// x86-64 except for some `f128`/`long double` FFI).
unsafe fn set_fcw(v: u16) {
    // SAFETY: `fldcw` loads 2 bytes from the given, readable address; the
    // caller answers for the FP environment.
    unsafe { std::arch::asm!("fldcw [{}]", in(reg) &raw const v, options(nostack)) };
}

/// MXCSR without the six exception flags, which are status, not control.
const MXCSR_CONTROL: u32 = !0x3F;
/// MXCSR rounding control "toward zero".
const MXCSR_ROUND_TOWARD_ZERO: u32 = 0x6000;
/// x87 precision control field and "single precision" within it.
const FCW_PRECISION_MASK: u16 = 0x0300;

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn ping_pong_passes_values_both_ways_many_times() {
    const ROUNDS: u64 = 100_000;
    let cell = Cell::new(0u64);
    let mut fiber = Fiber::new(64 * 1024, |y| {
        for i in 0..ROUNDS {
            assert_eq!(cell.get(), 2 * i, "fiber saw a stale value");
            cell.set(2 * i + 1);
            y.suspend();
        }
    });
    for i in 0..ROUNDS {
        cell.set(2 * i);
        assert!(!fiber.resume(), "fiber finished early at round {i}");
        assert_eq!(cell.get(), 2 * i + 1, "main saw a stale value");
    }
    assert!(fiber.resume(), "fiber should finish after its last round");
    assert!(fiber.take_panic().is_none());
}

/// Sums `n` values derived from `seed`, with all of them live across each
/// of `switches` suspensions, so the compiler keeps some in callee-saved
/// registers and spills the rest (integer and FP alike) to the stack.
#[inline(never)]
fn busy_with_live_values(seed: u64, switches: u32, mut around: impl FnMut()) -> (u64, f64) {
    let s = black_box(seed);
    let (a, b, c, d, e, f, g, h) = (s + 1, s * 3, s ^ 5, s + 7, s * 11, s ^ 13, s + 17, s * 19);
    let (i, j, k, l) = (s.rotate_left(7), s.rotate_left(13), !s, s.wrapping_neg());
    let (fa, fb, fc, fd) = (
        s as f64 * 0.5,
        s as f64 + 0.25,
        (s as f64).sqrt(),
        1.0 / (s as f64 + 1.0),
    );
    let va = [fa, fb, fc, fd, fa * fb, fc + fd, fa - fd, fb * fc];
    let mut acc = 0u64;
    let mut facc = 0.0f64;
    for round in 0..switches {
        around();
        let r = u64::from(round);
        acc = acc
            .wrapping_add(a ^ r)
            .wrapping_add(b)
            .wrapping_add(c ^ r)
            .wrapping_add(d);
        acc = acc
            .wrapping_add(e)
            .wrapping_add(f ^ r)
            .wrapping_add(g)
            .wrapping_add(h);
        acc = acc
            .wrapping_add(i)
            .wrapping_add(j)
            .wrapping_add(k ^ r)
            .wrapping_add(l);
        facc += va.iter().sum::<f64>() + f64::from(round) * fa;
        black_box(&va);
    }
    (acc, facc)
}

#[test]
fn callee_saved_registers_and_fp_values_survive_switches() {
    const SWITCHES: u32 = 1_000;
    let expected_fiber = busy_with_live_values(0xF1BE_4000, SWITCHES, || ());
    let expected_main = busy_with_live_values(0x3A1C_0000_0007, SWITCHES, || ());
    let got_fiber = Cell::new((0, 0.0));
    let mut fiber = Fiber::new(64 * 1024, |y| {
        got_fiber.set(busy_with_live_values(0xF1BE_4000, SWITCHES, || y.suspend()));
    });
    // Main also holds live values across every resume.
    let got_main = busy_with_live_values(0x3A1C_0000_0007, SWITCHES, || {
        assert!(!fiber.resume());
    });
    assert!(fiber.resume());
    assert_eq!(got_main, expected_main);
    assert_eq!(got_fiber.get(), expected_fiber);
}

#[test]
fn every_callee_saved_register_is_restored_exactly() {
    const MAIN: u64 = 0x5A5A_0000_0000_1000;
    const FIBER: u64 = 0xC3C3_0000_0000_2000;
    let fiber_seen = Cell::new(Vec::new());
    let fiber = Fiber::new(64 * 1024, |y| {
        let mut seen = Vec::new();
        for round in 0..10 {
            let mark = FIBER + 0x100 * round;
            // SAFETY: `caller` holds the resumer, saved by `Fiber::resume`'s
            // switch; `me` stays in place in `inner`.
            seen.push(
                unsafe {
                    switch_with_marked_registers(
                        &raw mut (*y.inner).me,
                        &raw const (*y.inner).caller,
                        mark,
                    )
                } == marks(mark),
            );
        }
        fiber_seen.set(seen);
    });
    // SAFETY: as in `Fiber::resume`; the fiber is fresh.
    let first = unsafe {
        switch_with_marked_registers(
            &raw mut (*fiber.inner).caller,
            &raw const (*fiber.inner).me,
            MAIN,
        )
    };
    assert_eq!(
        first,
        marks(MAIN),
        "main's registers, after a fresh context ran"
    );
    for round in 1..=10 {
        let mark = MAIN + 0x100 * round;
        // SAFETY: as above; the fiber is suspended in its own marked switch.
        let seen = unsafe {
            switch_with_marked_registers(
                &raw mut (*fiber.inner).caller,
                &raw const (*fiber.inner).me,
                mark,
            )
        };
        assert_eq!(seen, marks(mark), "main's registers, round {round}");
    }
    assert!(fiber.finished());
    assert_eq!(
        fiber_seen.take(),
        vec![true; 10],
        "the fiber's registers, per round"
    );
}

#[test]
fn simd_values_survive_switches() {
    use std::arch::x86_64::{__m128d, _mm_add_pd, _mm_set_pd, _mm_storeu_pd};
    let out = Cell::new([0.0f64; 2]);
    let mut fiber = Fiber::new(64 * 1024, |y| {
        // SAFETY: SSE2 is part of the x86-64 baseline.
        let mut v: __m128d = unsafe { _mm_set_pd(black_box(2.0), black_box(1.0)) };
        for _ in 0..100 {
            y.suspend();
            // SAFETY: SSE2 is baseline.
            v = unsafe { _mm_add_pd(v, _mm_set_pd(2.0, 1.0)) };
        }
        let mut o = [0.0; 2];
        // SAFETY: `o` has room for two f64s.
        unsafe { _mm_storeu_pd(o.as_mut_ptr(), v) };
        out.set(o);
    });
    // SAFETY: SSE2 is baseline.
    let mut w: __m128d = unsafe { _mm_set_pd(black_box(-2.0), black_box(-1.0)) };
    while !fiber.resume() {
        // SAFETY: SSE2 is baseline.
        w = unsafe { _mm_add_pd(w, _mm_set_pd(-2.0, -1.0)) };
    }
    let mut o = [0.0; 2];
    // SAFETY: `o` has room for two f64s.
    unsafe { _mm_storeu_pd(o.as_mut_ptr(), w) };
    assert_eq!(out.get(), [101.0, 202.0]);
    assert_eq!(o, [-101.0, -202.0]);
}

#[test]
fn fp_control_words_are_per_context() {
    let main_mxcsr = mxcsr() & MXCSR_CONTROL;
    let main_fcw = fcw();
    let mut fiber = Fiber::new(64 * 1024, |y| {
        let mine = (mxcsr() & !0x6000) | MXCSR_ROUND_TOWARD_ZERO;
        let my_fcw = fcw() & !FCW_PRECISION_MASK;
        // SAFETY: no FP arithmetic runs in this fiber until they are restored
        // (the asserts compare integers).
        unsafe {
            set_mxcsr(mine);
            set_fcw(my_fcw);
        }
        for _ in 0..3 {
            y.suspend();
            assert_eq!(
                mxcsr() & MXCSR_CONTROL,
                mine & MXCSR_CONTROL,
                "fiber lost its MXCSR"
            );
            assert_eq!(fcw(), my_fcw, "fiber lost its x87 control word");
        }
        // SAFETY: back to the defaults.
        unsafe {
            set_mxcsr(MXCSR_DEFAULT);
            set_fcw(FCW_DEFAULT);
        }
    });
    while !fiber.resume() {
        assert_eq!(
            mxcsr() & MXCSR_CONTROL,
            main_mxcsr,
            "fiber's MXCSR leaked into main"
        );
        assert_eq!(fcw(), main_fcw, "fiber's x87 control word leaked into main");
    }
    if let Some(p) = fiber.take_panic() {
        panic::resume_unwind(p);
    }
}

#[test]
fn fresh_context_starts_with_default_fp_control_words() {
    let seen = Cell::new((0u32, 0u16));
    let fiber = Fiber::new(64 * 1024, |_| seen.set((mxcsr(), fcw())));
    let saved = (mxcsr(), fcw());
    // SAFETY: no FP arithmetic runs on this thread until they are restored
    // (resuming a fiber is integer code; the fiber only reads them).
    unsafe {
        set_mxcsr(MXCSR_DEFAULT | MXCSR_ROUND_TOWARD_ZERO | 0x8040); // + FTZ, DAZ
        set_fcw(FCW_DEFAULT & !FCW_PRECISION_MASK);
    }
    fiber.run_to_end();
    // SAFETY: restores what this thread had.
    unsafe {
        set_mxcsr(saved.0);
        set_fcw(saved.1);
    }
    assert_eq!(seen.get(), (MXCSR_DEFAULT, FCW_DEFAULT));
}

/// A context's FP control words: MXCSR control bits (flags masked off) and
/// the x87 control word.
type FpEnv = (u32, u16);

/// MXCSR flush-to-zero and denormals-are-zero.
const MXCSR_FTZ: u32 = 0x8000;
const MXCSR_DAZ: u32 = 0x0040;
/// x87 rounding control "toward zero", and the "53-bit" precision.
const FCW_ROUND_TOWARD_ZERO: u16 = 0x0C00;
const FCW_DOUBLE_PRECISION: u16 = 0x0200;

const DEFAULT_ENV: FpEnv = (MXCSR_DEFAULT, FCW_DEFAULT);
/// Both words non-default: round toward zero and FTZ in MXCSR; single
/// precision, round toward zero in the x87 word.
const ODD_ENV: FpEnv = (
    MXCSR_DEFAULT | MXCSR_ROUND_TOWARD_ZERO | MXCSR_FTZ,
    (FCW_DEFAULT & !FCW_PRECISION_MASK) | FCW_ROUND_TOWARD_ZERO,
);
/// Non-default, and different from [`ODD_ENV`] in both words.
const OTHER_ENV: FpEnv = (
    MXCSR_DEFAULT | MXCSR_DAZ,
    (FCW_DEFAULT & !FCW_PRECISION_MASK) | FCW_DOUBLE_PRECISION,
);

/// The running context's [`FpEnv`].
fn fp_env() -> FpEnv {
    (mxcsr() & MXCSR_CONTROL, fcw())
}

/// Loads an [`FpEnv`] into the running context.
///
/// # Safety
///
/// As for [`set_mxcsr`] and [`set_fcw`].
unsafe fn set_fp_env(env: FpEnv) {
    // SAFETY: the caller's promise.
    unsafe {
        set_mxcsr(env.0);
        set_fcw(env.1);
    }
}

/// Gives the running context an [`FpEnv`] until dropped (also by a failing
/// assert's unwind), then restores what it had.
struct FpEnvGuard(u32, u16);

impl FpEnvGuard {
    /// # Safety
    ///
    /// As for [`set_mxcsr`] and [`set_fcw`], while the guard lives.
    unsafe fn set(env: FpEnv) -> FpEnvGuard {
        let guard = FpEnvGuard(mxcsr(), fcw());
        // SAFETY: the caller's promise.
        unsafe { set_fp_env(env) };
        guard
    }
}

impl Drop for FpEnvGuard {
    fn drop(&mut self) {
        // SAFETY: restores what the context had before `set`.
        unsafe {
            set_mxcsr(self.0);
            set_fcw(self.1);
        }
    }
}

/// Main runs with `main_env`, a fiber with `fiber_envs[round]` (loaded
/// before its `round`th suspension); after every switch each side must see
/// its own words. The fiber finishes (by `resume`) with its last words still
/// loaded, and main must see its own after that too.
fn fp_envs_stay_per_context(main_env: FpEnv, fiber_envs: &[FpEnv]) {
    let rounds = fiber_envs.len();
    let mut fiber = Fiber::new(64 * 1024, |y| {
        assert_eq!(
            fp_env(),
            DEFAULT_ENV,
            "a fresh context starts with defaults"
        );
        for (round, &env) in fiber_envs.iter().enumerate() {
            // SAFETY: until the fiber ends, it runs only integer code
            // (switches, compares, the panic path of a failing assert).
            unsafe { set_fp_env(env) };
            y.suspend();
            assert_eq!(fp_env(), env, "the fiber's words after switch {round}");
        }
    });
    // SAFETY: while it lives, main runs only integer code (switches,
    // compares); it restores the old words when the test ends or fails.
    let _main = unsafe { FpEnvGuard::set(main_env) };
    let mut switches = 0;
    while !fiber.resume() {
        assert_eq!(fp_env(), main_env, "main's words after switch {switches}");
        switches += 1;
    }
    if let Some(p) = fiber.take_panic() {
        panic::resume_unwind(p);
    }
    assert_eq!(switches, rounds);
    assert_eq!(
        fp_env(),
        main_env,
        "main's words after the fiber finished with `resume`"
    );
}

#[test]
fn non_default_fp_control_words_stay_in_their_context() {
    fp_envs_stay_per_context(DEFAULT_ENV, &[ODD_ENV; 6]);
    fp_envs_stay_per_context(ODD_ENV, &[DEFAULT_ENV; 6]);
    fp_envs_stay_per_context(ODD_ENV, &[OTHER_ENV; 6]);
}

#[test]
fn equal_non_default_fp_control_words_survive_switches_and_changes() {
    fp_envs_stay_per_context(ODD_ENV, &[ODD_ENV; 6]);
    // Equal for a while (nothing loaded), then the fiber changes its words
    // (and changes them back): main keeps its own throughout.
    fp_envs_stay_per_context(
        ODD_ENV,
        &[
            ODD_ENV,
            ODD_ENV,
            OTHER_ENV,
            OTHER_ENV,
            ODD_ENV,
            DEFAULT_ENV,
            ODD_ENV,
        ],
    );
}

#[test]
fn fp_control_words_differing_in_one_word_only_stay_per_context() {
    // Only the x87 word differs.
    let x87_only = (ODD_ENV.0, OTHER_ENV.1);
    fp_envs_stay_per_context(ODD_ENV, &[x87_only; 6]);
    fp_envs_stay_per_context(DEFAULT_ENV, &[(MXCSR_DEFAULT, ODD_ENV.1); 6]);
    // Only MXCSR differs: the x87 word matches, MXCSR must still be loaded.
    let mxcsr_only = (OTHER_ENV.0, ODD_ENV.1);
    fp_envs_stay_per_context(ODD_ENV, &[mxcsr_only; 6]);
    fp_envs_stay_per_context(DEFAULT_ENV, &[(ODD_ENV.0, FCW_DEFAULT); 6]);
    // Alternating between the two kinds of difference.
    fp_envs_stay_per_context(
        ODD_ENV,
        &[
            x87_only, mxcsr_only, x87_only, mxcsr_only, ODD_ENV, x87_only,
        ],
    );
}

/// Ring members for the handoff chain: context `i` hands off to `i % 3 + 1`.
struct Ring {
    /// 0 is the test's own context, 1..=3 are A, B, C.
    contexts: [Context; 4],
    /// Hand-offs left before A returns to the test.
    remaining: Cell<u32>,
    /// (member, that member's own turn count) in the order they ran.
    log: std::cell::RefCell<Vec<(usize, u32)>>,
}

struct Member {
    ring: *const Ring,
    id: usize,
}

unsafe extern "C" fn ring_entry(arg: *mut ()) -> ! {
    // SAFETY: `arg` is a `Member` that outlives the ring's run.
    let member = unsafe { &*arg.cast::<Member>() };
    let ring = member.ring;
    let mut turn = 0u32; // lives on this member's own stack
    loop {
        // SAFETY: the ring outlives its members' runs; one context runs at a
        // time, so the shared fields are not accessed concurrently.
        let r = unsafe { &*ring };
        r.log.borrow_mut().push((member.id, turn));
        turn += 1;
        if r.remaining.get() == 0 {
            // SAFETY: context 0 was saved by the test's `switch`.
            unsafe { arch::resume(&raw const (*ring).contexts[0]) }
        }
        r.remaining.set(r.remaining.get() - 1);
        let next = member.id % 3 + 1;
        // SAFETY: `contexts` is only touched by the running context; `next`
        // is suspended (or fresh) on a live stack. The pointers come from
        // the raw `ring`, so no reference is held across the switch.
        unsafe {
            let contexts = (&raw const (*ring).contexts).cast_mut().cast::<Context>();
            arch::switch(contexts.add(member.id), contexts.add(next));
        }
    }
}

#[test]
fn handoff_chain_a_b_c_a_goes_directly() {
    const HANDOFFS: u32 = 3 * 1000 + 1;
    let stacks: Vec<HeapStack> = (0..3).map(|_| HeapStack::new(32 * 1024)).collect();
    let ring = std::cell::UnsafeCell::new(Ring {
        contexts: [
            Context::empty(),
            Context::empty(),
            Context::empty(),
            Context::empty(),
        ],
        remaining: Cell::new(HANDOFFS),
        log: std::cell::RefCell::new(Vec::new()),
    });
    let ring_ptr = ring.get();
    let mut members: Vec<Member> = (1..=3).map(|id| Member { ring: ring_ptr, id }).collect();
    for (i, m) in members.iter_mut().enumerate() {
        // SAFETY: each stack is live for the whole test and used only by its
        // member; `ring_entry` never unwinds (its `extern "C"` aborts).
        let ctx = unsafe { arch::prepare(stacks[i].top(), ring_entry, (m as *mut Member).cast()) };
        // SAFETY: nothing runs on the ring yet.
        unsafe { (*ring_ptr).contexts[i + 1] = ctx };
    }
    // SAFETY: context 1 (A) is fresh; context 0 stays in place in `ring`.
    unsafe {
        let contexts = (&raw mut (*ring_ptr).contexts).cast::<Context>();
        arch::switch(contexts, contexts.add(1));
    }
    let log = ring.into_inner().log.into_inner();
    assert_eq!(log.len() as u32, HANDOFFS + 1);
    for (n, &(id, turn)) in log.iter().enumerate() {
        assert_eq!(
            id,
            n % 3 + 1,
            "entry {n}: wrong member ran (not a direct A->B->C->A handoff)"
        );
        assert_eq!(
            turn as usize,
            n / 3,
            "entry {n}: member {id} lost its own state"
        );
    }
    assert_eq!(log.last().unwrap().0, 2, "3001 hand-offs from A end at B");
    drop(members);
}

/// Entry that records `rsp` as the entry function sees it: the naked shim
/// passes its `rsp` on as the second argument and tail-jumps, so `check`
/// runs with exactly the stack the trampoline's call gave the entry.
#[unsafe(naked)]
unsafe extern "C" fn alignment_entry(_arg: *mut ()) -> ! {
    core::arch::naked_asm!("mov rsi, rsp", "jmp {check}", check = sym alignment_check)
}

/// What [`alignment_check`] shares with its test.
#[repr(C)]
struct AlignmentSlots {
    /// 0: the test, 1: the context under test.
    contexts: [Context; 2],
    /// `rsp` on entry to the entry function.
    rsp: usize,
}

unsafe extern "C" fn alignment_check(arg: *mut (), rsp: usize) -> ! {
    let slots = arg.cast::<AlignmentSlots>();
    // SAFETY: `arg` is the test's `AlignmentSlots`, which stays in place
    // while the test is suspended; only this context touches it now, and
    // `contexts[0]` holds the test, saved by its `switch`.
    unsafe {
        (*slots).rsp = rsp;
        arch::resume(&raw const (*slots).contexts[0])
    }
}

#[test]
fn entry_starts_with_sysv_alignment_whatever_the_top() {
    let stack = HeapStack::new(16 * 1024);
    for misalign in 0..16 {
        let mut slots = AlignmentSlots {
            contexts: [Context::empty(), Context::empty()],
            rsp: 0,
        };
        let top = stack.top().wrapping_sub(misalign);
        let slots_ptr: *mut AlignmentSlots = &mut slots;
        // SAFETY: `top` lies inside `stack`, which has ample room;
        // `alignment_entry` never unwinds.
        let ctx = unsafe { arch::prepare(top, alignment_entry, slots_ptr.cast()) };
        // SAFETY: `ctx` is fresh; `slots` stays in place until it resumes us.
        unsafe {
            (*slots_ptr).contexts[1] = ctx;
            let contexts = (&raw mut (*slots_ptr).contexts).cast::<Context>();
            arch::switch(contexts, contexts.add(1));
        }
        let rsp = slots.rsp;
        assert_eq!(
            rsp % 16,
            8,
            "top - {misalign}: entry saw rsp {rsp:#x}, not 8 mod 16"
        );
        assert!(
            rsp < top as usize && rsp >= top as usize - arch::PREPARE_BYTES,
            "rsp {rsp:#x} outside the prepared frame"
        );
        // The return address on the stack is in the trampoline, never 0 or
        // into the test's own stack.
        // SAFETY: `rsp` points into `stack`, at the word the call pushed.
        let ret = unsafe { *(rsp as *const usize) };
        assert_ne!(ret, 0);
    }
}

#[test]
fn a_context_runs_on_an_mmapped_stack_with_deep_recursion() {
    /// Recursion with a frame the optimiser cannot remove; suspends at the
    /// bottom, so the whole depth stays live across a switch.
    #[inline(never)]
    fn descend(n: u32, y: &Yielder) -> u64 {
        let frame = [u64::from(n); 16];
        black_box(&frame);
        if n == 0 {
            y.suspend();
            return 0;
        }
        descend(n - 1, y) + frame[7]
    }
    const DEPTH: u32 = 10_000;
    let stack = MmapStack::new(8 * 1024 * 1024);
    let top = stack.top();
    let low = stack.base as usize;
    let result = Cell::new(0u64);
    let local_at = Cell::new(0usize);
    let mut fiber = Fiber::on_stack(Box::new(stack), top, |y| {
        result.set(descend(DEPTH, y));
        let here = 0u8;
        local_at.set(black_box(&here) as *const u8 as usize);
    });
    assert!(!fiber.resume(), "fiber should be suspended at the bottom");
    assert!(fiber.resume());
    assert_eq!(result.get(), u64::from(DEPTH) * u64::from(DEPTH + 1) / 2);
    let at = local_at.get();
    assert!(
        at > low && at < top as usize,
        "fiber did not run on the mmap'd stack"
    );
}

#[test]
fn deep_recursion_in_the_fiber_uses_its_own_stack() {
    #[inline(never)]
    fn depth_reached(n: u32) -> usize {
        let frame = [0u8; 256];
        black_box(&frame);
        if n == 0 {
            return frame.as_ptr() as usize;
        }
        depth_reached(n - 1).min(frame.as_ptr() as usize)
    }
    let stack = HeapStack::new(4 * 1024 * 1024);
    let (low, top) = (stack.base as usize, stack.top());
    let lowest = Cell::new(0usize);
    Fiber::on_stack(Box::new(stack), top, |_| lowest.set(depth_reached(5_000))).run_to_end();
    let used = top as usize - lowest.get();
    assert!(lowest.get() > low, "recursion ran below its stack");
    assert!(
        used > 5_000 * 256,
        "5000 frames of 256 bytes used only {used} bytes of this stack"
    );
}

#[test]
fn a_panic_caught_inside_the_entry_comes_back_as_a_value() {
    let mut fiber = Fiber::new(64 * 1024, |y| {
        y.suspend();
        panic!("boom inside a context");
    });
    assert!(!fiber.resume());
    assert!(fiber.resume(), "the panic should have finished the body");
    let p = fiber.take_panic().expect("the entry catches the panic");
    assert_eq!(p.downcast_ref::<&str>(), Some(&"boom inside a context"));
    // The test's own context is intact after the unwind on the other stack.
    let again = Cell::new(false);
    Fiber::new(64 * 1024, |_| again.set(true)).run_to_end();
    assert!(again.get());
}

#[test]
fn a_backtrace_inside_a_context_stops_at_its_trampoline() {
    #[inline(never)]
    fn marker_inside_the_context() -> String {
        std::backtrace::Backtrace::force_capture().to_string()
    }
    let trace = std::cell::RefCell::new(String::new());
    Fiber::new(1024 * 1024, |_| {
        *trace.borrow_mut() = marker_inside_the_context()
    })
    .run_to_end();
    let trace = trace.into_inner();
    let frames: Vec<&str> = trace
        .lines()
        .map(str::trim_start)
        .filter(|l| {
            l.split_once(": ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .collect();
    assert!(frames[0].contains("marker_inside_the_context"), "{trace}");
    assert!(
        frames.last().unwrap().contains("trampoline"),
        "the walk did not end at the context's first frame:\n{trace}"
    );
    for creator_frame in [
        "test::run_test",
        "lang_start",
        "__rust_begin_short_backtrace",
    ] {
        assert!(
            !trace.contains(creator_frame),
            "the walk went past the context's first frame into the creator's stack:\n{trace}"
        );
    }
}

const CHILD_ENV: &str = "FERRY_ARCH_TEST_ESCAPING_PANIC";

unsafe extern "C" fn escaping_entry(_arg: *mut ()) -> ! {
    panic!("escapes the entry function");
}

/// Runs only as the child of [`a_panic_escaping_the_entry_aborts`].
#[test]
fn escaping_panic_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let stack = HeapStack::new(64 * 1024);
    let mut here = Context::empty();
    // SAFETY: the stack is live for the rest of the process (which aborts).
    let ctx = unsafe { arch::prepare(stack.top(), escaping_entry, ptr::null_mut()) };
    // SAFETY: `ctx` is fresh; `here` stays in place.
    unsafe { arch::switch(&mut here, &ctx) };
    unreachable!("the escaping panic must abort, not come back");
}

#[test]
fn a_panic_escaping_the_entry_aborts() {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "escaping_panic_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "status {:?}, stderr:\n{stderr}",
        out.status
    );
    assert!(stderr.contains("escapes the entry function"), "{stderr}");
}
