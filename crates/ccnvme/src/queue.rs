//! One core's NVMe queues: a submission queue and a completion queue in host
//! memory, the command table, submission with an SQ tail doorbell, and the
//! interrupt handler that reaps completions by phase tag and rings the CQ
//! head doorbell (NVMe 1.4 4.1, 7.2). A persistent submission queue in the
//! PMR may share the completion queue (ccNVMe 4.1, `docs/decisions.md` D9).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use nvme_spec::command::SubmissionEntry;
use nvme_spec::completion::CompletionEntry;
use nvme_spec::regs;
use nvme_spec::traffic;
use nvme_spec::{CQE_BYTES, SQE_BYTES};
use pcie_sim::{BusAddr, Core, HostAddr, Machine};
use tokio::sync::{Mutex, Notify};

use crate::bio::{Bio, Done};
use crate::command::{build_command, PrpPool};
use crate::error::DriverError;
use crate::profile::{CqReap, DriverProfile};
use crate::psq::PersistentSq;

/// Attribution tag of a command for the bus trace: (sqid << 16) | cid, as
/// the controller tags its DMA for the command.
pub fn attr(sqid: u16, cid: u16) -> u32 {
    ((sqid as u32) << 16) | cid as u32
}

/// A submission/completion queue pair owned by one core.
pub struct QueuePair {
    /// Queue id of the CQ and of the normal SQ.
    pub qid: u16,
    /// Host interrupt vector of the CQ (its MSI-X table entry is `qid`).
    pub vector: u16,
    /// The core whose threads submit here and that runs the handler.
    pub core: Core,
    pub(crate) machine: Machine,
    bar0: BusAddr,
    profile: DriverProfile,
    sq: HostAddr,
    sq_entries: u32,
    sq_tail: Cell<u32>,
    sq_head: Cell<u32>,
    cq: HostAddr,
    cq_entries: u32,
    cq_head: Cell<u32>,
    phase: Cell<bool>,
    cmds: RefCell<Vec<Option<Done>>>,
    free_cids: RefCell<Vec<u16>>,
    /// Serializes slot reservation, entry write and doorbell (Linux's
    /// `sq_lock`).
    sq_lock: Mutex<()>,
    space: Notify,
    /// The persistent submission queue completing into this CQ, if any.
    /// Weak: the P-SQ holds this queue pair (for its flushes), and the
    /// device holds the P-SQ; a strong link back would leak both.
    pub(crate) psq: RefCell<Option<std::rc::Weak<PersistentSq>>>,
    /// Completion entries consumed since the CQ head doorbell was rung.
    unrung: Cell<u32>,
    /// Set when the driver is gone: the handler stops.
    pub(crate) stopped: Cell<bool>,
    prps: PrpPool,
    lba_shift: Cell<u32>,
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair").field("qid", &self.qid).finish()
    }
}

impl QueuePair {
    /// Allocates host memory for a pair of `entries` (the controller-side
    /// queues are created by the caller with admin commands).
    pub(crate) fn new(
        machine: &Machine,
        core: Core,
        bar0: BusAddr,
        port: u8,
        qid: u16,
        entries: u32,
        profile: &DriverProfile,
    ) -> Result<Rc<QueuePair>, DriverError> {
        let mem = machine.memory();
        let sq = mem.alloc(entries as u64 * SQE_BYTES)?;
        let cq = mem.alloc(entries as u64 * CQE_BYTES)?;
        Ok(Rc::new(QueuePair {
            qid,
            // The CQ uses MSI-X table entry `qid` of its device; the
            // message arrives on the host vector the machine maps it to.
            vector: pcie_sim::irq::host_vector(port, qid),
            core,
            machine: machine.clone(),
            bar0,
            profile: profile.clone(),
            sq,
            sq_entries: entries,
            sq_tail: Cell::new(0),
            sq_head: Cell::new(0),
            cq,
            cq_entries: entries,
            cq_head: Cell::new(0),
            phase: Cell::new(true),
            cmds: RefCell::new(vec![None; entries as usize]),
            free_cids: RefCell::new((0..entries as u16).rev().collect()),
            sq_lock: Mutex::new(()),
            space: Notify::new(),
            psq: RefCell::new(None),
            unrung: Cell::new(0),
            stopped: Cell::new(false),
            prps: PrpPool::new(machine, entries)?,
            lba_shift: Cell::new(12),
        }))
    }

    /// Host address of the submission queue.
    pub fn sq_addr(&self) -> HostAddr {
        self.sq
    }

    /// Host address of the completion queue.
    pub fn cq_addr(&self) -> HostAddr {
        self.cq
    }

    /// Commands submitted on this queue pair and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.cmds.borrow().iter().filter(|c| c.is_some()).count()
    }

    /// Entries per queue.
    pub fn entries(&self) -> u32 {
        self.sq_entries
    }

    /// Sets log2 of the namespace's LBA size.
    pub(crate) fn set_lba_shift(&self, shift: u32) {
        self.lba_shift.set(shift);
    }

    /// Submits `bio` as one command; `done` completes with its status.
    pub async fn submit_bio(&self, bio: &Bio, done: Done) -> Result<u16, DriverError> {
        self.submit_inner(None, Some(bio), done).await
    }

    /// Places `sqe` in the SQ and rings the tail doorbell; `done` completes
    /// with the command's status. Waits while the queue is full.
    pub async fn submit(&self, sqe: SubmissionEntry, done: Done) -> Result<u16, DriverError> {
        self.submit_inner(Some(sqe), None, done).await
    }

    async fn submit_inner(
        &self,
        sqe: Option<SubmissionEntry>,
        bio: Option<&Bio>,
        done: Done,
    ) -> Result<u16, DriverError> {
        let _g = self.sq_lock.lock().await;
        let cid = loop {
            let full = (self.sq_tail.get() + 1) % self.sq_entries == self.sq_head.get();
            if !full {
                if let Some(cid) = self.free_cids.borrow_mut().pop() {
                    break cid;
                }
            }
            self.space.notified().await;
        };
        let built = match (sqe, bio) {
            (Some(s), _) => Ok(s),
            (None, Some(b)) => {
                build_command(b, self.lba_shift.get(), &self.prps, cid as u32, &self.core).await
            }
            (None, None) => Err(DriverError::Invalid("nothing to submit".into())),
        };
        let mut sqe = match built {
            Ok(s) => s,
            Err(e) => {
                self.free_cids.borrow_mut().push(cid);
                return Err(e);
            }
        };
        sqe.set_cid(cid);
        self.cmds.borrow_mut()[cid as usize] = Some(done);
        self.core.compute(self.profile.submit_cycles).await;
        let slot = self.sq_tail.get();
        self.core
            .write_mem(self.sq + slot as u64 * SQE_BYTES, &sqe.to_bytes())
            .await?;
        let tail = (slot + 1) % self.sq_entries;
        self.sq_tail.set(tail);
        self.core
            .mmio_write(
                self.bar0 + regs::sq_tail_doorbell(self.qid, 0),
                &tail.to_le_bytes(),
                traffic::DOORBELL,
                attr(self.qid, cid),
            )
            .await?;
        Ok(cid)
    }

    /// The interrupt handler (or poller) of this queue: runs forever.
    pub(crate) async fn run_handler(self: Rc<Self>) {
        // The handler's work is interrupt time; a poller's is the polling
        // thread's.
        let core = if self.profile.polling {
            self.core.clone()
        } else {
            self.core.in_irq()
        };
        loop {
            if self.stopped.get() {
                return;
            }
            if self.profile.polling {
                self.machine.sim().sleep(self.profile.poll_interval).await;
                if !self.cqe_ready() {
                    continue;
                }
            } else {
                if self.machine.interrupts().wait(self.vector).await.is_err() {
                    return;
                }
                core.busy(self.profile.irq_handler).await;
            }
            let drain = self.profile.polling || self.profile.cq_reap == CqReap::Drain;
            if self.reap(&core, if drain { u32::MAX } else { 1 }).await.is_err() {
                return;
            }
            if !self.profile.polling && drain {
                // The handler's EOI: what arrived while it ran is one
                // more run (with coalescing off every entry has its own
                // MSI-X, and those of entries reaped just now find none).
                self.machine.interrupts().end_of_interrupt(self.vector);
            }
        }
    }

    fn cqe_ready(&self) -> bool {
        let mut raw = [0u8; 16];
        let addr = self.cq + self.cq_head.get() as u64 * CQE_BYTES;
        self.machine.memory().read(addr, &mut raw).is_ok()
            && CompletionEntry::from_bytes(&raw).phase == self.phase.get()
    }

    /// Consumes up to `limit` new completion entries, then rings the CQ
    /// head doorbell if the entries consumed allow it (see
    /// [`PersistentSq::on_completion`]).
    async fn reap(&self, core: &Core, limit: u32) -> Result<(), DriverError> {
        let mut consumed = 0u32;
        let mut ring = false;
        while consumed < limit {
            let mut raw = [0u8; 16];
            let addr = self.cq + self.cq_head.get() as u64 * CQE_BYTES;
            self.machine.memory().read(addr, &mut raw)?;
            let e = CompletionEntry::from_bytes(&raw);
            if e.phase != self.phase.get() {
                break;
            }
            let head = (self.cq_head.get() + 1) % self.cq_entries;
            self.cq_head.set(head);
            if head == 0 {
                self.phase.set(!self.phase.get());
            }
            consumed += 1;
            core.compute(self.profile.cqe_cycles).await;
            if e.sq_id == self.qid {
                self.sq_head.set(e.sq_head as u32);
                let done = self
                    .cmds
                    .borrow_mut()
                    .get_mut(e.cid as usize)
                    .and_then(|c| c.take());
                if let Some(d) = done {
                    self.free_cids.borrow_mut().push(e.cid);
                    d.complete_entry(e.status, e.dw0);
                }
                self.space.notify_waiters();
                ring = true;
            } else {
                let psq = self.psq.borrow().as_ref().and_then(std::rc::Weak::upgrade);
                match psq {
                    Some(p) if p.qid == e.sq_id => p.on_completion(e.cid, e.status),
                    _ => ring = true,
                }
            }
        }
        self.unrung.set(self.unrung.get() + consumed);
        // A transaction whose commands have all completed advances the
        // persistent head first (ccNVMe 4.4: P-SQ-head, then the CQ
        // doorbell); its waiters are woken after the doorbell.
        let psq = self.psq.borrow().as_ref().and_then(std::rc::Weak::upgrade);
        let finished = match &psq {
            Some(p) => p.advance(core).await?,
            None => Vec::new(),
        };
        if (ring || !finished.is_empty()) && self.unrung.get() > 0 {
            self.ring_cq_doorbell(core, finished.first().map_or(0, |f| f.attr))
                .await?;
        }
        for f in finished {
            f.durable.complete(f.status);
        }
        Ok(())
    }

    async fn ring_cq_doorbell(&self, core: &Core, a: u32) -> Result<(), DriverError> {
        self.unrung.set(0);
        let head = self.cq_head.get();
        core.mmio_write(
            self.bar0 + regs::cq_head_doorbell(self.qid, 0),
            &head.to_le_bytes(),
            traffic::DOORBELL,
            a,
        )
        .await?;
        Ok(())
    }
}
