//! A persistent submission queue (P-SQ) in the PMR, with its persistent
//! tail doorbell (P-SQDB) and head (P-SQ-head): the heart of ccNVMe
//! (sections 4.2-4.4 of the paper).
//!
//! - **Transaction-aware MMIO** (4.3): the commands of a transaction are
//!   stored into the P-SQ with write-combining stores as they arrive; only
//!   the commit flushes them (clflush + mfence, then a zero-length read that
//!   cannot pass the writes), then stores the new tail into P-SQDB and
//!   flushes it the same way. P-SQDB is the queue's doorbell (the
//!   controller watches that PMR word), so two persistent MMIOs make the
//!   transaction atomic, whatever its size. The flush read after the
//!   entries and after P-SQDB follow the paper (`docs/decisions.md` D14).
//! - **One open transaction per queue** (D10): a lock is held from the
//!   first request to the commit, so entries of two transactions never
//!   interleave below one doorbell.
//! - **In-order completion** (4.4, D5, D6): a transaction finishes only
//!   when all its commands and all earlier transactions of this queue have
//!   completed; the driver then persists P-SQ-head past it and rings the
//!   CQ doorbell once. With a volatile write cache, a Flush on the core's
//!   normal queue precedes the P-SQ-head update, and the commit command
//!   carries FUA (4.2, D8).
//! - **Slot reuse** (D7): a slot is reused only after P-SQ-head passed it,
//!   so recovery never sees an overwritten entry in [head, tail).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use nvme_spec::command::{SubmissionEntry, TxFlags};
use nvme_spec::completion::Status;
use nvme_spec::traffic;
use pcie_sim::{BusAddr, Core, Machine, PersistSkips, Purpose, SimDuration, SimTime};
use tokio::sync::{Notify, Semaphore};

use crate::bio::{Bio, BioFlags, BioOp, Done, TxId};
use crate::command::{build_command, PrpPool};
use crate::error::DriverError;
use crate::layout::PmrLayout;
use crate::profile::{DriverFaults, DriverProfile};
use crate::queue::{attr, QueuePair};

/// A committed transaction's handle.
#[derive(Clone, Debug)]
pub struct TxHandle {
    /// The transaction.
    pub txid: TxId,
    /// When it became atomic (P-SQDB persistent).
    pub atomic_at: SimTime,
    /// Completes when it is durable (all commands complete, P-SQ-head
    /// persisted past it, CQ doorbell rung).
    pub durable: Done,
}

/// A transaction that has finished (for the interrupt handler).
#[derive(Debug)]
pub(crate) struct Finished {
    pub durable: Done,
    pub status: Status,
    pub attr: u32,
}

#[derive(Debug)]
struct TxState {
    txid: TxId,
    start: u32,
    end: u32,
    outstanding: u32,
    status: Status,
    durable: Done,
    attr: u32,
    flush: FlushState,
}

#[derive(Debug, Clone)]
enum FlushState {
    NotNeeded,
    Needed,
    Running(Done),
}

/// A persistent submission queue and its transaction engine.
pub struct PersistentSq {
    /// Controller queue id.
    pub qid: u16,
    /// Index in the PMR layout.
    pub index: u32,
    core: Core,
    machine: Machine,
    pmr: BusAddr,
    layout: PmrLayout,
    volatile_cache: bool,
    normal: Rc<QueuePair>,
    tail: Cell<u32>,
    head: Cell<u32>,
    open: Semaphore,
    txs: RefCell<VecDeque<TxState>>,
    space: Notify,
    prps: PrpPool,
    lba_shift: u32,
    faults: DriverFaults,
    /// The block layer's cost per request ([`DriverProfile::block_layer`]).
    block_layer: SimDuration,
}

impl std::fmt::Debug for PersistentSq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentSq")
            .field("qid", &self.qid)
            .field("head", &self.head.get())
            .field("tail", &self.tail.get())
            .finish()
    }
}

impl PersistentSq {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        machine: &Machine,
        normal: Rc<QueuePair>,
        qid: u16,
        index: u32,
        pmr: BusAddr,
        layout: PmrLayout,
        volatile_cache: bool,
        lba_shift: u32,
        profile: &DriverProfile,
    ) -> Result<Rc<PersistentSq>, DriverError> {
        Ok(Rc::new(PersistentSq {
            qid,
            index,
            core: normal.core.clone(),
            machine: machine.clone(),
            pmr,
            layout,
            volatile_cache,
            prps: PrpPool::new(machine, layout.slots)?,
            normal,
            tail: Cell::new(0),
            head: Cell::new(0),
            open: Semaphore::new(1),
            txs: RefCell::new(VecDeque::new()),
            space: Notify::new(),
            lba_shift,
            faults: profile.faults,
            block_layer: profile.block_layer,
        }))
    }

    /// Slots in the ring.
    pub fn slots(&self) -> u32 {
        self.layout.slots
    }

    fn free_slots(&self) -> u32 {
        let used = (self.tail.get() + self.layout.slots - self.head.get()) % self.layout.slots;
        self.layout.slots - 1 - used
    }

    /// Starts a transaction on this queue: waits until no other
    /// transaction is open here.
    pub async fn begin(self: &Rc<Self>, txid: TxId) -> OpenTx {
        // The permit belongs to the `OpenTx`, which returns it with
        // `add_permits` when it commits or is dropped.
        match self.open.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => unreachable!("a PSQ's open-transaction semaphore is never closed"),
        }
        OpenTx {
            psq: self.clone(),
            txid,
            start: self.tail.get(),
            count: 0,
            committed: false,
        }
    }

    /// Stores one command of a transaction into the next slot with WC
    /// stores (not flushed). Waits for a free slot. The request came
    /// through the block layer like any bio (`docs/decisions.md` D18): its
    /// cost is charged first.
    async fn store(&self, tx: &OpenTx, bio: &Bio, flags: TxFlags) -> Result<(), DriverError> {
        self.core.busy(self.block_layer).await;
        if tx.count + 1 > self.layout.slots - 1 {
            return Err(DriverError::Invalid(format!(
                "a transaction holds at most {} commands (`docs/decisions.md` D13)",
                self.layout.slots - 1
            )));
        }
        while self.free_slots() == 0 {
            self.space.notified().await;
        }
        let slot = self.tail.get();
        let mut sqe = build_command(bio, self.lba_shift, &self.prps, slot, &self.core).await?;
        sqe.set_cid(slot as u16);
        sqe.set_txid(tx.txid.0);
        sqe.set_tx_flags(flags);
        if flags.contains(TxFlags::COMMIT)
            && self.volatile_cache
            && bio.op == BioOp::Write
            && !self.faults.no_commit_fua
        {
            sqe.set_fua(true);
        }
        let addr = self.pmr + self.layout.slot(self.index, slot);
        self.core
            .wc_store(
                addr,
                &sqe.to_bytes(),
                traffic::QUEUE_ENTRY,
                attr(self.qid, slot as u16),
            )
            .await?;
        self.tail.set((slot + 1) % self.layout.slots);
        Ok(())
    }

    /// Makes the slots `[from, from + count)` persistent (ccNVMe Figure 4(a)
    /// steps 2-3): [`Core::persist_wc`] over their lines, the flush read
    /// at the PMR's start.
    async fn flush_slots(&self, from: u32, count: u32, a: u32) -> Result<(), DriverError> {
        let slots: Vec<(BusAddr, u64)> = (0..count)
            .map(|i| {
                let slot = (from + i) % self.layout.slots;
                (
                    self.pmr + self.layout.slot(self.index, slot),
                    crate::layout::ENTRY,
                )
            })
            .collect();
        let skips = PersistSkips {
            fence: self.faults.no_fence || self.faults.no_entry_fence,
            ..self.faults.persist_skips()
        };
        self.core.persist_wc(&slots, self.pmr, a, skips).await?;
        Ok(())
    }

    /// A persistent 4-byte write of a queue pointer
    /// ([`Core::persistent_write`]).
    async fn persist_word(
        &self,
        core: &Core,
        offset: u64,
        value: u32,
        purpose: Purpose,
        a: u32,
    ) -> Result<(), DriverError> {
        core.persistent_write(
            self.pmr + offset,
            &value.to_le_bytes(),
            purpose,
            a,
            self.faults.persist_skips(),
        )
        .await?;
        Ok(())
    }

    /// Commits: flushes the entries, then persists P-SQDB (the doorbell).
    async fn commit(
        &self,
        tx: &OpenTx,
        before_ring: impl std::future::Future<Output = ()>,
    ) -> Result<TxHandle, DriverError> {
        let a = attr(self.qid, tx.start as u16);
        self.flush_slots(tx.start, tx.count, a).await?;
        before_ring.await;
        let end = self.tail.get();
        let durable = Done::new();
        self.txs.borrow_mut().push_back(TxState {
            txid: tx.txid,
            start: tx.start,
            end,
            outstanding: tx.count,
            status: Status::SUCCESS,
            durable: durable.clone(),
            attr: a,
            flush: if self.volatile_cache {
                FlushState::Needed
            } else {
                FlushState::NotNeeded
            },
        });
        self.persist_word(
            &self.core,
            self.layout.doorbell(self.index),
            end,
            traffic::DOORBELL,
            a,
        )
        .await?;
        Ok(TxHandle {
            txid: tx.txid,
            atomic_at: self.machine.sim().now(),
            durable,
        })
    }

    /// A completion entry for slot `cid` of this queue arrived.
    pub(crate) fn on_completion(&self, cid: u16, status: Status) {
        let slot = cid as u32;
        let slots = self.layout.slots;
        let mut txs = self.txs.borrow_mut();
        for t in txs.iter_mut() {
            let len = (t.end + slots - t.start) % slots;
            let off = (slot + slots - t.start) % slots;
            if off < len {
                t.outstanding = t.outstanding.saturating_sub(1);
                if !status.is_success() && t.status.is_success() {
                    t.status = status;
                }
                return;
            }
        }
    }

    /// Finishes the maximal prefix of transactions whose commands have all
    /// completed (and, with a volatile cache, whose Flush completed):
    /// persists P-SQ-head past them and returns them; the caller rings the
    /// CQ doorbell and then wakes their waiters.
    /// `core` is the handler's (its work is interrupt time).
    pub(crate) async fn advance(&self, core: &Core) -> Result<Vec<Finished>, DriverError> {
        let mut finished = Vec::new();
        let mut new_head = None;
        loop {
            let mut txs = self.txs.borrow_mut();
            if self.faults.out_of_order_completion && txs.iter().skip(1).any(|t| t.outstanding == 0) {
                // Fault injection: a later transaction completed, so treat
                // the ones ahead of it as finished too.
                if let Some(t) = txs.front_mut() {
                    t.outstanding = 0;
                }
            }
            let Some(t) = txs.front_mut() else { break };
            if t.outstanding > 0 {
                break;
            }
            match &t.flush {
                FlushState::Needed => {
                    let done = Done::new();
                    t.flush = FlushState::Running(done.clone());
                    let normal = self.normal.clone();
                    self.machine.sim().spawn(async move {
                        let sqe = SubmissionEntry::flush(0, 1);
                        if normal.submit(sqe, done.clone()).await.is_err() {
                            done.complete(Status::INTERNAL_ERROR);
                        }
                    });
                    break;
                }
                FlushState::Running(d) if !d.is_done() => break,
                FlushState::Running(d) => {
                    let s = d.status().unwrap_or(Status::SUCCESS);
                    if !s.is_success() && t.status.is_success() {
                        t.status = s;
                    }
                }
                FlushState::NotNeeded => {}
            }
            let Some(t) = txs.pop_front() else { break };
            new_head = Some(t.end);
            finished.push(Finished {
                durable: t.durable,
                status: t.status,
                attr: t.attr,
            });
        }
        if let Some(h) = new_head {
            let a = finished.first().map_or(0, |f| f.attr);
            self.persist_word(core, self.layout.head(self.index), h, traffic::QUEUE_POINTER, a)
                .await?;
            self.head.set(h);
            self.space.notify_waiters();
        }
        Ok(finished)
    }

    /// Transactions committed and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.txs.borrow().len()
    }

    /// The transaction ids committed and not yet finished, oldest first.
    pub fn pending_txids(&self) -> Vec<TxId> {
        self.txs.borrow().iter().map(|t| t.txid).collect()
    }
}

/// A transaction being built on one P-SQ. Dropping it without committing
/// abandons the entries stored so far (they lie past P-SQDB, so recovery
/// never parses them; `docs/decisions.md` D12).
pub struct OpenTx {
    psq: Rc<PersistentSq>,
    txid: TxId,
    start: u32,
    count: u32,
    committed: bool,
}

impl std::fmt::Debug for OpenTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenTx")
            .field("txid", &self.txid)
            .field("count", &self.count)
            .finish()
    }
}

impl OpenTx {
    /// The transaction id.
    pub fn txid(&self) -> TxId {
        self.txid
    }

    /// Commands stored so far.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True if nothing is stored yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds a request tagged REQ_TX: stored in the P-SQ, not yet visible to
    /// the device.
    pub async fn add(&mut self, bio: &Bio) -> Result<(), DriverError> {
        let mut flags = TxFlags::TX;
        if self.count == 0 {
            flags = flags | TxFlags::BEGIN;
        }
        self.psq.store(self, bio, flags).await?;
        self.count += 1;
        Ok(())
    }

    /// Adds the commit request (REQ_TX_COMMIT), then makes the transaction
    /// atomic: flush the entries, persist P-SQDB. Returns once P-SQDB is
    /// persistent.
    pub async fn commit(self, bio: &Bio) -> Result<TxHandle, DriverError> {
        self.commit_after(bio, std::future::ready(())).await
    }

    /// Like [`OpenTx::commit`], but waits for `before_ring` after the
    /// entries are persistent and before P-SQDB is written: an upper layer
    /// that orders doorbells across queues (MQFS's global-prefix rule,
    /// `docs/decisions.md` M9) waits for its turn there.
    pub async fn commit_after(
        mut self,
        bio: &Bio,
        before_ring: impl std::future::Future<Output = ()>,
    ) -> Result<TxHandle, DriverError> {
        let mut flags = TxFlags::TX | TxFlags::COMMIT;
        if self.count == 0 {
            flags = flags | TxFlags::BEGIN;
        }
        self.psq.store(&self, bio, flags).await?;
        self.count += 1;
        let h = self.psq.commit(&self, before_ring).await;
        self.committed = true;
        self.psq.open.add_permits(1);
        h
    }
}

impl Drop for OpenTx {
    fn drop(&mut self) {
        if !self.committed {
            self.psq.tail.set(self.start);
            self.psq.open.add_permits(1);
        }
    }
}

/// Checks the flags of a bio for a transaction.
pub fn check_tx_bio(bio: &Bio) -> Result<(), DriverError> {
    if bio.op != BioOp::Write && bio.op != BioOp::Flush {
        return Err(DriverError::Invalid("a transaction holds writes".into()));
    }
    if bio.flags.contains(BioFlags::PREFLUSH) {
        return Err(DriverError::Invalid("no preflush inside a transaction".into()));
    }
    Ok(())
}
