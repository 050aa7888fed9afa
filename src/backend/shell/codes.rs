//! The one exit-code table of the file scripts ([`super::scripts`]) and
//! its mapping to [`BackendError`]s. Codes 16 and 18 belong to the link
//! check ([`super::confine`]); the rest are the scripts' own.

use super::confine::{ESCAPES, LOOP};
use crate::backend::BackendError;

/// Nothing at the path (`ENOENT`).
pub(crate) const NOT_FOUND: i32 = 10;
/// A directory where a file was wanted (`EISDIR`).
pub(crate) const IS_DIR: i32 = 11;
/// A file where a directory was wanted, on the path or at it (`ENOTDIR`).
pub(crate) const NOT_DIR: i32 = 12;
/// The name is taken (`EEXIST`); an exclusive create answers `Ok(false)`.
pub(crate) const EXISTS: i32 = 13;
/// A directory that is not empty (`ENOTEMPTY`).
pub(crate) const NOT_EMPTY: i32 = 14;
/// Fewer bytes arrived on stdin than were sent (a cut connection).
pub(crate) const SHORT: i32 = 15;
/// The path is the workspace root itself, which is never removed or
/// renamed away.
pub(crate) const IS_ROOT: i32 = 17;

/// The error of a script that ended with `code` while working on `path`
/// (`what` says what it was doing: "removing", "reading", ...). Codes
/// outside the table fall back to the script's `stderr`: a permission or
/// space problem, a missing path, otherwise an `Io` error quoting it.
pub(crate) fn failed(code: i32, path: &str, stderr: &str, what: &str) -> BackendError {
    let p = path.to_string();
    let io = |source| BackendError::Io {
        context: format!("{what} {path}"),
        source,
    };
    match code {
        NOT_FOUND => BackendError::NotFound(p),
        IS_DIR => BackendError::IsADirectory(p),
        NOT_DIR => BackendError::NotADirectory(p),
        EXISTS => BackendError::AlreadyExists(p),
        NOT_EMPTY => io(std::io::Error::new(
            std::io::ErrorKind::DirectoryNotEmpty,
            "directory not empty",
        )),
        SHORT => io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the sandbox received fewer bytes than were sent",
        )),
        ESCAPES => BackendError::Escapes(p),
        IS_ROOT => BackendError::PermissionDenied(format!("{path} is the workspace's mount point")),
        LOOP => io(std::io::Error::from_raw_os_error(libc::ELOOP)),
        _ if stderr.contains("ermission denied") => BackendError::PermissionDenied(p),
        _ if stderr.contains("No space left") => io(std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            stderr.to_string(),
        )),
        _ if stderr.contains("No such file") => BackendError::NotFound(p),
        _ if stderr.contains("Not a directory") => BackendError::NotADirectory(p),
        _ if stderr.contains("Is a directory") => BackendError::IsADirectory(p),
        _ => io(std::io::Error::other(format!("exit {code}: {stderr}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_errors() {
        assert!(failed(NOT_FOUND, "p", "", "reading").is_not_found());
        assert!(matches!(
            failed(EXISTS, "p", "", "creating"),
            BackendError::AlreadyExists(_)
        ));
        assert!(matches!(
            failed(ESCAPES, "p", "", "reading"),
            BackendError::Escapes(_)
        ));
        assert!(matches!(
            failed(IS_ROOT, "/workspace", "", "removing"),
            BackendError::PermissionDenied(m) if m.contains("mount point")
        ));
        assert!(matches!(
            failed(
                1,
                "p",
                "mkdir: can't create directory 'x': No such file or directory",
                "creating directory"
            ),
            BackendError::NotFound(_)
        ));
        let e = failed(1, "p", "boom", "writing").to_string();
        assert!(e.contains("exit 1: boom"), "{e}");
    }
}
