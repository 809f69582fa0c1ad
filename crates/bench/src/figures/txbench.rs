//! The atomic-transaction benchmark of ccNVMe Figure 10 (section 7.2), in
//! simulated time: threads, each on its own core, run transactions of N
//! random 4 KiB blocks back to back with one of four approaches:
//!
//! - **classic** (JBD2): a descriptor and the N blocks, wait for them, then
//!   a commit record with PREFLUSH and FUA (both dropped on a drive without
//!   a volatile cache, as Linux does);
//! - **horae**: the descriptor and blocks as one epoch of the Horae
//!   ordering queue, the commit record as the next epoch, all dispatched
//!   without waiting, then a wait for all and a joint flush;
//! - **ccnvme**: the N blocks tagged REQ_TX and the descriptor tagged
//!   REQ_TX_COMMIT on the core's persistent queue, waiting for durability;
//! - **ccnvme-atomic**: the same, returning once the transaction is atomic.
//!
//! Throughput is transactions per second; utilization is the bytes the
//! device received (journal blocks included, as iostat counts them) per
//! second over the drive's maximum bandwidth (3.3 GB/s for the P5800X on
//! PCIe 3.0, ccNVMe Table 3 footnote and its artifact's `DEV_MAX_BW`).

use std::cell::Cell;
use std::rc::Rc;

use nvme_ctrl::{Controller, ControllerConfig, Media, SsdProfile};
use nvme_spec::traffic;
use pcie_sim::{CpuProfile, EventKind, Executor, HostAddr, Machine, MachineProfile, SimDuration, TraceMode};
use rand::Rng;

use ccnvme::bio::{Bio, BioFlags, TxId};
use ccnvme::device::{BlockDevice, ProbeOptions};
use ccnvme::error::DriverError;
use ccnvme::horae::{OrderingQueue, StreamParams, Submitters};
use ccnvme::{DriverProfile, Traffic};

use super::common::BenchResult;

/// How a transaction is made atomic (and durable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approach {
    /// Descriptor + blocks, wait, commit record with FLUSH/FUA.
    Classic,
    /// The Horae ordering queue instead of the wait.
    Horae,
    /// A ccNVMe transaction, waiting for durability.
    CcNvme,
    /// A ccNVMe transaction, waiting for atomicity only.
    CcNvmeAtomic,
}

impl Approach {
    /// All four, in the paper's order.
    pub const ALL: [Approach; 4] = [
        Approach::Classic,
        Approach::Horae,
        Approach::CcNvme,
        Approach::CcNvmeAtomic,
    ];

    /// Name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Approach::Classic => "classic",
            Approach::Horae => "horae",
            Approach::CcNvme => "ccnvme",
            Approach::CcNvmeAtomic => "ccnvme-atomic",
        }
    }
}

/// One measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TxResult {
    /// Transactions per second.
    pub tps: f64,
    /// Device write bandwidth (all blocks) over the maximum.
    pub utilization: f64,
    /// The share of the cores' time they were occupied (kernel and user,
    /// the machine's CPU accounting): near 1, the threads are CPU-bound.
    pub busy: f64,
    /// Persistent MMIO writes to the Horae ordering queue per transaction
    /// (0 for the other approaches), counted by the machine.
    pub ordering_writes_per_tx: f64,
}

/// Maximum device bandwidth for utilization (P5800X on PCIe 3.0).
pub const MAX_BANDWIDTH: f64 = 3.3e9;

/// Media size (4 GiB): random blocks spread over it.
const BLOCKS: u64 = 1 << 20;
/// Journal blocks per thread.
const JOURNAL: u64 = 4096;

/// Runs `threads` threads doing transactions of `blocks` 4 KiB blocks with
/// `approach` on `profile` for `duration` of simulated time.
pub fn run(
    profile: &SsdProfile,
    approach: Approach,
    threads: usize,
    blocks: usize,
    duration: SimDuration,
) -> BenchResult<TxResult> {
    run_with(
        profile,
        &DriverProfile::default(),
        approach,
        threads,
        blocks,
        duration,
    )
}

/// [`run`] with the driver's profile `driver` (side experiments).
pub fn run_with(
    profile: &SsdProfile,
    driver: &DriverProfile,
    approach: Approach,
    threads: usize,
    blocks: usize,
    duration: SimDuration,
) -> BenchResult<TxResult> {
    let ex = Executor::new(10);
    // Horae's per-CPU background submitters (Horae 6.2) get a core each,
    // as they found idle ones on the paper's 24-core server.
    let with_oq = approach == Approach::Horae;
    let cpu = CpuProfile {
        cores: threads.max(1) * (1 + usize::from(with_oq)),
        ..CpuProfile::default()
    };
    let m = Machine::new(
        &ex,
        MachineProfile {
            cpu,
            ..MachineProfile::default()
        },
        TraceMode::Off,
    );
    Controller::attach(
        &m,
        ControllerConfig::new(profile.clone()),
        Media::memory(BLOCKS),
        None,
    )?;
    let m2 = m.clone();
    let opts = ProbeOptions {
        ccnvme: matches!(approach, Approach::CcNvme | Approach::CcNvmeAtomic),
        horae: with_oq,
        profile: driver.clone(),
        ..ProbeOptions::default()
    };
    let dev = ex.block_on(async move { BlockDevice::probe(&m2, 0, opts).await })??;
    let oq = if with_oq {
        let d = dev.clone();
        let params = StreamParams::SINGLE.with_submitters(Submitters {
            first: threads.max(1),
            count: threads.max(1),
        });
        Some(ex.block_on(async move { OrderingQueue::init_stream(&[d], params).await })??)
    } else {
        None
    };
    let done = Rc::new(Cell::new(0u64));
    let start = m.sim().now();
    let end = start + duration;
    let before = m.counters();
    let cpu_before = m.cpu_stats();
    for t in 0..threads {
        let dev = dev.clone();
        let m3 = m.clone();
        let done = done.clone();
        let oq = oq.clone();
        m.sim().spawn(async move {
            let pages: Vec<HostAddr> = (0..=blocks)
                .filter_map(|_| m3.memory().alloc(4096).ok())
                .collect();
            let commit_page = m3.memory().alloc(4096).ok();
            let journal = BLOCKS - (t as u64 + 1) * JOURNAL;
            let mut jpos = 0u64;
            let mut txid = (t as u64) << 40;
            while m3.sim().now() < end {
                txid += 1;
                let lbas: Vec<u64> = (0..blocks)
                    .map(|_| m3.sim().with_rng(|r| r.gen_range(0..BLOCKS - JOURNAL * 64)))
                    .collect();
                let mut jnext = || {
                    let l = journal + jpos;
                    jpos = (jpos + 1) % JOURNAL;
                    l
                };
                let ok = match approach {
                    Approach::Classic => classic(&dev, t, &pages, commit_page, &lbas, &mut jnext).await,
                    Approach::Horae => match &oq {
                        Some(oq) => horae(&dev, oq, t, &pages, commit_page, &lbas, &mut jnext).await,
                        None => Err(DriverError::Unsupported("no ordering queue".into())),
                    },
                    Approach::CcNvme | Approach::CcNvmeAtomic => {
                        ccnvme(
                            &dev,
                            t,
                            &pages,
                            &lbas,
                            jnext(),
                            txid,
                            approach == Approach::CcNvmeAtomic,
                        )
                        .await
                    }
                };
                if ok.is_err() {
                    return;
                }
                if m3.sim().now() <= end {
                    done.set(done.get() + 1);
                }
            }
        });
    }
    ex.run_until(end);
    let elapsed = (end - start).as_secs_f64();
    let c = m.counters().since(&before);
    // The device pulls written data as completions of its DMA reads.
    let written = c
        .get(EventKind::DmaReadCompletion, traffic::DATA_BLOCK)
        .payload_bytes;
    let (kernel, user) = m
        .cpu_stats()
        .since(cpu_before)
        .utilization(end - start, threads.max(1));
    let txs = done.get().max(1) as f64;
    Ok(TxResult {
        tps: done.get() as f64 / elapsed,
        utilization: written as f64 / elapsed / MAX_BANDWIDTH,
        busy: kernel + user,
        ordering_writes_per_tx: Traffic::from_counters(&c).ordering_mmio as f64 / txs,
    })
}

/// Waits for every request of `waits`; the first failure is the error.
async fn wait_all(dev: &BlockDevice, core: usize, waits: &[ccnvme::bio::Done]) -> Result<(), DriverError> {
    for w in waits {
        let s = dev.wait(core, w).await;
        if !s.is_success() {
            return Err(DriverError::Command(s));
        }
    }
    Ok(())
}

async fn classic(
    dev: &Rc<BlockDevice>,
    core: usize,
    pages: &[HostAddr],
    commit_page: Option<HostAddr>,
    lbas: &[u64],
    jnext: &mut impl FnMut() -> u64,
) -> Result<(), DriverError> {
    let mut waits = Vec::new();
    waits.push(dev.submit(core, &Bio::write(jnext(), vec![pages[0]])).await?);
    for (i, l) in lbas.iter().enumerate() {
        waits.push(dev.submit(core, &Bio::write(*l, vec![pages[i + 1]])).await?);
    }
    wait_all(dev, core, &waits).await?;
    let page = commit_page.ok_or_else(|| DriverError::Invalid("no page".into()))?;
    dev.submit_wait(
        core,
        &Bio::write(jnext(), vec![page]).with(BioFlags::PREFLUSH | BioFlags::FUA),
    )
    .await
}

async fn horae(
    dev: &Rc<BlockDevice>,
    oq: &Rc<OrderingQueue>,
    core: usize,
    pages: &[HostAddr],
    commit_page: Option<HostAddr>,
    lbas: &[u64],
    jnext: &mut impl FnMut() -> u64,
) -> Result<(), DriverError> {
    let page = commit_page.ok_or_else(|| DriverError::Invalid("no page".into()))?;
    let mut epoch1 = vec![(jnext(), pages[0])];
    epoch1.extend(lbas.iter().zip(&pages[1..]).map(|(l, p)| (*l, *p)));
    let epoch2 = vec![(jnext(), page)];
    let mut waits = Vec::new();
    for epoch in [epoch1, epoch2] {
        let ranges: Vec<(u64, u32)> = epoch.iter().map(|(l, _)| (*l, 1)).collect();
        let e = oq.append_epoch(core, &ranges).await?;
        for (i, (l, p)) in epoch.iter().enumerate() {
            let id = e
                .entry(i as u32)
                .ok_or_else(|| DriverError::Invalid("epoch shorter than its writes".into()))?;
            waits.push(oq.submit(core, id, &Bio::write(*l, vec![*p])).await?);
        }
    }
    wait_all(dev, core, &waits).await?;
    oq.flush(core).await
}

async fn ccnvme(
    dev: &Rc<BlockDevice>,
    core: usize,
    pages: &[HostAddr],
    lbas: &[u64],
    journal: u64,
    txid: u64,
    atomic_only: bool,
) -> Result<(), DriverError> {
    let mut tx = dev.begin_tx(core, TxId(txid)).await?;
    for (i, l) in lbas.iter().enumerate() {
        dev.tx_add(&mut tx, &Bio::write(*l, vec![pages[i + 1]])).await?;
    }
    let h = tx.commit(&Bio::write(journal, vec![pages[0]])).await?;
    if atomic_only {
        return Ok(());
    }
    let s = dev.wait(core, &h.durable).await;
    if s.is_success() {
        Ok(())
    } else {
        Err(DriverError::Command(s))
    }
}
