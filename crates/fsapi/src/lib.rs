//! The file-system interface the file systems on persistent memory share
//! (WOFS, the PMFS-style baseline): the [`FileSystem`] trait of their
//! primitive inode operations, the path helpers written once over it as
//! provided methods, and the whole tree as a value ([`Tree`]) that crash
//! tests compare.
//!
//! Code that drives any of these file systems goes through this trait:
//! the crash harness (feature `crash`: [`crash`], with the [`crash::PmFs`]
//! trait that formats and mounts one on persistent memory), which their
//! crash tests and crashfuzz's PM modes drive; their tests (feature
//! `testing`: the workloads, the reference model); and the future FUSE
//! serving of these file systems.
//!
//! Each file system keeps its own error enum, which wraps the shared
//! POSIX refusals ([`Errno`]) beside what is its own (its medium, its
//! image format); the trait asks only that it is made from and tells its
//! [`Errno`] ([`FsError`]).

mod api;
mod cost;
#[cfg(feature = "crash")]
pub mod crash;
mod errno;
mod tree;

#[cfg(feature = "testing")]
pub mod testing;

pub use api::{Attr, Ctx, ErrorKind, FileSystem, FileType, FsError};
pub use cost::{CpuCosts, Meter, Work};
pub use errno::Errno;
pub use tree::{Node, Tree};
