//! [`OpenOptions`]: std's options for opening a file, kept readable too,
//! so that an open can go through the ring (`fs::ring`) as well as through
//! the blocking handoff.
//!
//! This file owns the options and their `open`; it must not choose the path
//! an open takes (`fs::ring::with_ring` and the runtime's backend do).

use std::fmt;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::ring::{self, Flags};
use super::{File, call};

/// Options for opening a file, as [`std::fs::OpenOptions`] (with the Unix
/// `mode` and `custom_flags` of [`OpenOptionsExt`]); [`OpenOptions::open`]
/// goes through the runtime's io_uring or, where that is not the path
/// ([`crate::Handle::fs_backend`]), through [`crate::blocking`].
///
/// ```
/// use std::io::Write;
///
/// ferry::run(|| {
///     let path = std::env::temp_dir().join(format!("ferry-options-doc-{}", std::process::id()));
///     let mut log = ferry::fs::File::options()
///         .create(true)
///         .append(true)
///         .mode(0o600)
///         .open(&path)
///         .unwrap();
///     log.write_all(b"one line\n").unwrap();
///     std::fs::remove_file(&path).unwrap();
/// })
/// .unwrap();
/// ```
#[derive(Clone)]
pub struct OpenOptions {
    std: std::fs::OpenOptions,
    /// The same options, for the ring; `None` if made from std's (whose
    /// options cannot be read): such an open takes the blocking handoff.
    flags: Option<Flags>,
}

impl OpenOptions {
    /// Every option off (and mode `0o666` before the umask), as
    /// [`std::fs::OpenOptions::new`].
    pub fn new() -> OpenOptions {
        OpenOptions {
            std: std::fs::OpenOptions::new(),
            flags: Some(Flags::NEW),
        }
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.std.read(read);
        self.mirror(|f| f.read = read);
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.std.write(write);
        self.mirror(|f| f.write = write);
        self
    }

    /// Open for appending: every write goes to the end of the file (implies
    /// writing).
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.std.append(append);
        self.mirror(|f| f.append = append);
        self
    }

    /// Truncate the file to 0 bytes when it is opened (needs writing).
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.std.truncate(truncate);
        self.mirror(|f| f.truncate = truncate);
        self
    }

    /// Create the file if it does not exist (needs writing or appending).
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.std.create(create);
        self.mirror(|f| f.create = create);
        self
    }

    /// Create the file, failing if it exists (needs writing or appending;
    /// overrides `create` and `truncate`).
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.std.create_new(create_new);
        self.mirror(|f| f.create_new = create_new);
        self
    }

    /// Permission bits for a file this open creates (before the umask), as
    /// [`OpenOptionsExt::mode`].
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        OpenOptionsExt::mode(&mut self.std, mode);
        self.mirror(|f| f.mode = mode);
        self
    }

    /// Extra `open` flags (`O_NOFOLLOW`, `O_DIRECT`, ...), as
    /// [`OpenOptionsExt::custom_flags`].
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        OpenOptionsExt::custom_flags(&mut self.std, flags);
        self.mirror(|f| f.custom = flags);
        self
    }

    /// Opens `path` with these options, as [`std::fs::OpenOptions::open`];
    /// retried if interrupted (it may block on a FIFO or a network file
    /// system).
    ///
    /// # Errors
    /// As [`std::fs::OpenOptions::open`]: [`io::ErrorKind::NotFound`],
    /// [`io::ErrorKind::AlreadyExists`] with `create_new`,
    /// [`io::ErrorKind::InvalidInput`] for a contradictory set of options,
    /// and so on.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let path = path.as_ref();
        let ring_open = self
            .flags
            .and_then(|f| Some((f.open_flags()?, f.mode)))
            .and_then(|(flags, mode)| ring::open(path, flags, mode));
        if let Some(file) = ring_open {
            return file.map(File);
        }
        call(|| self.std.open(path)).map(File)
    }

    fn mirror(&mut self, set: impl FnOnce(&mut Flags)) {
        if let Some(f) = &mut self.flags {
            set(f);
        }
    }
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    fn from(options: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions {
            std: options,
            flags: None,
        }
    }
}

impl fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
}
