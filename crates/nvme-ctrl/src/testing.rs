//! A minimal host driver for tests: brings a controller up through MMIO and
//! host memory only (admin queue, Identify, I/O queues), submits commands
//! and reaps completions by phase tag after an MSI-X interrupt. It is the
//! "other side of the protocol" for this crate's tests and benches; the
//! real driver is the `ccnvme` crate.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use nvme_spec::traffic;
use pcie_sim::{BarKind, BusAddr, Core, HostAddr, Machine, PcieError, SimDuration};

use nvme_spec::command::SubmissionEntry;
use nvme_spec::completion::CompletionEntry;
use nvme_spec::regs::{self, Cc, Csts};
use nvme_spec::{CQE_BYTES, SQE_BYTES};

/// Errors of the test driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// A bus error.
    #[error(transparent)]
    Bus(#[from] PcieError),
    /// The controller did not become ready.
    #[error("controller not ready (CSTS {0:#x})")]
    NotReady(u32),
    /// No such queue.
    #[error("no queue {0}")]
    NoQueue(u16),
}

/// One queue pair as the host sees it.
#[derive(Debug)]
struct Pair {
    sq: HostAddr,
    sq_entries: u32,
    sq_tail: u32,
    cq: HostAddr,
    cq_entries: u32,
    cq_head: u32,
    phase: bool,
    next_cid: u16,
    done: BTreeMap<u16, CompletionEntry>,
}

/// The test driver.
#[derive(Clone)]
pub struct TestHost {
    /// The machine.
    pub machine: Machine,
    /// The core the driver runs on.
    pub core: Core,
    /// BAR0 of the controller.
    pub bar0: BusAddr,
    pairs: Rc<RefCell<BTreeMap<u16, Pair>>>,
    progress: Rc<tokio::sync::Notify>,
}

impl std::fmt::Debug for TestHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHost").field("bar0", &self.bar0).finish()
    }
}

impl TestHost {
    /// A driver for the controller on `port`, running on `core`.
    pub fn new(machine: &Machine, port: u8, core: usize) -> Result<TestHost, HostError> {
        let bar0 = machine
            .bar(port, BarKind::Registers)
            .ok_or(HostError::Bus(PcieError::Unmapped { addr: 0, len: 0 }))?;
        Ok(TestHost {
            machine: machine.clone(),
            core: machine.core(core)?,
            bar0,
            pairs: Rc::new(RefCell::new(BTreeMap::new())),
            progress: Rc::new(tokio::sync::Notify::new()),
        })
    }

    /// Writes a 32-bit register.
    pub async fn write32(&self, offset: u64, v: u32) -> Result<(), HostError> {
        self.core
            .mmio_write(self.bar0 + offset, &v.to_le_bytes(), traffic::REGISTER, 0)
            .await?;
        Ok(())
    }

    /// Writes a 64-bit register.
    pub async fn write64(&self, offset: u64, v: u64) -> Result<(), HostError> {
        self.core
            .mmio_write(self.bar0 + offset, &v.to_le_bytes(), traffic::REGISTER, 0)
            .await?;
        Ok(())
    }

    /// Reads a 32-bit register.
    pub async fn read32(&self, offset: u64) -> Result<u32, HostError> {
        let mut b = [0u8; 4];
        self.core
            .mmio_read(self.bar0 + offset, &mut b, traffic::REGISTER, 0)
            .await?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a 64-bit register.
    pub async fn read64(&self, offset: u64) -> Result<u64, HostError> {
        let mut b = [0u8; 8];
        self.core
            .mmio_read(self.bar0 + offset, &mut b, traffic::REGISTER, 0)
            .await?;
        Ok(u64::from_le_bytes(b))
    }

    /// Waits until CSTS.RDY equals `ready`, polling every microsecond.
    pub async fn wait_ready(&self, ready: bool) -> Result<(), HostError> {
        for _ in 0..100_000 {
            let csts = Csts(self.read32(regs::CSTS).await?);
            if csts.cfs() {
                return Err(HostError::NotReady(csts.0));
            }
            if csts.rdy() == ready {
                return Ok(());
            }
            self.machine.sim().sleep(SimDuration::from_us(1)).await;
        }
        Err(HostError::NotReady(self.read32(regs::CSTS).await?))
    }

    /// Brings the controller up with an admin queue pair of `entries`.
    pub async fn enable(&self, entries: u32) -> Result<(), HostError> {
        let mem = self.machine.memory();
        let asq = mem.alloc(entries as u64 * SQE_BYTES)?;
        let acq = mem.alloc(entries as u64 * CQE_BYTES)?;
        self.write32(regs::AQA, ((entries - 1) << 16) | (entries - 1))
            .await?;
        self.write64(regs::ASQ, asq.0).await?;
        self.write64(regs::ACQ, acq.0).await?;
        let cc = Cc(0).with_en(true).with_iosqes(6).with_iocqes(4);
        self.write32(regs::CC, cc.0).await?;
        self.wait_ready(true).await?;
        self.pairs
            .borrow_mut()
            .insert(0, Pair::new(asq, entries, acq, entries, 0));
        self.start_reaper(0, 0);
        Ok(())
    }

    /// Allocates host memory for an I/O queue pair and creates it (CQ
    /// first, then SQ), with MSI-X vector `qid`.
    pub async fn create_io_pair(
        &self,
        qid: u16,
        entries: u32,
    ) -> Result<(CompletionEntry, CompletionEntry), HostError> {
        let mem = self.machine.memory();
        let sq = mem.alloc(entries as u64 * SQE_BYTES)?;
        let cq = mem.alloc(entries as u64 * CQE_BYTES)?;
        let c1 = self
            .admin(SubmissionEntry::create_io_cq(0, qid, entries, cq.0, qid, true))
            .await?;
        let c2 = self
            .admin(SubmissionEntry::create_io_sq(0, qid, entries, sq.0, qid, 0))
            .await?;
        if c1.status.is_success() && c2.status.is_success() {
            self.pairs
                .borrow_mut()
                .insert(qid, Pair::new(sq, entries, cq, entries, qid));
            self.start_reaper(qid, qid);
        }
        Ok((c1, c2))
    }

    /// Submits an admin command and waits for its completion.
    pub async fn admin(&self, sqe: SubmissionEntry) -> Result<CompletionEntry, HostError> {
        let cid = self.submit(0, sqe).await?;
        self.wait(0, cid).await
    }

    /// Submits `sqe` on queue `qid` (its CID is replaced) and returns the
    /// CID used.
    pub async fn submit(&self, qid: u16, mut sqe: SubmissionEntry) -> Result<u16, HostError> {
        let (addr, tail, cid, entries) = {
            let mut pairs = self.pairs.borrow_mut();
            let p = pairs.get_mut(&qid).ok_or(HostError::NoQueue(qid))?;
            let cid = p.next_cid;
            p.next_cid = p.next_cid.wrapping_add(1);
            let slot = p.sq_tail;
            p.sq_tail = (p.sq_tail + 1) % p.sq_entries;
            (p.sq + slot as u64 * SQE_BYTES, p.sq_tail, cid, p.sq_entries)
        };
        let _ = entries;
        sqe.set_cid(cid);
        self.core.write_mem(addr, &sqe.to_bytes()).await?;
        self.write32(regs::sq_tail_doorbell(qid, 0), tail).await?;
        Ok(cid)
    }

    /// Waits for the completion of `cid` on queue `qid`.
    pub async fn wait(&self, qid: u16, cid: u16) -> Result<CompletionEntry, HostError> {
        loop {
            let done = self
                .pairs
                .borrow_mut()
                .get_mut(&qid)
                .ok_or(HostError::NoQueue(qid))?
                .done
                .remove(&cid);
            if let Some(c) = done {
                return Ok(c);
            }
            self.progress.notified().await;
        }
    }

    /// Waits for the next completion on queue `qid`, whichever command it
    /// is for.
    pub async fn wait_any(&self, qid: u16) -> Result<CompletionEntry, HostError> {
        loop {
            let next = {
                let mut pairs = self.pairs.borrow_mut();
                let p = pairs.get_mut(&qid).ok_or(HostError::NoQueue(qid))?;
                let cid = p.done.keys().min().copied();
                cid.and_then(|c| p.done.remove(&c))
            };
            if let Some(c) = next {
                return Ok(c);
            }
            self.progress.notified().await;
        }
    }

    /// Starts the interrupt handler of queue `qid`: on each MSI-X message
    /// it consumes new completions by phase tag and rings the CQ head
    /// doorbell once.
    fn start_reaper(&self, qid: u16, vector: u16) {
        let me = self.clone();
        self.machine.sim().spawn(async move {
            loop {
                if me.machine.interrupts().wait(vector).await.is_err() {
                    return;
                }
                match me.drain(qid).await {
                    Ok(_) => me.progress.notify_waiters(),
                    Err(_) => return,
                }
            }
        });
    }

    /// Consumes every new completion of queue `qid`; returns how many.
    async fn drain(&self, qid: u16) -> Result<usize, HostError> {
        let mut n = 0;
        loop {
            let (addr, phase) = {
                let pairs = self.pairs.borrow();
                let p = pairs.get(&qid).ok_or(HostError::NoQueue(qid))?;
                (p.cq + p.cq_head as u64 * CQE_BYTES, p.phase)
            };
            let mut raw = [0u8; 16];
            self.machine.memory().read(addr, &mut raw)?;
            let e = CompletionEntry::from_bytes(&raw);
            if e.phase != phase {
                break;
            }
            let mut pairs = self.pairs.borrow_mut();
            let p = pairs.get_mut(&qid).ok_or(HostError::NoQueue(qid))?;
            p.cq_head = (p.cq_head + 1) % p.cq_entries;
            if p.cq_head == 0 {
                p.phase = !p.phase;
            }
            p.done.insert(e.cid, e);
            n += 1;
        }
        if n > 0 {
            let head = self.pairs.borrow().get(&qid).map_or(0, |p| p.cq_head);
            self.write32(regs::cq_head_doorbell(qid, 0), head).await?;
        }
        Ok(n)
    }

    /// Submits on an I/O queue and waits for the completion.
    pub async fn io(&self, qid: u16, sqe: SubmissionEntry) -> Result<CompletionEntry, HostError> {
        let cid = self.submit(qid, sqe).await?;
        self.wait(qid, cid).await
    }

    /// Normal shutdown (CC.SHN = 01b), waiting for CSTS.SHST = complete.
    pub async fn shutdown(&self) -> Result<(), HostError> {
        let cc = Cc(self.read32(regs::CC).await?);
        self.write32(regs::CC, cc.with_shn(regs::ShutdownNotification::Normal).0)
            .await?;
        for _ in 0..1_000_000 {
            if Csts(self.read32(regs::CSTS).await?).shst() == regs::ShutdownStatus::Complete {
                return Ok(());
            }
            self.machine.sim().sleep(SimDuration::from_us(1)).await;
        }
        Err(HostError::NotReady(self.read32(regs::CSTS).await?))
    }
}

impl Pair {
    fn new(sq: HostAddr, sq_entries: u32, cq: HostAddr, cq_entries: u32, _vector: u16) -> Pair {
        Pair {
            sq,
            sq_entries,
            sq_tail: 0,
            cq,
            cq_entries,
            cq_head: 0,
            phase: true,
            next_cid: 1,
            done: BTreeMap::new(),
        }
    }
}
