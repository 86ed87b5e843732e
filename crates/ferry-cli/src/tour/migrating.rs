//! Stop 7: one logical thread crossing two processes (migrating calls).
//! The tour starts two `ferry serve --chain` processes in one runtime
//! directory: A relays every call to B, the far end. A thread of the tour
//! calls A, whose handler calls B, and the stop shows what B sees — the
//! chain (origin pid and thread, priority, hops) — the run time B burns
//! charged back to the calling thread, and an alert sent at the origin
//! reaching B. Its table times a null call through both against the same
//! chain over Unix sockets (A's kernel thread passing each frame on to
//! B's). The children die with the tour and are killed and reaped when
//! the stop ends.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ferry::rpc::{Client, RuntimeDir};
use ferry::thread::Priority;

use super::rpc::{Served, TempDir};
use super::{Row, Scale, Stop, Visit};
use crate::chain::{Alerted, CHAIN_VERSION, OP_BURN, OP_CHAIN, OP_NULL, OP_WAIT_ALERT, Seen};
use crate::measure::{self, Measured};
use crate::report::fmt_ns;
use crate::serve::{FRAME_HEADER, frame, read_frame, unix_path};

pub const STOP: Stop = Stop {
    name: "migrating",
    title: "one thread across processes (migrating calls)",
    run,
};

/// The names A and B serve under.
const NEAR: &str = "tour-chain-a";
const FAR: &str = "tour-chain-b";

/// What the calling thread saw.
struct Findings {
    /// The calling thread's id.
    thread: u64,
    /// The chain at B.
    seen: Seen,
    /// Run time B's handler burned.
    burned: Duration,
    /// How much the calling thread's run time rose over that call.
    charged: Duration,
    /// B's answer to the alert.
    alerted: Alerted,
    /// From the alert at the origin to the call's return there.
    alert_to_return: Duration,
    /// The round trips through A and B.
    row: Measured,
}

fn run(scale: Scale) -> io::Result<Visit> {
    let runs = scale.runs();
    let ferry_calls = scale.pick(2_000, 500, 20);
    let unix_calls = scale.pick(500, 200, 10);
    let burn = Duration::from_millis(scale.pick(20, 10, 2));
    let dir = TempDir::new()?;
    let far = Served::start(dir.path(), &["--chain", "--name", FAR])?;
    let near = Served::start(dir.path(), &["--chain", "--name", NEAR, "--next", FAR])?;

    let mut unix = UnixStream::connect(unix_path(dir.path(), NEAR))?;
    unix_round_trips(&mut unix, unix_calls.min(10))?;
    let std_row = measure::repeat(runs, unix_calls, || unix_round_trips(&mut unix, unix_calls))?;
    drop(unix);

    let rt_dir = RuntimeDir::open(dir.path(), rustix::process::getuid().as_raw())
        .map_err(io::Error::other)?;
    let f = ferry::Runtime::builder()
        .processors(1)
        .run(move || visit_chain(&rt_dir, runs, ferry_calls, burn))??;

    let me = std::process::id();
    let expected_hops = [me, near.pid, far.pid];
    if f.seen.pid != me || f.seen.thread != f.thread || f.seen.hops != expected_hops {
        return Err(io::Error::other(format!(
            "B saw another chain: {:?}, not thread {} of {me} through {expected_hops:?}",
            f.seen, f.thread
        )));
    }
    if f.seen.priority != Priority::High {
        return Err(io::Error::other("the call's priority did not travel to B"));
    }
    if f.charged < f.burned {
        return Err(io::Error::other(format!(
            "the caller was charged {:?}, less than the {:?} B burned",
            f.charged, f.burned
        )));
    }
    if !f.alerted.seen || f.alerted.allowed_before {
        return Err(io::Error::other(format!(
            "the alert did not reach B as it should: {:?}",
            f.alerted
        )));
    }
    let hops: Vec<String> = f.seen.hops.iter().map(u32::to_string).collect();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    Ok(Visit {
        lines: vec![
            format!(
                "The tour started two processes serving with migrating calls: A (pid {}) passes \
                 every call on to B (pid {}). A thread of the tour (pid {me}, thread {}, priority \
                 High) called A; A's handler called B. B's handler asked ferry::rpc::chain() who \
                 it runs for: thread {} of pid {}, at priority {:?}, through pids {} (depth {}). \
                 It is one logical thread: each call runs on an activation of the server's pool \
                 as its caller, at its caller's priority.",
                near.pid,
                far.pid,
                f.thread,
                f.seen.thread,
                f.seen.pid,
                f.seen.priority,
                hops.join(" → "),
                hops.len()
            ),
            format!(
                "Run time follows the thread: B's handler spun until its own \
                 ferry::thread::cpu_time() had risen by {}, and the calling thread's \
                 ferry::thread::cpu_time() rose by {} over the call, though it only waited: what A and B \
                 spent on its behalf came back with the replies and was charged to it.",
                ms(f.burned),
                ms(f.charged)
            ),
            format!(
                "Alerts follow it too: B's handler opted in to alerts (a new activation starts \
                 with them blocked) and waited for ferry::alerted(); another thread of the tour \
                 called Thread::alert() on the caller, the alert went down the chain through A \
                 to B, B returned, and the call was back at the origin {} after the alert.",
                fmt_ns(f.alert_to_return.as_nanos() as f64)
            ),
            format!(
                "The table: a null call through A to B and back. std is the same chain over Unix \
                 sockets, A's kernel thread passing each frame on to B's: four kernel wake-ups \
                 per round trip. ferry: {ferry_calls} calls per run, the sockets {unix_calls}."
            ),
        ],
        rows: vec![Row {
            case: "null call through two processes".into(),
            label: "null call tour → A → B → back (std: Unix sockets)".into(),
            ferry: f.row,
            std: std_row,
        }],
        pending: None,
    })
}

/// On a ferry thread: shows the chain, the charged run time and the alert
/// from a caller of priority High, then times the round trips.
fn visit_chain(dir: &RuntimeDir, runs: usize, calls: u64, burn: Duration) -> io::Result<Findings> {
    let a = Client::connect_in(dir, NEAR, CHAIN_VERSION).map_err(io::Error::other)?;
    let caller = {
        let a = a.clone();
        ferry::thread::Builder::new()
            .priority(Priority::High)
            .spawn(move || -> io::Result<_> {
                let seen = a.call(OP_CHAIN, &[]).map_err(io::Error::other)?;
                let seen = Seen::decode(&seen).ok_or_else(|| bad("the chain"))?;
                let before = ferry::thread::cpu_time().ok_or_else(|| bad("no run time"))?;
                let nanos = (burn.as_nanos() as u64).to_le_bytes();
                let burned = a.call(OP_BURN, &nanos).map_err(io::Error::other)?;
                let charged = ferry::thread::cpu_time().ok_or_else(|| bad("no run time"))?;
                let burned: [u8; 8] = burned.try_into().map_err(|_| bad("the burn"))?;
                Ok((
                    ferry::current().id().as_u64(),
                    seen,
                    Duration::from_nanos(u64::from_le_bytes(burned)),
                    charged - before,
                ))
            })?
    };
    let (thread, seen, burned, charged) = caller.join().map_err(|_| bad("the caller"))??;

    let waiter = {
        let a = a.clone();
        ferry::spawn(move || a.call(OP_WAIT_ALERT, &[]))
    };
    // Let the call reach B before the alert (an alert that comes earlier
    // travels with the call and is seen all the same).
    ferry::sleep(Duration::from_millis(5));
    let alerted_at = Instant::now();
    waiter.thread().alert();
    let answer = waiter.join().map_err(|_| bad("the waiter"))?;
    let alert_to_return = alerted_at.elapsed();
    let answer = answer.map_err(io::Error::other)?;
    let alerted = Alerted::decode(&answer).ok_or_else(|| bad("the alert's answer"))?;

    null_calls(&a, calls.min(20))?;
    let row = measure::repeat(runs, calls, || null_calls(&a, calls))?;
    Ok(Findings {
        thread,
        seen,
        burned,
        charged,
        alerted,
        alert_to_return,
        row,
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::other(format!("the chain stop: bad {what}"))
}

/// Makes `n` null calls through A to B.
fn null_calls(a: &Client, n: u64) -> io::Result<Duration> {
    let start = Instant::now();
    for _ in 0..n {
        if !a.call(OP_NULL, &[]).map_err(io::Error::other)?.is_empty() {
            return Err(bad("null answer"));
        }
    }
    Ok(start.elapsed())
}

/// Makes `n` empty round trips over `stream` (through A's relay to B's
/// echo) and checks each reply.
fn unix_round_trips(stream: &mut UnixStream, n: u64) -> io::Result<Duration> {
    let f = frame(&[])?;
    let mut buf = Vec::with_capacity(FRAME_HEADER);
    let start = Instant::now();
    for _ in 0..n {
        stream.write_all(&f)?;
        if read_frame(stream, &mut buf)? != 0 {
            return Err(bad("Unix answer"));
        }
    }
    Ok(start.elapsed())
}
