//! Where everything lives in the persistent memory, and the on-media
//! formats of the superblock, inodes and directory entries.
//!
//! ```text
//! page 0   line 0: superblock          lines 1..: block bitmap (one bit a data page)
//! page 1   the undo journal: LOG_ENTRIES entries of one line each
//! pages 2.. the inode table: `inodes` inodes of one line each (0 unused, 1 the root)
//! then     data pages (file data and directory blocks)
//! ```

use fsapi::Errno;
use pcie_sim::PmAddr;

use crate::error::{PmfsError, Result};

/// A cache line.
pub const LINE: u64 = 64;
/// A page (a data page, a directory block).
pub const PAGE: u64 = 4096;
/// Undo-journal entries (one line each).
pub const LOG_ENTRIES: u32 = (PAGE / LINE) as u32;
/// Direct page pointers in an inode.
pub const MAX_PAGES: usize = 12;
/// The largest file: its pages all mapped directly.
pub const MAX_SIZE: u64 = MAX_PAGES as u64 * PAGE;
/// Longest name (bytes): a directory entry is one line, 8 bytes of header.
pub const NAME_MAX: usize = 56;
/// Directory entries in a directory block.
pub const DENTRIES_PER_PAGE: u64 = PAGE / LINE;
/// The superblock's magic ("PMFS0001").
pub const MAGIC: u64 = u64::from_le_bytes(*b"PMFS0001");
/// Inode number.
pub type Ino = u32;
/// The root directory's inode.
pub const ROOT: Ino = 1;

/// Where the regions are, from the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of persistent memory.
    pub size: u64,
    /// Inode slots (numbers `0..inodes`; 0 is never used).
    pub inodes: u32,
    /// Data pages.
    pub pages: u32,
}

impl Geometry {
    /// The geometry for `size` bytes with `inodes` inode slots; every
    /// page after the inode table is a data page.
    pub fn for_size(size: u64, inodes: u32) -> Result<Geometry> {
        if inodes < 2 {
            return Err(PmfsError::Geometry(
                "at least two inode slots (0 unused, 1 the root)",
            ));
        }
        let table = (u64::from(inodes) * LINE).div_ceil(PAGE) * PAGE;
        let data_at = 2 * PAGE + table;
        if size % PAGE != 0 || size <= data_at {
            return Err(PmfsError::Geometry(
                "size must be whole pages beyond the inode table",
            ));
        }
        let pages = (size - data_at) / PAGE;
        let bitmap_bits = (PAGE - LINE) * 8;
        if pages > bitmap_bits || pages > u64::from(u32::MAX) {
            return Err(PmfsError::Geometry("more data pages than the bitmap holds"));
        }
        Ok(Geometry {
            size,
            inodes,
            pages: pages as u32,
        })
    }

    /// The bitmap word holding data page `page`'s bit.
    pub fn bitmap_word(&self, page: u32) -> PmAddr {
        PmAddr(LINE + u64::from(page / 64) * 8)
    }

    /// Bytes of bitmap.
    pub fn bitmap_len(&self) -> usize {
        u64::from(self.pages).div_ceil(64) as usize * 8
    }

    /// Journal entry `i`.
    pub fn log_entry(&self, i: u32) -> PmAddr {
        PmAddr(PAGE + u64::from(i) * LINE)
    }

    /// Inode `ino`'s line.
    pub fn inode_addr(&self, ino: Ino) -> PmAddr {
        PmAddr(2 * PAGE + u64::from(ino) * LINE)
    }

    /// The first data page.
    pub fn data_at(&self) -> u64 {
        2 * PAGE + (u64::from(self.inodes) * LINE).div_ceil(PAGE) * PAGE
    }

    /// Data page `page`.
    pub fn page_addr(&self, page: u32) -> PmAddr {
        PmAddr(self.data_at() + u64::from(page) * PAGE)
    }

    /// The superblock line: magic, size, inodes, pages, CRC-32 of the rest.
    pub fn encode(&self) -> [u8; LINE as usize] {
        let mut b = [0u8; LINE as usize];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.inodes.to_le_bytes());
        b[20..24].copy_from_slice(&self.pages.to_le_bytes());
        let crc = crc32fast::hash(&b[0..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads a superblock line, checked against the memory's size.
    pub fn decode(b: &[u8; LINE as usize], size: u64) -> Result<Geometry> {
        if u64::from_le_bytes(word(b, 0)) != MAGIC {
            return Err(PmfsError::NotPmfs("bad magic"));
        }
        let crc = u32::from_le_bytes([b[56], b[57], b[58], b[59]]);
        if crc != crc32fast::hash(&b[0..56]) {
            return Err(PmfsError::NotPmfs("superblock checksum"));
        }
        let stored = u64::from_le_bytes(word(b, 8));
        let inodes = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
        let pages = u32::from_le_bytes([b[20], b[21], b[22], b[23]]);
        if stored != size {
            return Err(PmfsError::NotPmfs("superblock size is not the memory's"));
        }
        let g = Geometry::for_size(size, inodes).map_err(|_| PmfsError::NotPmfs("bad geometry"))?;
        if g.pages != pages {
            return Err(PmfsError::NotPmfs("page count does not match the geometry"));
        }
        Ok(g)
    }
}

/// The 8 bytes of `b` at `at`.
pub fn word(b: &[u8], at: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    w
}

pub use fsapi::FileType;

/// An inode as stored (one line: type, permissions, links, size, and
/// [`MAX_PAGES`] direct pointers, each a data page plus one, 0 a hole).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    /// `None`: a free slot.
    pub ftype: Option<FileType>,
    /// Permission bits.
    pub perm: u16,
    /// Hard links (a directory: 2 plus its subdirectories).
    pub links: u32,
    /// Size in bytes (files).
    pub size: u64,
    /// Page pointers (page + 1; 0 is a hole).
    pub ptrs: [u32; MAX_PAGES],
}

impl Inode {
    /// A fresh inode.
    pub fn new(ftype: FileType, perm: u16) -> Inode {
        Inode {
            ftype: Some(ftype),
            perm,
            links: if ftype == FileType::Dir { 2 } else { 1 },
            size: 0,
            ptrs: [0; MAX_PAGES],
        }
    }

    /// Its eight words.
    pub fn encode(&self) -> [u64; 8] {
        let t: u64 = match self.ftype {
            None => 0,
            Some(FileType::File) => 1,
            Some(FileType::Dir) => 2,
            // No operation makes these (the trait has no symlink or mknod):
            // codes that `decode` refuses, as an image holding one is not
            // a PMFS image.
            Some(FileType::Symlink) => 3,
            Some(FileType::Special) => 4,
        };
        let mut w = [0u64; 8];
        w[0] = t | u64::from(self.perm) << 8 | u64::from(self.links) << 32;
        w[1] = self.size;
        for (i, pair) in self.ptrs.chunks_exact(2).enumerate() {
            w[2 + i] = u64::from(pair[0]) | u64::from(pair[1]) << 32;
        }
        w
    }

    /// Reads one from its eight words; `None` if the type is unknown.
    pub fn decode(w: &[u64; 8]) -> Option<Inode> {
        let ftype = match w[0] & 0xff {
            0 => None,
            1 => Some(FileType::File),
            2 => Some(FileType::Dir),
            _ => return None,
        };
        let mut ptrs = [0u32; MAX_PAGES];
        for i in 0..MAX_PAGES / 2 {
            ptrs[2 * i] = w[2 + i] as u32;
            ptrs[2 * i + 1] = (w[2 + i] >> 32) as u32;
        }
        Some(Inode {
            ftype,
            perm: (w[0] >> 8) as u16,
            links: (w[0] >> 32) as u32,
            size: w[1],
            ptrs,
        })
    }
}

/// A directory entry's eight words: the inode (0: free) and the name's
/// length in word 0, the name in words 1 to 7.
pub fn encode_dentry(ino: Ino, name: &str) -> [u64; 8] {
    let mut b = [0u8; LINE as usize];
    b[0..4].copy_from_slice(&ino.to_le_bytes());
    b[4] = name.len() as u8;
    b[8..8 + name.len()].copy_from_slice(name.as_bytes());
    words_of(&b)
}

/// A directory entry's inode and name; `None` for a free one or one whose
/// name is not valid.
pub fn decode_dentry(b: &[u8]) -> Option<(Ino, String)> {
    let ino = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if ino == 0 {
        return None;
    }
    let len = b[4] as usize;
    if len == 0 || len > NAME_MAX {
        return None;
    }
    let name = std::str::from_utf8(&b[8..8 + len]).ok()?;
    Some((ino, name.to_string()))
}

/// A line's bytes as eight words.
pub fn words_of(b: &[u8; LINE as usize]) -> [u64; 8] {
    let mut w = [0u64; 8];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u64::from_le_bytes(word(b, 8 * i));
    }
    w
}

/// Checks a name: not empty, at most [`NAME_MAX`] bytes, not `.`/`..`,
/// no `/` or NUL.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(PmfsError::Fs(Errno::Invalid("empty name, . or ..")));
    }
    if name.len() > NAME_MAX {
        return Err(PmfsError::Fs(Errno::NameTooLong));
    }
    if name.contains(['/', '\0']) {
        return Err(PmfsError::Fs(Errno::Invalid("name holds / or NUL")));
    }
    Ok(())
}
