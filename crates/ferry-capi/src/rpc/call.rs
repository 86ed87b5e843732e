//! `ferry/rpc.h`, the client's names: connecting to an interface and
//! calling it, into a buffer of the caller's or into `malloc`'d memory.
//!
//! This file owns the copying of results to C and the deadline's
//! translation; it must not hold the channel's logic (`ferry::rpc::Client`).

use std::ffi::{c_char, c_int};
use std::time::{Duration, Instant};

use ferry_rt::rpc::{CallOptions, Client};

#[cfg(doc)]
use super::serve::ferry_rpc_serve_in;
use super::{FERRY_RPC_NO_TIMEOUT, code, on_ferry_thread, runtime_dir, status, text};

/// A client's channel to one server, from [`ferry_rpc_connect`]; ended
/// with [`ferry_rpc_close`].
#[allow(non_camel_case_types)]
pub struct ferry_rpc_channel {
    client: Client,
}

/// Connects to the server of interface `name` at version hash `version`
/// in the user's runtime directory; `*channel_out` gets the channel. The
/// channel is polled by this runtime's processors; any ferry thread may
/// call through it, many at once. On a ferry thread only.
///
/// Returns 0, or `ENOTSUP` (not a ferry thread), `EFAULT` (`name` or
/// `channel_out` `NULL`), `EINVAL` (a bad name), `ENOENT` (nobody serves
/// `name`), `EPROTONOSUPPORT` (the server's version hash differs),
/// `EACCES` (the server refused this client), `EPERM` (an unsafe runtime
/// directory), `EBADMSG` or `EPROTO` (the server's channel or handshake
/// does not check out), `ECONNRESET` (the server hung up while binding),
/// `ETIMEDOUT` (it did not answer the handshake in time), or a system
/// call's errno.
///
/// # Safety
/// `name` is a NUL-terminated string; `channel_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_connect(
    name: *const c_char,
    version: u64,
    channel_out: *mut *mut ferry_rpc_channel,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { ferry_rpc_connect_in(std::ptr::null(), name, version, channel_out) }
}

/// [`ferry_rpc_connect`] in runtime directory `dir` (`NULL`: the user's),
/// checked as [`ferry_rpc_serve_in`] checks it.
///
/// # Safety
/// As [`ferry_rpc_connect`]; `dir` is `NULL` or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_connect_in(
    dir: *const c_char,
    name: *const c_char,
    version: u64,
    channel_out: *mut *mut ferry_rpc_channel,
) -> c_int {
    status(|| {
        on_ferry_thread()?;
        if channel_out.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's contract.
        let name = unsafe { text(name) }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { runtime_dir(dir) }?;
        let client = Client::connect_in(&dir, name, version).map_err(|e| code(&e))?;
        let channel = Box::into_raw(Box::new(ferry_rpc_channel { client }));
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { channel_out.write(channel) };
        Ok(())
    })
}

/// Closes a channel: the server drops it. `NULL` is ignored. No call may
/// be in progress on it, nor be made after.
///
/// # Safety
/// `channel` is `NULL` or came from `ferry_rpc_connect` and is closed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_close(channel: *mut ferry_rpc_channel) {
    if !channel.is_null() {
        // SAFETY: the caller's contract: a live channel, closed once.
        drop(unsafe { Box::from_raw(channel) });
    }
}

/// The largest arguments or result one call on `channel` may carry (0 for
/// `NULL`).
///
/// # Safety
/// `channel` is `NULL` or a live channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_max_call(channel: *const ferry_rpc_channel) -> usize {
    // SAFETY: the caller's contract.
    unsafe { channel.as_ref() }.map_or(0, |c| c.client.max_call_len())
}

/// The deadline `timeout_ns` from now (`FERRY_RPC_NO_TIMEOUT`, or one too
/// far to represent: none).
fn options(timeout_ns: u64) -> CallOptions {
    let deadline = if timeout_ns == FERRY_RPC_NO_TIMEOUT {
        None
    } else {
        Instant::now().checked_add(Duration::from_nanos(timeout_ns))
    };
    CallOptions {
        deadline,
        urgent: false,
    }
}

/// Makes the call, returning the result's bytes.
///
/// # Safety
/// `channel` is `NULL` or live; `input` is readable for `in_len` bytes.
unsafe fn call(
    channel: *const ferry_rpc_channel,
    op: u32,
    input: *const u8,
    in_len: usize,
    timeout_ns: u64,
) -> Result<Vec<u8>, c_int> {
    on_ferry_thread()?;
    // SAFETY: the caller's contract.
    let Some(channel) = (unsafe { channel.as_ref() }) else {
        return Err(libc::EFAULT);
    };
    let args: &[u8] = match (input.is_null(), in_len) {
        (_, 0) => &[],
        (true, _) => return Err(libc::EFAULT),
        // SAFETY: the caller's contract: readable for `in_len` bytes.
        (false, n) => unsafe { std::slice::from_raw_parts(input, n) },
    };
    channel
        .client
        .call_with(op, args, &options(timeout_ns))
        .map_err(|e| code(&e))
}

/// Calls operation `op` with the `in_len` bytes at `input` and waits for the
/// result, parking the calling ferry thread (its processor runs others).
/// The result is copied to `out`, `*out_len` set to its length. On a
/// ferry thread only.
///
/// If the result is longer than `out_cap`, returns `ERANGE` with
/// `*out_len` set to the length needed: the call was made and its result
/// is dropped (call again with a larger buffer, or use
/// `ferry_rpc_call_alloc`).
///
/// Returns 0, or `ENOTSUP` (not a ferry thread), `EFAULT` (`channel` or
/// `out_len` `NULL`, `input` `NULL` with `in_len` above 0, `out` `NULL` with
/// `out_cap` above 0), `ERANGE` (as above), `EMSGSIZE` (arguments or
/// result above the channel's maximum), `ENOSYS` (the server has no
/// operation `op`), `EINVAL` (the server could not decode the arguments),
/// `EREMOTEIO` (the server's handler failed), `ECONNRESET` (the server
/// died, closed, or broke the channel), `EPROTO` (a reply that does not
/// follow the protocol). `*out_len` is set only for 0 and `ERANGE`.
///
/// # Safety
/// `channel` is `NULL` or live; `input` is readable for `in_len` bytes; `out`
/// is writable for `out_cap` bytes; `out_len` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_call(
    channel: *const ferry_rpc_channel,
    op: u32,
    input: *const u8,
    in_len: usize,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        ferry_rpc_call_timeout(
            channel,
            op,
            input,
            in_len,
            out,
            out_cap,
            out_len,
            FERRY_RPC_NO_TIMEOUT,
        )
    }
}

/// [`ferry_rpc_call`] with a deadline `timeout_ns` nanoseconds from now
/// (`FERRY_RPC_NO_TIMEOUT`: none): after it the call returns `ETIMEDOUT`
/// (the server may still run it; its late result is dropped and the slot
/// reused safely).
///
/// # Safety
/// As [`ferry_rpc_call`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ferry_rpc_call_timeout(
    channel: *const ferry_rpc_channel,
    op: u32,
    input: *const u8,
    in_len: usize,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
    timeout_ns: u64,
) -> c_int {
    status(|| {
        if out_len.is_null() || (out.is_null() && out_cap > 0) {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's contract.
        let result = unsafe { call(channel, op, input, in_len, timeout_ns) }?;
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out_len.write(result.len()) };
        if result.len() > out_cap {
            return Err(libc::ERANGE);
        }
        if !result.is_empty() {
            // SAFETY: `out` is writable for `out_cap >= result.len()` bytes
            // (the caller's contract) and is not `result`'s memory.
            unsafe { std::ptr::copy_nonoverlapping(result.as_ptr(), out, result.len()) };
        }
        Ok(())
    })
}

/// [`ferry_rpc_call_timeout`] with the result in memory from `malloc`:
/// `*out` gets it (free it with `free`; never `NULL` on success, even for
/// an empty result), `*out_len` its length. Returns as
/// `ferry_rpc_call_timeout`, never `ERANGE`, and `ENOMEM` if the result
/// cannot be allocated; `*out` and `*out_len` are set only for 0.
///
/// # Safety
/// `channel` is `NULL` or live; `input` is readable for `in_len` bytes; `out`
/// and `out_len` are `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_call_alloc(
    channel: *const ferry_rpc_channel,
    op: u32,
    input: *const u8,
    in_len: usize,
    timeout_ns: u64,
    out: *mut *mut u8,
    out_len: *mut usize,
) -> c_int {
    status(|| {
        if out.is_null() || out_len.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's contract.
        let result = unsafe { call(channel, op, input, in_len, timeout_ns) }?;
        // SAFETY: a plain allocation of at least one byte.
        let buf = unsafe { libc::malloc(result.len().max(1)) }.cast::<u8>();
        if buf.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: `buf` was just allocated with room for `result.len()`
        // bytes; `out` and `out_len` are checked non-NULL and writable by
        // the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(result.as_ptr(), buf, result.len());
            out.write(buf);
            out_len.write(result.len());
        }
        Ok(())
    })
}
