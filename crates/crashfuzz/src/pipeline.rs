//! What both explorers (one drive, [`crate::explore`]; several,
//! [`crate::devices`]) share: the options and the report of one run's
//! exploration, the jobs their checker threads take and the outcomes they
//! send back, which crash points hold states not judged yet, the bounded
//! enumeration over any [`CrashSpace`], and the violations put into the
//! report with their replay ids. It depends on neither explorer.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use nvme_ctrl::crash::{Constraint, CrashState, Explorer, PointItems, StateChoice};
use nvme_ctrl::Image;
use serde::{Deserialize, Serialize};

use crate::oracle::{is_promise_check, Failure};
use crate::record::{mode_label, Recording};
use crate::saved::SavedConfig;
use crate::workload::Outcome;

/// The crash states of a run as the read-set reduction walks them: one
/// drive ([`Explorer`]) or several ([`nvme_ctrl::crash::DevicesExplorer`],
/// [`crate::devices`]). A choice is a [`StateChoice`] whose block versions
/// are numbered across the drives ([`nvme_ctrl::crash::PointItems`]); a
/// unit names the drive of a block as it names the port of a PMR line.
pub trait CrashSpace {
    /// A built state, for a checker.
    type State: Send;
    /// Equal at two points exactly when nothing that makes up a crash
    /// state changed between them.
    type Version: PartialEq;
    /// Crash points (trace entries).
    fn points(&self) -> usize;
    /// Moves to the point after entry `k` (points in order).
    fn advance(&mut self, k: usize) -> Result<Self::Version, String>;
    /// The choices of the states after entry `k` up to the bounds (every
    /// drive's blocks numbered across the drives), with how many states
    /// the bounds left out; makes `k` the current point.
    fn choices(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<StateChoice>, u64), String>;
    /// The pending items after entry `k` by unit; makes `k` current.
    fn items_at(&mut self, k: usize) -> Result<PointItems, String>;
    /// The least state of the current point meeting `c`.
    fn least(&self, c: &Constraint) -> Option<StateChoice>;
    /// What block `lba` of the drive on `port` holds in class `class` of
    /// the current point (`bases`: each drive's starting image, by port).
    fn block_in(
        &self,
        port: u8,
        lba: u64,
        class: &Constraint,
        bases: &[Arc<Image>],
        buf: &mut [u8; mqfs::layout::BLOCK],
    );
    /// Builds the state after entry `k` (the current point) given by
    /// `choice`.
    fn build(&self, k: usize, choice: &StateChoice) -> Result<Self::State, String>;
    /// The state's content hash (every drive's PMR and media).
    fn content_hash(state: &mut Self::State) -> u128;
    /// How a violation's id names a state's choice.
    type Choice: Send;
    /// A checked state's crash point and choice.
    fn place(state: Self::State) -> (usize, Self::Choice);
    /// The choice as a violation's id names it (`crashfuzz replay` decodes
    /// it).
    fn encode(choice: &Self::Choice) -> String;
}

impl CrashSpace for Explorer<'_> {
    type State = CrashState;
    type Version = (u64, u64);

    fn points(&self) -> usize {
        Explorer::points(self)
    }

    fn advance(&mut self, k: usize) -> Result<(u64, u64), String> {
        Explorer::advance(self, k).map_err(|e| e.to_string())
    }

    fn choices(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<StateChoice>, u64), String> {
        self.choices_at(k, max_lines, max_blocks)
            .map_err(|e| e.to_string())
    }

    fn items_at(&mut self, k: usize) -> Result<PointItems, String> {
        Explorer::items_at(self, k).map_err(|e| e.to_string())
    }

    fn least(&self, c: &Constraint) -> Option<StateChoice> {
        Explorer::least(self, c)
    }

    fn block_in(
        &self,
        port: u8,
        lba: u64,
        class: &Constraint,
        bases: &[Arc<Image>],
        buf: &mut [u8; mqfs::layout::BLOCK],
    ) {
        match bases.get(port as usize) {
            Some(base) => Explorer::block_in(self, lba, class, base, buf),
            None => buf.fill(0),
        }
    }

    fn build(&self, k: usize, choice: &StateChoice) -> Result<CrashState, String> {
        Explorer::build(self, k, choice).map_err(|e| e.to_string())
    }

    fn content_hash(state: &mut CrashState) -> u128 {
        state.content_hash()
    }

    type Choice = StateChoice;

    fn place(state: CrashState) -> (usize, StateChoice) {
        (state.point, state.choice)
    }

    fn encode(choice: &StateChoice) -> String {
        crate::explore::encode_choice(choice)
    }
}

/// Most checks per crash point when the drives' states are enumerated by
/// what their checks read ([`DriveEnumeration::ReadSets`], `--budget`).
pub const DRIVE_NODE_BUDGET: usize = 1 << 12;

/// The bound on write-combining lines and on cache blocks with
/// [`DriveEnumeration::Bounded`] when none is given (`--bounded`).
pub const DEFAULT_DRIVE_BOUND: u32 = 8;

/// How the crash states of the drives after each trace entry are
/// enumerated (the drive side's counterpart of
/// [`crate::pm::PmEnumeration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriveEnumeration {
    /// Every state the envelope allows, judged by what the checks read
    /// ([`crate::observe`]): states that hold the same at every PMR line
    /// and block their class's check read share its verdict, so within
    /// the budget no state is left unvisited and none is sampled.
    ReadSets {
        /// Most checks per crash point (each judges a class of states;
        /// past it, each class not split yet counts as at least one state
        /// not visited).
        budget: usize,
    },
    /// Every state up to the bounds, each built and checked (2^`lines`
    /// subsets of the write-combining lines and 2^`blocks` of the
    /// volatile cache's blocks per crash point); past them, sampled and
    /// the rest counted as not visited (`--bounded`, `--brute-force`).
    Bounded {
        /// Write-combining lines enumerated per crash point.
        lines: u32,
        /// Volatile-cache blocks enumerated per crash point (on several
        /// drives, shared out among them, `blocks / drives` each).
        blocks: u32,
    },
}

impl DriveEnumeration {
    /// True when states are enumerated by what their checks read.
    pub fn by_read_sets(&self) -> bool {
        matches!(self, DriveEnumeration::ReadSets { .. })
    }

    /// This enumeration on a machine of `drives` drives (more than one):
    /// the media subsets per point are the product of each drive's, so the
    /// block bound is shared out (`blocks / drives` each, at least 1) to
    /// keep their product within the one-drive bound.
    pub(crate) fn per_drive(self, drives: u32) -> DriveEnumeration {
        match self {
            DriveEnumeration::Bounded { lines, blocks } => DriveEnumeration::Bounded {
                lines,
                blocks: (blocks / drives).max(1),
            },
            read_sets => read_sets,
        }
    }
}

impl Default for DriveEnumeration {
    fn default() -> Self {
        DriveEnumeration::ReadSets {
            budget: DRIVE_NODE_BUDGET,
        }
    }
}

/// How a self-check's switched-off mechanism must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaughtBy {
    /// A broken promise (not only fsck or a refused mount).
    Promise,
    /// A broken promise, or recovery refusing the image ("probe"): for a
    /// mechanism whose absence leaves a state the driver's recovery can
    /// tell is torn (a P-SQ doorbell over entries that never landed).
    PromiseOrRefusal,
}

impl CaughtBy {
    /// True if a violation of `check` counts.
    pub fn counts(self, check: &str) -> bool {
        is_promise_check(check) || (self == CaughtBy::PromiseOrRefusal && check == "probe")
    }
}

/// How the drives' crash states are enumerated and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// How each crash point's states are enumerated.
    pub enumeration: DriveEnumeration,
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
    /// Stop after the first wave of checks with a violation this counts
    /// (a self-check needs one; [`ExploreReport::stopped_early`]). Every
    /// state of the points before it is checked, and a point's waves are
    /// built and tallied in an order that does not depend on thread
    /// timing, so neither does where it stops. Only the enumeration by
    /// what checks read stops; a bounded one runs whole.
    pub stop_when_caught: Option<CaughtBy>,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            enumeration: DriveEnumeration::default(),
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            sanity: true,
            max_violations: 0,
            reuse_verdicts: true,
            reuse_recovery: true,
            stop_when_caught: None,
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
    /// The run stopped after the first wave of checks with a violation
    /// that counts ([`ExploreOptions::stop_when_caught`]); the counts cover
    /// the states explored until then (the rest of that point's open
    /// classes count as not visited).
    #[serde(default)]
    pub stopped_early: bool,
    /// Where this run's crash states are fewer than the persistence
    /// envelope allows, and why (a run saved by an older build; see
    /// `nvme_ctrl::MediaCursor::arrivals_without_submission`); empty for a run this
    /// build recorded. Its PASS covers only the states it explored.
    #[serde(default)]
    pub narrowed: Vec<String>,
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

impl ExploreReport {
    /// An empty report of the run `rec` recorded as `cfg` says.
    pub(crate) fn of_run(rec: &Recording, cfg: &SavedConfig) -> ExploreReport {
        ExploreReport {
            workload: cfg.workload.clone(),
            mode: mode_label(cfg.mode, cfg.fault),
            profile: cfg.profile.name.into(),
            refused_ops: rec.refused.len(),
            refused: rec.refused.iter().map(|(op, e)| format!("{op}: {e}")).collect(),
            ..Default::default()
        }
    }
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
