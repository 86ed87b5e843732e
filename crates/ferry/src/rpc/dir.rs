//! The per-user runtime directory where servers put their binding sockets,
//! and the interface names that pick a socket in it.
//!
//! Owns [`RuntimeDir`] (where the directory is, its creation and the checks
//! that make it trustworthy) and the rule for interface names. It must not
//! loosen a directory it did not create (it refuses it instead) and must
//! never follow a symbolic link in place of the directory.
//!
//! The directory is `$XDG_RUNTIME_DIR/ferry` when `XDG_RUNTIME_DIR` holds an
//! absolute path, else `<temp dir>/ferry-<uid>`. It is created with mode
//! 0700 if missing; whether created now or found, it is then checked with
//! `lstat` (so a directory put there by someone else in between is caught
//! too) and refused unless it is a real directory, owned by the expected
//! user, with no permission bit for the group or others.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// The longest interface name, in bytes.
pub const MAX_NAME_LEN: usize = 100;

/// A checked runtime directory: a real directory, owned by the expected
/// user, closed to everybody else.
#[derive(Debug, Clone)]
pub struct RuntimeDir {
    path: PathBuf,
}

impl RuntimeDir {
    /// The calling user's runtime directory (see the module docs), created
    /// if missing and checked.
    pub fn user() -> Result<RuntimeDir> {
        RuntimeDir::open(RuntimeDir::user_path(), rustix::process::getuid().as_raw())
    }

    /// Where the calling user's runtime directory is (see the module
    /// docs), without creating or checking it.
    pub(crate) fn user_path() -> PathBuf {
        default_path(
            std::env::var_os("XDG_RUNTIME_DIR"),
            rustix::process::getuid().as_raw(),
            &std::env::temp_dir(),
        )
    }

    /// The runtime directory at `path`, which must belong to user `owner`:
    /// created with mode 0700 if missing (its parent must exist), then
    /// checked. Refused with [`Error::UnsafeDir`] if it is not a directory,
    /// is a symbolic link, is owned by another user than `owner`, or has
    /// any permission bit for the group or others.
    pub fn open(path: impl Into<PathBuf>, owner: u32) -> Result<RuntimeDir> {
        let path = path.into();
        crate::sys::private_dir(&path, owner).map_err(|e| match e {
            crate::sys::DirError::Io(e) => Error::Io(e),
            crate::sys::DirError::Unsafe(what) => Error::UnsafeDir(what),
        })?;
        Ok(RuntimeDir { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The binding socket's path for interface `name`: `<dir>/<name>.sock`,
    /// after checking the name (see [`check_name`]).
    pub fn socket_path(&self, name: &str) -> Result<PathBuf> {
        check_name(name)?;
        Ok(self.path.join(format!("{name}.sock")))
    }
}

/// Checks an interface name: not empty, at most [`MAX_NAME_LEN`] bytes,
/// only ASCII letters, digits, `.`, `_` and `-`, and not starting with `.`.
/// Otherwise [`Error::BadName`] says which rule it broke.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::BadName("it is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::BadName("it is longer than 100 bytes"));
    }
    if name.starts_with('.') {
        return Err(Error::BadName("it starts with '.'"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(Error::BadName(
            "it has a character other than A-Z a-z 0-9 . _ -",
        ));
    }
    Ok(())
}

/// Where the runtime directory of user `uid` is, given the value of
/// `XDG_RUNTIME_DIR` (used only if it is an absolute path) and the temp dir.
fn default_path(xdg: Option<OsString>, uid: u32, temp: &Path) -> PathBuf {
    crate::sys::user_runtime_dir(xdg, uid, temp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_uses_an_absolute_xdg_dir_only() {
        let tmp = Path::new("/tmp");
        assert_eq!(
            default_path(Some("/run/user/7".into()), 7, tmp),
            Path::new("/run/user/7/ferry")
        );
        assert_eq!(
            default_path(Some("run/user".into()), 7, tmp),
            Path::new("/tmp/ferry-7")
        );
        assert_eq!(
            default_path(Some("".into()), 7, tmp),
            Path::new("/tmp/ferry-7")
        );
        assert_eq!(default_path(None, 7, tmp), Path::new("/tmp/ferry-7"));
    }

    #[test]
    fn names_follow_the_rule() {
        for good in ["a", "calc", "file-cache_2.v1", &"x".repeat(MAX_NAME_LEN)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        for bad in ["", ".hidden", "a/b", "..", "a b", "é", "a\0", &long] {
            assert!(matches!(check_name(bad), Err(Error::BadName(_))), "{bad:?}");
        }
    }
}
