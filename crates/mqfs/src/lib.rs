//! # MQFS
#![deny(unsafe_code)]

pub mod cache;
pub mod data;
pub mod dir;
pub mod error;
pub mod fs;
pub mod fsck;
pub mod journal;
pub mod layout;
pub mod mount;
pub mod ops;
pub mod paths;
pub mod profile;
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::FsError;
pub use fs::{Ctx, Fs, Ino};
pub use fsck::{fsck, BlockSource, Finding, FindingKind, Report, Severity};
pub use journal::mq::{MqOptions, RecoveryRule, SyncKind};
pub use layout::{FileType, Mode};
pub use mount::{mkfs, mount, probe_options, MkfsOptions};
pub use ops::{Attr, SetAttr, StatFs};
pub use profile::FsProfile;
