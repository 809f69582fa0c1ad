//! Crash exploration of a machine with several drives (`horae2`: HoraeFS
//! on a volume striped over two drives).
//!
//! The crash states are those of `nvme_ctrl::crash::DevicesExplorer`: the
//! product of each drive's choices (its PMR writes in flight and WC lines,
//! its volatile cache's blocks), each drive failing on its own. By default
//! they are enumerated by what their checks read, with the one-drive
//! machinery ([`crate::observe`], through [`CrashSpace`]): a check logs
//! the units it reads of every drive (PMR lines of each port, blocks of
//! each drive), and states that agree at every unit read, on every drive,
//! are judged once; data blocks are judged instead of read
//! ([`crate::blockwise`]) on the member a volume block maps to. So every
//! state the envelope allows is judged and none is left unvisited
//! (`crate::observe`'s module doc gives the argument for several drives;
//! `tests/read_sets.rs` checks it by brute force). With `--bounded` or
//! `--brute-force`, every state up to the bounds (`--bound-lines` for the
//! PMR; `--bound-blocks` shared out among the drives, `bound / drives`
//! each, so the product of their subsets stays within the one-drive bound;
//! past them sampled and counted as not visited) is built instead.
//!
//! Either way, states are deduplicated by content (every drive's PMR and
//! media, with the promises in force) and each state checked boots a fresh
//! machine with every drive on its port again, assembles and mounts the
//! volume (HoraeFS's recovery over both drives: `recover_stream`, a
//! discard on each), runs fsck through the members, then the promises in
//! force and CrashMonkey's sanity check.
//!
//! Not applied here (`docs/decisions.md` H12): the verdict and recovery
//! reuse of the one-drive explorer ([`crate::reuse`]); each state checked
//! is booted and judged in full.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use mqfs::layout::BLOCK;
use mqfs::volume::StripedSource;
use mqfs::{BlockSource, Ctx};
use nvme_ctrl::crash::{
    boot_devices, Constraint, DevicesChoice, DevicesExplorer, DevicesState, PointItems, StateChoice, Unit,
};
use nvme_ctrl::{ControllerConfig, Image};
use pcie_sim::{Executor, Machine, SimTime, TraceMode};

use crate::blockwise::{BlockJudge, BlockJudgement};
use crate::check::{
    fsck_failures, observed, take_access, Access, CheckContext, CheckOutcome, RECOVERY_LIMIT,
};
use crate::checkers::check_all;
use crate::error::Error;
use crate::observe::CrashSpace;
use crate::oracle::{check_with, sanity, Failure, Lookups};
use crate::pipeline::{finish_report, ExploreOptions, ExploreReport};
use crate::record::{fs_profile_for, mount_drives, probe_for, Recording};
use crate::saved::SavedConfig;

/// Encodes a choice for ids: `f<prefixes>.l<lines>.m<drive 0>~<drive 1>`.
pub fn encode_devices_choice(c: &DevicesChoice) -> String {
    let list = |v: &[usize]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("-");
    let m: Vec<String> = c.media.iter().map(|d| list(d)).collect();
    format!(
        "f{}.l{}.m{}",
        list(&c.pmr.in_flight_landed),
        list(&c.pmr.lines_landed),
        m.join("~")
    )
}

/// Decodes [`encode_devices_choice`] for a machine of `drives` drives.
pub fn decode_devices_choice(s: &str, drives: usize) -> Option<DevicesChoice> {
    let list = |p: &str| -> Option<Vec<usize>> {
        if p.is_empty() {
            return Some(Vec::new());
        }
        p.split('-').map(|x| x.parse().ok()).collect()
    };
    let mut parts = s.split('.');
    let f = list(parts.next()?.strip_prefix('f')?)?;
    let l = list(parts.next()?.strip_prefix('l')?)?;
    let m = parts.next()?.strip_prefix('m')?;
    if parts.next().is_some() {
        return None;
    }
    let media = m.split('~').map(list).collect::<Option<Vec<_>>>()?;
    if media.len() != drives {
        return None;
    }
    Some(DevicesChoice {
        pmr: pcie_sim::CrashChoice {
            in_flight_landed: f,
            lines_landed: l,
        },
        media,
    })
}

/// The explorer of a recorded run on several drives.
pub fn devices_explorer_of<'a>(
    rec: &'a Recording,
    profile: &nvme_ctrl::SsdProfile,
) -> Result<DevicesExplorer<'a>, Error> {
    let mut pmr = vec![rec.base_pmr.clone()];
    pmr.extend(rec.more_drives.iter().map(|(_, p)| p.clone()));
    let volatile = vec![profile.volatile_cache(); pmr.len()];
    DevicesExplorer::new(&rec.trace, rec.layout.clone(), pmr, &volatile).map_err(Error::from)
}

/// The base images of a run's drives, by port.
pub fn bases_of(rec: &Recording) -> Vec<Arc<Image>> {
    let mut b = vec![rec.base_media.clone()];
    b.extend(rec.more_drives.iter().map(|(m, _)| m.clone()));
    b
}

impl CrashSpace for DevicesExplorer<'_> {
    type State = DevicesState;
    type Version = Vec<u64>;

    fn points(&self) -> usize {
        DevicesExplorer::points(self)
    }

    fn advance(&mut self, k: usize) -> Result<Vec<u64>, String> {
        DevicesExplorer::advance(self, k).map_err(|e| e.to_string())
    }

    /// `max_blocks` applies to each drive.
    fn choices(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<StateChoice>, u64), String> {
        let (choices, left_out) = self
            .choices_at(k, max_lines, max_blocks)
            .map_err(|e| e.to_string())?;
        let flat = choices
            .iter()
            .map(|c| {
                self.flatten(c)
                    .ok_or_else(|| format!("point {k}: a choice of blocks not pending"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok((flat, left_out))
    }

    fn items_at(&mut self, k: usize) -> Result<PointItems, String> {
        DevicesExplorer::items_at(self, k).map_err(|e| e.to_string())
    }

    fn least(&self, c: &Constraint) -> Option<StateChoice> {
        DevicesExplorer::least(self, c)
    }

    fn block_in(&self, port: u8, lba: u64, class: &Constraint, bases: &[Arc<Image>], buf: &mut [u8; BLOCK]) {
        match bases.get(port as usize) {
            Some(base) => DevicesExplorer::block_in(self, port, lba, class, base, buf),
            None => buf.fill(0),
        }
    }

    fn build(&self, k: usize, choice: &StateChoice) -> Result<DevicesState, String> {
        let c = self
            .split(choice)
            .ok_or_else(|| format!("point {k}: a choice of blocks not pending"))?;
        DevicesExplorer::build(self, k, &c).map_err(|e| e.to_string())
    }

    fn content_hash(state: &mut DevicesState) -> u128 {
        state.content_hash()
    }

    type Choice = DevicesChoice;

    fn place(state: DevicesState) -> (usize, DevicesChoice) {
        (state.point, state.choice)
    }
}

/// Where the volume's blocks live on a machine whose drives are
/// `backends` (by port): the geometry and, per member, its port, from the
/// members' labels (looked at without logging a read: the mount read
/// them). `None` if they do not assemble.
fn members_of(backends: &[Rc<nvme_ctrl::Backend>]) -> Option<(mqfs::volume::Stripe, Vec<usize>)> {
    let mut buf = [0u8; BLOCK];
    let labels: Vec<_> = backends
        .iter()
        .map(|b| {
            b.peek(0, &mut buf);
            mqfs::volume::Label::decode(&buf)
        })
        .collect();
    let sizes: Vec<u64> = backends.iter().map(|b| BlockSource::blocks(&**b)).collect();
    mqfs::volume::assemble(&labels, &sizes).ok()
}

/// Checks one state of a machine with several drives (`bases`: each
/// drive's starting image). With `cx.observe`, logs what the check reads
/// of every drive (PMR lines and blocks, each unit naming its drive's
/// port) and judges data blocks instead of reading them, as
/// [`crate::check::check_state`] does on one drive.
pub fn check_devices_state(cx: &CheckContext, bases: &[Arc<Image>], state: &DevicesState) -> CheckOutcome {
    let mut out = CheckOutcome::default();
    let ex = Executor::new(1);
    let m = Machine::new(&ex, cx.machine.clone(), TraceMode::CountersOnly);
    let configs = bases
        .iter()
        .map(|_| ControllerConfig::new(cx.profile.clone()))
        .collect();
    let ctrls = match boot_devices(&m, configs, bases, state) {
        Ok(c) => c,
        Err(e) => {
            // Booting reads nothing of the state.
            out.failures.push(Failure::new("boot", e.to_string()));
            out.reads = cx.observe.then(Vec::new);
            return out;
        }
    };
    let observe = cx.observe;
    if observe {
        for (port, c) in (0u8..).zip(&ctrls) {
            c.backend().log_reads();
            m.log_pmr_access(port);
        }
    }
    let applied = state.point + 1;
    let promises = cx.promises.clone();
    let (mode, probe, profile) = (
        cx.mode,
        probe_for(cx.mode, cx.fault),
        fs_profile_for(cx.mode, cx.fault),
    );
    let sanity_on = cx.sanity;
    let m2 = m.clone();
    let ctrls2 = ctrls.clone();
    // What recovery read and wrote (taken when the mount returns).
    let recovery_access: Rc<RefCell<Option<Access>>> = Rc::default();
    let recovery_access2 = recovery_access.clone();
    let run = async move {
        let c = Ctx::on(0);
        let mut failures = Vec::new();
        let mut log = Vec::new();
        let fs = match mount_drives(&m2, mode, probe, c, profile).await {
            Ok(fs) => fs,
            Err(e) => {
                failures.push(Failure::new("mount", e.to_string()));
                return (failures, log, None);
            }
        };
        log.push(format!(
            "mount: recovered over {} drives",
            fs.volume().devices().len()
        ));
        if observe {
            *recovery_access2.borrow_mut() = Some(take_access(&m2, &ctrls2));
        }
        let backends: Vec<_> = ctrls2.iter().map(|c| c.backend().clone()).collect();
        let sources: Vec<&dyn BlockSource> = backends.iter().map(|b| &**b as &dyn BlockSource).collect();
        match StripedSource::assemble(&sources).and_then(|v| mqfs::fsck::fsck(&v)) {
            Ok(report) => {
                failures.extend(fsck_failures(
                    &report.findings,
                    report.suppressed,
                    report.suppressed_errors,
                    true,
                ));
                log.push(format!("fsck: {} finding(s)", report.findings.len()));
            }
            Err(e) => failures.push(Failure::new("fsck", e.to_string())),
        }
        // Data blocks are judged, not read, where the reads are observed
        // ([`crate::blockwise`]): a volume block is looked at on the
        // member it maps to, without logging a read.
        let members = if observe { members_of(&backends) } else { None };
        let peek = |b: u64, buf: &mut [u8; BLOCK]| -> Unit {
            let at = members
                .as_ref()
                .and_then(|(stripe, ports)| stripe.map(b).and_then(|(m, lba)| Some((*ports.get(m)?, lba))));
            match at {
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
        let mut looked = if members.is_some() {
            Lookups::judging(BlockJudge::new(&peek))
        } else {
            Lookups::default()
        };
        let mut n = 0;
        for p in promises.iter().filter(|p| p.covers(applied)) {
            n += 1;
            match check_with(&fs, c, p, &mut looked).await {
                Ok(Some(f)) => failures.push(f),
                Ok(None) => {}
                Err(e) => failures.push(Failure::new("read", format!("checking `{}`: {e}", p.op))),
            }
        }
        log.push(format!("oracle: {n} promise(s) checked"));
        let judgements: Vec<BlockJudgement> = looked.into_judgements();
        // The sanity check runs or not on the failures so far only: no
        // step of the check may depend on a judged block's bytes.
        if sanity_on && failures.is_empty() {
            match sanity(&fs, c).await {
                Ok(Some(f)) => failures.push(f),
                Ok(None) => {}
                Err(e) => failures.push(Failure::new("sanity", e.to_string())),
            }
        }
        let after = if observe {
            take_access(&m2, &ctrls2).0
        } else {
            Vec::new()
        };
        failures.extend(
            judgements
                .iter()
                .filter(|j| !j.own_ok)
                .map(BlockJudgement::failure),
        );
        (failures, log, Some((after, judgements)))
    };
    let outcome = ex.block_on_until(run, Some(SimTime::ZERO + RECOVERY_LIMIT));
    if observe {
        let after = match &outcome {
            Ok((_, _, Some((after, judged)))) => Some((&after[..], &judged[..])),
            _ => None,
        };
        let (reads, n, open) = observed(recovery_access.borrow_mut().take(), after, || {
            take_access(&m, &ctrls).0
        });
        out.reads = Some(reads);
        out.recovery_reads = n;
        out.judgements = open;
    }
    match outcome {
        Ok((failures, log, _)) => {
            out.failures = failures;
            out.log = log;
        }
        Err(e) => out.failures.push(Failure::new("hang", e.to_string())),
    }
    out
}

/// Explores every crash state of a run recorded on several drives:
/// by what checks read (the default, [`crate::observe`]) or up to the
/// bounds; violation ids start with `replay_of`.
pub fn explore_devices(
    rec: &Recording,
    cfg: &SavedConfig,
    opts: &ExploreOptions,
    replay_of: &str,
) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let mut report = ExploreReport::of_run(rec, cfg);
    let cx = CheckContext {
        verdicts: None,
        recoveries: None,
        observe: opts.read_sets,
        ..CheckContext::for_run(cfg, rec, opts.sanity)
    };
    let bases = bases_of(rec);
    // The media subsets per point are the product of each drive's: the
    // block bound is shared out so that their product stays within the
    // one-drive bound (2^bound subsets per point).
    let per_drive = (opts.bound_blocks / bases.len().max(1) as u32).max(1);
    let mut explorer = devices_explorer_of(rec, &cfg.profile)?;
    let found = check_all(
        &mut explorer,
        &cx,
        &bases,
        per_drive,
        opts,
        &mut report,
        |state| check_devices_state(&cx, &bases, state),
    )?;
    let found = found
        .into_iter()
        .map(|(point, choice, failures)| (point, encode_devices_choice(&choice), failures))
        .collect();
    Ok(finish_report(report, found, cfg, opts, replay_of, t0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_choice_round_trips() {
        let c = DevicesChoice {
            pmr: pcie_sim::CrashChoice {
                in_flight_landed: vec![1, 0],
                lines_landed: vec![3],
            },
            media: vec![vec![], vec![0, 2]],
        };
        let s = encode_devices_choice(&c);
        assert_eq!(s, "f1-0.l3.m~0-2");
        assert_eq!(decode_devices_choice(&s, 2), Some(c));
        assert_eq!(decode_devices_choice(&s, 3), None);
        assert_eq!(decode_devices_choice("f.l.m1", 2), None);
    }
}
