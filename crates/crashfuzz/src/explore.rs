//! Exploration: every crash point of a recorded run, every crash state the
//! persistence model allows there (up to a bound on the pending items),
//! deduplicated by content hash, checked in parallel on all cores.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use nvme_ctrl::crash::{Explorer, StateChoice};
use serde::{Deserialize, Serialize};

use crate::check::{check_state, CheckContext};
use crate::error::Error;
use crate::observe::CrashSpace;
use crate::oracle::Failure;
use crate::record::{mode_label, record, Recording, RunConfig};
use crate::saved::{SavedConfig, SavedRun};
use crate::workload::{Outcome, Workload};

/// Bounds and parallelism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// Write-combining lines enumerated per crash point (2^bound subsets).
    pub bound_lines: u32,
    /// Volatile-cache blocks enumerated per crash point (2^bound subsets).
    pub bound_blocks: u32,
    /// Worker threads.
    pub jobs: usize,
    /// Run the sanity check on every state.
    pub sanity: bool,
    /// Stop after this many violations (0: never).
    pub max_violations: usize,
    /// Give a state the verdict of one that recovered to the same image
    /// under the same promises, instead of running fsck and the oracle
    /// again (`docs/architecture.md` 6.2: it keeps every verdict).
    pub reuse_verdicts: bool,
    /// Reuse the recovery of a state that read the same content instead
    /// of booting ([`crate::reuse`]: it keeps every verdict; it needs
    /// `reuse_verdicts`).
    pub reuse_recovery: bool,
    /// Enumerate states by what their checks read ([`crate::observe`]):
    /// every state the envelope allows is judged, none sampled, and the
    /// bounds do not apply. Off: every state up to the bounds is built.
    pub read_sets: bool,
    /// With `read_sets`: most states checked per crash point (each judges
    /// a class of states; past it, the classes not split are counted as
    /// not visited).
    pub node_budget: usize,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            bound_lines: 8,
            bound_blocks: 8,
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            sanity: true,
            max_violations: 0,
            reuse_verdicts: true,
            reuse_recovery: true,
            read_sets: true,
            node_budget: 1 << 12,
        }
    }
}

/// One violation, with what replays it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Replay id (`crashfuzz replay ID`).
    pub id: String,
    /// The crash happened after this trace entry.
    pub crash_point: usize,
    /// Which pending items landed.
    pub choice: String,
    /// The failed check.
    pub check: String,
    /// What failed.
    pub detail: String,
    /// A command line that replays exactly this state.
    pub replay: String,
}

/// What exploring one workload in one configuration found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExploreReport {
    /// The run's number in its campaign (see [`crate::shard`]).
    #[serde(default)]
    pub run: usize,
    /// Workload.
    pub workload: String,
    /// Mode.
    pub mode: String,
    /// Drive profile.
    pub profile: String,
    /// Crash points (trace entries).
    pub crash_points: usize,
    /// States the model allows, within the bounds.
    pub states_total: u64,
    /// Distinct states checked.
    pub states_checked: u64,
    /// States skipped as equal to one already checked.
    pub states_deduplicated: u64,
    /// States the bounds left out (never enumerated); `u64::MAX`: at least
    /// that many.
    pub states_not_visited: u64,
    /// States judged by the read-set reduction ([`crate::observe`]): equal,
    /// wherever their class's checked state was read, to that state.
    #[serde(default)]
    pub states_by_read_set: u64,
    /// Classes of judged data blocks evaluated apart from their leaf's
    /// check ([`crate::blockwise`]).
    #[serde(default)]
    pub blocks_judged: u64,
    /// Witnesses checked: states of a leaf in a class a judgement
    /// rejected.
    #[serde(default)]
    pub witnesses: u64,
    /// The reductions this run applied (each keeps every verdict; see
    /// `docs/architecture.md` 6.2).
    #[serde(default)]
    pub reductions: Vec<String>,
    /// Violations found.
    pub violations: Vec<Violation>,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Distinct states checked per wall-clock second.
    pub states_per_second: f64,
    /// Operations the file system refused while recording.
    pub refused_ops: usize,
    /// Those operations, each as `OP (where): ERRNO: message`.
    #[serde(default)]
    pub refused: Vec<String>,
    /// The outcome the workload says this run must have (its `expect`
    /// lines), if any.
    #[serde(default)]
    pub expected: Option<Outcome>,
    /// Wall-clock seconds spent recording the run.
    pub record_seconds: f64,
    /// Wall-clock seconds spent building and hashing states.
    pub enumerate_seconds: f64,
    /// Wall-clock seconds spent checking states, summed over workers.
    pub check_seconds: f64,
    /// Checked states that recovered to an image already judged (with the
    /// same promises in force): recovery ran, the verdict was reused.
    pub states_recovered_alike: u64,
    /// Checked states whose recovery was not run: an earlier state's
    /// recovery read the same content ([`crate::reuse`]).
    #[serde(default)]
    pub states_recovery_reused: u64,
}

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
/// base PMR (drive on port 0), with the drive's volatile cache if
/// `profile` has one.
pub fn explorer_of<'a>(rec: &'a Recording, profile: &nvme_ctrl::SsdProfile) -> Result<Explorer<'a>, Error> {
    Explorer::new(
        &rec.trace,
        rec.layout.clone(),
        vec![rec.base_pmr.clone()],
        0,
        profile.volatile_cache(),
    )
    .map_err(Error::from)
}

/// Explores every crash state of a recorded run whose machines `cfg`
/// describes: the exploration [`explore`] and [`explore_saved`] share.
/// Violation ids start with `replay_of`; `record_seconds` is left 0.
pub fn explore_recording(
    rec: &Recording,
    cfg: &SavedConfig,
    opts: &ExploreOptions,
    replay_of: &str,
) -> Result<ExploreReport, Error> {
    if cfg.mode.drives() > 1 {
        return crate::devices::explore_devices(rec, cfg, opts, replay_of);
    }
    let t0 = Instant::now();
    let mut report = ExploreReport {
        workload: cfg.workload.clone(),
        mode: mode_label(cfg.mode, cfg.fault),
        profile: cfg.profile.name.into(),
        refused_ops: rec.refused.len(),
        refused: rec.refused.iter().map(|(op, e)| format!("{op}: {e}")).collect(),
        ..Default::default()
    };
    let cx = CheckContext {
        recoveries: (opts.reuse_verdicts && opts.reuse_recovery).then(Arc::default),
        verdicts: opts.reuse_verdicts.then(Arc::default),
        observe: opts.read_sets,
        ..CheckContext::for_run(cfg, rec, opts.sanity)
    };
    let mut explorer = explorer_of(rec, &cfg.profile)?;
    report.crash_points = explorer.points();
    let jobs = opts.jobs.max(1);
    let (tx, rx) = crossbeam::channel::bounded::<Job>(256);
    let (rtx, rrx) = crossbeam::channel::unbounded::<Checked>();
    let mut found: Vec<(usize, StateChoice, Vec<Failure>)> = Vec::new();
    let mut enum_err = None;
    std::thread::scope(|s| {
        for _ in 0..jobs {
            let rx = rx.clone();
            let rtx = rtx.clone();
            let cx = cx.clone();
            s.spawn(move || {
                for job in rx.iter() {
                    let t = Instant::now();
                    let out = check_state(&cx, &job.state);
                    let done = Checked {
                        tag: job.tag,
                        point: job.state.point,
                        choice: job.state.choice,
                        failures: out.failures,
                        seconds: t.elapsed().as_secs_f64(),
                        recovered_alike: out.recovered_alike,
                        recovery_reused: out.recovery_reused,
                        reads: out.reads,
                        judgements: out.judgements,
                    };
                    if rtx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(rx);
        drop(rtx);
        let mut tally = |r: Checked, report: &mut ExploreReport| {
            report.check_seconds += r.seconds;
            report.states_recovered_alike += u64::from(r.recovered_alike);
            report.states_recovery_reused += u64::from(r.recovery_reused);
            if !r.failures.is_empty() {
                found.push((r.point, r.choice, r.failures));
            }
        };
        let t_enum = Instant::now();
        let res = if opts.read_sets {
            crate::observe::enumerate(
                &mut explorer,
                &cx.promises,
                std::slice::from_ref(&cx.base),
                opts.node_budget,
                &tx,
                &rrx,
                &mut report,
                &mut tally,
            )
        } else {
            enumerate_bounded(
                &mut explorer,
                &cx.promises,
                opts.bound_lines,
                opts.bound_blocks,
                &tx,
                &mut report,
            )
        };
        let waiting = match res {
            Ok(w) => w,
            Err(e) => {
                enum_err = Some(e);
                0.0
            }
        };
        report.enumerate_seconds = t_enum.elapsed().as_secs_f64() - waiting;
        drop(tx);
        for r in rrx.iter() {
            tally(r, &mut report);
        }
    });
    if let Some(e) = enum_err {
        return Err(Error::Failed(e));
    }
    report.reductions = [
        (true, "equal-content"),
        (opts.read_sets, "read-set"),
        (opts.read_sets, "block-judgement"),
        (opts.reuse_verdicts, "recovered-alike"),
        (opts.reuse_verdicts && opts.reuse_recovery, "recovery-reuse"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_string())
    .collect();
    let found = found
        .into_iter()
        .map(|(point, choice, failures)| (point, encode_choice(&choice), failures))
        .collect();
    Ok(finish_report(report, found, cfg, opts, replay_of, t0))
}

/// Puts the failing states `found` (crash point, encoded choice, failures)
/// into `report` as violations, ordered by point then choice (whatever
/// order the checker threads finished in), each with its replay id, up
/// to `opts.max_violations`; then stamps the wall time and the rate. One
/// drive and several drives ([`crate::devices`]) report alike.
pub(crate) fn finish_report(
    mut report: ExploreReport,
    mut found: Vec<(usize, String, Vec<Failure>)>,
    cfg: &SavedConfig,
    opts: &ExploreOptions,
    replay_of: &str,
    t0: Instant,
) -> ExploreReport {
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    for (point, c, failures) in found {
        let id = format!(
            "{replay_of}:{}:{}:{}:{point}:{c}",
            mode_label(cfg.mode, cfg.fault),
            cfg.profile.name,
            cfg.seed
        );
        for f in failures {
            report.violations.push(Violation {
                id: id.clone(),
                crash_point: point,
                choice: c.clone(),
                check: f.check,
                detail: f.detail,
                replay: format!("crashfuzz replay {id}"),
            });
        }
        if opts.max_violations > 0 && report.violations.len() >= opts.max_violations {
            break;
        }
    }
    report.wall_seconds = t0.elapsed().as_secs_f64();
    report.states_per_second = report.states_checked as f64 / report.wall_seconds.max(1e-9);
    report
}

/// A state for a checker thread (one drive's, or several drives'
/// [`nvme_ctrl::crash::DevicesState`]); `tag` is the enumerator's own.
pub(crate) struct Job<S = nvme_ctrl::crash::CrashState> {
    pub(crate) state: S,
    pub(crate) tag: usize,
}

/// What a checker thread found (`C`: the state's choice, as reported).
pub(crate) struct Checked<C = StateChoice> {
    pub(crate) tag: usize,
    pub(crate) point: usize,
    pub(crate) choice: C,
    pub(crate) failures: Vec<Failure>,
    pub(crate) seconds: f64,
    pub(crate) recovered_alike: bool,
    pub(crate) recovery_reused: bool,
    pub(crate) reads: Option<Vec<nvme_ctrl::crash::Unit>>,
    pub(crate) judgements: Vec<crate::blockwise::BlockJudgement>,
}

/// Enumerates every state of `explorer` up to the bounds (`max_lines`
/// write-combining lines, `max_blocks` cache blocks, per drive on several;
/// sampled past them and counted as not visited), sending each distinct
/// one to the checkers; one drive or several alike. Returns the seconds
/// spent waiting for them.
pub(crate) fn enumerate_bounded<S: CrashSpace>(
    explorer: &mut S,
    promises: &[crate::oracle::Promise],
    max_lines: u32,
    max_blocks: u32,
    tx: &crossbeam::channel::Sender<Job<S::State>>,
    report: &mut ExploreReport,
) -> Result<f64, String> {
    let mut seen: BTreeSet<u128> = BTreeSet::new();
    let mut points = NewPoints::default();
    // (states, left out) at the last point enumerated.
    let mut last = (0u64, 0u64);
    let mut waiting = 0f64;
    loop {
        let next = points.next(explorer, promises, || {
            // Nothing persistent or pending changed, same promises: every
            // state was judged at the point before.
            report.states_total += last.0;
            report.states_deduplicated += last.0;
            report.states_not_visited = report.states_not_visited.saturating_add(last.1);
        })?;
        let Some((k, promised)) = next else {
            break;
        };
        let (choices, left_out) = explorer.choices(k, max_lines, max_blocks)?;
        last = (choices.len() as u64, left_out);
        report.states_not_visited = report.states_not_visited.saturating_add(left_out);
        for choice in &choices {
            // One state at a time: a point can allow tens of thousands.
            let mut st = explorer.build(k, choice)?;
            report.states_total += 1;
            // A state is checked again when the promises in force differ:
            // the same content can pass before an fsync returns and fail
            // after.
            let h = pcie_sim::content_hash::combine(&[S::content_hash(&mut st), promised]);
            if !seen.insert(h) {
                report.states_deduplicated += 1;
                continue;
            }
            report.states_checked += 1;
            let t = Instant::now();
            if tx.send(Job { state: st, tag: 0 }).is_err() {
                return Ok(waiting);
            }
            waiting += t.elapsed().as_secs_f64();
        }
    }
    Ok(waiting)
}

/// Walks a run's crash points in order, passing over each point whose
/// states are those of the point before it: nothing persistent or pending
/// changed ([`Explorer::advance`]) and the same promises hold, so every
/// one of its states was judged there.
#[derive(Debug)]
pub(crate) struct NewPoints<V> {
    next: usize,
    last: Option<(V, u128)>,
}

impl<V> Default for NewPoints<V> {
    fn default() -> Self {
        NewPoints { next: 0, last: None }
    }
}

impl<V: PartialEq> NewPoints<V> {
    /// The next point with states of its own and its promises key (`None`
    /// past the last point); `same` is called for each point passed over.
    pub(crate) fn next<S: CrashSpace<Version = V>>(
        &mut self,
        explorer: &mut S,
        promises: &[crate::oracle::Promise],
        mut same: impl FnMut(),
    ) -> Result<Option<(usize, u128)>, String> {
        while self.next < explorer.points() {
            let k = self.next;
            self.next += 1;
            let version = explorer.advance(k)?;
            let promised = crate::oracle::promises_key(promises, k + 1);
            if self
                .last
                .as_ref()
                .is_some_and(|(v, p)| *v == version && *p == promised)
            {
                same();
                continue;
            }
            self.last = Some((version, promised));
            return Ok(Some((k, promised)));
        }
        Ok(None)
    }
}
