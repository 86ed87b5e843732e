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
//! `serve` holds the server's names, `call` the client's, `chain` the
//! logical thread's (the chain a call runs in); this file the codes and
//! what they all use.
//!
//! # Error codes
//!
//! Every function returning `int` returns 0 or an errno value (it does not
//! set `errno`); [`ferry_rpc_strerror`] lists them all.

use std::ffi::{CStr, c_char, c_int};
use std::os::unix::ffi::OsStrExt;

use ferry_rt::rpc::{Error, RuntimeDir};

mod call;
mod chain;
mod serve;

pub use call::*;
pub use chain::*;
pub use serve::*;

/// The largest arguments or result of one call, in bytes (1 MiB).
pub const FERRY_RPC_MAX_CALL: usize = 1 << 20;

/// `timeout_ns` of [`ferry_rpc_call_timeout`] and [`ferry_rpc_call_alloc`]
/// for "no deadline": wait as long as the server lives.
pub const FERRY_RPC_NO_TIMEOUT: u64 = 0xffff_ffff_ffff_ffff;

/// The errno value for `e` (the table of [`ferry_rpc_strerror`]).
pub(crate) fn code(e: &Error) -> c_int {
    match e {
        Error::PeerDied => libc::ECONNRESET,
        Error::TimedOut | Error::DeadlineExceeded => libc::ETIMEDOUT,
        Error::Aborted => libc::ECANCELED,
        Error::Busy => libc::EBUSY,
        Error::ChainTooDeep { .. } => libc::ELOOP,
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
pub(crate) fn on_ferry_thread() -> Result<(), c_int> {
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
pub(crate) unsafe fn text<'a>(s: *const c_char) -> Result<&'a str, c_int> {
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
pub(crate) unsafe fn runtime_dir(dir: *const c_char) -> Result<RuntimeDir, c_int> {
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
pub(crate) fn status(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    match f() {
        Ok(()) => 0,
        Err(e) => e,
    }
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
/// | `ETIMEDOUT` | the deadline passed (`DeadlineExceeded`; binding: `TimedOut`) |
/// | `ECANCELED` | the call was aborted (`Aborted`) |
/// | `EBUSY` | the server's activations are all taken and it refuses to queue (`Busy`) |
/// | `ELOOP` | the call's chain would be too deep (`ChainTooDeep`) |
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
        libc::ETIMEDOUT => c"the peer did not answer in time (the call's deadline passed)",
        libc::ECANCELED => c"the call was aborted before its reply came",
        libc::EBUSY => c"the server has no activation free and refuses to queue",
        libc::ELOOP => c"the call's chain would visit too many processes",
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
