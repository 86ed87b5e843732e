//! `ferry/rpc.h`, the server's names: serving an interface with a C
//! handler, and the reply a handler fills.
//!
//! This file owns the handler's translation (its return codes to `Fault`s,
//! the reply buffer); it must not decide how calls are served (the
//! `ferry::rpc` server does).

use std::ffi::{c_char, c_int, c_void};

use ferry_rt::rpc::{self, Fault, ServeMode, Server};

use super::{FERRY_RPC_MAX_CALL, code, on_ferry_thread, runtime_dir, status, text};
#[cfg(doc)]
use super::{call::ferry_rpc_connect_in, chain::ferry_rpc_chain};

/// `mode` of [`ferry_rpc_serve_mode`]: the default, as [`ferry_rpc_serve`]
/// chooses it (migrating, unless the environment variable
/// `FERRY_RPC_MODE` is `static`).
pub const FERRY_RPC_SERVE_DEFAULT: c_int = 0;
/// `mode` of [`ferry_rpc_serve_mode`]: migrating calls. Each call runs on
/// an activation of the server's pool as its caller's logical thread: at
/// the caller's priority, its run time charged back to the caller, alerts
/// and aborts reaching it, its chain seen by [`ferry_rpc_chain`].
pub const FERRY_RPC_SERVE_MIGRATING: c_int = 1;
/// `mode` of [`ferry_rpc_serve_mode`]: Mach's static model. A fixed pool of
/// service threads takes calls in arrival order, at their own priority;
/// the server keeps the run time, alerts do not cross, and a handler's
/// [`ferry_rpc_chain`] is its service thread's own.
pub const FERRY_RPC_SERVE_STATIC: c_int = 2;

/// A server of one interface, from [`ferry_rpc_serve`]; ended with
/// [`ferry_rpc_server_close`].
#[allow(non_camel_case_types)]
pub struct ferry_rpc_server {
    server: Server,
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
    // SAFETY: the caller's contract, passed on.
    unsafe {
        ferry_rpc_serve_mode(
            dir,
            name,
            version,
            FERRY_RPC_SERVE_DEFAULT,
            handler,
            user,
            server_out,
        )
    }
}

/// [`ferry_rpc_serve_in`] with the way calls run chosen: `mode` is
/// [`FERRY_RPC_SERVE_MIGRATING`], [`FERRY_RPC_SERVE_STATIC`] or
/// [`FERRY_RPC_SERVE_DEFAULT`] (what [`ferry_rpc_serve_in`] does).
/// [`ferry_rpc_server_mode`] tells which a server runs.
///
/// Returns as [`ferry_rpc_serve`], and `EINVAL` for another `mode`.
///
/// # Safety
/// As [`ferry_rpc_serve_in`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_serve_mode(
    dir: *const c_char,
    name: *const c_char,
    version: u64,
    mode: c_int,
    handler: ferry_rpc_handler_t,
    user: *mut c_void,
    server_out: *mut *mut ferry_rpc_server,
) -> c_int {
    status(|| {
        on_ferry_thread()?;
        let (Some(f), false) = (handler, server_out.is_null()) else {
            return Err(libc::EFAULT);
        };
        let mode = match mode {
            FERRY_RPC_SERVE_DEFAULT => ServeMode::from_env(),
            FERRY_RPC_SERVE_MIGRATING => ServeMode::Migrating,
            FERRY_RPC_SERVE_STATIC => ServeMode::Static,
            _ => return Err(libc::EINVAL),
        };
        // SAFETY: the caller's contract.
        let name = unsafe { text(name) }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { runtime_dir(dir) }?;
        let server = Server::builder()
            .mode(mode)
            .serve_in(&dir, name, version, CHandler { f, user })
            .map_err(|e| code(&e))?;
        let server = Box::into_raw(Box::new(ferry_rpc_server { server }));
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { server_out.write(server) };
        Ok(())
    })
}

/// How `server` runs its calls: [`FERRY_RPC_SERVE_MIGRATING`] or
/// [`FERRY_RPC_SERVE_STATIC`] (never the default: the mode it resolved
/// to); 0 for `NULL`.
///
/// # Safety
/// `server` is `NULL` or a live server.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_rpc_server_mode(server: *const ferry_rpc_server) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { server.as_ref() }.map(|s| s.server.mode()) {
        Some(ServeMode::Migrating) => FERRY_RPC_SERVE_MIGRATING,
        Some(ServeMode::Static) => FERRY_RPC_SERVE_STATIC,
        None => 0,
    }
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
