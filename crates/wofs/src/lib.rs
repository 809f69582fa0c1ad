//! WOFS, the metadata write-once file system, on persistent memory on the
//! memory bus ([`pcie_sim::pmem::Pmem`]: cached stores, `clwb`,
//! non-temporal stores, `sfence`, ADR), after Pan et al., "Fast and
//! Synchronous Crash Consistency with Metadata Write Once File System"
//! (OSDI '25; its slides are the source cited here).
//!
//! ## Contract
//!
//! - **Synchronous crash consistency**: every operation is durable and
//!   atomic when it returns (slides, "Synchronous Crash Consistency on
//!   PM"). After a power failure at any instant, mount recovers the tree
//!   as it was after the last operation that returned, or after the one in
//!   flight; `fsync` has nothing to do.
//! - Mount is recovery: a scan of every package slot; no journal to
//!   replay, no log to clean.
//! - A corrupt image (one no crash of this code leaves) gives a typed
//!   error ([`WofsError::Corrupt`], [`WofsError::NotWofs`]), never a panic;
//!   torn packages are dropped by the scan.
//! - What it assumes of the layer below: 8-byte aligned stores are
//!   failure-atomic; a line flushed with `clwb` and a non-temporal line
//!   are persistent after the core's next `sfence` (ADR;
//!   `docs/persistence.md` 5, rules M1 to M5, as [`pcie_sim::PmemCursor`]
//!   enumerates them).
//!
//! ## Mechanisms
//!
//! - **One package per operation** ([`package`]): create, mkdir, link,
//!   unlink, rmdir, rename, and each size, map or permission change
//!   (write, truncate, setattr) write one package holding all the metadata
//!   the operation changes ("One package for one OP"), with a header
//!   (magic, type, format version, sequence number, length, CRC-32)
//!   ("Protect package with checksum"), written once with a single
//!   ordering point: its cached stores, `clwb` of its lines, one `sfence`,
//!   or its non-temporal stores and one `sfence` ([`PackageWrite`];
//!   [`pmio::persist_package`]).
//! - **Non-log layout** ([`layout`], [`reclaim`]): packages go to fixed
//!   256-byte slots taken from a free list; nothing is appended, nothing
//!   is copied by a cleaner ("Log is not a must; GC can be avoided";
//!   "Non-log layout, using free lists for allocation").
//! - **Package translation layer** ([`ptl`]): DRAM maps from inodes and
//!   directory entries to their live packages, rebuilt at mount ("Package
//!   translation layer (PTL)").
//! - **Immediate reclamation with the causal rule** ([`reclaim`]): a
//!   superseded or cancelled package returns to the free list as soon as
//!   the package that supersedes it is persistent ("Return to allocator
//!   (similar to call free())"), except that a package that cancels
//!   another (unlink, rmdir, rename) is kept until the package it cancels
//!   is reclaimed, its slot overwritten by a persistent package ("Reason
//!   the causal dependency"); otherwise recovery could resurrect the
//!   removed entry.
//! - **Data** ([`data`]): copy-on-write data pages, persisted with
//!   non-temporal stores and an `sfence` before the attribute package that
//!   maps them; the old pages are freed once that package is persistent.
//! - **Recovery** ([`recovery`]): validates each slot's checksum and
//!   sequence number, applies cancellations, keeps each inode's newest
//!   attribute package, checks the tree, rebuilds the free lists.
//! - **Fault switches** ([`Faults`]): skip the `clwb`, the package's
//!   `sfence`, the data `sfence`, the checksum check, or the causal rule;
//!   the crash tests show each one breaks the contract.
//!
//! ## Deviations from WOFS
//!
//! - A package lives in one 256-byte slot (an XPLine): names are at most
//!   [`package::NAME_MAX`] bytes. WOFS's packages are chains of 64-byte
//!   objects (create = 384 bytes in its code).
//! - A write's package (the attribute package) carries the file's whole
//!   page map, so a file has at most [`package::MAX_PAGES`] 4 KiB pages
//!   (192 KiB); WOFS writes one data package per extent. With the whole
//!   map in the newest package, a truncate needs no causal rule of its
//!   own.
//! - A write takes two ordering points (data, then package), as the
//!   slides leave the data path open; metadata-only operations take one.
//! - Inode numbers are not reused within a mount (the next is one more
//!   than the largest any valid package names).
//! - No timestamps, owners, symlinks or device files; one operation at a
//!   time (a gate), as the simulated machine runs one program.
//! - A call's CPU time is one system call and the DRAM work the PTL and
//!   the allocator count (entries probed or changed, inodes, slots and
//!   pages), at the shared cost table ([`fsapi::CpuCosts`], set in
//!   [`Options::cpu`]); the CRC and the package encoding are not counted.
//!
//! ## Interface
//!
//! It implements [`fsapi::FileSystem`] (re-exported as [`FileSystem`]):
//! the inode operations are inherent methods, and the path helpers
//! (`create_path`, `rename_path`, ...) and [`FileSystem::snapshot`] come
//! from the trait.

mod crash;
pub mod data;
pub mod error;
pub mod faults;
pub mod fs;
pub mod layout;
pub mod ops;
pub mod options;
pub mod package;
pub mod pmio;
pub mod ptl;
pub mod reclaim;
pub mod recovery;

pub use crash::CRASH_SLOTS;
pub use data::{SetAttr, MAX_SIZE};
pub use error::{Result, WofsError};
pub use faults::Faults;
pub use fs::{Attr, Ctx, Wofs};
pub use fsapi::{FileSystem, Node, Tree};
pub use layout::Geometry;
pub use options::{Options, PackageWrite};
pub use package::{FileType, Ino, ROOT};
pub use reclaim::Usage;
