//! The crate's one error type.

use pcie_sim::PcieError;
use thiserror::Error;

/// What a PMFS operation, mkfs or mount can fail with.
#[derive(Debug, Error)]
pub enum PmfsError {
    /// The persistent-memory model refused an access.
    #[error("persistent memory")]
    Pmem(#[from] PcieError),
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
    /// A bad argument: a name that is empty, too long, `.`/`..` or holds
    /// `/`; a rename of a directory into itself; a hard link to a
    /// directory (EINVAL, EPERM).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// The file would exceed the largest size an inode maps (EFBIG).
    #[error("file too large: {size} bytes (at most {max})")]
    TooLarge {
        /// The size asked for.
        size: u64,
        /// The largest file.
        max: u64,
    },
    /// No free inode, data page, directory slot or journal entry (ENOSPC).
    #[error("no space left: {0}")]
    NoSpace(&'static str),
    /// The persistent memory holds no PMFS image (bad superblock).
    #[error("not a PMFS image: {0}")]
    NotPmfs(&'static str),
    /// The geometry asked of mkfs does not fit the persistent memory.
    #[error("bad geometry: {0}")]
    Geometry(&'static str),
    /// Mount found metadata no crash of this code leaves.
    #[error("corrupt image at {at:#x}: {reason}")]
    Corrupt {
        /// The persistent-memory offset of the offending structure.
        at: u64,
        /// What is wrong.
        reason: &'static str,
    },
}

impl From<fsapi::PathError> for PmfsError {
    fn from(e: fsapi::PathError) -> PmfsError {
        match e {
            fsapi::PathError::NamesRoot => PmfsError::Invalid("the path names the root"),
        }
    }
}

impl fsapi::FsError for PmfsError {
    fn kind(&self) -> fsapi::ErrorKind {
        use fsapi::ErrorKind as K;
        match self {
            PmfsError::NotFound => K::NotFound,
            PmfsError::Exists => K::Exists,
            PmfsError::NotDir => K::NotDir,
            PmfsError::IsDir => K::IsDir,
            PmfsError::NotEmpty => K::NotEmpty,
            PmfsError::Invalid(_) => K::Invalid,
            PmfsError::TooLarge { .. } => K::TooLarge,
            PmfsError::NoSpace(_) => K::NoSpace,
            PmfsError::Pmem(_)
            | PmfsError::NotPmfs(_)
            | PmfsError::Geometry(_)
            | PmfsError::Corrupt { .. } => K::Io,
        }
    }
}

/// Short for `Result<T, PmfsError>`.
pub type Result<T> = std::result::Result<T, PmfsError>;
