//! The `switch` experiment: nanoseconds per one-way user-level context
//! switch, in a ping-pong between two contexts on one thread, for ferry's
//! switch (`ferry::arch`), variants of it, and corosensei.
//!
//! This module owns the two cases, the ping-pong loops and their
//! correctness checks, and the run schedule; the variants of ferry's switch
//! are [`variants`]' (they exist only to be measured, so they are not in
//! `ferry`), corosensei's loop is [`crate::peers::corosensei`]'s.
//!
//! ## Systems
//! * `ferry switch`: [`ferry::arch::switch`], an inlined `asm!` block that
//!   declares r12–r15 and the caller-saved registers clobbered (the compiler
//!   saves what of them is live), pushes rbx and rbp, stores MXCSR and the
//!   x87 control word, loads the incoming MXCSR and the incoming x87 control
//!   word only if it differs from the outgoing one, and continues the other
//!   context with an indirect `jmp`.
//! * `inline asm, jmp, FP control always loaded`: the same loading both
//!   words unconditionally.
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
//!   left by `ret`, pushing all six callee-saved registers; `, no FP
//!   control` and `, pop+jmp` (an
//!   indirect jump instead of `ret`) are variants of it.
//! * `corosensei`: `Coroutine::resume` and `Yielder::suspend`, a round trip
//!   of two switches passing a `u64` each way: resume is a `call` into the
//!   coroutine and suspend a `ret` out of it, so the return predictor is
//!   right both ways; it saves no FP control word.
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

use std::thread;
use std::time::{Duration, Instant};

use ferry::arch::{self, Context};

use crate::affinity;
use crate::common::{Common, MEDIAN_OF_FIVE};
use crate::measure;
use crate::peers::corosensei;
use crate::report::{Error, Ratio, Report, Section};
use crate::row::{Row, Unit};

pub mod variants;

use variants::*;

/// Name of this experiment in JSON records.
const EXPERIMENT: &str = "switch";

/// Stack size of the context under test.
const STACK_SIZE: usize = 64 * 1024;

/// Command-line arguments of `ferry-bench switch`.
pub use crate::common::Counted as Args;

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

impl PingPong {
    /// A fresh one on the heap, owned by the returned pointer (freed with
    /// `Box::from_raw`).
    fn boxed() -> *mut PingPong {
        Box::into_raw(Box::new(PingPong {
            main: Context::empty(),
            other: Context::empty(),
            main_turns: 0,
            other_turns: 0,
        }))
    }
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
    let p = PingPong::boxed();
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
    // SAFETY: made by `PingPong::boxed` above; the context is abandoned, so
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
            name: corosensei::NAME,
            run: |case, n| match case {
                Case::PingPong => Some(corosensei::round_trips(n, STACK_SIZE)),
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

/// Runs the experiment: a row per (case, system) that exists, with ratios
/// to ferry's switch and to corosensei in the same case. An error if a
/// ping-pong lost a turn.
pub fn run(common: &Common, args: &Args) -> Result<Report, Error> {
    let runs = common.runs(MEDIAN_OF_FIVE)?;
    let items = common.items(args)?;
    let cpu = affinity::first_allowed();
    let systems = systems();
    eprintln!(
        "ferry-bench switch: {runs} runs x {} cases x {} systems, {items} round trips per run, on cpu {}",
        Case::ALL.len(),
        systems.len(),
        affinity::name(cpu),
    );
    // In a fresh thread, so that pinning does not touch the main thread.
    let mut samples = thread::scope(|s| {
        s.spawn(|| {
            affinity::pin_or_warn(cpu, "switch");
            measure_all(&systems, runs, items)
        })
        .join()
        .unwrap_or_else(|_| Err(Error("the benchmark thread panicked".to_owned())))
    })?;

    let mut rows = Vec::new();
    for (ci, &case) in Case::ALL.iter().enumerate() {
        for (si, sys) in systems.iter().enumerate() {
            let s = std::mem::take(&mut samples[ci][si]);
            if !s.is_empty() {
                rows.push(Row::new(
                    EXPERIMENT,
                    case.name(),
                    sys.name,
                    Unit::Ns,
                    s,
                    items,
                ));
            }
        }
    }
    let section = Section {
        rows,
        ratios: vec![
            Ratio::to_system("vs ferry switch", FERRY),
            Ratio::to_system("vs corosensei", corosensei::NAME),
        ],
        ..Section::default()
    };
    Ok(Report::single(EXPERIMENT, section))
}

/// `samples[case][system]` = ns per one-way switch of each timed run; empty
/// for a (case, system) pair that does not exist.
fn measure_all(systems: &[System], runs: u32, items: u64) -> Result<Vec<Vec<Vec<f64>>>, Error> {
    let mut samples = vec![vec![Vec::with_capacity(runs as usize); systems.len()]; Case::ALL.len()];
    // Round 0 is an untimed warm-up on a tenth of the round trips.
    measure::interleaved(runs, Case::ALL.len(), systems.len(), |turn| {
        let (case, sys) = (Case::ALL[turn.case], &systems[turn.system]);
        let n = if turn.warmup() { items / 10 } else { items };
        let Some(result) = (sys.run)(case, n) else {
            return Ok(());
        };
        let elapsed = result.map_err(|detail| {
            Error(format!(
                "{} / {}: the ping-pong went wrong: {detail}",
                case.name(),
                sys.name
            ))
        })?;
        if !turn.warmup() {
            samples[turn.case][turn.system].push(elapsed.as_nanos() as f64 / (2 * n) as f64);
        }
        Ok(())
    })?;
    Ok(samples)
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
        let p = PingPong::boxed();
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
    fn corosensei_has_no_same_site_case() {
        let systems = systems();
        let samples = measure_all(&systems, 5, 2_000).unwrap();
        let coro = systems
            .iter()
            .position(|s| s.name == corosensei::NAME)
            .unwrap();
        assert!(
            samples[1][coro].is_empty(),
            "corosensei has no same-site case"
        );
        assert_eq!(samples[0][0].len(), 5);
    }
}
