//! The consistent view's format in persistent memory: the superblock, the
//! allocation bitmap, and the structures the content-oblivious allocator
//! hands out in its two sizes (paper L98-L106, Table 1): 64-byte lines
//! (inodes, dentries, name lines) and 4 KiB pages (directory bucket
//! pages, file index pages, data blocks). Every pointer is a PM offset;
//! 0 is null (page 0 holds the superblock, so nothing else lives there).

/// A cache line: the allocator's small unit.
pub const LINE: u64 = 64;
/// A page: the allocator's large unit.
pub const PAGE: u64 = 4096;
/// Lines per page (one bitmap word per page).
pub const LINES_PER_PAGE: u64 = PAGE / LINE;
/// Buckets per directory hash table (one bucket page of 8-byte heads).
pub const BUCKETS: u64 = PAGE / 8;
/// Block pointers per file index page: the largest file is
/// `INDEX_SLOTS * PAGE` bytes (one level, not the paper's B-tree).
pub const INDEX_SLOTS: u64 = PAGE / 8;
/// Longest name in bytes.
pub const NAME_MAX: usize = 255;
/// Name bytes per name line (the first word links the next line).
pub const NAME_PER_LINE: usize = 56;

/// Superblock word 0.
pub const SB_MAGIC: u64 = 0x5355_5046_5330_3031; // "SUPFS001"
/// Superblock word offsets.
pub const SB_ROOT: u64 = 8;
/// Superblock: PM size in bytes.
pub const SB_SIZE: u64 = 16;
/// The bitmap starts at page 1.
pub const BITMAP_START: u64 = PAGE;

/// Tag in the low 16 bits of an inode's word 0.
pub const INODE_MAGIC: u64 = 0x50f5;
/// Tag in the top 16 bits of a dentry's word 3.
pub const DENTRY_MAGIC: u64 = 0xde47;

/// Inode word offsets (one 64-byte line). Fields that change together
/// after the inode is reachable are one word (kind, perm) or ordered by
/// the line's store order (root before size); see `lib.rs`, deviations.
pub const I_HEAD: u64 = 0;
/// Link count (names in the consistent view, at least).
pub const I_NLINK: u64 = 8;
/// File size in bytes.
pub const I_SIZE: u64 = 16;
/// File index page, or directory bucket page.
pub const I_ROOT: u64 = 24;
/// Parent directory (`..`, stored in the inode: paper L139-L141).
pub const I_PARENT: u64 = 32;
/// Modification time (ns of simulated time).
pub const I_MTIME: u64 = 40;

/// Dentry word offsets (a 64-byte line; the paper's 32-byte dentry).
pub const D_INO: u64 = 0;
/// First name line.
pub const D_NAME: u64 = 8;
/// Consistent next (the latest next lives in DRAM).
pub const D_CNEXT: u64 = 16;
/// Hash, length and tag.
pub const D_META: u64 = 24;

/// What an inode is: a file or a directory ([`fsapi::FileType`]).
pub(crate) use fsapi::FileType as Kind;

/// The code of `kind` in an inode's head word.
fn kind_code(kind: Kind) -> u64 {
    match kind {
        Kind::File => 1,
        Kind::Dir => 2,
        // No operation makes these (the trait has no symlink or mknod):
        // codes a mount refuses, as an image holding one is not SoupFS's.
        Kind::Symlink => 3,
        Kind::Special => 4,
    }
}

/// Pages the bitmap needs for `size` bytes of PM (one bit per line).
pub fn bitmap_pages(size: u64) -> u64 {
    (size / LINE).div_ceil(8).div_ceil(PAGE)
}

/// First page the allocator may hand out.
pub fn first_free_page(size: u64) -> u64 {
    1 + bitmap_pages(size)
}

/// The bitmap word covering page `page`.
pub fn bitmap_word(page: u64) -> u64 {
    BITMAP_START + 8 * page
}

/// Word 0 of an inode.
pub fn inode_head(kind: Kind, perm: u16) -> u64 {
    INODE_MAGIC | kind_code(kind) << 16 | u64::from(perm) << 24
}

/// Decodes an inode's word 0: `None` if it is not an initialized inode.
pub fn parse_inode_head(w: u64) -> Option<(Kind, u16)> {
    if w & 0xffff != INODE_MAGIC {
        return None;
    }
    let kind = match (w >> 16) & 0xff {
        1 => Kind::File,
        2 => Kind::Dir,
        _ => return None,
    };
    Some((kind, ((w >> 24) & 0xfff) as u16))
}

/// A whole inode line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InodeLine {
    /// Kind.
    pub kind: Kind,
    /// Permission bits.
    pub perm: u16,
    /// Link count.
    pub nlink: u64,
    /// Size.
    pub size: u64,
    /// Index or bucket page.
    pub root: u64,
    /// Parent directory.
    pub parent: u64,
    /// Modification time.
    pub mtime: u64,
}

impl InodeLine {
    /// The 64 bytes.
    pub fn encode(&self) -> [u8; 64] {
        let words = [
            inode_head(self.kind, self.perm),
            self.nlink,
            self.size,
            self.root,
            self.parent,
            self.mtime,
            0,
            0,
        ];
        words_to_line(&words)
    }
}

/// FNV-1a of a name (the directory hash).
pub fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A name's bucket.
pub fn bucket_of(hash: u64) -> u64 {
    hash % BUCKETS
}

/// A dentry's word 3: the low 32 bits of the hash, the length, the tag.
pub fn dentry_meta(hash: u64, len: usize) -> u64 {
    (hash & 0xffff_ffff) | (len as u64 & 0xffff) << 32 | DENTRY_MAGIC << 48
}

/// Decodes a dentry's word 3 into (hash low bits, length).
pub fn parse_dentry_meta(w: u64) -> Option<(u64, usize)> {
    if w >> 48 != DENTRY_MAGIC {
        return None;
    }
    Some((w & 0xffff_ffff, ((w >> 32) & 0xffff) as usize))
}

/// Name lines a name of `len` bytes needs.
pub fn name_lines(len: usize) -> usize {
    len.div_ceil(NAME_PER_LINE).max(1)
}

/// Eight words as a line.
pub fn words_to_line(words: &[u64; 8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, w) in words.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Word `i` of a line.
pub fn word(line: &[u8; 64], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&line[i * 8..i * 8 + 8]);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_metas_round_trip() {
        assert_eq!(
            parse_inode_head(inode_head(Kind::Dir, 0o755)),
            Some((Kind::Dir, 0o755))
        );
        assert_eq!(parse_inode_head(0), None);
        let h = name_hash("abc");
        assert_eq!(parse_dentry_meta(dentry_meta(h, 3)), Some((h & 0xffff_ffff, 3)));
        assert_eq!(parse_dentry_meta(0), None);
        assert_eq!(name_lines(56), 1);
        assert_eq!(name_lines(57), 2);
        assert_eq!(bitmap_pages(1 << 20), 1);
    }
}
