//! HoRAE's own claims (Liao et al., "Write Dependency Disentanglement with
//! HoRAE", OSDI '20, section 6), measured on the simulator's drives and
//! reported in a section of their own, apart from the ccNVMe paper's count:
//!
//! - **H5** (6.2, Figure 9): ordered random 4 KiB writes over one stream,
//!   on one and several drives, HoRAE against vanilla (each write waits for
//!   its completion and a FLUSH before the next). BarrierIO is not
//!   modelled: it needs a barrier-compliant drive that keeps the order of
//!   barrier writes in its cache and media, which no drive profile has
//!   (the paper itself had none and added 5% to BarrierFS's software path,
//!   6.1); the claim is listed as not measured.
//! - **H6** (6.2, "Analysis"): the per-request path of a 4 KiB ordered
//!   write split into its parts, each read off the simulation's clock and
//!   its CPU accounting ([`pcie_sim::Core::stats`]) around the calls that
//!   do the work, not taken from the profile.
//! - **H8, H9** (6.3, Figure 10): Figure 11's allocating appends with
//!   durability (fsync) and ordering (ext4 mounted `nobarrier`, HoraeFS
//!   `fbarrier`) on one drive (H8, Figure 10(b)) and on a volume striped
//!   over two drives (H9, Figure 10(c); `mqfs::volume`, md RAID 0, ext4's
//!   commit record flushing both drives as md does); the joint FLUSH
//!   against a serialized one (HFS-PF against HFS-SF,
//!   `ccnvme::DriverProfile::horae_flush`) on the same volume, and at the
//!   ordering layer as a side experiment.
//! - **H11** (6.4, Figure 11): 4 KiB in-place overwrites of a preallocated
//!   file per thread ([`super::append::Pattern::Overwrite`]), each followed
//!   by fsync (durability) or the ordering primitive, ext4 against HoraeFS
//!   whose in-place writes the ordering layer redirects to the p-area
//!   (`ccnvme::horae::redirect`: prepare write, eager or lazy commit
//!   write), over p-area sizes and without one ([`overwrites`]); and in
//!   the data-journaling mode (ext4's `data=journal`,
//!   `mqfs::FsProfile::data_journal`: the overwritten blocks go to the
//!   journal, H11.3). The paper ran SSD C (Intel DC P3700), which has no
//!   profile; this runs on the section's drive.
//! - **H12** (6.5): forced shutdowns of Varmail on HoraeFS at seeded
//!   instants, each recovered and checked, recovery timed.
//!
//! The drive is the Intel 750 profile, the paper's SSD B (Table 2): the
//! only profile of a drive the paper used; it has power-loss protection
//! as B and C have, so the block layer drops FLUSH on it as on theirs.

use std::rc::Rc;

use ccnvme::horae::{OrderedWrite, OrderingQueue, StreamParams, Submitters, ORDERING_QUEUE};
use ccnvme::{Bio, BlockDevice, FlushIssue, ProbeOptions};
use mqfs::testing::machine_with_drives;
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::{Drive, SsdProfile};
use pcie_sim::{EventKind, Executor, HostAddr, Machine, Purpose, SimDuration, TraceMode};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mqfs::mount::{mount, probe_options};
use mqfs::testing::machine_after;
use mqfs::{Ctx, FsProfile, Mode};
use nvme_ctrl::{Image, Media, BLOCK};

use super::append::{measure, Job, Point};
use super::common::{mean, BenchResult, Rig, Rng, Span, System};
use super::output::Table;
use super::report::{f, side_verdict, Check, FigureOut, Kind};
use super::varmail;

/// Blocks of each drive the random writes spread over: 1 GiB, Figure 9's
/// span ("random writes over 1 GB", HoRAE's H5).
const SPAN_BLOCKS: u64 = 1 << 18;

/// The sweep.
#[derive(Clone, Debug)]
pub struct Params {
    /// Ordered writes per H5 point and per H6 breakdown.
    pub writes: u64,
    /// Drive counts of H5 (one stream, writes round-robin over them).
    pub drives: Vec<usize>,
    /// Threads of the file-system runs (H8, H9).
    pub fs_threads: Vec<usize>,
    /// Simulated time per file-system point.
    pub fs_span: Span,
    /// Simulated time per point of the several-drive runs (H9): long
    /// enough to hold many syncs of [`flush_drive`], whose FLUSH costs a
    /// flash program (1 ms).
    pub striped_span: Span,
    /// Rounds of the joint-FLUSH experiment (H9.3).
    pub flush_rounds: u64,
    /// Forced shutdowns of H12 (the paper's 30).
    pub shutdowns: u64,
    /// Threads of the in-place update runs (H11), each overwriting its own
    /// file.
    pub ipu_threads: Vec<usize>,
    /// Each H11 thread's file, in 4 KiB blocks (the paper: one 10 GB
    /// file; scaled down to the simulated device and time).
    pub ipu_file_blocks: u64,
    /// HoraeFS's p-area in the ordered-mode runs (H11.1, H11.2; HoRAE
    /// Figure 11(a), whose size the paper does not give), in blocks: small
    /// enough to fill during the warm-up and many times inside the window,
    /// so the window holds the eager commit writes of a long run (the
    /// paper's 10 GB of overwrites) and not one burst of them more or less.
    pub ipu_p_area: u64,
    /// HoraeFS p-area sizes of the H11 sweep (HoRAE Figure 11(b)), in
    /// blocks, smallest first; HoraeFS also runs without one (0) as the
    /// reference without redirection.
    pub p_areas: Vec<u64>,
    /// Simulated time per H11 point: a warm-up long enough for the largest
    /// p-area of the sweep to fill (checked by the commit-read column).
    pub ipu_span: Span,
}

impl Params {
    /// The full sweep: one, two and four drives.
    pub fn full() -> Params {
        Params {
            writes: 4096,
            drives: vec![1, 2, 4],
            fs_threads: vec![1, 2, 4, 8, 12],
            fs_span: Span::ms(5, 10),
            striped_span: Span::ms(20, 200),
            flush_rounds: 1024,
            shutdowns: 30,
            ipu_threads: vec![1, 4, 8],
            ipu_file_blocks: 1 << 13,
            ipu_p_area: 64,
            p_areas: vec![16, 64, 256, 1024],
            ipu_span: Span::ms(40, 40),
        }
    }

    /// A smoke-test sweep.
    pub fn quick() -> Params {
        Params {
            writes: 512,
            drives: vec![1, 2],
            fs_threads: vec![1, 4],
            fs_span: Span::ms(1, 2),
            striped_span: Span::ms(5, 20),
            flush_rounds: 128,
            shutdowns: 3,
            ipu_threads: vec![4],
            ipu_file_blocks: 2048,
            ipu_p_area: 64,
            p_areas: vec![16, 64, 256],
            ipu_span: Span::ms(3, 6),
        }
    }
}

/// The drive of every HoRAE experiment (see the module doc).
pub fn drive() -> SsdProfile {
    SsdProfile::intel_750()
}

/// An I/O stack ordering one stream of writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    /// Linux without HoRAE: an ordered write is sent only after the one
    /// before it completed and a FLUSH after it completed (the FLUSH is
    /// dropped by the block layer on a drive without a volatile cache).
    Vanilla,
    /// HoRAE: `olayer_submit_bio` (the entry and tail persistent in the
    /// PMR, then the write submitted) and on; one joint FLUSH at the end.
    Horae,
}

impl Stack {
    /// Name for tables.
    pub fn label(self) -> &'static str {
        match self {
            Stack::Vanilla => "vanilla",
            Stack::Horae => "HORAE",
        }
    }
}

/// One H5 point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct H5Point {
    /// The stack.
    pub stack: Stack,
    /// Drives the stream spans.
    pub drives: usize,
    /// Ordered writes per second.
    pub iops: f64,
    /// MB/s of 4 KiB writes.
    pub mbps: f64,
}

/// The per-request parts of one 4 KiB ordered write (H6), means in
/// microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Breakdown {
    /// HoRAE's ordering layer: `append_writes` (ordering metadata built,
    /// the entry and the tail persistent in the PMR).
    pub ordering: f64,
    /// The block layer and driver: `BlockDevice::submit` until the command
    /// is in the submission queue and the doorbell rung.
    pub block: f64,
    /// From the submission's return to the waiting thread running again:
    /// DMA of the data, the drive, the completion, the interrupt handler
    /// and the wake-up.
    pub device: f64,
    /// Of `block`, the share the submitting core was busy (CPU
    /// accounting: kernel time over elapsed time).
    pub block_cpu_share: f64,
    /// Of `ordering`, the share the core was busy.
    pub ordering_cpu_share: f64,
    /// A vanilla thread's ordered writes per second (write and wait, one
    /// after the other, without the FLUSH).
    pub vanilla_iops: f64,
    /// HoRAE's caller time per ordered write (the ordering layer and the
    /// hand-over to the background submitter, in the caller's context), us.
    pub horae_caller: f64,
    /// Posted MMIO writes to the ordering queue per HoRAE write (bus
    /// counters: entries, tails, `dr` bits).
    pub oq_writes: f64,
    /// Non-posted MMIO reads to the ordering queue per HoRAE write (the
    /// zero-length reads that make each write persistent).
    pub oq_reads: f64,
}

/// A machine with `drives` drives of `profile`, probed for `stack`.
fn rig(
    profile: &SsdProfile,
    drives: usize,
    stack: Stack,
) -> BenchResult<(Executor, Machine, Vec<Rc<BlockDevice>>)> {
    rig_with(
        profile,
        drives,
        stack,
        FlushIssue::Joint,
        TraceMode::Off,
        Read::Kept,
    )
}

/// Whether the ordering queue's persistent MMIO writes end in HoRAE 5.5's
/// zero-length read (the model's default) or without it, as HoRAE's
/// released module runs them (`DriverFaults::no_flush_read`,
/// `docs/decisions.md` H18: a side experiment, not crash-consistent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The read after each persistent write.
    Kept,
    /// No read.
    Left,
}

/// [`rig`] with the joint FLUSH's FLUSHes sent as `flush` says, the bus
/// trace kept as `trace` says, and the flushing read as `read` says.
fn rig_with(
    profile: &SsdProfile,
    drives: usize,
    stack: Stack,
    flush: FlushIssue,
    trace: TraceMode,
    read: Read,
) -> BenchResult<(Executor, Machine, Vec<Rc<BlockDevice>>)> {
    let ds = (0..drives)
        .map(|_| Drive::fresh(profile.clone(), SPAN_BLOCKS))
        .collect();
    let (ex, m, _) = machine_with_drives(ds, 2, trace, 21);
    let mut opts = ProbeOptions {
        ccnvme: false,
        horae: stack == Stack::Horae,
        ..ProbeOptions::default()
    };
    opts.profile.horae_flush = flush;
    opts.profile.faults.no_flush_read = read == Read::Left;
    let mut devs = Vec::new();
    for port in 0..drives {
        let (m2, o) = (m.clone(), opts.clone());
        let port = u8::try_from(port).map_err(|_| crate::Error::Invalid(format!("{drives} drives")))?;
        devs.push(ex.block_on(async move { BlockDevice::probe(&m2, port, o).await })??);
    }
    Ok((ex, m, devs))
}

/// The one stream of the ordering-layer experiments, the background
/// submitter (Horae 6.2) of its one caller (on core 0) on the machine's
/// second core.
fn stream() -> StreamParams {
    StreamParams::SINGLE.with_submitters(Submitters { first: 1, count: 1 })
}

/// One host page of data.
fn page(m: &Machine) -> BenchResult<Vec<HostAddr>> {
    let p = m.memory().alloc(4096)?;
    m.memory().write(p, &[0x5a; 4096])?;
    Ok(vec![p])
}

/// The random block of write `i` (the same sequence for every stack).
fn lba(rng: &mut Rng) -> u64 {
    rng.below(SPAN_BLOCKS)
}

/// H5: `n` ordered random 4 KiB writes from one thread, one stream,
/// round-robin over `drives` drives of `profile`, with `stack`; then all
/// durable. Throughput over the whole run.
pub fn ordered_writes(profile: &SsdProfile, drives: usize, stack: Stack, n: u64) -> BenchResult<H5Point> {
    ordered_writes_with(profile, drives, stack, n, Read::Kept)
}

/// [`ordered_writes`] with the flushing read as `read` says.
pub fn ordered_writes_with(
    profile: &SsdProfile,
    drives: usize,
    stack: Stack,
    n: u64,
    read: Read,
) -> BenchResult<H5Point> {
    let (ex, m, devs) = rig_with(profile, drives, stack, FlushIssue::Joint, TraceMode::Off, read)?;
    let m2 = m.clone();
    let us = ex.block_on(async move {
        let pg = page(&m2)?;
        let q = match stack {
            Stack::Horae => Some(OrderingQueue::init_stream(&devs, stream()).await?),
            Stack::Vanilla => None,
        };
        let mut rng = Rng::new(5);
        let t0 = m2.sim().now();
        let mut done = Vec::new();
        for i in 0..n {
            let d = (i % drives as u64) as usize;
            let bio = Bio::write(lba(&mut rng), pg.clone());
            match &q {
                Some(q) => done.push((d, q.submit_bio(0, d as u8, &bio).await?)),
                None => {
                    devs[d].submit_wait(0, &bio).await?;
                    devs[d].submit_wait(0, &Bio::flush()).await?;
                }
            }
        }
        for (d, x) in &done {
            let s = devs[*d].wait(0, x).await;
            if !s.is_success() {
                return Err(crate::Error::Invalid(format!("an ordered write failed: {s:?}")));
            }
        }
        if let Some(q) = &q {
            q.flush(0).await?;
        }
        Ok(m2.sim().now().since(t0).as_us_f64())
    })??;
    let iops = n as f64 / us * 1e6;
    Ok(H5Point {
        stack,
        drives,
        iops,
        mbps: iops * 4096.0 / 1e6,
    })
}

/// Time and kernel CPU time of core 0 around one awaited call, in us.
struct Stopwatch {
    t: pcie_sim::SimTime,
    cpu: SimDuration,
}

impl Stopwatch {
    fn start(m: &Machine) -> BenchResult<Stopwatch> {
        Ok(Stopwatch {
            t: m.sim().now(),
            cpu: m.core(0)?.stats().kernel,
        })
    }

    /// (elapsed us, busy us) since the start.
    fn read(&self, m: &Machine) -> BenchResult<(f64, f64)> {
        let cpu = m.core(0)?.stats().kernel - self.cpu;
        Ok((m.sim().now().since(self.t).as_us_f64(), cpu.as_us_f64()))
    }
}

/// H6: the parts of a 4 KiB ordered write on one drive of `profile`, each
/// timed around the call that does it: `n` vanilla writes (submit, then
/// wait) and `n` HoRAE ordered writes (append, then submit).
pub fn breakdown(profile: &SsdProfile, n: u64) -> BenchResult<Breakdown> {
    breakdown_with(profile, n, Read::Kept)
}

/// [`breakdown`] with the flushing read of the ordering queue's writes as
/// `read` says.
pub fn breakdown_with(profile: &SsdProfile, n: u64, read: Read) -> BenchResult<Breakdown> {
    let mut b = Breakdown::default();
    // Vanilla: block layer, then DMA + device + interrupt.
    let (ex, m, devs) = rig(profile, 1, Stack::Vanilla)?;
    let m2 = m.clone();
    let (block, block_cpu, device, total) = ex.block_on(async move {
        let pg = page(&m2)?;
        let mut rng = Rng::new(5);
        let (mut block, mut block_cpu, mut device) = (Vec::new(), Vec::new(), Vec::new());
        let t0 = m2.sim().now();
        for _ in 0..n {
            let bio = Bio::write(lba(&mut rng), pg.clone());
            let w = Stopwatch::start(&m2)?;
            let d = devs[0].submit(0, &bio).await?;
            let (e, c) = w.read(&m2)?;
            let w = Stopwatch::start(&m2)?;
            let s = devs[0].wait(0, &d).await;
            if !s.is_success() {
                return Err(crate::Error::Invalid(format!("a write failed: {s:?}")));
            }
            block.push(e);
            block_cpu.push(c);
            device.push(w.read(&m2)?.0);
        }
        Ok((block, block_cpu, device, m2.sim().now().since(t0).as_us_f64()))
    })??;
    b.block = mean(&block);
    b.block_cpu_share = mean(&block_cpu) / b.block.max(1e-12);
    b.device = mean(&device);
    b.vanilla_iops = n as f64 / total * 1e6;
    // HoRAE: the ordering layer, then the hand-over to the submitter, in
    // the caller.
    let (ex, m, devs) = rig_with(profile, 1, Stack::Horae, FlushIssue::Joint, TraceMode::Off, read)?;
    let m2 = m.clone();
    let (ordering, ordering_cpu, caller, oq) = ex.block_on(async move {
        let pg = page(&m2)?;
        let q = OrderingQueue::init_stream(&devs, stream()).await?;
        let before = m2.counters();
        let mut rng = Rng::new(5);
        let (mut ordering, mut ordering_cpu, mut caller, mut done) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            let l = lba(&mut rng);
            let w = Stopwatch::start(&m2)?;
            let e = q.append_writes(0, &[OrderedWrite::fresh(l, 1)]).await?;
            let (t, c) = w.read(&m2)?;
            let id = e
                .entry(0)
                .ok_or_else(|| crate::Error::Invalid("an epoch of one write has no entry".into()))?;
            done.push(q.submit(0, id, &Bio::write(l, pg.clone())).await?);
            ordering.push(t);
            ordering_cpu.push(c);
            caller.push(w.read(&m2)?.0);
        }
        for x in &done {
            let s = devs[0].wait(0, x).await;
            if !s.is_success() {
                return Err(crate::Error::Invalid(format!("an ordered write failed: {s:?}")));
            }
        }
        let c = m2.counters().since(&before);
        let per = |k: EventKind, p: Purpose| c.get(k, p).ops as f64 / n.max(1) as f64;
        // The zero-length reads that make the queue's writes persistent are
        // counted as FLUSH_READ (`Core::persist_wc`); nothing else in this
        // loop persists MMIO writes.
        let oq = (
            per(EventKind::MmioWrite, ORDERING_QUEUE),
            per(EventKind::MmioRead, Purpose::FLUSH_READ),
        );
        Ok((ordering, ordering_cpu, caller, oq))
    })??;
    (b.oq_writes, b.oq_reads) = oq;
    b.ordering = mean(&ordering);
    b.ordering_cpu_share = mean(&ordering_cpu) / b.ordering.max(1e-12);
    b.horae_caller = mean(&caller);
    Ok(b)
}

/// The systems of HoRAE Figure 10(b): durability (fsync) and ordering
/// (`nobarrier` fsync for Ext4, fbarrier for HoraeFS).
pub const FS_SYSTEMS: [System; 4] = [System::Ext4, System::Ext4Od, System::HoraeFs, System::HoraeFsOd];

/// The drive of the several-drive runs (H9, HoRAE Figure 10(c), "the
/// joint flush allows physically independent devices to perform flushing
/// concurrently"): a FLUSH that is dropped costs nothing to serialize, so
/// this one needs a volatile cache, and of HoRAE's drives only its SATA SSD
/// (A, the Samsung 860 PRO) has one (B and C are power-loss protected). Its
/// cache programs on demand, so a FLUSH pays "raw flash programming delay
/// (1 ms)" (HoRAE 6.3; [`nvme_ctrl::Destage::OnDemand`]).
pub fn flush_drive() -> SsdProfile {
    SsdProfile::samsung_860_pro()
}

/// H9.3 at the ordering layer, on two drives of [`flush_drive`]: `rounds`
/// rounds of one thread, each one ordered 4 KiB write to each drive
/// (`olayer_submit_bio`), both waited for, then durability: the stream's
/// FLUSH, its FLUSHes sent as `issue` says (`ccnvme::DriverProfile::horae_flush`:
/// at once, HoRAE 5.3, or one after another, HFS-SF). Each drive's FLUSH
/// is timed from the bus trace, from the start of the durability step to
/// the drive's `FLUSH_DONE`.
pub fn flush_rounds(issue: FlushIssue, rounds: u64) -> BenchResult<FlushRun> {
    let (ex, m, devs) = rig_with(
        &flush_drive(),
        2,
        Stack::Horae,
        issue,
        TraceMode::Events,
        Read::Kept,
    )?;
    let m2 = m.clone();
    let us = ex.block_on(async move {
        let pg = page(&m2)?;
        let q = OrderingQueue::init_stream(&devs, stream()).await?;
        let mut rng = Rng::new(9);
        let t0 = m2.sim().now();
        let (mut phase, mut per_drive) = (Vec::new(), vec![Vec::new(); devs.len()]);
        for _ in 0..rounds {
            let mut done = Vec::new();
            for d in 0..2u8 {
                let bio = Bio::write(lba(&mut rng), pg.clone());
                done.push((d, q.submit_bio(0, d, &bio).await?));
            }
            for (d, x) in &done {
                let s = devs[*d as usize].wait(0, x).await;
                if !s.is_success() {
                    return Err(crate::Error::Invalid(format!("an ordered write failed: {s:?}")));
                }
            }
            let (f0, from) = (m2.sim().now(), m2.trace().entries().len());
            q.flush(0).await?;
            phase.push(m2.sim().now().since(f0).as_us_f64());
            for e in m2.trace().entries()[from..]
                .iter()
                .filter(|e| e.kind == EventKind::Device && e.code == FLUSH_DONE)
            {
                if let Some(v) = per_drive.get_mut(e.source as usize) {
                    v.push(e.time.since(f0).as_us_f64());
                }
            }
        }
        let total = m2.sim().now().since(t0).as_us_f64();
        Ok((
            total,
            mean(&phase),
            per_drive.iter().map(|v| mean(v)).collect::<Vec<_>>(),
        ))
    })??;
    let (total, flush_us, per_drive_us) = us;
    Ok(FlushRun {
        rounds_per_sec: rounds as f64 / total * 1e6,
        flush_us,
        per_drive_us,
    })
}

/// One run of the joint-FLUSH experiment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushRun {
    /// Rounds per second.
    pub rounds_per_sec: f64,
    /// Mean time of a round's durability step (us).
    pub flush_us: f64,
    /// Mean time from the start of the durability step to each drive's
    /// FLUSH completing (us), by drive.
    pub per_drive_us: Vec<f64>,
}

/// H9 (HoRAE 6.3, Figure 10(c)): the allocating 4 KiB appends of H8,
/// `threads` threads, on a volume striped over two drives of
/// [`flush_drive`] (md RAID 0): HoraeFS with the joint FLUSH (HFS-PF) and
/// with the serialized one (HFS-SF), HoraeFS's fbarrier (HFS-OD), ext4's
/// fsync (its commit record's PREFLUSH flushing both drives, as md does)
/// and ext4 mounted `nobarrier` (ext4-OD).
pub fn striped_flush(threads: usize, span: Span) -> BenchResult<StripedFlushPoint> {
    let ssd = flush_drive();
    let run = |system: System, flush: FlushIssue| {
        let mut base = Rig::new(system.mode(), ssd.clone(), threads);
        base.drives = 2;
        base.fs.driver.horae_flush = flush;
        measure(system, &ssd, &base, threads, Job::allocating(4096), span)
    };
    Ok(StripedFlushPoint {
        threads,
        joint: run(System::HoraeFs, FlushIssue::Joint)?,
        serial: run(System::HoraeFs, FlushIssue::Serialized)?,
        hfs_od: run(System::HoraeFsOd, FlushIssue::Joint)?,
        ext4: run(System::Ext4, FlushIssue::Joint)?,
        ext4_od: run(System::Ext4Od, FlushIssue::Joint)?,
    })
}

/// One thread count of [`striped_flush`].
#[derive(Clone, Debug)]
pub struct StripedFlushPoint {
    /// Threads.
    pub threads: usize,
    /// HFS-PF: HoraeFS's fsync with the joint FLUSH.
    pub joint: Point,
    /// HFS-SF: the serialized FLUSH.
    pub serial: Point,
    /// HFS-OD: HoraeFS's fbarrier.
    pub hfs_od: Point,
    /// ext4's fsync.
    pub ext4: Point,
    /// ext4 mounted `nobarrier`.
    pub ext4_od: Point,
}

impl StripedFlushPoint {
    /// HFS-PF / HFS-SF IOPS.
    pub fn ratio(&self) -> Option<f64> {
        ratio_of(&self.joint, &self.serial)
    }

    /// HFS-PF / ext4 IOPS (durability).
    pub fn durability(&self) -> Option<f64> {
        ratio_of(&self.joint, &self.ext4)
    }

    /// HFS-OD / ext4-OD IOPS (ordering).
    pub fn ordering(&self) -> Option<f64> {
        ratio_of(&self.hfs_od, &self.ext4_od)
    }
}

/// The (HoraeFS, ext4) pairs of `points` at each thread count, by `key`
/// (a point's system and threads).
fn hfs_ext4<T>(points: &[T], key: impl Fn(&T) -> (System, usize)) -> Vec<(&T, &T)> {
    points
        .iter()
        .filter(|h| key(h).0 == System::HoraeFs)
        .filter_map(|h| {
            let t = key(h).1;
            let e = points.iter().find(|e| key(e) == (System::Ext4, t))?;
            Some((h, e))
        })
        .collect()
}

/// `a`'s IOPS over `b`'s.
fn ratio_of(a: &Point, b: &Point) -> Option<f64> {
    (b.ops_per_sec > 0.0).then(|| a.ops_per_sec / b.ops_per_sec)
}

/// The systems of HoRAE Figure 11 (in-place updates, ordered mode): ext4
/// and HoraeFS with durability (DR, fsync) and ordering (OD: ext4 mounted
/// `nobarrier`, HoraeFS fbarrier).
pub const IPU_SYSTEMS: [System; 4] = [System::Ext4, System::HoraeFs, System::Ext4Od, System::HoraeFsOd];

/// What a system's sync guarantees (HoRAE 6.1: DR and OD).
pub fn guarantee(s: System) -> &'static str {
    match s {
        System::Ext4Od | System::HoraeFsOd => "ordering",
        _ => "durability",
    }
}

/// One H11 point: in-place 4 KiB overwrites with a sync after each
/// (HoRAE 6.4, Figure 11).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IpuPoint {
    /// The system (its sync: [`guarantee`]).
    pub system: System,
    /// Threads, each overwriting its own file.
    pub threads: usize,
    /// The p-area asked of mkfs (`None`: its default; ext4 has none).
    pub asked: Option<u64>,
    /// The p-area mkfs reserved, in blocks (0: none, in-place writes go
    /// home).
    pub p_area_blocks: u64,
    /// Overwrites (each with its sync) per second.
    pub ops_per_sec: f64,
    /// Mean latency of the sync, us.
    pub sync_us: f64,
    /// 4 KiB blocks the device fetched per overwrite (data, its prepare
    /// and commit writes, journal, metadata).
    pub blocks_per_op: f64,
    /// Prepare writes (redirected to the p-area) per overwrite.
    pub redirected_per_op: f64,
    /// Blocks the commit writes read back from the p-area (and wrote
    /// home) per overwrite, counted by the ordering layer.
    pub commit_reads_per_op: f64,
}

/// HFS (fbarrier) / ext4 (nobarrier fsync) IOPS on in-place overwrites,
/// HoRAE 6.4 (H11.2); H11.4 takes it as the bound of "dramatically".
const H11_ORDERING_RATIO: f64 = 1.5;

/// H11: `threads` threads of 4 KiB in-place overwrites of their own file
/// of `file_blocks` blocks ([`Pattern::Overwrite`](super::append::Pattern)),
/// each followed by `system`'s sync, on the drive of [`drive`], HoraeFS
/// with a p-area of `p_area` blocks (`None`: mkfs's default), for `span`.
pub fn overwrites(
    system: System,
    threads: usize,
    p_area: Option<u64>,
    file_blocks: u64,
    span: Span,
) -> BenchResult<IpuPoint> {
    overwrites_on(&drive(), system, threads, p_area, file_blocks, span, |_| {})
}

/// [`overwrites`] on the drive `ssd`, with the file system's profile
/// changed by `tune` (side experiments: JBD2's BH_Shadow off, no
/// zero-length read, reads that cost nothing; `data=journal` for H11.3).
fn overwrites_on(
    ssd: &SsdProfile,
    system: System,
    threads: usize,
    p_area: Option<u64>,
    file_blocks: u64,
    span: Span,
    tune: impl FnOnce(&mut FsProfile),
) -> BenchResult<IpuPoint> {
    let mut base = Rig {
        p_area_blocks: p_area,
        ..Rig::new(system.mode(), ssd.clone(), threads)
    };
    tune(&mut base.fs);
    let pt = measure(
        system,
        ssd,
        &base,
        threads,
        Job::overwrite(4096, file_blocks),
        span,
    )?;
    Ok(IpuPoint {
        system,
        threads,
        asked: p_area,
        p_area_blocks: pt.p_area_blocks,
        ops_per_sec: pt.ops_per_sec,
        sync_us: pt.sync.mean,
        blocks_per_op: pt.blocks_per_op,
        redirected_per_op: pt.redirected_per_op,
        commit_reads_per_op: pt.committed_per_op,
    })
}

/// One forced shutdown and recovery (H12).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shutdown {
    /// Simulated time the workload ran before the power failed, us.
    pub at_us: f64,
    /// Loading the ordering queue's pointers and entries from the PMR
    /// (`mqfs::horae_recovery`: the superblock for the stream's regions,
    /// then the queue's whole region, `ccnvme::RegionLoad::Whole`; it
    /// writes nothing), us.
    pub load_us: f64,
    /// The ring the load read, KiB.
    pub ring_kib: f64,
    /// Durable prepare writes of redirected in-place updates the mount's
    /// recovery commits home (Horae 5.5's commit write).
    pub commits: usize,
    /// The mount after the load, as measured: its own recovery (which
    /// loads the region again), discarding the entries past the durable
    /// point, resetting the queue, replaying the journal, us.
    pub replay_us: f64,
    /// fsck found the recovered file system clean.
    pub clean: bool,
}

/// H12: Varmail on HoraeFS (the first fsync of each loop an fbarrier) on
/// the drive of [`drive`], stopped by a power failure at a seeded instant
/// of simulated time, then recovered on a new machine: the drive keeps
/// every block it had received (its cache is power-loss protected) and
/// the PMR every write that had arrived; what was still in a core's
/// write-combining buffer or on the link is lost (the least of the power
/// model's states at that instant). Recovery is timed in simulated time;
/// then the file system is unmounted and checked.
pub fn shutdown(seed: u64, vm: &varmail::Params) -> BenchResult<Shutdown> {
    let mut rng = Rng::new(seed);
    // The instant: uniform in the workload's span after its warm-up.
    let at = vm.span.warmup + SimDuration::from_ps(rng.below(vm.span.length.as_ps().max(1)));
    let p = varmail::Params {
        span: Span {
            warmup: at,
            length: SimDuration::from_ns(1),
        },
        barrier_first: true,
        ..vm.clone()
    };
    let ssd = drive();
    let (t, _) = varmail::run(System::HoraeFs, &ssd, &p)?;
    // The power fails: what the drive and the PMR hold now.
    let written: BTreeSet<u64> = t.ctrl.backend().written().into_iter().collect();
    let mut blocks = BTreeMap::new();
    for b in written {
        let mut buf = [0u8; BLOCK];
        t.ctrl.backend().peek(b, &mut buf);
        blocks.insert(b, Arc::new(buf));
    }
    let image = Arc::new(Image::from_blocks(p.blocks, blocks));
    let pmr = t.machine.pmr_image(0);
    drop(t);
    let (ex, m, ctrl) = machine_after(
        ssd,
        Media::cow(image, Default::default()),
        pmr,
        1,
        TraceMode::Off,
        seed,
    );
    let m2 = m.clone();
    let (load_us, ring_kib, commits, replay_us) = ex.block_on(async move {
        let ctx = Ctx::on(0);
        let dev = BlockDevice::probe(&m2, 0, probe_options(Mode::Horae)).await?;
        let t0 = m2.sim().now();
        let rec = mqfs::horae_recovery(std::slice::from_ref(&dev), ctx.core).await?;
        let commits = rec.durable.iter().filter(|e| e.plba.is_some()).count();
        let ring_kib = f64::from(rec.layout.capacity) * 16.0 / 1024.0;
        let t1 = m2.sim().now();
        let fs = mount(&dev, ctx, FsProfile::default()).await?;
        let t2 = m2.sim().now();
        fs.unmount(ctx).await?;
        Ok::<_, crate::Error>((
            t1.since(t0).as_us_f64(),
            ring_kib,
            commits,
            t2.since(t1).as_us_f64(),
        ))
    })??;
    let report = mqfs::fsck(&**ctrl.backend())?;
    Ok(Shutdown {
        at_us: at.as_us_f64(),
        load_us,
        ring_kib,
        commits,
        replay_us,
        clean: report.is_clean(),
    })
}

/// H5.1, H6 and H8.1 again on the drive of HoRAE's measured device part
/// (the one change: [`SsdProfile::write_overhead`]).
#[derive(Clone, Debug, Default)]
pub struct FastDrive {
    /// The drive's per-write overhead in the model's profile, us.
    pub overhead_before_us: f64,
    /// The shortened overhead, us.
    pub overhead_us: f64,
    /// H5 on one drive: vanilla, then HoRAE.
    pub h5: Vec<H5Point>,
    /// H6 on the shortened drive.
    pub h6: Breakdown,
    /// H8's Ext4 and HoraeFS per thread count.
    pub fs: Vec<Point>,
}

/// The one change of an H11 side run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpuVariant {
    /// The drive's reads take 0.1 us of overhead and of media time (the
    /// commit write's read-back of the p-area costs next to nothing).
    FreeReads,
    /// The ordering queue's writes without their zero-length read
    /// (`DriverFaults::no_flush_read`).
    NoFlushRead,
}

impl IpuVariant {
    fn label(self) -> &'static str {
        match self {
            IpuVariant::FreeReads => "reads that cost nothing",
            IpuVariant::NoFlushRead => "no zero-length read",
        }
    }

    /// What the variant takes out, as a verdict names it.
    fn taken_out(self) -> &'static str {
        match self {
            IpuVariant::FreeReads => "the reads' cost",
            IpuVariant::NoFlushRead => "the zero-length read",
        }
    }
}

/// H6 and H5 with the ordering queue's persistent writes made without
/// their zero-length read (the one change).
#[derive(Clone, Debug, Default)]
pub struct NoRead {
    /// H6's parts.
    pub h6: Breakdown,
    /// H5's points, vanilla and HoRAE per drive count.
    pub h5: Vec<H5Point>,
}

/// HoRAE 6.2's device part of a 4 KiB write: "data DMA, device-side
/// processing and interrupt handler consume 8.7 us".
const H6_DEVICE_US: f64 = 8.7;

/// The paper's values the notes measure side experiments against, each
/// also its claim's (one copy): H5.1 HORAE / vanilla on one drive, H6.5
/// vanilla's ordered writes (KIOPS), H8.1 HFS / ext4 and H8.2 HFS-OD /
/// HFS on appends, H11.3 HFS / ext4 under data=journal.
const H5_1: f64 = 4.1;
const H6_5_KIOPS: f64 = 95.0;
const H8_1: f64 = 1.22;
const H8_2: f64 = 1.57;
const H11_3: f64 = 1.60;

/// Everything the section measured.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// H5 points.
    pub h5: Vec<H5Point>,
    /// H6.
    pub h6: Breakdown,
    /// H6 on the Optane 905P (side experiment: the device part follows
    /// the drive, the host parts do not).
    pub h6_optane: Breakdown,
    /// H8: the FIO-style allocating appends per system and threads.
    pub fs: Vec<Point>,
    /// The side experiment of the drive's write latency (H5.1, H6.4, H6.5,
    /// H8.1): the same drive with its per-write overhead shortened by what
    /// H6's device part exceeds HoRAE's measured 8.7 us.
    pub fast_drive: Option<FastDrive>,
    /// The side experiment of the flushing read (H6.2, H6.6, H5.1): H6 and
    /// H5 with the ordering queue's writes made without HoRAE 5.5's
    /// zero-length read (`DriverFaults::no_flush_read`).
    pub no_read: Option<NoRead>,
    /// H8.2's side experiment: HFS and HFS-OD per thread count with every
    /// buffer of a committing transaction given a frozen copy (BH_Shadow
    /// off, `FsProfile::jbd_shadow`; the one change).
    pub fs_unshadowed: Vec<Point>,
    /// H7: the same appends with fsync on one SATA drive
    /// ([`flush_drive`]), ext4 and HoraeFS, per threads.
    pub sata: Vec<Point>,
    /// H9.3 at the ordering layer: (joint, serial) FLUSH runs on two
    /// drives (the side experiment).
    pub flush: (FlushRun, FlushRun),
    /// H9.3 on HoraeFS striped over two drives, per thread count.
    pub striped: Vec<StripedFlushPoint>,
    /// H12: the forced shutdowns.
    pub shutdowns: Vec<Shutdown>,
    /// H11: in-place overwrites per system, threads and p-area.
    pub ipu: Vec<IpuPoint>,
    /// H11's side experiment: HFS-OD at the most threads, per p-area size
    /// of the sweep, with every buffer of a committing transaction given a
    /// frozen copy (BH_Shadow off).
    pub ipu_unshadowed: Vec<IpuPoint>,
    /// H11.3: ext4 and HoraeFS with `data=journal`, their overwrites with
    /// fsync, per thread count.
    pub ipu_dj: Vec<IpuPoint>,
    /// H11.1's and H11.4's side experiments: HFS with the ordered mode's
    /// p-area and HFS-OD with the smallest, per thread count, on a drive
    /// whose reads cost nothing (the commit write's read-back free) and
    /// without the ordering queue's zero-length read: (variant, point).
    pub ipu_side: Vec<(IpuVariant, IpuPoint)>,
    /// H11.3's side experiment: HoraeFS's runs of `ipu_dj` with the
    /// ordering queue's writes made without their zero-length read
    /// (`DriverFaults::no_flush_read`, the one change).
    pub ipu_dj_no_read: Vec<IpuPoint>,
}

impl Results {
    /// Mean over the thread counts of `a`'s IOPS over `b`'s.
    fn fs_ratio(&self, a: System, b: System) -> Option<f64> {
        let v: Vec<f64> = self
            .fs
            .iter()
            .filter(|p| p.system == a)
            .filter_map(|p| {
                let q = self.fs.iter().find(|q| q.system == b && q.threads == p.threads)?;
                (q.ops_per_sec > 0.0).then(|| p.ops_per_sec / q.ops_per_sec)
            })
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    }

    /// The H11 point of `system` with `threads` and p-area `asked` (ext4:
    /// `None`).
    fn ipu(&self, system: System, threads: usize, asked: Option<u64>) -> Option<&IpuPoint> {
        self.ipu
            .iter()
            .find(|q| q.system == system && q.threads == threads && q.asked == asked)
    }

    /// Mean over the H11 thread counts of `a`'s IOPS with p-area `pa` over
    /// `b`'s with p-area `pb`.
    fn ipu_ratio(&self, a: System, pa: Option<u64>, b: System, pb: Option<u64>) -> Option<f64> {
        let v: Vec<f64> = self
            .ipu
            .iter()
            .filter(|q| q.system == a && q.asked == pa)
            .filter_map(|q| {
                let o = self.ipu(b, q.threads, pb)?;
                (o.ops_per_sec > 0.0).then(|| q.ops_per_sec / o.ops_per_sec)
            })
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    }

    fn h5(&self, stack: Stack, drives: usize) -> Option<&H5Point> {
        self.h5.iter().find(|p| p.stack == stack && p.drives == drives)
    }

    /// HoRAE / vanilla on `drives` drives.
    fn speedup(&self, drives: usize) -> Option<f64> {
        let (h, v) = (self.h5(Stack::Horae, drives)?, self.h5(Stack::Vanilla, drives)?);
        (v.iops > 0.0).then(|| h.iops / v.iops)
    }
}

/// Runs every HoRAE experiment.
pub fn run(p: &Params) -> BenchResult<Results> {
    let ssd = drive();
    let mut r = Results::default();
    for &d in &p.drives {
        for stack in [Stack::Vanilla, Stack::Horae] {
            let pt = ordered_writes(&ssd, d, stack, p.writes)?;
            eprintln!(
                "horae H5 {} drive(s) {:<8} {:>7.0} KIOPS {:>7.0} MB/s",
                d,
                stack.label(),
                pt.iops / 1e3,
                pt.mbps
            );
            r.h5.push(pt);
        }
    }
    r.h6 = breakdown(&ssd, p.writes)?;
    r.h6_optane = breakdown(&SsdProfile::optane_905p(), p.writes)?;
    let base = Rig::new(mqfs::Mode::Horae, ssd.clone(), 1);
    for &threads in &p.fs_threads {
        for system in FS_SYSTEMS {
            let pt = measure(system, &ssd, &base, threads, Job::allocating(4096), p.fs_span)?;
            eprintln!(
                "horae H8 {:>2} threads {:<8} {:>8.0} IOPS  sync {:>7.1} us",
                threads,
                system.label(),
                pt.ops_per_sec,
                pt.sync.mean
            );
            r.fs.push(pt);
        }
    }
    let mut unshadowed = base.clone();
    unshadowed.fs.jbd_shadow = false;
    for &threads in &p.fs_threads {
        for system in [System::HoraeFs, System::HoraeFsOd] {
            let pt = measure(
                system,
                &ssd,
                &unshadowed,
                threads,
                Job::allocating(4096),
                p.fs_span,
            )?;
            eprintln!(
                "horae H8 {:>2} threads {:<8} {:>8.0} IOPS  sync {:>7.1} us (no BH_Shadow wait)",
                threads,
                system.label(),
                pt.ops_per_sec,
                pt.sync.mean
            );
            r.fs_unshadowed.push(pt);
        }
    }
    r.fast_drive = Some(fast_drive(&ssd, &r.h6, p)?);
    let mut no_read = NoRead {
        h6: breakdown_with(&ssd, p.writes, Read::Left)?,
        ..NoRead::default()
    };
    for &d in &p.drives {
        for stack in [Stack::Vanilla, Stack::Horae] {
            no_read
                .h5
                .push(ordered_writes_with(&ssd, d, stack, p.writes, Read::Left)?);
        }
    }
    r.no_read = Some(no_read);
    let sata = flush_drive();
    for &threads in &p.fs_threads {
        for system in [System::Ext4, System::HoraeFs] {
            let base = Rig::new(system.mode(), sata.clone(), threads);
            let pt = measure(
                system,
                &sata,
                &base,
                threads,
                Job::allocating(4096),
                p.striped_span,
            )?;
            eprintln!(
                "horae H7 {:>2} threads {:<8} {:>8.0} IOPS  sync {:>7.1} us (SATA)",
                threads,
                system.label(),
                pt.ops_per_sec,
                pt.sync.mean
            );
            r.sata.push(pt);
        }
    }
    let vm = varmail::Params {
        blocks: 1 << 15,
        ..varmail::Params::quick()
    };
    for k in 0..p.shutdowns {
        let s = shutdown(100 + k, &vm)?;
        eprintln!(
            "horae H12 shutdown {k:>2} at {:>7.0} us: load {:>7.1} us, replay {:>8.1} us, fsck {}",
            s.at_us,
            s.load_us,
            s.replay_us,
            if s.clean { "clean" } else { "NOT CLEAN" }
        );
        r.shutdowns.push(s);
    }
    r.flush = (
        flush_rounds(FlushIssue::Joint, p.flush_rounds)?,
        flush_rounds(FlushIssue::Serialized, p.flush_rounds)?,
    );
    for &threads in &p.fs_threads {
        let pt = striped_flush(threads, p.striped_span)?;
        eprintln!(
            "horae H9 {:>2} threads, 2 drives: HFS-PF {:>8.0} IOPS (fsync {:>6.1} us), HFS-SF {:>8.0}, \
             HFS-OD {:>8.0}, ext4 {:>8.0} (fsync {:>6.1} us), ext4-OD {:>8.0}",
            threads,
            pt.joint.ops_per_sec,
            pt.joint.sync.mean,
            pt.serial.ops_per_sec,
            pt.hfs_od.ops_per_sec,
            pt.ext4.ops_per_sec,
            pt.ext4.sync.mean,
            pt.ext4_od.ops_per_sec
        );
        r.striped.push(pt);
    }
    r.ipu = ipu_sweep(p)?;
    if let Some(&th) = p.ipu_threads.last() {
        for &pa in &p.p_areas {
            let q = overwrites_on(
                &drive(),
                System::HoraeFsOd,
                th,
                Some(pa),
                p.ipu_file_blocks,
                p.ipu_span,
                |f| f.jbd_shadow = false,
            )?;
            eprintln!(
                "horae H11 {th:>2} threads {:<8} p-area {:>5} {:>8.0} IOPS (no BH_Shadow)",
                System::HoraeFsOd.label(),
                q.p_area_blocks,
                q.ops_per_sec
            );
            r.ipu_unshadowed.push(q);
        }
    }
    let smallest = p.p_areas.iter().copied().min();
    for variant in [IpuVariant::FreeReads, IpuVariant::NoFlushRead] {
        let ssd = match variant {
            IpuVariant::FreeReads => SsdProfile {
                read_time: SimDuration::from_ns(100),
                read_overhead: SimDuration::from_ns(100),
                ..drive()
            },
            IpuVariant::NoFlushRead => drive(),
        };
        for &threads in &p.ipu_threads {
            for (system, pa) in [
                (System::HoraeFs, Some(p.ipu_p_area)),
                (System::HoraeFsOd, smallest),
            ] {
                let q = overwrites_on(&ssd, system, threads, pa, p.ipu_file_blocks, p.ipu_span, |f| {
                    f.driver.faults.no_flush_read = variant == IpuVariant::NoFlushRead;
                })?;
                eprintln!(
                    "horae H11 {threads:>2} threads {:<8} p-area {:>5} {:>8.0} IOPS ({})",
                    system.label(),
                    q.p_area_blocks,
                    q.ops_per_sec,
                    variant.label()
                );
                r.ipu_side.push((variant, q));
            }
        }
    }
    for &threads in &p.ipu_threads {
        for system in [System::Ext4, System::HoraeFs] {
            // No p-area: data=journal writes no data in place, so nothing
            // is redirected.
            let q = overwrites_on(
                &drive(),
                system,
                threads,
                Some(0),
                p.ipu_file_blocks,
                p.ipu_span,
                |f| f.data_journal = true,
            )?;
            eprintln!(
                "horae H11.3 {threads:>2} threads {:<8} data=journal {:>8.0} IOPS  sync {:>6.1} us  blocks {:.2}",
                system.label(),
                q.ops_per_sec,
                q.sync_us,
                q.blocks_per_op
            );
            r.ipu_dj.push(q);
        }
        let q = overwrites_on(
            &drive(),
            System::HoraeFs,
            threads,
            Some(0),
            p.ipu_file_blocks,
            p.ipu_span,
            |f| {
                f.data_journal = true;
                f.driver.faults.no_flush_read = true;
            },
        )?;
        eprintln!(
            "horae H11.3 {threads:>2} threads {:<8} data=journal {:>8.0} IOPS  sync {:>6.1} us (no flushing read)",
            System::HoraeFs.label(),
            q.ops_per_sec,
            q.sync_us,
        );
        r.ipu_dj_no_read.push(q);
    }
    Ok(r)
}

/// Runs H5.1, H6 and H8.1's systems on `ssd` with its per-write overhead
/// shortened by what `h6`'s device part exceeds HoRAE's 8.7 us (the
/// drive then completes a write as fast as HoRAE measured its drive do;
/// everything else as in the main runs).
fn fast_drive(ssd: &SsdProfile, h6: &Breakdown, p: &Params) -> BenchResult<FastDrive> {
    let excess = SimDuration::from_ns(((h6.device - H6_DEVICE_US).max(0.0) * 1e3) as u64);
    let before = ssd.write_overhead;
    let fast = SsdProfile {
        write_overhead: SimDuration::from_ps(before.as_ps().saturating_sub(excess.as_ps())),
        ..ssd.clone()
    };
    let mut out = FastDrive {
        overhead_before_us: before.as_us_f64(),
        overhead_us: fast.write_overhead.as_us_f64(),
        ..FastDrive::default()
    };
    for stack in [Stack::Vanilla, Stack::Horae] {
        out.h5.push(ordered_writes(&fast, 1, stack, p.writes)?);
    }
    out.h6 = breakdown(&fast, p.writes)?;
    let base = Rig::new(mqfs::Mode::Horae, fast.clone(), 1);
    for &threads in &p.fs_threads {
        for system in [System::Ext4, System::HoraeFs] {
            out.fs.push(measure(
                system,
                &fast,
                &base,
                threads,
                Job::allocating(4096),
                p.fs_span,
            )?);
        }
    }
    eprintln!(
        "horae fast drive: overhead {:.1} -> {:.1} us, device part {:.1} us",
        out.overhead_before_us, out.overhead_us, out.h6.device
    );
    Ok(out)
}

/// The flushing-read side experiment as a report note.
fn no_read_note(r: &Results) -> Option<String> {
    let x = r.no_read.as_ref()?;
    let best = |h5: &[H5Point]| {
        h5.iter()
            .filter(|q| q.stack == Stack::Horae)
            .map(|q| q.mbps)
            .fold(0.0, f64::max)
            / 1e3
    };
    let one = |h5: &[H5Point], s: Stack| h5.iter().find(|q| q.stack == s && q.drives == 1).map(|q| q.iops);
    let s1 = one(&x.h5, Stack::Horae)? / one(&x.h5, Stack::Vanilla)?.max(1.0);
    let charge = ProbeOptions::default().profile.ordering_layer.as_us_f64();
    let share = (r.h6.ordering - x.h6.ordering) / (r.h6.ordering - charge).max(1e-12);
    Some(format!(
        "**The zero-length read (H6.2, H6.6, H5.1).** Side experiment: H6 and H5 with the ordering \
         queue's persistent writes made without HoRAE 5.5's zero-length read, as HoRAE's released \
         module makes them (`DriverFaults::no_flush_read`, the one change; not crash-consistent, \
         `docs/decisions.md` H18): the ordering layer takes {:.2} us per write (with the read {:.2}; \
         paper 0.7), with {:.1} posted writes and {:.1} reads to the queue per write; the caller's \
         path {:.2} us (with the read {:.2}); one stream's best throughput {:.2} GB/s (with the read \
         {:.2}; paper 2.6); HORAE / vanilla on one drive {s1:.2}x (with the read {:.2}x; paper 4.1x). \
         Of what the ordering layer takes beyond the profile's {charge:.2} us, the reads are {:.0}%. \
         Without them the core is busy {:.0}% of the call, in the posted writes themselves (WC \
         stores, `clflush` and `mfence` per write, whose drain waits for the link; the PMR write \
         latency of Figure 5){}.",
        x.h6.ordering,
        r.h6.ordering,
        x.h6.oq_writes,
        x.h6.oq_reads,
        x.h6.horae_caller,
        r.h6.horae_caller,
        best(&x.h5),
        best(&r.h5),
        r.speedup(1)?,
        share * 100.0,
        x.h6.ordering_cpu_share * 100.0,
        if x.h6.ordering_cpu_share < 0.99 {
            "; the rest of the call waits for room in the queue, once the caller outruns the drive"
        } else {
            ""
        },
    ))
}

/// The drive-latency side experiment as a report note.
fn fast_drive_note(r: &Results) -> Option<String> {
    let f = r.fast_drive.as_ref()?;
    let speedup = |h5: &[H5Point]| {
        let find = |s: Stack| h5.iter().find(|q| q.stack == s && q.drives == 1).map(|q| q.iops);
        Some(find(Stack::Horae)? / find(Stack::Vanilla)?.max(1.0))
    };
    let h8 = |fs: &[Point]| {
        let v: Vec<f64> = fs
            .iter()
            .filter(|q| q.system == System::HoraeFs)
            .filter_map(|h| {
                let e = fs
                    .iter()
                    .find(|q| q.system == System::Ext4 && q.threads == h.threads)?;
                Some(h.ops_per_sec / e.ops_per_sec.max(1.0))
            })
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    let (s0, s1) = (r.speedup(1)?, speedup(&f.h5)?);
    let (e0, e1) = (r.fs_ratio(System::HoraeFs, System::Ext4)?, h8(&f.fs)?);
    let (v0, v1) = (r.h6.vanilla_iops / 1e3, f.h6.vanilla_iops / 1e3);
    let verdict = |before: f64, after: f64, kind: Kind, paper: f64| {
        side_verdict(kind, paper, before, after, "the drive's extra latency")
    };
    Some(format!(
        "**The drive's write latency (H5.1, H6.4, H6.5, H8.1).** The intel-750 profile completes a \
         write after its datasheet's {:.0} us (`SsdProfile::write_overhead` {:.1} us plus the transfer), \
         and H6 measures a device part of {:.1} us against HoRAE's 8.7 us on its own Intel 750. Side \
         experiment: the same drive with the overhead shortened by the difference, to {:.1} us (the one \
         change; the host costs stay): device part {:.1} us; H5.1 HORAE / vanilla {s0:.2}x -> {s1:.2}x \
         (paper {H5_1}x; {}); H6.5 vanilla {v0:.0}K -> {v1:.0}K ordered writes per second (paper \
         {H6_5_KIOPS:.0}K; {}); H8.1 HFS / ext4 {e0:.2}x -> {e1:.2}x (paper {H8_1}x; {}). The profile \
         keeps the datasheet's \
         figure: one set of profiles serves every figure, and the ccNVMe paper's Figure 2 runs the same \
         drive.",
        drive().figures.write_latency.as_us_f64(),
        f.overhead_before_us,
        r.h6.device,
        f.overhead_us,
        f.h6.device,
        verdict(s0, s1, Kind::Times, H5_1),
        verdict(v0, v1, Kind::Count, H6_5_KIOPS),
        verdict(e0, e1, Kind::Times, H8_1),
    ))
}

/// H11.1's and H11.4's side experiments as a report note.
fn h11_side_note(r: &Results, p: &Params) -> Option<String> {
    let smallest = p.p_areas.iter().copied().min()?;
    let pa = Some(p.ipu_p_area);
    // Mean over threads of a system's IOPS in `points` over ext4's (DR or
    // OD) of the main runs.
    let ratio = |points: &[&IpuPoint], system: System, asked: Option<u64>, ext4: System| {
        let v: Vec<f64> = points
            .iter()
            .filter(|q| q.system == system && q.asked == asked)
            .filter_map(|q| Some(q.ops_per_sec / r.ipu(ext4, q.threads, None)?.ops_per_sec.max(1.0)))
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    let main: Vec<&IpuPoint> = r.ipu.iter().collect();
    let dr0 = ratio(&main, System::HoraeFs, pa, System::Ext4)?;
    let od0 = ratio(&main, System::HoraeFsOd, Some(smallest), System::Ext4Od)?;
    let mut closed = false;
    let rows: Vec<String> = [IpuVariant::FreeReads, IpuVariant::NoFlushRead]
        .iter()
        .filter_map(|&v| {
            let pts: Vec<&IpuPoint> = r.ipu_side.iter().filter(|(x, _)| *x == v).map(|(_, q)| q).collect();
            let dr = ratio(&pts, System::HoraeFs, pa, System::Ext4)?;
            let od = ratio(&pts, System::HoraeFsOd, Some(smallest), System::Ext4Od)?;
            let lower = |x: f64| (1.0 - x) * 100.0;
            closed |= Check::new("", "", Kind::LowerPct, 10.0, lower(dr)).agrees() || od >= H11_ORDERING_RATIO;
            Some(format!(
                "with {}: HFS-DR {:.0}% -> {:.0}% below ext4-DR (H11.1, paper 10%; {}), HFS-OD with {smallest} \
                 blocks {od0:.2}x -> {od:.2}x ext4-OD (H11.4, at least 1.5x; {})",
                v.label(),
                lower(dr0),
                lower(dr),
                side_verdict(Kind::LowerPct, 10.0, lower(dr0), lower(dr), v.taken_out()),
                if od >= H11_ORDERING_RATIO {
                    "holds without it"
                } else {
                    "below 1.5x either way"
                },
            ))
        })
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "**The in-place updates' gap (H11.1, H11.4).** Side experiments, each the one change, over \
             the H11 thread counts: {}.{}",
            rows.join("; "),
            if closed {
                ""
            } else {
                " Neither is the gap: what is left is the prepare write's own path (its entry and tail, \
                 the joint FLUSH and the `dr` words per overwrite, the p-area slots' eager reuse), \
                 not isolated yet."
            }
        )
    })
}

/// H11.3's side experiment as a sentence of its note (empty without it).
fn h113_no_read(r: &Results) -> String {
    const PAPER: f64 = H11_3;
    let (mut with, mut without, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    for (h, e) in hfs_ext4(&r.ipu_dj, |q| (q.system, q.threads)) {
        let Some(x) = r.ipu_dj_no_read.iter().find(|q| q.threads == h.threads) else {
            continue;
        };
        let eo = e.ops_per_sec.max(1.0);
        with.push(h.ops_per_sec / eo);
        without.push(x.ops_per_sec / eo);
        rows.push(format!(
            "{} thread(s) {:.0}K -> {:.0}K IOPS (fsync {:.1} -> {:.1} us)",
            h.threads,
            h.ops_per_sec / 1e3,
            x.ops_per_sec / 1e3,
            h.sync_us,
            x.sync_us
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    let (with, without) = (mean(&with), mean(&without));
    let verdict = side_verdict(Kind::Times, PAPER, with, without, "the read");
    format!(
        " Side experiment: HoraeFS's runs with the ordering queue's writes made without their \
         zero-length read, as HoRAE's released module makes them (`DriverFaults::no_flush_read`, the \
         one change; not crash-consistent, `docs/decisions.md` H18): {}; HFS / ext4, mean over \
         threads, {with:.2}x with the read, {without:.2}x without (paper {PAPER}x): {verdict}.",
        rows.join("; ")
    )
}

/// H8.2's side experiment as a report note: per thread count, HFS-OD's
/// IOPS and its time per append outside the sync with and without the
/// BH_Shadow wait, and HFS-OD / HFS either way against the paper's 1.57x.
fn h82_side_note(r: &Results) -> Option<String> {
    const PAPER: f64 = H8_2;
    let find = |v: &[Point], s: System, t: usize| v.iter().find(|q| q.system == s && q.threads == t).cloned();
    // Microseconds per append outside the sync: each thread's loop time
    // less its sync.
    let outside = |q: &Point| q.threads as f64 * 1e6 / q.ops_per_sec.max(1.0) - q.sync.mean;
    let (mut with, mut without, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    for off_od in r.fs_unshadowed.iter().filter(|q| q.system == System::HoraeFsOd) {
        let t = off_od.threads;
        let (Some(on_od), Some(on), Some(off)) = (
            find(&r.fs, System::HoraeFsOd, t),
            find(&r.fs, System::HoraeFs, t),
            find(&r.fs_unshadowed, System::HoraeFs, t),
        ) else {
            continue;
        };
        with.push(on_od.ops_per_sec / on.ops_per_sec.max(1.0));
        without.push(off_od.ops_per_sec / off.ops_per_sec.max(1.0));
        rows.push(format!(
            "{t} thread(s): HFS-OD {:.0}K -> {:.0}K IOPS ({:.1} -> {:.1} us per append outside the \
             fbarrier), HFS {:.0}K -> {:.0}K",
            on_od.ops_per_sec / 1e3,
            off_od.ops_per_sec / 1e3,
            outside(&on_od),
            outside(off_od),
            on.ops_per_sec / 1e3,
            off.ops_per_sec / 1e3,
        ));
    }
    if rows.is_empty() {
        return None;
    }
    let (with, without) = (mean(&with), mean(&without));
    let verdict = side_verdict(Kind::Times, PAPER, with, without, "the wait");
    Some(format!(
        "**What BH_Shadow costs the ordering variant (H8.2).** An append changes its inode's \
         table block, which the last transaction's log write may still carry; JBD2 makes the \
         append wait for that write (BH_Shadow, `docs/decisions.md` E6), and an fbarrier, which \
         returns before the log write completes, leaves the next append to wait in its place. \
         Side experiment: the same runs with every buffer of a committing transaction given a \
         frozen copy (`FsProfile::jbd_shadow` off, the one change): {}. HFS-OD / HFS, mean over \
         threads: {with:.2}x with the wait, {without:.2}x without (paper {PAPER}x): {verdict}.",
        rows.join("; ")
    ))
}

/// H11's runs: per thread count, ext4 (DR, OD), then HoraeFS (DR, OD)
/// without a p-area and with each size of the sweep and the ordered-mode
/// one.
pub fn ipu_sweep(p: &Params) -> BenchResult<Vec<IpuPoint>> {
    let mut sizes: Vec<u64> = p.p_areas.clone();
    sizes.push(p.ipu_p_area);
    sizes.push(0);
    sizes.sort_unstable();
    sizes.dedup();
    let mut out = Vec::new();
    for &threads in &p.ipu_threads {
        let mut runs: Vec<(System, Option<u64>)> = vec![(System::Ext4, None), (System::Ext4Od, None)];
        for &pa in &sizes {
            runs.push((System::HoraeFs, Some(pa)));
            runs.push((System::HoraeFsOd, Some(pa)));
        }
        for (system, pa) in runs {
            let q = overwrites(system, threads, pa, p.ipu_file_blocks, p.ipu_span)?;
            eprintln!(
                "horae H11 {:>2} threads {:<8} p-area {:>5} {:>8.0} IOPS  sync {:>6.1} us  blocks {:.2}  \
                 prepare {:.2}  commit reads {:.2}",
                threads,
                system.label(),
                q.p_area_blocks,
                q.ops_per_sec,
                q.sync_us,
                q.blocks_per_op,
                q.redirected_per_op,
                q.commit_reads_per_op
            );
            out.push(q);
        }
    }
    Ok(out)
}

/// The claims.
pub fn checks(r: &Results, p: &Params) -> Vec<Check> {
    let mut c = Vec::new();
    if let Some(v) = r.speedup(1) {
        c.push(Check::new(
            "H5.1",
            "one drive, 4 KiB ordered random writes, one stream: HORAE / vanilla throughput",
            Kind::Times,
            H5_1,
            v,
        ));
    }
    let multi: Vec<f64> = p
        .drives
        .iter()
        .filter(|d| **d > 1)
        .filter_map(|d| r.speedup(*d))
        .collect();
    if !multi.is_empty() {
        c.push(Check::new(
            "H5.3",
            format!(
                "several drives ({:?}), one stream: HORAE / vanilla throughput, best point (\"up to\")",
                p.drives.iter().filter(|d| **d > 1).collect::<Vec<_>>()
            ),
            Kind::Times,
            6.8,
            multi.iter().copied().fold(0.0, f64::max),
        ));
    }
    let ssd = drive();
    if let Some(h) = r.h5(Stack::Horae, 1) {
        let rated = ssd.figures.rand_write_iops as f64;
        c.push(Check::holds(
            "H5.4",
            format!(
                "HORAE saturates one drive with 4 KiB ordered writes: at least 85% of its rated \
                 random-write IOPS ({:.0}K; measured {:.0}K)",
                rated / 1e3,
                h.iops / 1e3
            ),
            h.iops >= 0.85 * rated,
        ));
    }
    let b = &r.h6;
    c.push(Check::new(
        "H6.2",
        "ordering layer per 4 KiB ordered write (entry and tail persistent)",
        Kind::Micros,
        0.7,
        b.ordering,
    ));
    c.push(Check::new(
        "H6.3",
        "block layer per 4 KiB write (bio to request, queue, doorbell)",
        Kind::Micros,
        1.0,
        b.block,
    ));
    c.push(Check::new(
        "H6.4",
        "DMA, device and interrupt handling per 4 KiB write (until the waiter runs)",
        Kind::Micros,
        H6_DEVICE_US,
        b.device,
    ));
    c.push(Check::new(
        "H6.5",
        "classic one-stream ordered 4 KiB writes (write, wait, next): KIOPS",
        Kind::Count,
        H6_5_KIOPS,
        b.vanilla_iops / 1e3,
    ));
    let best =
        r.h5.iter()
            .filter(|q| q.stack == Stack::Horae)
            .map(|q| q.mbps)
            .fold(0.0, f64::max);
    let sata: Vec<f64> = hfs_ext4(&r.sata, |q| (q.system, q.threads))
        .into_iter()
        .filter_map(|(h, e)| ratio_of(h, e))
        .collect();
    if !sata.is_empty() {
        c.push(Check::new(
            "H7.1",
            format!(
                "SATA SSD ({}), 4 KiB allocating appends + fsync: HFS / ext4 IOPS, mean over threads",
                flush_drive().name
            ),
            Kind::Times,
            1.80,
            mean(&sata),
        ));
    }
    if let Some(v) = r.fs_ratio(System::HoraeFs, System::Ext4) {
        c.push(Check::new(
            "H8.1",
            "NVMe SSD B, 4 KiB allocating appends + fsync: HFS / ext4 IOPS, mean over threads",
            Kind::Times,
            H8_1,
            v,
        ));
    }
    if let Some(v) = r.fs_ratio(System::HoraeFsOd, System::HoraeFs) {
        c.push(Check::new(
            "H8.2",
            "NVMe SSD B: HFS ordering (fbarrier) / HFS durability (fsync) IOPS, mean over threads",
            Kind::Times,
            H8_2,
            v,
        ));
    }
    let several = |f: fn(&StripedFlushPoint) -> Option<f64>| {
        let v: Vec<f64> = r.striped.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    if let Some(v) = several(StripedFlushPoint::durability) {
        c.push(Check::new(
            "H9.1",
            format!(
                "two {} drives striped (md RAID 0): HFS / ext4 IOPS in durability, mean over threads",
                flush_drive().name
            ),
            Kind::Times,
            1.88,
            v,
        ));
    }
    if let Some(v) = several(StripedFlushPoint::ordering) {
        c.push(Check::new(
            "H9.2",
            format!(
                "two {} drives striped (md RAID 0): HFS (fbarrier) / ext4 (nobarrier fsync) IOPS in \
                 ordering, mean over threads",
                flush_drive().name
            ),
            Kind::Times,
            1.90,
            v,
        ));
    }
    let best_joint = r
        .striped
        .iter()
        .filter_map(StripedFlushPoint::ratio)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    if let Some(v) = best_joint {
        c.push(Check::new(
            "H9.3",
            format!(
                "HoraeFS striped over two {} drives, 4 KiB appends + fsync: joint FLUSH (HFS-PF) / \
                 serialized FLUSH (HFS-SF) IOPS, best over threads (\"up to\")",
                flush_drive().name
            ),
            Kind::Times,
            1.70,
            v,
        ));
    }
    if !r.shutdowns.is_empty() {
        let clean = r.shutdowns.iter().filter(|s| s.clean).count();
        c.push(Check::holds(
            "H12.1",
            format!(
                "Varmail on HoraeFS (first fsync of each loop an fbarrier), {} forced shutdowns at \
                 seeded instants: every recovery mounts and fsck finds it clean ({clean} of {})",
                r.shutdowns.len(),
                r.shutdowns.len()
            ),
            clean == r.shutdowns.len(),
        ));
        let load = mean(&r.shutdowns.iter().map(|s| s.load_us).collect::<Vec<_>>());
        c.push(Check::new(
            "H12.2",
            "recovery: loading the ordering queue's pointers and entries, mean",
            Kind::Micros,
            29_800.0,
            load,
        ));
    }
    let pa = Some(p.ipu_p_area);
    if let Some(v) = r.ipu_ratio(System::HoraeFs, pa, System::Ext4, None) {
        c.push(Check::new(
            "H11.1",
            format!(
                "4 KiB in-place overwrites + fsync, ordered mode, p-area {} blocks: HFS IOPS below ext4's \
                 (the double write of the commit write), mean over threads",
                p.ipu_p_area
            ),
            Kind::LowerPct,
            10.0,
            (1.0 - v) * 100.0,
        ));
    }
    if let Some(v) = r.ipu_ratio(System::HoraeFsOd, pa, System::Ext4Od, None) {
        c.push(Check::new(
            "H11.2",
            format!(
                "4 KiB in-place overwrites, ordering, p-area {} blocks: HFS (fbarrier) / ext4 (nobarrier \
                 fsync) IOPS, mean over threads",
                p.ipu_p_area
            ),
            Kind::Times,
            H11_ORDERING_RATIO,
            v,
        ));
    }
    let small = p.p_areas.iter().copied().min();
    let large = p.p_areas.iter().copied().max();
    let dj: Vec<f64> = hfs_ext4(&r.ipu_dj, |q| (q.system, q.threads))
        .into_iter()
        .filter(|(_, e)| e.ops_per_sec > 0.0)
        .map(|(h, e)| h.ops_per_sec / e.ops_per_sec)
        .collect();
    if !dj.is_empty() {
        c.push(Check::new(
            "H11.3",
            "4 KiB in-place overwrites + fsync, data-journaling mode (data=journal): HFS / ext4 IOPS, \
             mean over threads",
            Kind::Times,
            H11_3,
            mean(&dj),
        ));
    }
    if let Some(v) = small.and_then(|s| r.ipu_ratio(System::HoraeFsOd, Some(s), System::Ext4Od, None)) {
        c.push(Check::holds(
            "H11.4",
            format!(
                "smallest p-area of the sweep ({} blocks): HFS-OD \"dramatically\" above ext4-OD, taken as \
                 at least the ordered mode's 1.5x (measured {v:.2}x, mean over threads)",
                small.unwrap_or(0)
            ),
            v >= H11_ORDERING_RATIO,
        ));
    }
    if let (Some(sm), Some(lg)) = (small, large) {
        let ratio = |pa: u64| r.ipu_ratio(System::HoraeFs, Some(pa), System::Ext4, None);
        if let (Some(ds), Some(dl)) = (ratio(sm), ratio(lg)) {
            c.push(Check::holds(
                "H11.5",
                format!(
                    "HFS-DR below ext4-DR with the smallest p-area ({sm} blocks: {ds:.2}x) and the gap \
                     narrowing with the largest ({lg} blocks: {dl:.2}x), IOPS ratios, mean over threads"
                ),
                ds < 1.0 && dl > ds,
            ));
        }
    }
    c.push(Check::new(
        "H6.6",
        "HORAE one stream of 4 KiB ordered writes: best throughput over the drive counts, in GB/s \
         (printed as a ratio)",
        Kind::Times,
        2.6,
        best / 1e3,
    ));
    c
}

/// The H5 CSV.
pub fn h5_table(r: &Results) -> Table {
    let mut t = Table::new(&["stack", "drives", "kiops", "mb_per_sec"]);
    for q in &r.h5 {
        t.push(vec![
            q.stack.label().into(),
            q.drives.to_string(),
            f(q.iops / 1e3, 1),
            f(q.mbps, 1),
        ]);
    }
    t
}

/// H8, H9: IOPS and sync latency per thread count and system.
pub fn fs_table(r: &Results, p: &Params) -> Table {
    let mut header = vec!["threads".to_string()];
    header.extend(
        FS_SYSTEMS
            .iter()
            .map(|s| format!("{} kiops (sync us)", s.label())),
    );
    let mut t = Table {
        header,
        rows: Vec::new(),
    };
    for &th in &p.fs_threads {
        let mut row = vec![th.to_string()];
        for s in FS_SYSTEMS {
            row.push(
                r.fs.iter()
                    .find(|q| q.system == s && q.threads == th)
                    .map(|q| format!("{:.1} ({:.1})", q.ops_per_sec / 1e3, q.sync.mean))
                    .unwrap_or_default(),
            );
        }
        t.push(row);
    }
    t
}

/// H11: the in-place overwrite runs.
pub fn ipu_table(r: &Results) -> Table {
    let mut t = Table::new(&[
        "threads",
        "system",
        "guarantee",
        "p_area_blocks",
        "kiops",
        "sync_us",
        "blocks_per_op",
        "prepare_writes_per_op",
        "commit_reads_per_op",
    ]);
    for q in &r.ipu {
        t.push(vec![
            q.threads.to_string(),
            q.system.label().into(),
            guarantee(q.system).into(),
            q.p_area_blocks.to_string(),
            f(q.ops_per_sec / 1e3, 1),
            f(q.sync_us, 1),
            f(q.blocks_per_op, 2),
            f(q.redirected_per_op, 2),
            f(q.commit_reads_per_op, 2),
        ]);
    }
    t
}

/// The H6 breakdown beside the paper's.
pub fn h6_table(b: &Breakdown) -> Table {
    let mut t = Table::new(&["part", "paper_us", "simulated_us", "core_busy_share"]);
    let rows: [(&str, f64, String, String); 5] = [
        (
            "(1) data page preparation",
            0.8,
            "not at block level".into(),
            String::new(),
        ),
        (
            "(2) ordering layer",
            0.7,
            f(b.ordering, 2),
            f(b.ordering_cpu_share, 2),
        ),
        ("(3) block layer", 1.0, f(b.block, 2), f(b.block_cpu_share, 2)),
        ("(4) DMA + device + IRQ", 8.7, f(b.device, 2), String::new()),
        (
            "classic (3)+(4); paper (1)+(3)+(4)",
            10.5,
            f(b.block + b.device, 2),
            String::new(),
        ),
    ];
    for (part, paper, sim, share) in rows {
        t.push(vec![part.into(), f(paper, 1), sim, share]);
    }
    t
}

/// Notes: where the measurement differs and the side experiment that
/// locates it (every number measured in this run).
pub fn notes(r: &Results, p: &Params) -> Vec<String> {
    let mut n = Vec::new();
    let b = &r.h6;
    let o = &r.h6_optane;
    let ssd = drive();
    let optane = SsdProfile::optane_905p();
    n.push(
        "**H5.2 (HORAE / BarrierIO 2x) is not measured.** BarrierIO needs a barrier-compliant drive \
         (one that keeps the order of barrier writes through its cache to the media, BarrierFS 3); \
         none of the drive profiles is one, and the HoRAE paper itself had none (6.1: it ran \
         BarrierFS's software and added 5% for the barrier write). Modelling it would mean inventing \
         a drive mechanism without a source, so it is left out."
            .to_string(),
    );
    n.push(format!(
        "**The device part (H6.4, H6.5).** One thread on one {} ({}): the block layer takes {:.2} us \
         per write (the core busy {:.0}% of it), then {:.2} us pass until the waiting thread runs \
         again (the data's DMA, the drive, the completion, the interrupt handler, the wake-up): \
         {:.0}K ordered writes per second against the paper's 95K, whose 10.5 us include 0.8 us of \
         page preparation this block-level loop does not have. Side experiment, the same loop on the \
         {}: block layer {:.2} us, device part {:.2} us, {:.0}K writes per second. The host parts stay \
         and the device part moves with the drive's rated write latency ({:.0} us for the {}, {:.0} us \
         for the {}; ccNVMe Table 3 and the profiles' sources): the gap to the paper's 8.7 us is the \
         drive profile's latency, not the host path.",
        ssd.name,
        ssd.model,
        b.block,
        b.block_cpu_share * 100.0,
        b.device,
        b.vanilla_iops / 1e3,
        optane.name,
        o.block,
        o.device,
        o.vanilla_iops / 1e3,
        ssd.figures.write_latency.as_us_f64(),
        ssd.name,
        optane.figures.write_latency.as_us_f64(),
        optane.name,
    ));
    let charge = ProbeOptions::default().profile.ordering_layer.as_us_f64();
    n.push(format!(
        "**The ordering layer (H6.2, H6.6).** A HoRAE ordered write spends {:.2} us in the ordering \
         layer (the core busy {:.0}% of it): the profile's {:.2} us of CPU (the paper's own 0.7 us) and \
         {:.2} us more, in which the bus counters show {:.1} posted MMIO writes and {:.1} zero-length \
         reads to the ordering queue per write (HoRAE 5.5: \"after each MMIO write, HORAE issues a \
         non-posted MMIO read of zero byte length\"; how entries and tails persist is \
         `DriverProfile::horae_entry_persist`, `docs/decisions.md` H1; the `dr` words are written on \
         the submitter's core, which takes the completions). The caller then hands the bio to its \
         background submitter (Horae 6.2's per-CPU threads, `ccnvme::horae::Submitters`, on a core \
         of their own), which runs the block layer: {:.2} us per write in the caller in all. One \
         stream from one core thus issues at most {:.0}K writes per second ({:.2} GB/s of 4 KiB \
         writes), against the paper's 2.6 GB/s from (1) + (2) alone: the gap is the persistent \
         MMIO writes' zero-length reads, which the paper's 0.7 us cannot contain (HoRAE's \
         released module makes none, and loses fsynced data for it: `docs/decisions.md` H18 and \
         Figure 10's side experiment).",
        b.ordering,
        b.ordering_cpu_share * 100.0,
        charge,
        b.ordering - charge,
        b.oq_writes,
        b.oq_reads,
        b.horae_caller,
        1e3 / b.horae_caller.max(1e-12),
        4096.0 / b.horae_caller.max(1e-12) / 1e3,
    ));
    let rated = ssd.figures.rand_write_iops as f64;
    let ceiling = 1e6 / b.horae_caller.max(1e-12);
    if let (Some(h1), Some(v1)) = (r.h5(Stack::Horae, 1), r.h5(Stack::Vanilla, 1)) {
        let bound = if ceiling < rated {
            format!(
                "the caller's path binds ({:.0}K per second from the breakdown, below the drive's rated \
                 {:.0}K random writes of Table 2)",
                ceiling / 1e3,
                rated / 1e3
            )
        } else {
            format!(
                "the drive binds (its rated {:.0}K random writes of Table 2 are below the caller's \
                 {:.0}K per second)",
                rated / 1e3,
                ceiling / 1e3
            )
        };
        n.push(format!(
            "**What bounds each stack (H5.1, H5.3, H5.4).** On one drive HoRAE runs at {:.0}K writes per \
             second: {bound}. Vanilla runs at {:.0}K: one write in flight at a time, so its rate is one \
             over the per-write latency above (plus the dropped FLUSH's trip through the block layer), \
             and a second drive cannot help it. The H5 speedup is therefore the ratio of the device \
             part to the HoRAE caller's path (or the drive's rate, when that is lower); both are \
             measured above. The paper's parts are 10.5 us against 1.5 us.",
            h1.iops / 1e3,
            v1.iops / 1e3,
        ));
    }
    let one = |s: System| r.fs.iter().find(|q| q.system == s && q.threads == 1);
    if let (Some(e), Some(eo), Some(h), Some(ho)) = (
        one(System::Ext4),
        one(System::Ext4Od),
        one(System::HoraeFs),
        one(System::HoraeFsOd),
    ) {
        n.push(format!(
            "**File systems on one drive (H8).** One thread's sync after a 4 KiB append on \
             the {}: ext4 fsync {:.1} us, ext4 `nobarrier` fsync {:.1} us, HFS fsync {:.1} us, HFS \
             fbarrier {:.1} us. The fbarrier returns when the submit stage has dispatched the \
             transaction; its difference to fsync ({:.1} us) is the flush stage's wait for the writes \
             (the device part measured in H6), which is what the ordering variant removes. Blocks \
             written per append: ext4 {:.1}, HFS {:.1}. HoRAE's Figure 10(c) ran on several drives: \
             H9 runs both file systems striped over two drives (next notes).",
            ssd.name,
            e.sync.mean,
            eo.sync.mean,
            h.sync.mean,
            ho.sync.mean,
            h.sync.mean - ho.sync.mean,
            e.blocks_per_op,
            h.blocks_per_op,
        ));
        if let Some(v) = r.fs_ratio(System::HoraeFs, System::Ext4Od) {
            n.push(format!(
                "**ext4 with and without barriers (H8.1).** On this drive, which has no volatile \
                 cache, the block layer strips PREFLUSH and FUA from every bio and completes the empty \
                 FLUSH at once, as Linux does (block/blk-core.c `generic_make_request_checks`; \
                 `BlockDevice::submit`): ext4's fsync with barriers takes {:.1} us more than without \
                 (the drive's media program time, which a FUA written through would cost, is {:.1} us), \
                 so the `nobarrier` run is the same ext4 here. Against it, HFS's fsync gives {:.2}x \
                 (paper {H8_1}x).",
                e.sync.mean - eo.sync.mean,
                ssd.program_time.as_us_f64(),
                v,
            ));
        }
    }
    if let Some(note) = h82_side_note(r) {
        n.push(note);
    }
    if let Some(note) = fast_drive_note(r) {
        n.push(note);
    }
    if let Some(note) = no_read_note(r) {
        n.push(note);
    }
    if let Some(note) = h11_side_note(r, p) {
        n.push(note);
    }
    let (joint, serial) = (&r.flush.0, &r.flush.1);
    let fd = flush_drive();
    let per_drive = |run: &FlushRun| {
        run.per_drive_us
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let striped = r
        .striped
        .iter()
        .map(|p| {
            format!(
                "{} thread(s): HFS-PF {:.0}K IOPS (fsync {:.1} us), HFS-SF {:.0}K ({:.1} us), {:.2}x",
                p.threads,
                p.joint.ops_per_sec / 1e3,
                p.joint.sync.mean,
                p.serial.ops_per_sec / 1e3,
                p.serial.sync.mean,
                p.ratio().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let both = r
        .striped
        .iter()
        .map(|p| {
            format!(
                "{} thread(s): HFS {:.0}K IOPS (fsync {:.1} us) against ext4 {:.0}K ({:.1} us, {:.2} \
                 blocks per append), HFS-OD {:.0}K against ext4-OD {:.0}K",
                p.threads,
                p.joint.ops_per_sec / 1e3,
                p.joint.sync.mean,
                p.ext4.ops_per_sec / 1e3,
                p.ext4.sync.mean,
                p.ext4.blocks_per_op,
                p.hfs_od.ops_per_sec / 1e3,
                p.ext4_od.ops_per_sec / 1e3,
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let sata_pairs: Vec<String> = hfs_ext4(&r.sata, |q| (q.system, q.threads))
        .into_iter()
        .map(|(h, e)| {
            format!(
                "{} thread(s): HFS {:.1}K IOPS (fsync {:.0} us), ext4 {:.1}K ({:.0} us)",
                h.threads,
                h.ops_per_sec / 1e3,
                h.sync.mean,
                e.ops_per_sec / 1e3,
                e.sync.mean
            )
        })
        .collect();
    if !sata_pairs.is_empty() {
        n.push(format!(
            "**One SATA drive (H7.1, Figure 10(a)).** The appends with fsync on one {}: {}. On a \
             drive whose FLUSH programs its cache (1 ms, HoRAE 6.3), ext4's commit pays two \
             programs in a row, its commit record's PREFLUSH (the data and journal blocks) and \
             its FUA (the record itself), where HoraeFS's joint FLUSH pays one (HoRAE: \"the major \
             overhead is two FLUSHes\").",
            fd.name,
            sata_pairs.join("; ")
        ));
    }
    if !both.is_empty() {
        n.push(format!(
            "**File systems on two drives (H9.1, H9.2).** Both file systems striped over two {} \
             drives (md RAID 0, `mqfs::volume`), the allocating 4 KiB appends of H8: {both}. ext4's \
             commit waits for the data and log writes, then writes its commit record with PREFLUSH \
             and FUA, and on a striped volume the PREFLUSH flushes both drives before the record is \
             written (Linux md's `md_flush_request`, `docs/decisions.md` E9): two ordering points, \
             one of them a FLUSH of every drive, per commit; HoraeFS dispatches data, journal and \
             commit record in order at once and sends one joint FLUSH. Without barriers ext4 keeps \
             the waits and drops the FLUSH and FUA.",
            fd.name
        ));
    }
    n.push(format!(
        "**Joint FLUSH (H9.3).** HoraeFS striped over two {} drives (a volatile cache: on a \
         power-loss-protected drive FLUSH is dropped and there is nothing to serialize; md's default \
         chunk), the 4 KiB appends with fsync of H8, the joint FLUSH sending both drives' FLUSHes \
         at once (HFS-PF) or one after the other (HFS-SF, `DriverProfile::horae_flush`): {striped}. \
         Side experiment at the ordering layer, one thread, each round one ordered 4 KiB write to \
         each drive, both waited for, then the stream's FLUSH: {:.0} rounds per second joint ({:.1} \
         us per durability step; the drives' FLUSHes done {} us into it), {:.0} serialized ({:.1} \
         us; done {} us into it). {}",
        fd.name,
        joint.rounds_per_sec,
        joint.flush_us,
        per_drive(joint),
        serial.rounds_per_sec,
        serial.flush_us,
        per_drive(serial),
        match (
            fd.write_cache.as_ref().map(|c| c.destage),
            serial.per_drive_us.as_slice()
        ) {
            (Some(nvme_ctrl::Destage::OnDemand), [first, second, ..]) if *second > 1.5 * *first => {
                "The drive's cache programs only when it must (`nvme_ctrl::Destage::OnDemand`: a \
                 FLUSH, a FUA write or a full cache), so each drive's FLUSH pays the programming of \
                 what it holds when the FLUSH comes (HoRAE 6.3: \"raw flash programming delay (1 \
                 ms)\"): sent at once, the two drives program together; one after the other, the \
                 second drive starts only when the first is done, and the durability step takes \
                 both programs in a row."
            }
            _ => {
                "The drive's cache programs what it holds in the background, so both drives \
                 program their blocks at once whichever way they are flushed, and a serialized \
                 FLUSH only waits for what the other drive has not finished yet."
            }
        },
    ));
    if !r.shutdowns.is_empty() {
        let ms = |f: fn(&Shutdown) -> f64| mean(&r.shutdowns.iter().map(f).collect::<Vec<_>>()) / 1e3;
        let ring = mean(&r.shutdowns.iter().map(|s| s.ring_kib).collect::<Vec<_>>());
        // HoRAE 6.1: "The size of CMB used by HORAE is 2 MB".
        const CMB_BYTES: f64 = (2u64 << 20) as f64;
        let load_us = ms(|s| s.load_us) * 1e3;
        n.push(format!(
            "**Recovery (H12).** {} forced shutdowns of a Varmail-like run on HoraeFS ({}), each at an \
             instant drawn from a seeded generator, each recovered on a new machine from what the \
             drive and the PMR held at that instant (the drive's cache is power-loss protected; \
             write-combining lines and writes on the link are lost). Recovery in simulated time: \
             loading the ordering queue {:.3} ms on average (paper 29.8 ms), the mount after it \
             (its own recovery, which loads the region again, then committing durable prepare writes \
             home, discarding the entries past the durable point, resetting the queue, replaying the \
             journal) {:.3} ms (paper's commit write 497.6 ms). \
             The load reads the superblock, then the pointers and the whole ring of {:.0} KiB into \
             DRAM, as HoRAE's released module reads its stream's whole metadata region \
             (`ccnvme::RegionLoad::Whole`, of a {} MiB PMR), with the PMR's modelled read timing: \
             {:.0} us per 4 KiB, HoRAE 5.2's own figure of 113 us per 4 KiB MMIO read. The paper's \
             29.8 ms for its 2 MB CMB is {:.0} MB/s, {:.1}x the read rate of its own 4 KiB figure: \
             that difference, not the amount read, is the gap of H12.2. HoraeFS \
             has its p-area (`docs/decisions.md` H9); the recoveries committed {} prepare writes in \
             all ({} per shutdown at most): the paper's 497.6 ms read-merge-write commit follows a \
             run of many in-place updates, which Varmail's appends and new files hardly make here. \
             H12.2 compares the load alone; the rest is reported, not compared.",
            r.shutdowns.len(),
            "the first of the loop's two fsyncs an fbarrier, as HoRAE 6.5 ran it",
            ms(|s| s.load_us),
            ms(|s| s.replay_us),
            ring,
            ssd.pmr_bytes >> 20,
            load_us / (ring / 4.0),
            CMB_BYTES / 29_800.0,
            (CMB_BYTES / 29_800.0) / (4096.0 / 113.0),
            r.shutdowns.iter().map(|s| s.commits).sum::<usize>(),
            r.shutdowns.iter().map(|s| s.commits).max().unwrap_or(0),
        ));
    }
    n.extend(ipu_notes(r, p));
    n.push(
        "Parts (2) and (3) charge the driver profile's `ordering_layer` and `block_layer` CPU costs, \
         which come from this very section of the paper: their CPU share agrees by construction; what \
         the measurement adds is the bus time of the persistent PMR writes and of the doorbell. \
         Part (4) and the throughputs are outcomes of the drive model."
            .to_string(),
    );
    n
}

/// H11's notes (every number measured in this run).
fn ipu_notes(r: &Results, p: &Params) -> Vec<String> {
    let mut n = Vec::new();
    let pa = Some(p.ipu_p_area);
    let ratio =
        |a: System, pa: Option<u64>, b: System, pb: Option<u64>| r.ipu_ratio(a, pa, b, pb).unwrap_or(0.0);
    let th = p.ipu_threads.last().copied().unwrap_or(1);
    let ssd = drive();
    if let (Some(e), Some(eo), Some(h), Some(h0), Some(ho), Some(ho0)) = (
        r.ipu(System::Ext4, th, None),
        r.ipu(System::Ext4Od, th, None),
        r.ipu(System::HoraeFs, th, pa),
        r.ipu(System::HoraeFs, th, Some(0)),
        r.ipu(System::HoraeFsOd, th, pa),
        r.ipu(System::HoraeFsOd, th, Some(0)),
    ) {
        n.push(format!(
            "**In-place updates, durability (H11.1).** The paper: \"the double write of eager commit write \
             enhances the data consistency at the cost of 10% IOPS loss in durability\". Figure 11 compares \
             ext4 and HFS only, and the p-area paragraph restates it against ext4 (\"to provide request \
             atomicity, HFS-DR delivers less IOPS than ext4-DR\"), so H11.1 compares HFS-DR with ext4-DR: \
             {:.2}x, mean over threads. The double write's own cost, HFS-DR with its {}-block p-area against \
             HFS-DR without one (in-place writes go home, no request atomicity), is {:.0}% fewer IOPS, \
             mean over threads: the other reading of the sentence. With {th} threads on the {}: ext4 \
             fsync {:.1} us, {:.2} blocks written per overwrite; HFS fsync {:.1} us with the p-area, \
             {:.2} blocks ({:.2} prepare writes and {:.2} blocks read back by the commit write per \
             overwrite; the commit can run lazily in durability, after a joint FLUSH that leaves the \
             stream idle), {:.1} us and {:.2} blocks without. {} Against ext4 without barriers (the \
             same ext4 on this drive, H8.1) HFS-DR gives {:.2}x. \
             {}",
            ratio(System::HoraeFs, pa, System::Ext4, None),
            p.ipu_p_area,
            (1.0 - ratio(System::HoraeFs, pa, System::HoraeFs, Some(0))) * 100.0,
            ssd.name,
            e.sync_us,
            e.blocks_per_op,
            h.sync_us,
            h.blocks_per_op,
            h.redirected_per_op,
            h.commit_reads_per_op,
            h0.sync_us,
            h0.blocks_per_op,
            if e.blocks_per_op < 1.5 {
                "Most overwrites fall within the timestamp tick of their file's last change (Linux \
                 stamps with the clock as of its last tick, `FsProfile::timestamp_tick`, \
                 `docs/decisions.md` M17), so they change no metadata: ext4's fsync writes the data \
                 and finds the inode's transaction already committed, and HFS's makes its redirected \
                 data durable with a joint FLUSH and no journal transaction."
            } else {
                "Each overwrite changes its inode's times, so every fsync commits a journal \
                 transaction: ext4's waits for the data write before its journal blocks and for those \
                 before its commit record, where HFS dispatches all three in order at once."
            },
            ratio(System::HoraeFs, pa, System::Ext4Od, None),
            if ratio(System::HoraeFs, pa, System::Ext4, None) > 1.0 {
                "The paper's HFS led ext4 by 22% on appends (H8.1), which a 10% double write turns into \
                 a loss; the lead measured here is larger, so the double write leaves HFS-DR above ext4-DR."
            } else {
                "HFS's prepare write, its ordering-queue writes and the commit write's read and write \
                 back cost it against ext4's one data write: the double write turns HFS's lead on \
                 appends (H8.1) into a loss, as in the paper."
            },
        ));
        let filled = if ho.commit_reads_per_op > 0.5 {
            format!(
                "The p-area fills during the warm-up ({:.2} blocks read back by the commit write per \
                 overwrite inside the window), so the window holds eager commit writes: an append that \
                 finds no free slot waits while the durable prefix is read back and written home (HoRAE \
                 5.4, \"HORAE blocks incoming requests and triggers eager commit write\").",
                ho.commit_reads_per_op
            )
        } else {
            format!(
                "The p-area did not fill inside the window ({:.2} blocks read back per overwrite), so the \
                 window holds few eager commit writes; a longer warm-up would.",
                ho.commit_reads_per_op
            )
        };
        n.push(format!(
            "**In-place updates, ordering (H11.2).** With {th} threads HFS's fbarrier returns in {:.1} us \
             with its {}-block p-area and {:.1} us without one; ext4's `nobarrier` fsync takes {:.1} us. \
             {filled} Redirection costs HFS-OD {:.0}% \
             of its IOPS against HFS-OD without redirection (mean over threads); what is left is {:.2}x \
             ext4-OD against the paper's 1.5x.",
            ho.sync_us,
            p.ipu_p_area,
            ho0.sync_us,
            eo.sync_us,
            (1.0 - ratio(System::HoraeFsOd, pa, System::HoraeFsOd, Some(0))) * 100.0,
            ratio(System::HoraeFsOd, pa, System::Ext4Od, None),
        ));
    }
    let dj: Vec<String> = hfs_ext4(&r.ipu_dj, |q| (q.system, q.threads))
        .into_iter()
        .map(|(h, e)| {
            format!(
                "{} thread(s): HFS {:.0}K IOPS (fsync {:.1} us, {:.2} blocks per overwrite), ext4 {:.0}K \
                 ({:.1} us, {:.2} blocks)",
                h.threads,
                h.ops_per_sec / 1e3,
                h.sync_us,
                h.blocks_per_op,
                e.ops_per_sec / 1e3,
                e.sync_us,
                e.blocks_per_op
            )
        })
        .collect();
    if !dj.is_empty() {
        n.push(format!(
            "**In-place updates, data journaling (H11.3).** Both file systems mounted `data=journal` \
             (`FsProfile::data_journal`): each overwrite's block goes to the journal with the \
             transaction its fsync commits (even when the inode did not change), and home by the \
             checkpoint: {}. ext4 writes the descriptor and the data's copy, waits for them, then the \
             commit record; HoraeFS \"dispatches the commit record immediately after the journaled \
             data\" (HoRAE 6.4) as the next epoch of the ordering queue.{}",
            dj.join("; "),
            h113_no_read(r),
        ));
    }
    let per_threads: Vec<String> = p
        .ipu_threads
        .iter()
        .map(|&t| {
            let cells: Vec<String> = p
                .p_areas
                .iter()
                .map(|&s| {
                    let (h, ho) = (
                        r.ipu(System::HoraeFs, t, Some(s)),
                        r.ipu(System::HoraeFsOd, t, Some(s)),
                    );
                    let (e, eo) = (r.ipu(System::Ext4, t, None), r.ipu(System::Ext4Od, t, None));
                    let x = |a: Option<&IpuPoint>, b: Option<&IpuPoint>| match (a, b) {
                        (Some(a), Some(b)) if b.ops_per_sec > 0.0 => a.ops_per_sec / b.ops_per_sec,
                        _ => 0.0,
                    };
                    format!("{s}: {:.2}x / {:.2}x", x(h, e), x(ho, eo))
                })
                .collect();
            format!(
                "{t} thread{}, {}",
                if t == 1 { "" } else { "s" },
                cells.join(", ")
            )
        })
        .collect();
    let thin: Vec<String> = r
        .ipu
        .iter()
        .filter(|q| q.p_area_blocks > 0 && q.redirected_per_op > 0.0)
        .filter(|q| q.commit_reads_per_op < 0.9 * q.redirected_per_op)
        .map(|q| {
            format!(
                "{} with {} thread{} and {} blocks ({:.2} read back per {:.2} prepare writes)",
                q.system.label(),
                q.threads,
                if q.threads == 1 { "" } else { "s" },
                q.p_area_blocks,
                q.commit_reads_per_op,
                q.redirected_per_op
            )
        })
        .collect();
    let thin = if thin.is_empty() {
        String::new()
    } else {
        format!(
            " The window caught fewer commit reads than prepare writes for {}: a p-area that fills \
             only a few times per window gives lumpy points, which hold fewer eager commits than a long \
             run and overstate its IOPS.",
            thin.join(", ")
        )
    };
    // Thread counts at which HFS's fbarrier gives fewer IOPS than its
    // fsync with the ordered-mode p-area: eager commits cost more than the
    // wait they save.
    let od_below: Vec<String> = p
        .ipu_threads
        .iter()
        .filter_map(|&t| {
            let (h, ho) = (
                r.ipu(System::HoraeFs, t, Some(p.ipu_p_area))?,
                r.ipu(System::HoraeFsOd, t, Some(p.ipu_p_area))?,
            );
            (ho.ops_per_sec < h.ops_per_sec).then(|| {
                format!(
                    "{t} thread{} ({:.0}K against {:.0}K)",
                    if t == 1 { "" } else { "s" },
                    ho.ops_per_sec / 1e3,
                    h.ops_per_sec / 1e3
                )
            })
        })
        .collect();
    let od_below = if od_below.is_empty() {
        String::new()
    } else {
        format!(
            " With {} HFS-OD even falls below HFS-DR at the ordered-mode p-area ({} blocks): the eager \
             commits that the fbarrier's full p-area forces cost more than the waits it saves, while \
             with fsync the commit can run lazily, in the idle moments between the syncs.",
            od_below.join(" and "),
            p.ipu_p_area
        )
    };
    if !p.p_areas.is_empty() {
        n.push(format!(
            "**The p-area's size (H11.4, H11.5).** HFS-DR / ext4-DR and HFS-OD / ext4-OD IOPS per \
             p-area size in blocks: {}. In durability each thread has one overwrite in flight at a \
             time and the lazy commit runs after a joint FLUSH that leaves the stream idle, so as long \
             as the p-area holds what the threads have in flight between idle moments its size does not \
             matter; where a p-area is too small for that the appends wait for eager commits and HFS-DR \
             drops (the table: blocks read back per overwrite stay about one, as each prepare write is \
             committed once either way). In ordering the fbarrier does not wait for the writes, the \
             p-area fills, and each eager commit stalls every writer while it reads back and writes \
             home the durable prefix; the smaller the p-area, the more often. The paper found HFS-OD \
             far above ext4-OD even with a small p-area, and HFS-DR below ext4-DR there.{od_below}{thin}",
            per_threads.join("; "),
        ));
    }
    let th = p.ipu_threads.last().copied().unwrap_or(1);
    let side: Vec<String> = r
        .ipu_unshadowed
        .iter()
        .filter_map(|off| {
            let on = r.ipu(System::HoraeFsOd, th, off.asked)?;
            let e = r.ipu(System::Ext4Od, th, None)?;
            let (with, without) = (
                on.ops_per_sec / e.ops_per_sec.max(1.0),
                off.ops_per_sec / e.ops_per_sec.max(1.0),
            );
            let bound = H11_ORDERING_RATIO;
            let verdict = match (with >= bound, without >= bound) {
                (true, _) => "1.5x or more with the wait",
                (false, true) => "1.5x only without the wait: the wait is the gap",
                (false, false) => "below 1.5x either way: not the wait",
            };
            Some(format!(
                "{} blocks: {:.0}K -> {:.0}K IOPS, HFS-OD / ext4-OD {with:.2}x -> {without:.2}x \
                 ({verdict})",
                off.p_area_blocks,
                on.ops_per_sec / 1e3,
                off.ops_per_sec / 1e3,
            ))
        })
        .collect();
    if !side.is_empty() {
        n.push(format!(
            "**What BH_Shadow costs HFS-OD (H11.2, H11.4).** An overwrite that changes its inode \
             (the first in a timestamp tick) while the last transaction's log write of that \
             inode-table block is in flight waits for that write (BH_Shadow, \
             `docs/decisions.md` E6). \
             Side experiment, {th} \
             threads, HFS-OD with every buffer of a committing transaction given a frozen copy \
             (`FsProfile::jbd_shadow` off; the one change), per p-area size: {}.",
            side.join("; ")
        ));
    }
    n
}

/// Runs the section and lays out its outputs.
pub fn figure(p: &Params) -> BenchResult<(Results, FigureOut)> {
    let r = run(p)?;
    let ssd = drive();
    let out = FigureOut {
        title: "HoRAE (OSDI '20): ordered writes, the I/O path, file systems, in-place updates, recovery \
                (Figures 9 to 11; 6.2 to 6.5)"
            .into(),
        setup: format!(
            "One thread, one ordered write stream, random 4 KiB writes over a 1 GiB span of each \
             drive, round-robin over {:?} drives of the {} profile (Intel 750, the paper's SSD B; \
             power-loss protected, so FLUSH is dropped by the block layer), {} writes per point. \
             Vanilla: each write waits for its completion and a FLUSH before the next. HORAE: \
             `olayer_submit_bio` and on, one joint FLUSH at the end. The breakdown times each part \
             around the call that does it, on the simulated clock and the core's CPU accounting. \
             File systems (Figure 10(b)): Figure 11's FIO-style workload (4 KiB allocating appends, \
             one file per thread, each thread on its own core) with fsync (durability) or the \
             ordering primitive (ext4 mounted `nobarrier`; HoraeFS fbarrier), threads {:?}, {} ms \
             warm-up then {} ms measured, on one drive (Figure 10(b)) and striped over two {} drives \
             (Figure 10(c), {} ms warm-up then {} ms measured). In-place updates (HoRAE 6.4, Figure 11): each thread writes \
             its own file of {} MiB once, the file system is synced, then the thread overwrites random \
             4 KiB blocks of it (seeded), each followed by the sync, threads {:?}, {} ms warm-up then {} \
             ms measured; HoraeFS with p-areas of {:?} blocks and none (ordered-mode comparison at {} \
             blocks).",
            p.drives,
            ssd.name,
            p.writes,
            p.fs_threads,
            p.fs_span.warmup.as_secs_f64() * 1e3,
            p.fs_span.length.as_secs_f64() * 1e3,
            flush_drive().name,
            p.striped_span.warmup.as_secs_f64() * 1e3,
            p.striped_span.length.as_secs_f64() * 1e3,
            p.ipu_file_blocks / 256,
            p.ipu_threads,
            p.ipu_span.warmup.as_secs_f64() * 1e3,
            p.ipu_span.length.as_secs_f64() * 1e3,
            p.p_areas,
            p.ipu_p_area,
        ),
        csv: vec![
            ("horae_h5".into(), h5_table(&r)),
            ("horae_fs".into(), fs_table(&r, p)),
            ("horae_ipu".into(), ipu_table(&r)),
        ],
        shown: vec![
            (
                "H5: ordered random 4 KiB writes, one stream:".into(),
                h5_table(&r),
            ),
            (
                "H6: the parts of one 4 KiB ordered write (us):".into(),
                h6_table(&r.h6),
            ),
            (
                format!(
                    "H8, H9: 4 KiB allocating appends, each followed by the sync, one file per thread, \
                     on the {} (KIOPS, mean sync latency in us):",
                    ssd.name
                ),
                fs_table(&r, p),
            ),
            (
                format!(
                    "H11: 4 KiB in-place overwrites of a preallocated file per thread, each followed by \
                     the sync, on the {} (p-area 0: HoraeFS without redirection; ext4 has none):",
                    ssd.name
                ),
                ipu_table(&r),
            ),
        ],
        plots: Vec::new(),
        checks: checks(&r, p),
        notes: notes(&r, p),
    };
    Ok((r, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HoRAE beats vanilla on ordered writes, the parts add up to the
    /// vanilla rate, and the same inputs give the same numbers.
    #[test]
    fn ordered_writes_and_their_breakdown() {
        let ssd = drive();
        let v = ordered_writes(&ssd, 1, Stack::Vanilla, 64).unwrap();
        let h = ordered_writes(&ssd, 1, Stack::Horae, 64).unwrap();
        assert!(h.iops > 2.0 * v.iops, "{h:?} vs {v:?}");
        assert_eq!(h, ordered_writes(&ssd, 1, Stack::Horae, 64).unwrap());
        let b = breakdown(&ssd, 32).unwrap();
        assert!(b.ordering > 0.0 && b.block > 0.0 && b.device > b.block, "{b:?}");
        // One write at a time: the rate is one over the parts.
        let per = 1e6 / (b.block + b.device);
        assert!((b.vanilla_iops / per - 1.0).abs() < 0.05, "{b:?}");
    }

    /// A forced shutdown mid-Varmail recovers to a clean file system,
    /// with time spent loading the queue, and the same seed gives the same
    /// instant and times.
    #[test]
    fn a_forced_shutdown_recovers_clean() {
        let vm = varmail::Params {
            blocks: 1 << 15,
            span: Span::ms(1, 1),
            ..varmail::Params::quick()
        };
        let s = shutdown(7, &vm).unwrap();
        assert!(s.clean && s.load_us > 0.0 && s.replay_us > 0.0, "{s:?}");
        assert_eq!(s, shutdown(7, &vm).unwrap());
    }

    /// HoraeFS with a p-area redirects every in-place overwrite (one
    /// prepare write each, and the commit write reads them back); with no
    /// p-area, and on ext4, nothing is redirected or read back; the same
    /// inputs give the same point.
    #[test]
    fn overwrites_are_redirected_only_with_a_p_area() {
        // Long enough for the p-area of 64 slots to fill a few times: an
        // overwrite within its inode's timestamp tick commits no
        // transaction, so the lazy commit (after a joint FLUSH that leaves
        // the stream idle) is rare and most slots come back by the eager
        // commit of a full p-area.
        let span = Span {
            warmup: SimDuration::from_us(200),
            length: SimDuration::from_us(4000),
        };
        let h = overwrites(System::HoraeFs, 2, Some(64), 256, span).unwrap();
        assert_eq!(h.p_area_blocks, 64, "{h:?}");
        assert!(h.ops_per_sec > 0.0, "{h:?}");
        assert!(
            (h.redirected_per_op - 1.0).abs() < 0.1,
            "one prepare write per overwrite: {h:?}"
        );
        assert!(
            h.commit_reads_per_op > 0.5,
            "the commit write reads the p-area: {h:?}"
        );
        let od = overwrites(System::HoraeFsOd, 2, Some(64), 256, span).unwrap();
        assert!((od.redirected_per_op - 1.0).abs() < 0.1, "{od:?}");
        for q in [
            overwrites(System::HoraeFs, 2, Some(0), 256, span).unwrap(),
            overwrites(System::Ext4, 2, None, 256, span).unwrap(),
        ] {
            assert_eq!(q.p_area_blocks, 0, "{q:?}");
            assert!(q.ops_per_sec > 0.0, "{q:?}");
            assert_eq!(q.redirected_per_op, 0.0, "{q:?}");
            assert_eq!(q.commit_reads_per_op, 0.0, "{q:?}");
        }
        assert_eq!(h, overwrites(System::HoraeFs, 2, Some(64), 256, span).unwrap());
    }

    /// Each round's FLUSH flushes both drives, at once or in turn: the
    /// serialized one's second drive completes after the first; both
    /// deterministic.
    #[test]
    fn joint_and_serial_flush_rounds() {
        let j = flush_rounds(FlushIssue::Joint, 8).unwrap();
        let s = flush_rounds(FlushIssue::Serialized, 8).unwrap();
        for r in [&j, &s] {
            assert!(r.rounds_per_sec > 0.0, "{r:?}");
            assert_eq!(r.per_drive_us.len(), 2, "{r:?}");
            assert!(
                r.per_drive_us.iter().all(|v| *v > 0.0),
                "each drive flushed: {r:?}"
            );
        }
        assert!(
            s.per_drive_us[1] > s.per_drive_us[0],
            "drive 1 is flushed after drive 0: {s:?}"
        );
        assert!(s.flush_us >= j.flush_us, "{s:?} vs {j:?}");
        assert_eq!(s, flush_rounds(FlushIssue::Serialized, 8).unwrap());
    }

    /// HoraeFS striped over two drives runs the appends with both FLUSH
    /// variants and the fbarrier, ext4 with and without barriers, writing
    /// to both drives; deterministic.
    #[test]
    fn striped_horaefs_runs_with_joint_and_serialized_flush() {
        // Several FLUSHes of the SATA drive (1 ms each) per point.
        let span = Params::quick().striped_span;
        let p = striped_flush(2, span).unwrap();
        assert!(p.joint.ops_per_sec > 0.0 && p.serial.ops_per_sec > 0.0, "{p:?}");
        for q in [&p.hfs_od, &p.ext4, &p.ext4_od] {
            assert!(q.ops_per_sec > 0.0, "{q:?}");
        }
        assert!(
            p.ratio().is_some_and(|v| v >= 0.95),
            "the joint FLUSH is not slower: {p:?}"
        );
        let again = striped_flush(2, span).unwrap();
        assert_eq!(
            (again.joint.ops_per_sec, again.serial.ops_per_sec),
            (p.joint.ops_per_sec, p.serial.ops_per_sec)
        );
    }
}
