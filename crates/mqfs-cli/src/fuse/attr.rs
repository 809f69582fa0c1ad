//! Between MQFS and FUSE: inode numbers, attributes, times, file types and
//! the names reserved in the root.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, FUSE_ROOT_ID};
use mqfs::layout::ROOT_INO;
use mqfs::{Attr, Ino};

/// The hidden control directory in the root.
pub const CONTROL_NAME: &str = ".mqfs";
/// The stats file in the control directory.
pub const STATS_NAME: &str = "stats";
/// FUSE inode of the control directory (above every MQFS inode number).
pub const CONTROL_DIR: u64 = 1 << 32;
/// FUSE inode of the stats file.
pub const STATS_FILE: u64 = CONTROL_DIR + 1;

/// True for the names the root reserves.
pub fn reserved(parent: u64, name: &str) -> bool {
    parent == FUSE_ROOT_ID && name == CONTROL_NAME
}

/// True for the control directory's inodes.
pub fn is_control(ino: u64) -> bool {
    ino == CONTROL_DIR || ino == STATS_FILE
}

/// The FUSE inode of an MQFS inode (the root is FUSE's 1).
pub fn to_fuse(ino: Ino) -> u64 {
    if ino == ROOT_INO {
        FUSE_ROOT_ID
    } else {
        ino as u64
    }
}

/// The MQFS inode of a FUSE inode (`None` for numbers never handed out).
pub fn from_fuse(ino: u64) -> Option<Ino> {
    if ino == FUSE_ROOT_ID {
        Some(ROOT_INO)
    } else if ino == ROOT_INO as u64 {
        None
    } else {
        Ino::try_from(ino).ok()
    }
}

/// A time stored as nanoseconds since the epoch.
pub fn time_of(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Nanoseconds since the epoch (0 before it, saturating far after it).
pub fn ns_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The FUSE file type.
pub fn kind(t: mqfs::FileType) -> FileType {
    match t {
        mqfs::FileType::File => FileType::RegularFile,
        mqfs::FileType::Dir => FileType::Directory,
        mqfs::FileType::Symlink => FileType::Symlink,
        mqfs::FileType::Fifo => FileType::NamedPipe,
        mqfs::FileType::CharDev => FileType::CharDevice,
        mqfs::FileType::BlockDev => FileType::BlockDevice,
        mqfs::FileType::Socket => FileType::Socket,
    }
}

/// The FUSE attributes of an inode.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: to_fuse(a.ino),
        size: a.size,
        blocks: a.blocks * 8,
        atime: time_of(a.atime),
        mtime: time_of(a.mtime),
        ctime: time_of(a.ctime),
        crtime: time_of(a.ctime),
        kind: kind(a.ftype),
        perm: a.perm,
        nlink: a.links as u32,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: mqfs::layout::BLOCK as u32,
        flags: 0,
    }
}

/// Attributes of a control inode (read-only, owned by the mounting user).
pub fn control_attr(ino: u64, uid: u32, gid: u32, now: SystemTime) -> FileAttr {
    let dir = ino == CONTROL_DIR;
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if dir { 0o555 } else { 0o444 },
        nlink: if dir { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_map_both_ways() {
        assert_eq!(to_fuse(ROOT_INO), FUSE_ROOT_ID);
        assert_eq!(from_fuse(FUSE_ROOT_ID), Some(ROOT_INO));
        assert_eq!(from_fuse(ROOT_INO as u64), None);
        assert_eq!(from_fuse(to_fuse(77)), Some(77));
        assert_eq!(from_fuse(CONTROL_DIR), None);
        assert!(reserved(FUSE_ROOT_ID, ".mqfs") && !reserved(5, ".mqfs"));
    }

    #[test]
    fn times_round_trip() {
        assert_eq!(ns_of(time_of(1_234_567_891)), 1_234_567_891);
        assert_eq!(ns_of(UNIX_EPOCH - Duration::from_secs(5)), 0);
    }
}
