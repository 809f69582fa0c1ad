//! File data judged block by block: the oracle's per-block content rule
//! as a separate judgement of each data block, so that the read-set
//! reduction ([`crate::observe`]) need not split a crash point by every
//! data block a check reads.
//!
//! # Why a judged block needs no split
//!
//! Where a promise allows a file's bytes block by block
//! ([`crate::oracle::content_allowed`]: each 4 KiB block is that block of
//! one of the file's versions), the verdict on a block depends on that
//! block's bytes and on nothing else the state holds but the file's
//! metadata (its size, its block map), which the check reads as usual.
//! So a check does not read such a block: it asks the file system where
//! the block's bytes come from ([`mqfs::Fs::page_sources`]), and for a
//! device block it records a [`BlockJudgement`] instead: the block, the
//! versions its bytes must match, and whether the state's own bytes do
//! (looked at without logging a read: [`nvme_ctrl::Backend::peek`]). No
//! step of the check depends on those bytes: the judgements' failures are
//! added to the verdict at its end, and the sanity check runs or not on
//! the other failures alone.
//!
//! A check's verdict is therefore `F(bytes at the units it read) and
//! J_1(bytes of block b_1) and ... and J_n(bytes of b_n)`, where `F` and
//! the judgements `J_i` are fixed by the units read. In a leaf of the
//! read-set tree (the states in the node state's class at every unit
//! read), `F` is the node's and each `b_i` not read is free: a state of
//! the leaf fails exactly when `F` fails or some `J_i` rejects the bytes
//! its class of `b_i` gives. The explorer evaluates each `J_i` on every
//! class of `b_i` that some state of the leaf has (the block's versions:
//! [`nvme_ctrl::crash::Explorer::block_in`]); a class that is rejected
//! yields a *witness*: the least state of the leaf in that class, checked
//! in full, which fails. So every state of the leaf is judged with a sum
//! of checks over its blocks instead of their product. A block the check
//! also read, or that recovery wrote, is fixed in the leaf and judged
//! once. `tests/read_sets.rs` checks the verdict of every state of small
//! runs against its leaf's prediction by brute force.

use std::sync::Arc;

use mqfs::layout::BLOCK;
use nvme_ctrl::crash::Unit;

use crate::content::Content;
use crate::oracle::Failure;

/// Whether `got`, the bytes of the file block at byte `start` (a
/// multiple of the block size), are that block of version `v` (bytes
/// past the version's end are zeros: a hole or a truncation).
pub fn block_fits(got: &[u8], v: &Content, start: usize) -> bool {
    debug_assert_eq!(start % BLOCK, 0, "blocks start at block boundaries");
    let have = v.block(start / BLOCK);
    let have = &have[..have.len().min(got.len())];
    got[..have.len()] == *have && got[have.len()..].iter().all(|&b| b == 0)
}

/// One data block's verdict, left to the explorer: the block's bytes
/// (its first `len`) must be that block of one of `versions`.
#[derive(Clone, Debug)]
pub struct BlockJudgement {
    /// The media block.
    pub unit: Unit,
    /// The file's allowed versions.
    pub versions: Arc<[Arc<Content>]>,
    /// The block's first byte in the file.
    pub start: usize,
    /// Bytes of the block inside the file.
    pub len: usize,
    /// The promise it checks, for the failure's text.
    pub what: Arc<str>,
    /// Whether the checked state's own bytes fit.
    pub own_ok: bool,
}

impl BlockJudgement {
    /// Whether a block holding `block` passes.
    pub fn fits(&self, block: &[u8; BLOCK]) -> bool {
        let got = &block[..self.len];
        self.versions.iter().any(|v| block_fits(got, v, self.start))
    }

    /// The failure a state whose bytes do not fit gets.
    pub fn failure(&self) -> Failure {
        Failure {
            judged: true,
            ..Failure::new(
                "durable-data",
                format!(
                    "{}: block {} (bytes {}..{}) is in none of its {} version(s) (judged block by block)",
                    self.what,
                    self.start / BLOCK,
                    self.start,
                    self.start + self.len,
                    self.versions.len()
                ),
            )
        }
    }
}

/// What the oracle needs to judge blocks instead of reading them: a look
/// at a block that logs no read, and where the judgements go.
pub struct BlockJudge<'a> {
    peek: &'a dyn Fn(u64, &mut [u8; BLOCK]) -> Unit,
    /// The judgements made, in the order made.
    pub judgements: Vec<BlockJudgement>,
}

impl std::fmt::Debug for BlockJudge<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockJudge")
            .field("judgements", &self.judgements.len())
            .finish()
    }
}

impl<'a> BlockJudge<'a> {
    /// A judge that looks at blocks with `peek`: what the file system's
    /// block `b` holds, put in the buffer, and the unit holding it (the
    /// drive's block; on a striped volume, the member's block `b` maps to).
    pub fn new(peek: &'a dyn Fn(u64, &mut [u8; BLOCK]) -> Unit) -> Self {
        BlockJudge {
            peek,
            judgements: Vec::new(),
        }
    }

    /// Judges the file system's block `b`, holding file bytes
    /// `start..start + len` of a file whose versions are `versions`.
    pub fn judge(
        &mut self,
        b: u64,
        versions: &Arc<[Arc<Content>]>,
        start: usize,
        len: usize,
        what: &Arc<str>,
    ) {
        let mut buf = [0u8; BLOCK];
        let unit = (self.peek)(b, &mut buf);
        let mut j = BlockJudgement {
            unit,
            versions: versions.clone(),
            start,
            len,
            what: what.clone(),
            own_ok: true,
        };
        j.own_ok = j.fits(&buf);
        self.judgements.push(j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_fits_a_version_or_its_zero_tail() {
        let v = Content::from(vec![7u8; BLOCK + 10]);
        let mut got = [0u8; BLOCK];
        assert!(!block_fits(&got, &v, 0));
        got.fill(7);
        assert!(block_fits(&got, &v, 0));
        // Second block: 10 bytes of the version, zeros after.
        let mut second = [0u8; BLOCK];
        second[..10].fill(7);
        assert!(block_fits(&second, &v, BLOCK));
        second[10] = 1;
        assert!(!block_fits(&second, &v, BLOCK));
    }

    #[test]
    fn a_judgement_looks_at_the_state_without_reading() {
        let peek = |lba: u64, b: &mut [u8; BLOCK]| {
            b.fill(3);
            Unit::Block { port: 0, lba }
        };
        let mut judge = BlockJudge::new(&peek);
        let versions: Arc<[Arc<Content>]> = vec![
            Arc::new(Content::from(vec![3u8; BLOCK])),
            Arc::new(Content::from(vec![4u8; BLOCK])),
        ]
        .into();
        let what: Arc<str> = "/f after `fsync`".into();
        judge.judge(9, &versions, 0, BLOCK, &what);
        let j = &judge.judgements[0];
        assert!(j.own_ok);
        assert_eq!(j.unit, Unit::Block { port: 0, lba: 9 });
        assert!(j.fits(&[4u8; BLOCK]));
        assert!(!j.fits(&[5u8; BLOCK]));
        assert!(j.failure().detail.contains("block 0"));
    }
}
