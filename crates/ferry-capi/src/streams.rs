//! `ferry/ferry.h`, streams (002 §5): byte pipes between threads of one
//! process, with a pipe's semantics and errno-style results: open one
//! ([`ferry_stream_pipe`]), write and read ([`ferry_stream_write`],
//! [`ferry_stream_read`]), share an end between threads
//! ([`ferry_stream_writer_clone`], [`ferry_stream_reader_clone`]) and close
//! each end ([`ferry_stream_writer_close`], [`ferry_stream_reader_close`]).
//! Between processes, one listens on a name ([`ferry_stream_listen`],
//! [`ferry_stream_accept`]) and the other connects to it
//! ([`ferry_stream_connect`]): each gets a write end and a read end, one
//! per direction, used as above; the peer's death is `-ECONNRESET` to a
//! read (after the bytes it sent) and `-EPIPE` to a write.
//!
//! This room owns the C face of `ferry::stream`; what a stream does is
//! that module's (its docs say how an end is specialised at open and
//! switched at clone). It builds on `start` (the runtime).

use std::ffi::{CStr, c_char, c_void};
use std::io::{ErrorKind, Read, Write};

use ferry_rt::stream::{self, Listener, Reader, Writer};

use crate::start::ensure;

/// A stream's write end, from [`ferry_stream_pipe`]; closed with
/// [`ferry_stream_writer_close`]. Used by one thread at a time (clone it for
/// another thread).
#[allow(non_camel_case_types)]
pub struct ferry_stream_writer {
    w: Writer,
}

/// A stream's read end, from [`ferry_stream_pipe`]; closed with
/// [`ferry_stream_reader_close`]. Used by one thread at a time (clone it for
/// another thread).
#[allow(non_camel_case_types)]
pub struct ferry_stream_reader {
    r: Reader,
}

/// The errno value for `e`: a pipe's, and for a stream across processes
/// the peer's death (`ECONNRESET`), a peer that broke the protocol
/// (`EPROTO`) and the binding's failures.
fn code(e: &std::io::Error) -> i32 {
    match e.kind() {
        ErrorKind::BrokenPipe => libc::EPIPE,
        ErrorKind::WouldBlock => libc::EAGAIN,
        ErrorKind::Interrupted => libc::EINTR,
        ErrorKind::ConnectionReset => libc::ECONNRESET,
        ErrorKind::InvalidData => libc::EPROTO,
        ErrorKind::NotFound => libc::ENOENT,
        ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
        ErrorKind::InvalidInput => libc::EINVAL,
        ErrorKind::AddrInUse => libc::EADDRINUSE,
        ErrorKind::PermissionDenied => libc::EACCES,
        ErrorKind::TimedOut => libc::ETIMEDOUT,
        _ => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

fn errno_of(e: &std::io::Error) -> isize {
    -(code(e) as isize)
}

/// Opens a stream of `capacity` bytes (0: the default, 64 KiB; rounded up
/// to a power of two); `*writer_out` and `*reader_out` get its ends.
/// Returns 0, `EFAULT` for a NULL pointer, or `EINVAL` for a capacity
/// above the most (1 GiB).
///
/// # Safety
/// `writer_out` and `reader_out` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_pipe(
    capacity: usize,
    writer_out: *mut *mut ferry_stream_writer,
    reader_out: *mut *mut ferry_stream_reader,
) -> i32 {
    if writer_out.is_null() || reader_out.is_null() {
        return libc::EFAULT;
    }
    let _ = ensure();
    let capacity = if capacity == 0 {
        stream::DEFAULT_CAPACITY
    } else {
        capacity
    };
    let Ok((w, r)) = stream::Builder::new().capacity(capacity).try_pipe() else {
        return libc::EINVAL;
    };
    // SAFETY: both checked non-NULL, writable by the caller's contract.
    unsafe { hand_out((w, r), writer_out, reader_out) };
    0
}

/// Writes up to `len` bytes of `buf`; returns how many were written (at
/// least 1 when `len` > 0; a write of at most 4,096 bytes is never split
/// among several writers), blocking the calling thread (a cthread parks,
/// its processor runs others) while the stream is full. With `nonblock`
/// nonzero it returns `-EAGAIN` instead of blocking. `-EPIPE` once every
/// read end is closed; `-EFAULT` for a NULL pointer.
///
/// # Safety
/// `writer` is a live write end used by no other thread now; `buf` holds
/// `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_write(
    writer: *mut ferry_stream_writer,
    buf: *const c_void,
    len: usize,
    nonblock: i32,
) -> isize {
    if writer.is_null() || (buf.is_null() && len > 0) {
        return -(libc::EFAULT as isize);
    }
    // SAFETY: the caller's contract: a live end, used by this thread alone.
    let w = unsafe { &mut (*writer).w };
    let bytes = if len == 0 {
        &[][..]
    } else {
        // SAFETY: `buf` holds `len` readable bytes (the caller's contract).
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
    };
    let r = if nonblock != 0 {
        w.try_write(bytes)
    } else {
        w.write(bytes)
    };
    match r {
        Ok(n) => n as isize,
        Err(e) => errno_of(&e),
    }
}

/// Reads up to `len` bytes into `buf`; returns how many were read (0 only
/// at end-of-file: every write end closed and the bytes drained), blocking
/// the calling thread while the stream is empty. With `nonblock` nonzero it
/// returns `-EAGAIN` instead of blocking. `-EFAULT` for a NULL pointer.
///
/// # Safety
/// `reader` is a live read end used by no other thread now; `buf` has room
/// for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_read(
    reader: *mut ferry_stream_reader,
    buf: *mut c_void,
    len: usize,
    nonblock: i32,
) -> isize {
    if reader.is_null() || (buf.is_null() && len > 0) {
        return -(libc::EFAULT as isize);
    }
    // SAFETY: the caller's contract: a live end, used by this thread alone.
    let r = unsafe { &mut (*reader).r };
    let out = if len == 0 {
        &mut [][..]
    } else {
        // SAFETY: `buf` has room for `len` bytes (the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }
    };
    let got = if nonblock != 0 {
        r.try_read(out)
    } else {
        r.read(out)
    };
    match got {
        Ok(n) => n as isize,
        Err(e) => errno_of(&e),
    }
}

/// A second write end of `writer`'s stream, for another thread (the stream
/// switches to its several-writers path); NULL for NULL. Clone an end
/// before another thread may use it: the switch reaches `writer`'s own
/// calls from its next one on.
///
/// # Safety
/// `writer` is NULL or a live write end that no other thread is using now
/// (as for [`ferry_stream_write`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_writer_clone(
    writer: *const ferry_stream_writer,
) -> *mut ferry_stream_writer {
    if writer.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a live end (the caller's contract); cloning takes `&`.
    let w = unsafe { (*writer).w.clone() };
    Box::into_raw(Box::new(ferry_stream_writer { w }))
}

/// A second read end of `reader`'s stream, for another thread; NULL for
/// NULL. Clone an end before another thread may use it: the switch reaches
/// `reader`'s own calls from its next one on.
///
/// # Safety
/// `reader` is NULL or a live read end that no other thread is using now
/// (as for [`ferry_stream_read`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_reader_clone(
    reader: *const ferry_stream_reader,
) -> *mut ferry_stream_reader {
    if reader.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a live end (the caller's contract); cloning takes `&`.
    let r = unsafe { (*reader).r.clone() };
    Box::into_raw(Box::new(ferry_stream_reader { r }))
}

/// Closes a write end (the last one closed: readers see end-of-file once
/// they drained the stream). NULL is ignored.
///
/// # Safety
/// `writer` is NULL or a live write end, closed once and used no more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_writer_close(writer: *mut ferry_stream_writer) {
    if !writer.is_null() {
        // SAFETY: the caller's contract: a live end, closed once.
        drop(unsafe { Box::from_raw(writer) });
    }
}

/// Closes a read end (the last one closed: writes fail with `-EPIPE`).
/// NULL is ignored.
///
/// # Safety
/// `reader` is NULL or a live read end, closed once and used no more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_reader_close(reader: *mut ferry_stream_reader) {
    if !reader.is_null() {
        // SAFETY: the caller's contract: a live end, closed once.
        drop(unsafe { Box::from_raw(reader) });
    }
}

/// A name other processes connect to, from [`ferry_stream_listen`];
/// closed with [`ferry_stream_listener_close`].
#[allow(non_camel_case_types)]
pub struct ferry_stream_listener {
    l: Listener,
}

/// Writes the two new ends to the caller's pointers.
///
/// # Safety
/// Both pointers are non-NULL and writable.
unsafe fn hand_out(
    (w, r): (Writer, Reader),
    writer_out: *mut *mut ferry_stream_writer,
    reader_out: *mut *mut ferry_stream_reader,
) {
    // SAFETY: the caller's contract.
    unsafe {
        writer_out.write(Box::into_raw(Box::new(ferry_stream_writer { w })));
        reader_out.write(Box::into_raw(Box::new(ferry_stream_reader { r })));
    }
}

/// `name` as UTF-8: `EFAULT` if NULL, `EINVAL` if not UTF-8.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name_of<'a>(name: *const c_char) -> Result<&'a str, i32> {
    if name.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract: a NUL-terminated string.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| libc::EINVAL)
}

/// Listens on `name` (ASCII letters, digits, `.`, `_`, `-`; at most 100
/// bytes) in the user's runtime directory for processes of the same user;
/// each connection gets two rings of `capacity` bytes (0: the default,
/// 64 KiB; rounded up to a power of two). Returns 0 with `*listener_out`
/// set, or `EFAULT` for a NULL pointer, `EINVAL` for a bad name or a
/// capacity above 256 MiB, `EADDRINUSE` if a live listener has the name,
/// or another errno of the socket.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `listener_out` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_listen(
    name: *const c_char,
    capacity: usize,
    listener_out: *mut *mut ferry_stream_listener,
) -> i32 {
    if listener_out.is_null() {
        return libc::EFAULT;
    }
    // SAFETY: the caller's contract.
    let name = match unsafe { name_of(name) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let _ = ensure();
    let capacity = if capacity == 0 {
        stream::DEFAULT_CAPACITY
    } else {
        capacity
    };
    match stream::Builder::new().capacity(capacity).listen(name) {
        Ok(l) => {
            // SAFETY: checked non-NULL, writable by the caller's contract.
            unsafe { listener_out.write(Box::into_raw(Box::new(ferry_stream_listener { l }))) };
            0
        }
        Err(e) => code(&e),
    }
}

/// Waits for a process to connect to `listener` (blocking the calling
/// thread; a cthread's processor runs others), then sets `*writer_out` and
/// `*reader_out` to this side's ends of the new connection. Returns 0,
/// `EFAULT` for a NULL pointer, `EPROTO` for a peer that is not a stream
/// of this layout, or another errno of the socket (the listener stays
/// usable).
///
/// # Safety
/// `listener` is NULL or a live listener; the out pointers are NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_accept(
    listener: *const ferry_stream_listener,
    writer_out: *mut *mut ferry_stream_writer,
    reader_out: *mut *mut ferry_stream_reader,
) -> i32 {
    if listener.is_null() || writer_out.is_null() || reader_out.is_null() {
        return libc::EFAULT;
    }
    // SAFETY: a live listener (the caller's contract); accepting takes `&`.
    match unsafe { (*listener).l.accept() } {
        // SAFETY: both checked non-NULL, writable by the caller's contract.
        Ok(ends) => unsafe {
            hand_out(ends, writer_out, reader_out);
            0
        },
        Err(e) => code(&e),
    }
}

/// Connects to the stream listening on `name` in the user's runtime
/// directory and sets `*writer_out` and `*reader_out` to this side's ends.
/// Returns 0, `EFAULT` for a NULL pointer, `EINVAL` for a bad name,
/// `ENOENT` if nobody listens on it, `EPROTO` if the listener is not a
/// stream of this layout, `EACCES` if it refused this process,
/// `ETIMEDOUT` if it did not answer within 5 s.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; the out pointers are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_connect(
    name: *const c_char,
    writer_out: *mut *mut ferry_stream_writer,
    reader_out: *mut *mut ferry_stream_reader,
) -> i32 {
    if writer_out.is_null() || reader_out.is_null() {
        return libc::EFAULT;
    }
    // SAFETY: the caller's contract.
    let name = match unsafe { name_of(name) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let _ = ensure();
    match stream::connect(name) {
        // SAFETY: both checked non-NULL, writable by the caller's contract.
        Ok(ends) => unsafe {
            hand_out(ends, writer_out, reader_out);
            0
        },
        Err(e) => code(&e),
    }
}

/// Closes a listener: its name goes (connections made stay). NULL is
/// ignored.
///
/// # Safety
/// `listener` is NULL or a live listener, closed once and used no more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_stream_listener_close(listener: *mut ferry_stream_listener) {
    if !listener.is_null() {
        // SAFETY: the caller's contract: a live listener, closed once.
        drop(unsafe { Box::from_raw(listener) });
    }
}
