//! PMFS-style synchronous journaling on persistent memory on the memory
//! bus ([`pcie_sim::pmem::Pmem`]: cached stores, `clwb`, non-temporal
//! stores, `sfence`, ADR), after Dulloor et al., "System Software for
//! Persistent Memory" (EuroSys '14): the baseline that WOFS (Pan et al.,
//! OSDI '25) and SoupFS (Dong and Chen, "Soft Updates Made Simple and
//! Fast on Non-volatile Memory", ATC '17) measure themselves against.
//!
//! ## Contract
//!
//! - **Synchronous crash consistency**: every operation is durable and
//!   atomic when it returns. After a power failure at any instant, mount
//!   recovers the tree as it was after the last operation that returned,
//!   or after the one in flight; `fsync` has nothing to do.
//! - Mount is recovery: the newest transaction in the undo journal is
//!   rolled back unless it committed ([`journal::recover`]); then the tree
//!   is walked and checked, and the free inode and page sets are rebuilt.
//! - A corrupt image (one no crash of this code leaves) gives a typed
//!   error ([`PmfsError::Corrupt`], [`PmfsError::NotPmfs`]), never a panic.
//! - What it assumes of the layer below: 8-byte aligned stores are
//!   failure-atomic; a line's stores persist in order (rule M1); a line
//!   flushed with `clwb` and a non-temporal line are persistent after the
//!   core's next `sfence` (ADR; `docs/persistence.md` 5, as
//!   [`pcie_sim::PmemCursor`] enumerates the states).
//!
//! ## Mechanisms
//!
//! - **In-place metadata** ([`layout`]): a superblock, a block bitmap, an
//!   inode table of one-line inodes, directory entries of one line each
//!   in directory blocks, all updated in place as PMFS's are.
//! - **Fine-grained undo journal** ([`journal`]; PMFS's metadata
//!   consistency: fine-grained logging of the old values in cache-line
//!   sized entries, the protocol whose create SoupFS's Figure 2(b) counts at
//!   "around 19 persistency dependencies ... around 14 clflushes"): every metadata word an
//!   operation changes is staged in DRAM; at commit the old values are
//!   logged in 64-byte entries of up to 48 bytes (PMFS's entry size), each
//!   `clwb`ed, one `sfence` (dependency 1); the words are stored in place,
//!   each line `clwb`ed, one `sfence` (dependency 2); a commit entry is
//!   stored, `clwb`ed and fenced (dependency 3). Each fence waits, on the
//!   critical path, for the flushes before it.
//! - **Copy-on-write data** ([`data`]): a write fills fresh pages with
//!   non-temporal stores and one `sfence` before the transaction that
//!   maps them; the old pages are freed once it commits.
//! - **DRAM state** ([`fs`]): the free inode and page sets and a dentry
//!   cache (every directory's names, slots and inodes), rebuilt at mount
//!   and changed only when a transaction commits.
//! - **Counting** ([`cost::Cost`], [`Pmfs::last_tx`]): flushes and fences
//!   per operation, from the trace.
//! - **Fault switches** ([`Faults`]): skip the log's `clwb`, the fence
//!   between the log and the in-place update, the commit entry, or the
//!   rollback at mount; the crash tests show each one breaks the contract.
//!
//! ## Deviations from PMFS
//!
//! - PMFS flushes with `clflush` and orders with `sfence` (and `pcommit`,
//!   since withdrawn); this uses `clwb` and `sfence`, as the ADR platform
//!   of WOFS and SoupFS does, so the three are compared on one idiom.
//! - PMFS writes file data in place without making a write atomic (Xu
//!   and Swanson, "NOVA", FAST '16, Table 1: no data atomicity); here
//!   data is copy-on-write so that a write is atomic like every other
//!   operation, as the crash contract (and WOFS's, SoupFS's) asks.
//! - PMFS's journal is a circular buffer of entries shared by
//!   transactions, each tagged with a transaction id and a generation;
//!   here every transaction writes from the journal's first entry with a
//!   new generation, and only the newest generation can be live (one
//!   operation at a time). Entries log only the words that change (runs
//!   of up to six words inside one line), not whole structures.
//! - PMFS logs before each in-place update as it goes; here a
//!   transaction stages its updates and logs them together, so the log
//!   costs one fence per operation, not one per logged structure: this is
//!   the cheapest form of the protocol, and the counts are a lower bound
//!   for PMFS-style journaling.
//! - The inode table is a flat array (PMFS: a B-tree); an inode has
//!   [`layout::MAX_PAGES`] direct page pointers (files up to
//!   [`layout::MAX_SIZE`], 48 KiB; PMFS: a B-tree of blocks); names are
//!   at most [`layout::NAME_MAX`] bytes; directories never shrink.
//! - No timestamps, owners, symlinks or device files; no memory-mapped
//!   (XIP) access; no write protection of the PM mapping (PMFS's
//!   protection against stray writes); one operation at a time (a gate).
//! - A call's CPU time is one system call and the DRAM work its
//!   transaction counts (inodes staged, pages and inodes allocated or
//!   freed, dentry-cache lookups and changes, and the directory slots
//!   examined in order for a free one, PMFS's linear directory), at the
//!   shared cost table ([`fsapi::CpuCosts`], set in [`Options::cpu`]);
//!   building the log is not counted. The dentry cache stands for Linux's dcache in front of PMFS: a
//!   lookup loads the directory's inode but no directory block; inodes
//!   and the lines a transaction logs are loaded from the persistent
//!   memory, as PMFS reads them.
//!
//! ## Interface
//!
//! It implements [`fsapi::FileSystem`] (re-exported as [`FileSystem`]):
//! the inode operations are inherent methods, and the path helpers
//! (`create_path`, `rename_path`, ...) and [`FileSystem::snapshot`] come
//! from the trait.

pub mod cost;
mod crash;
pub mod data;
pub mod error;
pub mod faults;
pub mod fs;
pub mod journal;
pub mod layout;
pub mod ops;
pub mod options;

pub use cost::Cost;
pub use crash::CRASH_INODES;
pub use error::{PmfsError, Result};
pub use faults::Faults;
pub use fs::{Attr, Ctx, Pmfs, Usage};
pub use fsapi::{FileSystem, Node, Tree};
pub use journal::{Recovered, TxStats};
pub use layout::{FileType, Geometry, Ino, MAX_SIZE, NAME_MAX, ROOT};
pub use options::Options;
