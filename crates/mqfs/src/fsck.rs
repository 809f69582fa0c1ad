//! fsck: a full structural check of an MQFS image, returning typed
//! findings instead of repairing anything.
//!
//! What is checked, in this order:
//!
//! 1. the superblock (magic, checksum, geometry): failing it means there is
//!    no file system to check, and [`fsck`] returns `Err`;
//! 2. every group's bitmaps: group metadata marked in use, the padding
//!    past the group's end and the reserved inodes marked;
//! 3. the journal areas' superblocks;
//! 4. every inode marked in an inode bitmap (and the root): checksum, type,
//!    flags, extents (inline or in the leaf block), sizes, block counts,
//!    symlink targets; each block an inode maps is claimed once, so a
//!    block owned twice is seen;
//! 5. the namespace, from the root through every directory it reaches:
//!    directory blocks, entries (inode numbers, types, names, duplicates,
//!    "." and ".."), loops and directory hard links; inodes reached but
//!    free in the bitmap are checked on the way;
//! 6. link counts against the entries found, and both bitmaps against the
//!    blocks and inodes found (leaks and orphans are warnings, a used block
//!    or inode marked free is an error).
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

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use crate::data::MAX_FILE;
use crate::error::FsError;
use crate::journal::format::AreaSuper;
use crate::layout::{
    crc, decode_leaf, dirent_len, Extent, FileType, Inode, Mode, Superblock, BLOCK, DIR_SPACE, DIR_TAIL,
    FIRST_INO, FLAG_INLINE_SYMLINK, INLINE_SYMLINK, INODES_PER_BLOCK, INODE_SIZE, ROOT_INO,
};

/// Where fsck reads blocks from.
pub trait BlockSource {
    /// Blocks the source holds.
    fn blocks(&self) -> u64;
    /// Copies block `block` into `buf` (zeros past the end).
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]);
}

/// A drive's current content as its controller would return it (the
/// write cache where newer, else the media), without simulated time.
impl BlockSource for nvme_ctrl::Backend {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Backend::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        self.peek(block, buf);
    }
}

impl BlockSource for nvme_ctrl::Media {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Media::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        nvme_ctrl::Media::read(self, block, buf);
    }
}

impl BlockSource for nvme_ctrl::Image {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Image::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        nvme_ctrl::Image::read(self, block, buf);
    }
}

/// A raw image: block `b` at byte `b * 4096` (a short last block is
/// ignored).
impl BlockSource for [u8] {
    fn blocks(&self) -> u64 {
        (self.len() / BLOCK) as u64
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        let src = usize::try_from(block)
            .ok()
            .and_then(|b| b.checked_mul(BLOCK))
            .and_then(|o| self.get(o..o.checked_add(BLOCK)?));
        match src {
            Some(s) => buf.copy_from_slice(s),
            None => buf.fill(0),
        }
    }
}

impl BlockSource for Vec<u8> {
    fn blocks(&self) -> u64 {
        self.as_slice().blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        self.as_slice().read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for &T {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Rc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Arc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}

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
    /// **Error.** An extent leaf block fails its magic, count or checksum:
    /// every extent of the file is lost.
    BadExtentLeaf,
    /// **Error.** An extent or extent-leaf pointer lies outside one group's
    /// data area (in group metadata, the journal, or past the device):
    /// writing the file would overwrite metadata.
    ExtentOutOfRange,
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
    /// **Warning.** A regular file maps blocks past its end of file. Reads
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
    /// Data-area blocks owned by inodes (file data, directory, extent-leaf
    /// and symlink blocks).
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
    /// An extent leaf block.
    ExtentLeaf,
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
    let mut buf = Box::new([0u8; BLOCK]);
    src.read(0, &mut buf);
    precheck_superblock(&buf[..])?;
    let sb = Superblock::decode(&buf[..], src.blocks())?;
    let mut c = Checker::new(src, sb, opts);
    c.blocks_read = 1;
    c.meta(MetaKind::Superblock, 0);
    c.run();
    Ok(c.finish())
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

// ---- small helpers ----

fn rd_u16(b: &[u8], o: usize) -> u16 {
    match b.get(o..o.saturating_add(2)) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn rd_u32(b: &[u8], o: usize) -> u32 {
    match b.get(o..o.saturating_add(4)) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

fn rd_u64(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    if let Some(s) = b.get(o..o.saturating_add(8)) {
        x.copy_from_slice(s);
    }
    u64::from_le_bytes(x)
}

/// The low `k` bits set (k <= 64).
fn ones(k: u64) -> u64 {
    if k >= 64 {
        !0
    } else {
        (1u64 << k) - 1
    }
}

/// 64 bits of a byte bitmap starting at bit `bit` (zeros past the end).
fn bits_at(src: &[u8], bit: u64) -> u64 {
    let byte = (bit / 8) as usize;
    let sh = (bit % 8) as u32;
    if let Some(s) = byte.checked_add(8).and_then(|e| src.get(byte..e)) {
        let mut x = [0u8; 8];
        x.copy_from_slice(s);
        let lo = u64::from_le_bytes(x) >> sh;
        if sh == 0 {
            return lo;
        }
        let hi = src.get(byte + 8).copied().unwrap_or(0) as u64;
        return lo | hi << (64 - sh);
    }
    let mut x = [0u8; 16];
    if byte < src.len() {
        let end = byte.saturating_add(9).min(src.len());
        x[..end - byte].copy_from_slice(&src[byte..end]);
    }
    (u128::from_le_bytes(x) >> sh) as u64
}

/// Clear bits of a byte bitmap in `[a, b)`: how many, and the first.
fn clear_bits(src: &[u8], a: u64, b: u64) -> (u64, Option<u64>) {
    let mut count = 0u64;
    let mut first = None;
    let mut i = a;
    while i < b {
        let k = (b - i).min(64);
        let clear = !bits_at(src, i) & ones(k);
        if clear != 0 {
            first.get_or_insert(i + clear.trailing_zeros() as u64);
            count += clear.count_ones() as u64;
        }
        i += k;
    }
    (count, first)
}

/// A fixed-size bit vector.
#[derive(Debug, Default)]
struct Bits {
    w: Vec<u64>,
}

impl Bits {
    fn new(n: u64) -> Bits {
        Bits {
            w: vec![0; n.div_ceil(64) as usize],
        }
    }

    fn get(&self, i: u64) -> bool {
        self.w
            .get((i / 64) as usize)
            .is_some_and(|x| (x >> (i % 64)) & 1 == 1)
    }

    fn set(&mut self, i: u64) {
        if let Some(x) = self.w.get_mut((i / 64) as usize) {
            *x |= 1 << (i % 64);
        }
    }

    /// 64 bits starting at bit `i`.
    fn get64(&self, i: u64) -> u64 {
        let wi = (i / 64) as usize;
        let sh = i % 64;
        let lo = self.w.get(wi).copied().unwrap_or(0) >> sh;
        if sh == 0 {
            lo
        } else {
            lo | self.w.get(wi + 1).copied().unwrap_or(0) << (64 - sh)
        }
    }

    /// ORs `v` into the bits starting at `i`.
    fn or64(&mut self, i: u64, v: u64) {
        let wi = (i / 64) as usize;
        let sh = i % 64;
        if let Some(x) = self.w.get_mut(wi) {
            *x |= v << sh;
        }
        if sh != 0 {
            if let Some(x) = self.w.get_mut(wi + 1) {
                *x |= v >> (64 - sh);
            }
        }
    }

    /// Calls `f(word index, mask)` for the words of `[start, start + len)`.
    fn for_range(start: u64, len: u64, mut f: impl FnMut(usize, u64)) {
        let end = start.saturating_add(len);
        let mut i = start;
        while i < end {
            let wi = i / 64;
            let lo = i % 64;
            let hi = (end - wi * 64).min(64);
            f(wi as usize, ones(hi) & !ones(lo));
            i = wi * 64 + hi;
        }
    }

    fn any_in(&self, start: u64, len: u64) -> bool {
        let mut any = false;
        Bits::for_range(start, len, |wi, m| {
            any |= self.w.get(wi).is_some_and(|x| x & m != 0);
        });
        any
    }

    fn set_range(&mut self, start: u64, len: u64) {
        let w = &mut self.w;
        Bits::for_range(start, len, |wi, m| {
            if let Some(x) = w.get_mut(wi) {
                *x |= m;
            }
        });
    }

    fn count(&self) -> u64 {
        self.w.iter().map(|x| x.count_ones() as u64).sum()
    }
}

/// Runs of set bits `[a, b]` in `words` (bit i of word k is item 64k+i),
/// each run reported once.
fn runs(words: impl Iterator<Item = u64>, mut f: impl FnMut(u64, u64)) {
    let mut run: Option<(u64, u64)> = None;
    for (k, mut x) in words.enumerate() {
        while x != 0 {
            let t = x.trailing_zeros() as u64;
            let i = k as u64 * 64 + t;
            x &= x - 1;
            run = match run {
                Some((a, b)) if b + 1 == i => Some((a, i)),
                Some((a, b)) => {
                    f(a, b);
                    Some((i, i))
                }
                None => Some((i, i)),
            };
        }
    }
    if let Some((a, b)) = run {
        f(a, b);
    }
}

fn range_text(a: u64, b: u64) -> String {
    if a == b {
        format!("block {a}")
    } else {
        format!("blocks {a}..={b} ({} blocks)", b - a + 1)
    }
}

/// A hash of a name (8 bytes at a time; only equal hashes are compared).
fn name_hash(n: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = n.len() as u64;
    let mut chunks = n.chunks_exact(8);
    for c in &mut chunks {
        let mut x = [0u8; 8];
        x.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(x)).wrapping_mul(K).rotate_left(29);
    }
    let mut x = [0u8; 8];
    x[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    (h ^ u64::from_le_bytes(x)).wrapping_mul(K)
}

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && !n.contains(&b'/') && !n.contains(&0) && std::str::from_utf8(n).is_ok()
}

fn valid_target(t: &[u8]) -> bool {
    !t.is_empty() && !t.contains(&0) && std::str::from_utf8(t).is_ok()
}

/// One live entry of a directory block (its name is in `Checker::names`).
#[derive(Clone, Copy, Debug)]
struct Ent {
    ino: u32,
    ftype: FileType,
    name_at: u32,
    name_len: u8,
}

/// Parses a directory block exactly as `layout::decode_dir_block` does
/// (same checks, same verdict), appending the live entries to `out` and
/// their names to `names` without allocating per entry.
fn parse_dir_block(b: &[u8; BLOCK], out: &mut Vec<Ent>, names: &mut Vec<u8>) -> Result<(), &'static str> {
    out.clear();
    if b[DIR_SPACE + 7] != 0xDE || rd_u16(b, DIR_SPACE + 4) != DIR_TAIL as u16 {
        return Err("no checksum tail");
    }
    if rd_u32(b, DIR_SPACE + 8) != crc(&b[..DIR_SPACE]) {
        return Err("checksum mismatch");
    }
    let mark = names.len();
    let mut off = 0usize;
    fn fail(
        names: &mut Vec<u8>,
        mark: usize,
        out: &mut Vec<Ent>,
        w: &'static str,
    ) -> Result<(), &'static str> {
        names.truncate(mark);
        out.clear();
        Err(w)
    }
    while off < DIR_SPACE {
        if off + 8 > DIR_SPACE {
            return fail(names, mark, out, "entry header past the end");
        }
        let ino = rd_u32(b, off);
        let rec = rd_u16(b, off + 4) as usize;
        let nlen = b[off + 6] as usize;
        if rec < 8 || rec % 4 != 0 || off + rec > DIR_SPACE || (ino != 0 && dirent_len(nlen) > rec) {
            return fail(names, mark, out, "bad record length");
        }
        if ino != 0 {
            let Some(ftype) = FileType::from_dirent_code(b[off + 7]) else {
                return fail(names, mark, out, "bad file type");
            };
            if nlen == 0 {
                return fail(names, mark, out, "empty name");
            }
            out.push(Ent {
                ino,
                ftype,
                name_at: names.len() as u32,
                name_len: nlen as u8,
            });
            names.extend_from_slice(&b[off + 8..off + 8 + nlen]);
        }
        off += rec;
    }
    Ok(())
}

/// What an inode turned out to be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    /// Not looked at yet.
    #[default]
    Unseen,
    /// A free slot.
    Free,
    /// Damaged (a finding says how).
    Bad,
    File,
    Dir,
    Symlink,
}

impl Kind {
    fn of(t: FileType) -> Kind {
        match t {
            FileType::File => Kind::File,
            FileType::Dir => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
        }
    }
    fn file_type(self) -> Option<FileType> {
        match self {
            Kind::File => Some(FileType::File),
            Kind::Dir => Some(FileType::Dir),
            Kind::Symlink => Some(FileType::Symlink),
            _ => None,
        }
    }
    fn live(self) -> bool {
        self.file_type().is_some()
    }
}

const REACHED: u8 = 1;
const DISCOVERED: u8 = 2;
const NO_DIR: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct InoInfo {
    kind: Kind,
    flags: u8,
    links: u16,
    refs: u32,
    /// Index in `Checker::dirs` (directories only).
    dir: u32,
}

impl Default for InoInfo {
    fn default() -> Self {
        InoInfo {
            kind: Kind::Unseen,
            flags: 0,
            links: 0,
            refs: 0,
            dir: NO_DIR,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct DirRec {
    /// Its valid extents: `Checker::dir_ext[ext_at..ext_at + ext_len]`.
    ext_at: u32,
    ext_len: u32,
    /// Blocks its size covers.
    nblocks: u64,
    /// The directory it was first reached from (the root: itself).
    parent: u32,
}

/// Detailed owner searches for blocks owned twice before only counting.
const MAX_OWNER_SEARCHES: usize = 256;

struct Checker<'a> {
    src: &'a dyn BlockSource,
    sb: Superblock,
    collect: bool,
    max_findings: usize,
    findings: Vec<Finding>,
    suppressed: u64,
    suppressed_errors: u64,
    metadata: Vec<MetaBlock>,
    blocks_read: u64,
    ibuf: Box<[u8; BLOCK]>,
    xbuf: Box<[u8; BLOCK]>,
    dbuf: Box<[u8; BLOCK]>,
    /// Data-area bits of the block bitmaps, by absolute block number.
    disk_bbm: Bits,
    /// Inode bitmaps, by inode number - 1.
    disk_ibm: Bits,
    /// Blocks owned by inodes, by absolute block number.
    claimed: Bits,
    /// Blocks found owned twice.
    conflict: Option<Bits>,
    /// Blocks owned twice already parsed as a directory block (by the
    /// first directory to reach them; the others skip them).
    conflict_read: Option<Bits>,
    owner_searches: usize,
    /// Steps left for loop checks of directory hard links.
    ancestor_budget: u64,
    /// Inodes reached from the root, by inode number - 1.
    reached: Bits,
    /// Inode-table blocks read, by `g * itable_blocks + t`.
    itable_read: Bits,
    info: Vec<InoInfo>,
    dirs: Vec<DirRec>,
    dir_ext: Vec<Extent>,
    /// (inode, first block, blocks) of every claim, to name owners.
    claims: Vec<(u32, u64, u64)>,
    /// Unmarked inode slots that are not clean free slots, in blocks read.
    stash: HashMap<u32, [u8; INODE_SIZE]>,
    stack: Vec<u32>,
    ents: Vec<Ent>,
    names: Vec<u8>,
    name_keys: Vec<(u64, u32, u8)>,
    /// (directory, the other directory naming it) for directory hard links.
    extra_names: Vec<(u32, u32)>,
    /// (directory, what its ".." names, block) where that is not the
    /// directory it was reached from.
    odd_dotdots: Vec<(u32, u32, u64)>,
}

impl<'a> Checker<'a> {
    fn new(src: &'a dyn BlockSource, sb: Superblock, opts: &Options) -> Checker<'a> {
        let inodes = sb.inodes();
        let itable = sb.groups as u64 * sb.itable_blocks();
        Checker {
            src,
            collect: opts.collect_metadata,
            max_findings: if opts.max_findings == 0 {
                DEFAULT_MAX_FINDINGS
            } else {
                opts.max_findings
            },
            findings: Vec::new(),
            suppressed: 0,
            suppressed_errors: 0,
            metadata: Vec::new(),
            blocks_read: 0,
            ibuf: Box::new([0u8; BLOCK]),
            xbuf: Box::new([0u8; BLOCK]),
            dbuf: Box::new([0u8; BLOCK]),
            disk_bbm: Bits::new(sb.blocks),
            disk_ibm: Bits::new(inodes),
            claimed: Bits::new(sb.blocks),
            conflict: None,
            conflict_read: None,
            owner_searches: 0,
            ancestor_budget: 1 << 24,
            reached: Bits::new(inodes),
            itable_read: Bits::new(itable),
            info: vec![InoInfo::default(); inodes as usize + 1],
            dirs: Vec::new(),
            dir_ext: Vec::new(),
            claims: Vec::new(),
            stash: HashMap::new(),
            stack: Vec::new(),
            ents: Vec::new(),
            names: Vec::new(),
            name_keys: Vec::new(),
            extra_names: Vec::new(),
            odd_dotdots: Vec::new(),
            sb,
        }
    }

    fn add(
        &mut self,
        kind: FindingKind,
        severity: Severity,
        ino: Option<u32>,
        block: Option<u64>,
        detail: impl FnOnce() -> String,
    ) {
        if self.findings.len() >= self.max_findings {
            self.suppressed += 1;
            if severity == Severity::Error {
                self.suppressed_errors += 1;
            }
            return;
        }
        self.findings.push(Finding {
            severity,
            kind,
            ino,
            block,
            detail: detail(),
        });
    }

    fn flag(
        &mut self,
        kind: FindingKind,
        ino: Option<u32>,
        block: Option<u64>,
        detail: impl FnOnce() -> String,
    ) {
        self.add(kind, kind.severity(), ino, block, detail);
    }

    fn meta(&mut self, kind: MetaKind, block: u64) {
        if self.collect {
            self.metadata.push(MetaBlock { block, kind });
        }
    }

    fn read_into(src: &dyn BlockSource, count: &mut u64, b: u64, buf: &mut [u8; BLOCK]) {
        *count += 1;
        src.read(b, buf);
    }

    fn run(&mut self) {
        self.check_bitmaps();
        self.check_journal();
        self.inode_pass();
        self.traverse();
        self.check_links();
        self.check_inode_bitmap();
        self.check_block_bitmap();
    }

    // ---- 2. bitmaps ----

    fn check_bitmaps(&mut self) {
        let sb = self.sb.clone();
        let ipg = sb.inodes_per_group as u64;
        for g in 0..sb.groups {
            let start = sb.group_start(g);
            let first = sb.first_data(g) - start;
            let n = sb.group_blocks(g);
            let bb = sb.block_bitmap(g);
            Checker::read_into(self.src, &mut self.blocks_read, bb, &mut self.ibuf);
            self.meta(MetaKind::BlockBitmap, bb);
            // Group metadata must be marked: a clear bit lets the allocator
            // hand out a bitmap or inode-table block.
            let (cnt, at) = clear_bits(&self.ibuf[..], 0, first);
            if let Some(a) = at.map(|x| start + x) {
                self.flag(FindingKind::BlockUsedButFree, None, Some(a), || {
                    format!("group {g}: {cnt} of its metadata blocks (the first {a}) are free in the bitmap")
                });
            }
            // Padding past the group's end.
            let (clear_pad, _) = clear_bits(&self.ibuf[..], n, 32768);
            if clear_pad > 0 {
                self.flag(FindingKind::BitmapPadding, None, Some(bb), || {
                    format!("group {g}: {clear_pad} padding bits past the group's end are clear in the block bitmap")
                });
            }
            // The data bits, by absolute block number.
            let mut i = first;
            while i < n {
                let k = (n - i).min(64);
                let v = bits_at(&self.ibuf[..], i) & ones(k);
                self.disk_bbm.or64(start + i, v);
                i += k;
            }

            let ib = sb.inode_bitmap(g);
            Checker::read_into(self.src, &mut self.blocks_read, ib, &mut self.ibuf);
            self.meta(MetaKind::InodeBitmap, ib);
            let (clear_pad, _) = clear_bits(&self.ibuf[..], ipg, 32768);
            if g == 0 {
                let reserved = (FIRST_INO - 1) as u64;
                let clear = !bits_at(&self.ibuf[..], 0) & ones(reserved.min(ipg));
                if clear != 0 {
                    let cnt = clear.count_ones();
                    self.flag(
                        FindingKind::BitmapPadding,
                        Some(clear.trailing_zeros() + 1),
                        Some(ib),
                        || format!("{cnt} reserved inodes are free in the inode bitmap"),
                    );
                }
            }
            if clear_pad > 0 {
                self.flag(FindingKind::BitmapPadding, None, Some(ib), || {
                    format!("group {g}: {clear_pad} padding bits past the last inode are clear in the inode bitmap")
                });
            }
            let base = g as u64 * ipg;
            let mut i = 0;
            while i < ipg {
                let k = (ipg - i).min(64);
                let v = bits_at(&self.ibuf[..], i) & ones(k);
                self.disk_ibm.or64(base + i, v);
                i += k;
            }
        }
    }

    // ---- 3. journal ----

    fn check_journal(&mut self) {
        let sev = if self.sb.mode == Mode::None {
            Severity::Warning
        } else {
            Severity::Error
        };
        for a in 0..self.sb.journal_areas {
            let b = self.sb.area_start(a);
            Checker::read_into(self.src, &mut self.blocks_read, b, &mut self.ibuf);
            self.meta(MetaKind::JournalSuper, b);
            if let Err(e) = AreaSuper::decode(&self.ibuf[..], a, self.sb.area_blocks) {
                self.add(FindingKind::JournalSuperCorrupt, sev, None, Some(b), || {
                    e.to_string()
                });
            }
        }
    }

    // ---- 4. inodes ----

    /// Reads inode-table block `t` of group `g` once; processes its marked
    /// inodes (and the root), stashes other slots that are not clean free
    /// slots, and records clean free slots as free.
    fn load_itable(&mut self, g: u32, t: u64) {
        let idx = g as u64 * self.sb.itable_blocks() + t;
        if self.itable_read.get(idx) {
            return;
        }
        self.itable_read.set(idx);
        let b = self.sb.inode_table(g) + t;
        Checker::read_into(self.src, &mut self.blocks_read, b, &mut self.ibuf);
        let first_ino = g as u64 * self.sb.inodes_per_group as u64 + t * INODES_PER_BLOCK as u64 + 1;
        let mut any = false;
        for s in 0..INODES_PER_BLOCK as usize {
            let ino = (first_ino + s as u64) as u32;
            if ino < FIRST_INO && ino != ROOT_INO {
                continue;
            }
            let mut raw = [0u8; INODE_SIZE];
            raw.copy_from_slice(&self.ibuf[s * INODE_SIZE..(s + 1) * INODE_SIZE]);
            if ino == ROOT_INO || self.disk_ibm.get(ino as u64 - 1) {
                any = true;
                self.process_inode(ino, &raw);
            } else if self.info[ino as usize].kind == Kind::Unseen {
                let clean_free =
                    raw.iter().all(|x| *x == 0) || Inode::decode(&raw).is_ok_and(|i| i.is_free());
                if clean_free {
                    self.info[ino as usize].kind = Kind::Free;
                } else {
                    self.stash.insert(ino, raw);
                }
            }
        }
        if any {
            self.meta(MetaKind::InodeTable, b);
        }
    }

    fn inode_pass(&mut self) {
        let ipb = INODES_PER_BLOCK as u64;
        let ipg = self.sb.inodes_per_group as u64;
        for g in 0..self.sb.groups {
            for t in 0..self.sb.itable_blocks() {
                let base = g as u64 * ipg + t * ipb;
                let mut marked = self.disk_ibm.get64(base) & ones(ipb);
                if base == 0 {
                    // Reserved inodes are not checked; the root always is.
                    marked &= !ones((FIRST_INO - 1) as u64);
                    marked |= 1 << (ROOT_INO - 1);
                }
                if marked != 0 {
                    self.load_itable(g, t);
                }
            }
        }
    }

    /// Makes sure `ino` (in range, not reserved) has been looked at.
    fn ensure_inode(&mut self, ino: u32) {
        if self.info[ino as usize].kind != Kind::Unseen {
            return;
        }
        let i = (ino - 1) as u64;
        let ipg = self.sb.inodes_per_group as u64;
        let g = (i / ipg) as u32;
        let t = (i % ipg) / INODES_PER_BLOCK as u64;
        self.load_itable(g, t);
        if self.info[ino as usize].kind == Kind::Unseen {
            match self.stash.remove(&ino) {
                Some(raw) => self.process_inode(ino, &raw),
                None => self.info[ino as usize].kind = Kind::Free,
            }
        }
    }

    /// Claims `[start, start + len)` (inside one group's data area) for
    /// `ino`, reporting blocks already owned.
    fn claim(&mut self, ino: u32, start: u64, len: u64) {
        if self.claimed.any_in(start, len) {
            let mut hits: Vec<(u64, u64)> = Vec::new();
            let first_word = start / 64;
            let claimed = &self.claimed;
            let mut words = Vec::new();
            Bits::for_range(start, len, |wi, m| {
                words.push(claimed.w.get(wi).copied().unwrap_or(0) & m);
            });
            runs(words.into_iter(), |a, b| {
                hits.push((first_word * 64 + a, first_word * 64 + b))
            });
            for (a, b) in hits {
                self.conflict
                    .get_or_insert_with(|| Bits::new(self.sb.blocks))
                    .set_range(a, b - a + 1);
                let owner = if self.owner_searches < MAX_OWNER_SEARCHES {
                    self.owner_searches += 1;
                    self.claims
                        .iter()
                        .find(|(_, s, l)| a >= *s && a - *s < *l)
                        .map(|c| c.0)
                } else {
                    None
                };
                self.flag(FindingKind::BlockOwnedTwice, Some(ino), Some(a), || match owner {
                    Some(o) if o == ino => format!("{} mapped twice by inode {ino}", range_text(a, b)),
                    Some(o) => format!("{} of inode {ino} owned by inode {o} too", range_text(a, b)),
                    None => format!("{} of inode {ino} owned by another inode too", range_text(a, b)),
                });
            }
        }
        self.claimed.set_range(start, len);
        self.claims.push((ino, start, len));
    }

    /// True if `[p, p + len)` lies in the data area of one group.
    fn in_data_area(&self, p: u64, len: u64) -> bool {
        let Some(last) = len.checked_sub(1).and_then(|l| p.checked_add(l)) else {
            return false;
        };
        self.sb.is_data_block(p)
            && self.sb.is_data_block(last)
            && self.sb.group_of(p) == self.sb.group_of(last)
    }

    /// Decodes and checks one inode in use, claiming its blocks.
    fn process_inode(&mut self, ino: u32, raw: &[u8; INODE_SIZE]) {
        let Some(slot) = self.info.get(ino as usize) else {
            return;
        };
        if slot.kind != Kind::Unseen {
            return;
        }
        let mut inode = match Inode::decode(raw) {
            Ok(i) => i,
            Err(e) => {
                let stored = rd_u32(raw, INODE_SIZE - 4);
                if stored != crc(&raw[..INODE_SIZE - 4]) {
                    self.flag(FindingKind::InodeChecksum, Some(ino), None, || {
                        "inode checksum mismatch".into()
                    });
                } else {
                    self.flag(FindingKind::BadInode, Some(ino), None, || e.to_string());
                }
                self.info[ino as usize].kind = Kind::Bad;
                return;
            }
        };
        if inode.is_free() {
            self.info[ino as usize].kind = Kind::Free;
            return;
        }
        let Some(ft) = inode.file_type() else {
            let mode = inode.mode;
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("mode {mode:o} has no file type")
            });
            self.info[ino as usize].kind = Kind::Bad;
            return;
        };
        {
            let s = &mut self.info[ino as usize];
            s.kind = Kind::of(ft);
            s.links = inode.links;
        }
        let inline_flag = inode.flags & FLAG_INLINE_SYMLINK != 0;
        if inline_flag && ft != FileType::Symlink {
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("inline-symlink flag on a {ft:?}: its extents are ignored")
            });
        }

        // The extent leaf.
        let mut extents_known = true;
        if inode.leaf != 0 {
            let leaf = inode.leaf;
            if inline_flag {
                self.flag(FindingKind::BadInode, Some(ino), Some(leaf), || {
                    "inline-symlink flag with an extent leaf pointer".into()
                });
                extents_known = false;
            } else if !self.sb.is_data_block(leaf) {
                self.flag(FindingKind::ExtentOutOfRange, Some(ino), Some(leaf), || {
                    format!("extent leaf pointer {leaf} is outside the data area")
                });
                extents_known = false;
            } else {
                self.claim(ino, leaf, 1);
                self.meta(MetaKind::ExtentLeaf, leaf);
                Checker::read_into(self.src, &mut self.blocks_read, leaf, &mut self.xbuf);
                match decode_leaf(&self.xbuf[..], Inode::leaf_count(raw)) {
                    Ok(v) => inode.extents = v,
                    Err(e) => {
                        self.flag(FindingKind::BadExtentLeaf, Some(ino), Some(leaf), || {
                            e.to_string()
                        });
                        extents_known = false;
                    }
                }
            }
        }

        // The extents.
        let size = inode.size;
        let size_blocks = size.div_ceil(BLOCK as u64);
        let mut mapped = 0u64;
        let mut prev_end = 0u64;
        let mut past_eof = 0u64;
        let mut bad_ext: Option<String> = None;
        let dir_at = self.dir_ext.len();
        for (k, e) in inode.extents.iter().enumerate() {
            let len = e.len as u64;
            let logical = e.logical as u64;
            if len == 0 {
                bad_ext.get_or_insert_with(|| format!("extent {k} has no blocks"));
                continue;
            }
            let lend = logical + len;
            if lend > 1 << 32 {
                bad_ext.get_or_insert_with(|| format!("extent {k} runs past the last file block"));
                continue;
            }
            if k > 0 && logical < prev_end {
                bad_ext.get_or_insert_with(|| format!("extent {k} overlaps or precedes the one before"));
                continue;
            }
            prev_end = lend;
            mapped += len;
            if lend > size_blocks {
                past_eof += lend - logical.max(size_blocks);
            }
            if !self.in_data_area(e.physical, len) {
                let p = e.physical;
                self.flag(FindingKind::ExtentOutOfRange, Some(ino), Some(p), || {
                    format!("extent {k} (blocks {p} + {len}) is not inside one group's data area")
                });
                continue;
            }
            self.claim(ino, e.physical, len);
            if ft == FileType::Dir {
                self.dir_ext.push(*e);
            }
        }
        if let Some(w) = bad_ext {
            self.flag(FindingKind::BadInode, Some(ino), None, || w);
        }
        if extents_known {
            let expect = mapped + (inode.leaf != 0) as u64;
            if inode.nblocks as u64 != expect {
                let nb = inode.nblocks;
                self.flag(FindingKind::BlockCountWrong, Some(ino), None, || {
                    format!("block count {nb}, but {expect} blocks are mapped")
                });
            }
        }

        match ft {
            FileType::File => {
                if size > MAX_FILE {
                    self.flag(FindingKind::BadInode, Some(ino), None, || {
                        format!("size {size} is beyond the largest file")
                    });
                }
                if past_eof > 0 {
                    self.flag(FindingKind::BlocksPastEof, Some(ino), None, || {
                        format!("{past_eof} blocks mapped past the end of file (size {size})")
                    });
                }
            }
            FileType::Dir => {
                let nblocks = size / BLOCK as u64;
                if size == 0 || size % BLOCK as u64 != 0 {
                    self.flag(FindingKind::DirSize, Some(ino), None, || {
                        format!("directory size {size} is not a positive multiple of {BLOCK}")
                    });
                } else if extents_known {
                    let covered: u64 = self.dir_ext[dir_at..]
                        .iter()
                        .map(|e| {
                            (e.logical as u64 + e.len as u64).min(nblocks) - (e.logical as u64).min(nblocks)
                        })
                        .sum();
                    if covered < nblocks {
                        self.flag(FindingKind::DirSize, Some(ino), None, || {
                            format!("directory of {nblocks} blocks has {} unmapped", nblocks - covered)
                        });
                    }
                    if prev_end > nblocks {
                        self.flag(FindingKind::DirSize, Some(ino), None, || {
                            format!("directory of {nblocks} blocks maps blocks up to {prev_end}")
                        });
                    }
                }
                let rec = DirRec {
                    ext_at: dir_at as u32,
                    ext_len: (self.dir_ext.len() - dir_at) as u32,
                    nblocks,
                    parent: 0,
                };
                self.info[ino as usize].dir = self.dirs.len() as u32;
                self.dirs.push(rec);
            }
            FileType::Symlink => self.check_symlink(ino, &inode, raw),
        }
    }

    fn check_symlink(&mut self, ino: u32, inode: &Inode, raw: &[u8; INODE_SIZE]) {
        let size = inode.size;
        if inode.flags & FLAG_INLINE_SYMLINK != 0 {
            if size == 0 || size > INLINE_SYMLINK as u64 {
                self.flag(FindingKind::BadInode, Some(ino), None, || {
                    format!("inline symlink of size {size} (1 to {INLINE_SYMLINK} fit)")
                });
                return;
            }
            let t = &raw[68..68 + size as usize];
            if !valid_target(t) {
                self.flag(FindingKind::SymlinkBadTarget, Some(ino), None, || {
                    format!(
                        "inline target {:?} is not a valid path",
                        String::from_utf8_lossy(t)
                    )
                });
            }
            return;
        }
        let shape_ok = size > 0
            && size <= BLOCK as u64
            && inode.leaf == 0
            && inode.extents.len() == 1
            && inode.extents[0].logical == 0
            && inode.extents[0].len == 1;
        if !shape_ok {
            let n = inode.extents.len();
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("symlink of size {size} with {n} extents (one block of 1 to {BLOCK} bytes expected)")
            });
            return;
        }
        let p = inode.extents[0].physical;
        if !self.sb.is_data_block(p) {
            return; // reported as ExtentOutOfRange
        }
        Checker::read_into(self.src, &mut self.blocks_read, p, &mut self.xbuf);
        let t = &self.xbuf[..size as usize];
        if !valid_target(t) {
            let shown = String::from_utf8_lossy(&t[..t.len().min(32)]).into_owned();
            self.flag(FindingKind::SymlinkBadTarget, Some(ino), Some(p), || {
                format!("target of {size} bytes starting {shown:?} is not a valid path")
            });
        }
    }

    // ---- 5. the namespace ----

    /// Marks `ino` reached from a directory; returns what it is.
    fn reach(&mut self, ino: u32) -> Kind {
        self.ensure_inode(ino);
        let s = self.info[ino as usize];
        if (s.kind.live() || s.kind == Kind::Bad) && s.flags & REACHED == 0 {
            self.info[ino as usize].flags |= REACHED;
            self.reached.set(ino as u64 - 1);
            if ino >= FIRST_INO && !self.disk_ibm.get(ino as u64 - 1) {
                self.flag(FindingKind::InodeUsedButFree, Some(ino), None, || {
                    "reachable from the root but free in the inode bitmap".into()
                });
            }
        }
        s.kind
    }

    fn parent_of(&self, d: u32) -> u32 {
        let di = self.info[d as usize].dir;
        self.dirs.get(di as usize).map_or(ROOT_INO, |r| r.parent)
    }

    /// True if `anc` is `d` or one of its ancestors (in the traversal
    /// tree); `None` when the walk budget is spent (a hostile image full of
    /// deep directory hard links).
    fn is_ancestor(&mut self, anc: u32, d: u32) -> Option<bool> {
        let mut cur = d;
        for _ in 0..=self.dirs.len() {
            self.ancestor_budget = self.ancestor_budget.checked_sub(1)?;
            if cur == anc {
                return Some(true);
            }
            if cur == ROOT_INO {
                return Some(false);
            }
            cur = self.parent_of(cur);
        }
        Some(false)
    }

    fn traverse(&mut self) {
        let root = self.info[ROOT_INO as usize];
        if root.kind != Kind::Dir {
            let k = root.kind;
            self.flag(FindingKind::RootNotDir, Some(ROOT_INO), None, || {
                format!("the root inode is {k:?}, not a directory")
            });
            return;
        }
        self.reach(ROOT_INO);
        self.info[ROOT_INO as usize].flags |= DISCOVERED;
        if let Some(r) = self.dirs.get_mut(root.dir as usize) {
            r.parent = ROOT_INO;
        }
        self.stack.push(ROOT_INO);
        while let Some(d) = self.stack.pop() {
            self.scan_dir(d);
        }
        self.extra_names.sort_unstable();
        for k in 0..self.odd_dotdots.len() {
            let (d, x, p) = self.odd_dotdots[k];
            if self.extra_names.binary_search(&(d, x)).is_ok() {
                let r = &mut self.info[x as usize].refs;
                *r = r.saturating_add(1);
            } else {
                let want = self.parent_of(d);
                self.flag(FindingKind::DirBadDotDot, Some(d), Some(p), || {
                    format!("\"..\" names inode {x}, not {want}")
                });
            }
        }
    }

    fn scan_dir(&mut self, d: u32) {
        let Some(rec) = self.dirs.get(self.info[d as usize].dir as usize).copied() else {
            return;
        };
        self.names.clear();
        self.name_keys.clear();
        let mut dots = 0u32;
        let mut dotdots = 0u32;
        let parent = rec.parent;
        for k in rec.ext_at..rec.ext_at + rec.ext_len {
            let e = self.dir_ext[k as usize];
            let logical = e.logical as u64;
            if logical >= rec.nblocks {
                continue;
            }
            let n = (e.len as u64).min(rec.nblocks - logical);
            for j in 0..n {
                let p = e.physical + j;
                if self.conflict.as_ref().is_some_and(|c| c.get(p)) {
                    let read = self
                        .conflict_read
                        .get_or_insert_with(|| Bits::new(self.sb.blocks));
                    if read.get(p) {
                        continue;
                    }
                    read.set(p);
                }
                Checker::read_into(self.src, &mut self.blocks_read, p, &mut self.dbuf);
                self.meta(MetaKind::Directory, p);
                let mut ents = std::mem::take(&mut self.ents);
                let parsed = parse_dir_block(&self.dbuf, &mut ents, &mut self.names);
                if let Err(w) = parsed {
                    self.flag(FindingKind::DirBlockCorrupt, Some(d), Some(p), || {
                        format!("directory block {} of inode {d}: {w}", logical + j)
                    });
                }
                for ent in &ents {
                    self.dir_entry(d, p, parent, ent, &mut dots, &mut dotdots);
                }
                self.ents = ents;
            }
        }
        if dots == 0 {
            self.flag(FindingKind::DirMissingDot, Some(d), None, || {
                "no '.' entry".into()
            });
        }
        if dotdots == 0 {
            self.flag(FindingKind::DirBadDotDot, Some(d), None, || {
                "no '..' entry".into()
            });
        }
        if self.name_keys.len() > 1 {
            let mut keys = std::mem::take(&mut self.name_keys);
            keys.sort_unstable();
            for w in keys.windows(2) {
                let (h1, a1, l1) = w[0];
                let (h2, a2, l2) = w[1];
                if h1 != h2 || l1 != l2 {
                    continue;
                }
                let n1 = &self.names[a1 as usize..a1 as usize + l1 as usize];
                let n2 = &self.names[a2 as usize..a2 as usize + l2 as usize];
                if n1 == n2 {
                    let shown = String::from_utf8_lossy(n1).into_owned();
                    self.flag(FindingKind::DirDuplicateName, Some(d), None, || {
                        format!("two entries named {shown:?}")
                    });
                }
            }
            self.name_keys = keys;
        }
    }

    fn dir_entry(&mut self, d: u32, p: u64, parent: u32, ent: &Ent, dots: &mut u32, dotdots: &mut u32) {
        let at = ent.name_at as usize;
        let len = ent.name_len as usize;
        let mut copy = [0u8; 256];
        let Some(src) = self.names.get(at..at + len) else {
            return;
        };
        copy[..len].copy_from_slice(src);
        let name = &copy[..len];
        let ino = ent.ino;
        let lossy = || String::from_utf8_lossy(name).into_owned();
        if name == b"." || name == b".." {
            let dot = name == b".";
            let (count, want) = if dot {
                (&mut *dots, d)
            } else {
                (&mut *dotdots, parent)
            };
            *count += 1;
            let again = *count > 1;
            let shown = lossy();
            if again {
                self.flag(FindingKind::DirDuplicateName, Some(d), Some(p), || {
                    format!("two entries named {shown:?}")
                });
                return;
            }
            if ent.ftype != FileType::Dir {
                self.flag(FindingKind::DirEntryBadType, Some(d), Some(p), || {
                    format!("{shown:?} has type {:?}", ent.ftype)
                });
            }
            if ino != want && !dot {
                // Judged after the traversal: a directory with two names
                // may have its ".." in the other parent.
                self.odd_dotdots.push((d, ino, p));
            } else if ino != want {
                self.flag(FindingKind::DirMissingDot, Some(d), Some(p), || {
                    format!("{shown:?} names inode {ino}, not {want}")
                });
            } else {
                let r = &mut self.info[want as usize].refs;
                *r = r.saturating_add(1);
            }
            return;
        }
        let name_ok = valid_name(name);
        self.name_keys.push((name_hash(name), ent.name_at, ent.name_len));
        if !name_ok {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadName, Some(d), Some(p), || {
                format!("entry {shown:?} (inode {ino}) has a name no path reaches")
            });
        }
        if ino as u64 > self.sb.inodes() || ino == 0 || (ino < FIRST_INO && ino != ROOT_INO) {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadInode, Some(d), Some(p), || {
                format!("entry {shown:?} names inode {ino}, which is out of range or reserved")
            });
            return;
        }
        let kind = self.reach(ino);
        if !(kind.live() || kind == Kind::Bad) {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadInode, Some(d), Some(p), || {
                format!("entry {shown:?} names inode {ino}, which is free")
            });
            return;
        }
        let r = &mut self.info[ino as usize].refs;
        *r = r.saturating_add(1);
        if let Some(t) = kind.file_type() {
            if t != ent.ftype {
                let shown = lossy();
                self.flag(FindingKind::DirEntryBadType, Some(d), Some(p), || {
                    format!(
                        "entry {shown:?} has type {:?} but inode {ino} is a {t:?}",
                        ent.ftype
                    )
                });
            }
        }
        if kind != Kind::Dir {
            return;
        }
        if self.info[ino as usize].flags & DISCOVERED == 0 {
            self.info[ino as usize].flags |= DISCOVERED;
            let di = self.info[ino as usize].dir as usize;
            if let Some(r) = self.dirs.get_mut(di) {
                r.parent = d;
            }
            self.stack.push(ino);
        } else {
            self.extra_names.push((ino, d));
            let shown = lossy();
            match self.is_ancestor(ino, d) {
                Some(true) => self.flag(FindingKind::DirectoryLoop, Some(d), Some(p), || {
                    format!("entry {shown:?} names directory {ino}, an ancestor of directory {d}")
                }),
                Some(false) => self.flag(FindingKind::DirectoryHardLink, Some(d), Some(p), || {
                    format!("entry {shown:?} is a second name of directory {ino}")
                }),
                None => self.flag(FindingKind::DirectoryHardLink, Some(d), Some(p), || {
                    format!("entry {shown:?} is a second name of directory {ino} (not checked for a loop)")
                }),
            }
        }
    }

    // ---- 6. counts and bitmaps ----

    fn check_links(&mut self) {
        let n = self.reached.w.len();
        for wi in 0..n {
            let mut x = self.reached.w[wi];
            while x != 0 {
                let ino = (wi as u64 * 64 + x.trailing_zeros() as u64 + 1) as u32;
                x &= x - 1;
                let s = self.info[ino as usize];
                if !s.kind.live() {
                    continue;
                }
                let (links, refs) = (s.links as u32, s.refs);
                if links < refs {
                    self.flag(FindingKind::LinkCountTooLow, Some(ino), None, || {
                        format!("link count {links}, but {refs} entries name it")
                    });
                } else if links > refs {
                    self.flag(FindingKind::LinkCountTooHigh, Some(ino), None, || {
                        format!("link count {links}, but {refs} entries name it")
                    });
                }
            }
        }
    }

    fn check_inode_bitmap(&mut self) {
        let n = self.disk_ibm.w.len();
        for wi in 0..n {
            let mut x = self.disk_ibm.w[wi] & !self.reached.w.get(wi).copied().unwrap_or(0);
            if wi == 0 {
                x &= !ones((FIRST_INO - 1) as u64);
            }
            while x != 0 {
                let ino = (wi as u64 * 64 + x.trailing_zeros() as u64 + 1) as u32;
                x &= x - 1;
                let what = match self.info.get(ino as usize).map(|s| s.kind) {
                    Some(Kind::Free) | Some(Kind::Unseen) | None => "a free slot is marked in use",
                    Some(Kind::Bad) => "a damaged inode is marked in use but not reachable",
                    Some(_) => "marked in use but not reachable from the root",
                };
                self.flag(FindingKind::InodeMarkedButUnreachable, Some(ino), None, || {
                    what.into()
                });
            }
        }
    }

    fn check_block_bitmap(&mut self) {
        let mut used_free = Vec::new();
        let mut leaked = Vec::new();
        let d = &self.disk_bbm.w;
        let c = &self.claimed.w;
        runs(c.iter().zip(d.iter()).map(|(c, d)| c & !d), |a, b| {
            used_free.push((a, b))
        });
        runs(c.iter().zip(d.iter()).map(|(c, d)| d & !c), |a, b| {
            leaked.push((a, b))
        });
        for (a, b) in used_free {
            self.flag(FindingKind::BlockUsedButFree, None, Some(a), || {
                format!("{} owned by an inode but free in the bitmap", range_text(a, b))
            });
        }
        for (a, b) in leaked {
            self.flag(FindingKind::BlockMarkedButUnused, None, Some(a), || {
                format!("{} marked in use but owned by nothing", range_text(a, b))
            });
        }
    }

    fn finish(self) -> Report {
        let mut st = Stats::default();
        let n = self.reached.w.len();
        for wi in 0..n {
            let mut x = self.reached.w[wi];
            while x != 0 {
                let ino = wi as u64 * 64 + x.trailing_zeros() as u64 + 1;
                x &= x - 1;
                match self.info[ino as usize].kind {
                    Kind::File => st.files += 1,
                    Kind::Dir => st.dirs += 1,
                    Kind::Symlink => st.symlinks += 1,
                    _ => {}
                }
                st.used_inodes += 1;
            }
        }
        st.used_blocks = self.claimed.count();
        st.data_blocks = (0..self.sb.groups)
            .map(|g| self.sb.group_start(g) + self.sb.group_blocks(g) - self.sb.first_data(g))
            .sum();
        st.free_blocks = st.data_blocks.saturating_sub(self.disk_bbm.count());
        st.inodes = self.sb.inodes();
        st.free_inodes = st.inodes.saturating_sub(self.disk_ibm.count());
        st.blocks_read = self.blocks_read;
        let mut metadata = self.metadata;
        metadata.sort_unstable();
        metadata.dedup();
        Report {
            superblock: self.sb,
            findings: self.findings,
            suppressed: self.suppressed,
            suppressed_errors: self.suppressed_errors,
            stats: st,
            metadata,
        }
    }
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
        let img = vec![7u8; BLOCK * 2 + 100];
        let mut buf = [0u8; BLOCK];
        assert_eq!(BlockSource::blocks(&img), 2);
        BlockSource::read(&img, 1, &mut buf);
        assert_eq!(buf[0], 7);
        BlockSource::read(&img, 2, &mut buf);
        assert_eq!(buf[0], 0);
        BlockSource::read(&img, u64::MAX, &mut buf);
        assert_eq!(buf[0], 0);
    }
}
