//! `ferry/rpc.h`: raw calls into another process over pair-wise shared
//! memory (`ferry::rpc`) from C. A server serves a named interface at a
//! version hash with one C handler; a client connects to it by name and
//! makes calls of an operation number with argument bytes, getting result
//! bytes back. What the bytes mean is the program's business.
//!
//! This room owns the C names of `ferry::rpc`, their handles and the
//! mapping of `rpc::Error` to errno values; it must not hold any of the
//! channel's logic, which is all `ferry::rpc`'s.
//!
//! # Error codes
//!
//! Every function returning `int` returns 0 or an errno value (it does not
//! set `errno`); [`ferry_rpc_strerror`] lists them all.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use ferry_rt::rpc::{self, CallOptions, Client, Error, Fault, RuntimeDir, Server};

/// The largest arguments or result of one call, in bytes (1 MiB).
pub const FERRY_RPC_MAX_CALL: usize = 1 << 20;

/// `timeout_ns` of [`ferry_rpc_call_timeout`] and [`ferry_rpc_call_alloc`]
/// for "no deadline": wait as long as the server lives.
pub const FERRY_RPC_NO_TIMEOUT: u64 = 0xffff_ffff_ffff_ffff;

/// A server of one interface, from [`ferry_rpc_serve`]; ended with
/// [`ferry_rpc_server_close`].
#[allow(non_camel_case_types)]
pub struct ferry_rpc_server {
    server: Server,
}

/// A client's channel to one server, from [`ferry_rpc_connect`]; ended
/// with [`ferry_rpc_close`].
#[allow(non_camel_case_types)]
pub struct ferry_rpc_channel {
    client: Client,
}

/// The result a handler is building, handed to it by the server; filled
/// with [`ferry_rpc_reply_set`] or [`ferry_rpc_reply_buffer`]. It belongs
/// to that one call of the handler and must not be used after it returns.
#[allow(non_camel_case_types)]
pub struct ferry_rpc_reply {
    bytes: Vec<u8>,
}

/// A server's handler: answers a call of operation `op` with the `in_len`
/// argument bytes at `input` (valid only during the call), writing the result
/// into `reply` (left alone: an empty result). It returns 0 for a result,
/// or the code the caller is to get: `ENOSYS` (no such operation),
/// `EINVAL` (bad arguments) or `EMSGSIZE` (result too large); any other
/// value reaches the caller as `EREMOTEIO`, and the reply is dropped. It
/// runs on a ferry thread of the server's pool, many at once: `user` is
/// shared by them all. It must return normally (an exception or `longjmp`
/// out of it aborts the process, as for a cthread's function).
#[allow(non_camel_case_types)]
pub type ferry_rpc_handler_t = Option<
    unsafe extern "C-unwind" fn(
        user: *mut c_void,
        op: u32,
        input: *const u8,
        in_len: usize,
        reply: *mut ferry_rpc_reply,
    ) -> c_int,
>;

/// The errno value for `e` (see the module's table).
fn code(e: &Error) -> c_int {
    match e {
        Error::PeerDied => libc::ECONNRESET,
        Error::TimedOut => libc::ETIMEDOUT,
        Error::VersionMismatch { .. } => libc::EPROTONOSUPPORT,
        Error::Refused => libc::EACCES,
        Error::UnknownName => libc::ENOENT,
        Error::TooLarge => libc::EMSGSIZE,
        Error::BadReply | Error::BadHandshake(_) => libc::EPROTO,
        Error::BadLayout(_) => libc::EBADMSG,
        Error::BadName(_) => libc::EINVAL,
        Error::NameInUse => libc::EADDRINUSE,
        Error::UnsafeDir(_) => libc::EPERM,
        Error::UnknownOp { .. } => libc::ENOSYS,
        Error::BadArgs => libc::EINVAL,
        Error::ServerPanicked => libc::EREMOTEIO,
        Error::Closed => libc::EBADF,
        Error::NoRuntime => libc::ENOTSUP,
        Error::Io(io) => io.raw_os_error().unwrap_or(libc::EIO),
        // A kind of failure added to `rpc::Error` later.
        _ => libc::EPROTO,
    }
}

/// Starts the C API's runtime if needed; `ENOTSUP` unless the caller is a
/// ferry thread (a cthread, or `main` adopted by the runtime).
fn on_ferry_thread() -> Result<(), c_int> {
    crate::start::ensure();
    match ferry_rt::thread::try_current() {
        Some(_) => Ok(()),
        None => Err(libc::ENOTSUP),
    }
}

/// A NUL-terminated string argument as UTF-8: `EFAULT` if `NULL`,
/// `EINVAL` if not UTF-8.
///
/// # Safety
/// `s` is `NULL` or a NUL-terminated string that outlives `'a`.
unsafe fn text<'a>(s: *const c_char) -> Result<&'a str, c_int> {
    if s.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract: a NUL-terminated string.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| libc::EINVAL)
}

/// The runtime directory at `dir` (the user's if `NULL`), for this user.
///
/// # Safety
/// `dir` is `NULL` or a NUL-terminated string.
unsafe fn runtime_dir(dir: *const c_char) -> Result<RuntimeDir, c_int> {
    let r = if dir.is_null() {
        RuntimeDir::user()
    } else {
        // SAFETY: the caller's contract.
        let path = unsafe { CStr::from_ptr(dir) };
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        // SAFETY: a plain system call without arguments.
        RuntimeDir::open(path, unsafe { libc::getuid() })
    };
    r.map_err(|e| code(&e))
}

/// `f`'s `Ok` as 0 and its `Err` as itself.
fn status(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    match f() {
        Ok(()) => 0,
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------
// Serving

/// A C handler and its user pointer, as a `rpc::Handler`.
struct CHandler {
    f: unsafe extern "C-unwind" fn(
        *mut c_void,
        u32,
        *const u8,
        usize,
        *mut ferry_rpc_reply,
    ) -> c_int,
    user: *mut c_void,
}

// SAFETY: the contract of `ferry_rpc_serve`: the handler may be called on
// any ferry thread, many at once, with the same `user`.
unsafe impl Send for CHandler {}
// SAFETY: as above.
unsafe impl Sync for CHandler {}

impl rpc::Handler for CHandler {
    fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
        let mut reply = ferry_rpc_reply { bytes: Vec::new() };
        let guard = crate::AbortOnUnwind("an rpc handler");
        // SAFETY: the server's contract vouches for `f` and `user`; `args`
        // and `reply` live across the call; an unwind is caught by `guard`.
        let rc = unsafe { (self.f)(self.user, op, args.as_ptr(), args.len(), &mut reply) };
        std::mem::forget(guard);
        match rc {
            0 => Ok(reply.bytes),
            libc::ENOSYS => Err(Fault::UnknownOp),
            libc::EINVAL => Err(Fault::BadArgs),
            libc::EMSGSIZE => Err(Fault::TooLarge),
            _ => Err(Fault::Panicked),
        }
    }
}

/// Serves interface `name` at version hash `version` in the user's
/// runtime directory (`$XDG_RUNTIME_DIR/ferry`, else a per-user directory
/// under the temporary directory): clients of the same user may connect
/// (`ferry_rpc_connect`), and each of their calls runs `handler(user, op,
/// input, in_len, reply)` on a ferry thread of a pool (see
/// `ferry_rpc_handler_t`). `*server_out` gets the server. On a ferry
/// thread only.
///
/// Returns 0, or `ENOTSUP` (not a ferry thread), `EFAULT` (`name`,
/// `handler` or `server_out` `NULL`), `EINVAL` (a bad name: empty, too
/// long, not UTF-8, or with a `/`), `EADDRINUSE` (a live server serves
/// this name), `EPERM` (an unsafe runtime directory), or a system call's
/// errno.
///
/// # Safety
/// `name` is a NUL-terminated string; `handler` is a valid function that
/// may be called with `user` on any thread, many times at once, until
/// `ferry_rpc_server_close` has returned; `server_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_serve(
    name: *const c_char,
    version: u64,
    handler: ferry_rpc_handler_t,
    user: *mut c_void,
    server_out: *mut *mut ferry_rpc_server,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { ferry_rpc_serve_in(std::ptr::null(), name, version, handler, user, server_out) }
}

/// [`ferry_rpc_serve`] in runtime directory `dir` instead of the user's
/// (`NULL`: the user's). `dir` is created with mode 0700 if missing (its
/// parent must exist) and refused with `EPERM` if it is a symbolic link,
/// not a directory, owned by another user, or open to the group or others.
/// Clients find the server by the same `dir` ([`ferry_rpc_connect_in`]).
///
/// # Safety
/// As [`ferry_rpc_serve`]; `dir` is `NULL` or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_serve_in(
    dir: *const c_char,
    name: *const c_char,
    version: u64,
    handler: ferry_rpc_handler_t,
    user: *mut c_void,
    server_out: *mut *mut ferry_rpc_server,
) -> c_int {
    status(|| {
        on_ferry_thread()?;
        let (Some(f), false) = (handler, server_out.is_null()) else {
            return Err(libc::EFAULT);
        };
        // SAFETY: the caller's contract.
        let name = unsafe { text(name) }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { runtime_dir(dir) }?;
        let server =
            Server::serve_in(&dir, name, version, CHandler { f, user }).map_err(|e| code(&e))?;
        let server = Box::into_raw(Box::new(ferry_rpc_server { server }));
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { server_out.write(server) };
        Ok(())
    })
}

/// Stops serving: no more clients are accepted, every channel is closed
/// (their clients' calls return `ECONNRESET`), calls being handled are
/// waited for, and the socket file is removed. `NULL` is ignored. Not from
/// inside the server's own handler.
///
/// # Safety
/// `server` is `NULL` or came from `ferry_rpc_serve` and is closed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_server_close(server: *mut ferry_rpc_server) {
    if !server.is_null() {
        // SAFETY: the caller's contract: a live server, closed once.
        unsafe { Box::from_raw(server) }.server.close();
    }
}

/// Writes `len` bytes from `bytes` as the result (a copy: `bytes` stays
/// the caller's), replacing what the reply held. Returns 0, or `EFAULT`
/// (`reply` `NULL`, or `bytes` `NULL` with `len` above 0), `EMSGSIZE`
/// (`len` above `FERRY_RPC_MAX_CALL`), `ENOMEM`.
///
/// # Safety
/// `reply` is the handler's reply, during the handler's call; `bytes` is
/// readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_reply_set(
    reply: *mut ferry_rpc_reply,
    bytes: *const u8,
    len: usize,
) -> c_int {
    if bytes.is_null() && len > 0 {
        return libc::EFAULT;
    }
    // SAFETY: the caller's contract.
    let buf = unsafe { ferry_rpc_reply_buffer(reply, len) };
    if buf.is_null() {
        return if reply.is_null() {
            libc::EFAULT
        } else if len > FERRY_RPC_MAX_CALL {
            libc::EMSGSIZE
        } else {
            libc::ENOMEM
        };
    }
    if len > 0 {
        // SAFETY: `buf` has room for `len` bytes; `bytes` is readable for
        // `len` (the caller's contract) and is not the reply's own memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes, buf, len) };
    }
    0
}

/// Makes the result `len` bytes long (zero-filled) and returns where to
/// write them, to build a result in place: valid until the handler
/// returns or the reply is set again. `NULL` if `reply` is `NULL`, `len`
/// is above `FERRY_RPC_MAX_CALL`, or memory is short. With `len` 0 the
/// pointer is not `NULL` but must not be written through.
///
/// # Safety
/// `reply` is the handler's reply, during the handler's call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_reply_buffer(
    reply: *mut ferry_rpc_reply,
    len: usize,
) -> *mut u8 {
    // SAFETY: the caller's contract: the live reply of this call.
    let Some(reply) = (unsafe { reply.as_mut() }) else {
        return std::ptr::null_mut();
    };
    if len > FERRY_RPC_MAX_CALL {
        return std::ptr::null_mut();
    }
    reply.bytes.clear();
    if reply.bytes.try_reserve_exact(len).is_err() {
        return std::ptr::null_mut();
    }
    reply.bytes.resize(len, 0);
    reply.bytes.as_mut_ptr()
}

// ---------------------------------------------------------------------------
// Calling

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

/// A message for an errno value as the `ferry_rpc_` functions return it
/// (what it means for a call or a binding): never `NULL`, static. For
/// another value, `strerror`'s meaning is not given: "unknown".
///
/// Every `int` function of `ferry/rpc.h` returns 0 or one of these (and
/// does not set `errno`):
///
/// | code | meaning |
/// |------|---------|
/// | `ENOTSUP` | not called on a ferry thread (`rpc::Error::NoRuntime`) |
/// | `EFAULT` | a pointer argument is `NULL` where one is needed |
/// | `EINVAL` | connect/serve: a bad interface name; call: the server could not decode the arguments (`BadArgs`) |
/// | `ENOENT` | nobody serves this name (`UnknownName`) |
/// | `EPROTONOSUPPORT` | the interface version hashes differ (`VersionMismatch`) |
/// | `EACCES` | the server's policy refused this client (`Refused`) |
/// | `EPERM` | the runtime directory cannot be trusted (`UnsafeDir`) |
/// | `EADDRINUSE` | a live server already serves this name (`NameInUse`) |
/// | `ECONNRESET` | the peer died or hung up (`PeerDied`) |
/// | `ETIMEDOUT` | the deadline passed (`TimedOut`) |
/// | `EMSGSIZE` | arguments or result above the channel's maximum (`TooLarge`) |
/// | `ERANGE` | the result does not fit the caller's buffer |
/// | `ENOSYS` | the server has no such operation (`UnknownOp`) |
/// | `EREMOTEIO` | the server's handler failed on this call (`ServerPanicked`) |
/// | `EPROTO` | the peer broke the protocol (`BadReply`, `BadHandshake`) |
/// | `EBADMSG` | the peer's channel memory does not check out (`BadLayout`) |
/// | `EBADF` | the channel was closed (`Closed`) |
/// | `ENOMEM` | out of memory |
/// | other | a system call failed with that errno (`Io`) |
#[unsafe(no_mangle)]
pub extern "C" fn ferry_rpc_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        0 => c"success",
        libc::ENOTSUP => c"not on a ferry thread: call from a cthread or main",
        libc::EFAULT => c"a needed pointer argument is NULL",
        libc::EINVAL => c"a bad interface name, or the server could not decode the arguments",
        libc::ENOENT => c"nobody serves this interface name",
        libc::EPROTONOSUPPORT => c"the interface version hashes differ",
        libc::EACCES => c"the server's policy refused this client",
        libc::EPERM => c"the runtime directory cannot be trusted",
        libc::EADDRINUSE => c"a live server already serves this interface name",
        libc::ECONNRESET => c"the peer process died or hung up",
        libc::ETIMEDOUT => c"the peer did not answer in time",
        libc::EMSGSIZE => c"arguments or result above the channel's maximum",
        libc::ERANGE => c"the result does not fit the buffer (the call was made)",
        libc::ENOSYS => c"the server has no such operation",
        libc::EREMOTEIO => c"the server's handler failed on this call",
        libc::EPROTO => c"the peer does not follow the protocol",
        libc::EBADMSG => c"the peer's channel memory does not check out",
        libc::EBADF => c"the channel was closed",
        libc::ENOMEM => c"out of memory",
        _ => c"unknown (a system call's errno: see strerror)",
    };
    s.as_ptr()
}
