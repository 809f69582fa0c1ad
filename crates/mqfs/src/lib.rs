//! # MQFS: the file system, in the four modes the ccNVMe paper compares
//!
//! An Ext4-like file system (block groups, inodes, extents, linear and
//! hash-indexed directories ([`htree`]), a buffer and a page cache) whose crash consistency comes
//! from one of four [`Mode`]s:
//!
//! - `none` (Ext4-NJ): fsync writes the data, the inode's own metadata
//!   and a new name's directory in place, in turn, then flushes; bitmaps
//!   go home by periodic writeback ([`flusher`]); not crash consistent,
//!   the paper's upper bound;
//! - `classic` (Ext4 with JBD2): ordered metadata journaling committed by a
//!   journal thread, checkpoint and revoke as Linux does;
//! - `horae` (HoraeFS): the same journal, ordered by the Horae ordering
//!   queue instead of FLUSH; on one drive, or on a volume striped over 2
//!   to 4 drives with one ordering stream over them ([`volume`],
//!   [`mkfs_volume`], [`mount_volume`]);
//! - `mq` (MQFS, ccNVMe section 5): per-core journal areas written as
//!   ccNVMe transactions, per-inode transactions with entanglement,
//!   metadata shadow paging, selective revocation, checkpoint by durable
//!   prefix, and fatomic / fdataatomic.
//!
//! ## The contract
//!
//! - Operations are inode-based ([`ops`]) so a FUSE adapter can sit on
//!   top; path helpers are in [`paths`]. [`Fs`] implements the shared
//!   file-system interface, [`fsapi::FileSystem`] ([`file_system`]), whose
//!   POSIX checks (`fsapi::testing::posix`) it runs in each mode as the
//!   file systems on persistent memory do; the calling thread is
//!   [`fsapi::Ctx`] ([`Ctx`]). Permission rules (owner, group,
//!   mode, sticky and set-ID bits) are pure functions in [`perm`], for a
//!   front end serving several users to ask. Errors are [`FsError`], each with
//!   its POSIX errno (and its [`fsapi::ErrorKind`]); bad on-disk input is an
//!   error, never a panic.
//! - fsync makes a file's data and metadata durable, and its names in
//!   directories that are themselves durable; fdatasync skips a
//!   timestamp-only inode change; a directory fsync makes its entries
//!   durable; sync makes everything durable; fatomic and fdataatomic make
//!   the same blocks atomic (all or nothing) without waiting for
//!   durability in `mq` mode ([`sync`]). Extended attributes ([`xattr`])
//!   and fallocate's allocations ([`falloc`]) are metadata: fsync makes
//!   them durable with the inode.
//! - A file unlinked while open ([`Fs::open`]) lives until its last
//!   close; after a crash, mount frees it ([`orphan`]). O_DIRECT writes
//!   and sync_file_range write data home without a FLUSH; the next fsync
//!   sends one ([`direct`]).
//! - In the journaled modes every crash state recovers ([`mount()`]) to an
//!   image [`fsck()`] finds clean, holding every promise above.
//! - The drive is reached only through `ccnvme`'s block layer; [`fsck()`]
//!   reads any [`BlockSource`].
//! - Determinism: the same operations on the same machine give the same
//!   bus trace.
//!
//! The decisions the paper leaves open are in `docs/decisions.md` (M and E
//! items).
#![deny(unsafe_code)]

pub mod cache;
pub mod data;
pub mod dir;
mod dir_index;
pub mod direct;
pub mod dirty;
pub mod error;
pub mod extent_tree;
pub mod falloc;
pub mod file_system;
pub mod flusher;
pub mod fs;
pub mod fsck;
pub mod htree;
pub mod journal;
pub mod layout;
pub mod mballoc;
pub mod mount;
pub mod ops;
pub mod orphan;
pub mod paths;
pub mod perm;
pub mod profile;
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;
pub mod volume;
pub mod xattr;

pub use error::FsError;
pub use falloc::FallocMode;
pub use fs::{Ctx, Fs, Ino};
pub use fsck::{fsck, BlockSource, Finding, FindingKind, Report, Severity};
pub use journal::jbd::JbdCommit;
pub use journal::mq::{MqOptions, RecoveryRule, Streams, SyncKind};
pub use journal::{DamageKind, JournalDamage, JournalLogArea};
pub use layout::{FileType, Mode};
pub use mount::{
    horae_recovery, mkfs, mkfs_volume, mount, mount_devices, mount_volume, probe_options, probe_options_for,
    MkfsOptions, StripeOptions,
};
pub use ops::{Attr, NewInode, SetAttr, StatFs};
pub use perm::Cred;
pub use profile::FsProfile;
pub use xattr::XattrFlags;
