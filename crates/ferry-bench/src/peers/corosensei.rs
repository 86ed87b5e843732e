//! corosensei as a peer of the `switch` experiment: a round trip of
//! `Coroutine::resume` and `Yielder::suspend` passing a `u64` each way.
//!
//! This module owns the peer's loop only; the run schedule and the checks'
//! reporting are the experiment's.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult};

/// Name of the corosensei system, the second ratio baseline of `switch`.
pub const NAME: &str = "corosensei";

/// One timed run of `n` round trips through a corosensei coroutine: resume
/// with `i`, which suspends with `i + 1`.
pub fn round_trips(n: u64, stack_size: usize) -> Result<Duration, String> {
    let stack = DefaultStack::new(stack_size).map_err(|e| format!("corosensei stack: {e}"))?;
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
