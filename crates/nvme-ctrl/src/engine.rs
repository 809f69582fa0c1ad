//! The command engine: arbitration and fetch, dispatch, completion posting
//! and interrupts.
//!
//! One arbiter task picks submission queues round-robin (with the
//! arbitration burst of the Arbitration feature, NVMe 1.4 4.13.1) and
//! starts a command task per entry, up to the controller's internal
//! contexts. A command task fetches its entry (by DMA from host memory, or
//! locally from the PMR), executes it, and posts its completion; commands
//! therefore complete out of order, as NVMe allows. Each entry is fetched
//! with its own DMA read, which is what ccNVMe Table 1 counts.

use std::rc::Rc;

use nvme_spec::traffic;
use pcie_sim::BusAddr;

use crate::controller::Controller;
use crate::events;
use crate::queues::{SqLocation, Submission};
use nvme_spec::command::{IoOpcode, SubmissionEntry};
use nvme_spec::completion::{CompletionEntry, Status};
use nvme_spec::features::{Arbitration, InterruptCoalescing, InterruptVectorConfig};
use nvme_spec::{CQE_BYTES, SQE_BYTES};

/// What executing a command produced.
pub(crate) enum Outcome {
    /// Post a completion with this status and dword 0.
    Done(Status, u32),
    /// No completion now (a parked Asynchronous Event Request).
    Parked,
}

/// An entry the arbiter took for fetching.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Picked {
    qid: u16,
    slot: u32,
    loc: SqLocation,
    /// When the entry was submitted (its doorbell took effect).
    pub(crate) submitted: Submission,
}

/// Attribution tag for the bus trace: queue and command identifier.
pub(crate) fn attr(sqid: u16, cid: u16) -> u32 {
    ((sqid as u32) << 16) | cid as u32
}

impl Controller {
    /// For a write-type I/O command (one that changes blocks): whether it
    /// is durable at completion (FUA, the cache disabled, or a cache that
    /// is power-loss protected). `None` for other commands.
    fn write_kind(&self, sqe: &SubmissionEntry) -> Option<bool> {
        let cache_volatile = self.profile.volatile_cache() && self.backend.cache_enabled();
        match IoOpcode::try_from(sqe.opcode()) {
            Ok(IoOpcode::Write | IoOpcode::WriteZeroes) => Some(sqe.fua() || !cache_volatile),
            Ok(IoOpcode::DatasetManagement) if sqe.dsm_deallocate() => Some(!cache_volatile),
            _ => None,
        }
    }

    /// Records a write-type command's completion for the crash model of
    /// the write cache (`power.rs`): [`events::WRITE_DONE`], or
    /// [`events::WRITE_DONE_DURABLE`] when FUA, a disabled cache or a
    /// power-loss protected one made it durable at completion.
    fn note_write_done(&self, qid: u16, sqe: &SubmissionEntry, durable: bool) {
        let code = if durable {
            events::WRITE_DONE_DURABLE
        } else {
            events::WRITE_DONE
        };
        self.port.record(code, 0, 0, &[], attr(qid, sqe.cid()));
        self.writes_done.set(self.writes_done.get() + 1);
    }

    /// Picks the next submission queue with work, round-robin with burst.
    fn arbitrate(&self) -> Option<Picked> {
        if !nvme_spec::regs::Cc(self.regs.borrow().cc).en() {
            return None;
        }
        let burst = match Arbitration::from_dw(self.features.borrow().arbitration).burst {
            7 => u32::MAX,
            b => 1u32 << b,
        };
        let mut sqs = self.sqs.borrow_mut();
        let mut ids: Vec<u16> = sqs.keys().copied().collect();
        ids.sort_unstable();
        let start = self.rr_next.get();
        let pos = ids.iter().position(|q| *q >= start).unwrap_or(0);
        for i in 0..ids.len() {
            let qid = ids[(pos + i) % ids.len()];
            let Some(sq) = sqs.get_mut(&qid) else { continue };
            if sq.pending() == 0 {
                continue;
            }
            let (slot, submitted) = sq.take();
            sq.inflight.set(sq.inflight.get() + 1);
            let loc = match sq.location {
                SqLocation::Host(_) => SqLocation::Host(sq.entry_addr(slot)),
                SqLocation::Pmr(_) => SqLocation::Pmr(sq.entry_addr(slot)),
            };
            // Stay on this queue for the rest of its burst.
            let served = self.rr_served.get() + 1;
            if served >= burst || sq.pending() == 0 {
                self.rr_served.set(0);
                self.rr_next.set(qid.wrapping_add(1));
            } else {
                self.rr_served.set(served);
                self.rr_next.set(qid);
            }
            return Some(Picked {
                qid,
                slot,
                loc,
                submitted,
            });
        }
        None
    }

    /// The arbiter: runs for the life of the controller.
    pub(crate) async fn fetch_loop(self: Rc<Self>) {
        loop {
            // The permit belongs to the command task spawned below, which
            // returns it with `add_permits` when the command is done.
            match self.slots.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => unreachable!("the command slot semaphore is never closed"),
            }
            let picked = loop {
                if let Some(p) = self.arbitrate() {
                    break p;
                }
                self.work.notified().await;
            };
            let me = self.clone();
            let generation = self.generation.get();
            self.sim
                .spawn(async move { me.run_command(picked, generation).await });
        }
    }

    async fn run_command(self: Rc<Self>, picked: Picked, generation: u64) {
        let Picked { qid, slot, loc, .. } = picked;
        let mut raw = [0u8; SQE_BYTES as usize];
        let fetched = match loc {
            SqLocation::Host(addr) => self
                .port
                .dma_read(BusAddr(addr), &mut raw, traffic::QUEUE_ENTRY, attr(qid, 0))
                .await
                .is_ok(),
            SqLocation::Pmr(off) => {
                self.sim.sleep(self.profile.pmr_fetch_latency).await;
                self.port.pmr_read(off, &mut raw).is_ok()
            }
        };
        let sqe = SubmissionEntry::from_bytes(&raw);
        let still_current = self.generation.get() == generation;
        if still_current {
            if let Some(sq) = self.sqs.borrow_mut().get_mut(&qid) {
                let next = (slot + 1) % sq.size;
                // Fetches of one queue complete in order (FIFO link), so the
                // fetched head simply follows them.
                sq.fetched_head = next;
            }
        }
        let outcome = if !still_current {
            Outcome::Parked
        } else if !fetched {
            Outcome::Done(Status::DATA_TRANSFER_ERROR, 0)
        } else if qid == 0 {
            self.admin(qid, &sqe).await
        } else {
            if self.write_kind(&sqe).is_some() {
                // Before any of its data arrives: the crash model of the
                // media (`power.rs`) offers its blocks from its submission.
                self.port.record(
                    events::SUBMITTED,
                    picked.submitted.trace_at,
                    0,
                    &[],
                    attr(qid, sqe.cid()),
                );
            }
            self.io(qid, &sqe, picked.submitted.writes_done).await
        };
        if let Outcome::Done(status, dw0) = outcome {
            if !status.is_success() {
                self.log_error(qid, sqe.cid(), status, &sqe);
            }
            // A write durable at completion is so before the completion is
            // posted (FUA: NVMe 1.4 6.15); a plain write counts as completed
            // for a later Flush once its completion is posted (6.8).
            let write = (qid != 0 && status.is_success())
                .then(|| self.write_kind(&sqe))
                .flatten();
            if write == Some(true) {
                self.note_write_done(qid, &sqe, true);
            }
            self.post_completion(qid, sqe.cid(), status, dw0, generation)
                .await;
            if write == Some(false) {
                self.note_write_done(qid, &sqe, false);
            }
        }
        // A reset since the fetch replaced the queues (and their counts);
        // otherwise the SQ is still there, since deleting it waits for its
        // commands (`delete_sq`), and this command is one of them.
        if self.generation.get() == generation {
            let sqs = self.sqs.borrow();
            let Some(sq) = sqs.get(&qid) else {
                unreachable!("SQ {qid} deleted while its command was in flight");
            };
            match sq.inflight.get().checked_sub(1) {
                Some(n) => sq.inflight.set(n),
                None => unreachable!("SQ {qid} has no command in flight, yet one finished"),
            }
        }
        self.sq_drained.notify_waiters();
        self.slots.add_permits(1);
    }

    /// Writes a completion entry for command `cid` of `sqid` to its CQ and
    /// signals it. Waits while the CQ is full.
    pub(crate) async fn post_completion(
        &self,
        sqid: u16,
        cid: u16,
        status: Status,
        dw0: u32,
        generation: u64,
    ) {
        let (cqid, space) = loop {
            if self.generation.get() != generation {
                return;
            }
            let Some(cqid) = self.sqs.borrow().get(&sqid).map(|s| s.cq) else {
                return;
            };
            let Some(space) = self.cq_space.borrow().get(&cqid).cloned() else {
                return;
            };
            let full = self.cqs.borrow().get(&cqid).is_none_or(|c| c.is_full());
            if !full {
                break (cqid, space);
            }
            space.notify.notified().await;
        };
        let _ = space;
        let sq_head = self.sqs.borrow().get(&sqid).map_or(0, |s| s.fetched_head) as u16;
        let (addr, phase) = {
            let mut cqs = self.cqs.borrow_mut();
            let Some(cq) = cqs.get_mut(&cqid) else { return };
            let slot = cq.tail;
            let phase = cq.phase;
            cq.tail = (cq.tail + 1) % cq.size;
            if cq.tail == 0 {
                cq.phase = !cq.phase;
            }
            (cq.base + slot as u64 * CQE_BYTES, phase)
        };
        let entry = CompletionEntry {
            dw0,
            dw1: 0,
            sq_head,
            sq_id: sqid,
            cid,
            phase,
            status,
        };
        let a = attr(sqid, cid);
        if self
            .port
            .dma_write(BusAddr(addr), &entry.to_bytes(), traffic::QUEUE_ENTRY, a)
            .is_err()
        {
            return;
        }
        self.signal(cqid, a);
    }

    /// Raises the CQ's interrupt, honouring Interrupt Coalescing (NVMe 1.4
    /// 5.21.1.8) on I/O queues whose vector does not disable it.
    fn signal(&self, cqid: u16, a: u32) {
        let (vector, enabled) = match self.cqs.borrow().get(&cqid) {
            Some(cq) => (cq.vector, cq.interrupts),
            None => return,
        };
        if !enabled {
            return;
        }
        let f = self.features.borrow();
        let coalesce = InterruptCoalescing::from_dw(f.coalescing);
        let disabled = f
            .vector_config
            .get(&vector)
            .is_some_and(|v| InterruptVectorConfig::from_dw(*v).coalescing_disable);
        drop(f);
        let threshold = coalesce.threshold as u32 + 1;
        if cqid == 0 || disabled || threshold == 1 || coalesce.time_100us == 0 {
            self.port.msix(vector, a);
            return;
        }
        let mut cqs = self.cqs.borrow_mut();
        let Some(cq) = cqs.get_mut(&cqid) else { return };
        cq.unsignalled += 1;
        if cq.unsignalled >= threshold {
            cq.unsignalled = 0;
            cq.unsignalled_since = None;
            drop(cqs);
            self.port.msix(vector, a);
            return;
        }
        if cq.unsignalled_since.is_none() {
            let armed = self.sim.now();
            cq.unsignalled_since = Some(armed);
            drop(cqs);
            let Some(me) = self.me() else { return };
            let wait = pcie_sim::SimDuration::from_us(100) * coalesce.time_100us as u64;
            let generation = self.generation.get();
            self.sim.spawn(async move {
                me.sim.sleep(wait).await;
                if me.generation.get() != generation {
                    return;
                }
                let fire = {
                    let mut cqs = me.cqs.borrow_mut();
                    // Only the timer of the current aggregation fires.
                    match cqs.get_mut(&cqid) {
                        Some(cq) if cq.unsignalled > 0 && cq.unsignalled_since == Some(armed) => {
                            cq.unsignalled = 0;
                            cq.unsignalled_since = None;
                            true
                        }
                        _ => false,
                    }
                };
                if fire {
                    me.port.msix(vector, a);
                }
            });
        }
    }
}
