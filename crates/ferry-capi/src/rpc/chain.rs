//! `ferry/rpc.h`, the logical thread's names: the chain the calling code
//! runs in ([`ferry_rpc_chain`]), as a plain struct.
//!
//! This file owns the struct's layout and its filling from
//! `ferry::rpc::chain()`; it must not decide what a chain holds (the
//! `ferry::rpc` room does).

use std::ffi::c_int;
use std::time::Instant;

use ferry_rt::rpc;
use ferry_rt::thread::Priority;

use super::on_ferry_thread;
use crate::alerts::{FERRY_PRIORITY_HIGH, FERRY_PRIORITY_LOW, FERRY_PRIORITY_NORMAL};

/// The deepest chain: processes one logical thread may visit at once, the
/// origin included (the length of `ferry_rpc_chain_info`'s `hops`). A
/// call that would go deeper fails with `ELOOP`.
pub const FERRY_RPC_MAX_CHAIN_DEPTH: usize = 16;

const _: () = assert!(FERRY_RPC_MAX_CHAIN_DEPTH == rpc::MAX_CHAIN_DEPTH);

/// The chain a piece of code runs in (000's activation stack), filled by
/// [`ferry_rpc_chain`]: the logical thread — the thread that made the
/// first call, in the process it began in — its attributes, and the
/// processes it visits. Inside a handler serving a call on an activation
/// (a migrating call), it is the caller's logical thread with this process
/// added; anywhere else (another ferry thread, or a handler of a server in
/// the static mode) the calling thread is the origin of a chain of one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct ferry_rpc_chain_info {
    /// The origin process's pid.
    pub origin_pid: u32,
    /// The origin process's start time (clock ticks since boot): with the
    /// pid, unique even when the pid is reused.
    pub origin_start: u64,
    /// The thread's id in its origin process (a number, not a `cthread_t`).
    pub origin_thread: u64,
    /// The priority the logical thread runs at: a `FERRY_PRIORITY_*` of
    /// `ferry/ferry.h`.
    pub priority: c_int,
    /// Nonzero if a caller along the chain set a deadline.
    pub has_deadline: c_int,
    /// If `has_deadline`: nanoseconds left until it (0 once it passed);
    /// else 0.
    pub deadline_ns_left: u64,
    /// The logical thread's run time before the call now being served, in
    /// ns (at the origin: the thread's own).
    pub cpu_ns: u64,
    /// How many processes the chain visits (1 at the origin), at most
    /// `FERRY_RPC_MAX_CHAIN_DEPTH`.
    pub depth: u32,
    /// The pids of the processes it visits: `hops[0]` is the origin's,
    /// `hops[depth - 1]` this process's (a re-entrant chain names a
    /// process more than once); entries from `depth` on are 0.
    pub hops: [u32; FERRY_RPC_MAX_CHAIN_DEPTH],
}

/// The C code of a priority.
fn priority_code(p: Priority) -> c_int {
    match p {
        Priority::High => FERRY_PRIORITY_HIGH,
        Priority::Normal => FERRY_PRIORITY_NORMAL,
        Priority::Low => FERRY_PRIORITY_LOW,
    }
}

/// `chain` as the C struct, deadlines measured from `now`.
fn info(chain: &rpc::Chain, now: Instant) -> ferry_rpc_chain_info {
    let mut hops = [0; FERRY_RPC_MAX_CHAIN_DEPTH];
    let depth = chain.hops.len().min(FERRY_RPC_MAX_CHAIN_DEPTH);
    hops[..depth].copy_from_slice(&chain.hops[..depth]);
    let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    ferry_rpc_chain_info {
        origin_pid: chain.id.pid,
        origin_start: chain.id.start,
        origin_thread: chain.id.thread,
        priority: priority_code(chain.priority),
        has_deadline: c_int::from(chain.deadline.is_some()),
        deadline_ns_left: chain
            .deadline
            .map_or(0, |d| nanos(d.saturating_duration_since(now))),
        cpu_ns: nanos(chain.cpu),
        depth: depth as u32,
        hops,
    }
}

/// Fills `*out` with the chain the calling code runs in (see
/// `struct ferry_rpc_chain_info`): in a server's handler, who called, from
/// where, through which processes, at what priority and with how much time
/// left. On a ferry thread only.
///
/// Returns 0, or `ENOTSUP` (not a ferry thread), `EFAULT` (`out` `NULL`);
/// `*out` is left alone on an error.
///
/// # Safety
/// `out` is `NULL` or points at writable storage for a
/// `struct ferry_rpc_chain_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_chain(out: *mut ferry_rpc_chain_info) -> c_int {
    super::status(|| {
        if out.is_null() {
            return Err(libc::EFAULT);
        }
        on_ferry_thread()?;
        let chain = rpc::chain().ok_or(libc::ENOTSUP)?;
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(info(&chain, Instant::now())) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn chain(hops: Vec<u32>, deadline: Option<Instant>) -> rpc::Chain {
        rpc::Chain {
            id: rpc::LogicalId {
                pid: 7,
                start: 99,
                thread: 3,
            },
            priority: Priority::Low,
            deadline,
            cpu: Duration::from_micros(5),
            hops,
        }
    }

    #[test]
    fn a_chain_fills_every_field_and_zeroes_the_unused_hops() {
        let now = Instant::now();
        let i = info(
            &chain(vec![7, 8, 9], Some(now + Duration::from_millis(2))),
            now,
        );
        assert_eq!((i.origin_pid, i.origin_start, i.origin_thread), (7, 99, 3));
        assert_eq!(i.priority, FERRY_PRIORITY_LOW);
        assert_eq!((i.has_deadline, i.deadline_ns_left), (1, 2_000_000));
        assert_eq!((i.cpu_ns, i.depth), (5_000, 3));
        assert_eq!(i.hops[..4], [7, 8, 9, 0]);
        assert!(i.hops[3..].iter().all(|&p| p == 0));
    }

    #[test]
    fn no_deadline_and_a_passed_one_are_told_apart() {
        let now = Instant::now();
        let none = info(&chain(vec![7], None), now);
        assert_eq!((none.has_deadline, none.deadline_ns_left), (0, 0));
        let passed = info(&chain(vec![7], Some(now)), now + Duration::from_secs(1));
        assert_eq!((passed.has_deadline, passed.deadline_ns_left), (1, 0));
    }
}
