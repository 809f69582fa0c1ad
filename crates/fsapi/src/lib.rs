//! The file-system interface every file system here shares (WOFS, SoupFS,
//! the PMFS-style baseline on persistent memory, and MQFS on its NVMe
//! drive): the [`FileSystem`] trait of their primitive inode operations,
//! the path helpers written once over it as provided methods, and the
//! whole tree as a value ([`Tree`]) that crash tests compare.
//!
//! Code that drives any of these file systems goes through this trait:
//! the crash harness of those on persistent memory (feature `crash`:
//! [`crash`], with the [`crash::PmFs`] trait that formats and mounts one
//! on persistent memory), which their crash tests and crashfuzz's PM modes
//! drive; their tests (feature `testing`: the POSIX checks every file
//! system runs, the workloads, the reference model); the benches; and the
//! future FUSE serving of these file systems.
//!
//! Each file system keeps its own error enum: those on persistent memory
//! wrap the shared POSIX refusals ([`Errno`]) beside what is their own
//! (their medium, their image format), MQFS has its own POSIX variants;
//! the trait asks only that it is made from an [`Errno`] and tells its
//! [`ErrorKind`] ([`FsError`]).

mod api;
mod cost;
#[cfg(feature = "crash")]
pub mod crash;
mod errno;
mod tree;

#[cfg(feature = "testing")]
pub mod testing;

pub use api::{Attr, Ctx, ErrorKind, FileSystem, FsError, StatFs};
pub use cost::{CpuCosts, Meter, Work};
pub use errno::Errno;
pub use tree::{FileType, Node, Tree};
