//! `ferry/ferry.h`, streams (002 §5): byte pipes between threads of one
//! process, with a pipe's semantics and errno-style results: open one
//! ([`ferry_stream_pipe`]), write and read ([`ferry_stream_write`],
//! [`ferry_stream_read`]), share an end between threads
//! ([`ferry_stream_writer_clone`], [`ferry_stream_reader_clone`]) and close
//! each end ([`ferry_stream_writer_close`], [`ferry_stream_reader_close`]).
//!
//! This room owns the C face of `ferry::stream`; what a stream does is
//! that module's (its docs say how an end is specialised at open and
//! switched at clone). It builds on `start` (the runtime).

use std::ffi::c_void;
use std::io::{ErrorKind, Read, Write};

use ferry_rt::stream::{self, Reader, Writer};

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

fn errno_of(e: &std::io::Error) -> isize {
    let code = match e.kind() {
        ErrorKind::BrokenPipe => libc::EPIPE,
        ErrorKind::WouldBlock => libc::EAGAIN,
        ErrorKind::Interrupted => libc::EINTR,
        _ => e.raw_os_error().unwrap_or(libc::EIO),
    };
    -(code as isize)
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
    unsafe {
        writer_out.write(Box::into_raw(Box::new(ferry_stream_writer { w })));
        reader_out.write(Box::into_raw(Box::new(ferry_stream_reader { r })));
    }
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
/// switches to its several-writers path); NULL for NULL.
///
/// # Safety
/// `writer` is NULL or a live write end.
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
/// NULL.
///
/// # Safety
/// `reader` is NULL or a live read end.
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
