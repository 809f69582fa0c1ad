//! The controller: registers, enable/disable/shutdown, doorbells, and the
//! state the command engines share.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::{Rc, Weak};

use pcie_sim::{
    BarLayout, DevicePort, Endpoint, Machine, PageStore, PmrBar, RegisterAccess, Sim, Unsupported,
};
use tokio::sync::{Notify, Semaphore};

use crate::backend::Backend;
use crate::error::CtrlError;
use crate::media::{Media, BLOCK};
use crate::profile::SsdProfile;
use crate::queues::{CompletionQueue, CqSpace, SqLocation, Submission, SubmissionQueue};
use nvme_spec::aer::{AsyncEvent, AsyncEventType, INVALID_DOORBELL_WRITE_VALUE, WRITE_TO_INVALID_DOORBELL};
use nvme_spec::log::ErrorLogEntry;
use nvme_spec::regs::{self, Cap, Cc, Csts, Doorbell, ShutdownNotification, ShutdownStatus};

/// Size of BAR0 (registers and doorbells).
pub const BAR0_BYTES: u64 = 0x4000;
/// Doorbell stride (CAP.DSTRD): 4-byte doorbells, packed.
pub const DSTRD: u8 = 0;
/// BAR index of the PMR (PMRCAP.BIR).
pub const PMR_BIR: u32 = 2;
/// Asynchronous Event Request Limit (Identify AERL, 0-based).
pub const AERL: u8 = 3;

/// How to build a controller.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// Drive profile (timing, cache, PMR size...).
    pub profile: SsdProfile,
    /// Logical block size of namespace 1: 4096 (default) or 512.
    pub lba_size: u32,
}

impl ControllerConfig {
    /// A 4 KiB-LBA controller with `profile`.
    pub fn new(profile: SsdProfile) -> Self {
        ControllerConfig {
            profile,
            lba_size: 4096,
        }
    }
}

/// Register state (NVMe 1.4 3.1).
#[derive(Debug, Default, Clone)]
pub(crate) struct Registers {
    pub cap: u64,
    pub cc: u32,
    pub csts: u32,
    pub aqa: u32,
    pub asq: u64,
    pub acq: u64,
    pub intms: u32,
    pub pmrctl: u32,
    pub pmrmsc: u64,
}

/// Feature values (NVMe 1.4 5.21.1).
#[derive(Debug, Clone, Default)]
pub(crate) struct Features {
    pub arbitration: u32,
    pub coalescing: u32,
    pub vector_config: BTreeMap<u16, u32>,
    pub async_config: u32,
    /// Queues granted by Number of Queues (1-based), once set.
    pub queues_granted: Option<(u16, u16)>,
}

/// Counters behind the SMART / Health log.
#[derive(Debug, Clone, Default)]
pub(crate) struct Smart {
    pub data_units_read: u128,
    pub data_units_written: u128,
    pub host_reads: u128,
    pub host_writes: u128,
    pub errors: u64,
}

/// An NVMe controller attached to a simulated machine.
pub struct Controller {
    pub(crate) sim: Sim,
    pub(crate) port: DevicePort,
    pub(crate) profile: SsdProfile,
    pub(crate) lba_size: u32,
    pub(crate) regs: RefCell<Registers>,
    /// Submission queues by id. Ordered maps: whatever walks them (the
    /// reset, the arbiter) does so in queue-id order on every run.
    pub(crate) sqs: RefCell<BTreeMap<u16, SubmissionQueue>>,
    /// Completion queues by id.
    pub(crate) cqs: RefCell<BTreeMap<u16, CompletionQueue>>,
    /// Per CQ, the commands waiting for a free CQ slot.
    pub(crate) cq_space: RefCell<BTreeMap<u16, Rc<CqSpace>>>,
    pub(crate) backend: Rc<Backend>,
    pub(crate) features: RefCell<Features>,
    pub(crate) smart: RefCell<Smart>,
    pub(crate) error_log: RefCell<VecDeque<ErrorLogEntry>>,
    /// Parked Asynchronous Event Request commands: (sqid, cid).
    pub(crate) aer_waiting: RefCell<VecDeque<(u16, u16)>>,
    /// Events waiting for an AER command.
    pub(crate) aer_pending: RefCell<VecDeque<AsyncEvent>>,
    /// Wakes the fetch engine.
    pub(crate) work: Notify,
    /// Internal command contexts.
    pub(crate) slots: Semaphore,
    /// Bumped on every controller reset; commands of an older generation
    /// finish without posting anything.
    pub(crate) generation: Cell<u64>,
    /// Round-robin position of the arbiter.
    pub(crate) rr_next: Cell<u16>,
    /// Commands taken from the current queue in this burst.
    pub(crate) rr_served: Cell<u32>,
    /// Woken when a submission queue's in-flight count drops.
    pub(crate) sq_drained: Notify,
    /// Write-type commands completed so far ([`crate::events::WRITE_DONE`]
    /// events recorded).
    pub(crate) writes_done: Cell<u64>,
    /// A weak handle to itself, for register callbacks that spawn tasks.
    me: RefCell<Option<Weak<Controller>>>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("profile", &self.profile.name)
            .field("sqs", &self.sqs.borrow().len())
            .field("cqs", &self.cqs.borrow().len())
            .finish()
    }
}

impl Controller {
    /// Plugs a controller into `machine` over `media`. `pmr_image` is the
    /// PMR content after a power failure (`None`: zeroed).
    pub fn attach(
        machine: &Machine,
        config: ControllerConfig,
        media: Media,
        pmr_image: Option<PageStore>,
    ) -> Result<Rc<Controller>, CtrlError> {
        let p = &config.profile;
        if config.lba_size != 4096 && config.lba_size != 512 {
            return Err(CtrlError::Config(format!(
                "LBA size {} (must be 512 or 4096)",
                config.lba_size
            )));
        }
        if p.max_queue_entries < 2 || p.max_queue_entries > 65536 {
            return Err(CtrlError::Config("max_queue_entries must be 2..=65536".into()));
        }
        let layout = BarLayout {
            regs_size: BAR0_BYTES,
            register_access: RegisterAccess::Aligned32Or64,
            register_latency: p.register_latency,
            pmr: (p.pmr_bytes > 0).then(|| PmrBar {
                size: p.pmr_bytes,
                timing: p.pmr_timing.clone(),
            }),
        };
        let port = machine.add_device(layout, pmr_image);
        let sim = machine.sim();
        let backend = Backend::new(sim.clone(), port.clone(), p, media);
        let cap = Cap(0)
            .with_mqes((p.max_queue_entries - 1) as u16)
            .with_cqr(true)
            .with_to(20)
            .with_dstrd(DSTRD)
            .with_css_nvm(true)
            .with_mpsmin(0)
            .with_mpsmax(0)
            .with_pmrs(p.pmr_bytes > 0);
        let ctrl = Rc::new(Controller {
            sim,
            port: port.clone(),
            profile: p.clone(),
            lba_size: config.lba_size,
            regs: RefCell::new(Registers {
                cap: cap.0,
                ..Default::default()
            }),
            sqs: RefCell::new(BTreeMap::new()),
            cqs: RefCell::new(BTreeMap::new()),
            cq_space: RefCell::new(BTreeMap::new()),
            backend,
            features: RefCell::new(Features::default()),
            smart: RefCell::new(Smart::default()),
            error_log: RefCell::new(VecDeque::new()),
            aer_waiting: RefCell::new(VecDeque::new()),
            aer_pending: RefCell::new(VecDeque::new()),
            work: Notify::new(),
            slots: Semaphore::new(p.max_inflight.max(1) as usize),
            generation: Cell::new(0),
            rr_next: Cell::new(0),
            rr_served: Cell::new(0),
            sq_drained: Notify::new(),
            writes_done: Cell::new(0),
            me: RefCell::new(None),
        });
        *ctrl.me.borrow_mut() = Some(Rc::downgrade(&ctrl));
        machine.connect(&port, ctrl.clone());
        let engine = ctrl.clone();
        ctrl.sim.spawn(async move { engine.fetch_loop().await });
        Ok(ctrl)
    }

    /// The device port (for tests that inspect the link).
    pub fn port(&self) -> &DevicePort {
        &self.port
    }

    /// The storage back end.
    pub fn backend(&self) -> &Rc<Backend> {
        &self.backend
    }

    /// The drive profile.
    pub fn profile(&self) -> &SsdProfile {
        &self.profile
    }

    /// Logical blocks in namespace 1.
    pub fn namespace_lbas(&self) -> u64 {
        self.backend.blocks() * (BLOCK as u64 / self.lba_size as u64)
    }

    /// LBA size of namespace 1.
    pub fn lba_size(&self) -> u32 {
        self.lba_size
    }

    pub(crate) fn csts(&self) -> Csts {
        Csts(self.regs.borrow().csts)
    }

    fn set_csts(&self, f: impl FnOnce(Csts) -> Csts) {
        let mut r = self.regs.borrow_mut();
        r.csts = f(Csts(r.csts)).0;
    }

    /// True while the controller is enabled and ready.
    pub fn ready(&self) -> bool {
        self.csts().rdy()
    }

    /// Queues an asynchronous event and completes a parked AER with it.
    pub(crate) fn raise_event(self: &Rc<Self>, event: AsyncEvent) {
        self.aer_pending.borrow_mut().push_back(event);
        self.deliver_events();
    }

    pub(crate) fn deliver_events(self: &Rc<Self>) {
        loop {
            let (ev, (sqid, cid)) = {
                let mut pending = self.aer_pending.borrow_mut();
                let mut waiting = self.aer_waiting.borrow_mut();
                if pending.is_empty() || waiting.is_empty() {
                    return;
                }
                match (pending.pop_front(), waiting.pop_front()) {
                    (Some(e), Some(w)) => (e, w),
                    _ => return,
                }
            };
            let me = self.clone();
            let generation = self.generation.get();
            self.sim.spawn(async move {
                me.post_completion(
                    sqid,
                    cid,
                    nvme_spec::completion::Status::SUCCESS,
                    ev.to_dw0(),
                    generation,
                )
                .await;
            });
        }
    }

    fn on_cc_write(self: &Rc<Self>, new: u32) {
        let old = Cc(self.regs.borrow().cc);
        let new = Cc(new);
        self.regs.borrow_mut().cc = new.0;
        if !old.en() && new.en() {
            self.enable(new);
        } else if old.en() && !new.en() {
            self.reset();
        }
        if new.shn() != ShutdownNotification::None && old.shn() == ShutdownNotification::None {
            self.shutdown();
        }
    }

    /// CC.EN 0 -> 1: validate CC and the admin queue registers, create the
    /// admin queues, and set CSTS.RDY after the enable latency (NVMe 1.4
    /// 7.6.1). A bad configuration sets CSTS.CFS instead.
    fn enable(self: &Rc<Self>, cc: Cc) {
        let (aqa, asq, acq) = {
            let r = self.regs.borrow();
            (regs::Aqa(r.aqa), r.asq, r.acq)
        };
        let mqes = Cap(self.regs.borrow().cap).mqes() as u32 + 1;
        let sq_size = aqa.asqs() as u32 + 1;
        let cq_size = aqa.acqs() as u32 + 1;
        let bad = cc.iosqes() != 6
            || cc.iocqes() != 4
            || cc.mps() != 0
            || cc.css() != 0
            || sq_size < 2
            || cq_size < 2
            || sq_size > mqes.min(4096)
            || cq_size > mqes.min(4096)
            || asq % 4096 != 0
            || acq % 4096 != 0
            || asq == 0
            || acq == 0;
        if bad {
            self.set_csts(|c| c.with_cfs(true));
            return;
        }
        self.cqs.borrow_mut().insert(
            0,
            CompletionQueue {
                id: 0,
                base: acq,
                size: cq_size,
                head: 0,
                tail: 0,
                phase: true,
                vector: 0,
                interrupts: true,
                sqs: 1,
                unsignalled: 0,
                unsignalled_since: None,
            },
        );
        self.cq_space.borrow_mut().insert(0, Rc::new(CqSpace::default()));
        self.sqs.borrow_mut().insert(
            0,
            SubmissionQueue {
                id: 0,
                location: SqLocation::Host(asq),
                size: sq_size,
                cq: 0,
                head: 0,
                fetched_head: 0,
                tail: 0,
                pmr_doorbell: None,
                inflight: Cell::new(0),
                doorbells: Default::default(),
            },
        );
        let me = self.clone();
        let generation = self.generation.get();
        let latency = self.profile.enable_latency;
        self.sim.spawn(async move {
            me.sim.sleep(latency).await;
            if me.generation.get() == generation && Cc(me.regs.borrow().cc).en() {
                me.set_csts(|c| c.with_rdy(true));
            }
        });
    }

    /// CC.EN 1 -> 0: a Controller Reset (NVMe 1.4 7.3.2): every queue is
    /// deleted, outstanding commands are abandoned, features return to
    /// their defaults; CSTS.RDY clears after the latency. Media, cache and
    /// PMR content are untouched.
    fn reset(self: &Rc<Self>) {
        self.generation.set(self.generation.get() + 1);
        self.sqs.borrow_mut().clear();
        self.cqs.borrow_mut().clear();
        // The commands waiting for room in a CQ are woken in queue-id order
        // (the map is ordered), then FIFO per queue, so the reset schedules
        // them the same way on every run.
        let spaces: Vec<Rc<CqSpace>> = std::mem::take(&mut *self.cq_space.borrow_mut())
            .into_values()
            .collect();
        for s in spaces {
            s.notify.notify_waiters();
        }
        self.aer_waiting.borrow_mut().clear();
        *self.features.borrow_mut() = Features::default();
        self.backend.set_cache_enabled(true);
        let me = self.clone();
        let generation = self.generation.get();
        let latency = self.profile.enable_latency;
        self.sim.spawn(async move {
            me.sim.sleep(latency).await;
            if me.generation.get() == generation {
                me.set_csts(|c| {
                    c.with_rdy(false)
                        .with_shst(ShutdownStatus::Normal)
                        .with_cfs(false)
                });
            }
        });
    }

    /// CC.SHN set: stop taking commands, destage the cache, then report
    /// shutdown complete (NVMe 1.4 7.6.2).
    fn shutdown(self: &Rc<Self>) {
        self.set_csts(|c| c.with_shst(ShutdownStatus::Occurring));
        let me = self.clone();
        self.sim.spawn(async move {
            me.backend.flush().await;
            let _ = me.backend.sync();
            me.sim.sleep(me.profile.admin_latency).await;
            me.set_csts(|c| c.with_shst(ShutdownStatus::Complete));
        });
    }

    fn on_doorbell(self: &Rc<Self>, db: Doorbell, value: u32) {
        match db {
            Doorbell::SqTail(qid) => {
                let ok = {
                    let mut sqs = self.sqs.borrow_mut();
                    match sqs.get_mut(&qid) {
                        None => Err(WRITE_TO_INVALID_DOORBELL),
                        Some(sq) if value >= sq.size => Err(INVALID_DOORBELL_WRITE_VALUE),
                        Some(sq) => {
                            sq.ring(
                                value,
                                Submission {
                                    writes_done: self.writes_done.get(),
                                    trace_at: self.port.trace_position(),
                                },
                            );
                            Ok(())
                        }
                    }
                };
                match ok {
                    Ok(()) => self.work.notify_one(),
                    Err(info) => self.doorbell_error(info),
                }
            }
            Doorbell::CqHead(qid) => {
                let ok = {
                    let mut cqs = self.cqs.borrow_mut();
                    match cqs.get_mut(&qid) {
                        None => Err(WRITE_TO_INVALID_DOORBELL),
                        Some(cq) if !cq.head_valid(value) => Err(INVALID_DOORBELL_WRITE_VALUE),
                        Some(cq) => {
                            cq.head = value;
                            Ok(())
                        }
                    }
                };
                match ok {
                    Ok(()) => {
                        if let Some(s) = self.cq_space.borrow().get(&qid) {
                            s.notify.notify_waiters();
                        }
                    }
                    Err(info) => self.doorbell_error(info),
                }
            }
        }
    }

    /// An invalid doorbell write is ignored and reported as an Error
    /// asynchronous event (NVMe 1.4 5.2, Figure 146).
    fn doorbell_error(self: &Rc<Self>, info: u8) {
        self.raise_event(AsyncEvent {
            kind: AsyncEventType::Error,
            info,
            log_page: nvme_spec::log::ERROR_INFORMATION,
        });
    }

    /// A strong handle to this controller. The machine calls register
    /// callbacks with `&self`; those that spawn tasks need an `Rc`.
    pub(crate) fn me(&self) -> Option<Rc<Controller>> {
        self.me.borrow().as_ref().and_then(|w| w.upgrade())
    }
}

impl Endpoint for Controller {
    fn reg_write(&self, offset: u64, data: &[u8]) -> Result<(), Unsupported> {
        let Some(me) = self.me() else {
            return Err(Unsupported("controller detached"));
        };
        let v64 = {
            let mut b = [0u8; 8];
            b[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
            u64::from_le_bytes(b)
        };
        let v32 = v64 as u32;
        if offset >= regs::DOORBELL_BASE {
            if data.len() != 4 {
                return Err(Unsupported("doorbells are 32-bit"));
            }
            return match regs::decode_doorbell(offset, DSTRD) {
                Some(db) => {
                    me.on_doorbell(db, v32);
                    Ok(())
                }
                None => Err(Unsupported("not a doorbell")),
            };
        }
        let mut r = self.regs.borrow_mut();
        match (offset, data.len()) {
            (regs::INTMS, 4) => r.intms |= v32,
            (regs::INTMC, 4) => r.intms &= !v32,
            (regs::CC, 4) => {
                drop(r);
                me.on_cc_write(v32);
            }
            (regs::AQA, 4) => r.aqa = v32 & 0x0fff_0fff,
            (regs::ASQ, 8) => r.asq = v64 & !0xfff,
            (regs::ASQ, 4) => r.asq = (r.asq & !0xffff_ffff) | (v64 & 0xffff_f000),
            (o, 4) if o == regs::ASQ + 4 => r.asq = (r.asq & 0xffff_ffff) | (v64 << 32),
            (regs::ACQ, 8) => r.acq = v64 & !0xfff,
            (regs::ACQ, 4) => r.acq = (r.acq & !0xffff_ffff) | (v64 & 0xffff_f000),
            (o, 4) if o == regs::ACQ + 4 => r.acq = (r.acq & 0xffff_ffff) | (v64 << 32),
            (regs::NSSR, 4) => {} // NVM subsystem reset not supported (CAP.NSSRS = 0)
            (regs::PMRCTL, 4) if self.profile.pmr_bytes > 0 => r.pmrctl = v32 & 1,
            (regs::PMRMSCL, 4) => r.pmrmsc = (r.pmrmsc & !0xffff_ffff) | (v64 & 0xffff_f002),
            (regs::PMRMSCU, 4) => r.pmrmsc = (r.pmrmsc & 0xffff_ffff) | (v64 << 32),
            // Writes to read-only registers are ignored (NVMe 1.4 3.1).
            (o, _) if o < 0x1000 => {}
            _ => return Err(Unsupported("register")),
        }
        Ok(())
    }

    fn reg_read(&self, offset: u64, out: &mut [u8]) -> Result<(), Unsupported> {
        let r = self.regs.borrow();
        let pmr = self.profile.pmr_bytes > 0;
        let value: u64 = match offset {
            regs::CAP => r.cap,
            o if o == regs::CAP + 4 => r.cap >> 32,
            regs::VS => regs::VS_1_4 as u64,
            regs::INTMS | regs::INTMC => r.intms as u64,
            regs::CC => r.cc as u64,
            regs::CSTS => r.csts as u64,
            regs::NSSR => 0,
            regs::AQA => r.aqa as u64,
            regs::ASQ => r.asq,
            o if o == regs::ASQ + 4 => r.asq >> 32,
            regs::ACQ => r.acq,
            o if o == regs::ACQ + 4 => r.acq >> 32,
            regs::CMBLOC | regs::CMBSZ => 0,
            regs::PMRCAP if pmr => self.pmrcap() as u64,
            regs::PMRCTL if pmr => r.pmrctl as u64,
            regs::PMRSTS if pmr => {
                // NRDY while disabled (NVMe 1.4 3.1.23).
                if r.pmrctl & 1 == 0 {
                    1 << 8
                } else {
                    0
                }
            }
            regs::PMREBS if pmr => self.pmrebs() as u64,
            regs::PMRSWTP if pmr => self.pmrswtp() as u64,
            regs::PMRMSCL if pmr => r.pmrmsc & 0xffff_ffff,
            regs::PMRMSCU if pmr => r.pmrmsc >> 32,
            o if o >= regs::DOORBELL_BASE => 0, // doorbells read as zero
            o if o < 0x1000 => 0,               // reserved
            _ => return Err(Unsupported("register")),
        };
        let bytes = value.to_le_bytes();
        let n = out.len().min(8);
        out[..n].copy_from_slice(&bytes[..n]);
        Ok(())
    }

    fn pmr_enabled(&self) -> bool {
        self.regs.borrow().pmrctl & 1 == 1
    }

    fn pmr_written(&self, offset: u64, len: u64) {
        // Vendor extension: a write landing on a P-SQ's doorbell word rings
        // that queue (ccNVMe's ideal device, Figure 9(a)).
        let hits: Vec<(u16, u32)> = self
            .sqs
            .borrow()
            .values()
            .filter_map(|sq| {
                let db = sq.pmr_doorbell? as u64;
                (offset <= db && db + 4 <= offset + len).then_some((sq.id, db as u32))
            })
            .collect();
        if hits.is_empty() {
            return;
        }
        let Some(me) = self.me() else {
            return;
        };
        for (qid, db) in hits {
            let mut b = [0u8; 4];
            if self.port.pmr_read(db as u64, &mut b).is_ok() {
                me.on_doorbell(Doorbell::SqTail(qid), u32::from_le_bytes(b));
            }
        }
    }
}

impl Controller {
    /// PMRCAP: reads and writes supported, BAR 2, write barrier by a read
    /// of any PMR address (PMRWBM bit 0, what ccNVMe's zero-length read
    /// relies on, ccNVMe 4.3 Figure 4(a)), timeout 500 ms units.
    pub(crate) fn pmrcap(&self) -> u32 {
        regs::PmrCap(0)
            .with_rds(true)
            .with_wds(true)
            .with_bir(PMR_BIR as u8)
            .with_pmrwbm(1)
            .with_pmrto(1)
            .0
    }

    /// PMREBS: size in MiB units (rounded down), no read bypass.
    pub(crate) fn pmrebs(&self) -> u32 {
        regs::PmrEbs(0)
            .with_pmrszu(2)
            .with_pmrwbz((self.profile.pmr_bytes >> 20) as u32)
            .0
    }

    /// PMRSWTP: sustained write throughput in MiB/s, from the PMR timing.
    pub(crate) fn pmrswtp(&self) -> u32 {
        let t = &self.profile.pmr_timing;
        let per_64 = t.write_fixed.as_ps() + 64 * t.write_ps_per_byte;
        // One write is served at a time: 64 bytes per service time.
        let bps = (64 * 1_000_000_000_000u64).checked_div(per_64).unwrap_or(0);
        regs::PmrSwtp(0)
            .with_pmrswtu(2)
            .with_pmrswtv((bps >> 20) as u32)
            .0
    }
}
