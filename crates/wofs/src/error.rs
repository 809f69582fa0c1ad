//! The crate's one error type.

use pcie_sim::PcieError;
use thiserror::Error;

/// What a WOFS operation, mkfs or mount can fail with.
#[derive(Debug, Error)]
pub enum WofsError {
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
    /// The file would exceed the largest size one attribute package maps
    /// (EFBIG).
    #[error("file too large: {size} bytes (at most {max})")]
    TooLarge {
        /// The size asked for.
        size: u64,
        /// The largest file.
        max: u64,
    },
    /// No free package slot or data page (ENOSPC).
    #[error("no space left: {0}")]
    NoSpace(&'static str),
    /// The persistent memory holds no WOFS image (bad superblock).
    #[error("not a WOFS image: {0}")]
    NotWofs(&'static str),
    /// The geometry asked of mkfs does not fit the persistent memory.
    #[error("bad geometry: {0}")]
    Geometry(&'static str),
    /// The recovery scan found valid packages that contradict each other
    /// (a state no crash of a correct WOFS leaves).
    #[error("corrupt image at package slot {slot}: {reason}")]
    Corrupt {
        /// The slot of the offending package.
        slot: u32,
        /// What is wrong.
        reason: &'static str,
    },
}

impl From<fsapi::PathError> for WofsError {
    fn from(e: fsapi::PathError) -> WofsError {
        match e {
            fsapi::PathError::NamesRoot => WofsError::Invalid("the path names the root"),
        }
    }
}

impl fsapi::FsError for WofsError {
    fn kind(&self) -> fsapi::ErrorKind {
        use fsapi::ErrorKind as K;
        match self {
            WofsError::NotFound => K::NotFound,
            WofsError::Exists => K::Exists,
            WofsError::NotDir => K::NotDir,
            WofsError::IsDir => K::IsDir,
            WofsError::NotEmpty => K::NotEmpty,
            WofsError::Invalid(_) => K::Invalid,
            WofsError::TooLarge { .. } => K::TooLarge,
            WofsError::NoSpace(_) => K::NoSpace,
            WofsError::Pmem(_)
            | WofsError::NotWofs(_)
            | WofsError::Geometry(_)
            | WofsError::Corrupt { .. } => K::Io,
        }
    }
}

/// Short for `Result<T, WofsError>`.
pub type Result<T> = std::result::Result<T, WofsError>;
