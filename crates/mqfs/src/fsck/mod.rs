//! fsck: a full structural check of an MQFS image, returning typed
//! findings; [`repair`] fixes what can be fixed without guessing.
//!
//! What is checked, in this order:
//!
//! 1. the superblock (magic, checksum, geometry): failing it means there is
//!    no file system to check, and [`fsck`] returns `Err`;
//! 2. every group's bitmaps: group metadata marked in use, the padding
//!    past the group's end and the reserved inodes marked;
//! 3. the journal areas' superblocks;
//! 4. every inode marked in an inode bitmap (and the root): checksum, type,
//!    flags, the extent tree (block headers, depths, keys sorted and
//!    inside their index entry's range, index keys equal to their child's
//!    first key, each tree block claimed once and counted in the block
//!    count), extents (unwritten ones only in regular files), sizes, block counts, symlink targets, the extended
//!    attribute block (in range, well formed); each block an inode maps or
//!    points to is claimed once, so a block owned twice is seen;
//! 5. the namespace, from the root through every directory it reaches:
//!    directory blocks, entries (inode numbers, types, names, duplicates,
//!    "." and ".."), an indexed directory's index (`dirindex`), loops and
//!    directory hard links; inodes reached but
//!    free in the bitmap are checked on the way;
//! 6. link counts against the entries found, and both bitmaps against the
//!    blocks and inodes found (leaks and orphans are warnings, a used block
//!    or inode marked free is an error; an inode with no link listed in
//!    the orphan table, a file unlinked while open, is neither: mount
//!    frees it, see [`crate::orphan`]).
//!
//! fsck reads home locations only: it does not replay a journal, so an
//! image of a journaled mode that was not unmounted cleanly should be
//! checked after its recovery (a mount).
//!
//! Every length, count and block number read from the image is untrusted:
//! arithmetic on them is checked, indexing is bounded, every loop is
//! bounded by the image's size, so a damaged image gives findings and never
//! a panic or a hang. The check is fast enough to run on every crash state
//! a crash explorer builds: each block is read at most once (except blocks
//! found owned twice), sets are bit vectors, and nothing is allocated per
//! block in the common case.

use std::collections::BTreeMap;
use std::fmt;

use crate::data::MAX_FILE;
use crate::error::FsError;
use crate::extent_tree::ExtentTree;
use crate::journal::format::AreaSuper;
use crate::layout::{
    crc, decode_node, decode_orphans, decode_xattr_block, dirent_len, Extent, FileType, Inode, Mode,
    Superblock, BLOCK, DIR_SPACE, DIR_TAIL, FIRST_INO, FLAG_INDEX, FLAG_INLINE_SYMLINK, INLINE_SYMLINK,
    INODES_PER_BLOCK, INODE_SIZE, ORPHAN_INO, ROOT_INO,
};

mod checker;
mod dirindex;
mod namespace;
pub mod repair;
mod source;
mod util;

use checker::Checker;
pub use repair::{plan_repair, RepairPlan, Repaired};
pub use source::BlockSource;
use util::*;

/// How bad a finding is.
///
/// An **error** loses or corrupts data, or could make a later operation
/// corrupt the file system (hand out a block or inode still in use, follow
/// a wrong pointer, free something still referenced). A **warning** is
/// space leaked or a count that e2fsck would fix without asking; no data
/// is lost and no later operation goes wrong because of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Data lost or corrupted, or a later operation could corrupt more.
    Error,
    /// Space leaked or a count off; harmless.
    Warning,
}

/// What a finding is about. Each kind's doc comment gives its severity and
/// why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// **Error.** An inode in use (marked in its bitmap, or reached from a
    /// directory) fails its checksum: the file system refuses to load it,
    /// so its data and, for a directory, everything below it are lost.
    InodeChecksum,
    /// **Error.** An inode in use is malformed: a mode without a file type,
    /// a bad extent header, zero-length, overlapping, unordered or
    /// overflowing extents, the inline-symlink flag on a file or directory
    /// (its extents are then ignored), a symlink whose size or mapping is
    /// impossible, or a size beyond the largest file. Reads return wrong
    /// data or fail, and truncation or unlink would free wrong blocks.
    BadInode,
    /// **Error.** The extent tree is damaged: a tree block fails its magic,
    /// checksum, depth (not its parent's minus one), max or entry count,
    /// or the tree's keys are out of order or outside their index entry's
    /// range, an index key is not its child's first key, or a block is
    /// named twice (a loop). The extents under the damage are lost.
    BadExtentTree,
    /// **Error.** An extent, extent-tree block or xattr-block pointer lies
    /// outside one group's data area (in group metadata, the journal, or
    /// past the device): writing the file would overwrite metadata.
    ExtentOutOfRange,
    /// **Error.** An inode's extended-attribute block fails to decode
    /// (magic, checksum, refcount, entry lengths, name index, names out of
    /// order): every attribute of the inode is lost and each xattr
    /// operation on it fails.
    XattrBlockCorrupt,
    /// **Error.** A block mapped twice (by two inodes, or twice by one):
    /// writing one file changes the other, and freeing one frees the other's
    /// block.
    BlockOwnedTwice,
    /// **Error.** A block in use (owned by an inode, or group metadata) is
    /// free in its bitmap: the allocator will hand it out again and two
    /// owners will overwrite each other.
    BlockUsedButFree,
    /// **Warning.** A data block marked in use that nothing owns: space
    /// leaked (e2fsck frees it without asking).
    BlockMarkedButUnused,
    /// **Warning.** Bitmap bits MQFS never allocates are clear: the padding
    /// past a group's last block or last inode, or a reserved inode (1 to
    /// 10). The allocators never look at them, so nothing goes wrong.
    BitmapPadding,
    /// **Error.** An inode reached from a directory is free in its bitmap:
    /// the allocator will reuse its number and the entry will then name a
    /// different file.
    InodeUsedButFree,
    /// **Warning.** An inode marked in use that no directory reaches (an
    /// orphan, or a free slot still marked): its number and blocks are
    /// leaked, nothing else is affected (e2fsck moves it to lost+found or
    /// frees it).
    InodeMarkedButUnreachable,
    /// **Error.** A directory block fails to decode (checksum tail, record
    /// lengths, file type, empty name): every entry in it is lost and every
    /// operation on the directory fails.
    DirBlockCorrupt,
    /// **Error.** An indexed directory's index is damaged (root or node
    /// undecodable, a child out of range or referenced twice, hashes out
    /// of order, an entry in a leaf its hash does not lead to, a leaf
    /// holding entries that no index entry reaches): lookups miss entries
    /// that readdir lists, and a create could add a second one.
    DirIndexCorrupt,
    /// **Error.** A directory's size is not a whole number of blocks (or is
    /// zero), a block inside it is unmapped, or a block is mapped past its
    /// size: the file system refuses the directory, or a later entry is
    /// added to a second mapping of an existing block and lost.
    DirSize,
    /// **Error.** A directory entry names an inode that is out of range,
    /// reserved, or free: following it fails, and the number may be handed
    /// to a new file.
    DirEntryBadInode,
    /// **Error.** A directory entry's file type differs from its inode's
    /// (or "." / ".." is not a directory): unlink, rmdir and rename decide
    /// by the entry's type, so a directory could be unlinked as a file
    /// (leaving its children unreachable) or the reverse.
    DirEntryBadType,
    /// **Error.** A name no path can reach: it contains '/' or NUL, is not
    /// UTF-8, or is "." or ".." outside their role. The entry can never be
    /// looked up or removed, nor its directory removed.
    DirEntryBadName,
    /// **Error.** Two entries with one name in a directory: lookup sees the
    /// first only, and removing it exposes the other.
    DirDuplicateName,
    /// **Error.** A directory has no "." or it names another inode.
    DirMissingDot,
    /// **Error.** A directory has no "..", or it does not name the
    /// directory that holds it: the loop check of rename walks "..", so a
    /// wrong one lets a rename detach a subtree into a loop.
    DirBadDotDot,
    /// **Error.** An inode records fewer links than entries name it: a
    /// future unlink frees it while entries still point to it.
    LinkCountTooLow,
    /// **Warning.** An inode records more links than entries name it: it
    /// will never be freed (a leak); e2fsck fixes the count silently.
    LinkCountTooHigh,
    /// **Error.** A directory entry names an ancestor of its directory (or
    /// the directory itself): the tree has a cycle, which path walks and
    /// the rename loop check cannot handle.
    DirectoryLoop,
    /// **Error.** A second entry names a directory (not an ancestor): rmdir
    /// through one name leaves the other pointing to a freed inode.
    DirectoryHardLink,
    /// **Error.** The root inode is not a directory (or is free or
    /// damaged): mount fails and everything is lost.
    RootNotDir,
    /// **Warning.** A regular file maps written blocks past its end of file
    /// (unwritten ones, fallocate's `KEEP_SIZE` preallocation, are fine). Reads
    /// are unaffected; an extending truncate would expose the blocks' old
    /// contents instead of zeros.
    BlocksPastEof,
    /// **Warning.** An inode's block count differs from the blocks it maps
    /// (what `stat` reports); e2fsck fixes it silently.
    BlockCountWrong,
    /// **Error.** A symbolic link's target is not UTF-8 or contains NUL
    /// (typically its block was never written): readlink fails or returns
    /// garbage.
    SymlinkBadTarget,
    /// **Error** (a **warning** in mode `none`, which never reads it): a
    /// journal area's superblock fails to decode, so mount (recovery)
    /// fails.
    JournalSuperCorrupt,
    /// **Error.** A recovery found journal transactions written whole but
    /// damaged (a block failing its checksum) and replayed none of them
    /// nor anything logged after them (the superblock's `journal_damage`
    /// counts them, as ext4's `EXT4_ERROR_FS` flag records a failed JBD2
    /// commit): what was synced in them is lost.
    JournalDamaged,
}

impl FindingKind {
    /// The kind's severity (see each kind; [`FindingKind::JournalSuperCorrupt`]
    /// is a warning in mode `none`).
    pub fn severity(self) -> Severity {
        match self {
            FindingKind::BlockMarkedButUnused
            | FindingKind::BitmapPadding
            | FindingKind::InodeMarkedButUnreachable
            | FindingKind::LinkCountTooHigh
            | FindingKind::BlocksPastEof
            | FindingKind::BlockCountWrong => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// One problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// What it is.
    pub kind: FindingKind,
    /// The inode it is about, if one (for a directory entry or block: the
    /// directory).
    pub ino: Option<u32>,
    /// The (first) block it is about, if one.
    pub block: Option<u64>,
    /// A human-readable account.
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev} {:?}", self.kind)?;
        if let Some(i) = self.ino {
            write!(f, " inode {i}")?;
        }
        if let Some(b) = self.block {
            write!(f, " block {b}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Counts of what the check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Regular files reachable from the root (each inode once, however
    /// many links it has).
    pub files: u64,
    /// Directories reachable from the root, the root included.
    pub dirs: u64,
    /// Symbolic links reachable from the root.
    pub symlinks: u64,
    /// Data-area blocks owned by inodes (file data, directory, extent-leaf,
    /// xattr and symlink blocks).
    pub used_blocks: u64,
    /// Inodes reachable from the root, the root included.
    pub used_inodes: u64,
    /// Data-area blocks in all (what `statfs` calls `blocks`).
    pub data_blocks: u64,
    /// Data-area blocks free in the bitmaps (`statfs`'s `free_blocks`).
    pub free_blocks: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Inodes free in the bitmaps (`statfs`'s `free_inodes`).
    pub free_inodes: u64,
    /// Blocks the check read.
    pub blocks_read: u64,
}

/// What a metadata block holds (see [`Options::collect_metadata`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetaKind {
    /// Block 0.
    Superblock,
    /// A group's block bitmap.
    BlockBitmap,
    /// A group's inode bitmap.
    InodeBitmap,
    /// An inode-table block holding at least one inode in use.
    InodeTable,
    /// A directory block of a reachable directory.
    Directory,
    /// An extent-tree block (index node or leaf).
    ExtentNode,
    /// An inode's extended-attribute block.
    Xattr,
    /// A journal area's superblock.
    JournalSuper,
}

/// A metadata block the check visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetaBlock {
    /// The block.
    pub block: u64,
    /// What it holds.
    pub kind: MetaKind,
}

/// Options of [`fsck_with`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// List the metadata blocks visited in [`Report::metadata`] (for tools
    /// that damage metadata on purpose).
    pub collect_metadata: bool,
    /// Most findings to keep (0: [`DEFAULT_MAX_FINDINGS`]); the rest are
    /// only counted.
    pub max_findings: usize,
}

/// Findings kept by default; more are counted in [`Report::suppressed`].
pub const DEFAULT_MAX_FINDINGS: usize = 1000;

/// The result of a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The superblock checked.
    pub superblock: Superblock,
    /// What was found, in the order found.
    pub findings: Vec<Finding>,
    /// Findings past the cap, counted but not kept.
    pub suppressed: u64,
    /// How many of the suppressed findings were errors.
    pub suppressed_errors: u64,
    /// Counts.
    pub stats: Stats,
    /// Metadata blocks visited (only with [`Options::collect_metadata`]).
    pub metadata: Vec<MetaBlock>,
}

impl Report {
    /// The error findings.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> + '_ {
        self.findings.iter().filter(|f| f.severity == Severity::Error)
    }

    /// The warning findings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> + '_ {
        self.findings.iter().filter(|f| f.severity == Severity::Warning)
    }

    /// True if nothing of error severity was found (warnings allowed).
    pub fn is_clean(&self) -> bool {
        self.suppressed_errors == 0 && self.errors().next().is_none()
    }

    /// True if nothing at all was found.
    pub fn is_spotless(&self) -> bool {
        self.findings.is_empty() && self.suppressed == 0
    }

    /// True if a finding of `kind` was kept.
    pub fn has(&self, kind: FindingKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }

    /// Kept findings of `kind`.
    pub fn count(&self, kind: FindingKind) -> usize {
        self.findings.iter().filter(|f| f.kind == kind).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.errors().count() as u64 + self.suppressed_errors;
        let w = self.findings.len() as u64 + self.suppressed - e;
        writeln!(
            f,
            "fsck ({} mode): {e} errors, {w} warnings; {} files, {} dirs, {} symlinks, {} blocks, {} inodes used",
            self.superblock.mode.name(),
            self.stats.files,
            self.stats.dirs,
            self.stats.symlinks,
            self.stats.used_blocks,
            self.stats.used_inodes
        )?;
        for x in &self.findings {
            writeln!(f, "  {x}")?;
        }
        if self.suppressed > 0 {
            writeln!(f, "  ... and {} more", self.suppressed)?;
        }
        Ok(())
    }
}

/// Checks the file system on `src`. `Err` only when there is no file system
/// to check: no MQFS magic in block 0 ([`FsError::NotMqfs`]) or a
/// superblock that fails validation ([`FsError::Corrupt`]); everything else
/// is a finding in the report.
pub fn fsck(src: &dyn BlockSource) -> Result<Report, FsError> {
    fsck_with(src, &Options::default())
}

/// [`fsck`] with options.
pub fn fsck_with(src: &dyn BlockSource, opts: &Options) -> Result<Report, FsError> {
    Ok(checked(src, opts)?.finish())
}

/// The checker after a full check of `src` (before its report is taken).
fn checked<'a>(src: &'a dyn BlockSource, opts: &Options) -> Result<Checker<'a>, FsError> {
    let mut buf = Box::new([0u8; BLOCK]);
    src.read(0, &mut buf);
    precheck_superblock(&buf[..])?;
    let sb = Superblock::decode(&buf[..], src.blocks())?;
    let mut c = Checker::new(src, sb, opts);
    c.blocks_read = 1;
    c.meta(MetaKind::Superblock, 0);
    c.run();
    Ok(c)
}

/// Rejects a sealed superblock whose journal geometry overflows u64 (a
/// debug-build panic in `Superblock::validate` before it used checked
/// arithmetic; kept so fsck never depends on that).
fn precheck_superblock(b: &[u8]) -> Result<(), FsError> {
    if rd_u64(b, 0) != crate::layout::SB_MAGIC {
        return Err(FsError::NotMqfs);
    }
    if b.len() < BLOCK || rd_u32(b, BLOCK - 4) != crc(&b[..BLOCK - 4]) {
        return Ok(()); // decode reports the checksum
    }
    let areas = rd_u32(b, 56) as u64;
    let area_blocks = rd_u64(b, 64);
    let start = rd_u64(b, 48);
    if areas
        .checked_mul(area_blocks)
        .and_then(|j| start.checked_add(j))
        .is_none()
    {
        return Err(FsError::Corrupt("superblock: journal overflows".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{decode_dir_block, encode_dir_block, DirEntry};

    fn block() -> Box<[u8; BLOCK]> {
        let e: Vec<DirEntry> = (0..40u32)
            .map(|i| DirEntry {
                ino: 11 + i,
                ftype: if i % 3 == 0 { FileType::Dir } else { FileType::File },
                name: format!("entry-{i}").into_bytes(),
            })
            .collect();
        encode_dir_block(&e).unwrap()
    }

    #[test]
    fn dir_parser_agrees_with_layout_on_damaged_blocks() {
        let base = block();
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut ents = Vec::new();
        let mut names = Vec::new();
        for round in 0..4000 {
            let mut b = base.clone();
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                // Mostly headers (the first 600 bytes), sometimes anywhere.
                let o = if next() % 4 == 0 {
                    next() % BLOCK as u64
                } else {
                    next() % 600
                } as usize;
                b[o] ^= (next() % 255 + 1) as u8;
            }
            if round % 2 == 0 {
                let c = crc(&b[..DIR_SPACE]);
                b[DIR_SPACE + 8..DIR_SPACE + 12].copy_from_slice(&c.to_le_bytes());
            }
            names.clear();
            let mine = parse_dir_block(&b, &mut ents, &mut names);
            let theirs = decode_dir_block(&b[..]);
            match (&mine, &theirs) {
                (Ok(()), Ok(v)) => {
                    assert_eq!(ents.len(), v.len());
                    for (a, e) in ents.iter().zip(v) {
                        assert_eq!(a.ino, e.ino);
                        assert_eq!(a.ftype, e.ftype);
                        let n = &names[a.name_at as usize..a.name_at as usize + a.name_len as usize];
                        assert_eq!(n, &e.name[..]);
                    }
                }
                (Err(_), Err(_)) => assert!(ents.is_empty() && names.is_empty()),
                _ => panic!("round {round}: parser {mine:?} vs layout {theirs:?}"),
            }
        }
    }

    #[test]
    fn bit_helpers() {
        let mut b = Bits::new(300);
        b.set_range(3, 130);
        assert!(b.get(3) && b.get(132) && !b.get(2) && !b.get(133));
        assert_eq!(b.count(), 130);
        assert!(b.any_in(132, 10) && !b.any_in(133, 100));
        assert_eq!(b.get64(3), !0);
        assert_eq!(b.get64(100), ones(33));
        let mut c = Bits::new(300);
        c.or64(70, 0b1011);
        assert!(c.get(70) && c.get(71) && !c.get(72) && c.get(73));
        c.or64(250, ones(50));
        assert_eq!(c.count(), 3 + 50);
        let mut got = Vec::new();
        runs([0b0110u64, 1 << 63, 1].into_iter(), |a, b| got.push((a, b)));
        assert_eq!(got, vec![(1, 2), (127, 128)]);
        assert_eq!(bits_at(&[0xff, 0x01], 4), 0x1f);
        assert_eq!(bits_at(&[0xff; 4], 30), 0b11);
    }
}
