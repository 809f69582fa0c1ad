//! A journal transaction sent as one ccNVMe transaction (ccNVMe 5.1): the
//! one submit path of the two journals that commit through ccNVMe, MQFS's
//! multi-queue journal (`mq`) and JBD2 with
//! [`JbdCommit::CcNvmeTransaction`](super::jbd::JbdCommit::CcNvmeTransaction)
//! (ccNVMe 7.5.1, Figure 13's +ccNVMe).
//!
//! The blocks (data to their homes, then the log blocks as [`lay_out`]
//! placed them) go into host pages and onto the caller's core's persistent
//! submission queue tagged REQ_TX; the last descriptor (MQFS's JH) is the
//! REQ_TX_COMMIT request. There is no commit block and no FLUSH ordering
//! point: the driver's recovery tells unfinished transactions apart
//! (`End::LastDescriptor`).
//!
//! [`lay_out`]: super::log::lay_out

use std::future::Future;

use ccnvme::{Bio, BioFlags, TxHandle, TxId};
use pcie_sim::HostAddr;

use crate::error::FsError;
use crate::fs::{Ctx, Fs};
use crate::journal::log::{LogBytes, Write};
use crate::layout::BLOCK;

/// A submitted transaction: atomic (P-SQDB persistent), its pages still
/// the device's until it is durable.
pub(crate) struct CcTx {
    /// The driver's handle (its `durable` completes when it is durable).
    pub handle: TxHandle,
    /// The core whose queue took it.
    pub core: usize,
    /// The host pages its commands read (back to the pool once durable).
    pub pages: Vec<HostAddr>,
}

/// Sends transaction `txid` as one ccNVMe transaction on `ctx`'s core:
/// `homes` written to their homes, the log blocks `log` (copies named in
/// `copies`), REQ_TX each, then `last` REQ_TX_COMMIT, its doorbell rung
/// once `before_ring` is ready (MQFS's turn, `docs/decisions.md` M9). A
/// transaction holds a bounded number of commands: home writes past that
/// go out first, FUA, and the transaction waits for them (they are new
/// blocks or fsync data, invisible until it commits). On error the pages
/// go back to the pool and the open transaction is dropped (the P-SQ
/// forgets it).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn submit(
    fs: &Fs,
    ctx: Ctx,
    txid: u64,
    homes: Vec<Write>,
    log: Vec<(u64, LogBytes)>,
    copies: &[Write],
    last: &Write,
    before_ring: impl Future<Output = ()>,
) -> Result<CcTx, FsError> {
    let core = ctx.core % fs.machine.core_count().max(1);
    let cpu = fs.machine.core(core)?;
    // One command per block (the convention Table 1 counts), unless
    // that would not fit a transaction.
    let fits = homes.len() + log.len() < fs.vol.first().max_tx_commands();
    let per_cmd = if fits {
        1
    } else {
        (fs.vol.first().info().max_transfer / BLOCK as u64).max(1) as usize
    };
    let mut runs = runs_of(homes, per_cmd);
    let logged = runs_of(log, per_cmd);
    let room = fs.vol.first().max_tx_commands().saturating_sub(logged.len() + 1);
    if runs.len() > room {
        let early: Vec<Write> = runs.split_off(room).into_iter().flatten().collect();
        fs.write_all(ctx, &early, BioFlags::FUA).await?;
    }
    let mut pages: Vec<HostAddr> = Vec::new();
    let r = async {
        let mut tx = fs.vol.first().begin_tx(core, TxId(txid)).await?;
        let homes = runs
            .iter()
            .map(|run| (run[0].0, run.iter().map(|(_, d)| &**d).collect::<Vec<_>>()));
        let log = logged.iter().map(|run| {
            (
                run[0].0,
                run.iter().map(|(_, l)| l.bytes(copies)).collect::<Vec<_>>(),
            )
        });
        for (first, blocks) in homes.chain(log) {
            let mut bio_pages = Vec::with_capacity(blocks.len());
            for data in blocks {
                let page = fs.take_page_pub()?;
                pages.push(page);
                cpu.write_mem(page, &data[..]).await?;
                bio_pages.push(page);
            }
            fs.vol
                .first()
                .tx_add(&mut tx, &Bio::write(first, bio_pages))
                .await?;
        }
        let last_page = fs.take_page_pub()?;
        pages.push(last_page);
        cpu.write_mem(last_page, &last.1[..]).await?;
        let h = tx
            .commit_after(&Bio::write(last.0, vec![last_page]), before_ring)
            .await?;
        Ok::<_, FsError>(h)
    }
    .await;
    match r {
        Ok(handle) => Ok(CcTx { handle, core, pages }),
        Err(e) => {
            fs.pages.borrow_mut().extend(pages);
            Err(e)
        }
    }
}

/// Sorts `blocks` and groups runs of consecutive block numbers, at most
/// `max` blocks a run.
#[allow(clippy::type_complexity)]
fn runs_of<T>(mut blocks: Vec<(u64, T)>, max: usize) -> Vec<Vec<(u64, T)>> {
    blocks.sort_by_key(|(b, _)| *b);
    let mut out: Vec<Vec<(u64, T)>> = Vec::new();
    for (b, d) in blocks {
        match out.last_mut() {
            Some(run) if run.len() < max && run.last().is_some_and(|(p, _)| p + 1 == b) => run.push((b, d)),
            _ => out.push(vec![(b, d)]),
        }
    }
    out
}
