//! The place of the `ferry` rows of `urpc`: ferry's cross-process calls
//! (`ferry::rpc::Client::call` against a `Server` in a second process)
//! timed by the same loop as every peer.
//!
//! This module owns how a ferry round trip is fed to that loop. While
//! `ferry::rpc` has no calls in this tree, the rows are absent with
//! [`ABSENT`], and the goals that compare ferry with the peers are not
//! computed.

use super::calls::{self, Budget, Sample};
use crate::error::Error;

/// The row's system name.
pub const SYSTEM: &str = "ferry";

/// Why the ferry rows are absent.
pub const ABSENT: &str =
    "ferry::rpc has no calls (Client::call, Server::serve_in) in this tree yet";

/// Times ferry calls of `size` bytes each way made by `call(args) ->
/// result` under `budget`, as every peer is timed (the result must echo
/// the arguments: the server side answers each call with its arguments).
///
/// # Errors
/// The first error of `call`, or a result that does not echo.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the ferry rows call it once ferry::rpc has calls")
)]
pub fn measure(
    budget: &Budget,
    size: usize,
    mut call: impl FnMut(&[u8]) -> Result<Vec<u8>, Error>,
) -> Result<Sample, Error> {
    calls::time_calls(budget, size, |args, result| {
        *result = call(args)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_vec_returning_call_is_timed_and_checked() {
        let b = Budget {
            warmup: Duration::from_micros(100),
            timed: Duration::from_millis(1),
            min_calls: 3,
            max_calls: 100,
        };
        let s = measure(&b, 32, |args| Ok(args.to_vec())).unwrap();
        assert!(s.calls >= 3);
        assert!(measure(&b, 32, |_| Ok(vec![0; 32])).is_err());
    }
}
