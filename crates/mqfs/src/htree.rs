//! Indexed directories: ext4's `dir_index` hash tree (Linux
//! `fs/ext4/namei.c`: `make_indexed_dir`, `dx_probe`, `do_split`,
//! `ext4_dx_add_entry`, `ext4_htree_next_block`). This module holds the
//! on-disk format and the pure algorithms; [`crate::dir`] runs them on
//! the directory's blocks.
//!
//! A directory starts linear (one block of entries). When an entry does
//! not fit in its single block it becomes indexed, as `make_indexed_dir`
//! does: the inode gets [`FLAG_INDEX`], block 0 becomes the **dx_root**
//! and the entries move, split by hash, into two **leaf** blocks (ordinary
//! entry blocks). A full leaf splits (`do_split`): its entries sorted by
//! hash, the upper half by size moves to a new block at the end of the
//! directory and its first hash is inserted into the index after the old
//! leaf's entry (with the **continuation bit**, bit 0, set when the hash
//! at the split equals the one below it, so a run of one hash may span
//! leaves). A full root adds a level: its entries move to a new **dx_node**
//! block and the root points at it; a full node splits in two, the upper
//! half's first hash going into the root. Two levels (root and nodes), as
//! ext4 without `largedir`: with 506 root and 509 node entries that is
//! 257,554 leaves, tens of millions of entries. A full two-level index is
//! `NoSpace` (ext4's "Directory index full!", `ENOSPC`). Leaves never merge
//! and a directory never becomes linear again (ext4 neither).
//!
//! ## Format (inside the ordinary directory block with its checksum tail)
//!
//! ```text
//! dx_root (block 0):
//!   0  "." entry: ino u32 | rec 12 u16 | name_len 1 | type 2 | ".\0\0\0"
//!   12 ".." entry: ino u32 | rec DIR_SPACE-12 u16 | 2 | 2 | "..\0\0"
//!   24 dx_root_info: reserved 0 u32 | hash version u8 (HASH_VERSION)
//!      | info length 8 u8 | indirect levels u8 (0 or 1) | flags 0 u8
//!   32 limit u16 (506) | count u16 | block u32    (entry 0: no hash)
//!   40 (hash u32, block u32) x (count - 1), hashes ascending
//! dx_node:
//!   0  empty entry: ino 0 | rec DIR_SPACE u16 | 0 | 0
//!   8  limit u16 (509) | count u16 | block u32, then (hash, block) pairs
//! ```
//!
//! Block numbers are the directory's logical blocks. Block 0 and the
//! nodes are valid linear blocks (the root holds only "." and "..", a node
//! one unused entry), so a linear scan (readdir, fsck's entry check, rmdir's
//! emptiness check) reads an indexed directory unchanged, as ext4's
//! compatibility with pre-htree readers.
//!
//! ## Hash (deviation)
//!
//! ext4 hashes names with half-MD4 or TEA seeded by the superblock's
//! `s_hash_seed`. MQFS uses CRC-32 (the IEEE polynomial of
//! [`crate::layout::crc`]) with the superblock's [`hash_seed`] as its
//! initial value ([`name_hash`]), recorded as hash version
//! [`HASH_VERSION`] (not one of ext4's 0..5): a well-defined hash with
//! the same role and the same bit 0 rule (always cleared, the index uses
//! it as the continuation bit). `docs/decisions.md` M22.
//!
//! [`hash_seed`]: crate::layout::Superblock::hash_seed
//! [`FLAG_INDEX`]: crate::layout::FLAG_INDEX
//!
//! ## Cost of a lookup
//!
//! A lookup of a name reads the root, one node when the index has two
//! levels, and one leaf (plus the next leaves while a hash collision
//! continues there), each through the buffer cache: 2 or 3 block reads.
//! It charges `dirent_cycles` per binary-search probe of each index block
//! (about log2 of its entries, at most 10) and per entry of the leaf it
//! scans (at most ~250 for short names), instead of per entry of the
//! whole directory.

use crate::error::FsError;
use crate::layout::{
    decode_dir_block, dirent_len, get_u16, get_u32, put_u16, put_u32, seal_dir_block, DirEntry, FileType,
    BLOCK, DIR_SPACE,
};

/// The hash version recorded in the dx_root: seeded CRC-32 (see the
/// module docs; ext4's are 0..5, so an ext4 tool would refuse it).
pub const HASH_VERSION: u8 = 0x10;
/// Index entries the dx_root holds.
pub const ROOT_LIMIT: usize = (DIR_SPACE - ROOT_ENTRIES) / 8;
/// Index entries a dx_node holds.
pub const NODE_LIMIT: usize = (DIR_SPACE - NODE_ENTRIES) / 8;
/// Index levels at most (root and nodes; ext4 without `largedir`).
pub const MAX_LEVELS: u8 = 2;
const ROOT_INFO: usize = 24;
const ROOT_ENTRIES: usize = 32;
const NODE_ENTRIES: usize = 8;
/// ext4's end-of-directory hash (`EXT4_HTREE_EOF_32BIT << 1`), never a
/// name's.
const EOF_HASH: u32 = 0xFFFF_FFFE;

/// The hash of `name` under `seed`, bit 0 clear (see the module docs).
pub fn name_hash(seed: u32, name: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(seed);
    h.update(name);
    let x = h.finalize() & !1;
    // As ext4's ext4fs_dirhash: the end-of-directory value is reserved.
    if x == EOF_HASH {
        EOF_HASH - 2
    } else {
        x
    }
}

/// One index entry: the lowest hash of the child (bit 0: the child
/// continues a run of the previous child's last hash) and the child's
/// logical block. Entry 0 of a block has no hash on disk (its place holds
/// the count and limit); in memory its hash is the block's lower bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DxEntry {
    /// Lowest hash of the child, bit 0 the continuation bit.
    pub hash: u32,
    /// The child's logical block in the directory.
    pub block: u32,
}

/// The dx_root: "." and "..", the index depth and the root's entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DxRoot {
    /// What "." names (the directory).
    pub dot: u32,
    /// What ".." names (the parent).
    pub dotdot: u32,
    /// Index levels below the root (0: the root points at leaves).
    pub levels: u8,
    /// The root's entries (entry 0's hash is 0).
    pub entries: Vec<DxEntry>,
}

fn bad(w: &str) -> FsError {
    FsError::Corrupt(format!("directory index: {w}"))
}

fn encode_entries(b: &mut [u8; BLOCK], at: usize, limit: usize, entries: &[DxEntry]) {
    debug_assert!(
        !entries.is_empty() && entries.len() <= limit,
        "index block over its limit"
    );
    put_u16(&mut b[..], at, limit as u16);
    put_u16(&mut b[..], at + 2, entries.len() as u16);
    put_u32(&mut b[..], at + 4, entries[0].block);
    for (i, e) in entries.iter().enumerate().skip(1) {
        put_u32(&mut b[..], at + 8 * i, e.hash);
        put_u32(&mut b[..], at + 8 * i + 4, e.block);
    }
}

fn decode_entries(b: &[u8], at: usize, limit: usize) -> Result<Vec<DxEntry>, FsError> {
    if get_u16(b, at) as usize != limit {
        return Err(bad("wrong limit"));
    }
    let count = get_u16(b, at + 2) as usize;
    if count == 0 || count > limit {
        return Err(bad("count out of range"));
    }
    let mut out = Vec::with_capacity(count);
    out.push(DxEntry {
        hash: 0,
        block: get_u32(b, at + 4),
    });
    for i in 1..count {
        let e = DxEntry {
            hash: get_u32(b, at + 8 * i),
            block: get_u32(b, at + 8 * i + 4),
        };
        if i > 1 && e.hash < out[i - 1].hash {
            return Err(bad("hashes out of order"));
        }
        out.push(e);
    }
    Ok(out)
}

/// Encodes the dx_root block.
pub fn encode_dx_root(root: &DxRoot) -> Box<[u8; BLOCK]> {
    let mut b = Box::new([0u8; BLOCK]);
    put_u32(&mut b[..], 0, root.dot);
    put_u16(&mut b[..], 4, 12);
    b[6] = 1;
    b[7] = FileType::Dir.dirent_code();
    b[8] = b'.';
    put_u32(&mut b[..], 12, root.dotdot);
    put_u16(&mut b[..], 16, (DIR_SPACE - 12) as u16);
    b[18] = 2;
    b[19] = FileType::Dir.dirent_code();
    b[20] = b'.';
    b[21] = b'.';
    b[ROOT_INFO + 4] = HASH_VERSION;
    b[ROOT_INFO + 5] = 8;
    b[ROOT_INFO + 6] = root.levels;
    encode_entries(&mut b, ROOT_ENTRIES, ROOT_LIMIT, &root.entries);
    seal_dir_block(&mut b);
    b
}

/// Decodes and checks a dx_root block (checksum, "." and ".." as ext4
/// lays them out, the info header, the entries' count and order).
pub fn decode_dx_root(b: &[u8]) -> Result<DxRoot, FsError> {
    let ents = decode_dir_block(b)?;
    if ents.len() != 2
        || ents[0].name != b"."
        || ents[1].name != b".."
        || get_u16(b, 4) != 12
        || get_u16(b, 16) as usize != DIR_SPACE - 12
    {
        return Err(bad("root without its \".\" and \"..\""));
    }
    if get_u32(b, ROOT_INFO) != 0 || b[ROOT_INFO + 5] != 8 || b[ROOT_INFO + 7] != 0 {
        return Err(bad("root info header"));
    }
    if b[ROOT_INFO + 4] != HASH_VERSION {
        return Err(bad("unknown hash version"));
    }
    let levels = b[ROOT_INFO + 6];
    if levels >= MAX_LEVELS {
        return Err(bad("too many levels"));
    }
    Ok(DxRoot {
        dot: ents[0].ino,
        dotdot: ents[1].ino,
        levels,
        entries: decode_entries(b, ROOT_ENTRIES, ROOT_LIMIT)?,
    })
}

/// Encodes a dx_node block.
pub fn encode_dx_node(entries: &[DxEntry]) -> Box<[u8; BLOCK]> {
    let mut b = Box::new([0u8; BLOCK]);
    put_u16(&mut b[..], 4, DIR_SPACE as u16);
    encode_entries(&mut b, NODE_ENTRIES, NODE_LIMIT, entries);
    seal_dir_block(&mut b);
    b
}

/// Decodes and checks a dx_node block. `lower` is the hash its parent
/// entry gives it (entry 0's in-memory hash).
pub fn decode_dx_node(b: &[u8], lower: u32) -> Result<Vec<DxEntry>, FsError> {
    decode_dir_block(b)?;
    if get_u32(b, 0) != 0 || get_u16(b, 4) as usize != DIR_SPACE || b[6] != 0 {
        return Err(bad("node without its empty entry"));
    }
    let mut e = decode_entries(b, NODE_ENTRIES, NODE_LIMIT)?;
    e[0].hash = lower;
    if e.len() > 1 && e[1].hash < lower {
        return Err(bad("node hash below its parent's"));
    }
    Ok(e)
}

/// The position in `entries` whose child covers `hash` (`dx_probe`'s
/// binary search: the last entry whose hash is at most `hash`, entry 0
/// for anything below entry 1), and the probes it took.
pub fn find(entries: &[DxEntry], hash: u32) -> (usize, u32) {
    let (mut lo, mut hi) = (1usize, entries.len());
    let mut probes = 1;
    while lo < hi {
        let m = lo + (hi - lo) / 2;
        probes += 1;
        if entries[m].hash > hash {
            hi = m;
        } else {
            lo = m + 1;
        }
    }
    (lo - 1, probes)
}

/// True if a search for `hash` goes on into the child whose index hash is
/// `next` (`ext4_htree_next_block`: the next child starts with the same
/// hash, bit 0 ignored).
pub fn continues(next: u32, hash: u32) -> bool {
    next & !1 == hash
}

/// True if an entry of hash `h` belongs in a child whose index hash is
/// `lower` and whose next sibling's is `upper` (None: the last child):
/// the range fsck checks.
pub fn in_range(h: u32, lower: u32, upper: Option<u32>) -> bool {
    h >= lower & !1
        && match upper {
            None => true,
            Some(u) if u & 1 == 1 => h <= u & !1,
            Some(u) => h < u,
        }
}

/// `do_split`'s choice for a full leaf: `entries` sorted by hash (with
/// their hashes) are cut where the upper part holds about half the bytes;
/// returns the cut and the new leaf's index hash (bit 0 set when the hash
/// at the cut equals the one before it).
pub fn split_point(sorted: &[(u32, DirEntry)]) -> (usize, u32) {
    debug_assert!(sorted.len() >= 2, "a full leaf holds at least two entries");
    let mut size = 0;
    let mut moved = 0;
    for (_, e) in sorted.iter().rev() {
        let s = dirent_len(e.name.len());
        if size + s / 2 > DIR_SPACE / 2 {
            break;
        }
        size += s;
        moved += 1;
    }
    let cut = (sorted.len() - moved).clamp(1, sorted.len() - 1);
    let h = sorted[cut].0;
    let continued = h == sorted[cut - 1].0;
    (cut, h | continued as u32)
}

/// Sorts a leaf's entries by hash (then name, for a deterministic order
/// among collisions), with their hashes.
pub fn by_hash(seed: u32, entries: Vec<DirEntry>) -> Vec<(u32, DirEntry)> {
    let mut v: Vec<(u32, DirEntry)> = entries
        .into_iter()
        .map(|e| (name_hash(seed, &e.name), e))
        .collect();
    v.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::encode_dir_block;

    fn ent(name: &str) -> DirEntry {
        DirEntry {
            ino: 20,
            ftype: FileType::File,
            name: name.as_bytes().to_vec(),
        }
    }

    #[test]
    fn root_and_node_round_trip_and_read_as_linear_blocks() {
        let root = DxRoot {
            dot: 12,
            dotdot: 2,
            levels: 1,
            entries: (0..ROOT_LIMIT as u32)
                .map(|i| DxEntry {
                    hash: i * 8,
                    block: i + 1,
                })
                .collect(),
        };
        let b = encode_dx_root(&root);
        assert_eq!(decode_dx_root(&b[..]).unwrap(), root);
        let linear = decode_dir_block(&b[..]).unwrap();
        assert_eq!(
            linear.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
            vec![b".".to_vec(), b"..".to_vec()]
        );
        let node: Vec<DxEntry> = (0..NODE_LIMIT as u32)
            .map(|i| DxEntry {
                hash: 100 + i * 2,
                block: i + 7,
            })
            .collect();
        let n = encode_dx_node(&node);
        let mut want = node.clone();
        want[0].hash = 50;
        assert_eq!(decode_dx_node(&n[..], 50).unwrap(), want);
        assert!(decode_dir_block(&n[..]).unwrap().is_empty());
        assert_eq!((ROOT_LIMIT, NODE_LIMIT), (506, 509));
    }

    #[test]
    fn damaged_index_blocks_are_typed_errors() {
        let root = DxRoot {
            dot: 12,
            dotdot: 2,
            levels: 0,
            entries: vec![DxEntry { hash: 0, block: 1 }, DxEntry { hash: 40, block: 2 }],
        };
        let good = encode_dx_root(&root);
        let mut cases: Vec<Box<[u8; BLOCK]>> = Vec::new();
        for (at, v) in [
            (ROOT_INFO + 6, 5u8),
            (ROOT_INFO + 4, 1),
            (ROOT_ENTRIES + 2, 0),
            (ROOT_ENTRIES, 7),
        ] {
            let mut b = good.clone();
            b[at] = v;
            seal_dir_block(&mut b);
            cases.push(b);
        }
        let mut flipped = good.clone();
        flipped[40] ^= 1;
        cases.push(flipped);
        // Out of order: entry 2 below entry 1.
        let mut ooo = root.clone();
        ooo.entries.push(DxEntry { hash: 8, block: 3 });
        cases.push(encode_dx_root(&ooo));
        // A linear block is not a root.
        cases.push(encode_dir_block(&[ent("."), ent(".."), ent("x")]).unwrap());
        for b in cases {
            assert!(matches!(decode_dx_root(&b[..]), Err(FsError::Corrupt(_))));
        }
        assert!(matches!(decode_dx_node(&good[..], 0), Err(FsError::Corrupt(_))));
    }

    #[test]
    fn find_takes_the_last_entry_at_or_below_the_hash() {
        let e: Vec<DxEntry> = [0u32, 10, 20, 21, 40]
            .iter()
            .enumerate()
            .map(|(i, h)| DxEntry {
                hash: *h,
                block: i as u32,
            })
            .collect();
        assert_eq!(find(&e, 0).0, 0);
        assert_eq!(find(&e, 9).0, 0);
        assert_eq!(find(&e, 10).0, 1);
        // 20 lands before the continuation 21 and goes on into it.
        assert_eq!(find(&e, 20).0, 2);
        assert!(continues(e[3].hash, 20));
        assert!(!continues(e[4].hash, 20));
        assert_eq!(find(&e, 22).0, 3);
        assert_eq!(find(&e, u32::MAX).0, 4);
        assert!(find(&e, 30).1 <= 4);
    }

    #[test]
    fn split_of_colliding_hashes_sets_the_continuation_bit() {
        // All one hash: the cut gets the bit, both halves are in range of
        // a search that continues.
        let same: Vec<(u32, DirEntry)> = (0..300).map(|i| (64, ent(&format!("n{i:05}")))).collect();
        let (cut, h) = split_point(&same);
        assert_eq!(h, 65);
        assert!(cut > 100 && cut < 200, "cut {cut}");
        assert!(in_range(64, 0, Some(65)) && in_range(64, 65, None) && !in_range(66, 0, Some(65)));
        // Distinct hashes: no bit, the upper part holds about half.
        let distinct: Vec<(u32, DirEntry)> = (0..300).map(|i| (i * 4, ent(&format!("n{i:05}")))).collect();
        let (cut, h) = split_point(&distinct);
        assert_eq!(h, cut as u32 * 4);
        let upper: usize = distinct[cut..]
            .iter()
            .map(|(_, e)| dirent_len(e.name.len()))
            .sum();
        assert!(
            (DIR_SPACE / 2 - 32..=DIR_SPACE / 2 + 16).contains(&upper),
            "upper {upper}"
        );
        assert!(in_range(h - 4, 0, Some(h)) && !in_range(h, 0, Some(h)));
    }

    #[test]
    fn name_hash_is_seeded_and_clears_bit_zero() {
        let a = name_hash(1, b"file");
        assert_eq!(a & 1, 0);
        assert_ne!(a, name_hash(2, b"file"));
        assert_eq!(a, name_hash(1, b"file"));
        assert_ne!(a, name_hash(1, b"filf"));
    }
}
