//! The tour's chain interface (`ferry serve --chain`): one logical thread
//! crossing processes. The far end of a chain answers what it sees — the
//! chain the call runs in, CPU it burns, an alert it waits for — and a
//! relay in the middle passes each call on to the next process, so that
//! the call it makes is the same logical thread's.
//!
//! This module owns the interface (name, version hash, operations, the
//! encoding of its replies, checked when decoded) and both handlers; it
//! must not start processes or measure (the tour's `migrating` stop does).

use std::time::{Duration, Instant};

use ferry::rpc::{Client, Fault};
use ferry::thread::Priority;

/// The chain interface's version hash.
pub const CHAIN_VERSION: u64 = 0x6665_7272_7943_6802;

/// An empty call (the round trips of the tour's table).
pub const OP_NULL: u32 = 0;
/// The chain the far end's handler runs in ([`Seen`]).
pub const OP_CHAIN: u32 = 1;
/// Burns the run time the arguments name (u64 ns, little-endian) on the
/// far end, spinning; answers the ns its run time rose (u64), as ferry
/// accounts it (a handler without that accounting fails).
pub const OP_BURN: u32 = 2;
/// Allows alerts and waits (sleeping 1 ms at a time, at most
/// [`ALERT_WAIT_LIMIT`]) until the logical thread is alerted; answers
/// [`Alerted`].
pub const OP_WAIT_ALERT: u32 = 3;

/// How long [`OP_WAIT_ALERT`] waits before it gives up.
pub const ALERT_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// The priorities, as [`Seen`] numbers them.
pub const PRIORITIES: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

/// The chain as the far end saw it ([`OP_CHAIN`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The origin process's pid.
    pub pid: u32,
    /// The thread's id in its origin process.
    pub thread: u64,
    /// The priority the call ran at.
    pub priority: Priority,
    /// The processes visited, the origin first and the far end last.
    pub hops: Vec<u32>,
}

impl Seen {
    /// The chain the current code runs in (`None` off a ferry thread).
    pub fn current() -> Option<Seen> {
        let c = ferry::rpc::chain()?;
        Some(Seen {
            pid: c.id.pid,
            thread: c.id.thread,
            priority: c.priority,
            hops: c.hops,
        })
    }

    /// As little-endian u64 words: pid, thread, priority (its index in
    /// [`PRIORITIES`]), then one per hop.
    pub fn encode(&self) -> Vec<u8> {
        let fixed = [
            u64::from(self.pid),
            self.thread,
            PRIORITIES
                .iter()
                .position(|&p| p == self.priority)
                .expect("every priority is listed") as u64,
        ];
        fixed
            .into_iter()
            .chain(self.hops.iter().map(|&p| u64::from(p)))
            .flat_map(u64::to_le_bytes)
            .collect()
    }

    /// Decodes [`Seen::encode`]'s bytes; `None` if they are not whole
    /// words, name no hop, or hold a pid or priority out of range.
    pub fn decode(bytes: &[u8]) -> Option<Seen> {
        if !bytes.len().is_multiple_of(8) || bytes.len() < 4 * 8 {
            return None;
        }
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let pid = |w: u64| u32::try_from(w).ok();
        let priority = *PRIORITIES.get(usize::try_from(words[2]).ok()?)?;
        Some(Seen {
            pid: pid(words[0])?,
            thread: words[1],
            priority,
            hops: words[3..].iter().map(|&w| pid(w)).collect::<Option<_>>()?,
        })
    }
}

/// What [`OP_WAIT_ALERT`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alerted {
    /// Whether the activation allowed alerts before it opted in (a new
    /// activation starts with them blocked).
    pub allowed_before: bool,
    /// Whether the alert came before [`ALERT_WAIT_LIMIT`].
    pub seen: bool,
}

impl Alerted {
    /// Two bytes, 0 or 1 each.
    pub fn encode(self) -> Vec<u8> {
        vec![u8::from(self.allowed_before), u8::from(self.seen)]
    }

    /// Decodes [`Alerted::encode`]'s bytes (`None` for anything else).
    pub fn decode(bytes: &[u8]) -> Option<Alerted> {
        let flag = |b: u8| match b {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        match bytes {
            [a, s] => Some(Alerted {
                allowed_before: flag(*a)?,
                seen: flag(*s)?,
            }),
            _ => None,
        }
    }
}

/// Burns `d` of the calling thread's run time and returns how much it ran
/// (at least `d`); `None` without run-time accounting. The run time is
/// ferry's ([`ferry::thread::cpu_time`]), not a kernel thread's CPU clock:
/// a thread preempted or handed on may resume on another kernel thread,
/// whose clock is not the one the burn began on.
fn burn(d: Duration) -> Option<Duration> {
    let start = ferry::thread::cpu_time()?;
    loop {
        let ran = ferry::thread::cpu_time()?.checked_sub(start)?;
        if ran >= d {
            return Some(ran);
        }
        std::hint::spin_loop();
    }
}

/// The far end's handler.
pub fn far_end(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        OP_NULL => Ok(Vec::new()),
        OP_CHAIN => Ok(Seen::current().ok_or(Fault::Panicked)?.encode()),
        OP_BURN => {
            let ns: [u8; 8] = args.try_into().map_err(|_| Fault::BadArgs)?;
            let d = Duration::from_nanos(u64::from_le_bytes(ns));
            if d > ALERT_WAIT_LIMIT {
                return Err(Fault::BadArgs);
            }
            let ran = burn(d).ok_or(Fault::Panicked)?;
            Ok((ran.as_nanos() as u64).to_le_bytes().to_vec())
        }
        OP_WAIT_ALERT => {
            let allowed_before = ferry::thread::allow_alerts(true);
            let began = Instant::now();
            while !ferry::alerted() && began.elapsed() < ALERT_WAIT_LIMIT {
                ferry::sleep(Duration::from_millis(1));
            }
            let seen = ferry::alerted();
            ferry::thread::clear_alert();
            Ok(Alerted {
                allowed_before,
                seen,
            }
            .encode())
        }
        _ => Err(Fault::UnknownOp),
    }
}

/// A relay's handler: passes the call on through `next` (a failure there
/// reaches the caller as a failed handler).
pub fn relay(next: Client) -> impl Fn(u32, &[u8]) -> Result<Vec<u8>, Fault> + Send + Sync {
    move |op, args| match op {
        OP_NULL | OP_CHAIN | OP_BURN | OP_WAIT_ALERT => {
            next.call(op, args).map_err(|_| Fault::Panicked)
        }
        _ => Err(Fault::UnknownOp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_round_trips_and_bad_bytes_are_refused() {
        let s = Seen {
            pid: 7,
            thread: 1 << 40,
            priority: Priority::High,
            hops: vec![7, 8, 9],
        };
        assert_eq!(Seen::decode(&s.encode()), Some(s.clone()));
        let bytes = s.encode();
        assert_eq!(Seen::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Seen::decode(&bytes[..24]), None, "no hop");
        let mut bad = bytes.clone();
        bad[16] = 200;
        assert_eq!(Seen::decode(&bad), None, "priority out of range");
        let mut bad = bytes;
        bad[4] = 1;
        assert_eq!(Seen::decode(&bad), None, "pid out of range");
    }

    #[test]
    fn alerted_round_trips_and_bad_bytes_are_refused() {
        for allowed_before in [false, true] {
            for seen in [false, true] {
                let a = Alerted {
                    allowed_before,
                    seen,
                };
                assert_eq!(Alerted::decode(&a.encode()), Some(a));
            }
        }
        assert_eq!(Alerted::decode(&[1]), None);
        assert_eq!(Alerted::decode(&[0, 2]), None);
        assert_eq!(Alerted::decode(&[0, 0, 0]), None);
    }

    #[test]
    fn the_far_end_refuses_bad_arguments_and_unknown_ops() {
        assert_eq!(far_end(OP_BURN, &[1, 2]), Err(Fault::BadArgs));
        let too_long = (ALERT_WAIT_LIMIT.as_nanos() as u64 + 1).to_le_bytes();
        assert_eq!(far_end(OP_BURN, &too_long), Err(Fault::BadArgs));
        assert_eq!(far_end(99, &[]), Err(Fault::UnknownOp));
        assert_eq!(far_end(OP_NULL, b"x"), Ok(Vec::new()));
    }
}
