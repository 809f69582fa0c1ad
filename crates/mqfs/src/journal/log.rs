//! The one log layout both journals write, and the one scanner and replay
//! both recoveries run.
//!
//! # Log layout
//!
//! An area is `area_blocks` blocks: block 0 is its superblock
//! ([`AreaSuper`]), blocks `1..area_blocks` a ring (offset `area_blocks - 1`
//! is followed by offset 1). A transaction of sequence number `seq` is, from
//! its first offset on, with every block of the formats in
//! [`format`](super::format):
//!
//! ```text
//! descriptor(seq, last = false), its copies   (zero or more times)
//! descriptor(seq, last = true),  its copies   (exactly once)
//! revoke(seq)                                 (zero or more)
//! commit(seq, blocks)                         (JBD2 only, see End)
//! ```
//!
//! A descriptor holds at most [`TAGS_PER_DESC`] tags and its copies are the
//! blocks right after it, in tag order (a tag's `journal` field is that
//! offset); a transaction without copies still has its (empty) last
//! descriptor. Sequence numbers of an area's transactions follow each other
//! without gaps from the superblock's `seq` at its `head`.
//!
//! What ends a transaction is the journal's business ([`End`]): classic
//! journaling (JBD2, Linux `fs/jbd2/recovery.c`) writes a commit block,
//! whose block count must match, behind an ordering point; MQFS writes no
//! commit block, its last descriptor (the JH, ccNVMe 5.1) is the ccNVMe
//! transaction's REQ_TX_COMMIT request, and the driver's recovery reports
//! which transactions did not finish.
//!
//! On-disk change from the two journals' former writers: JBD2's last
//! descriptor is now flagged `last` too, and a JBD2 transaction that only
//! revokes writes an empty descriptor (it wrote none before; the log space
//! was already reserved for it, and no workload of the benches writes one).
//!
//! # Scan and replay
//!
//! [`scan`] walks an area from its head while transactions are whole:
//! right sequence number, tags pointing at the blocks right after their
//! descriptor, copies matching their CRC, the end the journal asks for. It
//! stops at the first block that breaks this and reports the offset and
//! sequence number a new transaction starts at (those of the first
//! incomplete transaction). [`Replay`] then applies revokes and writes the
//! newest surviving copy of each home block home.
//!
//! The scan also tells a transaction that was written whole but damaged
//! from the end of the log (`docs/decisions.md` E4): a descriptor, revoke
//! or commit block with its magic and the transaction's sequence number
//! but a failing checksum, or a copy failing its tag's checksum while the
//! transaction's end is there. It stops there as well (the transaction
//! and everything after it are not replayed) and reports it in
//! [`Scanned::damage`].

use std::collections::BTreeMap;

use ccnvme::BioFlags;

use crate::error::FsError;
use crate::fs::{Ctx, Fs};
use crate::journal::format::{
    claim, magic, AreaSuper, Claim, Commit, Descriptor, Revoke, Tag, REVOKES_PER_BLOCK, TAGS_PER_DESC,
};
use crate::journal::{DamageKind, JournalDamage};
use crate::layout::{crc_seeded, BLOCK};

/// A block and its content, addressed on the device.
pub(crate) type Write = (u64, Box<[u8; BLOCK]>);

/// The geometry of one journal area's ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ring {
    /// Device block of the area's superblock (offset 0).
    pub start: u64,
    /// Blocks in the area, superblock included.
    pub blocks: u64,
    /// The seed of its checksums
    /// ([`Superblock::journal_csum_seed`](crate::layout::Superblock::journal_csum_seed)).
    pub seed: u32,
}

impl Ring {
    /// The ring of journal area `a` of the file system `sb` describes.
    pub fn of(sb: &crate::layout::Superblock, a: u32) -> Ring {
        Ring {
            start: sb.area_start(a),
            blocks: sb.area_blocks,
            seed: sb.journal_csum_seed(),
        }
    }

    /// Log blocks (the ring is offsets `1..blocks`).
    pub fn len(&self) -> u64 {
        self.blocks - 1
    }

    /// The offset `by` blocks after `pos`, wrapping past the end.
    pub fn advance(&self, pos: u64, by: u64) -> u64 {
        (pos - 1 + by) % self.len() + 1
    }

    /// Log blocks from `head` up to (not including) `tail`.
    pub fn used(&self, head: u64, tail: u64) -> u64 {
        (tail + self.len() - head) % self.len()
    }
}

/// Writes area superblock `sb` to `ring`'s block 0, FUA (it moves the
/// head: what it frees must not be reused before it is durable).
pub(crate) async fn write_super(fs: &Fs, ctx: Ctx, ring: Ring, sb: &AreaSuper) -> Result<(), FsError> {
    fs.write_all(ctx, &[(ring.start, sb.encode())], BioFlags::FUA)
        .await
}

/// Log blocks a transaction of `copies` copies and `revokes` revoked
/// blocks takes, commit block not included.
pub(crate) fn log_blocks(copies: usize, revokes: usize) -> u64 {
    let descriptors = copies.div_ceil(TAGS_PER_DESC).max(1);
    (descriptors + copies + revokes.div_ceil(REVOKES_PER_BLOCK)) as u64
}

/// The bytes of one log block: built for the log (a descriptor, a revoke
/// record), or a journaled copy, named by its index in the copies the
/// transaction was laid out with (the log holds the copy's bytes as they
/// are, so they are not copied again to lay it out).
#[derive(Debug)]
pub(crate) enum LogBytes {
    /// A block made for the log.
    Built(Box<[u8; BLOCK]>),
    /// `copies[i]`'s content.
    Copy(usize),
}

impl LogBytes {
    /// The block's bytes, `copies` being what it was laid out with.
    pub fn bytes<'a>(&'a self, copies: &'a [Write]) -> &'a [u8; BLOCK] {
        match self {
            LogBytes::Built(b) => b,
            LogBytes::Copy(i) => match copies.get(*i) {
                Some((_, d)) => d,
                None => unreachable!("log block names copy {i} of {}", copies.len()),
            },
        }
    }
}

/// A transaction laid out in the log (commit block not included).
pub(crate) struct Layout {
    /// Every block, in log order, at its device block.
    pub blocks: Vec<(u64, LogBytes)>,
    /// Index in `blocks` of the last descriptor (MQFS's JH).
    pub last: usize,
    /// Offset right after the transaction.
    pub end: u64,
}

impl Layout {
    /// For each of `copies` copies, its position in [`Layout::blocks`]
    /// (`None` if it is not laid out).
    pub fn copy_positions(&self, copies: usize) -> Vec<Option<usize>> {
        let mut at = vec![None; copies];
        for (pos, (_, l)) in self.blocks.iter().enumerate() {
            if let LogBytes::Copy(i) = l {
                if let Some(slot) = at.get_mut(*i) {
                    *slot = Some(pos);
                }
            }
        }
        at
    }

    /// The blocks as writes of their own bytes (the copies cloned), for a
    /// caller that sends the log as plain writes.
    pub fn into_writes(self, copies: &[Write]) -> Vec<Write> {
        self.blocks
            .into_iter()
            .map(|(b, l)| match l {
                LogBytes::Built(d) => (b, d),
                LogBytes::Copy(_) => (b, Box::new(*l.bytes(copies))),
            })
            .collect()
    }
}

impl Layout {
    /// The blocks but the last descriptor, and the last descriptor: what
    /// a journal committing through ccNVMe sends REQ_TX, and its
    /// REQ_TX_COMMIT request (MQFS's JH, [`End::LastDescriptor`]).
    pub fn split_last(mut self) -> (Vec<(u64, LogBytes)>, Write) {
        match self.blocks.remove(self.last) {
            (b, LogBytes::Built(d)) => (self.blocks, (b, d)),
            (_, LogBytes::Copy(i)) => unreachable!("the last descriptor is a descriptor, not copy {i}"),
        }
    }
}

/// Lays out transaction `seq` (global id `txid`) with `copies` (home,
/// content) and `revokes` from offset `pos` of `ring`, as the module doc
/// says. Takes [`log_blocks`] blocks.
pub(crate) fn lay_out(
    ring: Ring,
    pos: u64,
    seq: u64,
    txid: u64,
    copies: &[Write],
    revokes: &[u64],
) -> Layout {
    let mut blocks = Vec::with_capacity(log_blocks(copies.len(), revokes.len()) as usize);
    let mut pos = pos;
    let mut last = 0;
    let groups: Vec<&[Write]> = if copies.is_empty() {
        vec![&[]]
    } else {
        copies.chunks(TAGS_PER_DESC).collect()
    };
    for (i, group) in groups.iter().enumerate() {
        let desc_pos = pos;
        pos = ring.advance(pos, 1);
        let mut tags = Vec::with_capacity(group.len());
        let mut body = Vec::with_capacity(group.len());
        for (j, (home, data)) in group.iter().enumerate() {
            tags.push(Tag {
                home: *home,
                journal: pos,
                crc: crc_seeded(ring.seed, &data[..]),
            });
            body.push((ring.start + pos, LogBytes::Copy(i * TAGS_PER_DESC + j)));
            pos = ring.advance(pos, 1);
        }
        let is_last = i + 1 == groups.len();
        if is_last {
            last = blocks.len();
        }
        let d = Descriptor {
            seq,
            txid,
            last: is_last,
            tags,
        };
        blocks.push((ring.start + desc_pos, LogBytes::Built(d.encode(ring.seed))));
        blocks.extend(body);
    }
    for chunk in revokes.chunks(REVOKES_PER_BLOCK) {
        let r = Revoke {
            seq,
            blocks: chunk.to_vec(),
        };
        blocks.push((ring.start + pos, LogBytes::Built(r.encode(ring.seed))));
        pos = ring.advance(pos, 1);
    }
    Layout {
        blocks,
        last,
        end: pos,
    }
}

/// What ends a transaction in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// A commit block with the transaction's block count (JBD2).
    CommitBlock,
    /// The revokes after the last descriptor (MQFS: the ccNVMe driver
    /// tells unfinished transactions apart, not the log).
    LastDescriptor,
}

/// A whole transaction found by [`scan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// Area sequence number.
    pub seq: u64,
    /// Global transaction id (the sequence number in JBD2).
    pub txid: u64,
    /// (home, log offset) of every copy, in log order.
    pub tags: Vec<(u64, u64)>,
    /// Revoked home blocks.
    pub revokes: Vec<u64>,
}

/// What [`scan`] found in one area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// The whole transactions, in log order.
    pub txs: Vec<Found>,
    /// Offset where the next transaction goes (the first incomplete one's
    /// start, or the end of the last whole one).
    pub pos: u64,
    /// Sequence number of the next transaction.
    pub seq: u64,
    /// Set if the scan stopped at a damaged transaction rather than at the
    /// end of the log (see [`JournalDamage`]).
    pub damage: Option<JournalDamage>,
}

/// Whether [`scan`] checks each copy against its tag's checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyCheck {
    /// Every copy must match its tag (JBD2's `jbd2_block_tag_csum_verify`).
    Verify,
    /// Copies are taken as they are: only for the test that shows what the
    /// check catches.
    #[cfg(test)]
    Skip,
}

/// Walks the log of `ring` (area `area`) from offset `head`, whose
/// transaction has sequence number `seq`, as the module doc says.
pub(crate) async fn scan(
    fs: &Fs,
    ctx: Ctx,
    area: u32,
    ring: Ring,
    head: u64,
    seq: u64,
    end: End,
) -> Result<Scanned, FsError> {
    scan_checked(fs, ctx, area, ring, head, seq, end, CopyCheck::Verify).await
}

/// [`scan`], with the copy check `check`.
#[allow(clippy::too_many_arguments)]
async fn scan_checked(
    fs: &Fs,
    ctx: Ctx,
    area: u32,
    ring: Ring,
    head: u64,
    seq: u64,
    end: End,
    check: CopyCheck,
) -> Result<Scanned, FsError> {
    let mut out = Scanned {
        txs: Vec::new(),
        pos: head,
        seq,
        damage: None,
    };
    let mut budget = ring.len();
    loop {
        match scan_tx(fs, ctx, ring, out.pos, out.seq, end, budget, check).await? {
            TxScan::Whole(tx, next, used) => {
                out.txs.push(tx);
                out.pos = next;
                out.seq += 1;
                budget -= used;
            }
            TxScan::End => break,
            TxScan::Damaged { txid, offset, kind } => {
                out.damage = Some(JournalDamage {
                    area,
                    seq: out.seq,
                    txid,
                    offset,
                    kind,
                });
                break;
            }
        }
    }
    Ok(out)
}

/// What [`scan_tx`] found at a position.
enum TxScan {
    /// A whole transaction, the offset after it and the blocks it took.
    Whole(Found, u64, u64),
    /// Not a whole transaction: the end of the log.
    End,
    /// A transaction that was written whole (its end is there) but one of
    /// its blocks fails its checksum.
    Damaged {
        /// Its id, if an intact last descriptor gave it.
        txid: Option<u64>,
        /// Offset of the damaged block.
        offset: u64,
        /// Which block.
        kind: DamageKind,
    },
}

/// Reads one transaction at `pos` within `budget` log blocks.
#[allow(clippy::too_many_arguments)]
async fn scan_tx(
    fs: &Fs,
    ctx: Ctx,
    ring: Ring,
    pos: u64,
    seq: u64,
    end: End,
    budget: u64,
    check: CopyCheck,
) -> Result<TxScan, FsError> {
    let mut found = Found {
        seq,
        txid: seq,
        tags: Vec::new(),
        revokes: Vec::new(),
    };
    let mut next = pos;
    let mut used = 0u64;
    // The copies (offset, tag checksum, home), read only once the
    // transaction's end is found: a copy failing its checksum then is
    // damage, while a transaction without its end is the end of the log
    // whatever its copies hold. Like JBD2, whose scan pass skips the
    // blocks a descriptor tags and whose replay pass verifies each copy
    // (`do_one_pass` in fs/jbd2/recovery.c): a recovery then reads no copy
    // of a transaction it does not replay, so a crash checker need not
    // tell apart the states of copies nothing reads.
    let mut copies: Vec<(u64, u32, u64)> = Vec::new();
    // Reads the block at `next`, within the budget.
    macro_rules! read_next {
        () => {{
            if used >= budget {
                return Ok(TxScan::End);
            }
            used += 1;
            fs.read_raw(ctx, ring.start + next).await?
        }};
    }
    // Descriptors and their copies, up to the last descriptor.
    loop {
        let b = read_next!();
        let Some(d) = Descriptor::decode(&b[..], ring.seed).filter(|d| d.seq == seq) else {
            if claim(&b[..], magic::DESCRIPTOR, seq, ring.seed) == Claim::Damaged {
                return Ok(TxScan::Damaged {
                    txid: None,
                    offset: next,
                    kind: DamageKind::Descriptor,
                });
            }
            return Ok(TxScan::End);
        };
        next = ring.advance(next, 1);
        for t in &d.tags {
            if t.journal != next || used >= budget {
                return Ok(TxScan::End);
            }
            used += 1;
            copies.push((next, t.crc, t.home));
            found.tags.push((t.home, t.journal));
            next = ring.advance(next, 1);
        }
        if d.last {
            found.txid = d.txid;
            break;
        }
    }
    // Revokes, then the end: `ended` is the offset after the transaction
    // and the blocks it took, if its end is there.
    let ended = loop {
        if used >= budget {
            match end {
                End::LastDescriptor => break (next, used),
                End::CommitBlock => return Ok(TxScan::End),
            }
        }
        let b = read_next!();
        if let Some(r) = Revoke::decode(&b[..], ring.seed).filter(|r| r.seq == seq) {
            found.revokes.extend(r.blocks);
            next = ring.advance(next, 1);
            continue;
        }
        if claim(&b[..], magic::REVOKE, seq, ring.seed) == Claim::Damaged {
            return Ok(TxScan::Damaged {
                txid: Some(found.txid),
                offset: next,
                kind: DamageKind::Revoke,
            });
        }
        match end {
            End::LastDescriptor => break (next, used - 1),
            End::CommitBlock => {
                if Commit::decode(&b[..], ring.seed)
                    .is_some_and(|c| c.seq == seq && u64::from(c.blocks) == used - 1)
                {
                    break (ring.advance(next, 1), used);
                }
                return Ok(
                    if claim(&b[..], magic::COMMIT, seq, ring.seed) == Claim::Damaged {
                        TxScan::Damaged {
                            txid: Some(found.txid),
                            offset: next,
                            kind: DamageKind::Commit,
                        }
                    } else {
                        TxScan::End
                    },
                );
            }
        }
    };
    // The transaction is whole up to its end: damaged if a copy fails its
    // tag's checksum.
    if check == CopyCheck::Verify {
        for &(offset, sum, home) in &copies {
            if crc_seeded(ring.seed, &fs.read_raw(ctx, ring.start + offset).await?[..]) != sum {
                return Ok(TxScan::Damaged {
                    txid: Some(found.txid),
                    offset,
                    kind: DamageKind::Copy { home },
                });
            }
        }
    }
    Ok(TxScan::Whole(found, ended.0, ended.1))
}

/// Which transactions a revoke hides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RevokeScope {
    /// Its own and every earlier one (JBD2: `jbd2_journal_test_revoke`).
    ThisAndEarlier,
    /// Only earlier ones (MQFS: a transaction may journal the new content
    /// of a block it revokes older copies of, ccNVMe 5.4).
    Earlier,
}

/// The copies recovery writes home: for each home block, the newest
/// surviving copy.
#[derive(Default)]
pub(crate) struct Replay {
    /// Home block -> device block of its copy.
    copies: BTreeMap<u64, u64>,
}

impl Replay {
    /// The newest copy of each home block among `txs` (each with the
    /// device block its area starts at), in the order given (oldest
    /// first), that no revoke within `scope` hides. Revokes are keyed by
    /// transaction id.
    pub fn resolve(txs: &[(u64, &Found)], scope: RevokeScope) -> Replay {
        let mut revoked: BTreeMap<u64, u64> = BTreeMap::new();
        for (_, t) in txs {
            for b in &t.revokes {
                let e = revoked.entry(*b).or_insert(t.txid);
                *e = (*e).max(t.txid);
            }
        }
        let mut copies = BTreeMap::new();
        for (start, t) in txs {
            for (home, j) in &t.tags {
                let hidden = revoked.get(home).is_some_and(|r| match scope {
                    RevokeScope::ThisAndEarlier => *r >= t.txid,
                    RevokeScope::Earlier => *r > t.txid,
                });
                if !hidden {
                    copies.insert(*home, *start + j);
                }
            }
        }
        Replay { copies }
    }

    /// Writes the copies home, in home order, then flushes. A copy whose
    /// home is the superblock or in the journal is corruption.
    pub async fn apply(self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        let journal_start = fs.sb.borrow().journal_start;
        let mut writes = Vec::with_capacity(self.copies.len());
        for (home, at) in self.copies {
            if home == 0 || home >= journal_start {
                return Err(FsError::Corrupt(format!("journal replays block {home}")));
            }
            writes.push((home, fs.read_raw(ctx, at).await?));
        }
        if !writes.is_empty() {
            fs.write_all(ctx, &writes, BioFlags::NONE).await?;
            fs.flush(ctx).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(home: u64, fill: u8) -> Write {
        (home, Box::new([fill; BLOCK]))
    }

    #[test]
    fn layout_puts_each_descriptor_before_its_copies_and_flags_the_last() {
        let ring = Ring {
            start: 1000,
            blocks: 8,
            seed: 7,
        };
        let copies: Vec<Write> = (0..3).map(|i| copy(10 + i, i as u8)).collect();
        // Offset 6 of a 7-block ring: the copies wrap to offsets 7, 1, 2.
        let l = lay_out(ring, 6, 4, 40, &copies, &[99]);
        let at: Vec<u64> = l.blocks.iter().map(|(b, _)| b - ring.start).collect();
        assert_eq!(at, vec![6, 7, 1, 2, 3]);
        // The copies' blocks hold the copies' bytes, in order.
        for (k, (_, data)) in copies.iter().enumerate() {
            assert_eq!(l.blocks[1 + k].1.bytes(&copies), &**data);
        }
        assert_eq!(l.end, 4);
        assert_eq!(l.last, 0);
        let d = Descriptor::decode(l.blocks[0].1.bytes(&copies), ring.seed)
            .unwrap_or_else(|| panic!("not a descriptor"));
        assert!(d.last);
        assert_eq!(d.txid, 40);
        assert_eq!(
            d.tags.iter().map(|t| t.journal).collect::<Vec<_>>(),
            vec![7, 1, 2]
        );
        assert_eq!(
            Revoke::decode(l.blocks[4].1.bytes(&copies), ring.seed).map(|r| r.blocks),
            Some(vec![99])
        );
        assert_eq!(log_blocks(3, 1), 5);
        // Without copies, an empty last descriptor still opens it.
        let l = lay_out(ring, 1, 1, 1, &[], &[5]);
        assert_eq!(l.blocks.len() as u64, log_blocks(0, 1));
        assert!(Descriptor::decode(l.blocks[0].1.bytes(&[]), ring.seed)
            .is_some_and(|d| d.last && d.tags.is_empty()));
    }

    /// Writes `txs` (copies, revokes) from offset 1 of area 0 of a fresh
    /// classic file system, each with a commit block if `end` asks, spoils
    /// the log with `spoil` (device block, byte to flip), and scans.
    fn write_and_scan(
        txs: &[(Vec<Write>, Vec<u64>)],
        end: End,
        spoil: impl Fn(&[u64]) -> u64 + 'static,
    ) -> Scanned {
        write_and_scan_checked(txs, end, spoil, CopyCheck::Verify)
    }

    /// [`write_and_scan`] with copy check `check`.
    fn write_and_scan_checked(
        txs: &[(Vec<Write>, Vec<u64>)],
        end: End,
        spoil: impl Fn(&[u64]) -> u64 + 'static,
        check: CopyCheck,
    ) -> Scanned {
        write_scan_and_log(txs, end, spoil, check).0
    }

    /// [`write_and_scan_checked`], also giving the log offsets the scan
    /// read.
    fn write_scan_and_log(
        txs: &[(Vec<Write>, Vec<u64>)],
        end: End,
        spoil: impl Fn(&[u64]) -> u64 + 'static,
        check: CopyCheck,
    ) -> (Scanned, Vec<u64>) {
        let t = crate::testing::new_fs(
            crate::Mode::Classic,
            nvme_ctrl::SsdProfile::optane_905p(),
            4096,
            1,
        )
        .unwrap_or_else(|e| panic!("new_fs: {e}"));
        let fs = t.fs.clone();
        let txs = txs.to_vec();
        let ctrl = t.ctrl.clone();
        let run = async move {
            let ctx = Ctx::on(0);
            let ring = Ring::of(&fs.sb.borrow(), 0);
            let (mut pos, mut starts, mut writes) = (1, Vec::new(), Vec::new());
            for (i, (copies, revokes)) in txs.iter().enumerate() {
                let seq = 10 + i as u64;
                starts.push(ring.start + pos);
                let l = lay_out(ring, pos, seq, seq, copies, revokes);
                pos = l.end;
                let n = l.blocks.len() as u32;
                writes.extend(l.into_writes(copies));
                if end == End::CommitBlock {
                    writes.push((ring.start + pos, Commit { seq, blocks: n }.encode(ring.seed)));
                    pos = ring.advance(pos, 1);
                }
            }
            let bad = spoil(&starts);
            for (b, d) in writes.iter_mut() {
                if *b == bad {
                    d[100] ^= 1;
                }
            }
            fs.write_all(ctx, &writes, BioFlags::NONE).await?;
            ctrl.backend().log_reads();
            let scanned = scan_checked(&fs, ctx, 0, ring, 1, 10, end, check).await?;
            let read = ctrl.backend().take_reads().unwrap_or_default();
            let offsets = read.reads().iter().map(|b| b - ring.start).collect();
            Ok::<_, FsError>((scanned, offsets))
        };
        t.ex.block_on(run)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// As JBD2's scan pass skips the blocks a descriptor tags: a
    /// transaction whose commit block is missing has none of its copies
    /// read (what they hold cannot matter), one with its commit block has
    /// each read once, to verify it.
    #[test]
    fn the_copies_of_a_transaction_without_its_end_are_not_read() {
        let txs = vec![(vec![copy(7, 1)], vec![]), (vec![copy(8, 2), copy(9, 3)], vec![])];
        // Offsets: tx 10 at 1 (desc), 2 (copy), 3 (commit); tx 11 at 4
        // (desc), 5, 6 (copies), 7 (commit).
        let (whole, read) = write_scan_and_log(&txs, End::CommitBlock, |_| 0, CopyCheck::Verify);
        assert_eq!(whole.txs.len(), 2);
        assert_eq!(read, vec![1, 3, 2, 4, 7, 5, 6, 8]);
        let (cut, read) = write_scan_and_log(&txs, End::CommitBlock, |st| st[1] + 3, CopyCheck::Verify);
        assert_eq!(cut.txs.len(), 1);
        assert_eq!(
            read,
            vec![1, 3, 2, 4, 7],
            "no copy of the transaction without its commit"
        );
    }

    #[test]
    fn the_scan_takes_whole_transactions_and_stops_at_the_first_broken_one() {
        let txs = vec![
            (vec![copy(7, 1), copy(8, 2)], vec![]),
            (vec![copy(9, 3)], vec![4, 5]),
            (vec![copy(7, 4)], vec![]),
        ];
        for end in [End::CommitBlock, End::LastDescriptor] {
            let all = write_and_scan(&txs, end, |_| 0);
            assert_eq!(all.txs.len(), 3, "{end:?}");
            assert_eq!(all.seq, 13);
            assert_eq!(all.txs[0].tags, vec![(7, 2), (8, 3)]);
            assert_eq!(all.txs[1].revokes, vec![4, 5]);
            // A torn copy of the second transaction: the scan keeps the
            // first and restarts the log at the second's first block.
            let torn = write_and_scan(&txs, end, |s| s[1] + 1);
            assert_eq!(torn.txs.len(), 1, "{end:?}");
            assert_eq!(
                (torn.pos, torn.seq),
                (
                    all.txs[0].tags.len() as u64 + 2 + u64::from(end == End::CommitBlock),
                    11
                )
            );
        }
        // JBD2: a torn commit block ends the log before its transaction.
        let no_commit = write_and_scan(&txs, End::CommitBlock, |s| s[2] - 1);
        assert_eq!(no_commit.txs.len(), 1);
    }

    /// One flipped byte in each kind of block of the newest transaction,
    /// written whole (commit block and all): the scan keeps the earlier
    /// ones, and reports the damage with the block and the transaction.
    #[test]
    fn a_damaged_block_of_a_whole_transaction_is_reported() {
        let txs = vec![
            (vec![copy(7, 1)], vec![]),
            (vec![copy(8, 2), copy(9, 3)], vec![4]),
        ];
        // Offsets: tx 10 at 1 (desc), 2 (copy), 3 (commit); tx 11 at 4
        // (desc), 5, 6 (copies), 7 (revoke), 8 (commit).
        let cases = [
            (4, DamageKind::Descriptor, None),
            (6, DamageKind::Copy { home: 9 }, Some(11)),
            (7, DamageKind::Revoke, Some(11)),
            (8, DamageKind::Commit, Some(11)),
        ];
        for (offset, kind, txid) in cases {
            let s = write_and_scan(&txs, End::CommitBlock, move |st| st[0] + offset - 1);
            assert_eq!(s.txs.len(), 1, "{kind:?}");
            assert_eq!((s.pos, s.seq), (4, 11), "{kind:?}");
            assert_eq!(
                s.damage,
                Some(JournalDamage {
                    area: 0,
                    seq: 11,
                    txid,
                    offset,
                    kind
                })
            );
        }
        // MQFS (no commit block): a damaged copy under an intact JH.
        let s = write_and_scan(&txs, End::LastDescriptor, |st| st[1] + 2);
        assert_eq!(s.txs.len(), 1);
        assert_eq!(s.damage.map(|d| d.kind), Some(DamageKind::Copy { home: 9 }));
    }

    /// What the copy check catches: with it off, a copy with a flipped
    /// byte in a committed transaction is taken, and replay would write
    /// that garbage home; with it on, the transaction is dropped and
    /// reported.
    #[test]
    fn without_the_copy_check_a_damaged_copy_is_replayed() {
        let txs = vec![(vec![copy(7, 1)], vec![]), (vec![copy(8, 2)], vec![])];
        let spoil = |st: &[u64]| st[1] + 1;
        let off = write_and_scan_checked(&txs, End::CommitBlock, spoil, CopyCheck::Skip);
        assert_eq!(off.txs.len(), 2, "the damaged copy is replayed");
        assert_eq!(off.damage, None);
        let on = write_and_scan_checked(&txs, End::CommitBlock, spoil, CopyCheck::Verify);
        assert_eq!(on.txs.len(), 1);
        assert_eq!(
            on.damage.map(|d| (d.seq, d.kind)),
            Some((11, DamageKind::Copy { home: 8 }))
        );
    }

    #[test]
    fn a_revoke_hides_by_scope() {
        let a = Found {
            seq: 1,
            txid: 5,
            tags: vec![(7, 3)],
            revokes: vec![],
        };
        let b = Found {
            seq: 2,
            txid: 6,
            tags: vec![(8, 9)],
            revokes: vec![7, 8],
        };
        let txs = [(100, &a), (100, &b)];
        let newest = Replay::resolve(&txs, RevokeScope::Earlier).copies;
        assert_eq!(newest, BTreeMap::from([(8, 109)]));
        let jbd = Replay::resolve(&txs, RevokeScope::ThisAndEarlier).copies;
        assert!(jbd.is_empty());
    }
}
