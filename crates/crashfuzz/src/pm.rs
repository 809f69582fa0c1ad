//! The PM modes: crashfuzz workloads on the file systems on persistent
//! memory (`wofs`, `soupfs`, `pmfs`), recorded and checked by their crash
//! harness ([`fsapi::crash`], whose loop is [`pcie_sim::pmem::explore()`]),
//! reported like the block-device runs ([`ExploreReport`], violations with
//! replay ids).
//!
//! A PM mode's "profile" is the persistence domain: `pm-adr` (the caches
//! are volatile: a store persists once flushed and fenced, or written
//! back) or `pm-eadr` (the caches are in the domain).
//!
//! A workload is translated operation by operation ([`translate`]): the
//! namespace operations and `write` as they are (the data is the
//! workload's pattern), `fsync`, `fdatasync`, `fatomic` and `fdataatomic`
//! as the file system's `fsync`, `sync` and `sleep` as they are. A
//! workload with an operation these file systems lack (symlinks, extended
//! attributes, fallocate, `O_DIRECT`, `sync_file_range`, mappings,
//! descriptors, waits, `fill`) or with several threads is refused whole
//! for the PM modes, with a one-line [`Error::PmRefused`]: never run with
//! part of it missing.
//!
//! The oracle is the file system's own promise ([`fsapi::crash::Promise`]):
//! WOFS and PMFS are synchronous (the recovered tree is the one after the
//! last operation that returned or after the one in flight), SoupFS is
//! durable at fsync. A violation's id is
//! `WORKLOAD:MODE[+SWITCH]:PROFILE:SEED:POINT:pLANDED` (`LANDED`: the
//! pending items that persisted, [`encode_landed`]); `crashfuzz replay ID`
//! records the run again (deterministic), rebuilds that state, mounts it
//! and prints the recovered tree and the verdict.
//!
//! Every state the envelope allows gets a verdict by what the checks read
//! ([`PmEnumeration::ReadSets`]: [`pcie_sim::pmem::explore_read_sets`] over
//! the read-set tree the drive modes use too, [`pcie_sim::readset`]), none
//! sampled and no bound; a run reports `pm-read-set` among its reductions,
//! its states in `states_by_read_set`, and none unvisited unless a point's
//! tree was cut at the budget (`pm-read-set-budget-N`). With `--bounded`
//! or `--brute-force` the states up to a bound are judged instead
//! ([`PmEnumeration::Bounded`]; `pm-bound-N` when points were sampled
//! past it).

use std::time::Instant;

use fsapi::crash::{self, CheckOptions, Enumeration, PmFs, Promise};
use fsapi::Tree;
use pcie_sim::PersistenceDomain;
use pmfs::Pmfs;
use soupfs::SoupFs;
use wofs::Wofs;

use crate::builtin::resolve;
use crate::campaign::on_workers;
use crate::error::Error;
use crate::pipeline::{ExploreReport, Violation};
use crate::shard::Shard;
use crate::workload::{pattern, Op, Workload};

/// A file system on persistent memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PmMode {
    /// WOFS (write-once packages; synchronous).
    Wofs,
    /// SoupFS (soft updates on PM; durable at fsync).
    Soupfs,
    /// The PMFS-style baseline (undo journal; synchronous).
    Pmfs,
}

impl PmMode {
    /// Every PM mode.
    pub const ALL: [PmMode; 3] = [PmMode::Wofs, PmMode::Soupfs, PmMode::Pmfs];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PmMode::Wofs => Wofs::NAME,
            PmMode::Soupfs => SoupFs::NAME,
            PmMode::Pmfs => Pmfs::NAME,
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<PmMode> {
        PmMode::ALL.into_iter().find(|m| m.name() == s)
    }

    /// What the file system promises about a crash.
    pub fn promise(self) -> Promise {
        match self {
            PmMode::Wofs => Wofs::PROMISE,
            PmMode::Soupfs => SoupFs::PROMISE,
            PmMode::Pmfs => Pmfs::PROMISE,
        }
    }

    /// Its fault switches' names (without the mode's prefix), in the order
    /// of its `Faults` fields.
    pub fn switches(self) -> Vec<&'static str> {
        fn names<F: PmFs>() -> Vec<&'static str> {
            F::fault_switches().into_iter().map(|s| s.name).collect()
        }
        match self {
            PmMode::Wofs => names::<Wofs>(),
            PmMode::Soupfs => names::<SoupFs>(),
            PmMode::Pmfs => names::<Pmfs>(),
        }
    }
}

/// The persistence domains, as PM profiles (`pm-adr`, `pm-eadr`).
pub const PM_PROFILES: [(&str, PersistenceDomain); 2] = [
    ("pm-adr", PersistenceDomain::Adr),
    ("pm-eadr", PersistenceDomain::Eadr),
];

/// The persistence domain a PM profile names.
pub fn domain_by_name(s: &str) -> Option<PersistenceDomain> {
    PM_PROFILES.iter().find(|(n, _)| *n == s).map(|(_, d)| *d)
}

/// A PM profile's name.
pub fn domain_name(d: PersistenceDomain) -> &'static str {
    match d {
        PersistenceDomain::Adr => "pm-adr",
        PersistenceDomain::Eadr => "pm-eadr",
    }
}

/// True if `s` names a PM profile.
pub fn is_pm_profile(s: &str) -> bool {
    domain_by_name(s).is_some()
}

/// One fault switch of one PM file system: `--fault MODE-SWITCH`
/// (`wofs-skip-clwb`), in a mode label `MODE+SWITCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PmFault {
    /// The file system.
    pub mode: PmMode,
    /// The switch ([`PmMode::switches`]).
    pub switch: &'static str,
}

impl PmFault {
    /// Every PM fault switch, file system by file system.
    pub fn all() -> Vec<PmFault> {
        PmMode::ALL
            .into_iter()
            .flat_map(|mode| {
                mode.switches()
                    .into_iter()
                    .map(move |switch| PmFault { mode, switch })
            })
            .collect()
    }

    /// Command-line name: `MODE-SWITCH`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.mode.name(), self.switch)
    }

    /// Parses a command-line name; `None` if it names no PM switch.
    pub fn parse(s: &str) -> Option<PmFault> {
        PmFault::all().into_iter().find(|f| f.name() == s)
    }
}

/// One PM run: a file system, a persistence domain, a seed and perhaps a
/// mechanism switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmRun {
    /// The file system.
    pub mode: PmMode,
    /// The persistence domain.
    pub domain: PersistenceDomain,
    /// Simulation seed.
    pub seed: u64,
    /// The switch turned on, if any.
    pub fault: Option<PmFault>,
}

impl PmRun {
    /// The mode field of reports and ids: `MODE` or `MODE+SWITCH`.
    pub fn label(&self) -> String {
        match self.fault {
            Some(f) => format!("{}+{}", self.mode.name(), f.switch),
            None => self.mode.name().to_string(),
        }
    }

    /// Parses [`PmRun::label`] (with the profile and seed of an id);
    /// `None` if the mode is not a PM mode.
    pub fn parse(label: &str, profile: &str, seed: u64) -> Result<Option<PmRun>, Error> {
        let (m, switch) = match label.split_once('+') {
            Some((m, s)) => (m, Some(s)),
            None => (label, None),
        };
        let Some(mode) = PmMode::from_name(m) else {
            return Ok(None);
        };
        let fault = match switch {
            None => None,
            Some(s) => Some(
                PmFault::parse(&format!("{m}-{s}")).ok_or_else(|| Error::UnknownFault(format!("{m}-{s}")))?,
            ),
        };
        let domain = domain_by_name(profile).ok_or_else(|| {
            Error::UnknownProfile(
                profile.into(),
                PM_PROFILES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            )
        })?;
        Ok(Some(PmRun {
            mode,
            domain,
            seed,
            fault,
        }))
    }
}

/// How a PM run's crash states are enumerated: [`Enumeration`], with the
/// bound of [`PmEnumeration::Bounded`] chosen per workload when not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmEnumeration {
    /// Every state the envelope allows, judged by what the checks read
    /// ([`pcie_sim::pmem::explore_read_sets`], over the one read-set tree
    /// [`pcie_sim::readset`]): none left unvisited within the budget.
    ReadSets {
        /// Most checks per crash point (past it, each class of states not
        /// split yet counts as at least one state not visited).
        budget: usize,
    },
    /// Every state up to a bound on the pending items (2^bound states per
    /// crash point), sampled past it (`--bounded`, `--brute-force`).
    Bounded {
        /// The bound; `None`: [`default_bound`] per workload.
        bound: Option<u32>,
    },
}

impl PmEnumeration {
    /// The harness's enumeration for a run of `w`.
    pub fn of(self, w: &Workload) -> Enumeration {
        match self {
            PmEnumeration::ReadSets { budget } => Enumeration::ReadSets { budget },
            PmEnumeration::Bounded { bound } => Enumeration::Bounded {
                bound: bound.unwrap_or_else(|| default_bound(w)),
            },
        }
    }
}

/// How PM runs are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmOptions {
    /// How each run's crash states are enumerated.
    pub enumeration: PmEnumeration,
    /// Worker threads (runs are spread over them).
    pub jobs: usize,
    /// Violations kept per run (0: all). A run with a fault switched on
    /// stops at its first.
    pub max_violations: usize,
}

/// Most checks per PM crash point by read sets, by default: a PM check
/// (a mount and the oracle) takes about a tenth of a millisecond, and the
/// largest tree of the default campaign (WOFS's ACE runs under ADR, a
/// package torn across two lines of 128 classes each) has 16384 leaves.
pub const PM_NODE_BUDGET: usize = 1 << 15;

/// The PM bound, without read sets (`--bounded`).
pub const DEFAULT_PM_BOUND: u32 = 4;

/// The PM bound, without read sets, for the ACE workloads (`ace1-*`,
/// `ace2-*`): their 32 KiB writes leave up to a thousand crash points
/// with hundreds of lines (SoupFS: thousands of words) pending each, so
/// each point gets the state where nothing pending landed and the one
/// where everything did.
pub const ACE_PM_BOUND: u32 = 1;

/// The bound a PM run of `w` takes when none is given: [`ACE_PM_BOUND`]
/// for the ACE workloads, else [`DEFAULT_PM_BOUND`].
pub fn default_bound(w: &Workload) -> u32 {
    if w.name.starts_with("ace") {
        ACE_PM_BOUND
    } else {
        DEFAULT_PM_BOUND
    }
}

impl Default for PmOptions {
    fn default() -> PmOptions {
        PmOptions {
            enumeration: PmEnumeration::ReadSets {
                budget: PM_NODE_BUDGET,
            },
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_violations: 100,
        }
    }
}

/// A workload as the PM file systems run it: the setup and the operations
/// ([`fsapi::crash::Op`]). Refused ([`Error::PmRefused`]) if it has
/// several threads or an operation they lack.
pub fn translate(w: &Workload) -> Result<(Vec<crash::Op>, Vec<crash::Op>), Error> {
    let refuse = |why: String| Error::PmRefused {
        workload: w.name.clone(),
        why,
    };
    if w.threads.len() > 1 {
        return Err(refuse(format!(
            "{} threads (the PM modes run one)",
            w.threads.len()
        )));
    }
    let one = |op: &Op| -> Result<crash::Op, Error> {
        use crash::Op as C;
        Ok(match op {
            Op::Create(p) => C::Create(p.clone()),
            Op::Mkdir(p) => C::Mkdir(p.clone()),
            Op::Write(p, off, len, seed) => C::Write(
                p.clone(),
                *off,
                (*off..off.saturating_add(*len))
                    .map(|i| pattern(*seed, i))
                    .collect(),
            ),
            Op::Truncate(p, s) => C::Truncate(p.clone(), *s),
            Op::Link(a, b) => C::Link(a.clone(), b.clone()),
            Op::Unlink(p) => C::Unlink(p.clone()),
            Op::Rmdir(p) => C::Rmdir(p.clone()),
            Op::Rename(a, b) => C::Rename(a.clone(), b.clone()),
            Op::Fsync(p)
            | Op::Fdatasync(p)
            | Op::Fatomic(p)
            | Op::Fdataatomic(p)
            | Op::Fbarrier(p)
            | Op::Fdatabarrier(p) => C::Fsync(p.clone()),
            Op::Sync => C::Sync,
            Op::Sleep(us) => C::Sleep(*us),
            other => {
                let word = other.to_string();
                let word = word.split_whitespace().next().unwrap_or_default().to_string();
                return Err(refuse(format!(
                    "`{word}` is not an operation of the PM file systems"
                )));
            }
        })
    };
    let setup = w.setup.iter().map(one).collect::<Result<Vec<_>, _>>()?;
    let ops = match w.threads.first() {
        Some(t) => t.iter().map(one).collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    Ok((setup, ops))
}

/// The id of a PM crash state.
pub fn violation_id(workload: &str, run: &PmRun, point: usize, landed: &[usize]) -> String {
    format!(
        "{workload}:{}:{}:{}:{point}:{}",
        run.label(),
        domain_name(run.domain),
        run.seed,
        encode_landed(landed)
    )
}

/// The landed items of a PM crash state as an id's choice: `p` and the
/// sorted items, runs of consecutive ones as `FIRST-LAST`, `.`-separated
/// (`p0-7.9-135`: all of 0..=135 but 8; `p`: none).
pub fn encode_landed(landed: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < landed.len() {
        let mut j = i;
        while j + 1 < landed.len() && landed[j + 1] == landed[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            landed[i].to_string()
        } else {
            format!("{}-{}", landed[i], landed[j])
        });
        i = j + 1;
    }
    format!("p{}", parts.join("."))
}

/// Decodes [`encode_landed`]; `None` if `s` is not one.
pub fn decode_landed(s: &str) -> Option<Vec<usize>> {
    let body = s.strip_prefix('p')?;
    let mut out: Vec<usize> = Vec::new();
    for part in body.split('.').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let a = part.parse().ok()?;
                (a, a)
            }
        };
        if a > b || out.last().is_some_and(|&l| l >= a) {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// Records `w` on `F` as `run` says and checks every crash state.
fn explore_with<F: PmFs>(w: &Workload, run: &PmRun, opts: &PmOptions) -> Result<ExploreReport, Error> {
    let t0 = Instant::now();
    let (setup, ops) = translate(w)?;
    let how = mount_of::<F>(run)?;
    let rec = crash::record::<F>(&setup, &ops, how, run.domain, run.seed)?;
    let record_seconds = t0.elapsed().as_secs_f64();
    let promise = F::PROMISE;
    let enumeration = opts.enumeration.of(w);
    let copts = CheckOptions {
        enumeration,
        first_only: run.fault.is_some(),
        promise,
    };
    let r = crash::check(&rec, &copts)?;
    let label = run.label();
    let check = format!("pm-{}", promise.name());
    let mut violations = Vec::new();
    for v in &r.violations {
        if opts.max_violations > 0 && violations.len() >= opts.max_violations {
            break;
        }
        let id = violation_id(&w.name, run, v.point, &v.landed);
        violations.push(Violation {
            replay: format!("crashfuzz replay {id}"),
            id,
            crash_point: v.point,
            choice: encode_landed(&v.landed),
            check: check.clone(),
            detail: format!("{} ({} ops returned)", v.why, v.returned),
        });
    }
    let wall = t0.elapsed().as_secs_f64();
    let mut reductions = vec!["pm-verdict-reuse".to_string()];
    match enumeration {
        Enumeration::ReadSets { budget } => {
            reductions.push("pm-read-set".to_string());
            if r.sampled_points > 0 {
                reductions.push(format!(
                    "pm-read-set-budget-{budget}: {} point(s) cut at it",
                    r.sampled_points
                ));
            }
        }
        Enumeration::Bounded { bound } => {
            if r.sampled_points > 0 {
                reductions.push(format!(
                    "pm-bound-{bound}: {} point(s) sampled past it",
                    r.sampled_points
                ));
            }
        }
    }
    // By read sets: every state the envelope allows, each checked or in
    // a checked state's leaf; else the states built and the ones the
    // bound left out.
    let (states_total, by_read_set) = match enumeration {
        Enumeration::ReadSets { .. } => (r.allowed, r.by_read_set),
        Enumeration::Bounded { .. } => (r.states.saturating_add(r.left_out), 0),
    };
    Ok(ExploreReport {
        workload: w.name.clone(),
        mode: label.clone(),
        profile: domain_name(run.domain).into(),
        crash_points: r.points,
        // Saturated counts stay below u64::MAX by the states visited, so
        // that the total less the unvisited is what was visited.
        states_total,
        states_checked: r.judged,
        states_deduplicated: r.states - r.judged,
        states_not_visited: r.left_out.min(u64::MAX - r.states),
        states_by_read_set: by_read_set,
        reductions,
        violations,
        wall_seconds: wall,
        states_per_second: r.judged as f64 / wall.max(1e-9),
        refused_ops: rec.refused.len(),
        refused: rec.refused.iter().map(|(_, s)| s.clone()).collect(),
        expected: w.expected(&label),
        record_seconds,
        check_seconds: r.elapsed.as_secs_f64(),
        ..ExploreReport::default()
    })
}

/// The mount options of `run`'s file system: its switch on, if any.
fn mount_of<F: PmFs>(run: &PmRun) -> Result<F::Mount, Error> {
    match run.fault {
        None => Ok(F::Mount::default()),
        Some(f) => F::fault_switches()
            .into_iter()
            .find(|s| s.name == f.switch && f.mode.name() == F::NAME)
            .map(|s| s.mount)
            .ok_or_else(|| Error::FaultNotApplicable {
                fault: f.name(),
                mode: F::NAME.into(),
            }),
    }
}

/// Records `w` on `run`'s file system and checks every crash state as
/// `opts.enumeration` says (by read sets, or up to a bound on the pending
/// items per point, sampled past it).
pub fn explore_pm(w: &Workload, run: &PmRun, opts: &PmOptions) -> Result<ExploreReport, Error> {
    match run.mode {
        PmMode::Wofs => explore_with::<Wofs>(w, run, opts),
        PmMode::Soupfs => explore_with::<SoupFs>(w, run, opts),
        PmMode::Pmfs => explore_with::<Pmfs>(w, run, opts),
    }
}

/// Many workloads times PM modes and domains.
#[derive(Debug, Clone)]
pub struct PmCampaign {
    /// Workloads (each must translate).
    pub workloads: Vec<Workload>,
    /// Modes.
    pub modes: Vec<PmMode>,
    /// Persistence domains.
    pub domains: Vec<PersistenceDomain>,
    /// Simulation seed.
    pub seed: u64,
    /// A switch turned on in every run, if any.
    pub fault: Option<PmFault>,
}

impl PmCampaign {
    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.workloads.len() * self.modes.len() * self.domains.len()
    }

    fn run_at(&self, i: usize) -> (&Workload, PmRun) {
        let per_w = self.modes.len() * self.domains.len();
        let w = &self.workloads[i / per_w];
        let mode = self.modes[(i % per_w) / self.domains.len()];
        let domain = self.domains[i % self.domains.len()];
        (
            w,
            PmRun {
                mode,
                domain,
                seed: self.seed,
                fault: self.fault,
            },
        )
    }

    /// Refuses the campaign if a workload does not translate or the
    /// switch is not of every mode.
    pub fn validate(&self) -> Result<(), Error> {
        for w in &self.workloads {
            translate(w)?;
        }
        if let Some(f) = self.fault {
            if let Some(m) = self.modes.iter().find(|m| **m != f.mode) {
                return Err(Error::FaultNotApplicable {
                    fault: f.name(),
                    mode: m.name().into(),
                });
            }
        }
        Ok(())
    }

    /// Runs every run (the ones `shard` takes, runs numbered from
    /// `first`), spread over `opts.jobs` threads; `done` sees each report.
    /// The reports come back in campaign order.
    ///
    /// A run whose workload translates to the same operations as an
    /// earlier run of the shard's with the same mode, domain and
    /// enumeration
    /// (ACE's fsync and fdatasync variants: both are the file system's
    /// fsync) records the same trace and has the same verdicts: it is not
    /// checked again but reports the earlier run's states as
    /// deduplicated and its violations under its own ids.
    pub fn run(
        &self,
        opts: &PmOptions,
        first: usize,
        shard: Option<Shard>,
        done: &(dyn Fn(&ExploreReport) + Sync),
    ) -> Result<Vec<ExploreReport>, Error> {
        self.validate()?;
        let all: Vec<usize> = (0..self.runs())
            .filter(|i| shard.is_none_or(|s| s.takes(first + i)))
            .collect();
        // Each run's key, and the first run of the shard with that key.
        let mut firsts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        let mut same_as: Vec<Option<usize>> = Vec::with_capacity(all.len());
        let mut mine = Vec::new();
        for (k, &i) in all.iter().enumerate() {
            let (w, run) = self.run_at(i);
            let (setup, ops) = translate(w)?;
            let enumeration = opts.enumeration.of(w);
            let key = format!(
                "{}|{}|{enumeration:?}|{setup:?}|{ops:?}",
                run.label(),
                domain_name(run.domain)
            );
            match firsts.get(&key) {
                Some(&j) => same_as.push(Some(j)),
                None => {
                    firsts.insert(key, k);
                    same_as.push(None);
                    mine.push(i);
                }
            }
        }
        let explore_at = |k: usize| {
            let (w, run) = self.run_at(mine[k]);
            explore_pm(w, &run, opts).map(|r| ExploreReport {
                run: first + mine[k],
                ..r
            })
        };
        let checked = on_workers(mine.len(), opts.jobs, explore_at, done)?;
        // Back in campaign order, the repeated runs filled in from theirs.
        let mut checked = checked.into_iter();
        let mut out: Vec<ExploreReport> = Vec::with_capacity(all.len());
        for (k, &i) in all.iter().enumerate() {
            let r = match same_as[k] {
                None => checked
                    .next()
                    .ok_or_else(|| Error::Failed("a PM run has no report".into()))?,
                Some(j) => {
                    let (w, _) = self.run_at(i);
                    let r = repeated(&out[j], &w.name, first + i);
                    done(&r);
                    r
                }
            };
            out.push(r);
        }
        Ok(out)
    }
}

/// The report of a run (of workload `name`, number `run`) that repeats
/// the run `orig` reported: its states deduplicated, its violations
/// under its own ids.
fn repeated(orig: &ExploreReport, name: &str, run: usize) -> ExploreReport {
    let rename = |id: &str| match id.strip_prefix(orig.workload.as_str()) {
        Some(rest) => format!("{name}{rest}"),
        None => id.to_string(),
    };
    ExploreReport {
        run,
        workload: name.into(),
        states_checked: 0,
        states_deduplicated: orig.states_checked.saturating_add(orig.states_deduplicated),
        reductions: vec![format!("pm-same-run-as {}", orig.workload)],
        violations: orig
            .violations
            .iter()
            .map(|v| {
                let id = rename(&v.id);
                Violation {
                    replay: format!("crashfuzz replay {id}"),
                    id,
                    ..v.clone()
                }
            })
            .collect(),
        wall_seconds: 0.0,
        states_per_second: 0.0,
        record_seconds: 0.0,
        check_seconds: 0.0,
        ..orig.clone()
    }
}

/// The default campaign's PM workloads: Table 4, ACE seq-1 and a
/// one-thread random workload.
pub const DEFAULT_PM_WORKLOADS: [&str; 3] = ["table4", "ace1", "random-1-1x12"];

/// The default campaign's persistence domains.
pub const DEFAULT_PM_PROFILES: [&str; 2] = ["pm-adr", "pm-eadr"];

/// One check of a PM fault switch: on `workload` under ADR the switch
/// must make some crash state break the promise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmSelfCheck {
    /// The switch turned on.
    pub fault: PmFault,
    /// A built-in workload that needs the mechanism.
    pub workload: &'static str,
}

impl PmSelfCheck {
    /// The run.
    pub fn run_config(&self) -> PmRun {
        PmRun {
            mode: self.fault.mode,
            domain: PersistenceDomain::Adr,
            seed: 1,
            fault: Some(self.fault),
        }
    }

    /// Explores the run (without read sets at [`PM_SELF_CHECK_BOUND`]);
    /// returns its report and the index of its first violation, if any
    /// (every PM violation is a broken promise).
    pub fn run(&self, opts: &PmOptions) -> Result<(ExploreReport, Option<usize>), Error> {
        let w = resolve(self.workload)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::UnknownWorkload(self.workload.into()))?;
        let enumeration = match opts.enumeration {
            PmEnumeration::ReadSets { budget } => PmEnumeration::ReadSets { budget },
            PmEnumeration::Bounded { .. } => PmEnumeration::Bounded {
                bound: Some(PM_SELF_CHECK_BOUND),
            },
        };
        let o = PmOptions { enumeration, ..*opts };
        let r = explore_pm(&w, &self.run_config(), &o)?;
        let caught = (!r.violations.is_empty()).then_some(0);
        Ok((r, caught))
    }
}

/// The workload each PM switch is checked on.
pub const PM_CANARY: &str = "pm_canary";

/// The bound of the PM self-checks without read sets (`--bounded`; by
/// read sets, the default, no bound applies): each stops at its first
/// violation, and 5 is the smallest bound that catches every switch on
/// [`PM_CANARY`] (WOFS's data fence needs a package landed with one of
/// its data lines not).
pub const PM_SELF_CHECK_BOUND: u32 = 5;

/// One self-check per PM fault switch, all on [`PM_CANARY`] (at
/// [`PM_SELF_CHECK_BOUND`] without read sets).
pub fn pm_self_checks() -> Vec<PmSelfCheck> {
    PmFault::all()
        .into_iter()
        .map(|fault| PmSelfCheck {
            fault,
            workload: PM_CANARY,
        })
        .collect()
}

/// A PM crash state rebuilt from its id.
#[derive(Clone, Debug)]
pub struct PmReplay {
    /// The run.
    pub run: PmRun,
    /// The promise it was judged by.
    pub promise: Promise,
    /// Pending items at the crash point.
    pub pending: usize,
    /// Operations that had returned.
    pub returned: usize,
    /// The operations of the run, as the file system ran them.
    pub ops: Vec<String>,
    /// The operations refused while recording.
    pub refused: Vec<String>,
    /// The recovered tree, or why there is none.
    pub tree: Result<Tree, String>,
    /// `Ok` if the state keeps the promise, else why it breaks it.
    pub verdict: Result<(), String>,
}

/// The id of a PM crash state, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmId {
    /// The workload's name.
    pub workload: String,
    /// The run.
    pub run: PmRun,
    /// The crash came after this trace entry.
    pub point: usize,
    /// The pending items that landed.
    pub landed: Vec<usize>,
}

/// Parses the id of a PM crash state: `None` if its mode is not a PM
/// mode (a block-device id).
pub fn parse_id(id: &str) -> Result<Option<PmId>, Error> {
    let bad = |why: &str| Error::BadReplayId {
        id: id.into(),
        why: why.into(),
    };
    let mut f: Vec<&str> = id.rsplitn(6, ':').collect();
    if f.len() != 6 {
        return Ok(None);
    }
    f.reverse();
    let base = f[1].split_once('+').map_or(f[1], |(m, _)| m);
    if PmMode::from_name(base).is_none() {
        return Ok(None);
    }
    let seed = f[3].parse().map_err(|_| bad("seed is not a number"))?;
    let run = PmRun::parse(f[1], f[2], seed)?.ok_or_else(|| bad("not a PM mode"))?;
    let point = f[4].parse().map_err(|_| bad("crash point is not a number"))?;
    let landed = decode_landed(f[5])
        .ok_or_else(|| bad("choice is not p<landed items: N or FIRST-LAST, .-separated, ascending>"))?;
    Ok(Some(PmId {
        workload: f[0].to_string(),
        run,
        point,
        landed,
    }))
}

fn replay_with<F: PmFs>(w: &Workload, run: PmRun, point: usize, landed: &[usize]) -> Result<PmReplay, Error> {
    let (setup, ops) = translate(w)?;
    let rec = crash::record::<F>(&setup, &ops, mount_of::<F>(&run)?, run.domain, run.seed)?;
    let r = crash::replay(&rec, F::PROMISE, point, landed)?;
    Ok(PmReplay {
        run,
        promise: F::PROMISE,
        pending: r.pending,
        returned: r.returned,
        ops: ops.iter().map(ToString::to_string).collect(),
        refused: rec.refused.iter().map(|(_, s)| s.clone()).collect(),
        tree: r.tree,
        verdict: r.verdict.map(drop),
    })
}

/// Replays the PM crash state `id` names: `None` if `id` is not a PM id.
pub fn replay_pm(id: &str) -> Result<Option<PmReplay>, Error> {
    let Some(PmId {
        workload,
        run,
        point,
        landed,
    }) = parse_id(id)?
    else {
        return Ok(None);
    };
    let w = resolve(&workload)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::UnknownWorkload(workload.clone()))?;
    let r = match run.mode {
        PmMode::Wofs => replay_with::<Wofs>(&w, run, point, &landed),
        PmMode::Soupfs => replay_with::<SoupFs>(&w, run, point, &landed),
        PmMode::Pmfs => replay_with::<Pmfs>(&w, run, point, &landed),
    }?;
    Ok(Some(r))
}
