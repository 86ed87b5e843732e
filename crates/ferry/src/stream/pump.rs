//! [`pump`] and [`filter`]: a thread's worth of moving bytes from a
//! passive source to a passive sink (Synthesis' pump, 002 §2.3, §5.2), with
//! or without a function between them, to build pipelines of threads
//! joined by streams.
//!
//! This room owns the loops; it must not touch a stream's ring (it goes
//! through `BufRead` and `Write` like any caller).

use std::io::{self, BufRead, ErrorKind, Write};

/// Moves every byte of `src` into `dst` until `src` ends, then flushes
/// `dst`; returns how many bytes moved. Bytes go straight from `src`'s
/// buffer (a lone [`Reader`](super::Reader)'s is the stream's own ring)
/// into `dst`.
///
/// `src` and `dst` are taken by value (pass `&mut` to keep them); when
/// they are stream handles, dropping them at the end closes the stream
/// behind the pump as a process closes a pipe at exit.
///
/// ```
/// use std::io::Read;
///
/// ferry::run(|| {
///     let (mut w1, r1) = ferry::stream::pipe();
///     let (w2, mut r2) = ferry::stream::pipe();
///     let stage = ferry::spawn(move || ferry::stream::pump(r1, w2));
///     std::io::Write::write_all(&mut w1, b"through").unwrap();
///     drop(w1);
///     let mut out = String::new();
///     r2.read_to_string(&mut out).unwrap();
///     assert_eq!(out, "through");
///     assert_eq!(stage.join().unwrap().unwrap(), 7);
/// })
/// .unwrap();
/// ```
///
/// # Errors
/// The first error of `src` or `dst` other than
/// [`Interrupted`](ErrorKind::Interrupted) (which is retried), e.g.
/// [`BrokenPipe`](ErrorKind::BrokenPipe) when every reader of a `dst`
/// stream is gone.
pub fn pump<R: BufRead, W: Write>(mut src: R, mut dst: W) -> io::Result<u64> {
    let mut moved = 0u64;
    loop {
        let chunk = match src.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            dst.flush()?;
            return Ok(moved);
        }
        let n = match dst.write(chunk) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        src.consume(n);
        moved += n as u64;
    }
}

/// Moves `src` into `dst` through `f` until `src` ends: `f(chunk, out)`
/// gets each chunk of input as it comes and appends its output to `out`,
/// which is written to `dst` whole and then cleared; at end-of-file `f` is
/// called once more with an empty chunk (to let out what it held back),
/// then `dst` is flushed. Returns how many bytes went to `dst`.
///
/// A stage of a pipeline is a thread running a `filter` between two
/// streams (Synthesis' cooked tty, 002 §5.1, is one: raw keystrokes in,
/// edited lines out):
///
/// ```
/// use std::io::{Read, Write};
///
/// ferry::run(|| {
///     let (mut raw, keys) = ferry::stream::pipe();
///     let (upper, mut out) = ferry::stream::pipe();
///     let stage = ferry::spawn(move || {
///         ferry::stream::filter(std::io::BufReader::new(keys), upper, |chunk, out| {
///             out.extend(chunk.iter().map(u8::to_ascii_uppercase))
///         })
///     });
///     raw.write_all(b"shout").unwrap();
///     drop(raw);
///     let mut s = String::new();
///     out.read_to_string(&mut s).unwrap();
///     assert_eq!(s, "SHOUT");
///     assert_eq!(stage.join().unwrap().unwrap(), 5);
/// })
/// .unwrap();
/// ```
///
/// # Errors
/// As [`pump`].
pub fn filter<R, W, F>(mut src: R, mut dst: W, mut f: F) -> io::Result<u64>
where
    R: BufRead,
    W: Write,
    F: FnMut(&[u8], &mut Vec<u8>),
{
    let mut out = Vec::new();
    let mut moved = 0u64;
    loop {
        let chunk = match src.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let end = chunk.is_empty();
        f(chunk, &mut out);
        let n = chunk.len();
        src.consume(n);
        dst.write_all(&out)?;
        moved += out.len() as u64;
        out.clear();
        if end {
            dst.flush()?;
            return Ok(moved);
        }
    }
}
