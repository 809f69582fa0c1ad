//! The errors every file system here answers a POSIX call with, written
//! once: each file system's error enum wraps an [`Errno`] beside what is
//! its own (its medium, its image format).

use thiserror::Error;

/// What a POSIX call on any of these file systems can be refused with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum Errno {
    /// No such file or directory (ENOENT).
    #[error("no such file or directory")]
    NotFound,
    /// The name exists (EEXIST).
    #[error("file exists")]
    Exists,
    /// A directory was expected (ENOTDIR).
    #[error("not a directory")]
    NotDir,
    /// A non-directory was expected (EISDIR).
    #[error("is a directory")]
    IsDir,
    /// The directory is not empty (ENOTEMPTY).
    #[error("directory not empty")]
    NotEmpty,
    /// A bad argument: a name that is empty, `.`/`..` or holds `/` (or
    /// NUL); a path naming the root where a name is needed; a rename of a
    /// directory into itself; a hard link to a directory (EINVAL, EPERM).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// A name longer than the file system stores (ENAMETOOLONG).
    #[error("file name too long")]
    NameTooLong,
    /// The file would exceed the largest size the file system maps
    /// (EFBIG).
    #[error("file too large: {size} bytes (at most {max})")]
    TooLarge {
        /// The size asked for.
        size: u64,
        /// The largest file.
        max: u64,
    },
    /// No space left (ENOSPC): what ran out.
    #[error("no space left: {0}")]
    NoSpace(&'static str),
}

impl Errno {
    /// The kind, without the detail.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            Errno::NotFound => K::NotFound,
            Errno::Exists => K::Exists,
            Errno::NotDir => K::NotDir,
            Errno::IsDir => K::IsDir,
            Errno::NotEmpty => K::NotEmpty,
            Errno::Invalid(_) => K::Invalid,
            Errno::NameTooLong => K::NameTooLong,
            Errno::TooLarge { .. } => K::TooLarge,
            Errno::NoSpace(_) => K::NoSpace,
        }
    }
}
