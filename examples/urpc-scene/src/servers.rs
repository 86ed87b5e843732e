//! The two servers of the scene and what their replies carry.
//!
//! The window manager draws a line of text into a bitmap and answers how
//! many pixels it lit; the file cache holds a few files in memory and
//! answers byte ranges of them. Every reply starts with a [`Stamp`]: when
//! the server's handler began and ended (CLOCK_MONOTONIC, one clock for
//! every process of the machine) and which ferry thread of the server ran
//! it. The editor checks every reply against what it asked.

use ferry::rpc::Fault;

/// The window manager's interface name.
pub const WM: &str = "scene-wm";
/// The window manager's interface version hash.
pub const WM_VERSION: u64 = 0x5343_454e_4557_4d01;
/// Window manager operation: draw the text in the arguments.
pub const OP_DRAW: u32 = 0;

/// The file cache's interface name.
pub const CACHE: &str = "scene-file-cache";
/// The file cache's interface version hash.
pub const CACHE_VERSION: u64 = 0x5343_454e_4546_4301;
/// File cache operation: read `len` bytes of file `file` at `offset`
/// (three u32 little-endian).
pub const OP_READ: u32 = 0;

/// Files the cache holds.
pub const FILES: u32 = 8;
/// Bytes per file.
pub const FILE_LEN: u32 = 64 * 1024;

/// Bitmap the window manager draws into: columns per glyph, rows.
const GLYPH_W: usize = 8;
const ROWS: usize = 16;

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// When and where a server ran a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The handler began (CLOCK_MONOTONIC ns).
    pub start: u64,
    /// The handler ended.
    pub end: u64,
    /// The server's ferry thread that ran it.
    pub thread: u64,
}

/// Bytes of a [`Stamp`] at the head of a reply.
pub const STAMP_LEN: usize = 24;

impl Stamp {
    /// Splits a reply into its stamp and its result; `None` if it is too
    /// short or the times run backwards.
    pub fn split(reply: &[u8]) -> Option<(Stamp, &[u8])> {
        if reply.len() < STAMP_LEN {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(reply[i * 8..i * 8 + 8].try_into().unwrap());
        let stamp = Stamp {
            start: word(0),
            end: word(1),
            thread: word(2),
        };
        (stamp.end >= stamp.start).then_some((stamp, &reply[STAMP_LEN..]))
    }
}

/// Runs `f` and puts its result behind the stamp of its run.
fn stamped(f: impl FnOnce() -> Result<Vec<u8>, Fault>) -> Result<Vec<u8>, Fault> {
    let start = now_ns();
    let result = f()?;
    let end = now_ns();
    let mut reply = Vec::with_capacity(STAMP_LEN + result.len());
    reply.extend_from_slice(&start.to_le_bytes());
    reply.extend_from_slice(&end.to_le_bytes());
    reply.extend_from_slice(&ferry::current().id().as_u64().to_le_bytes());
    reply.extend_from_slice(&result);
    Ok(reply)
}

/// The window manager's handler.
pub fn window_manager(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        OP_DRAW => stamped(|| Ok(draw(args).to_le_bytes().to_vec())),
        _ => Err(Fault::UnknownOp),
    }
}

/// Draws `text` into a bitmap of 8×16 cells (each byte's glyph is a
/// pattern derived from it) and counts the lit pixels.
pub fn draw(text: &[u8]) -> u32 {
    let width = text.len() * GLYPH_W;
    let mut bitmap = vec![false; width * ROWS];
    for (i, &c) in text.iter().enumerate() {
        let mut seed = u32::from(c).wrapping_mul(0x9e37_79b9) | 1;
        for row in 0..ROWS {
            for col in 0..GLYPH_W {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                bitmap[row * width + i * GLYPH_W + col] = seed & 3 == 0;
            }
        }
    }
    bitmap.iter().filter(|&&lit| lit).count() as u32
}

/// Byte `at` of cached file `file`.
pub fn file_byte(file: u32, at: u32) -> u8 {
    (file.wrapping_mul(131).wrapping_add(at.wrapping_mul(7)) >> 1) as u8
}

/// The file cache: every file, in memory.
pub struct FileCache {
    files: Vec<Vec<u8>>,
}

impl FileCache {
    /// Fills the cache.
    pub fn new() -> FileCache {
        let files = (0..FILES)
            .map(|f| (0..FILE_LEN).map(|at| file_byte(f, at)).collect())
            .collect();
        FileCache { files }
    }

    /// The file cache's handler.
    pub fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
        if op != OP_READ {
            return Err(Fault::UnknownOp);
        }
        stamped(|| {
            let (file, offset, len) = read_args(args).ok_or(Fault::BadArgs)?;
            let data = self.files.get(file as usize).ok_or(Fault::BadArgs)?;
            let end = offset.checked_add(len).ok_or(Fault::BadArgs)? as usize;
            let bytes = data.get(offset as usize..end).ok_or(Fault::BadArgs)?;
            Ok(bytes.to_vec())
        })
    }
}

/// The arguments of a read.
pub fn read_args_of(file: u32, offset: u32, len: u32) -> Vec<u8> {
    [file, offset, len]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// Decodes the arguments of a read: exactly three u32.
fn read_args(args: &[u8]) -> Option<(u32, u32, u32)> {
    if args.len() != 12 {
        return None;
    }
    let w = |i: usize| u32::from_le_bytes(args[i * 4..i * 4 + 4].try_into().unwrap());
    Some((w(0), w(1), w(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_refuses_bad_reads() {
        // A stamp names the ferry thread that served: run on one.
        ferry::run(the_cache_refuses_bad_reads_on_a_ferry_thread).unwrap();
    }

    fn the_cache_refuses_bad_reads_on_a_ferry_thread() {
        let cache = FileCache::new();
        let ok = cache.call(OP_READ, &read_args_of(1, 10, 4)).unwrap();
        let (stamp, bytes) = Stamp::split(&ok).unwrap();
        assert!(stamp.end >= stamp.start);
        assert_eq!(
            bytes,
            (10..14).map(|at| file_byte(1, at)).collect::<Vec<_>>()
        );
        for bad in [
            read_args_of(FILES, 0, 1),
            read_args_of(0, FILE_LEN, 1),
            read_args_of(0, u32::MAX, 2),
            vec![0; 11],
        ] {
            assert_eq!(cache.call(OP_READ, &bad), Err(Fault::BadArgs));
        }
        assert_eq!(cache.call(9, &[]), Err(Fault::UnknownOp));
    }

    #[test]
    fn drawing_depends_on_the_text_and_short_replies_are_refused() {
        assert_ne!(draw(b"hello"), draw(b"hellp"));
        assert_eq!(draw(b""), 0);
        assert!(Stamp::split(&[0; STAMP_LEN - 1]).is_none());
        let mut backwards = vec![0; STAMP_LEN];
        backwards[0] = 1;
        assert!(Stamp::split(&backwards).is_none());
    }
}
