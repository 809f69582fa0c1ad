//! Crash exploration of a machine with several drives (`horae2`: HoraeFS
//! on a volume striped over two drives).
//!
//! The crash states are those of `nvme_ctrl::crash::DevicesExplorer`: the
//! product of each drive's choices (its PMR writes in flight and WC lines,
//! its volatile cache's blocks), each drive failing on its own. Every
//! state up to the bounds (`--bound-lines` for the PMR; `--bound-blocks`
//! shared out among the drives, `bound / drives` each, so the product of
//! their subsets stays within the one-drive bound; past them sampled and
//! counted as not visited) is built,
//! deduplicated by content (every drive's PMR and media, with the promises
//! in force) and checked: a fresh machine boots over the state with every
//! drive on its port again, the volume is assembled and mounted (HoraeFS's
//! recovery over both drives: `recover_stream`, a discard on each), fsck
//! reads the volume through its members, then the promises in force and
//! CrashMonkey's sanity check.
//!
//! Not applied here (`docs/decisions.md` H12): the read-set reduction and
//! the verdict and recovery reuse of the one-drive explorer; each
//! distinct state is judged in full.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use mqfs::volume::StripedSource;
use mqfs::{BlockSource, Ctx};
use nvme_ctrl::crash::{boot_devices, DevicesChoice, DevicesExplorer, DevicesState};
use nvme_ctrl::{ControllerConfig, Image};
use pcie_sim::{Executor, Machine, SimTime, TraceMode};

use crate::check::{fsck_failures, CheckContext, CheckOutcome, RECOVERY_LIMIT};
use crate::error::Error;
use crate::explore::{finish_report, ExploreOptions, ExploreReport};
use crate::oracle::{check_with, sanity, Failure, Lookups};
use crate::record::{fs_profile_for, mode_label, mount_drives, probe_for, Recording};
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

/// Checks one state of a machine with several drives (`bases`: each
/// drive's starting image).
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
            out.failures.push(Failure::new("boot", e.to_string()));
            return out;
        }
    };
    let applied = state.point + 1;
    let promises = cx.promises.clone();
    let (mode, probe, profile) = (
        cx.mode,
        probe_for(cx.mode, cx.fault),
        fs_profile_for(cx.mode, cx.fault),
    );
    let sanity_on = cx.sanity;
    let m2 = m.clone();
    let run = async move {
        let c = Ctx::on(0);
        let mut failures = Vec::new();
        let mut log = Vec::new();
        let fs = match mount_drives(&m2, mode, probe, c, profile).await {
            Ok(fs) => fs,
            Err(e) => {
                failures.push(Failure::new("mount", e.to_string()));
                return (failures, log);
            }
        };
        log.push(format!(
            "mount: recovered over {} drives",
            fs.volume().devices().len()
        ));
        let backends: Vec<_> = ctrls.iter().map(|c| c.backend().clone()).collect();
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
        let mut looked = Lookups::default();
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
        if sanity_on && failures.is_empty() {
            match sanity(&fs, c).await {
                Ok(Some(f)) => failures.push(f),
                Ok(None) => {}
                Err(e) => failures.push(Failure::new("sanity", e.to_string())),
            }
        }
        (failures, log)
    };
    match ex.block_on_until(run, Some(SimTime::ZERO + RECOVERY_LIMIT)) {
        Ok((failures, log)) => {
            out.failures = failures;
            out.log = log;
        }
        Err(e) => out.failures.push(Failure::new("hang", e.to_string())),
    }
    out
}

/// A state for a checker thread.
struct Job {
    state: DevicesState,
}

/// What a checker thread found.
struct Checked {
    point: usize,
    choice: DevicesChoice,
    failures: Vec<Failure>,
    seconds: f64,
}

/// Explores every crash state (up to the bounds) of a run recorded on
/// several drives; violation ids start with `replay_of`.
pub fn explore_devices(
    rec: &Recording,
    cfg: &SavedConfig,
    opts: &ExploreOptions,
    replay_of: &str,
) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let mut report = ExploreReport {
        workload: cfg.workload.clone(),
        mode: mode_label(cfg.mode, cfg.fault),
        profile: cfg.profile.name.into(),
        refused_ops: rec.refused.len(),
        refused: rec.refused.iter().map(|(op, e)| format!("{op}: {e}")).collect(),
        reductions: vec!["equal-content".into()],
        ..Default::default()
    };
    let cx = CheckContext {
        verdicts: None,
        ..CheckContext::for_run(cfg, rec, opts.sanity)
    };
    let bases = bases_of(rec);
    // The media subsets per point are the product of each drive's: the
    // block bound is shared out so that their product stays within the
    // one-drive bound (2^bound subsets per point).
    let per_drive = (opts.bound_blocks / bases.len().max(1) as u32).max(1);
    let mut explorer = devices_explorer_of(rec, &cfg.profile)?;
    report.crash_points = explorer.points();
    let (tx, rx) = crossbeam::channel::bounded::<Job>(256);
    let (rtx, rrx) = crossbeam::channel::unbounded::<Checked>();
    let mut enum_err = None;
    let mut found: Vec<(usize, DevicesChoice, Vec<Failure>)> = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1) {
            let (rx, rtx, cx, bases) = (rx.clone(), rtx.clone(), cx.clone(), bases.clone());
            s.spawn(move || {
                for job in rx.iter() {
                    let t = Instant::now();
                    let out = check_devices_state(&cx, &bases, &job.state);
                    let done = Checked {
                        point: job.state.point,
                        choice: job.state.choice,
                        failures: out.failures,
                        seconds: t.elapsed().as_secs_f64(),
                    };
                    if rtx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(rx);
        drop(rtx);
        let t_enum = Instant::now();
        let mut waiting = 0f64;
        let res = (|| -> Result<(), String> {
            let mut seen: BTreeSet<u128> = BTreeSet::new();
            let mut last: Option<(Vec<u64>, u128)> = None;
            let mut last_counts = (0u64, 0u64);
            for k in 0..explorer.points() {
                let version = explorer.advance(k).map_err(|e| e.to_string())?;
                let promised = crate::oracle::promises_key(&cx.promises, k + 1);
                let key = (version, promised);
                if last.as_ref() == Some(&key) {
                    // Nothing persistent or pending changed, same promises:
                    // every state was judged at the point before.
                    report.states_total += last_counts.0;
                    report.states_deduplicated += last_counts.0;
                    report.states_not_visited = report.states_not_visited.saturating_add(last_counts.1);
                    continue;
                }
                last = Some(key);
                let (choices, left_out) = explorer
                    .choices_at(k, opts.bound_lines, per_drive)
                    .map_err(|e| e.to_string())?;
                last_counts = (choices.len() as u64, left_out);
                report.states_not_visited = report.states_not_visited.saturating_add(left_out);
                for choice in &choices {
                    let mut st = explorer.build(k, choice).map_err(|e| e.to_string())?;
                    report.states_total += 1;
                    let h = pcie_sim::content_hash::combine(&[st.content_hash(), promised]);
                    if !seen.insert(h) {
                        report.states_deduplicated += 1;
                        continue;
                    }
                    report.states_checked += 1;
                    let t = Instant::now();
                    if tx.send(Job { state: st }).is_err() {
                        return Ok(());
                    }
                    waiting += t.elapsed().as_secs_f64();
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            enum_err = Some(e);
        }
        report.enumerate_seconds = t_enum.elapsed().as_secs_f64() - waiting;
        drop(tx);
        for r in rrx.iter() {
            report.check_seconds += r.seconds;
            if !r.failures.is_empty() {
                found.push((r.point, r.choice, r.failures));
            }
        }
    });
    if let Some(e) = enum_err {
        return Err(Error::Failed(e));
    }
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
