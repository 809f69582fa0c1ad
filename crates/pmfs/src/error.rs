//! The crate's one error type.

use fsapi::Errno;
use pcie_sim::PcieError;
use thiserror::Error;

/// What a PMFS operation, mkfs or mount can fail with.
#[derive(Debug, Error)]
pub enum PmfsError {
    /// The persistent-memory model refused an access.
    #[error("persistent memory")]
    Pmem(#[from] PcieError),
    /// A POSIX call refused ([`Errno`], shared by the file systems on
    /// persistent memory).
    #[error(transparent)]
    Fs(#[from] Errno),
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

impl fsapi::FsError for PmfsError {
    fn kind(&self) -> fsapi::ErrorKind {
        fsapi::FsError::errno(self).map_or(fsapi::ErrorKind::Io, Errno::kind)
    }

    fn errno(&self) -> Option<&Errno> {
        match self {
            PmfsError::Fs(e) => Some(e),
            _ => None,
        }
    }
}

/// Short for `Result<T, PmfsError>`.
pub type Result<T> = std::result::Result<T, PmfsError>;
