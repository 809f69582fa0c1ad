//! Checking one crash state, one check for a machine of one drive and of
//! several ([`check_state`] over [`BootState`]): a fresh simulated machine
//! boots over the state's PMRs and media (copy-on-write over the shared
//! base images), the driver probes each drive (ccNVMe or Horae recovery),
//! the file system mounts on their volume (its recovery), fsck runs on
//! what the drives now hold, then the promises in force and CrashMonkey's
//! sanity check.
//!
//! Many crash states recover to the same image (every partial write of an
//! uncommitted transaction is discarded alike). After recovery, a state's
//! drives are hashed (leaving out a single drive's journal log blocks,
//! which nothing reads until they are rewritten) together with the
//! promises in force; a state whose hash was already checked takes that
//! verdict instead of running fsck, the oracle and the sanity check again.
//! A state that holds what an earlier recovery read does not even boot
//! ([`crate::reuse`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use ccnvme::BlockDevice;
use mqfs::layout::BLOCK;
use mqfs::volume::VolumeSource;
use mqfs::{mount_devices, BlockSource, Ctx};
use nvme_ctrl::crash::{written_terms, BootState, Unit};
use nvme_ctrl::{ControllerConfig, Image, SsdProfile};
use pcie_sim::{Executor, Machine, MachineProfile, SimDuration, SimTime, TraceMode};

use crate::blockwise::{BlockJudge, BlockJudgement};
use crate::oracle::{check_with, sanity, Failure, Lookups, Promise};
use crate::record::{fs_profile_for, probe_for, Fault, ModeName, Recording};
use crate::reuse::{Recovered, RecoveryMemo};
use crate::saved::SavedConfig;

/// A verdict: the failures found (none for a pass), and what fsck, the
/// oracle and the sanity check read of the recovered drive to reach it
/// (units recovery wrote included: whether they are the state's depends
/// on the state's own recovery).
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Failed checks.
    pub failures: Vec<Failure>,
    /// Units read after the mount, in the order first read.
    pub reads: Arc<[Unit]>,
    /// Data blocks judged instead of read ([`crate::blockwise`]).
    pub judgements: Arc<[BlockJudgement]>,
}

/// Verdicts by the key of a recovered image and the promises in force.
pub type Verdicts = Mutex<BTreeMap<u128, Verdict>>;

/// What a checker needs besides the state (shared by all workers).
#[derive(Debug, Clone)]
pub struct CheckContext {
    /// Consistency configuration.
    pub mode: ModeName,
    /// An ordering mechanism switched off, if any.
    pub fault: Option<Fault>,
    /// Drive profile.
    pub profile: SsdProfile,
    /// Machine profile.
    pub machine: MachineProfile,
    /// Each drive's starting image, by port.
    pub bases: Arc<[Arc<Image>]>,
    /// Every promise of the run.
    pub promises: Arc<Vec<Promise>>,
    /// Run CrashMonkey's sanity check (create and remove everywhere).
    pub sanity: bool,
    /// Verdicts by recovered image and promises (shared by the workers);
    /// `None`: every state is judged in full (fsck, oracle, sanity).
    pub verdicts: Option<Arc<Verdicts>>,
    /// Recoveries by what they read, to know a state's recovered drive
    /// without booting ([`crate::reuse`]); `None`: every state boots.
    pub recoveries: Option<Arc<RecoveryMemo>>,
    /// Log what each check reads of its state ([`CheckOutcome::reads`]),
    /// for the read-set reduction ([`crate::observe`]).
    pub observe: bool,
}

impl CheckContext {
    /// A context with an empty verdict table.
    pub fn new(
        mode: ModeName,
        profile: SsdProfile,
        machine: MachineProfile,
        bases: Arc<[Arc<Image>]>,
        promises: Arc<Vec<Promise>>,
        sanity: bool,
    ) -> CheckContext {
        CheckContext {
            mode,
            fault: None,
            profile,
            machine,
            bases,
            promises,
            sanity,
            verdicts: Some(Arc::default()),
            recoveries: None,
            observe: false,
        }
    }
}

impl CheckContext {
    /// The context of a recorded run whose machines `cfg` describes.
    pub fn for_run(cfg: &SavedConfig, rec: &Recording, sanity: bool) -> CheckContext {
        CheckContext {
            fault: cfg.fault,
            ..CheckContext::new(
                cfg.mode,
                cfg.profile.clone(),
                cfg.machine(),
                rec.bases().into(),
                Arc::new(rec.promises.clone()),
                sanity,
            )
        }
    }
}

/// What checking one state found.
#[derive(Debug, Clone, Default)]
pub struct CheckOutcome {
    /// Failed checks (empty: the state passed).
    pub failures: Vec<Failure>,
    /// Recovery log lines (for replay).
    pub log: Vec<String>,
    /// The verdict came from an earlier state that recovered alike.
    pub recovered_alike: bool,
    /// No machine booted: the recovery of an earlier state that read the
    /// same content was reused ([`crate::reuse`]).
    pub recovery_reused: bool,
    /// What the check read of the state (PMR lines and blocks it read
    /// before writing them), if the context observes: any state that holds
    /// the same at these units gets the same verdict.
    pub reads: Option<Vec<Unit>>,
    /// How many of `reads` (the first ones) recovery read: the probe and
    /// the mount; the rest are fsck's, the oracle's and the sanity
    /// check's.
    pub recovery_reads: usize,
    /// The data blocks judged instead of read that the check neither read
    /// nor wrote otherwise (with `reads`): the explorer judges their other
    /// classes ([`crate::blockwise`]). Their failures on this state are in
    /// `failures` already.
    pub judgements: Vec<BlockJudgement>,
}

/// The judgements of a check whose blocks it neither read (`reads`) nor
/// had written in its recovery (`wrote`): those a state's class at the
/// block decides.
fn open_judgements(all: &[BlockJudgement], reads: &[Unit], wrote: &BTreeSet<Unit>) -> Vec<BlockJudgement> {
    let read: BTreeSet<Unit> = reads.iter().copied().collect();
    all.iter()
        .filter(|j| !read.contains(&j.unit) && !wrote.contains(&j.unit))
        .cloned()
        .collect()
}

/// The units a check of a state read: its recovery's reads, then those of
/// the checks after the mount that recovery did not write.
fn state_reads(recovery: &[Unit], wrote: &BTreeSet<Unit>, after: &[Unit]) -> Vec<Unit> {
    let mut out = recovery.to_vec();
    out.extend(after.iter().filter(|u| !wrote.contains(u)));
    out
}

/// What a phase of a check read (first-read order) and wrote.
pub(crate) type Access = (Vec<Unit>, BTreeSet<Unit>);

/// What the machine's PMRs and the drives (`ctrls`, the drive on port `i`
/// at `i`) logged since the last take, as units (reads in first-read
/// order, every PMR first; units written). The drives' first reads are
/// merged in the order they happened (by their shared clock,
/// [`start_logging`]): which block a recovery reads next may depend on what
/// it read on the other drive, and [`crate::reuse`] walks the reads in
/// that order.
pub(crate) fn take_access(m: &Machine, ctrls: &[Rc<nvme_ctrl::Controller>]) -> Access {
    let mut reads = Vec::new();
    let mut wrote = BTreeSet::new();
    let mut media = Vec::new();
    for (port, ctrl) in (0u8..).zip(ctrls) {
        let pmr = m.take_pmr_access(port).unwrap_or_default();
        let pmr_unit = |line| Unit::Pmr { port, line };
        reads.extend(pmr.reads().iter().map(|&l| pmr_unit(l)));
        wrote.extend(pmr.written().map(pmr_unit));
        let log = ctrl.backend().take_reads().unwrap_or_default();
        let block = |lba| Unit::Block { port, lba };
        debug_assert!(
            ctrls.len() == 1 || log.stamps().len() == log.reads().len(),
            "the drives of one machine log their reads on one clock"
        );
        let stamps = log.stamps().iter().copied().chain(std::iter::repeat(0));
        media.extend(stamps.zip(log.reads().iter().map(|&b| block(b))));
        wrote.extend(log.written().map(block));
    }
    // Stable: on one drive without a clock, first-read order stays.
    media.sort_by_key(|&(stamp, _)| stamp);
    reads.extend(media.into_iter().map(|(_, u)| u));
    (reads, wrote)
}

/// Starts logging what a check reads of every drive of `m` (`ctrls`, the
/// drive on port `i` at `i`): PMR lines, and media blocks stamped from one
/// clock ([`take_access`]).
fn start_logging(m: &Machine, ctrls: &[Rc<nvme_ctrl::Controller>]) {
    let clock = pcie_sim::observe::ReadClock::default();
    for (port, c) in (0u8..).zip(ctrls) {
        c.backend().log_reads_on(clock.clone());
        m.log_pmr_access(port);
    }
}

/// What a check observed, from what its recovery read and wrote
/// (`recovery`, if the mount returned), what the checks after the mount
/// read and the judgements they made (`after`, if they ran to the end),
/// and `rest` (everything logged since, taken where the check ended
/// early): the units it read (recovery's first), how many of them
/// recovery read, and the judgements the explorer has to evaluate
/// ([`open_judgements`]). Where the check ended early, everything logged
/// counts (more units only split states finer). One drive and several
/// ([`crate::devices`]) observe alike.
pub(crate) fn observed(
    recovery: Option<Access>,
    after: Option<(&[Unit], &[BlockJudgement])>,
    rest: impl FnOnce() -> Vec<Unit>,
) -> (Vec<Unit>, usize, Vec<BlockJudgement>) {
    match (recovery, after) {
        (Some((r, w)), Some((after, judged))) => {
            let reads = state_reads(&r, &w, after);
            let judgements = open_judgements(judged, &reads, &w);
            (reads, r.len(), judgements)
        }
        (Some((mut r, _)), None) => {
            let n = r.len();
            r.extend(rest());
            (r, n, Vec::new())
        }
        (None, _) => {
            let all = rest();
            let n = all.len();
            (all, n, Vec::new())
        }
    }
}

/// Simulated time a recovery may take before it counts as a hang.
pub const RECOVERY_LIMIT: SimDuration = SimDuration::from_ms(500);

/// Checks one crash state, of one drive or several ([`BootState`]): a
/// fresh machine boots a controller per drive over the state, the driver
/// probes each (ccNVMe or Horae recovery), the file system mounts on their
/// volume (its recovery: on several drives, HoraeFS's over every member),
/// fsck runs on what the drives now hold, then the promises in force and
/// CrashMonkey's sanity check. With `cx.observe`, logs what the check
/// reads of every drive (PMR lines and blocks, each unit naming its
/// drive's port) and judges data blocks instead of reading them, on the
/// member a volume block maps to. With `cx.recoveries` and `cx.verdicts`,
/// a state whose recovery or recovered drives are known takes what was
/// found ([`crate::reuse`]).
pub fn check_state<S: BootState + Clone + 'static>(cx: &CheckContext, state: &S) -> CheckOutcome {
    let promised = crate::oracle::promises_key(&cx.promises, state.point() + 1);
    let memo = cx.recoveries.clone();
    let pmr_hash = if memo.is_some() { state.pmr_hash() } else { 0 };
    if let Some(rec) = memo.as_ref().and_then(|m| m.lookup(state, pmr_hash)) {
        let key = pcie_sim::content_hash::combine(&[rec.drive_hash(state), promised]);
        let known = cx
            .verdicts
            .as_ref()
            .and_then(|v| v.lock().ok()?.get(&key).cloned());
        if let Some(v) = known {
            let mut log = rec.log.clone();
            log.push("recovery: as an earlier state that read the same content (not booted)".into());
            log.push("verdict: as an earlier state that recovered to the same image".into());
            let reads = state_reads(&rec.reads, &rec.wrote, &v.reads);
            return CheckOutcome {
                failures: v.failures,
                log,
                recovered_alike: true,
                recovery_reused: true,
                judgements: if cx.observe {
                    open_judgements(&v.judgements, &reads, &rec.wrote)
                } else {
                    Vec::new()
                },
                reads: cx.observe.then_some(reads),
                recovery_reads: rec.reads.len(),
            };
        }
    }
    let ex = Executor::new(1);
    let m = Machine::new(&ex, cx.machine.clone(), TraceMode::CountersOnly);
    let configs = (0..state.drives())
        .map(|_| ControllerConfig::new(cx.profile.clone()))
        .collect();
    let ctrls = match state.boot(&m, configs, &cx.bases) {
        Ok(c) => c,
        Err(e) => {
            // Booting reads nothing of the state: it fails on the
            // configuration alone, the same for every state.
            return CheckOutcome {
                failures: vec![Failure::new("boot", e.to_string())],
                reads: cx.observe.then(Vec::new),
                ..CheckOutcome::default()
            };
        }
    };
    let observe = cx.observe || memo.is_some();
    if observe {
        start_logging(&m, &ctrls);
    }
    let applied = state.point() + 1;
    let in_force: Vec<usize> = (0..cx.promises.len())
        .filter(|&i| cx.promises[i].covers(applied))
        .collect();
    // The promises stay shared: a state checks them by index (an atomic
    // promise can hold many file versions; cloning them per state would
    // copy them millions of times).
    let all_promises = cx.promises.clone();
    let verdicts = cx.verdicts.clone();
    let st = state.clone();
    let (probe, fs_profile) = (probe_for(cx.mode, cx.fault), fs_profile_for(cx.mode, cx.fault));
    let sanity_on = cx.sanity;
    let judge_blocks = cx.observe;
    let journaled = cx.mode != ModeName::None;
    let horae_mode = cx.mode.is_horae();
    let m2 = m.clone();
    let ctrls2 = ctrls.clone();
    // What recovery read and wrote (taken when the mount returns).
    let recovery_access: Rc<RefCell<Option<Access>>> = Rc::default();
    let recovery_access2 = recovery_access.clone();
    let run = async move {
        let c = Ctx::on(0);
        let mut failures = Vec::new();
        let mut log = Vec::new();
        let mut alike = false;
        let mut devs = Vec::with_capacity(ctrls2.len());
        for port in 0..ctrls2.len() {
            match BlockDevice::probe(&m2, port as u8, probe.clone()).await {
                Ok(d) => devs.push(d),
                Err(e) => {
                    failures.push(Failure::new("probe", e.to_string()));
                    return (failures, log, alike, None);
                }
            }
        }
        for (port, dev) in devs.iter().enumerate() {
            if let Some(r) = dev.recovery() {
                log.push(format!(
                    "driver {port}: {} unfinished transaction(s) {:?}",
                    r.unfinished.len(),
                    r.unfinished_ids().iter().map(|t| t.0).collect::<Vec<_>>()
                ));
            }
        }
        if horae_mode {
            // What the ordering queue's recovery will do (it reads, writes
            // nothing; the mount below runs it again and acts).
            if let Ok(r) = mqfs::horae_recovery(&devs, 0).await {
                log.push(format!(
                    "horae: head {} flushed {} tail {}; {} durable entr(ies); discard (lba, blocks, in place): {:?}",
                    r.head,
                    r.flushed,
                    r.tail,
                    r.durable.len(),
                    r.discard.iter().map(|e| (e.lba, e.len, e.in_place)).collect::<Vec<_>>()
                ));
            }
        }
        let fs = match mount_devices(&devs, c, fs_profile).await {
            Ok(fs) => fs,
            Err(e) => {
                failures.push(Failure::new("mount", e.to_string()));
                return (failures, log, alike, None);
            }
        };
        log.push(format!("mount: recovered on {} drive(s)", devs.len()));
        let (reads, wrote) = if observe {
            take_access(&m2, &ctrls2)
        } else {
            Default::default()
        };
        let blocks_read: Vec<(u8, u64)> = reads
            .iter()
            .filter_map(|u| match u {
                Unit::Block { port, lba } => Some((*port, *lba)),
                Unit::Pmr { .. } => None,
            })
            .collect();
        let recovered = Recovered {
            written: ctrls2.iter().map(|c| written_terms(c.backend())).collect(),
            log_area: (ctrls2.len() == 1).then(|| fs.journal_log_area()),
            log: log.clone(),
            reads: reads.clone().into(),
            wrote: Arc::new(wrote.clone()),
        };
        *recovery_access2.borrow_mut() = Some((reads, wrote));
        let key = pcie_sim::content_hash::combine(&[recovered.drive_hash(&st), promised]);
        if let Some(memo) = &memo {
            memo.remember(&st, pmr_hash, &blocks_read, recovered);
        }
        let known = verdicts.as_ref().and_then(|v| v.lock().ok()?.get(&key).cloned());
        if let Some(v) = known {
            log.push("verdict: as an earlier state that recovered to the same image".into());
            alike = true;
            return (v.failures, log, alike, Some((v.reads, v.judgements)));
        }
        let backends: Vec<_> = ctrls2.iter().map(|c| c.backend().clone()).collect();
        let sources: Vec<&dyn BlockSource> = backends.iter().map(|b| &**b as &dyn BlockSource).collect();
        let volume = match VolumeSource::open(&sources) {
            Ok(v) => Some(v),
            Err(e) => {
                failures.push(Failure::new("fsck", e.to_string()));
                None
            }
        };
        if let Some(v) = &volume {
            match mqfs::fsck::fsck(v) {
                Ok(report) => {
                    failures.extend(fsck_failures(
                        &report.findings,
                        report.suppressed,
                        report.suppressed_errors,
                        journaled,
                    ));
                    log.push(format!("fsck: {} finding(s)", report.findings.len()));
                }
                Err(e) => failures.push(Failure::new("fsck", e.to_string())),
            }
        }
        // Data blocks are judged, not read, where the reads are observed
        // ([`crate::blockwise`]): a volume block is looked at on the
        // member it maps to, without logging a read.
        let peek = |b: u64, buf: &mut [u8; BLOCK]| -> Unit {
            match volume.as_ref().and_then(|v| v.locate(b)) {
                Some((port, lba)) => {
                    backends[port].peek(lba, buf);
                    Unit::Block {
                        port: port as u8,
                        lba,
                    }
                }
                // Past the volume: no drive holds it, the same in every
                // state (no pending item writes a unit of no drive).
                None => {
                    buf.fill(0);
                    Unit::Block {
                        port: u8::MAX,
                        lba: b,
                    }
                }
            }
        };
        let mut looked = if judge_blocks && volume.is_some() {
            Lookups::judging(BlockJudge::new(&peek))
        } else {
            Lookups::default()
        };
        for p in in_force.iter().map(|&i| &all_promises[i]) {
            match check_with(&fs, c, p, &mut looked).await {
                Ok(Some(f)) => failures.push(f),
                Ok(None) => {}
                Err(e) => failures.push(Failure::new("read", format!("checking `{}`: {e}", p.op))),
            }
        }
        log.push(format!("oracle: {} promise(s) checked", in_force.len()));
        let judgements: Arc<[BlockJudgement]> = looked.into_judgements().into();
        // The sanity check runs or not on the failures so far only: no
        // step of the check may depend on a judged block's bytes.
        if sanity_on && failures.is_empty() {
            match sanity(&fs, c).await {
                Ok(Some(f)) => failures.push(f),
                Ok(None) => {}
                Err(e) => failures.push(Failure::new("sanity", e.to_string())),
            }
        }
        let after: Arc<[Unit]> = if observe {
            take_access(&m2, &ctrls2).0.into()
        } else {
            Arc::from(Vec::new())
        };
        failures.extend(
            judgements
                .iter()
                .filter(|j| !j.own_ok)
                .map(BlockJudgement::failure),
        );
        if let Some(Ok(mut v)) = verdicts.as_ref().map(|v| v.lock()) {
            v.insert(
                key,
                Verdict {
                    failures: failures.clone(),
                    reads: after.clone(),
                    judgements: judgements.clone(),
                },
            );
        }
        (failures, log, alike, Some((after, judgements)))
    };
    let limit = SimTime::ZERO + RECOVERY_LIMIT;
    let outcome = ex.block_on_until(run, Some(limit));
    // What this check read: recovery's reads, then what the checks after
    // the mount read that recovery had not written; where the check ended
    // early, everything logged (more units only split states finer).
    let mut judgements = Vec::new();
    let mut recovery_reads = 0;
    let reads = cx.observe.then(|| {
        let after = match &outcome {
            Ok((_, _, _, Some((after, judged)))) => Some((&after[..], &judged[..])),
            _ => None,
        };
        let (reads, n, open) = observed(recovery_access.borrow_mut().take(), after, || {
            take_access(&m, &ctrls).0
        });
        recovery_reads = n;
        judgements = open;
        reads
    });
    match outcome {
        Ok((failures, log, recovered_alike, _)) => CheckOutcome {
            failures,
            log,
            recovered_alike,
            recovery_reused: false,
            reads,
            recovery_reads,
            judgements,
        },
        Err(e) => CheckOutcome {
            failures: vec![Failure::new("hang", e.to_string())],
            log: Vec::new(),
            recovered_alike: false,
            recovery_reused: false,
            reads,
            recovery_reads,
            judgements,
        },
    }
}

/// The failures an fsck report makes. After a journaled mode's recovery
/// the image must be spotless: an orphaned inode or a link count too high
/// is a recovery bug there, not a harmless leak, so findings of any
/// severity fail. Ext4-NJ (`journaled` false) promises no such thing;
/// there only errors count.
pub(crate) fn fsck_failures(
    findings: &[mqfs::Finding],
    suppressed: u64,
    suppressed_errors: u64,
    journaled: bool,
) -> Vec<Failure> {
    let mut out: Vec<Failure> = findings
        .iter()
        .filter(|f| journaled || f.severity == mqfs::Severity::Error)
        .map(|f| Failure::new("fsck", f.to_string()))
        .collect();
    let past_cap = if journaled { suppressed } else { suppressed_errors };
    if past_cap > 0 {
        out.push(Failure::new(
            "fsck",
            format!("{past_cap} finding(s) past the report's cap"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: mqfs::Severity) -> mqfs::Finding {
        mqfs::Finding {
            severity,
            kind: mqfs::FindingKind::LinkCountTooHigh,
            ino: Some(12),
            block: None,
            detail: "link count 2, 1 name".into(),
        }
    }

    #[test]
    fn a_warning_fails_a_journaled_mode_only() {
        let w = [finding(mqfs::Severity::Warning)];
        assert_eq!(fsck_failures(&w, 0, 0, true).len(), 1);
        assert!(fsck_failures(&w, 0, 0, false).is_empty());
        let e = [finding(mqfs::Severity::Error)];
        assert_eq!(fsck_failures(&e, 0, 0, false).len(), 1);
        // Suppressed warnings count where warnings count.
        assert_eq!(fsck_failures(&[], 3, 0, true).len(), 1);
        assert!(fsck_failures(&[], 3, 0, false).is_empty());
    }
}
