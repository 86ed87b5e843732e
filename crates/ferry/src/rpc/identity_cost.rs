//! What carrying the logical thread costs a call: the identity, priority,
//! deadline, run time, alert state and chain every call carries, and the
//! run time charged back with its reply, timed alone on one thread.
//!
//! Every ferry call carries its logical thread in both serving modes, so
//! there is no bare call to time beside a full one. This room runs, for
//! each call, the very steps that carrying it adds to a call's two sides
//! (the functions the client and an activation call, in their order), on
//! the current thread and without a channel, and gives the mean time of
//! those steps; a benchmark sets it against a whole call's time measured in
//! the same run. It owns that measurement only: it must not touch a
//! channel, a slot or a pool, and leaves the thread as it found it (its
//! priority restored, no frame left installed; the serving side's alert
//! word, an activation's, is a word of its own here, not the thread's).
//!
//! The steps, per call:
//!
//! | side | step | in the real call |
//! |------|------|------------------|
//! | client | read the time stamp counter once, encode the context (with the thread's run time so far at that reading) | `ClientChan::send_staged` |
//! | client | copy it ahead of the arguments | the slot write, `head` bytes more |
//! | client | install a frame naming the outgoing call, remove it (or, inside a call already, name the call in that frame and clear it) | `ClientChan::wait_for` |
//! | server | decode the context, every field checked | `Activations::serve` |
//! | server | take the caller's priority, record the call being served, set the alert word | `Activations::serve` |
//! | server | install a serving frame, read the run time before and after the handler, remove the frame, clear the record | `Activations::serve` |
//! | server | put the run time ahead of the reply | `ServerChan::answer` |
//! | client | take it off the reply and charge it to the thread, at most the ticks since that reading | `ClientChan::wait_for` |

use std::time::{Duration, Instant};

use super::bind::Credentials;
use super::client::{charge_spent, split_spent};
use super::logical::{self, Frame, Incoming, MAX_CONTEXT, Outgoing};
use crate::sync::SpinLock;
use crate::thread::{BLOCKED, PENDING, RunSpan};

/// An outgoing call that nobody alerts (the steps name one, as a client
/// names its channel's call).
struct Nobody;

impl Outgoing for Nobody {
    fn alert(&self) {}
}

/// Runs the steps of `calls` null calls (see the module docs) on the
/// current ferry thread and gives the mean time per call; `None` off a
/// ferry thread, or if a context does not encode or decode (a chain
/// already at its deepest).
pub fn identity_steps(calls: u64) -> Option<Duration> {
    let t = crate::thread::try_current()?;
    let (pid, _) = crate::sys::process_identity();
    let peer = Credentials {
        pid: pid as i32,
        uid: 0,
        gid: 0,
    };
    let priority = t.priority();
    let alert_word = std::sync::atomic::AtomicU8::new(0);
    let serving: SpinLock<Option<(usize, u32, u32, *const Incoming)>> = SpinLock::new(None);
    let mut payload = Vec::with_capacity(MAX_CONTEXT);
    let mut reply = Vec::with_capacity(8);
    let start = Instant::now();
    for i in 0..calls {
        // Client: the context, ahead of the (empty) arguments.
        let begun = crate::sys::cycles();
        let mut context = [0u8; MAX_CONTEXT];
        let head = logical::encode_current(Some(&t), None, &mut context, begun).ok()?;
        payload.clear();
        payload.extend_from_slice(&context[..head]);
        let out = Nobody;
        // SAFETY: `own` is left (or its outgoing call cleared) below, before
        // `out` goes.
        let own = unsafe { Frame::calling(&out) };
        let entered = t.header().rpc.load(std::sync::atomic::Ordering::Relaxed) == 0;
        if entered {
            logical::enter(&t, &own);
        } else {
            // SAFETY: `t` is the current thread; `out` lives until it is
            // cleared just below.
            unsafe { logical::set_outgoing(&t, Some(&out)) };
        }

        // Server: the context, as an activation takes it.
        let (ctx, at) = logical::decode(std::hint::black_box(&payload), pid).ok()?;
        t.set_priority(ctx.incoming.priority);
        let frame = Frame::serving(ctx.incoming, peer);
        *serving.lock() = Some((0, i as u32, 0, frame.incoming_ptr()));
        let pending = ctx.alerted;
        alert_word.store(
            BLOCKED | if pending { PENDING } else { 0 },
            std::sync::atomic::Ordering::Release,
        );
        // The activation's frame goes where the client's is (one thread
        // plays both sides): the client's is taken off for the span.
        if entered {
            logical::leave(&t);
        } else {
            // SAFETY: as above; the outgoing call is cleared before `out`
            // goes.
            unsafe { logical::set_outgoing(&t, None) };
        }
        logical::enter(&t, &frame);
        let run = RunSpan::start();
        std::hint::black_box(&payload[at..]);
        let spent = run.spent();
        logical::leave(&t);
        *serving.lock() = None;
        reply.clear();
        reply.extend_from_slice(&(spent.as_nanos() as u64).to_ne_bytes());

        // Client: the run time off the reply, charged.
        let (spent, rest) = split_spent(std::hint::black_box(std::mem::take(&mut reply)))?;
        reply = rest;
        charge_spent(spent, begun);
    }
    let elapsed = start.elapsed();
    t.set_priority(priority);
    Some(elapsed / u32::try_from(calls.max(1)).unwrap_or(u32::MAX))
}

#[cfg(all(test, not(ferry_loom)))]
mod tests {
    use super::*;
    use crate::thread::Priority;

    /// The steps run on a ferry thread and leave it as they found it; off
    /// one there is nothing to measure.
    #[test]
    fn the_steps_leave_the_thread_as_they_found_it() {
        assert!(identity_steps(10).is_none(), "off a ferry thread");
        crate::run(|| {
            crate::thread::set_priority(Priority::High);
            assert!(identity_steps(1000).is_some());
            let me = crate::thread::current();
            assert_eq!(me.priority(), Priority::High);
            assert_eq!(
                me.header().rpc.load(std::sync::atomic::Ordering::Relaxed),
                0
            );
            let chain = crate::rpc::chain().expect("a ferry thread");
            assert_eq!(chain.depth(), 1, "the thread is its own origin again");
        })
        .unwrap();
    }
}
