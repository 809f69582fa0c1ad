//! The file system's error type.

/// What a SoupFS operation can fail with (each a POSIX errno, or a damaged
/// image, or the machine refusing an access).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// ENOENT.
    #[error("no such file or directory")]
    NotFound,
    /// EEXIST.
    #[error("file exists")]
    Exists,
    /// ENOTDIR.
    #[error("not a directory")]
    NotDir,
    /// EISDIR.
    #[error("is a directory")]
    IsDir,
    /// ENOTEMPTY.
    #[error("directory not empty")]
    NotEmpty,
    /// ENAMETOOLONG (over [`crate::layout::NAME_MAX`] bytes).
    #[error("file name too long")]
    NameTooLong,
    /// ENOSPC: no free page or line.
    #[error("no space left on device")]
    NoSpace,
    /// EFBIG: past what one index page maps.
    #[error("file too large")]
    TooBig,
    /// EPERM: a hard link to a directory.
    #[error("operation not permitted")]
    NotPermitted,
    /// EINVAL: an empty name, `/` in a name, a directory renamed into
    /// itself.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// The image has no SoupFS superblock.
    #[error("not a SoupFS image")]
    NotFormatted,
    /// The consistent view is not a valid tree.
    #[error("corrupt at PM offset {addr:#x}: {what}")]
    Corrupt {
        /// Where.
        addr: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// The machine refused a persistent-memory access.
    #[error("persistent memory: {0}")]
    Pm(#[from] pcie_sim::PcieError),
}
