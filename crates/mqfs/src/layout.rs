//! The on-disk layout: versioned and checksummed (CRC-32 of each
//! structure), Ext4-like.
//!
//! ```text
//! block 0                superblock
//! blocks 1 .. G          block groups; group g at `groups_start + g * blocks_per_group`:
//!                          [block bitmap][inode bitmap][inode table][data blocks...]
//! blocks J .. C          journal areas (`journal_areas` x `area_blocks`)
//! blocks C .. P          horae mode: the ordering queue's checkpoint region
//!                          (`checkpoint_blocks`, Horae 5.2 swap), else nothing (C = P)
//! blocks P .. end        horae mode: the p-area (`p_area_blocks`, Horae 5.4: the
//!                          ordering layer's prepare writes), else nothing (P = end)
//! ```
//!
//! Group metadata is found by arithmetic (no group descriptor table).
//! Inodes are 256 bytes, 16 per block; inode numbers start at 1, the root
//! is 2 (Ext4's numbering). Files map blocks with an extent tree of any
//! depth, Ext4's (`fs/ext4/extents.c`, [`crate::extent_tree`]): the root,
//! up to 8 entries, is in the inode; index nodes and leaves are blocks. An
//! extent may be *unwritten*
//! (allocated by fallocate, read as zeros until written; bit 31 of its
//! length word, Ext4's `ee_len > EXT_INIT_MAX_LEN`). Directories are Ext4
//! blocks of entries with a checksum tail: linear while one block holds
//! them, then hash-indexed (ext4's `dir_index`, [`crate::htree`]). Extended attributes live
//! in one external block per inode (Ext4's `i_file_acl` EA block,
//! [`encode_xattr_block`]).
//!
//! ## Inode (256 bytes)
//!
//! ```text
//! 0 mode u16 | 2 links u16 | 4 uid u32 | 8 gid u32 | 12 flags u32 | 16 size u64
//! 24 atime u64 | 32 mtime u64 | 40 ctime u64 | 48 generation u32 | 52 nblocks u32
//! 56 root entries u16 | 58 tree depth u16 | 60 reserved u64 (0)
//! 68..196 the tree's root: 8 slots of 16 bytes, extents at depth 0
//!          (logical u32, len u32 (bit 31 unwritten), physical u64), else
//!          index entries (logical u32, child block u64, 4 bytes zero);
//!          or an inline symlink target; or, for a fifo, device or
//!          socket, the device number u32 at 68 (0 for fifos and sockets)
//! 196 xattr block u64 (0: none)   (version 2)
//! 252 CRC-32 of bytes 0..252
//! ```
//!
//! ## Extent tree block (version 3)
//!
//! ```text
//! 0 magic "MQXT" u32 | 4 entries u16 | 6 max u16 (254 leaf, 339 index)
//! 8 depth u16 (0: leaf) | 10 reserved (0)
//! 16.. entries: extents (16 bytes, as in the inode) in a leaf, index
//!      entries (logical u32, child block u64: 12 bytes) in an index node
//! 4092 CRC-32 of bytes 0..4092
//! ```
//!
//! Ext4's `ext4_extent_header` (magic, entries, max, depth) with
//! `ext4_extent_idx` entries and the checksum of `ext4_extent_tail`. Each
//! index key is the first key of its child; the root's depth is the tree's
//! and every node's depth is its parent's minus one.
//!
//! `nblocks` counts data blocks, the tree blocks and the xattr block (as
//! Ext4's `i_blocks` counts index blocks and the EA block).
//!
//! ## Superblock
//!
//! Geometry, mode and mount state (see [`Superblock::encode`]); byte 104
//! counts the damaged journal transactions recoveries dropped
//! (`journal_damage`, `docs/decisions.md` E4). Images written before that
//! field hold 0 there, which means none, so it needs no version. Byte 112
//! holds the directory-index hash seed (version 4).
//!
//! ## Versions
//!
//! - 1: the first layout.
//! - 2: unwritten extents (bit 31 of an extent's length) and the inode's
//!   xattr block pointer at byte 196. A version-1 reader would take an
//!   unwritten extent for a huge written one, so the version is bumped and
//!   mount refuses an image of another version.
//! - 3: the extent tree of any depth (index entries in the inode's slots
//!   at depth > 0, tree blocks with the header above) replaces the single
//!   leaf block of at most 255 extents (its pointer at byte 60 is now
//!   reserved).
//! - 4: indexed directories (ext4's `dir_index` htree, [`crate::htree`]):
//!   the inode flag [`FLAG_INDEX`], the dx_root in block 0 behind "." and
//!   "..", dx_node blocks, and the hash seed at superblock byte 112. A
//!   version-3 reader would see an indexed directory's blocks as linear
//!   ones and insert entries without the index, so the version is bumped.
//! - 5: journal checksums seeded by the UUID (bytes 116..132).
//! - 6: horae mode's two regions after the journal, which end the device:
//!   the checkpoint region (superblock byte 140, `checkpoint_blocks`),
//!   where the ordering layer swaps a full ordering queue (Horae 5.2,
//!   `docs/decisions.md` H6), then the p-area (superblock byte 132,
//!   `p_area_blocks`), which holds the ordering layer's prepare writes
//!   (Horae 5.4 write redirection, `docs/decisions.md` H9). A version-5
//!   reader would take the journal for the end of the device, recover the
//!   ordering queue without its swapped entries and mount a horae image
//!   without redirecting its reads, so the version is bumped.
//!
//! The superblock's newest time (byte 96, u64 ns since 1970,
//! [`Superblock::newest_time`]) came with version 3 without a bump: older
//! images hold 0 there, which reads as "no time recorded".
//! So did the special file types (fifo, character and block device,
//! socket: their POSIX mode bits, Ext4's directory-entry codes 3 to 6, the
//! device number at byte 68 with no tree): a version-3 reader of an image
//! holding one finds a mode and an entry code it does not know and reports
//! the inode corrupt rather than misreading it, and images without them
//! are unchanged, so no bump.

use crate::error::FsError;
use crate::extent_tree::{Entries, ExtentTree, IndexEntry, INDEX_ENTRIES, LEAF_ENTRIES, MAX_DEPTH};

/// Bytes per block.
pub const BLOCK: usize = 4096;
/// Bytes per inode.
pub const INODE_SIZE: usize = 256;
/// Inodes per inode-table block.
pub const INODES_PER_BLOCK: u32 = (BLOCK / INODE_SIZE) as u32;
/// Superblock magic ("MQFS0001").
pub const SB_MAGIC: u64 = u64::from_le_bytes(*b"MQFS0001");
/// Layout version (see the module docs for what each one added).
pub const VERSION: u32 = 6;
/// The root directory's inode number.
pub const ROOT_INO: u32 = 2;
/// First inode number handed to files.
pub const FIRST_INO: u32 = 11;
/// The reserved inode slot that holds the orphan table: the inodes whose
/// last name is gone while the file is still open, freed at the last
/// close or, after a crash, at mount (ext4's orphan file,
/// fs/ext4/orphan.c). Never loaded as an inode.
pub const ORPHAN_INO: u32 = 10;
// fsck reads the orphan table with the root's inode-table block.
const _: () = assert!(ORPHAN_INO <= INODES_PER_BLOCK && ROOT_INO <= INODES_PER_BLOCK);
/// Inode numbers the orphan table holds.
pub const ORPHAN_SLOTS: usize = (INODE_SIZE - 8) / 4;
/// The orphan table's magic ("ORPH").
const ORPHAN_MAGIC: u32 = u32::from_le_bytes(*b"ORPH");

/// Decodes the orphan table from its inode slot: a slot without the magic
/// (a fresh image) is empty; a count past the slot is cut to it. Entries
/// are untrusted numbers: callers check them.
pub fn decode_orphans(b: &[u8]) -> Vec<u32> {
    if b.len() < INODE_SIZE || get_u32(b, 0) != ORPHAN_MAGIC {
        return Vec::new();
    }
    let n = (get_u32(b, 4) as usize).min(ORPHAN_SLOTS);
    (0..n).map(|i| get_u32(b, 8 + 4 * i)).collect()
}

/// Encodes the orphan table (at most [`ORPHAN_SLOTS`] entries; the
/// caller refuses more).
pub fn encode_orphans(list: &[u32]) -> [u8; INODE_SIZE] {
    debug_assert!(list.len() <= ORPHAN_SLOTS, "the caller bounds the orphan table");
    let mut b = [0u8; INODE_SIZE];
    if list.is_empty() {
        return b;
    }
    put_u32(&mut b, 0, ORPHAN_MAGIC);
    put_u32(&mut b, 4, list.len().min(ORPHAN_SLOTS) as u32);
    for (i, ino) in list.iter().take(ORPHAN_SLOTS).enumerate() {
        put_u32(&mut b, 8 + 4 * i, *ino);
    }
    b
}
/// Longest file name.
pub const NAME_MAX: usize = 255;
/// Entries of the extent tree's root in an inode (extents at depth 0).
pub const INLINE_EXTENTS: usize = 8;
/// Longest symlink target stored inside the inode.
pub const INLINE_SYMLINK: usize = INLINE_EXTENTS * 16;
/// Most blocks in one extent (a whole group; Ext4's `EXT_INIT_MAX_LEN`).
pub const MAX_EXTENT_LEN: u32 = 32768;
/// Bit of an extent's on-disk length word that marks it unwritten (Ext4
/// marks an unwritten extent by `ee_len > EXT_INIT_MAX_LEN`; the length
/// word here is 32 bits, so a flag bit serves).
const EXTENT_UNWRITTEN: u32 = 1 << 31;
/// Byte offset of the xattr block pointer in an inode.
const INODE_XATTR: usize = 196;

/// How the file system keeps itself consistent (ccNVMe Table 1 systems).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// No journal (Ext4-NJ): fsync writes in place, then flushes.
    None,
    /// JBD2-style ordered metadata journaling (Ext4).
    Classic,
    /// Classic journaling ordered by the Horae ordering queue (HoraeFS).
    Horae,
    /// Multi-queue journaling on ccNVMe (MQFS).
    Mq,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 4] = [Mode::None, Mode::Classic, Mode::Horae, Mode::Mq];

    /// Name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Classic => "classic",
            Mode::Horae => "horae",
            Mode::Mq => "mq",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }

    fn code(self) -> u8 {
        match self {
            Mode::None => 0,
            Mode::Classic => 1,
            Mode::Horae => 2,
            Mode::Mq => 3,
        }
    }

    fn from_code(c: u8) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.code() == c)
    }
}

pub(crate) fn get_u16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
pub(crate) fn get_u32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub(crate) fn get_u64(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}
pub(crate) fn put_u16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// CRC-32 of `data`.
pub fn crc(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// CRC-32 of `data` continuing from `seed` (a CRC already computed, as
/// [`Superblock::journal_csum_seed`]).
pub fn crc_seeded(seed: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(seed);
    h.update(data);
    h.finalize()
}

/// The superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Blocks on the device.
    pub blocks: u64,
    /// Block groups.
    pub groups: u32,
    /// Blocks per group (at most 32768: one bitmap block).
    pub blocks_per_group: u32,
    /// Inodes per group (a multiple of 16, at most 32768).
    pub inodes_per_group: u32,
    /// First block of group 0.
    pub groups_start: u64,
    /// First block of the journal areas.
    pub journal_start: u64,
    /// Journal areas (one per hardware queue in `mq` mode, else 1).
    pub journal_areas: u32,
    /// Blocks per journal area.
    pub area_blocks: u64,
    /// Consistency mode the file system was made with.
    pub mode: Mode,
    /// Set by a clean unmount, cleared at mount.
    pub clean: bool,
    /// Transaction ids below this were used (kept monotonic across mounts).
    pub next_txid: u64,
    /// Mount count (bumped at each mount).
    pub mounts: u64,
    /// The newest time (ns since 1970) the file system's clock gave by the
    /// last superblock write: written at mount (the clock's base) and at
    /// unmount (the clock then). The next mount starts its clock past it,
    /// so time never goes back across mounts (Ext4 keeps `s_wtime` and
    /// `s_mtime`, the last write and mount times, in its superblock).
    /// 0 on an image that never recorded one.
    pub newest_time: u64,
    /// Damaged journal transactions recoveries found and did not replay
    /// (0: none; as ext4 sets `EXT4_ERROR_FS` when JBD2 reports a failed
    /// commit, `fs/ext4/super.c`): files synced in them are lost, and fsck
    /// reports it. Byte 104; images written before it hold 0 there.
    pub journal_damage: u64,
    /// Seed of the directory-index hash (ext4's `s_hash_seed`; byte 112,
    /// version 4): set by mkfs, see [`crate::htree::name_hash`].
    pub hash_seed: u32,
    /// The file system's UUID (ext4's `s_uuid`; bytes 116..132, version
    /// 5): set by mkfs. It seeds the journal checksums
    /// ([`Superblock::journal_csum_seed`]).
    pub uuid: [u8; 16],
    /// Blocks of the checkpoint region at the end of the device (byte
    /// 140, version 6): horae mode's room for the ordering queue's swap
    /// (Horae 5.2; `ccnvme::horae::swap`); 0 in the other modes.
    pub checkpoint_blocks: u64,
    /// Blocks of the p-area at the end of the device (byte 132, version
    /// 6): horae mode's room for the ordering layer's prepare writes
    /// (Horae 5.4: "a pre-reserved area of each device"); 0 in the other
    /// modes.
    pub p_area_blocks: u64,
}

impl Superblock {
    /// Blocks of inode table per group.
    pub fn itable_blocks(&self) -> u64 {
        (self.inodes_per_group / INODES_PER_BLOCK) as u64
    }

    /// First block of group `g`.
    pub fn group_start(&self, g: u32) -> u64 {
        self.groups_start + g as u64 * self.blocks_per_group as u64
    }

    /// Blocks in group `g` (the last may be short).
    pub fn group_blocks(&self, g: u32) -> u64 {
        let start = self.group_start(g);
        (self.journal_start - start).min(self.blocks_per_group as u64)
    }

    /// Block bitmap block of group `g`.
    pub fn block_bitmap(&self, g: u32) -> u64 {
        self.group_start(g)
    }

    /// Inode bitmap block of group `g`.
    pub fn inode_bitmap(&self, g: u32) -> u64 {
        self.group_start(g) + 1
    }

    /// First inode table block of group `g`.
    pub fn inode_table(&self, g: u32) -> u64 {
        self.group_start(g) + 2
    }

    /// First data block of group `g`.
    pub fn first_data(&self, g: u32) -> u64 {
        self.inode_table(g) + self.itable_blocks()
    }

    /// Total inodes.
    pub fn inodes(&self) -> u64 {
        self.groups as u64 * self.inodes_per_group as u64
    }

    /// (block, byte offset) of inode `ino`, or an error if it is not one.
    pub fn inode_location(&self, ino: u32) -> Result<(u64, usize), FsError> {
        if ino == 0 || ino as u64 > self.inodes() {
            return Err(FsError::Corrupt(format!("inode number {ino} out of range")));
        }
        let i = ino - 1;
        let g = i / self.inodes_per_group;
        let idx = i % self.inodes_per_group;
        let block = self.inode_table(g) + (idx / INODES_PER_BLOCK) as u64;
        Ok((block, (idx % INODES_PER_BLOCK) as usize * INODE_SIZE))
    }

    /// The group holding block `b` (None for the superblock and journal).
    pub fn group_of(&self, b: u64) -> Option<u32> {
        if b < self.groups_start || b >= self.journal_start {
            return None;
        }
        Some(((b - self.groups_start) / self.blocks_per_group as u64) as u32)
    }

    /// True if `b` is a data block (in a group, past its metadata).
    pub fn is_data_block(&self, b: u64) -> bool {
        self.group_of(b).is_some_and(|g| b >= self.first_data(g))
    }

    /// The seed of every journal checksum but the area superblocks': the
    /// CRC of the UUID, as JBD2's checksum v3 seeds its crc32c with
    /// `j_csum_seed = crc32c(~0, s_uuid)` (Linux `fs/jbd2/journal.c`,
    /// `jbd2_journal_load`), so a journal block of another file system
    /// (an image copied over, a stale partition) never verifies here.
    /// Deviation: CRC-32, not crc32c, as every MQFS checksum.
    pub fn journal_csum_seed(&self) -> u32 {
        crc(&self.uuid)
    }

    /// First block of the checkpoint region (the p-area's start without
    /// one).
    pub fn checkpoint_start(&self) -> u64 {
        self.p_area_start() - self.checkpoint_blocks
    }

    /// First block of the p-area (the device's end without one).
    pub fn p_area_start(&self) -> u64 {
        self.blocks - self.p_area_blocks
    }

    /// First block of journal area `a`.
    pub fn area_start(&self, a: u32) -> u64 {
        self.journal_start + a as u64 * self.area_blocks
    }

    /// Encodes into a block.
    pub fn encode(&self) -> Box<[u8; BLOCK]> {
        let mut b = Box::new([0u8; BLOCK]);
        put_u64(&mut b[..], 0, SB_MAGIC);
        put_u32(&mut b[..], 8, VERSION);
        put_u32(&mut b[..], 12, BLOCK as u32);
        put_u64(&mut b[..], 16, self.blocks);
        put_u32(&mut b[..], 24, self.groups);
        put_u32(&mut b[..], 28, self.blocks_per_group);
        put_u32(&mut b[..], 32, self.inodes_per_group);
        put_u32(&mut b[..], 36, INODE_SIZE as u32);
        put_u64(&mut b[..], 40, self.groups_start);
        put_u64(&mut b[..], 48, self.journal_start);
        put_u32(&mut b[..], 56, self.journal_areas);
        put_u64(&mut b[..], 64, self.area_blocks);
        b[72] = self.mode.code();
        b[73] = self.clean as u8;
        put_u64(&mut b[..], 80, self.next_txid);
        put_u64(&mut b[..], 88, self.mounts);
        put_u64(&mut b[..], 96, self.newest_time);
        put_u64(&mut b[..], 104, self.journal_damage);
        put_u32(&mut b[..], 112, self.hash_seed);
        b[116..132].copy_from_slice(&self.uuid);
        put_u64(&mut b[..], 140, self.checkpoint_blocks);
        put_u64(&mut b[..], 132, self.p_area_blocks);
        let c = crc(&b[..BLOCK - 4]);
        put_u32(&mut b[..], BLOCK - 4, c);
        b
    }

    /// Decodes and validates a superblock for a device of `device_blocks`.
    pub fn decode(b: &[u8], device_blocks: u64) -> Result<Superblock, FsError> {
        let bad = |w: &str| FsError::Corrupt(format!("superblock: {w}"));
        if b.len() < BLOCK || get_u64(b, 0) != SB_MAGIC {
            return Err(FsError::NotMqfs);
        }
        if get_u32(b, BLOCK - 4) != crc(&b[..BLOCK - 4]) {
            return Err(bad("checksum mismatch"));
        }
        if get_u32(b, 8) != VERSION {
            return Err(FsError::LayoutVersion {
                found: get_u32(b, 8),
                supported: VERSION,
            });
        }
        if get_u32(b, 12) != BLOCK as u32 || get_u32(b, 36) != INODE_SIZE as u32 {
            return Err(bad("block or inode size"));
        }
        let sb = Superblock {
            blocks: get_u64(b, 16),
            groups: get_u32(b, 24),
            blocks_per_group: get_u32(b, 28),
            inodes_per_group: get_u32(b, 32),
            groups_start: get_u64(b, 40),
            journal_start: get_u64(b, 48),
            journal_areas: get_u32(b, 56),
            area_blocks: get_u64(b, 64),
            mode: Mode::from_code(b[72]).ok_or_else(|| bad("unknown mode"))?,
            clean: b[73] == 1,
            next_txid: get_u64(b, 80),
            mounts: get_u64(b, 88),
            newest_time: get_u64(b, 96),
            journal_damage: get_u64(b, 104),
            hash_seed: get_u32(b, 112),
            uuid: {
                let mut u = [0u8; 16];
                u.copy_from_slice(&b[116..132]);
                u
            },
            checkpoint_blocks: get_u64(b, 140),
            p_area_blocks: get_u64(b, 132),
        };
        sb.validate(device_blocks)?;
        Ok(sb)
    }

    /// Checks that the geometry is self-consistent and fits the device.
    pub fn validate(&self, device_blocks: u64) -> Result<(), FsError> {
        let bad = |w: &str| FsError::Corrupt(format!("superblock: {w}"));
        if self.blocks == 0 || self.blocks > device_blocks {
            return Err(bad("larger than the device"));
        }
        if self.blocks_per_group == 0 || self.blocks_per_group > 32768 {
            return Err(bad("blocks per group"));
        }
        if self.inodes_per_group == 0
            || self.inodes_per_group > 32768
            || self.inodes_per_group % INODES_PER_BLOCK != 0
        {
            return Err(bad("inodes per group"));
        }
        if self.groups == 0 || self.groups > 1 << 16 || self.groups_start != 1 {
            return Err(bad("group count"));
        }
        if self.journal_areas == 0 || self.journal_areas > 256 || self.area_blocks < 16 {
            return Err(bad("journal areas"));
        }
        let journal_end = self
            .journal_start
            .checked_add(
                (self.journal_areas as u64)
                    .checked_mul(self.area_blocks)
                    .ok_or_else(|| bad("journal overflows"))?,
            )
            .ok_or_else(|| bad("journal overflows"))?;
        if self.checkpoint_blocks != 0 && self.mode != Mode::Horae {
            return Err(bad("a checkpoint region outside horae mode"));
        }
        if self.p_area_blocks != 0 && self.mode != Mode::Horae {
            return Err(bad("a p-area outside horae mode"));
        }
        if journal_end
            .checked_add(self.checkpoint_blocks)
            .and_then(|e| e.checked_add(self.p_area_blocks))
            != Some(self.blocks)
        {
            return Err(bad("journal, checkpoint region and p-area do not end the device"));
        }
        let groups_end = self.groups_start + self.groups as u64 * self.blocks_per_group as u64;
        let last = self.group_start(self.groups - 1);
        if last >= self.journal_start || groups_end < self.journal_start {
            return Err(bad("groups do not fill the space before the journal"));
        }
        for g in 0..self.groups {
            if self.first_data(g) >= self.group_start(g) + self.group_blocks(g) {
                return Err(bad("group too small for its metadata"));
            }
        }
        if (ROOT_INO as u64) > self.inodes() {
            return Err(bad("no room for the root inode"));
        }
        Ok(())
    }
}

/// File types (the high bits of `mode`, as in POSIX `<sys/stat.h>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe (mkfifo(3)).
    Fifo,
    /// Character device (mknod(2) with `S_IFCHR`; its number in
    /// [`Inode::rdev`]).
    CharDev,
    /// Block device (mknod(2) with `S_IFBLK`).
    BlockDev,
    /// Unix domain socket (bind(2) of an `AF_UNIX` address).
    Socket,
}

impl FileType {
    /// Every type.
    pub const ALL: [FileType; 7] = [
        FileType::File,
        FileType::Dir,
        FileType::Symlink,
        FileType::Fifo,
        FileType::CharDev,
        FileType::BlockDev,
        FileType::Socket,
    ];

    /// The S_IFMT bits (POSIX `<sys/stat.h>`, Linux's values).
    pub fn mode_bits(self) -> u16 {
        match self {
            FileType::File => 0o100000,
            FileType::Dir => 0o040000,
            FileType::Symlink => 0o120000,
            FileType::Fifo => 0o010000,
            FileType::CharDev => 0o020000,
            FileType::BlockDev => 0o060000,
            FileType::Socket => 0o140000,
        }
    }
    /// From mode bits.
    pub fn from_mode(mode: u16) -> Option<FileType> {
        FileType::ALL
            .into_iter()
            .find(|t| t.mode_bits() == mode & 0o170000)
    }
    /// Directory-entry type code (Ext4's `EXT4_FT_*`: 1 file, 2 dir,
    /// 3 char device, 4 block device, 5 fifo, 6 socket, 7 symlink).
    pub fn dirent_code(self) -> u8 {
        match self {
            FileType::File => 1,
            FileType::Dir => 2,
            FileType::CharDev => 3,
            FileType::BlockDev => 4,
            FileType::Fifo => 5,
            FileType::Socket => 6,
            FileType::Symlink => 7,
        }
    }
    /// From a directory-entry type code.
    pub fn from_dirent_code(c: u8) -> Option<FileType> {
        FileType::ALL.into_iter().find(|t| t.dirent_code() == c)
    }
    /// True for the types that hold no data: fifos, devices and sockets
    /// (their inode holds the device number instead of an extent tree).
    pub fn is_special(self) -> bool {
        matches!(
            self,
            FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket
        )
    }
}

/// A run of blocks: file blocks `[logical, logical + len)` live at
/// `[physical, physical + len)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Extent {
    /// First file block.
    pub logical: u32,
    /// Blocks.
    pub len: u32,
    /// First device block.
    pub physical: u64,
    /// Allocated but never written (fallocate): reads return zeros, a write
    /// converts the blocks it writes (Ext4's unwritten extents,
    /// `fs/ext4/extents.c`).
    pub unwritten: bool,
}

impl Extent {
    /// One past the last file block.
    pub fn end(&self) -> u64 {
        self.logical as u64 + self.len as u64
    }

    /// True if `next` continues this extent: adjacent in the file and on
    /// the device, in the same state, and the sum not too long.
    pub fn joins(&self, next: &Extent) -> bool {
        self.end() == next.logical as u64
            && self.physical + self.len as u64 == next.physical
            && self.unwritten == next.unwritten
            && self.len as u64 + next.len as u64 <= MAX_EXTENT_LEN as u64
    }
}

/// Sorts `extents` by file block and merges the ones that join (see
/// [`Extent::joins`]); zero-length extents are dropped.
pub fn merge_extents(extents: &mut Vec<Extent>) {
    extents.retain(|e| e.len > 0);
    extents.sort_by_key(|e| e.logical);
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    for e in extents.drain(..) {
        match out.last_mut() {
            Some(last) if last.joins(&e) => last.len += e.len,
            _ => out.push(e),
        }
    }
    *extents = out;
}

/// Inode flag: the symlink target is stored in the inode.
pub const FLAG_INLINE_SYMLINK: u32 = 1;
/// Inode flag: the directory is indexed (ext4's `EXT4_INDEX_FL`, the same
/// bit): block 0 holds the dx_root, see [`crate::htree`].
pub const FLAG_INDEX: u32 = 0x1000;

/// An inode (256 bytes on disk).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    /// Type and permission bits.
    pub mode: u16,
    /// Hard links.
    pub links: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Size in bytes.
    pub size: u64,
    /// Access time (ns since 1970, from [`crate::Fs::now_ns`]).
    pub atime: u64,
    /// Modification time.
    pub mtime: u64,
    /// Change time.
    pub ctime: u64,
    /// Generation (bumped at each reuse of the number).
    pub generation: u32,
    /// Data, extent-tree and xattr blocks allocated.
    pub nblocks: u32,
    /// The extent tree: [`Inode::decode`] gives only its root, loaded
    /// further with [`ExtentTree::missing_children`] and
    /// [`ExtentTree::attach`].
    pub tree: ExtentTree,
    /// Inline symlink target.
    pub inline: Vec<u8>,
    /// The external extended-attribute block (0: none; Ext4's
    /// `i_file_acl`).
    pub xattr: u64,
    /// A device's number (Linux's `dev_t`, `makedev(major, minor)` in
    /// its 32-bit encoding) for the special types, 0 otherwise; at byte 68
    /// where files keep their tree's root (Ext4 keeps it in `i_block`).
    pub rdev: u32,
}

impl Inode {
    /// The file type, if the mode holds a valid one.
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.mode)
    }

    /// True if the slot is free (mode 0).
    pub fn is_free(&self) -> bool {
        self.mode == 0
    }

    /// Encodes into 256 bytes: the tree's root; the caller writes the
    /// tree blocks.
    pub fn encode(&self) -> [u8; INODE_SIZE] {
        let mut b = [0u8; INODE_SIZE];
        put_u16(&mut b, 0, self.mode);
        put_u16(&mut b, 2, self.links);
        put_u32(&mut b, 4, self.uid);
        put_u32(&mut b, 8, self.gid);
        put_u32(&mut b, 12, self.flags);
        put_u64(&mut b, 16, self.size);
        put_u64(&mut b, 24, self.atime);
        put_u64(&mut b, 32, self.mtime);
        put_u64(&mut b, 40, self.ctime);
        put_u32(&mut b, 48, self.generation);
        put_u32(&mut b, 52, self.nblocks);
        put_u16(&mut b, 56, self.tree.root().len() as u16);
        put_u16(&mut b, 58, self.tree.depth());
        put_u64(&mut b, INODE_XATTR, self.xattr);
        if self.file_type().is_some_and(FileType::is_special) {
            put_u32(&mut b, 68, self.rdev);
        } else if self.flags & FLAG_INLINE_SYMLINK != 0 {
            let n = self.inline.len().min(INLINE_SYMLINK);
            b[68..68 + n].copy_from_slice(&self.inline[..n]);
        } else {
            put_entries(&mut b[68..68 + INLINE_EXTENTS * 16], self.tree.root(), 16);
        }
        let c = crc(&b[..INODE_SIZE - 4]);
        put_u32(&mut b, INODE_SIZE - 4, c);
        b
    }

    /// Decodes 256 bytes. The tree's blocks are not read: `tree` holds
    /// only the root.
    pub fn decode(b: &[u8]) -> Result<Inode, FsError> {
        if b.len() < INODE_SIZE {
            return Err(FsError::Corrupt("short inode".into()));
        }
        let all_zero = b[..INODE_SIZE].iter().all(|x| *x == 0);
        if all_zero {
            return Ok(Inode::default());
        }
        if get_u32(b, INODE_SIZE - 4) != crc(&b[..INODE_SIZE - 4]) {
            return Err(FsError::Corrupt("inode checksum mismatch".into()));
        }
        let count = get_u16(b, 56) as usize;
        let depth = get_u16(b, 58);
        let flags = get_u32(b, 12);
        let mut ino = Inode {
            mode: get_u16(b, 0),
            links: get_u16(b, 2),
            uid: get_u32(b, 4),
            gid: get_u32(b, 8),
            flags,
            size: get_u64(b, 16),
            atime: get_u64(b, 24),
            mtime: get_u64(b, 32),
            ctime: get_u64(b, 40),
            generation: get_u32(b, 48),
            nblocks: get_u32(b, 52),
            tree: ExtentTree::default(),
            inline: Vec::new(),
            xattr: get_u64(b, INODE_XATTR),
            rdev: 0,
        };
        if ino.file_type().is_some_and(FileType::is_special) {
            if count != 0 || depth != 0 {
                return Err(FsError::Corrupt(format!(
                    "special file with an extent tree of {count} entries at depth {depth}"
                )));
            }
            ino.rdev = get_u32(b, 68);
        } else if flags & FLAG_INLINE_SYMLINK != 0 {
            let n = (ino.size as usize).min(INLINE_SYMLINK);
            ino.inline = b[68..68 + n].to_vec();
        } else {
            if count > INLINE_EXTENTS || depth > MAX_DEPTH || (depth > 0 && count == 0) {
                return Err(FsError::Corrupt(format!(
                    "extent tree root: {count} entries at depth {depth}"
                )));
            }
            let root = get_entries(&b[68..68 + INLINE_EXTENTS * 16], depth == 0, count, 16);
            ino.tree = ExtentTree::from_root(depth, root);
        }
        Ok(ino)
    }
}

/// Writes `entries` into `b`, one per `slot` bytes (16 in the inode, and
/// 16 for extents and 12 for index entries in a block).
fn put_entries(b: &mut [u8], entries: &Entries, slot: usize) {
    match entries {
        Entries::Leaf(v) => {
            for (i, e) in v.iter().enumerate() {
                put_extent(b, i * 16, e);
            }
        }
        Entries::Index(v) => {
            for (i, e) in v.iter().enumerate() {
                put_u32(b, i * slot, e.logical);
                put_u64(b, i * slot + 4, e.child);
            }
        }
    }
}

/// Reads `count` entries (bounded by the caller) from `b`; see
/// [`put_entries`].
fn get_entries(b: &[u8], leaf: bool, count: usize, slot: usize) -> Entries {
    if leaf {
        Entries::Leaf((0..count).map(|i| get_extent(b, i * 16)).collect())
    } else {
        Entries::Index(
            (0..count)
                .map(|i| IndexEntry {
                    logical: get_u32(b, i * slot),
                    child: get_u64(b, i * slot + 4),
                })
                .collect(),
        )
    }
}

fn put_extent(b: &mut [u8], o: usize, e: &Extent) {
    put_u32(b, o, e.logical);
    let flag = if e.unwritten { EXTENT_UNWRITTEN } else { 0 };
    put_u32(b, o + 4, (e.len & !EXTENT_UNWRITTEN) | flag);
    put_u64(b, o + 8, e.physical);
}

fn get_extent(b: &[u8], o: usize) -> Extent {
    let len = get_u32(b, o + 4);
    Extent {
        logical: get_u32(b, o),
        len: len & !EXTENT_UNWRITTEN,
        physical: get_u64(b, o + 8),
        unwritten: len & EXTENT_UNWRITTEN != 0,
    }
}

/// Extent-tree block magic ("MQXT"; Ext4's `EXT4_EXT_MAGIC` is 0xF30A).
const NODE_MAGIC: u32 = u32::from_le_bytes(*b"MQXT");
/// Bytes of a tree block's header.
const NODE_HEADER: usize = 16;

/// Encodes extent-tree block `entries` at `depth` (0: a leaf); see the
/// module docs.
pub fn encode_node(entries: &Entries, depth: u16) -> Box<[u8; BLOCK]> {
    let mut b = Box::new([0u8; BLOCK]);
    let (max, slot) = match entries {
        Entries::Leaf(_) => (LEAF_ENTRIES, 16),
        Entries::Index(_) => (INDEX_ENTRIES, 12),
    };
    debug_assert!(entries.len() <= max, "a node holds at most max entries");
    put_u32(&mut b[..], 0, NODE_MAGIC);
    put_u16(&mut b[..], 4, entries.len() as u16);
    put_u16(&mut b[..], 6, max as u16);
    put_u16(&mut b[..], 8, depth);
    put_entries(&mut b[NODE_HEADER..BLOCK - 4], entries, slot);
    let c = crc(&b[..BLOCK - 4]);
    put_u32(&mut b[..], BLOCK - 4, c);
    b
}

/// Decodes an extent-tree block that must be at `depth`. A bad magic,
/// checksum, depth (not the expected one), max or entry count (none, or
/// more than max) is `Corrupt`. Keys and child blocks are checked with
/// the whole tree ([`ExtentTree::validate`]).
pub fn decode_node(b: &[u8], depth: u16) -> Result<Entries, FsError> {
    let bad = |w: String| FsError::Corrupt(format!("extent tree block: {w}"));
    if b.len() < BLOCK || get_u32(b, 0) != NODE_MAGIC {
        return Err(bad("bad magic".into()));
    }
    if get_u32(b, BLOCK - 4) != crc(&b[..BLOCK - 4]) {
        return Err(bad("checksum mismatch".into()));
    }
    let found = get_u16(b, 8);
    if found != depth {
        return Err(bad(format!("depth {found}, its parent says {depth}")));
    }
    let (max, slot) = if depth == 0 {
        (LEAF_ENTRIES, 16)
    } else {
        (INDEX_ENTRIES, 12)
    };
    let (count, stored_max) = (get_u16(b, 4) as usize, get_u16(b, 6) as usize);
    if stored_max != max || count == 0 || count > max {
        return Err(bad(format!("{count} entries, max {stored_max}")));
    }
    Ok(get_entries(&b[NODE_HEADER..BLOCK - 4], depth == 0, count, slot))
}

/// Extended-attribute block magic ("MQXA"; Ext4's is `0xEA020000`).
const XATTR_MAGIC: u32 = u32::from_le_bytes(*b"MQXA");
/// Bytes of the xattr block header.
const XATTR_HEADER: usize = 16;
/// Bytes of a xattr block the entries may use (header and checksum out).
pub const XATTR_SPACE: usize = BLOCK - XATTR_HEADER - 4;
/// Longest attribute name, prefix included (Linux `XATTR_NAME_MAX`).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest attribute value Linux accepts at all (`XATTR_SIZE_MAX`); a
/// value that does not fit the block fails earlier with `NoSpace`.
pub const XATTR_SIZE_MAX: usize = 65536;

/// The attribute namespaces and their on-disk name index (Ext4's
/// `EXT4_XATTR_INDEX_*`): the prefix is stored as the index, the entry
/// keeps the rest of the name.
pub const XATTR_PREFIXES: [(u8, &str); 4] = [(1, "user."), (4, "trusted."), (6, "security."), (7, "system.")];

/// The namespace index and the suffix of attribute `name`, if its prefix
/// is one of [`XATTR_PREFIXES`].
pub fn xattr_split(name: &str) -> Option<(u8, &str)> {
    XATTR_PREFIXES
        .iter()
        .find_map(|(i, p)| name.strip_prefix(p).map(|rest| (*i, rest)))
}

/// Bytes an entry with a name suffix of `name` bytes and a value of
/// `value` bytes takes in a xattr block (4-byte header, 4-aligned).
pub fn xattr_entry_len(name: usize, value: usize) -> usize {
    (4 + name + value).div_ceil(4) * 4
}

/// Bytes `attrs` (full names to values) take in a xattr block.
pub fn xattr_bytes(attrs: &std::collections::BTreeMap<String, Vec<u8>>) -> usize {
    attrs
        .iter()
        .map(|(n, v)| xattr_entry_len(xattr_split(n).map_or(n.len(), |(_, s)| s.len()), v.len()))
        .sum()
}

/// Encodes the extended attributes `attrs` (full names to values) into a
/// xattr block, Ext4's external EA block (`fs/ext4/xattr.c`) simplified:
///
/// ```text
/// 0 magic "MQXA" | 4 refcount u32 (1: blocks are never shared)
/// 8 entries u32  | 12 entry bytes u32
/// 16.. entries in name order: index u8, suffix length u8, value length u16,
///      suffix, value, zero padding to 4 bytes
/// 4092 CRC-32 of bytes 0..4092
/// ```
///
/// Ext4 keeps entry headers growing from the front and values packed from
/// the end, with a hash per entry; here each value follows its name (one
/// block, read whole, so nothing is gained by the split). Fails with
/// `NoSpace` if they do not fit (Ext4's `ENOSPC` for a full EA block) and
/// `Invalid` for a name without a known prefix or too long.
pub fn encode_xattr_block(
    attrs: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Result<Box<[u8; BLOCK]>, FsError> {
    if xattr_bytes(attrs) > XATTR_SPACE {
        return Err(FsError::NoSpace);
    }
    let mut b = Box::new([0u8; BLOCK]);
    put_u32(&mut b[..], 0, XATTR_MAGIC);
    put_u32(&mut b[..], 4, 1);
    put_u32(&mut b[..], 8, attrs.len() as u32);
    let mut off = XATTR_HEADER;
    for (name, value) in attrs {
        let (index, suffix) =
            xattr_split(name).ok_or_else(|| FsError::Invalid(format!("xattr name {name:?}")))?;
        if suffix.is_empty() || name.len() > XATTR_NAME_MAX || value.len() > u16::MAX as usize {
            return Err(FsError::Invalid(format!(
                "xattr name {name:?} or its value length"
            )));
        }
        b[off] = index;
        b[off + 1] = suffix.len() as u8;
        put_u16(&mut b[..], off + 2, value.len() as u16);
        let n = off + 4;
        b[n..n + suffix.len()].copy_from_slice(suffix.as_bytes());
        b[n + suffix.len()..n + suffix.len() + value.len()].copy_from_slice(value);
        off += xattr_entry_len(suffix.len(), value.len());
    }
    put_u32(&mut b[..], 12, (off - XATTR_HEADER) as u32);
    let c = crc(&b[..BLOCK - 4]);
    put_u32(&mut b[..], BLOCK - 4, c);
    Ok(b)
}

/// Decodes a xattr block into full names and values. Every field is
/// untrusted: a bad magic, checksum, refcount, count, entry length, name
/// index, empty or non-UTF-8 name, or names out of order (or repeated) is
/// `Corrupt`, never a panic.
pub fn decode_xattr_block(b: &[u8]) -> Result<std::collections::BTreeMap<String, Vec<u8>>, FsError> {
    let bad = |w: &str| FsError::Corrupt(format!("xattr block: {w}"));
    if b.len() < BLOCK || get_u32(b, 0) != XATTR_MAGIC {
        return Err(bad("bad magic"));
    }
    if get_u32(b, BLOCK - 4) != crc(&b[..BLOCK - 4]) {
        return Err(bad("checksum mismatch"));
    }
    if get_u32(b, 4) != 1 {
        return Err(bad("reference count is not 1"));
    }
    let count = get_u32(b, 8) as usize;
    let used = get_u32(b, 12) as usize;
    if used > XATTR_SPACE || count > XATTR_SPACE / 4 {
        return Err(bad("entry count or bytes"));
    }
    let end = XATTR_HEADER + used;
    let mut out = std::collections::BTreeMap::new();
    let mut off = XATTR_HEADER;
    let mut last: Option<String> = None;
    for _ in 0..count {
        if off + 4 > end {
            return Err(bad("entry header past the entries"));
        }
        let index = b[off];
        let nlen = b[off + 1] as usize;
        let vlen = get_u16(b, off + 2) as usize;
        let len = xattr_entry_len(nlen, vlen);
        if nlen == 0 || off + len > end {
            return Err(bad("entry length"));
        }
        let prefix = XATTR_PREFIXES
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, p)| *p)
            .ok_or_else(|| bad("unknown name index"))?;
        let suffix =
            std::str::from_utf8(&b[off + 4..off + 4 + nlen]).map_err(|_| bad("name is not UTF-8"))?;
        let name = format!("{prefix}{suffix}");
        if name.len() > XATTR_NAME_MAX || suffix.contains('\0') {
            return Err(bad("name too long or with NUL"));
        }
        if last.as_ref().is_some_and(|l| *l >= name) {
            return Err(bad("names out of order or repeated"));
        }
        let value = b[off + 4 + nlen..off + 4 + nlen + vlen].to_vec();
        last = Some(name.clone());
        out.insert(name, value);
        off += len;
    }
    if off != end {
        return Err(bad("entry bytes do not match the entries"));
    }
    Ok(out)
}

/// Bytes of the checksum tail of a directory block.
pub const DIR_TAIL: usize = 12;
/// Usable bytes of a directory block.
pub const DIR_SPACE: usize = BLOCK - DIR_TAIL;

/// A directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode number (0: an unused slot).
    pub ino: u32,
    /// File type.
    pub ftype: FileType,
    /// Name bytes.
    pub name: Vec<u8>,
}

/// Bytes an entry with a name of `len` needs (8-byte header, 4-aligned).
pub fn dirent_len(len: usize) -> usize {
    (8 + len).div_ceil(4) * 4
}

/// Encodes a directory block from `entries`. Fails if they do not fit.
pub fn encode_dir_block(entries: &[DirEntry]) -> Result<Box<[u8; BLOCK]>, FsError> {
    let mut b = Box::new([0u8; BLOCK]);
    let mut off = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let need = dirent_len(e.name.len());
        let rec = if i + 1 == entries.len() {
            DIR_SPACE - off
        } else {
            need
        };
        if off + need > DIR_SPACE {
            return Err(FsError::NoSpace);
        }
        put_u32(&mut b[..], off, e.ino);
        put_u16(&mut b[..], off + 4, rec as u16);
        b[off + 6] = e.name.len() as u8;
        b[off + 7] = e.ftype.dirent_code();
        b[off + 8..off + 8 + e.name.len()].copy_from_slice(&e.name);
        off += rec;
    }
    if entries.is_empty() {
        put_u16(&mut b[..], 4, DIR_SPACE as u16);
    }
    seal_dir_block(&mut b);
    Ok(b)
}

/// Writes a directory block's checksum tail (ext4's
/// `ext4_dir_entry_tail`: a fake entry of 12 bytes, type 0xDE, with the
/// CRC of the bytes before it) over bytes `DIR_SPACE..`.
pub fn seal_dir_block(b: &mut [u8; BLOCK]) {
    b[DIR_SPACE..].fill(0);
    put_u16(&mut b[..], DIR_SPACE + 4, DIR_TAIL as u16);
    b[DIR_SPACE + 7] = 0xDE;
    let c = crc(&b[..DIR_SPACE]);
    put_u32(&mut b[..], DIR_SPACE + 8, c);
}

/// Decodes a directory block into its live entries.
pub fn decode_dir_block(b: &[u8]) -> Result<Vec<DirEntry>, FsError> {
    let bad = |w: &str| FsError::Corrupt(format!("directory block: {w}"));
    if b.len() < BLOCK || b[DIR_SPACE + 7] != 0xDE || get_u16(b, DIR_SPACE + 4) != DIR_TAIL as u16 {
        return Err(bad("no checksum tail"));
    }
    if get_u32(b, DIR_SPACE + 8) != crc(&b[..DIR_SPACE]) {
        return Err(bad("checksum mismatch"));
    }
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < DIR_SPACE {
        if off + 8 > DIR_SPACE {
            return Err(bad("entry header past the end"));
        }
        let ino = get_u32(b, off);
        let rec = get_u16(b, off + 4) as usize;
        let nlen = b[off + 6] as usize;
        if rec < 8 || rec % 4 != 0 || off + rec > DIR_SPACE || (ino != 0 && dirent_len(nlen) > rec) {
            return Err(bad("bad record length"));
        }
        if ino != 0 {
            let ftype = FileType::from_dirent_code(b[off + 7]).ok_or_else(|| bad("bad file type"))?;
            if nlen == 0 {
                return Err(bad("empty name"));
            }
            out.push(DirEntry {
                ino,
                ftype,
                name: b[off + 8..off + 8 + nlen].to_vec(),
            });
        }
        off += rec;
    }
    Ok(out)
}

/// Bytes `entries` take in a directory block.
pub fn dir_bytes(entries: &[DirEntry]) -> usize {
    entries.iter().map(|e| dirent_len(e.name.len())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> Superblock {
        Superblock {
            blocks: 16384,
            groups: 1,
            blocks_per_group: 16384 - 1024 - 1,
            inodes_per_group: 1024,
            groups_start: 1,
            journal_start: 16384 - 1024,
            journal_areas: 4,
            area_blocks: 256,
            mode: Mode::Mq,
            clean: true,
            next_txid: 9,
            mounts: 1,
            newest_time: 1_780_000_000_123_456_789,
            journal_damage: 0,
            hash_seed: 0x5eed,
            uuid: *b"0123456789abcdef",
            checkpoint_blocks: 0,
            p_area_blocks: 0,
        }
    }

    /// A horae superblock keeps its checkpoint region and its p-area
    /// (version 6), in that order at the device's end; either one in
    /// another mode, or a gap, is refused.
    #[test]
    fn the_checkpoint_region_and_p_area_round_trip_in_horae_mode_only() {
        let h = Superblock {
            mode: Mode::Horae,
            journal_areas: 1,
            area_blocks: 512,
            journal_start: 16384 - 512 - 512 - 256,
            blocks_per_group: 16384 - 1280 - 1,
            checkpoint_blocks: 512,
            p_area_blocks: 256,
            ..sb()
        };
        let b = h.encode();
        assert_eq!(Superblock::decode(&b[..], 16384).unwrap(), h);
        assert_eq!(h.p_area_start(), 16384 - 256);
        assert_eq!(h.checkpoint_start(), 16384 - 256 - 512);
        for bad in [
            Superblock {
                mode: Mode::Classic,
                ..h.clone()
            },
            Superblock {
                checkpoint_blocks: 256,
                ..h.clone()
            },
            Superblock {
                p_area_blocks: 128,
                ..h.clone()
            },
            Superblock {
                mode: Mode::Classic,
                checkpoint_blocks: 0,
                journal_start: 16384 - 512 - 256,
                ..h.clone()
            },
        ] {
            assert!(
                matches!(
                    Superblock::decode(&bad.encode()[..], 16384),
                    Err(FsError::Corrupt(_))
                ),
                "{bad:?}"
            );
        }
    }

    /// An image of an older layout (version 4: no UUID, unseeded journal
    /// checksums) is refused with a typed error naming both versions, in
    /// one line.
    #[test]
    fn an_older_layout_is_a_typed_error() {
        let mut b = sb().encode();
        put_u32(&mut b[..], 8, 4);
        let c = crc(&b[..BLOCK - 4]);
        put_u32(&mut b[..], BLOCK - 4, c);
        let e = Superblock::decode(&b[..], 16384).unwrap_err();
        assert_eq!(
            e,
            FsError::LayoutVersion {
                found: 4,
                supported: VERSION
            }
        );
        assert!(
            !e.to_string().contains('\n') && e.to_string().contains("version 4"),
            "{e}"
        );
    }

    #[test]
    fn superblock_round_trips_and_detects_damage() {
        let s = sb();
        let b = s.encode();
        assert_eq!(Superblock::decode(&b[..], 16384).unwrap(), s);
        let mut d = b.clone();
        d[20] ^= 1;
        assert!(matches!(
            Superblock::decode(&d[..], 16384),
            Err(FsError::Corrupt(_))
        ));
        assert!(matches!(
            Superblock::decode(&[0u8; BLOCK], 16384),
            Err(FsError::NotMqfs)
        ));
        assert!(Superblock::decode(&b[..], 100).is_err(), "device too small");
    }

    #[test]
    fn inode_round_trips_with_extents_and_symlinks() {
        let i = Inode {
            mode: FileType::File.mode_bits() | 0o644,
            links: 1,
            size: 12345,
            nblocks: 4,
            tree: ExtentTree::inline(vec![
                Extent {
                    logical: 0,
                    len: 3,
                    physical: 100,
                    unwritten: false,
                },
                Extent {
                    logical: 5,
                    len: 1,
                    physical: 300,
                    unwritten: true,
                },
            ]),
            ..Default::default()
        };
        assert_eq!(Inode::decode(&i.encode()).unwrap(), i);
        let s = Inode {
            mode: FileType::Symlink.mode_bits() | 0o777,
            links: 1,
            flags: FLAG_INLINE_SYMLINK,
            size: 5,
            inline: b"a/b/c".to_vec(),
            ..Default::default()
        };
        assert_eq!(Inode::decode(&s.encode()).unwrap(), s);
        let mut bad = i.encode();
        bad[17] ^= 4;
        assert!(Inode::decode(&bad).is_err());
        assert!(Inode::decode(&[0u8; INODE_SIZE]).unwrap().is_free());
    }

    #[test]
    fn directory_blocks_round_trip_and_reject_garbage() {
        let e = vec![
            DirEntry {
                ino: 2,
                ftype: FileType::Dir,
                name: b".".to_vec(),
            },
            DirEntry {
                ino: 2,
                ftype: FileType::Dir,
                name: b"..".to_vec(),
            },
            DirEntry {
                ino: 12,
                ftype: FileType::File,
                name: b"hello".to_vec(),
            },
        ];
        let b = encode_dir_block(&e).unwrap();
        assert_eq!(decode_dir_block(&b[..]).unwrap(), e);
        let mut d = b.clone();
        d[4] = 3;
        assert!(decode_dir_block(&d[..]).is_err());
        let many: Vec<DirEntry> = (0..2000)
            .map(|i| DirEntry {
                ino: 20 + i,
                ftype: FileType::File,
                name: format!("n{i}").into_bytes(),
            })
            .collect();
        assert!(matches!(encode_dir_block(&many), Err(FsError::NoSpace)));
        let leaf: Vec<Extent> = (0..20)
            .map(|i| Extent {
                logical: i * 2,
                len: 1,
                physical: 1000 + i as u64,
                unwritten: i % 3 == 0,
            })
            .collect();
        let leaf = Entries::Leaf(leaf);
        assert_eq!(decode_node(&encode_node(&leaf, 0)[..], 0).unwrap(), leaf);
    }

    /// An index node with `n` entries at `depth`.
    fn index(n: usize, depth: u16) -> Box<[u8; BLOCK]> {
        let v = (0..n as u32)
            .map(|i| IndexEntry {
                logical: i * 10,
                child: 500 + i as u64,
            })
            .collect();
        encode_node(&Entries::Index(v), depth)
    }

    /// Re-checksums a node block after a test changed it.
    fn reseal(b: &mut [u8; BLOCK]) {
        let c = crc(&b[..BLOCK - 4]);
        put_u32(&mut b[..], BLOCK - 4, c);
    }

    #[test]
    fn tree_nodes_round_trip_and_damage_is_corrupt_not_a_panic() {
        let full = index(INDEX_ENTRIES, 2);
        match decode_node(&full[..], 2).unwrap() {
            Entries::Index(v) => {
                assert_eq!(v.len(), INDEX_ENTRIES);
                assert_eq!(
                    v[7],
                    IndexEntry {
                        logical: 70,
                        child: 507
                    }
                );
            }
            Entries::Leaf(_) => panic!("an index node decoded as a leaf"),
        }
        let corrupt = |b: &[u8], depth: u16, what: &str| {
            assert!(
                matches!(decode_node(b, depth), Err(FsError::Corrupt(_))),
                "{what} is Corrupt"
            );
        };
        let mut bad = index(3, 1);
        bad[0] ^= 1;
        corrupt(&bad[..], 1, "a bad magic");
        let mut bad = index(3, 1);
        bad[40] ^= 1;
        corrupt(&bad[..], 1, "a checksum mismatch");
        corrupt(&index(3, 1)[..], 2, "a depth its parent does not expect");
        corrupt(&index(3, 1)[..], 0, "an index node where a leaf belongs");
        let mut bad = index(3, 1);
        put_u16(&mut bad[..], 4, INDEX_ENTRIES as u16 + 1);
        reseal(&mut bad);
        corrupt(&bad[..], 1, "entries past max");
        let mut bad = index(3, 1);
        put_u16(&mut bad[..], 6, 1000);
        reseal(&mut bad);
        corrupt(&bad[..], 1, "a wrong max");
        let mut bad = index(3, 1);
        put_u16(&mut bad[..], 4, 0);
        reseal(&mut bad);
        corrupt(&bad[..], 1, "an empty node");
        corrupt(&[0u8; 10], 0, "a short block");
        // The inode's root: depth past the deepest, or an index root with
        // no entry.
        let i = Inode {
            mode: FileType::File.mode_bits() | 0o644,
            links: 1,
            ..Default::default()
        };
        let mut raw = i.encode();
        put_u16(&mut raw, 58, MAX_DEPTH + 1);
        put_u16(&mut raw, 56, 1);
        let c = crc(&raw[..INODE_SIZE - 4]);
        put_u32(&mut raw, INODE_SIZE - 4, c);
        assert!(matches!(Inode::decode(&raw), Err(FsError::Corrupt(_))));
        put_u16(&mut raw, 58, 1);
        put_u16(&mut raw, 56, 0);
        let c = crc(&raw[..INODE_SIZE - 4]);
        put_u32(&mut raw, INODE_SIZE - 4, c);
        assert!(matches!(Inode::decode(&raw), Err(FsError::Corrupt(_))));
    }
}
