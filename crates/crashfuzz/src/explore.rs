//! Exploration: every crash point of a recorded run, every crash state the
//! persistence model allows there (up to a bound on the pending items),
//! deduplicated by content hash, checked in parallel on all cores.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use nvme_ctrl::crash::{BootState, Explorer, StateChoice};

pub use crate::pipeline::{
    DriveEnumeration, ExploreOptions, ExploreReport, Violation, DEFAULT_DRIVE_BOUND, DRIVE_NODE_BUDGET,
};

use crate::check::{check_state, CheckContext};
use crate::checkers::check_all;
use crate::devices::devices_explorer_of;
use crate::error::Error;
use crate::oracle::Failure;
use crate::pipeline::{finish_report, CrashSpace};
use crate::record::{record, Recording, RunConfig};
use crate::saved::{SavedConfig, SavedRun};
use crate::workload::Workload;

/// Encodes a choice compactly for ids: `f<prefixes>.l<lines>.m<blocks>`.
pub fn encode_choice(c: &StateChoice) -> String {
    let f: Vec<String> = c.pmr.in_flight_landed.iter().map(|n| n.to_string()).collect();
    let l: Vec<String> = c.pmr.lines_landed.iter().map(|n| n.to_string()).collect();
    let m: Vec<String> = c.media.iter().map(|n| n.to_string()).collect();
    format!("f{}.l{}.m{}", f.join("-"), l.join("-"), m.join("-"))
}

/// Decodes [`encode_choice`].
pub fn decode_choice(s: &str) -> Option<StateChoice> {
    let mut parts = s.split('.');
    let list = |p: Option<&str>, tag: char| -> Option<Vec<usize>> {
        let p = p?.strip_prefix(tag)?;
        if p.is_empty() {
            return Some(Vec::new());
        }
        p.split('-').map(|x| x.parse().ok()).collect()
    };
    let f = list(parts.next(), 'f')?;
    let l = list(parts.next(), 'l')?;
    let m = list(parts.next(), 'm')?;
    if parts.next().is_some() {
        return None;
    }
    Some(StateChoice {
        pmr: pcie_sim::CrashChoice {
            in_flight_landed: f,
            lines_landed: l,
        },
        media: m,
    })
}

/// A hash of which promises are in force after `applied` trace entries.
/// Records `w` under `cfg` and explores every crash state; violation ids
/// start with `replay_of` (the workload's name).
pub fn explore(
    w: &Workload,
    cfg: &RunConfig,
    opts: &ExploreOptions,
    replay_of: &str,
) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let rec = record(w, cfg)?;
    let record_seconds = t0.elapsed().as_secs_f64();
    let mut report = explore_recording(&rec, &SavedConfig::of_run(w, cfg), opts, replay_of)?;
    report.record_seconds = record_seconds;
    report.expected = w.expected(&report.mode);
    report.wall_seconds += record_seconds;
    report.states_per_second = report.states_checked as f64 / report.wall_seconds.max(1e-9);
    Ok(report)
}

/// Loads the saved run at `path` and explores every crash state, as
/// [`explore`] does for a workload. The report's workload and the
/// violation ids name the file as `@PATH` (`crashfuzz replay` takes them);
/// `record_seconds` is the time spent loading it.
pub fn explore_saved(path: &Path, opts: &ExploreOptions) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let saved = SavedRun::load(path)?;
    let load_seconds = t0.elapsed().as_secs_f64();
    let name = format!("@{}", path.display());
    let mut report = explore_recording(&saved.recording, &saved.config, opts, &name)?;
    report.workload = name;
    report.record_seconds = load_seconds;
    report.wall_seconds += load_seconds;
    report.states_per_second = report.states_checked as f64 / report.wall_seconds.max(1e-9);
    Ok(report)
}

/// The crash-state explorer of a recorded run: its trace over the run's
/// base PMR (drive on port 0).
pub fn explorer_of(rec: &Recording) -> Result<Explorer<'_>, Error> {
    Explorer::new(&rec.trace, rec.layout.clone(), vec![rec.base_pmr.clone()], 0).map_err(Error::from)
}

/// Explores every crash state of a recorded run whose machines `cfg`
/// describes, on one drive or several: the exploration [`explore`] and
/// [`explore_saved`] share. Violation ids start with `replay_of`;
/// `record_seconds` is left 0.
pub fn explore_recording(
    rec: &Recording,
    cfg: &SavedConfig,
    opts: &ExploreOptions,
    replay_of: &str,
) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let mut report = ExploreReport::of_run(rec, cfg);
    let cx = CheckContext {
        recoveries: (opts.reuse_verdicts && opts.reuse_recovery).then(Arc::default),
        verdicts: opts.reuse_verdicts.then(Arc::default),
        observe: opts.enumeration.by_read_sets(),
        ..CheckContext::for_run(cfg, rec, opts.sanity)
    };
    let drives = u32::from(cfg.mode.drives());
    let found = if drives > 1 {
        let enumeration = opts.enumeration.per_drive(drives);
        let mut explorer = devices_explorer_of(rec)?;
        report.narrowed = narrowed_envelope(&explorer.arrivals_without_submission());
        check_space(&mut explorer, &cx, enumeration, opts, &mut report)?
    } else {
        let mut explorer = explorer_of(rec)?;
        report.narrowed = narrowed_envelope(&explorer.arrivals_without_submission());
        check_space(&mut explorer, &cx, opts.enumeration, opts, &mut report)?
    };
    Ok(finish_report(report, found, cfg, opts, replay_of, t0))
}

/// What the media cursors offer from arrival only, per drive
/// (`MediaCursor::arrivals_without_submission`), said as the report's
/// narrowings: a run saved by a build that recorded no submissions.
fn narrowed_envelope(arrival_only: &[usize]) -> Vec<String> {
    arrival_only
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(drive, n)| {
            format!(
                "drive {drive}: {n} block write(s) saved without their submission (an older build): offered from their data's arrival \
                 only, not from their submission as NVMe 1.4 6.3 allows; record the run again for the whole envelope"
            )
        })
        .collect()
}

/// Checks every state of `explorer` with [`check_state`] ([`check_all`],
/// enumerated as `enumeration` says: `opts.enumeration`, with the block
/// bound shared out among the drives); the failing states with their
/// choices encoded for ids.
fn check_space<S>(
    explorer: &mut S,
    cx: &CheckContext,
    enumeration: DriveEnumeration,
    opts: &ExploreOptions,
    report: &mut ExploreReport,
) -> Result<Vec<(usize, String, Vec<Failure>)>, Error>
where
    S: CrashSpace,
    S::State: BootState + Clone + 'static,
{
    let found = check_all(explorer, cx, &cx.bases, enumeration, opts, report, |state| {
        check_state(cx, state)
    })?;
    Ok(found
        .into_iter()
        .map(|(point, choice, failures)| (point, S::encode(&choice), failures))
        .collect())
}
