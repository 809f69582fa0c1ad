//! On-disk formats of the journal blocks both journals write (the log
//! they form is in the `log` module): the area superblock, descriptor
//! blocks (JBD2's descriptor; MQFS's last one is its JH, ccNVMe 5.1, with
//! the global transaction id), revoke blocks and commit blocks (JBD2
//! only). Each is one 4 KiB block, little-endian, sealed by a CRC-32 of
//! bytes 0..4092 in bytes 4092..4096 (all but the area superblock's, and
//! every tag's CRC, computed from the file system's checksum seed, JBD2
//! csum v3's `j_csum_seed`: see
//! [`Superblock::journal_csum_seed`](crate::layout::Superblock::journal_csum_seed)),
//! and opens with the same header: an
//! 8-byte magic naming its type at 0 and, but for the superblock, the
//! sequence number of its transaction in its area at 8. Every journaled
//! copy's CRC is in its descriptor tag (JBD2's checksum v3), so a torn or
//! stale block is recognised. A block with its type's magic and its
//! transaction's sequence number whose checksum fails was damaged after it
//! was written whole; recovery reports it (`docs/decisions.md` E4).
//!
//! | block | bytes | field |
//! |---|---|---|
//! | area superblock | 0..8 | magic `MQJSB001` |
//! | | 8..12 | area index |
//! | | 16..24 | head: offset of the first live log block (>= 1) |
//! | | 24..32 | sequence number of the transaction at the head |
//! | | 32..40 | `home_below` (MQFS; 0 in JBD2) |
//! | descriptor | 0..8 | magic `MQJDESC1` |
//! | | 8..16 | sequence number |
//! | | 16..24 | transaction id (MQFS; the sequence number in JBD2) |
//! | | 24..28 | tag count (at most [`TAGS_PER_DESC`]) |
//! | | 28 | 1 on the transaction's last descriptor |
//! | | 48 + 24 i.. | tag i: home block (8), log offset of the copy (8), CRC-32 of the copy (4), 4 zero |
//! | revoke | 0..8 | magic `MQJRVK01` |
//! | | 8..16 | sequence number |
//! | | 16..20 | count (at most [`REVOKES_PER_BLOCK`]) |
//! | | 24 + 8 i.. | revoked home block i |
//! | commit | 0..8 | magic `MQJCMT01` |
//! | | 8..16 | sequence number |
//! | | 16..20 | blocks of the transaction before it |
//!
//! Unlike JBD2 (Linux `include/linux/jbd2.h`), blocks are not big-endian,
//! the header holds no block type field (the magic is the type), and the
//! commit block has no timestamp.

use crate::error::FsError;
use crate::layout::{crc_seeded, BLOCK};

const JSB_MAGIC: u64 = u64::from_le_bytes(*b"MQJSB001");
const DESC_MAGIC: u64 = u64::from_le_bytes(*b"MQJDESC1");
const REVOKE_MAGIC: u64 = u64::from_le_bytes(*b"MQJRVK01");
const COMMIT_MAGIC: u64 = u64::from_le_bytes(*b"MQJCMT01");

/// Descriptor header bytes.
const DESC_HEADER: usize = 48;
/// Bytes per descriptor tag: home block, journal block, block CRC.
const TAG: usize = 24;
/// Tags per descriptor block.
pub const TAGS_PER_DESC: usize = (BLOCK - DESC_HEADER - 4) / TAG;
/// Revoked block numbers per revoke block.
pub const REVOKES_PER_BLOCK: usize = (BLOCK - 32) / 8;

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}
/// Seals `b` with its CRC from `seed` (the file system's
/// [`journal_csum_seed`](crate::layout::Superblock::journal_csum_seed); 0,
/// a plain CRC, for the area superblock, as JBD2 seeds its superblock's
/// checksum with ~0 alone).
fn seal(b: &mut [u8; BLOCK], seed: u32) {
    let c = crc_seeded(seed, &b[..BLOCK - 4]);
    b[BLOCK - 4..].copy_from_slice(&c.to_le_bytes());
}
fn sealed(b: &[u8], seed: u32) -> bool {
    b.len() >= BLOCK && u32_at(b, BLOCK - 4) == crc_seeded(seed, &b[..BLOCK - 4])
}

/// A block opening with the common header: `magic` at 0 and, if given,
/// the sequence number at 8.
fn with_header(magic: u64, seq: Option<u64>) -> Box<[u8; BLOCK]> {
    let mut b = Box::new([0u8; BLOCK]);
    b[0..8].copy_from_slice(&magic.to_le_bytes());
    if let Some(seq) = seq {
        b[8..16].copy_from_slice(&seq.to_le_bytes());
    }
    b
}

/// True if `b` is a whole block of type `magic` sealed from `seed`.
fn is_block(b: &[u8], magic: u64, seed: u32) -> bool {
    b.len() >= BLOCK && u64_at(b, 0) == magic && sealed(b, seed)
}

/// What a block the scanner expects to be of transaction `seq` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// A sealed block of the type asked for.
    Sealed,
    /// The type's magic and sequence number `seq`, but its checksum fails:
    /// a block of this transaction that was written whole (the log writes
    /// whole blocks) and then damaged. JBD2's `-EFSBADCRC` of
    /// `jbd2_descriptor_block_csum_verify` / `jbd2_commit_block_csum_verify`
    /// (Linux `fs/jbd2/recovery.c`).
    Damaged,
    /// Anything else: another type, an older lap of the ring, never written.
    Other,
}

/// How block `b` relates to type `magic` of transaction `seq`, in a
/// journal whose checksums start from `seed`. A block of another file
/// system's journal (another seed) with this transaction's sequence
/// number is `Damaged`: it ends the scan as damage does.
pub(crate) fn claim(b: &[u8], magic: u64, seq: u64, seed: u32) -> Claim {
    if b.len() < BLOCK || u64_at(b, 0) != magic {
        Claim::Other
    } else if sealed(b, seed) {
        Claim::Sealed
    } else if u64_at(b, 8) == seq {
        Claim::Damaged
    } else {
        Claim::Other
    }
}

/// The block types, for [`claim`].
pub(crate) mod magic {
    /// Descriptor blocks.
    pub const DESCRIPTOR: u64 = super::DESC_MAGIC;
    /// Revoke blocks.
    pub const REVOKE: u64 = super::REVOKE_MAGIC;
    /// Commit blocks.
    pub const COMMIT: u64 = super::COMMIT_MAGIC;
}

/// The superblock of one journal area (its block 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AreaSuper {
    /// Area index.
    pub area: u32,
    /// Offset in the area of the first live log block (at least 1).
    pub head: u64,
    /// Sequence number of the transaction at `head`.
    pub seq: u64,
    /// MQFS: every transaction with a lower id is at its home location
    /// (written by a checkpoint or a recovery that then flushed), so
    /// recovery replays none of them, whichever area still holds it.
    /// Without it, an older copy left in one area's log would be replayed
    /// over a newer one another area checkpointed. 0 in classic journaling.
    pub home_below: u64,
}

impl AreaSuper {
    /// Encodes into a block.
    pub fn encode(&self) -> Box<[u8; BLOCK]> {
        let mut b = with_header(JSB_MAGIC, None);
        b[8..12].copy_from_slice(&self.area.to_le_bytes());
        b[16..24].copy_from_slice(&self.head.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.home_below.to_le_bytes());
        seal(&mut b, 0);
        b
    }

    /// Decodes and checks it against the area's size.
    pub fn decode(b: &[u8], area: u32, area_blocks: u64) -> Result<AreaSuper, FsError> {
        if !is_block(b, JSB_MAGIC, 0) {
            return Err(FsError::Corrupt(format!("journal area {area}: bad superblock")));
        }
        let s = AreaSuper {
            area: u32_at(b, 8),
            head: u64_at(b, 16),
            seq: u64_at(b, 24),
            home_below: u64_at(b, 32),
        };
        if s.area != area || s.head == 0 || s.head >= area_blocks {
            return Err(FsError::Corrupt(format!("journal area {area}: bad pointers")));
        }
        Ok(s)
    }
}

/// One journaled block: its home, where its copy is in the log (offset in
/// the area), and the copy's CRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Home block number.
    pub home: u64,
    /// Offset of the copy in the area.
    pub journal: u64,
    /// CRC-32 of the copy, from the journal's checksum seed.
    pub crc: u32,
}

/// A descriptor block (JBD2's descriptor; MQFS's JH when `last` and
/// `txid` are used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Sequence number of the transaction in its area.
    pub seq: u64,
    /// Global transaction id (MQFS; equals `seq` in classic journaling).
    pub txid: u64,
    /// True on the transaction's last descriptor.
    pub last: bool,
    /// Journaled blocks.
    pub tags: Vec<Tag>,
}

impl Descriptor {
    /// Encodes into a block (at most [`TAGS_PER_DESC`] tags), sealed from
    /// the journal's checksum `seed`.
    pub fn encode(&self, seed: u32) -> Box<[u8; BLOCK]> {
        let mut b = with_header(DESC_MAGIC, Some(self.seq));
        b[16..24].copy_from_slice(&self.txid.to_le_bytes());
        let n = self.tags.len().min(TAGS_PER_DESC);
        b[24..28].copy_from_slice(&(n as u32).to_le_bytes());
        b[28] = self.last as u8;
        for (i, t) in self.tags.iter().take(n).enumerate() {
            let o = DESC_HEADER + i * TAG;
            b[o..o + 8].copy_from_slice(&t.home.to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&t.journal.to_le_bytes());
            b[o + 16..o + 20].copy_from_slice(&t.crc.to_le_bytes());
        }
        seal(&mut b, seed);
        b
    }

    /// Decodes; `None` if the block is not a descriptor sealed from
    /// `seed`.
    pub fn decode(b: &[u8], seed: u32) -> Option<Descriptor> {
        if !is_block(b, DESC_MAGIC, seed) {
            return None;
        }
        let n = u32_at(b, 24) as usize;
        if n > TAGS_PER_DESC {
            return None;
        }
        Some(Descriptor {
            seq: u64_at(b, 8),
            txid: u64_at(b, 16),
            last: b[28] == 1,
            tags: (0..n)
                .map(|i| {
                    let o = DESC_HEADER + i * TAG;
                    Tag {
                        home: u64_at(b, o),
                        journal: u64_at(b, o + 8),
                        crc: u32_at(b, o + 16),
                    }
                })
                .collect(),
        })
    }
}

/// A revoke block: blocks whose older journaled copies must not be
/// replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revoke {
    /// Sequence number of the revoking transaction.
    pub seq: u64,
    /// Revoked home blocks.
    pub blocks: Vec<u64>,
}

impl Revoke {
    /// Encodes (at most [`REVOKES_PER_BLOCK`] blocks), sealed from `seed`.
    pub fn encode(&self, seed: u32) -> Box<[u8; BLOCK]> {
        let mut b = with_header(REVOKE_MAGIC, Some(self.seq));
        let n = self.blocks.len().min(REVOKES_PER_BLOCK);
        b[16..20].copy_from_slice(&(n as u32).to_le_bytes());
        for (i, x) in self.blocks.iter().take(n).enumerate() {
            b[24 + i * 8..32 + i * 8].copy_from_slice(&x.to_le_bytes());
        }
        seal(&mut b, seed);
        b
    }

    /// Decodes; `None` if not a revoke block sealed from `seed`.
    pub fn decode(b: &[u8], seed: u32) -> Option<Revoke> {
        if !is_block(b, REVOKE_MAGIC, seed) {
            return None;
        }
        let n = u32_at(b, 16) as usize;
        if n > REVOKES_PER_BLOCK {
            return None;
        }
        Some(Revoke {
            seq: u64_at(b, 8),
            blocks: (0..n).map(|i| u64_at(b, 24 + i * 8)).collect(),
        })
    }
}

/// A commit block (JBD2 only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Sequence number of the committed transaction.
    pub seq: u64,
    /// Blocks of the transaction (descriptors, copies, revokes).
    pub blocks: u32,
}

impl Commit {
    /// Encodes into a block sealed from `seed`.
    pub fn encode(&self, seed: u32) -> Box<[u8; BLOCK]> {
        let mut b = with_header(COMMIT_MAGIC, Some(self.seq));
        b[16..20].copy_from_slice(&self.blocks.to_le_bytes());
        seal(&mut b, seed);
        b
    }

    /// Decodes; `None` if not a commit block sealed from `seed`.
    pub fn decode(b: &[u8], seed: u32) -> Option<Commit> {
        if !is_block(b, COMMIT_MAGIC, seed) {
            return None;
        }
        Some(Commit {
            seq: u64_at(b, 8),
            blocks: u32_at(b, 16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: u32 = 0x1234_5678;

    #[test]
    fn formats_round_trip_and_reject_each_other() {
        let d = Descriptor {
            seq: 9,
            txid: 77,
            last: true,
            tags: vec![Tag {
                home: 5,
                journal: 12,
                crc: 0xdead,
            }],
        };
        let db = d.encode(SEED);
        assert_eq!(Descriptor::decode(&db[..], SEED), Some(d));
        assert_eq!(Commit::decode(&db[..], SEED), None);
        let r = Revoke {
            seq: 3,
            blocks: vec![1, 2, 3],
        };
        assert_eq!(Revoke::decode(&r.encode(SEED)[..], SEED), Some(r));
        let c = Commit { seq: 4, blocks: 10 };
        let mut cb = c.encode(SEED);
        assert_eq!(Commit::decode(&cb[..], SEED), Some(c));
        cb[9] ^= 1;
        assert_eq!(
            Commit::decode(&cb[..], SEED),
            None,
            "a torn commit block is not a commit"
        );
        let s = AreaSuper {
            area: 2,
            head: 1,
            seq: 8,
            home_below: 5,
        };
        assert_eq!(AreaSuper::decode(&s.encode()[..], 2, 64).unwrap(), s);
        assert!(AreaSuper::decode(&s.encode()[..], 3, 64).is_err());
    }

    /// A block sealed from another file system's seed is not a block of
    /// this journal, and with this transaction's sequence number it is
    /// damage, not the log's end.
    #[test]
    fn another_seed_does_not_verify() {
        let c = Commit { seq: 4, blocks: 10 };
        let theirs = c.encode(SEED ^ 1);
        assert_eq!(Commit::decode(&theirs[..], SEED), None);
        assert_eq!(claim(&theirs[..], COMMIT_MAGIC, 4, SEED), Claim::Damaged);
        assert_eq!(claim(&theirs[..], COMMIT_MAGIC, 5, SEED), Claim::Other);
        assert_eq!(claim(&c.encode(SEED)[..], COMMIT_MAGIC, 4, SEED), Claim::Sealed);
    }
}
