//! ccNVMe crash recovery at probe (ccNVMe 4.4, `docs/decisions.md` D11, D12).
//!
//! For each persistent submission queue, the entries from P-SQ-head up to
//! P-SQDB are the transactions that were submitted (atomic) but not
//! finished. The driver reads them through MMIO, checks them, and hands the
//! upper layer a copy (transaction id, ranges, flags); PRPs are meaningless
//! after a crash and are dropped. Entries past P-SQDB were never submitted
//! and are never parsed. A queue whose pointers or entries make no sense is
//! reported as [`DriverError::CorruptPsq`] and nothing from it is used.

use nvme_spec::command::{IoOpcode, SubmissionEntry, TxFlags};
use nvme_spec::traffic;
use pcie_sim::{BusAddr, Core};

use crate::bio::TxId;
use crate::error::DriverError;
use crate::layout::PmrLayout;

/// One command of an unfinished transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnfinishedCmd {
    /// NVMe opcode.
    pub opcode: u8,
    /// First LBA.
    pub slba: u64,
    /// LBAs covered.
    pub blocks: u32,
    /// ccNVMe flags of the entry.
    pub flags: TxFlags,
    /// FUA bit.
    pub fua: bool,
}

/// A transaction that was atomic (its P-SQDB was persistent) but did not
/// finish before the crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnfinishedTx {
    /// The persistent queue it was on.
    pub queue: u16,
    /// Its transaction id.
    pub txid: TxId,
    /// Its commands in submission order.
    pub cmds: Vec<UnfinishedCmd>,
}

/// What probe found in the PMR.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Unfinished transactions, per queue in submission order.
    pub unfinished: Vec<UnfinishedTx>,
    /// Boot generation recorded in the PMR header.
    pub generation: u64,
    /// True if the PMR held no ccNVMe layout and was formatted.
    pub formatted: bool,
}

impl Recovery {
    /// The ids of all unfinished transactions.
    pub fn unfinished_ids(&self) -> Vec<TxId> {
        self.unfinished.iter().map(|t| t.txid).collect()
    }
}

/// Header flag: the queues are being reset after an acknowledged recovery;
/// they hold nothing that matters.
pub const RESETTING: u32 = 1;

async fn read(core: &Core, pmr: BusAddr, offset: u64, buf: &mut [u8]) -> Result<(), DriverError> {
    core.mmio_read(pmr + offset, buf, traffic::QUEUE_ENTRY, 0).await?;
    Ok(())
}

/// Reads the header line: `Ok(None)` for an empty (all-zero) header, the
/// layout, generation and flags for a valid one, and
/// [`DriverError::CorruptLayout`] for anything else.
pub async fn read_header(
    core: &Core,
    pmr: BusAddr,
    pmr_bytes: u64,
) -> Result<Option<(PmrLayout, u64, u32)>, DriverError> {
    let mut h = [0u8; 64];
    read(core, pmr, 0, &mut h).await?;
    if h.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    let flags = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    match PmrLayout::parse_header(&h, pmr_bytes) {
        Ok((l, g)) => Ok(Some((l, g, flags))),
        Err(why) => Err(DriverError::CorruptLayout(why.into())),
    }
}

/// Scans every queue of `layout` for unfinished transactions.
pub async fn scan(core: &Core, pmr: BusAddr, layout: &PmrLayout) -> Result<Vec<UnfinishedTx>, DriverError> {
    let mut out = Vec::new();
    for q in 0..layout.queues {
        out.extend(scan_queue(core, pmr, layout, q).await?);
    }
    Ok(out)
}

async fn scan_queue(
    core: &Core,
    pmr: BusAddr,
    layout: &PmrLayout,
    q: u32,
) -> Result<Vec<UnfinishedTx>, DriverError> {
    let corrupt = |reason: String| DriverError::CorruptPsq {
        queue: q as u16,
        reason,
    };
    let mut w = [0u8; 4];
    read(core, pmr, layout.doorbell(q), &mut w).await?;
    let tail = u32::from_le_bytes(w);
    read(core, pmr, layout.head(q), &mut w).await?;
    let head = u32::from_le_bytes(w);
    if tail >= layout.slots || head >= layout.slots {
        return Err(corrupt(format!(
            "head {head} or tail {tail} outside {} slots",
            layout.slots
        )));
    }
    let mut txs: Vec<UnfinishedTx> = Vec::new();
    let mut open: Option<UnfinishedTx> = None;
    let mut slot = head;
    while slot != tail {
        let mut raw = [0u8; 64];
        read(core, pmr, layout.slot(q, slot), &mut raw).await?;
        let e = SubmissionEntry::from_bytes(&raw);
        let flags = e.tx_flags();
        if !flags.is_valid() || !flags.contains(TxFlags::TX) {
            return Err(corrupt(format!("slot {slot}: not a transaction entry")));
        }
        let op =
            IoOpcode::try_from(e.opcode()).map_err(|o| corrupt(format!("slot {slot}: opcode {o:#x}")))?;
        if op != IoOpcode::Write && op != IoOpcode::Flush && op != IoOpcode::WriteZeroes {
            return Err(corrupt(format!("slot {slot}: {op:?} in a transaction")));
        }
        if e.cid() as u32 != slot {
            return Err(corrupt(format!(
                "slot {slot}: command id {} does not match",
                e.cid()
            )));
        }
        let txid = TxId(e.txid());
        let cmd = UnfinishedCmd {
            opcode: e.opcode(),
            slba: e.slba(),
            blocks: e.block_count(),
            flags,
            fua: e.fua(),
        };
        match &mut open {
            Some(t) if t.txid == txid => t.cmds.push(cmd),
            Some(_) => {
                return Err(corrupt(format!(
                    "slot {slot}: transaction {} never committed",
                    txid.0
                )))
            }
            None => {
                open = Some(UnfinishedTx {
                    queue: q as u16,
                    txid,
                    cmds: vec![cmd],
                })
            }
        }
        if flags.contains(TxFlags::COMMIT) {
            if let Some(t) = open.take() {
                txs.push(t);
            }
        }
        slot = (slot + 1) % layout.slots;
    }
    if open.is_some() {
        return Err(corrupt(
            "the doorbell covers a transaction without its commit".into(),
        ));
    }
    Ok(txs)
}
