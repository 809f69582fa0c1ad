//! SoupFS: soft updates on persistent memory, after Dong and Chen, "Soft
//! Updates Made Simple and Fast on Non-volatile Memory" (USENIX ATC '17;
//! cited below by line of the paper's text), on
//! [`pcie_sim::pmem::Pmem`], the memory-bus persistent-memory model.
//!
//! ## Contract
//!
//! - Every system call is served from the **latest view** in DRAM and
//!   writes no metadata to persistent memory (file data is stored in place
//!   with cached stores, never flushed on the call's path). A change
//!   reaches the **consistent view** in PM when the background persister
//!   runs (every [`SoupProfile::persister_interval`]), or at `fsync` /
//!   `sync`. Changes are not durable when the call returns (paper L279,
//!   claim S10 of the checklist).
//! - After a power failure at any instant the consistent view is a valid
//!   tree: every pointer reachable from the root leads to an initialized
//!   structure that the bitmap has allocated and that nothing else
//!   reaches; link counts are at least the names found. What a crash can
//!   leave besides is only leaked space (and link counts too high), which
//!   [`SoupFs::mount`]'s collector frees. Mount replays nothing.
//! - A file `fsync`ed before the crash, and not changed since, is intact:
//!   reachable by its path with its size and data.
//!
//! It assumes of the layer below what `docs/persistence.md` section 5
//! states: aligned 8-byte stores are failure-atomic; a line persists in
//! store order; `clwb` + `sfence` makes the stores before it persistent
//! (ADR).
//!
//! ## Mechanisms
//!
//! - Hash-table directories of fixed-size dentries with externalized,
//!   immutable name lines (L85-L97): [`layout`].
//! - The content-oblivious allocator, pages and lines only, PM bitmap as
//!   the consistent view and DRAM free lists as the latest (L98-L106):
//!   `alloc.rs`.
//! - Soft-updates rules C1 (generalized: nothing reachable from the root
//!   before it is initialized), C2, C3 (L109-L116) and the create and
//!   remove dependencies of Figs. 5 and 6 (L117-L134): `persister.rs`.
//! - Pointer-based dual views (L150-L184): the DRAM inode beside the PM
//!   inode; names shared; dentries shared, with the consistent next in PM;
//!   buckets: latest in DRAM, consistent in the bucket page; two sizes and
//!   roots of a file over shared index and data pages: `state.rs`.
//! - Inode-centric operation lists diradd, dirrem, sizechg, attrchg and
//!   the dirty inode list (L185-L212, Table 2): `state.rs`, `ops.rs`,
//!   `data.rs`.
//! - The persister (L213-L223): `persister.rs`; each "persisted before"
//!   edge is `clwb` of the lines stored and one `sfence`, each publish an
//!   aligned 8-byte store, its `clwb` and an `sfence` (L224-L230): `pm.rs`.
//! - Recovery-free mount and the leak collector (the paper's fsck,
//!   L231-L234): `mount.rs`.
//! - Fault switches ([`Faults`]) that drop one mechanism each, for tests.
//!
//! ## Interface
//!
//! It implements [`fsapi::FileSystem`] (re-exported as [`FileSystem`]):
//! the inode operations are inherent methods taking an [`fsapi::Ctx`]
//! (the handle keeps the [`pcie_sim::Machine`], whose core a `Ctx` names;
//! the namespace calls use none, as they touch no persistent memory), and
//! the path helpers (`create_path`, `rename_path`, ...) and
//! [`FileSystem::snapshot`] come from the trait. POSIX refusals are
//! [`FsError::Fs`] ([`fsapi::Errno`]; a name over
//! [`layout::NAME_MAX`] bytes is [`fsapi::Errno::NameTooLong`], a hard
//! link to a directory [`fsapi::Errno::Invalid`]); [`Attr`] is [`fsapi::Attr`], whose
//! `links` counts a directory's names only. Its calls are not durable at
//! return (the contract above): a crash test's "the tree after the last
//! returned call" does not hold, only what `fsync`/`sync` persisted.
//!
//! ## Tests
//!
//! `tests/crash_envelope.rs` records a workload's [`pcie_sim::PmTrace`],
//! mounts every crash state [`pcie_sim::PmemCursor`] gives after every
//! entry (enumerated by what the checks read, none left unvisited) and
//! checks the contract above, plus random workloads checked against a
//! reference model; each [`Faults`] switch makes it find a violation.
//! `tests/posix.rs` (with the shared `fsapi::testing::posix` checks
//! that fit this contract), `model.rs`, `critical_path.rs` check the
//! calls;
//! `persister_interval.rs` is a small experiment on the interval.
//!
//! ## Deviations
//!
//! (With the choices the paper leaves open: `docs/decisions.md`, U1-U9.)
//!
//! - No RTM (L227-L229): no 64-byte inode is written after the inode is
//!   reachable. An inode line is written whole only before its first
//!   publish; afterwards the persister updates single words (link count,
//!   size, root, parent, mtime, the head word holding kind and
//!   permissions), each failure-atomic, and the two that must agree, root
//!   and size, are stored root first in the same line, which persists in
//!   store order (rule M1), so a size never persists without its root.
//! - The latest next pointers and latest buckets live in DRAM (the
//!   paper keeps latest next in NVM with an epoch, L166-L171, and calls the
//!   DRAM alternative more complex, L235-L239); so no epoch is needed and
//!   the only PM writes are to persistent state.
//! - A directory's latest view is a DRAM map by name (the paper's
//!   latest buckets and latest next pointers, L172-L182, give the same
//!   view without touching the consistent lists; the consistent lists
//!   are shadowed per bucket in DRAM for the persister).
//! - Files map blocks through one index page (512 blocks, 2 MiB), not a
//!   B-tree; blocks past a truncated size are reclaimed right after the
//!   smaller size is persisted, not kept for later growth.
//! - A dentry takes a whole 64-byte line (the paper's 32 bytes), with no
//!   name bytes inlined; freed lines are not merged back into pages.
//! - One persister (the machine is one NUMA node) and one lock over the
//!   DRAM state, which the persister takes per operation; the paper locks
//!   per inode.
//! - A directory's link count counts its names only (no `.`/`..`); a crash
//!   inside a directory's rename across directories can leave it with
//!   two names (counted in [`MountReport::multi_named_dirs`]), as the
//!   link-count ordering of soft updates allows.
//! - A system call's CPU time is one system call and the DRAM work it
//!   counts (entries probed or changed, inodes, lines and pages
//!   allocated), at the shared cost table ([`fsapi::CpuCosts`], set in
//!   [`SoupProfile::cpu`]); the persister's DRAM work is not charged (it
//!   runs on a core of its own). The table itemizes less than Linux's
//!   create path, so the paper's 3 µs create (S4) is not reached.
//! - `fsync` finds a file's directories by scanning the DRAM directories
//!   (the paper does not say how); no open-file handles: an inode with no
//!   name left is freed.

mod alloc;
mod crash;
mod data;
pub mod error;
mod fs;
pub mod layout;
mod mount;
mod ops;
mod persister;
mod pm;
mod state;

fsapi::delegate_file_system!(SoupFs, Ino, FsError);

pub use error::FsError;
pub use fs::{SoupFs, SoupProfile};
pub use fsapi::{Ctx, FileSystem};
pub use mount::MountReport;
pub use ops::Attr;
pub use pm::Faults;
pub use state::{Ino, PersistStats};
