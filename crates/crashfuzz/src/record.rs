//! Recording: run a workload once on a fresh machine, keeping the bus trace
//! with payloads and what every completed persistence point promised.
//!
//! The setup runs first on its own machine and ends with a clean unmount;
//! its media and PMR become the base image every crash state starts from.
//! The recorded run then boots over that base (so driver probe and mount
//! are part of the trace, and crashable too) and runs the workload's
//! threads, each on its own core.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use ccnvme::BlockDevice;
use mqfs::{
    mkfs, mkfs_volume, mount, mount_devices, mount_volume, probe_options_for, Ctx, FsError, FsProfile,
    JbdCommit, MkfsOptions, Mode, RecoveryRule, StripeOptions, SyncKind,
};
use nvme_ctrl::{attach_drives, ControllerConfig, Drive, Image, Media, SsdProfile};
use pcie_sim::{
    BusLayout, BusTrace, CpuProfile, Executor, HostProfile, Machine, MachineProfile, PageStore, SimDuration,
    SimTime, TraceMode,
};
use serde::{Deserialize, Serialize};

use crate::content::Content;
use crate::error::Error;
use crate::model::{Kind, Model};
use crate::oracle::Promise;
use crate::promises::{
    dir_durable, file_durable, tree_durable, Durable, OpId, PromiseBuilder, BASE_CONTENT_LIMIT,
};
use crate::workload::{pattern, xattr_value, Op, Workload, FILL_SEED};

/// The consistency configurations crashfuzz explores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum ModeName {
    /// Ext4-NJ: expected to fail some checks.
    None,
    /// Ext4 with JBD2.
    Classic,
    /// Ext4 whose JBD2 commits each transaction as one ccNVMe transaction
    /// (`mqfs::JbdCommit::CcNvmeTransaction`, ccNVMe 7.5.1's "+ccNVMe"):
    /// recovery trusts the driver's report of unfinished transactions.
    ClassicCc,
    /// HoraeFS.
    Horae,
    /// MQFS with fsync.
    Mq,
    /// MQFS with fatomic / fdataatomic in place of fsync / fdatasync.
    MqAtomic,
    /// MQFS with the paper-literal cross-queue recovery rule (unsafe).
    MqLiteral,
    /// HoraeFS on a volume striped over two drives (`mqfs::volume`): one
    /// ordering stream over both, each drive's cache and PMR failing on
    /// its own ([`crate::devices`]).
    Horae2,
    /// Ext4 on a volume striped over two drives (Linux md's RAID 0,
    /// `mqfs::volume`): the commit record's PREFLUSH flushes both drives
    /// (md's `md_flush_request`), each drive's cache failing on its own.
    Classic2,
    /// Ext4 with `data=journal` (`mqfs::FsProfile::data_journal`): file
    /// data go to the journal with the metadata and home by the checkpoint.
    ClassicDj,
    /// HoraeFS with `data=journal`.
    HoraeDj,
}

impl ModeName {
    /// Every mode.
    pub const ALL: [ModeName; 11] = [
        ModeName::None,
        ModeName::Classic,
        ModeName::ClassicCc,
        ModeName::Horae,
        ModeName::Mq,
        ModeName::MqAtomic,
        ModeName::MqLiteral,
        ModeName::Horae2,
        ModeName::Classic2,
        ModeName::ClassicDj,
        ModeName::HoraeDj,
    ];

    /// The modes of the default run (the safe ones and Ext4-NJ).
    pub const DEFAULT: [ModeName; 10] = [
        ModeName::None,
        ModeName::Classic,
        ModeName::ClassicCc,
        ModeName::Horae,
        ModeName::Mq,
        ModeName::MqAtomic,
        ModeName::Horae2,
        ModeName::Classic2,
        ModeName::ClassicDj,
        ModeName::HoraeDj,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            ModeName::None => "none",
            ModeName::Classic => "classic",
            ModeName::ClassicCc => "classic-cc",
            ModeName::Horae => "horae",
            ModeName::Mq => "mq",
            ModeName::MqAtomic => "mq-atomic",
            ModeName::MqLiteral => "mq-literal",
            ModeName::Horae2 => "horae2",
            ModeName::Classic2 => "classic2",
            ModeName::ClassicDj => "classic-dj",
            ModeName::HoraeDj => "horae-dj",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<ModeName> {
        ModeName::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The file system mode.
    pub fn fs_mode(self) -> Mode {
        match self {
            ModeName::None => Mode::None,
            ModeName::Classic | ModeName::ClassicCc | ModeName::Classic2 | ModeName::ClassicDj => {
                Mode::Classic
            }
            ModeName::Horae | ModeName::Horae2 | ModeName::HoraeDj => Mode::Horae,
            ModeName::Mq | ModeName::MqAtomic | ModeName::MqLiteral => Mode::Mq,
        }
    }

    /// Drives of the machine: the volume's members (one but for `horae2`
    /// and `classic2`).
    pub fn drives(self) -> u8 {
        match self {
            ModeName::Horae2 | ModeName::Classic2 => 2,
            _ => 1,
        }
    }

    /// True for HoraeFS, on one drive or striped.
    pub fn is_horae(self) -> bool {
        self.fs_mode() == Mode::Horae
    }

    /// True for the modes whose journal commits through ccNVMe: the MQFS
    /// modes and `classic-cc`.
    pub fn is_ccnvme(self) -> bool {
        self.is_mq() || self == ModeName::ClassicCc
    }

    /// The driver options of the mode's file system and profile.
    pub fn probe(self) -> ccnvme::ProbeOptions {
        probe_options_for(self.fs_mode(), &self.fs_profile())
    }

    /// True for the MQFS modes (where fatomic is weaker than fsync).
    pub fn is_mq(self) -> bool {
        self.fs_mode() == Mode::Mq
    }

    /// Parses a command-line name, or says which names there are.
    pub fn parse(s: &str) -> Result<ModeName, Error> {
        ModeName::from_name(s).ok_or_else(|| Error::UnknownMode(s.into()))
    }

    /// The file-system profile.
    pub fn fs_profile(self) -> FsProfile {
        let mut p = FsProfile::default();
        match self {
            ModeName::MqLiteral => p.mq.rule = RecoveryRule::PaperLiteral,
            ModeName::ClassicCc => p.jbd_commit = JbdCommit::CcNvmeTransaction,
            // HoraeFS as measured: the ordering layer hands every data bio
            // to a background submitter (Horae 6.2), here on core 1 (every
            // machine has two, [`RunConfig::cores`]), so crash points fall
            // while bios wait in its ring. Recovery reads only the live
            // slots of the ordering queue: it decides the same as reading
            // the whole region, faster ([`ccnvme::RegionLoad::Live`]).
            ModeName::Horae | ModeName::Horae2 | ModeName::HoraeDj => {
                p.submitters = Some(ccnvme::horae::Submitters { first: 1, count: 1 });
                p.driver.horae_recovery_load = ccnvme::RegionLoad::Live;
            }
            _ => {}
        }
        p.data_journal = matches!(self, ModeName::ClassicDj | ModeName::HoraeDj);
        p
    }
}

/// An ordering mechanism switched off (fault injection), to show that
/// crashfuzz reports its absence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// No zero-length read after a persistent MMIO write: ccNVMe's P-SQ,
    /// Horae's ordering queue (what HoRAE's released module does,
    /// `ccnvme::DriverFaults::no_flush_read`).
    NoFlushRead,
    /// ccNVMe without clflush + mfence before that read.
    NoFence,
    /// ccNVMe without the fence between the P-SQ entries and the P-SQDB
    /// store only.
    NoEntryFence,
    /// No FUA on the commit record: JBD2's commit block (classic mode)
    /// and ccNVMe's commit command.
    NoCommitFua,
    /// ccNVMe finishing transactions out of queue order.
    OutOfOrder,
    /// MQFS without selective revocation.
    NoRevoke,
    /// fsync without the FLUSH for data no commit covers: written home
    /// outside a sync (O_DIRECT, sync_file_range), or, with JBD2, written
    /// by fsync after its inode's transaction sent its flush.
    NoDataFlush,
    /// HoraeFS's flush stage acknowledging a transaction (its fsyncs
    /// return) once dispatched, before its writes complete and before the
    /// joint FLUSH.
    HoraeEarlyAck,
    /// Horae's recovery not committing the durable prepare writes of
    /// redirected in-place updates (their home blocks keep the old
    /// content, the p-area copy is dropped with the queue).
    HoraeNoRedirectCommit,
    /// Horae's joint FLUSH flushing only the drive of the last entry
    /// before the flush point, as a per-device FLUSH would
    /// (`ccnvme::DriverFaults::horae_no_joint_flush`).
    HoraeNoJointFlush,
    /// Horae setting an entry's `dr` bit (durable) on a drive without a
    /// volatile cache before its write completed
    /// (`ccnvme::DriverFaults::horae_early_dr`).
    HoraeEarlyDr,
    /// Recovery of a journal committed through ccNVMe ignoring the
    /// driver's report of unfinished transactions: a transaction whose
    /// log blocks all landed is replayed though its REQ_TX_COMMIT never
    /// finished (`mqfs::FsProfile::recovery_drops_unfinished` off).
    ReplayUnfinished,
    /// A PREFLUSH write to a striped volume flushing only the drive it
    /// writes to, not every member as md does
    /// (`mqfs::FsProfile::md_flush_members` off).
    MdFlushOne,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 13] = [
        Fault::NoFlushRead,
        Fault::NoFence,
        Fault::NoEntryFence,
        Fault::NoCommitFua,
        Fault::OutOfOrder,
        Fault::NoRevoke,
        Fault::NoDataFlush,
        Fault::HoraeEarlyAck,
        Fault::HoraeNoRedirectCommit,
        Fault::HoraeNoJointFlush,
        Fault::HoraeEarlyDr,
        Fault::ReplayUnfinished,
        Fault::MdFlushOne,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::NoFlushRead => "no-flush-read",
            Fault::NoFence => "no-fence",
            Fault::NoEntryFence => "no-entry-fence",
            Fault::NoCommitFua => "no-commit-fua",
            Fault::OutOfOrder => "out-of-order",
            Fault::NoRevoke => "no-revoke",
            Fault::NoDataFlush => "no-data-flush",
            Fault::HoraeEarlyAck => "horae-early-ack",
            Fault::HoraeNoRedirectCommit => "horae-no-redirect-commit",
            Fault::HoraeNoJointFlush => "horae-no-joint-flush",
            Fault::HoraeEarlyDr => "horae-early-dr",
            Fault::ReplayUnfinished => "replay-unfinished",
            Fault::MdFlushOne => "md-flush-one",
        }
    }

    /// True if the mechanism this fault switches off exists in `mode`:
    /// the flush read of a persistent MMIO write is ccNVMe's and Horae's;
    /// the P-SQ's fence and in-order completion are ccNVMe's (MQFS and
    /// `classic-cc`), and so is recovery's use of the driver's report of
    /// unfinished transactions; selective revocation is MQFS's; the commit
    /// record's FUA is JBD2's (classic, horae) and ccNVMe's. Ext4-NJ has
    /// none of them.
    /// The flush for data written outside a sync is the journaled modes'
    /// (Ext4-NJ's fsync always flushes). The flush stage and the
    /// redirection commit are HoraeFS's. md's flush of every member is a
    /// striped Ext4's (its commit record is the PREFLUSH write).
    pub fn applies_to(self, mode: ModeName) -> bool {
        let ccnvme = mode.is_ccnvme();
        match self {
            Fault::NoFlushRead => ccnvme || mode.is_horae(),
            Fault::NoFence | Fault::NoEntryFence | Fault::OutOfOrder | Fault::ReplayUnfinished => ccnvme,
            Fault::NoRevoke => mode.is_mq(),
            Fault::NoCommitFua | Fault::NoDataFlush => {
                ccnvme || mode.fs_mode() == Mode::Classic || mode.is_horae()
            }
            Fault::HoraeEarlyAck | Fault::HoraeEarlyDr => mode.is_horae(),
            Fault::HoraeNoRedirectCommit => mode.is_horae(),
            // A joint FLUSH of one drive is that drive's FLUSH.
            Fault::HoraeNoJointFlush => mode.drives() > 1 && mode.is_horae(),
            Fault::MdFlushOne => mode.drives() > 1 && mode.fs_mode() == Mode::Classic,
        }
    }

    /// `Ok` if the fault applies to every mode in `modes`, else the usage
    /// error that names the first mode it does not apply to.
    pub fn check_modes(self, modes: &[ModeName]) -> Result<(), Error> {
        match modes.iter().find(|m| !self.applies_to(**m)) {
            None => Ok(()),
            Some(m) => Err(Error::FaultNotApplicable {
                fault: self.name().into(),
                mode: m.name().into(),
            }),
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<Fault, Error> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| Error::UnknownFault(s.into()))
    }
}

/// The driver options of `mode` with `fault` applied.
pub fn probe_for(mode: ModeName, fault: Option<Fault>) -> ccnvme::ProbeOptions {
    let mut p = mode.probe();
    let f = &mut p.profile.faults;
    match fault {
        Some(Fault::NoFlushRead) => f.no_flush_read = true,
        Some(Fault::NoFence) => f.no_fence = true,
        Some(Fault::NoEntryFence) => f.no_entry_fence = true,
        Some(Fault::NoCommitFua) => f.no_commit_fua = true,
        Some(Fault::OutOfOrder) => f.out_of_order_completion = true,
        Some(Fault::HoraeNoRedirectCommit) => f.horae_no_redirect_commit = true,
        Some(Fault::HoraeNoJointFlush) => f.horae_no_joint_flush = true,
        Some(Fault::HoraeEarlyDr) => f.horae_early_dr = true,
        Some(
            Fault::NoRevoke
            | Fault::NoDataFlush
            | Fault::HoraeEarlyAck
            | Fault::ReplayUnfinished
            | Fault::MdFlushOne,
        )
        | None => {}
    }
    p
}

/// The file-system profile of `mode` with `fault` applied.
pub fn fs_profile_for(mode: ModeName, fault: Option<Fault>) -> FsProfile {
    let mut p = mode.fs_profile();
    match fault {
        Some(Fault::NoRevoke) => p.mq.selective_revocation = false,
        Some(Fault::NoCommitFua) => p.commit_fua = false,
        Some(Fault::NoDataFlush) => p.flush_unflushed_data = false,
        Some(Fault::HoraeEarlyAck) => p.horae_ack_after_flush = false,
        Some(Fault::ReplayUnfinished) => p.recovery_drops_unfinished = false,
        Some(Fault::MdFlushOne) => p.md_flush_members = false,
        _ => {}
    }
    p
}

/// The mode field of a replay id: `mode` or `mode+fault`.
pub fn mode_label(mode: ModeName, fault: Option<Fault>) -> String {
    match fault {
        Some(f) => format!("{}+{}", mode.name(), f.name()),
        None => mode.name().to_string(),
    }
}

/// Parses [`mode_label`].
pub fn parse_mode_label(s: &str) -> Result<(ModeName, Option<Fault>), Error> {
    match s.split_once('+') {
        Some((m, f)) => {
            let (mode, fault) = (ModeName::parse(m)?, Fault::parse(f)?);
            fault.check_modes(&[mode])?;
            Ok((mode, Some(fault)))
        }
        None => Ok((ModeName::parse(s)?, None)),
    }
}

/// How a run is set up.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Consistency configuration.
    pub mode: ModeName,
    /// Drive profile.
    pub profile: SsdProfile,
    /// Simulation seed.
    pub seed: u64,
    /// Device size in 4 KiB blocks.
    pub blocks: u64,
    /// An ordering mechanism switched off, if any.
    pub fault: Option<Fault>,
}

impl RunConfig {
    /// Device size of every run, in 4 KiB blocks (64 MiB: room for the
    /// journals and every built-in workload; media is sparse, so size
    /// costs nothing).
    pub const DEFAULT_BLOCKS: u64 = 16384;

    /// A configuration with the default device size.
    pub fn new(mode: ModeName, profile: SsdProfile, seed: u64) -> RunConfig {
        RunConfig {
            mode,
            profile,
            seed,
            blocks: Self::DEFAULT_BLOCKS,
            fault: None,
        }
    }

    /// The drive profile called `name`, or which names there are.
    pub fn profile_by_name(name: &str) -> Result<SsdProfile, Error> {
        SsdProfile::by_name(name).ok_or_else(|| {
            let names: Vec<&str> = SsdProfile::all().iter().map(|p| p.name).collect();
            Error::UnknownProfile(name.into(), names.join(", "))
        })
    }

    /// Cores of the machine for `w` (one per thread, at least two).
    pub fn cores(&self, w: &Workload) -> usize {
        w.threads.len().max(2)
    }

    /// Host DRAM of every run (256 MiB).
    pub const DRAM_BYTES: u64 = 256 << 20;

    /// The machine profile.
    pub fn machine(&self, w: &Workload) -> MachineProfile {
        machine_profile(self.cores(w), Self::DRAM_BYTES)
    }
}

/// The machine of every recorded run and every recovery: the default
/// profile with `cores` cores and `dram_bytes` of host memory. Saved runs
/// store only these two numbers (see [`crate::saved`]).
pub fn machine_profile(cores: usize, dram_bytes: u64) -> MachineProfile {
    MachineProfile {
        cpu: CpuProfile {
            cores,
            ..CpuProfile::default()
        },
        host: HostProfile {
            dram_bytes,
            ..HostProfile::default()
        },
        ..MachineProfile::default()
    }
}

/// A recorded run.
#[derive(Debug, Clone)]
pub struct Recording {
    /// What ran (a workload name, or a label for a run recorded elsewhere).
    pub workload: String,
    /// The machine it ran on (recovery machines boot with the same).
    pub machine: MachineProfile,
    /// The bus trace, with payloads.
    pub trace: BusTrace,
    /// Where the BARs are.
    pub layout: BusLayout,
    /// PMR content at the start of the recorded run.
    pub base_pmr: PageStore,
    /// Media content at the start of the recorded run.
    pub base_media: Arc<Image>,
    /// The other drives of a machine with several (`horae2`), by port
    /// from 1: each one's media and PMR at the start of the run.
    pub more_drives: Vec<(Arc<Image>, PageStore)>,
    /// What the persistence points promised.
    pub promises: Vec<Promise>,
    /// Operations the file system refused (name, error), for reports.
    pub refused: Vec<(String, String)>,
    /// Every operation of the run, in start order.
    pub ops: Vec<OpRecord>,
}

impl Recording {
    /// The starting images of the run's drives, by port.
    pub fn bases(&self) -> Vec<Arc<Image>> {
        let mut b = vec![self.base_media.clone()];
        b.extend(self.more_drives.iter().map(|(m, _)| m.clone()));
        b
    }
}

/// When one operation of a recorded run ran, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRecord {
    /// Thread (and core).
    pub thread: usize,
    /// The operation, in the workload language.
    pub op: String,
    /// Trace entries before it started.
    pub start: usize,
    /// Trace entries when it returned.
    pub end: usize,
    /// Simulated start time.
    pub start_time: String,
    /// Simulated return time.
    pub end_time: String,
    /// Simulated start time in picoseconds.
    pub start_ps: u64,
    /// Simulated return time in picoseconds.
    pub end_ps: u64,
    /// The error it returned, if any.
    pub error: Option<String>,
}

/// Simulated time a recorded run may take.
pub const RECORD_LIMIT: pcie_sim::SimDuration = pcie_sim::SimDuration::from_ms(2_000);

fn failed<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Failed(format!("{what}: {e}"))
}

/// Runs the setup, then records the workload.
pub fn record(w: &Workload, cfg: &RunConfig) -> Result<Recording, Error> {
    let (mut bases, filled) = prepare(w, cfg)?;
    let ex = Executor::new(cfg.seed);
    let m = Machine::new(&ex, cfg.machine(w), TraceMode::Full);
    let drives = bases
        .iter()
        .map(|(media, pmr)| Drive {
            config: ControllerConfig::new(cfg.profile.clone()),
            media: Media::cow(media.clone(), imbl::HashMap::new()),
            pmr: Some(pmr.clone()),
        })
        .collect();
    attach_drives(&m, drives).map_err(failed("controller"))?;
    let mode = cfg.mode;
    let (probe, profile) = (probe_for(mode, cfg.fault), fs_profile_for(mode, cfg.fault));
    let m2 = m.clone();
    let fs = ex
        .block_on(async move { mount_drives(&m2, mode, probe, Ctx::on(0), profile).await })
        .map_err(failed("mount"))?
        .map_err(failed("mount"))?;
    let shared = Rc::new(RefCell::new(Shared {
        model: Model::default(),
        promises: PromiseBuilder::new(mode),
        versions: BTreeMap::new(),
        refused: Vec::new(),
        fresh: Default::default(),
        written_in_place: Default::default(),
        mismatches: Vec::new(),
        named: Default::default(),
    }));
    // The base tree: what the setup left.
    for op in &w.setup {
        let op = match op {
            Op::Fill(p) => {
                let size = filled.iter().find(|(f, _)| f == p).map_or(0, |(_, s)| *s);
                Op::Write(p.clone(), 0, size, FILL_SEED)
            }
            o => o.clone(),
        };
        shared.borrow_mut().model.apply(&op);
    }
    // The setup ended with a clean unmount: its tree is durable from
    // power-on, and its files' contents are durable versions.
    {
        let mut sh = shared.borrow_mut();
        let base = tree_durable(sh.model.all_states(), Some(BASE_CONTENT_LIMIT));
        sh.promises.base(base);
        let named = sh.model.names().into_iter().map(|(p, _)| p).collect();
        sh.named = named;
        for (p, c) in sh.model.files() {
            sh.versions.entry(p).or_default().push(c);
        }
    }
    let threads: Vec<Vec<Op>> = if mode == ModeName::MqAtomic {
        w.atomic().threads
    } else {
        w.threads.clone()
    };
    let mut handles = Vec::new();
    let oplog: Rc<RefCell<Vec<OpRecord>>> = Rc::default();
    let fds: Rc<Fds> = Rc::default();
    for (t, ops) in threads.into_iter().enumerate() {
        let where_: Vec<String> = (0..ops.len()).map(|i| w.locate(t, i)).collect();
        let fs = fs.clone();
        let m3 = m.clone();
        let sh = shared.clone();
        let log = oplog.clone();
        let fds = fds.clone();
        handles.push(m.sim().spawn(async move {
            let c = Ctx::on(t);
            for (i, op) in ops.into_iter().enumerate() {
                let start = m3.trace().len() as usize;
                let start_time = m3.sim().now();
                let id = sh.borrow_mut().begin(&op, start);
                let r = run_op(&fs, c, &op, &fds).await;
                let end = m3.trace().len() as usize;
                log.borrow_mut().push(OpRecord {
                    thread: t,
                    op: op.to_string(),
                    start,
                    end,
                    start_time: start_time.to_string(),
                    end_time: m3.sim().now().to_string(),
                    start_ps: start_time.as_ps(),
                    end_ps: m3.sim().now().as_ps(),
                    error: r.as_ref().err().map(|e| e.to_string()),
                });
                sh.borrow_mut().end(&op, r, id, end, &where_[i]);
            }
        }));
    }
    // Record until the machine is quiescent, not only until the last
    // operation returned: fatomic returns before the drive has run its
    // transaction, and that I/O must be crash-tested too. The drive's
    // volatile cache is not waited for: what it holds stays volatile, and
    // the crash model decides what of it may be lost.
    let (devs, bus) = (fs.volume().devices().to_vec(), m.clone());
    let join = async move {
        for h in handles {
            h.await;
        }
        for dev in devs {
            dev.wait_idle().await;
        }
        bus.quiesce(SimDuration::from_us(1)).await;
    };
    // A run that has not finished after RECORD_LIMIT of simulated time is
    // a livelock, not a workload: stop it before its trace fills memory.
    ex.block_on_until(join, Some(SimTime::ZERO + RECORD_LIMIT))
        .map_err(failed("run"))?;
    let mut sh = shared.borrow_mut();
    if !sh.mismatches.is_empty() {
        return Err(Error::Failed(format!(
            "the file system disagrees with the model: {}",
            sh.mismatches.join("; ")
        )));
    }
    Ok(Recording {
        workload: w.name.clone(),
        machine: cfg.machine(w),
        trace: m.take_trace(),
        layout: m.layout(),
        base_pmr: bases[0].1.clone(),
        base_media: bases[0].0.clone(),
        more_drives: bases.split_off(1),
        // Taken, not copied: the run is over (an atomic promise can hold
        // many file versions).
        promises: std::mem::replace(&mut sh.promises, PromiseBuilder::new(mode)).into_promises(),
        refused: sh.refused.clone(),
        ops: {
            let mut v = oplog.borrow().clone();
            v.sort_by_key(|o| (o.start, o.thread));
            v
        },
    })
}

/// Probes the drives of `mode` (ports `0..mode.drives()`) with `probe`
/// and mounts the file system on them with `profile`: on one drive, or on
/// the striped volume of several.
pub async fn mount_drives(
    m: &Machine,
    mode: ModeName,
    probe: ccnvme::ProbeOptions,
    c: Ctx,
    profile: FsProfile,
) -> Result<Rc<mqfs::Fs>, FsError> {
    let mut devs = Vec::new();
    for port in 0..mode.drives() {
        devs.push(BlockDevice::probe(m, port, probe.clone()).await?);
    }
    mount_devices(&devs, c, profile).await
}

/// The base images of a run: per drive, its media and PMR.
type Bases = Vec<(Arc<Image>, PageStore)>;

/// What a setup produced: the base images and the size each `fill`
/// reached.
type Prepared = (Bases, Vec<(String, u64)>);

/// Everything [`run_setup`] reads: two runs with equal keys get equal base
/// images (the setup is a deterministic simulation of these inputs alone).
#[derive(Debug, PartialEq)]
struct SetupKey {
    setup: Vec<Op>,
    cores: usize,
    /// What the setup takes of the mode: drives, file-system mode (mkfs
    /// and probe options) and file-system profile (so `mq` and
    /// `mq-atomic` share their setups).
    drives: u8,
    fs_mode: Mode,
    fs_profile: FsProfile,
    profile: SsdProfile,
    blocks: u64,
    seed: u64,
}

/// Setups kept in [`SETUPS`] (past this the oldest is dropped).
const SETUPS_KEPT: usize = 64;

/// The setups run in this process, newest last: a campaign records each
/// workload in many modes, faults and profiles, most of them over the same
/// setup (often an empty one), and the base images depend on neither the
/// workload's operations after the setup nor a fault (the setup runs
/// without them).
static SETUPS: std::sync::Mutex<Vec<(SetupKey, Prepared)>> = std::sync::Mutex::new(Vec::new());

/// The base images (one per drive) and the size each `fill` reached, of
/// `w`'s setup under `cfg`: the ones an earlier run with the same inputs
/// made, or a fresh run of the setup.
fn prepare(w: &Workload, cfg: &RunConfig) -> Result<Prepared, Error> {
    let key = SetupKey {
        setup: w.setup.clone(),
        cores: cfg.cores(w),
        drives: cfg.mode.drives(),
        fs_mode: cfg.mode.fs_mode(),
        fs_profile: cfg.mode.fs_profile(),
        profile: cfg.profile.clone(),
        blocks: cfg.blocks,
        seed: cfg.seed,
    };
    if let Ok(kept) = SETUPS.lock() {
        if let Some((_, p)) = kept.iter().find(|(k, _)| *k == key) {
            return Ok(p.clone());
        }
    }
    let p = run_setup(w, cfg)?;
    if let Ok(mut kept) = SETUPS.lock() {
        if !kept.iter().any(|(k, _)| *k == key) {
            if kept.len() >= SETUPS_KEPT {
                kept.remove(0);
            }
            kept.push((key, p.clone()));
        }
    }
    Ok(p)
}

/// Runs the setup on its own machine; returns the base images (one per
/// drive) and the size each `fill` reached.
fn run_setup(w: &Workload, cfg: &RunConfig) -> Result<Prepared, Error> {
    let ex = Executor::new(cfg.seed ^ 0x5e7);
    let m = Machine::new(&ex, cfg.machine(w), TraceMode::Off);
    let mode = cfg.mode;
    let drives = (0..mode.drives())
        .map(|_| Drive {
            config: ControllerConfig::new(cfg.profile.clone()),
            media: Media::memory(cfg.blocks),
            pmr: None,
        })
        .collect();
    let ctrls = attach_drives(&m, drives).map_err(failed("controller"))?;
    let setup = w.setup.clone();
    let cores = cfg.cores(w) as u32;
    let m2 = m.clone();
    ex.block_on(async move {
        let c = Ctx::on(0);
        let mut devs = Vec::new();
        for port in 0..mode.drives() {
            devs.push(BlockDevice::probe(&m2, port, mode.probe()).await?);
        }
        let mut opts = MkfsOptions::new(mode.fs_mode());
        opts.journal_areas = cores;
        opts.journal_blocks = Some(1024 * cores as u64);
        let fs = if devs.len() > 1 {
            mkfs_volume(&devs, c, &opts, StripeOptions::default()).await?;
            mount_volume(&devs, c, mode.fs_profile()).await?
        } else {
            mkfs(&devs[0], c, &opts).await?;
            mount(&devs[0], c, mode.fs_profile()).await?
        };
        let mut filled = Vec::new();
        // The setup has no descriptors (the parser refuses them there).
        let fds = Fds::default();
        for op in &setup {
            run_op(&fs, c, op, &fds).await?;
            if let Op::Fill(p) = op {
                let ino = fs.resolve(c, p).await?;
                filled.push((p.clone(), fs.getattr(c, ino).await?.size));
            }
        }
        fs.unmount(c).await?;
        Ok::<_, FsError>(filled)
    })
    .map_err(failed("setup"))?
    .map_err(failed("setup"))
    .and_then(|filled| {
        let bases = ctrls
            .iter()
            .enumerate()
            .map(|(port, ctrl)| {
                let media = Arc::new(ctrl.backend().media().freeze());
                let pmr = m
                    .pmr_image(port as u8)
                    .ok_or_else(|| Error::Failed("no PMR".into()))?;
                Ok((media, pmr))
            })
            .collect::<Result<Bases, Error>>()?;
        Ok((bases, filled))
    })
}

/// The open descriptors of a run: the workload's number -> inode.
pub type Fds = RefCell<BTreeMap<u32, mqfs::Ino>>;

/// Runs one operation; `fds` are the run's descriptors. Returns what
/// fstat found.
pub async fn run_op(fs: &mqfs::Fs, c: Ctx, op: &Op, fds: &Fds) -> Result<Option<mqfs::Attr>, FsError> {
    // EBADF has no FsError; the message names it.
    let ino_of = |fd: &u32| {
        fds.borrow()
            .get(fd)
            .copied()
            .ok_or_else(|| FsError::Invalid(format!("descriptor {fd} is not open (EBADF)")))
    };
    match op {
        Op::Open(fd, p) => {
            if fds.borrow().contains_key(fd) {
                return Err(FsError::Invalid(format!("descriptor {fd} is open already")));
            }
            let ino = fs.resolve(c, p).await?;
            fs.open(c, ino).await?;
            if fds.borrow().contains_key(fd) {
                // Another thread took the number meanwhile.
                fs.release(c, ino).await?;
                return Err(FsError::Invalid(format!("descriptor {fd} is open already")));
            }
            fds.borrow_mut().insert(*fd, ino);
            Ok(None)
        }
        Op::Close(fd) => {
            let ino = ino_of(fd)?;
            fds.borrow_mut().remove(fd);
            fs.release(c, ino).await.map(|_| None)
        }
        Op::Fdwrite(fd, off, len, seed) => fs
            .write(c, ino_of(fd)?, *off, &bytes(*off, *len, *seed))
            .await
            .map(|_| None),
        Op::Fdfsync(fd) => fs.fsync(c, ino_of(fd)?).await.map(|_| None),
        Op::Fdfdatasync(fd) => fs.fdatasync(c, ino_of(fd)?).await.map(|_| None),
        Op::Fstat(fd) => fs.getattr(c, ino_of(fd)?).await.map(Some),
        o => run_path_op(fs, c, o).await.map(|_| None),
    }
}

/// Runs one operation on paths (descriptor operations are
/// [`run_op`]'s).
async fn run_path_op(fs: &mqfs::Fs, c: Ctx, op: &Op) -> Result<(), FsError> {
    match op {
        Op::Open(..)
        | Op::Close(_)
        | Op::Fdwrite(..)
        | Op::Fdfsync(_)
        | Op::Fdfdatasync(_)
        | Op::Fstat(_) => {
            unreachable!("run_op runs the descriptor operations")
        }
        Op::Create(p) => fs.create_path(c, p).await.map(|_| ()),
        Op::Mkdir(p) => fs.mkdir_path(c, p).await.map(|_| ()),
        Op::Write(p, off, len, seed) => fs
            .write_path(c, p, *off, &bytes(*off, *len, *seed))
            .await
            .map(|_| ()),
        Op::Dwrite(p, off, len, seed) => {
            let ino = fs.resolve(c, p).await?;
            fs.write_direct(c, ino, *off, &bytes(*off, *len, *seed))
                .await
                .map(|_| ())
        }
        Op::Mwrite(p, off, len, seed) => {
            let ino = fs.resolve(c, p).await?;
            fs.write_mapped(c, ino, *off, &bytes(*off, *len, *seed))
                .await
                .map(|_| ())
        }
        Op::Sfr(p, off, len) => fs.sync_file_range(c, fs.resolve(c, p).await?, *off, *len).await,
        // msync(MS_SYNC) is vfs_fsync_range(datasync = 1) (mm/msync.c);
        // MQFS syncs whole files, so the range is the file.
        Op::Msync(p, _, _) => fs.fdatasync(c, fs.resolve(c, p).await?).await,
        Op::Truncate(p, size) => {
            let ino = fs.resolve(c, p).await?;
            fs.truncate(c, ino, *size).await
        }
        Op::Fallocate(p, mode, off, len) => {
            let ino = fs.resolve(c, p).await?;
            fs.fallocate(c, ino, mode.fs_mode(), *off, *len).await
        }
        Op::Setxattr(p, name, len, seed, how) => {
            let ino = fs.resolve(c, p).await?;
            fs.setxattr(c, ino, name, &xattr_value(*len, *seed), how.fs_flags())
                .await
        }
        Op::Removexattr(p, name) => fs.removexattr(c, fs.resolve(c, p).await?, name).await,
        Op::Link(a, b) => fs.link_path(c, a, b).await.map(|_| ()),
        Op::Unlink(p) => fs.unlink_path(c, p).await,
        Op::Rmdir(p) => fs.rmdir_path(c, p).await,
        Op::Rename(a, b) => fs.rename_path(c, a, b).await,
        Op::Symlink(p, t) => {
            let (parent, name) = fs.resolve_parent(c, p).await?;
            fs.symlink(c, parent, name, t).await.map(|_| ())
        }
        Op::Fsync(p) => fs.fsync(c, fs.resolve(c, p).await?).await,
        Op::Fdatasync(p) => fs.fdatasync(c, fs.resolve(c, p).await?).await,
        Op::Fatomic(p) => fs.fatomic(c, fs.resolve(c, p).await?).await,
        Op::Fdataatomic(p) => fs.fdataatomic(c, fs.resolve(c, p).await?).await,
        Op::Fbarrier(p) => fs.fbarrier(c, fs.resolve(c, p).await?).await,
        Op::Fdatabarrier(p) => fs.fdatabarrier(c, fs.resolve(c, p).await?).await,
        Op::Sync => fs.sync(c).await,
        Op::Sleep(us) => {
            fs.machine()
                .sim()
                .sleep(pcie_sim::SimDuration::from_us(*us))
                .await;
            Ok(())
        }
        Op::Fill(p) => {
            let ino = fs.resolve(c, p).await?;
            let mut off = fs.getattr(c, ino).await?.size;
            loop {
                let data: Vec<u8> = (0..1u64 << 20).map(|i| pattern(FILL_SEED, off + i)).collect();
                match fs.write(c, ino, off, &data).await {
                    Ok(n) if n == data.len() => off += n as u64,
                    Ok(_) | Err(FsError::NoSpace) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        }
        Op::WaitFor(p) => {
            for _ in 0..1_000_000 {
                match fs.resolve(c, p).await {
                    Ok(_) => return Ok(()),
                    Err(FsError::NotFound) => {
                        fs.machine().sim().sleep(pcie_sim::SimDuration::from_us(1)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(FsError::Invalid(format!(
                "wait {p}: it did not appear within a simulated second"
            )))
        }
    }
}

/// An error as a report shows it: its errno's name, then what mqfs says.
fn errno_text(e: &FsError) -> String {
    format!("{}: {e}", e.errno_name())
}

/// The bytes a write of `len` at `off` with `seed` writes.
fn bytes(off: u64, len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| pattern(seed, off + i)).collect()
}

/// State shared by the threads of a recorded run.
struct Shared {
    model: Model,
    /// The promises, and the operations whose start ends them.
    promises: PromiseBuilder,
    /// Contents each file path had at its persistence points.
    versions: BTreeMap<String, Vec<Arc<Content>>>,
    refused: Vec<(String, String)>,
    /// Names made since their directory was last made durable: fdatasync
    /// does not promise them (it persists data, not the name).
    fresh: std::collections::BTreeSet<String>,
    /// Files (model nodes) with data written in place outside a sync
    /// (O_DIRECT, sync_file_range) since their last durable sync: those
    /// blocks are outside any transaction and may land in any
    /// combination, so an atomic sync promises nothing about the file
    /// until a durable sync (or `sync`) has made them durable.
    written_in_place: std::collections::BTreeSet<u64>,
    /// What fstat found that the model does not say.
    mismatches: Vec<String>,
    /// Every name the run's tree has had since the setup (its final tree
    /// included): a name made that is not among them can mark a
    /// barrier's order ([`PromiseBuilder::ordered_by`]).
    named: std::collections::BTreeSet<String>,
}

/// The sync an operation is, if any: its path and kind (`sync` is not one:
/// it syncs the whole tree).
fn sync_of(op: &Op) -> Option<(&String, SyncKind)> {
    match op {
        Op::Fsync(p) => Some((p, SyncKind::Fsync)),
        Op::Fdatasync(p) => Some((p, SyncKind::Fdatasync)),
        Op::Fatomic(p) => Some((p, SyncKind::Fatomic)),
        Op::Fdataatomic(p) => Some((p, SyncKind::Fdataatomic)),
        // What a barrier promises once durable: fsync's or fdatasync's
        // (the builder defers it in the horae mode: `Shared::begin` marks
        // the operation a barrier).
        Op::Fbarrier(p) => Some((p, SyncKind::Fsync)),
        Op::Fdatabarrier(p) => Some((p, SyncKind::Fdatasync)),
        Op::Msync(p, _, _) => Some((p, SyncKind::Fdatasync)),
        _ => None,
    }
}

impl Shared {
    /// The paths `op` changes, and every other name of the same files (a
    /// write through one hard link, or through a descriptor, changes them
    /// all).
    fn changed(&self, op: &Op) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in op.changed_paths() {
            out.extend(self.model.aliases(p));
            out.push(p.to_string());
        }
        if let Op::Fdwrite(fd, ..) = op {
            out.extend(
                self.model
                    .fd_node(*fd)
                    .map(|n| self.model.names_of(n))
                    .unwrap_or_default(),
            );
        }
        out
    }

    /// The path and kind of the sync `op` is, if any: a descriptor's sync
    /// is its file's first name's (none once the file has no name: its
    /// data is visible nowhere).
    fn sync_target(&self, op: &Op) -> Option<(String, SyncKind)> {
        match op {
            Op::Fdfsync(fd) | Op::Fdfdatasync(fd) => {
                let name = self.model.names_of(self.model.fd_node(*fd)?).into_iter().next()?;
                let kind = if matches!(op, Op::Fdfsync(_)) {
                    SyncKind::Fsync
                } else {
                    SyncKind::Fdatasync
                };
                Some((name, kind))
            }
            _ => sync_of(op).map(|(p, k)| (p.clone(), k)),
        }
    }

    /// An operation starts after `start` trace entries: promises about what
    /// it may change stop holding; a rename of a durable file and an
    /// atomic sync promise from here.
    fn begin(&mut self, op: &Op, start: usize) -> OpId {
        // The paths the operation changes, and every other name of the
        // same files (a write through one hard link, or through a
        // descriptor, changes them all).
        let owned = self.changed(op);
        // What the operation can leave each name it changes in, from its
        // start: the promises about them widen to it.
        let affected = self.model.affected(op);
        let next = self.model.after(op);
        let effects = next.states(&affected);
        let id = self.promises.begin_op(owned, start, &effects);
        if op.is_barrier() {
            self.promises.barrier(id);
        }
        self.promises
            .widen_lost_names(start, &self.model.former_names_after(op, &next));
        if let Op::Rename(from, to) | Op::Link(from, to) = op {
            let paths = [from.clone(), to.clone()];
            let after: Vec<_> = paths
                .iter()
                .map(|p| effects.iter().find(|(q, _)| q == p).and_then(|(_, s)| s.clone()))
                .collect();
            self.promises.atomic_op(id, &paths, &after, op.to_string());
        }
        if let Some((p, kind)) = self.sync_target(op) {
            let p = &p;
            // On a directory, fatomic makes its changes atomic with the
            // file operations in the same transaction; the tree checks
            // cover that, so only files get a version promise.
            let torn = self
                .model
                .lookup(p)
                .is_some_and(|n| self.written_in_place.contains(&n));
            if self.promises.atomic_only(kind) && self.model.kind(p) == Some(Kind::File) && !torn {
                // Atomic from the moment it starts: the file is one of its
                // synced versions, old or new.
                let earlier = self
                    .versions
                    .get(p)
                    .map(|v| v.iter().map(|c| c.to_vec()).collect())
                    .unwrap_or_default();
                let now = self.model.content(p);
                self.promises.atomic(id, p, earlier, now, op.to_string());
            }
        }
        id
    }

    /// Keeps [`Shared::fresh`]: names made since their directory became
    /// durable. fsync of a directory makes its entries durable, fsync of
    /// a file its own name, sync everything.
    fn track_names(&mut self, op: &Op) {
        match op {
            Op::Create(p) | Op::Mkdir(p) | Op::Symlink(p, _) | Op::Link(_, p) => {
                self.fresh.insert(p.clone());
            }
            Op::Rename(from, to) => {
                let moved: Vec<String> = self
                    .fresh
                    .iter()
                    .filter(|f| *f == from || f.starts_with(&format!("{from}/")))
                    .cloned()
                    .collect();
                for f in moved {
                    self.fresh.remove(&f);
                }
                self.fresh.insert(to.clone());
            }
            Op::Fsync(d) | Op::Fatomic(d) if self.model.kind(d) == Some(Kind::Dir) => {
                let prefix = if d == "/" {
                    "/".to_string()
                } else {
                    format!("{d}/")
                };
                self.fresh
                    .retain(|f| !f.starts_with(&prefix) || f[prefix.len()..].contains('/'));
            }
            Op::Sync => self.fresh.clear(),
            _ => {}
        }
    }

    /// Notes the content every file `op` changed has now as a version it
    /// may have on the media later. A file's content reaches the media
    /// not only at its own persistence points: in MQFS a transaction of
    /// another file can carry its inode (entanglement, 5.2) and, in
    /// ordered mode, its data with it; so an atomic sync promises one of
    /// the contents the file had between operations, never a mixture. A
    /// rename carries the history of the file to its new name (the old
    /// target's history stays: the rename may not be durable).
    fn note_versions(&mut self, op: &Op) {
        if let Op::Rename(from, to) = op {
            let moved = self.versions.get(from).cloned().unwrap_or_default();
            let dst = self.versions.entry(to.clone()).or_default();
            for c in moved {
                if !dst.contains(&c) {
                    dst.push(c);
                }
            }
        }
        for p in self.changed(op) {
            if self.model.kind(&p) != Some(Kind::File) {
                continue;
            }
            if let Some(c) = self.model.shared_content(&p) {
                let v = self.versions.entry(p).or_default();
                if !v.contains(&c) {
                    v.push(c);
                }
            }
        }
    }

    /// An operation `id` ended after `end` trace entries.
    /// `at` says where the operation is in the workload (for reports);
    /// `r` holds what fstat found.
    fn end(&mut self, op: &Op, r: Result<Option<mqfs::Attr>, FsError>, id: OpId, end: usize, at: &str) {
        // A refused operation promises nothing.
        self.promises.end(id, end, r.is_ok());
        let stat = match r {
            Err(e) => {
                self.refused.push((format!("{op} ({at})"), errno_text(&e)));
                return;
            }
            Ok(stat) => stat,
        };
        if let (Op::Fstat(fd), Some(a)) = (op, stat) {
            let node = self.model.fd_node(*fd);
            let size = node.and_then(|n| self.model.file_size(n));
            let links = node.map_or(0, |n| self.model.names_of(n).len());
            if size != Some(a.size) || links != usize::from(a.links) {
                self.mismatches.push(format!(
                    "{op} ({at}): size {} and {} link(s), the model says {size:?} and {links}",
                    a.size, a.links
                ));
            }
        }
        // A name first made here marks the order of the barriers before it.
        if let (Some(made), Some(start)) = (op.made_name(), self.promises.start_of(id)) {
            if !self.named.contains(made) {
                self.promises.ordered_by(made, start, end);
            }
        }
        self.model.apply(op);
        // Names appear only where an operation makes one (a renamed
        // directory brings its subtree along).
        if let Some(made) = op.made_name() {
            self.named.insert(made.to_string());
            if matches!(op, Op::Rename(..)) {
                let under = format!("{made}/");
                let moved = self.model.names().into_iter().map(|(p, _)| p);
                self.named.extend(moved.filter(|p| p.starts_with(&under)));
            }
        }
        if let Op::Setxattr(p, name, len, seed, _) = op {
            // The model's refusal rules (Model::xattrs_after_set) must
            // agree with the file system's.
            let set = self.model.lookup(p).map(|id| self.model.xattrs_of(id));
            if set.as_ref().and_then(|x| x.get(name)) != Some(&xattr_value(*len, *seed)) {
                self.mismatches
                    .push(format!("{op} ({at}): set, but the model refuses it"));
            }
        }
        if !op.changed_paths().is_empty() {
            let states = self.model.states(&self.model.affected(op));
            self.promises.settled(&states);
        }
        self.track_names(op);
        match op {
            Op::Dwrite(p, ..) | Op::Sfr(p, ..) => {
                self.written_in_place.extend(self.model.lookup(p));
            }
            Op::Sync => self.written_in_place.clear(),
            _ => {
                if let Some((p, kind)) = self.sync_target(op) {
                    if !self.promises.atomic_only(kind) {
                        if let Some(n) = self.model.lookup(&p) {
                            self.written_in_place.remove(&n);
                        }
                    }
                }
            }
        }
        self.note_versions(op);
        if let Some((p, kind)) = self.sync_target(op) {
            let p = &p;
            if !self.promises.atomic_only(kind) && !self.promises.overlapped(id, p) {
                let data_only = matches!(kind, SyncKind::Fdatasync | SyncKind::Fdataatomic);
                let name_durable = !self.fresh.contains(p);
                if !data_only {
                    self.fresh.remove(p);
                }
                let state = match self.model.kind(p) {
                    Some(Kind::File) => Some(Durable::States(file_durable(p, self.model.state(p)))),
                    Some(Kind::Dir) => {
                        let names: Vec<String> = self
                            .model
                            .entries(p)
                            .unwrap_or_default()
                            .into_keys()
                            .map(|n| {
                                if p == "/" {
                                    format!("/{n}")
                                } else {
                                    format!("{p}/{n}")
                                }
                            })
                            .collect();
                        Some(Durable::States(dir_durable(
                            p,
                            self.model.state(p),
                            self.model.states(&names),
                        )))
                    }
                    _ => None,
                };
                if let Some(state) = state {
                    self.promises
                        .synced(id, kind, p, state, name_durable, op.to_string());
                }
            }
            if let Some(c) = self.model.shared_content(p) {
                self.versions.entry(p.clone()).or_default().push(c);
            }
        }
        if matches!(op, Op::Sync) {
            for (p, c) in self.model.files() {
                self.versions.entry(p).or_default().push(c);
            }
            self.promises
                .synced_tree(id, tree_durable(self.model.all_states(), None), op.to_string());
        }
        // A durable sync makes the barriers returned before it began
        // durable (HoraeFS waits for every earlier transaction).
        if op.is_sync() && !op.is_barrier() {
            if let Some(start) = self.promises.start_of(id) {
                self.promises.durable_from(start, end);
            }
        }
    }
}
