//! The crate's one error type.

use fsapi::Errno;
use pcie_sim::PcieError;
use thiserror::Error;

/// What a WOFS operation, mkfs or mount can fail with.
#[derive(Debug, Error)]
pub enum WofsError {
    /// The persistent-memory model refused an access.
    #[error("persistent memory")]
    Pmem(#[from] PcieError),
    /// A POSIX call refused ([`Errno`], shared by the file systems on
    /// persistent memory).
    #[error(transparent)]
    Fs(#[from] Errno),
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

impl fsapi::FsError for WofsError {
    fn kind(&self) -> fsapi::ErrorKind {
        fsapi::FsError::errno(self).map_or(fsapi::ErrorKind::Io, Errno::kind)
    }

    fn errno(&self) -> Option<&Errno> {
        match self {
            WofsError::Fs(e) => Some(e),
            _ => None,
        }
    }
}

/// Short for `Result<T, WofsError>`.
pub type Result<T> = std::result::Result<T, WofsError>;
