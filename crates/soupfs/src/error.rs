//! The file system's error type.

use fsapi::Errno;

/// What a SoupFS operation can fail with: a POSIX refusal ([`Errno`],
/// shared by the file systems on persistent memory), a damaged image, or
/// the machine refusing an access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// A POSIX call refused. A name over [`crate::layout::NAME_MAX`]
    /// bytes is [`Errno::NameTooLong`]; a hard link to a directory is
    /// [`Errno::Invalid`].
    #[error(transparent)]
    Fs(#[from] Errno),
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

impl fsapi::FsError for FsError {
    fn kind(&self) -> fsapi::ErrorKind {
        fsapi::FsError::errno(self).map_or(fsapi::ErrorKind::Io, Errno::kind)
    }

    fn errno(&self) -> Option<&Errno> {
        match self {
            FsError::Fs(e) => Some(e),
            _ => None,
        }
    }
}
