//! What both ends of a `migrating` call agree on, whichever system carries
//! it: the operations ([`OP_CALL`], [`OP_BURN`], [`OP_STATS`]), the one
//! handler every server runs ([`handle`]), the server-side path sums as
//! they travel back to the client ([`PathSums`]), and the fixed amount of
//! work a burning call does ([`Burner`]).
//!
//! This module owns that vocabulary and the handler's work; it must not
//! touch a transport or a clock of the timed loop.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::error::Error;

/// Take the arguments, answer with their first (up to 8) bytes: the call's
/// number, so that a reply can be matched to its call. A null call has no
/// arguments and an empty reply.
pub const OP_CALL: u32 = 1;

/// Burn the work of the microseconds in the arguments (a little-endian
/// `u64`), as calibrated by the server's [`Burner`]; answer empty.
pub const OP_BURN: u32 = 2;

/// Answer with the server's [`PathSums`] so far (24 bytes).
pub const OP_STATS: u32 = 3;

/// What a handler answers instead of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No operation of that number.
    UnknownOp,
    /// Arguments of the wrong shape.
    BadArgs,
}

/// The reply to a call of `op` with `args`: [`OP_CALL`] and [`OP_BURN`]
/// as described there; [`OP_STATS`] answers `stats()`.
///
/// # Errors
/// [`Refusal::UnknownOp`] for another operation, [`Refusal::BadArgs`] for
/// a burn whose arguments are not 8 bytes.
pub fn handle(
    op: u32,
    args: &[u8],
    burner: &Burner,
    stats: impl FnOnce() -> PathSums,
) -> Result<Vec<u8>, Refusal> {
    match op {
        OP_CALL => Ok(args[..args.len().min(8)].to_vec()),
        OP_BURN => {
            let us = u64::from_le_bytes(args.try_into().map_err(|_| Refusal::BadArgs)?);
            burner.burn(Duration::from_micros(us));
            Ok(Vec::new())
        }
        OP_STATS => Ok(stats().encode().to_vec()),
        _ => Err(Refusal::UnknownOp),
    }
}

/// The reply [`OP_CALL`] must give to `args`.
pub fn expected_reply(args: &[u8]) -> &[u8] {
    &args[..args.len().min(8)]
}

/// A server's sums over the calls it has answered: from call seen to
/// handler entry, and from handler return to reply posted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathSums {
    /// Calls counted.
    pub calls: u64,
    /// Sum of call seen → handler entry, ns.
    pub to_handler_ns: u64,
    /// Sum of handler return → reply posted, ns.
    pub to_reply_ns: u64,
}

impl PathSums {
    /// Bytes of the encoded form.
    pub const LEN: usize = 24;

    /// Three little-endian `u64`s: calls, to handler, to reply.
    pub fn encode(self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..8].copy_from_slice(&self.calls.to_le_bytes());
        out[8..16].copy_from_slice(&self.to_handler_ns.to_le_bytes());
        out[16..].copy_from_slice(&self.to_reply_ns.to_le_bytes());
        out
    }

    /// The sums `bytes` encode.
    ///
    /// # Errors
    /// Not exactly [`PathSums::LEN`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<PathSums, Error> {
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        if bytes.len() != Self::LEN {
            return Err(Error(format!(
                "path sums of {} bytes, {} expected",
                bytes.len(),
                Self::LEN
            )));
        }
        Ok(PathSums {
            calls: word(0),
            to_handler_ns: word(8),
            to_reply_ns: word(16),
        })
    }

    /// The mean ns per call of both spans together over the calls between
    /// `earlier` and `self`.
    ///
    /// # Errors
    /// No call in between, or sums that went backwards.
    pub fn mean_since(self, earlier: PathSums) -> Result<f64, Error> {
        let calls = self.calls.checked_sub(earlier.calls);
        let handler = self.to_handler_ns.checked_sub(earlier.to_handler_ns);
        let reply = self.to_reply_ns.checked_sub(earlier.to_reply_ns);
        match (calls, handler, reply) {
            (Some(0), _, _) => Err(Error("the server counted no call".into())),
            (Some(c), Some(h), Some(r)) => Ok((h + r) as f64 / c as f64),
            _ => Err(Error(format!(
                "the server's path sums went backwards ({earlier:?} then {self:?})"
            ))),
        }
    }
}

/// A fixed amount of work per microsecond, measured once where it runs:
/// a burning call does the same work whether or not it is interrupted,
/// so a call that is set aside for another is not shortened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burner {
    /// Loop rounds per microsecond.
    per_us: u64,
}

/// Rounds of the calibration loop.
const CALIBRATION_ROUNDS: u64 = 1 << 20;

impl Burner {
    /// Measures the loop on the calling thread: the fastest of three
    /// timings of [`CALIBRATION_ROUNDS`] rounds (an interrupted one is
    /// slower, never faster).
    pub fn calibrate() -> Burner {
        let best = (0..3)
            .map(|_| {
                let start = Instant::now();
                spin(CALIBRATION_ROUNDS);
                start.elapsed()
            })
            .min()
            .expect("three timings");
        let ns = best.as_nanos().max(1) as u64;
        Burner {
            per_us: (CALIBRATION_ROUNDS * 1000 / ns).max(1),
        }
    }

    /// Does the work of `time` (as calibrated).
    pub fn burn(&self, time: Duration) {
        spin(self.rounds(time));
    }

    /// The loop rounds of `time`.
    fn rounds(&self, time: Duration) -> u64 {
        self.per_us
            .saturating_mul(u64::try_from(time.as_micros()).unwrap_or(u64::MAX))
    }
}

/// `rounds` rounds of dependent arithmetic the compiler cannot drop.
fn spin(rounds: u64) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..rounds {
        x = black_box(x.rotate_left(7) ^ 0x5851_f42d_4c95_7f2d).wrapping_mul(3);
    }
    black_box(x);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> PathSums {
        PathSums::default()
    }

    #[test]
    fn a_call_answers_its_number_and_a_burn_its_nothing() {
        let b = Burner { per_us: 1 };
        assert_eq!(handle(OP_CALL, b"", &b, none), Ok(vec![]));
        assert_eq!(handle(OP_CALL, b"abc", &b, none), Ok(b"abc".to_vec()));
        let long = vec![7u8; 32];
        assert_eq!(handle(OP_CALL, &long, &b, none), Ok(vec![7u8; 8]));
        assert_eq!(expected_reply(&long), &long[..8]);
        let us = 3u64.to_le_bytes();
        assert_eq!(handle(OP_BURN, &us, &b, none), Ok(vec![]));
        assert_eq!(handle(OP_BURN, b"abc", &b, none), Err(Refusal::BadArgs));
        assert_eq!(handle(99, b"", &b, none), Err(Refusal::UnknownOp));
    }

    #[test]
    fn stats_travel_in_24_bytes() {
        let s = PathSums {
            calls: 3,
            to_handler_ns: 300,
            to_reply_ns: 600,
        };
        let b = Burner { per_us: 1 };
        let reply = handle(OP_STATS, b"", &b, || s).unwrap();
        assert_eq!(PathSums::decode(&reply), Ok(s));
        assert!(PathSums::decode(&reply[..23]).is_err());
        assert!(PathSums::decode(&[reply.clone(), vec![0]].concat()).is_err());
    }

    #[test]
    fn the_mean_is_over_the_calls_in_between() {
        let a = PathSums {
            calls: 10,
            to_handler_ns: 1000,
            to_reply_ns: 500,
        };
        let b = PathSums {
            calls: 14,
            to_handler_ns: 1400,
            to_reply_ns: 700,
        };
        assert_eq!(b.mean_since(a), Ok(150.0));
        assert!(a.mean_since(a).unwrap_err().0.contains("no call"));
        assert!(a.mean_since(b).unwrap_err().0.contains("backwards"));
    }

    #[test]
    fn a_burn_is_work_in_proportion_to_its_time() {
        let b = Burner::calibrate();
        assert!(b.per_us >= 1);
        let us = Duration::from_micros;
        assert_eq!(b.rounds(us(2000)), 10 * b.rounds(us(200)));
        assert_eq!(b.rounds(us(0)), 0);
        assert_eq!(Burner { per_us: 5 }.rounds(us(3)), 15);
        assert_eq!(Burner { per_us: 2 }.rounds(Duration::MAX), u64::MAX);
        b.burn(us(100));
    }
}
