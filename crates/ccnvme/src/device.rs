//! The block device: probe (controller bring-up through MMIO and admin
//! commands, ccNVMe recovery), per-core queues, bio submission and waits.

use std::cell::RefCell;
use std::rc::Rc;

use nvme_spec::command::{SubmissionEntry, VENDOR_CAP_OFFSET, VENDOR_CAP_PMR_QUEUES};
use nvme_spec::completion::Status;
use nvme_spec::features::{FeatureId, NumberOfQueues};
use nvme_spec::identify::{self, IdentifyController, IdentifyNamespace};
use nvme_spec::regs::{self, Cap, Cc, Csts};
use nvme_spec::traffic;
use pcie_sim::{BarKind, BusAddr, Core, Machine, PersistSkips, SimDuration};

use crate::bio::{Bio, BioFlags, BioOp, Done, TxId};
use crate::error::DriverError;
use crate::layout::PmrLayout;
use crate::profile::DriverProfile;
use crate::psq::{check_tx_bio, OpenTx, PersistentSq};
use crate::queue::QueuePair;
use crate::recovery::{self, Recovery, RESETTING};

/// What the driver sets up at probe.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeOptions {
    /// Cores to create queues for (default: every core of the machine).
    pub cores: Option<usize>,
    /// Create persistent submission queues in the PMR (ccNVMe).
    pub ccnvme: bool,
    /// Enable the PMR for the Horae ordering queue (see [`crate::horae`]),
    /// even without ccNVMe.
    pub horae: bool,
    /// Software costs and queue sizes.
    pub profile: DriverProfile,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            cores: None,
            ccnvme: true,
            horae: false,
            profile: DriverProfile::default(),
        }
    }
}

/// Facts about the device learnt at probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Bytes per logical block.
    pub lba_size: u32,
    /// Logical blocks in namespace 1.
    pub blocks: u64,
    /// Largest transfer in bytes (MDTS).
    pub max_transfer: u64,
    /// The drive has a volatile write cache (Identify VWC).
    pub volatile_cache: bool,
    /// Model string.
    pub model: String,
    /// PMR size (0: none).
    pub pmr_bytes: u64,
}

/// A probed NVMe block device.
pub struct BlockDevice {
    machine: Machine,
    bar0: BusAddr,
    pmr: Option<BusAddr>,
    profile: DriverProfile,
    info: DeviceInfo,
    admin: Rc<QueuePair>,
    queues: Vec<Rc<QueuePair>>,
    psqs: RefCell<Vec<Rc<PersistentSq>>>,
    layout: Option<PmrLayout>,
    recovery: RefCell<Option<Recovery>>,
}

impl std::fmt::Debug for BlockDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockDevice")
            .field("info", &self.info)
            .field("queues", &self.queues.len())
            .finish()
    }
}

async fn read32(core: &Core, at: BusAddr) -> Result<u32, DriverError> {
    let mut b = [0u8; 4];
    core.mmio_read(at, &mut b, traffic::REGISTER, 0).await?;
    Ok(u32::from_le_bytes(b))
}

async fn write32(core: &Core, at: BusAddr, v: u32) -> Result<(), DriverError> {
    core.mmio_write(at, &v.to_le_bytes(), traffic::REGISTER, 0)
        .await?;
    Ok(())
}

async fn wait_ready(core: &Core, bar0: BusAddr, machine: &Machine, ready: bool) -> Result<(), DriverError> {
    for _ in 0..1_000_000 {
        let csts = Csts(read32(core, bar0 + regs::CSTS).await?);
        if csts.cfs() {
            return Err(DriverError::NotReady("controller fatal status".into()));
        }
        if csts.rdy() == ready {
            return Ok(());
        }
        machine.sim().sleep(SimDuration::from_us(1)).await;
    }
    Err(DriverError::NotReady(format!("CSTS.RDY never became {ready}")))
}

impl BlockDevice {
    /// Brings up the controller on `port` of `machine` the way the Linux
    /// driver does, creates one queue pair per core, and (with `ccnvme`)
    /// reads the PMR: unfinished transactions are kept for
    /// [`BlockDevice::recovery`] until [`BlockDevice::ack_recovery`].
    pub async fn probe(
        machine: &Machine,
        port: u8,
        opts: ProbeOptions,
    ) -> Result<Rc<BlockDevice>, DriverError> {
        let core0 = machine.core(0)?;
        let bar0 = machine
            .bar(port, BarKind::Registers)
            .ok_or_else(|| DriverError::Unsupported("no register BAR".into()))?;
        let mut capb = [0u8; 8];
        core0
            .mmio_read(bar0 + regs::CAP, &mut capb, traffic::REGISTER, 0)
            .await?;
        let cap = Cap(u64::from_le_bytes(capb));
        if Cc(read32(&core0, bar0 + regs::CC).await?).en() {
            write32(&core0, bar0 + regs::CC, 0).await?;
            wait_ready(&core0, bar0, machine, false).await?;
        }
        let pmr = machine.bar(port, BarKind::Pmr).filter(|_| cap.pmrs());
        if opts.ccnvme || opts.horae {
            if pmr.is_none() {
                return Err(DriverError::Unsupported("ccNVMe and Horae need a PMR".into()));
            }
            write32(&core0, bar0 + regs::PMRCTL, 1).await?;
            if read32(&core0, bar0 + regs::PMRSTS).await? & (1 << 8) != 0 {
                return Err(DriverError::NotReady("PMR not ready".into()));
            }
        }
        let p = opts.profile.clone();
        let entries = p.queue_entries.min(cap.mqes() as u32 + 1).max(2);
        let admin = QueuePair::new(machine, core0.clone(), bar0, port, 0, 32.min(entries), &p)?;
        write32(
            &core0,
            bar0 + regs::AQA,
            ((admin.entries() - 1) << 16) | (admin.entries() - 1),
        )
        .await?;
        core0
            .mmio_write(
                bar0 + regs::ASQ,
                &admin.sq_addr().0.to_le_bytes(),
                traffic::REGISTER,
                0,
            )
            .await?;
        core0
            .mmio_write(
                bar0 + regs::ACQ,
                &admin.cq_addr().0.to_le_bytes(),
                traffic::REGISTER,
                0,
            )
            .await?;
        write32(
            &core0,
            bar0 + regs::CC,
            Cc(0).with_en(true).with_iosqes(6).with_iocqes(4).0,
        )
        .await?;
        wait_ready(&core0, bar0, machine, true).await?;
        machine.sim().spawn(admin.clone().run_handler());

        let idbuf = machine.memory().alloc(4096)?;
        let mut raw = vec![0u8; 4096];
        admin_cmd(
            &admin,
            SubmissionEntry::identify(0, identify::CNS_CONTROLLER, 0, idbuf.0),
        )
        .await?;
        machine.memory().read(idbuf, &mut raw)?;
        let idc = IdentifyController::from_bytes(&raw)
            .ok_or_else(|| DriverError::Unsupported("identify".into()))?;
        admin_cmd(
            &admin,
            SubmissionEntry::identify(0, identify::CNS_NAMESPACE, 1, idbuf.0),
        )
        .await?;
        machine.memory().read(idbuf, &mut raw)?;
        let ns = IdentifyNamespace::from_bytes(&raw)
            .ok_or_else(|| DriverError::Unsupported("namespace".into()))?;
        machine.memory().free(idbuf)?;
        let lba_size = ns
            .lba_size()
            .ok_or_else(|| DriverError::Unsupported("LBA format".into()))?;
        if lba_size != 512 && lba_size != 4096 {
            return Err(DriverError::Unsupported(format!("LBA size {lba_size}")));
        }
        if opts.ccnvme && idc.vendor[VENDOR_CAP_OFFSET - 3072] & VENDOR_CAP_PMR_QUEUES == 0 {
            return Err(DriverError::Unsupported(
                "controller cannot place queues in its PMR".into(),
            ));
        }
        let info = DeviceInfo {
            lba_size,
            blocks: ns.nsze,
            max_transfer: if idc.mdts == 0 {
                u64::MAX
            } else {
                4096u64 << idc.mdts
            },
            volatile_cache: idc.vwc & 1 == 1,
            model: identify::trim_ascii(&idc.mn).to_string(),
            pmr_bytes: machine
                .bar(port, BarKind::Pmr)
                .map_or(0, |_| pmr_len(machine, port)),
        };

        let cores = opts
            .cores
            .unwrap_or(machine.core_count())
            .clamp(1, machine.core_count());
        let per_core = if opts.ccnvme { 2 } else { 1 };
        let want = NumberOfQueues {
            sq: (cores * per_core) as u16,
            cq: cores as u16,
        };
        let c = admin_cmd(
            &admin,
            SubmissionEntry::set_features(0, FeatureId::NumberOfQueues as u8, want.to_dw()),
        )
        .await?;
        let granted = NumberOfQueues::from_dw(c.0).unwrap_or(want);
        let nq = (granted.cq as usize)
            .min(granted.sq as usize / per_core)
            .min(cores)
            .max(1);
        let lba_shift = lba_size.trailing_zeros();
        let mut queues = Vec::new();
        for i in 0..nq {
            let qid = (i + 1) as u16;
            let qp = QueuePair::new(machine, machine.core(i)?, bar0, port, qid, entries, &p)?;
            qp.set_lba_shift(lba_shift);
            admin_cmd(
                &admin,
                SubmissionEntry::create_io_cq(0, qid, entries, qp.cq_addr().0, qid, true),
            )
            .await?;
            admin_cmd(
                &admin,
                SubmissionEntry::create_io_sq(0, qid, entries, qp.sq_addr().0, qid, 0),
            )
            .await?;
            machine.sim().spawn(qp.clone().run_handler());
            queues.push(qp);
        }
        let dev = Rc::new(BlockDevice {
            machine: machine.clone(),
            bar0,
            pmr,
            profile: p.clone(),
            info,
            admin,
            queues,
            psqs: RefCell::new(Vec::new()),
            layout: None,
            recovery: RefCell::new(None),
        });
        if !opts.ccnvme {
            return Ok(dev);
        }
        let pmr = pmr.ok_or(DriverError::NoLayout)?;
        let wanted = PmrLayout {
            queues: nq as u32,
            slots: p.psq_slots.min(entries).max(2),
            pmr_bytes: dev.info.pmr_bytes,
        };
        if !wanted.fits() {
            return Err(DriverError::Unsupported(
                "the persistent queues do not fit the PMR".into(),
            ));
        }
        let found = recovery::read_header(&core0, pmr, dev.info.pmr_bytes).await?;
        let (layout, rec) = match found {
            Some((layout, generation, flags)) => {
                let unfinished = if flags & RESETTING != 0 {
                    Vec::new()
                } else {
                    recovery::scan(&core0, pmr, &layout).await?
                };
                (
                    layout,
                    Recovery {
                        unfinished,
                        generation,
                        formatted: false,
                    },
                )
            }
            None => (
                wanted,
                Recovery {
                    unfinished: Vec::new(),
                    generation: 0,
                    formatted: true,
                },
            ),
        };
        let mut dev = match Rc::try_unwrap(dev) {
            Ok(d) => d,
            Err(_) => return Err(DriverError::Invalid("device shared during probe".into())),
        };
        dev.layout = Some(layout);
        let dev = Rc::new(dev);
        if rec.formatted {
            dev.format_pmr(layout, 0).await?;
            dev.create_psqs().await?;
        }
        *dev.recovery.borrow_mut() = Some(rec);
        Ok(dev)
    }

    /// Facts about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Most commands one ccNVMe transaction may hold (its P-SQ ring less
    /// one slot, `docs/decisions.md` D13); 0 without ccNVMe.
    pub fn max_tx_commands(&self) -> usize {
        self.layout
            .as_ref()
            .map_or(0, |l| l.slots.saturating_sub(1) as usize)
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The driver profile.
    pub fn profile(&self) -> &DriverProfile {
        &self.profile
    }

    /// Bus address of the PMR, if it is enabled.
    pub fn pmr_base(&self) -> Option<BusAddr> {
        self.pmr
    }

    /// The ccNVMe layout of the PMR, if ccNVMe is on.
    pub fn pmr_layout(&self) -> Option<PmrLayout> {
        self.layout
    }

    /// First PMR byte not used by ccNVMe (where the Horae region starts).
    pub fn pmr_free_start(&self) -> u64 {
        self.layout.map_or(0, |l| l.end())
    }

    /// Number of per-core queue pairs.
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The queue pair a thread on `core` submits to.
    pub fn queue(&self, core: usize) -> &Rc<QueuePair> {
        &self.queues[core % self.queues.len()]
    }

    /// What probe found in the PMR (None without ccNVMe).
    pub fn recovery(&self) -> Option<Recovery> {
        self.recovery.borrow().clone()
    }

    /// Writes a fresh layout: pointers zero, header last, each step a
    /// persistent MMIO write ([`Core::persist_wc`], the one mechanism the
    /// P-SQ and the Horae queue use too).
    async fn format_pmr(&self, layout: PmrLayout, generation: u64) -> Result<(), DriverError> {
        let core = self.machine.core(0)?;
        let pmr = self.pmr.ok_or(DriverError::NoLayout)?;
        let mut words = Vec::with_capacity(2 * layout.queues as usize);
        for q in 0..layout.queues {
            for at in [layout.doorbell(q), layout.head(q)] {
                core.wc_store(pmr + at, &0u32.to_le_bytes(), traffic::QUEUE_POINTER, 0)
                    .await?;
                words.push((pmr + at, 4u64));
            }
        }
        core.persist_wc(&words, pmr, 0, PersistSkips::default()).await?;
        core.persistent_write(
            pmr,
            &layout.header_bytes(generation, 0),
            traffic::QUEUE_POINTER,
            0,
            PersistSkips::default(),
        )
        .await?;
        Ok(())
    }

    /// Creates the persistent submission queues on the controller.
    async fn create_psqs(&self) -> Result<(), DriverError> {
        let layout = self.layout.ok_or(DriverError::NoLayout)?;
        let pmr = self.pmr.ok_or(DriverError::NoLayout)?;
        let mut psqs = Vec::new();
        for (i, qp) in self.queues.iter().enumerate() {
            let q = i as u32;
            let qid = (self.queues.len() + i + 1) as u16;
            let mut sqe = SubmissionEntry::create_io_sq(0, qid, layout.slots, layout.slot(q, 0), qp.qid, 0);
            sqe.set_sq_in_pmr(true);
            sqe.set_pmr_doorbell(Some(layout.doorbell(q) as u32));
            admin_cmd(&self.admin, sqe).await?;
            let psq = PersistentSq::new(
                &self.machine,
                qp.clone(),
                qid,
                q,
                pmr,
                layout,
                self.info.volatile_cache,
                self.info.lba_size.trailing_zeros(),
                &self.profile,
            )?;
            *qp.psq.borrow_mut() = Some(Rc::downgrade(&psq));
            psqs.push(psq);
        }
        *self.psqs.borrow_mut() = psqs;
        Ok(())
    }

    /// The upper layer has made its recovery durable: the persistent queues
    /// are reset (marked resetting, pointers zeroed, then a new generation)
    /// and created on the controller (`docs/decisions.md` D11).
    pub async fn ack_recovery(&self) -> Result<(), DriverError> {
        if !self.psqs.borrow().is_empty() {
            return Ok(());
        }
        let layout = self.layout.ok_or(DriverError::NoLayout)?;
        let generation = self.recovery.borrow().as_ref().map_or(0, |r| r.generation) + 1;
        let core = self.machine.core(0)?;
        let pmr = self.pmr.ok_or(DriverError::NoLayout)?;
        core.persistent_write(
            pmr,
            &layout.header_bytes(generation - 1, RESETTING),
            traffic::QUEUE_POINTER,
            0,
            PersistSkips::default(),
        )
        .await?;
        self.format_pmr(layout, generation).await?;
        self.create_psqs().await?;
        *self.recovery.borrow_mut() = Some(Recovery {
            generation,
            ..Default::default()
        });
        Ok(())
    }

    /// Submits `bio` on `core`'s queue and returns its handle (does not
    /// wait for completion). Charges the block layer to the core.
    ///
    /// On a drive without a volatile write cache the block layer strips
    /// PREFLUSH and FUA and completes an empty flush at once, as Linux 4.18
    /// does before a request is made (`generic_make_request_checks` in
    /// block/blk-core.c: `if (op_is_flush(bio->bi_opf) &&
    /// !test_bit(QUEUE_FLAG_WC, ...)) bio->bi_opf &= ~(REQ_PREFLUSH |
    /// REQ_FUA)`): every completed write is already durable there, so the
    /// flags would only cost time.
    pub async fn submit(&self, core: usize, bio: &Bio) -> Result<Done, DriverError> {
        self.check(bio)?;
        let qp = self.queue(core);
        qp.core.busy(self.profile.block_layer).await;
        let stripped;
        let bio = if !self.info.volatile_cache && bio.flags.contains(BioFlags::FUA) {
            stripped = Bio {
                flags: bio.flags.without(BioFlags::FUA),
                ..bio.clone()
            };
            &stripped
        } else {
            bio
        };
        if bio.flags.contains(BioFlags::PREFLUSH) && self.info.volatile_cache {
            let f = Done::new();
            qp.submit_bio(&Bio::flush(), f.clone()).await?;
            let s = self.wait(core, &f).await;
            if !s.is_success() {
                return Err(DriverError::Command(s));
            }
        }
        let done = Done::new();
        if bio.op == BioOp::Flush && !self.info.volatile_cache {
            // No volatile cache: the block layer drops the flush (Linux,
            // and ccNVMe Fig. 14 caption).
            done.complete(Status::SUCCESS);
            return Ok(done);
        }
        qp.submit_bio(bio, done.clone()).await?;
        Ok(done)
    }

    /// Waits for `done` on behalf of a thread on `core`; a thread that had
    /// to sleep pays a wake-up.
    pub async fn wait(&self, core: usize, done: &Done) -> Status {
        if let Some(s) = done.status() {
            return s;
        }
        let s = done.wait_raw().await;
        if done.mark_woken() && !self.profile.polling {
            self.queue(core).core.wake_up(self.profile.wakeup).await;
        }
        s
    }

    /// Submits and waits.
    pub async fn submit_wait(&self, core: usize, bio: &Bio) -> Result<(), DriverError> {
        let d = self.submit(core, bio).await?;
        let s = self.wait(core, &d).await;
        if s.is_success() {
            Ok(())
        } else {
            Err(DriverError::Command(s))
        }
    }

    /// Opens a ccNVMe transaction on `core`'s persistent queue.
    pub async fn begin_tx(&self, core: usize, txid: TxId) -> Result<OpenTx, DriverError> {
        let psq = {
            let psqs = self.psqs.borrow();
            if psqs.is_empty() {
                return Err(if self.layout.is_some() {
                    DriverError::RecoveryPending
                } else {
                    DriverError::Unsupported("ccNVMe is not enabled".into())
                });
            }
            psqs[core % psqs.len()].clone()
        };
        Ok(psq.begin(txid).await)
    }

    /// Adds `bio` to an open transaction (checks it first).
    pub async fn tx_add(&self, tx: &mut OpenTx, bio: &Bio) -> Result<(), DriverError> {
        self.check(bio)?;
        check_tx_bio(bio)?;
        tx.add(bio).await
    }

    /// The persistent queues (for tests and tools).
    pub fn psqs(&self) -> Vec<Rc<PersistentSq>> {
        self.psqs.borrow().clone()
    }

    fn check(&self, bio: &Bio) -> Result<(), DriverError> {
        if bio.op == BioOp::Flush {
            return Ok(());
        }
        let per_page = 4096 / self.info.lba_size as u64;
        let end = bio.lba.0.checked_add(bio.blocks() * per_page);
        if end.is_none_or(|e| e > self.info.blocks) {
            return Err(DriverError::Invalid(format!(
                "blocks {}..+{} outside the device",
                bio.lba.0,
                bio.blocks()
            )));
        }
        if bio.blocks() * 4096 > self.info.max_transfer {
            return Err(DriverError::Invalid("larger than the maximum transfer".into()));
        }
        Ok(())
    }

    /// True when no command is outstanding on any queue pair and no
    /// transaction is in flight on any persistent submission queue.
    pub fn is_idle(&self) -> bool {
        self.psqs.borrow().iter().all(|p| p.in_flight() == 0)
            && self.queues.iter().all(|q| q.outstanding() == 0)
            && self.admin.outstanding() == 0
    }

    /// Waits (in simulated time, polling every 10 us) until the driver is
    /// idle ([`BlockDevice::is_idle`]): every transaction and command that
    /// was submitted has completed.
    pub async fn wait_idle(&self) {
        while !self.is_idle() {
            self.machine.sim().sleep(SimDuration::from_us(10)).await;
        }
    }

    /// Waits for every in-flight transaction and command, then shuts the
    /// controller down normally (CC.SHN, CSTS.SHST).
    pub async fn shutdown(&self) -> Result<(), DriverError> {
        self.wait_idle().await;
        let core = self.machine.core(0)?;
        let cc = Cc(read32(&core, self.bar0 + regs::CC).await?);
        write32(
            &core,
            self.bar0 + regs::CC,
            cc.with_shn(regs::ShutdownNotification::Normal).0,
        )
        .await?;
        for _ in 0..1_000_000 {
            if Csts(read32(&core, self.bar0 + regs::CSTS).await?).shst() == regs::ShutdownStatus::Complete {
                // The driver is gone: its interrupt handlers stop, so that
                // a driver probed later owns the vectors.
                self.release_vectors();
                return Ok(());
            }
            self.machine.sim().sleep(SimDuration::from_us(1)).await;
        }
        Err(DriverError::NotReady("shutdown did not complete".into()))
    }

    /// Stops every interrupt handler of this driver.
    pub fn release_vectors(&self) {
        let irq = self.machine.interrupts();
        self.admin.stopped.set(true);
        irq.release(self.admin.vector);
        for q in &self.queues {
            q.stopped.set(true);
            irq.release(q.vector);
        }
    }
}

fn pmr_len(machine: &Machine, port: u8) -> u64 {
    machine
        .layout()
        .ports
        .get(port as usize)
        .and_then(|p| p.pmr)
        .map_or(0, |(_, s)| s)
}

/// Runs an admin command and returns (dword 0) or its error status.
async fn admin_cmd(admin: &QueuePair, sqe: SubmissionEntry) -> Result<(u32,), DriverError> {
    let done = Done::new();
    admin.submit(sqe, done.clone()).await?;
    let s = done.wait_raw().await;
    if s.is_success() {
        Ok((done.dw0(),))
    } else {
        Err(DriverError::Command(s))
    }
}
