//! Admin commands (NVMe 1.4 section 5).

use std::cell::Cell;
use std::rc::Rc;

use nvme_spec::traffic;

use crate::controller::{Controller, AERL};
use crate::engine::{attr, Outcome};
use crate::queues::{CompletionQueue, CqSpace, SqLocation, SubmissionQueue};
use nvme_spec::command::{AdminOpcode, SubmissionEntry, VENDOR_CAP_OFFSET, VENDOR_CAP_PMR_QUEUES};
use nvme_spec::completion::Status;
use nvme_spec::features::{FeatureId, InterruptVectorConfig, NumberOfQueues, VolatileWriteCache};
use nvme_spec::identify::{self, IdentifyController, IdentifyNamespace, LbaFormat};
use nvme_spec::log::{self, SmartLog};
use nvme_spec::regs::Cap;
use nvme_spec::{CQE_BYTES, SQE_BYTES};

fn done(s: Status) -> Outcome {
    Outcome::Done(s, 0)
}

impl Controller {
    pub(crate) async fn admin(self: &Rc<Self>, sqid: u16, sqe: &SubmissionEntry) -> Outcome {
        if sqe.fuse() != 0 || sqe.psdt() != 0 {
            return done(Status::INVALID_FIELD);
        }
        let Ok(op) = AdminOpcode::try_from(sqe.opcode()) else {
            return done(Status::INVALID_OPCODE);
        };
        if op != AdminOpcode::AsyncEventRequest {
            self.sim.sleep(self.profile.admin_latency).await;
        }
        let a = attr(sqid, sqe.cid());
        match op {
            AdminOpcode::Identify => self.identify(sqe, a).await,
            AdminOpcode::CreateIoCq => done(self.create_cq(sqe)),
            AdminOpcode::CreateIoSq => done(self.create_sq(sqe)),
            AdminOpcode::DeleteIoSq => done(self.delete_sq(sqe).await),
            AdminOpcode::DeleteIoCq => done(self.delete_cq(sqe)),
            AdminOpcode::GetFeatures => self.get_features(sqe),
            AdminOpcode::SetFeatures => self.set_features(sqe),
            AdminOpcode::GetLogPage => self.get_log_page(sqe, a).await,
            AdminOpcode::AsyncEventRequest => {
                if self.aer_waiting.borrow().len() > AERL as usize {
                    return done(Status::AER_LIMIT);
                }
                self.aer_waiting.borrow_mut().push_back((sqid, sqe.cid()));
                self.deliver_events();
                Outcome::Parked
            }
            // Abort is best effort; dword 0 bit 0 set: not aborted.
            AdminOpcode::Abort => Outcome::Done(Status::SUCCESS, 1),
        }
    }

    fn mqes(&self) -> u32 {
        Cap(self.regs.borrow().cap).mqes() as u32 + 1
    }

    fn max_qid(&self) -> u16 {
        let granted = self.features.borrow().queues_granted;
        match granted {
            Some((sq, cq)) => sq.max(cq),
            None => self.profile.max_io_queues,
        }
    }

    async fn identify(&self, sqe: &SubmissionEntry, a: u32) -> Outcome {
        let data: Box<[u8; 4096]> = match sqe.cns() {
            identify::CNS_CONTROLLER => self.identify_controller().to_bytes(),
            identify::CNS_NAMESPACE => {
                if sqe.nsid() != 1 {
                    return done(Status::INVALID_NAMESPACE);
                }
                self.identify_namespace().to_bytes()
            }
            identify::CNS_ACTIVE_NAMESPACES => {
                let list: &[u32] = if sqe.nsid() < 1 { &[1] } else { &[] };
                identify::active_namespaces_bytes(list)
            }
            _ => return done(Status::INVALID_FIELD),
        };
        let segs = match self.prp_segments(sqe.prp1(), sqe.prp2(), 4096, a).await {
            Ok(s) => s,
            Err(s) => return done(s),
        };
        match self.dma_to_host(&segs, &data[..], traffic::ADMIN, a) {
            Ok(()) => done(Status::SUCCESS),
            Err(s) => done(s),
        }
    }

    /// Identify Controller data for this drive.
    pub fn identify_controller(&self) -> IdentifyController {
        let mut id = IdentifyController {
            vid: 0x1234,
            ssvid: 0x1234,
            sn: identify::ascii_field::<20>("SIM0000000001"),
            mn: identify::ascii_field::<40>(self.profile.model),
            fr: identify::ascii_field::<8>("1.0"),
            mdts: self.profile.mdts,
            cntlid: 1,
            ver: nvme_spec::regs::VS_1_4,
            acl: 3,
            aerl: AERL,
            elpe: 63,
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: self.profile.max_inflight.min(u16::MAX as u32) as u16,
            nn: 1,
            oncs: IdentifyController::ONCS_DSM | IdentifyController::ONCS_WRITE_ZEROES,
            vwc: self.profile.volatile_cache() as u8,
            ..Default::default()
        };
        id.vendor[VENDOR_CAP_OFFSET - 3072] = VENDOR_CAP_PMR_QUEUES;
        id
    }

    /// Identify Namespace data for namespace 1.
    pub fn identify_namespace(&self) -> IdentifyNamespace {
        let lbas = self.namespace_lbas();
        IdentifyNamespace {
            nsze: lbas,
            ncap: lbas,
            nuse: lbas,
            nsfeat: 0,
            nlbaf: 0,
            flbas: 0,
            // Deallocated blocks read as zeros (DLFEAT 001b).
            dlfeat: 1,
            lbaf: vec![LbaFormat {
                ms: 0,
                lbads: self.lba_size.trailing_zeros() as u8,
                rp: 0,
            }],
            ..Default::default()
        }
    }

    fn create_cq(&self, sqe: &SubmissionEntry) -> Status {
        let qid = sqe.queue_id();
        let size = sqe.queue_size();
        if qid == 0 || qid > self.max_qid() || self.cqs.borrow().contains_key(&qid) {
            return Status::INVALID_QUEUE_ID;
        }
        if size < 2 || size > self.mqes() {
            return Status::INVALID_QUEUE_SIZE;
        }
        if !sqe.physically_contiguous() {
            return Status::INVALID_FIELD;
        }
        if sqe.prp1() % 4096 != 0 {
            return Status::INVALID_PRP_OFFSET;
        }
        // A ring that runs past the top of the 64-bit address space cannot
        // be physically contiguous; without this check the entry address
        // computed when posting overflowed (a panic in debug builds).
        if sqe.prp1().checked_add(size as u64 * CQE_BYTES).is_none() {
            return Status::INVALID_FIELD;
        }
        let vector = sqe.interrupt_vector();
        if vector > self.profile.max_io_queues {
            return Status::INVALID_INTERRUPT_VECTOR;
        }
        self.cqs.borrow_mut().insert(
            qid,
            CompletionQueue {
                id: qid,
                base: sqe.prp1(),
                size,
                head: 0,
                tail: 0,
                phase: true,
                vector,
                interrupts: sqe.interrupts_enabled(),
                sqs: 0,
                unsignalled: 0,
                unsignalled_since: None,
            },
        );
        self.cq_space
            .borrow_mut()
            .insert(qid, Rc::new(CqSpace::default()));
        Status::SUCCESS
    }

    fn create_sq(&self, sqe: &SubmissionEntry) -> Status {
        let qid = sqe.queue_id();
        let size = sqe.queue_size();
        let cqid = sqe.cq_id();
        if qid == 0 || qid > self.max_qid() || self.sqs.borrow().contains_key(&qid) {
            return Status::INVALID_QUEUE_ID;
        }
        if cqid == 0 || !self.cqs.borrow().contains_key(&cqid) {
            return Status::CQ_INVALID;
        }
        if size < 2 || size > self.mqes() {
            return Status::INVALID_QUEUE_SIZE;
        }
        if !sqe.physically_contiguous() {
            return Status::INVALID_FIELD;
        }
        let bytes = size as u64 * SQE_BYTES;
        let location = if sqe.sq_in_pmr() {
            let off = sqe.prp1();
            let pmr = self.profile.pmr_bytes;
            if off % SQE_BYTES != 0 || off.checked_add(bytes).is_none_or(|e| e > pmr) {
                return Status::INVALID_FIELD;
            }
            SqLocation::Pmr(off)
        } else {
            if sqe.prp1() % 4096 != 0 {
                return Status::INVALID_PRP_OFFSET;
            }
            // As for a CQ: the ring must not run past the top of the 64-bit
            // address space (the fetch address computation overflowed).
            if sqe.prp1().checked_add(bytes).is_none() {
                return Status::INVALID_FIELD;
            }
            SqLocation::Host(sqe.prp1())
        };
        let pmr_doorbell = sqe.pmr_doorbell();
        if let Some(db) = pmr_doorbell {
            let db = db as u64;
            let overlaps = match location {
                SqLocation::Pmr(off) => db + 4 > off && db < off + bytes,
                SqLocation::Host(_) => false,
            };
            if db % 4 != 0 || db + 4 > self.profile.pmr_bytes || overlaps {
                return Status::INVALID_FIELD;
            }
        }
        if let Some(cq) = self.cqs.borrow_mut().get_mut(&cqid) {
            cq.sqs += 1;
        }
        self.sqs.borrow_mut().insert(
            qid,
            SubmissionQueue {
                id: qid,
                location,
                size,
                cq: cqid,
                head: 0,
                fetched_head: 0,
                tail: 0,
                pmr_doorbell,
                inflight: Cell::new(0),
                doorbells: Default::default(),
            },
        );
        Status::SUCCESS
    }

    /// Deletes an I/O SQ after its outstanding commands have completed
    /// (NVMe 1.4 5.6).
    async fn delete_sq(&self, sqe: &SubmissionEntry) -> Status {
        let qid = sqe.queue_id();
        if qid == 0 || !self.sqs.borrow().contains_key(&qid) {
            return Status::INVALID_QUEUE_ID;
        }
        loop {
            let busy = self.sqs.borrow().get(&qid).is_some_and(|s| s.inflight.get() > 0);
            if !busy {
                break;
            }
            self.sq_drained.notified().await;
        }
        if let Some(sq) = self.sqs.borrow_mut().remove(&qid) {
            // A CQ cannot be deleted while SQs use it (`delete_cq`), and it
            // counts this SQ among them.
            let mut cqs = self.cqs.borrow_mut();
            let Some(cq) = cqs.get_mut(&sq.cq) else {
                unreachable!("CQ {} deleted while SQ {qid} used it", sq.cq);
            };
            match cq.sqs.checked_sub(1) {
                Some(n) => cq.sqs = n,
                None => unreachable!("CQ {} does not count SQ {qid}", sq.cq),
            }
        }
        Status::SUCCESS
    }

    fn delete_cq(&self, sqe: &SubmissionEntry) -> Status {
        let qid = sqe.queue_id();
        let sqs = match self.cqs.borrow().get(&qid) {
            Some(cq) if qid != 0 => cq.sqs,
            _ => return Status::INVALID_QUEUE_ID,
        };
        if sqs > 0 {
            return Status::INVALID_QUEUE_DELETION;
        }
        self.cqs.borrow_mut().remove(&qid);
        if let Some(s) = self.cq_space.borrow_mut().remove(&qid) {
            s.notify.notify_waiters();
        }
        Status::SUCCESS
    }

    fn get_features(&self, sqe: &SubmissionEntry) -> Outcome {
        let Ok(fid) = FeatureId::try_from(sqe.feature_id()) else {
            return done(Status::INVALID_FIELD);
        };
        let f = self.features.borrow();
        let v = match fid {
            FeatureId::Arbitration => f.arbitration,
            FeatureId::VolatileWriteCache => VolatileWriteCache {
                enabled: self.profile.volatile_cache() && self.backend.cache_enabled(),
            }
            .to_dw(),
            FeatureId::NumberOfQueues => {
                let (sq, cq) = f
                    .queues_granted
                    .unwrap_or((self.profile.max_io_queues, self.profile.max_io_queues));
                NumberOfQueues { sq, cq }.to_dw()
            }
            FeatureId::InterruptCoalescing => f.coalescing,
            FeatureId::InterruptVectorConfig => {
                let vector = InterruptVectorConfig::from_dw(sqe.cdw(11)).vector;
                *f.vector_config.get(&vector).unwrap_or(
                    &InterruptVectorConfig {
                        vector,
                        coalescing_disable: false,
                    }
                    .to_dw(),
                )
            }
            FeatureId::AsyncEventConfig => f.async_config,
            _ => return done(Status::INVALID_FIELD),
        };
        Outcome::Done(Status::SUCCESS, v)
    }

    fn set_features(&self, sqe: &SubmissionEntry) -> Outcome {
        let Ok(fid) = FeatureId::try_from(sqe.feature_id()) else {
            return done(Status::INVALID_FIELD);
        };
        let v = sqe.cdw(11);
        let mut f = self.features.borrow_mut();
        match fid {
            FeatureId::Arbitration => f.arbitration = v,
            FeatureId::VolatileWriteCache => {
                if !self.profile.volatile_cache() {
                    return done(Status::INVALID_FIELD);
                }
                self.backend
                    .set_cache_enabled(VolatileWriteCache::from_dw(v).enabled);
            }
            FeatureId::NumberOfQueues => {
                if v & 0xffff == 0xffff || v >> 16 == 0xffff {
                    return done(Status::INVALID_FIELD);
                }
                if self.sqs.borrow().len() > 1 || self.cqs.borrow().len() > 1 {
                    return done(Status::COMMAND_SEQUENCE_ERROR);
                }
                let Some(req) = NumberOfQueues::from_dw(v) else {
                    return done(Status::INVALID_FIELD);
                };
                let max = self.profile.max_io_queues;
                let granted = (req.sq.min(max), req.cq.min(max));
                f.queues_granted = Some(granted);
                return Outcome::Done(
                    Status::SUCCESS,
                    NumberOfQueues {
                        sq: granted.0,
                        cq: granted.1,
                    }
                    .to_dw(),
                );
            }
            FeatureId::InterruptCoalescing => f.coalescing = v & 0xffff,
            FeatureId::InterruptVectorConfig => {
                let c = InterruptVectorConfig::from_dw(v);
                if c.vector > self.profile.max_io_queues {
                    return done(Status::INVALID_FIELD);
                }
                f.vector_config.insert(c.vector, v);
            }
            FeatureId::AsyncEventConfig => f.async_config = v,
            _ => return done(Status::INVALID_FIELD),
        }
        Outcome::Done(Status::SUCCESS, 0)
    }

    async fn get_log_page(&self, sqe: &SubmissionEntry, a: u32) -> Outcome {
        let len = sqe.log_dwords() * 4;
        let offset = sqe.log_offset();
        let page: Vec<u8> = match sqe.log_page_id() {
            log::ERROR_INFORMATION => self
                .error_log
                .borrow()
                .iter()
                .rev()
                .flat_map(|e| e.to_bytes())
                .collect(),
            log::SMART_HEALTH => {
                let s = self.smart.borrow();
                SmartLog {
                    composite_temperature: 310,
                    available_spare: 100,
                    available_spare_threshold: 10,
                    data_units_read: s.data_units_read,
                    data_units_written: s.data_units_written,
                    host_read_commands: s.host_reads,
                    host_write_commands: s.host_writes,
                    power_cycles: 1,
                    error_log_entries: s.errors as u128,
                    ..Default::default()
                }
                .to_bytes()
                .to_vec()
            }
            _ => return done(Status::INVALID_LOG_PAGE),
        };
        if offset % 4 != 0 || offset > page.len() as u64 {
            return done(Status::INVALID_FIELD);
        }
        let mut data = vec![0u8; len as usize];
        let avail = &page[offset as usize..];
        let n = avail.len().min(data.len());
        data[..n].copy_from_slice(&avail[..n]);
        let segs = match self.prp_segments(sqe.prp1(), sqe.prp2(), len, a).await {
            Ok(s) => s,
            Err(s) => return done(s),
        };
        match self.dma_to_host(&segs, &data, traffic::ADMIN, a) {
            Ok(()) => done(Status::SUCCESS),
            Err(s) => done(s),
        }
    }

    /// Adds an Error Information log entry (64 kept, newest last).
    pub(crate) fn log_error(&self, sqid: u16, cid: u16, status: Status, sqe: &SubmissionEntry) {
        let mut s = self.smart.borrow_mut();
        s.errors += 1;
        let count = s.errors;
        drop(s);
        let mut l = self.error_log.borrow_mut();
        if l.len() == 64 {
            l.pop_front();
        }
        l.push_back(log::ErrorLogEntry {
            error_count: count,
            sqid,
            cid,
            status: status.to_field(),
            param_location: 0,
            lba: sqe.slba(),
            nsid: sqe.nsid(),
        });
    }
}
