//! The crash harness of the file systems on persistent memory (feature
//! `crash`): record a run of [`Op`]s on a file system formatted and
//! mounted through [`PmFs`], then mount every crash state of its trace
//! ([`pcie_sim::pmem::explore()`]) and judge it against the promise the
//! file system makes ([`Promise`]). Errors are typed ([`CrashError`]); a
//! crash state that breaks the promise is a [`Violation`], not an error.
//!
//! The file systems' crash tests (through `fsapi::testing`) and the
//! crashfuzz PM modes both drive it.

use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use pcie_sim::pmem::{explore, explore_read_sets};
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, PmChoice, PmTrace, Pmem, PmemCursor,
    PmemProfile, SimDuration, TraceMode,
};

use crate::{Ctx, ErrorKind, FileSystem, FileType, FsError, Tree};

/// The thread every operation of a recorded run runs on.
pub const CTX: Ctx = Ctx { core: 0 };

/// What a file system promises about a crash, the oracle a crash state is
/// judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Promise {
    /// Every operation is durable and atomic when it returns (WOFS,
    /// PMFS): the recovered tree is the tree after the last operation
    /// that returned, or after the one in flight.
    Synchronous,
    /// Durable at `fsync` only (SoupFS): the image mounts; when the mount
    /// collected leaks, a second mount collects nothing more and reaches
    /// as much; every file fsynced before the crash and untouched since
    /// holds its fsynced content, at its path or at a name a rename since
    /// gave it.
    Fsync,
}

impl Promise {
    /// The promise's name (`synchronous`, `fsync`).
    pub fn name(self) -> &'static str {
        match self {
            Promise::Synchronous => "synchronous",
            Promise::Fsync => "fsync",
        }
    }
}

/// One operation of a recorded run (absolute paths; files created 0644,
/// directories 0755).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `mkdir`.
    Mkdir(String),
    /// `creat`.
    Create(String),
    /// Writes the bytes at the offset.
    Write(String, u64, Vec<u8>),
    /// Sets the size.
    Truncate(String, u64),
    /// Links the first path as the second.
    Link(String, String),
    /// `unlink`.
    Unlink(String),
    /// `rmdir`.
    Rmdir(String),
    /// Renames the first path to the second.
    Rename(String, String),
    /// `fsync` of the node at the path.
    Fsync(String),
    /// `sync` ([`PmFs::sync_all`]).
    Sync,
    /// Lets this many simulated microseconds pass (a background
    /// persister runs meanwhile).
    Sleep(u64),
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Mkdir(p) => write!(f, "mkdir {p}"),
            Op::Create(p) => write!(f, "create {p}"),
            Op::Write(p, off, d) => write!(f, "write {p} {off} {}", d.len()),
            Op::Truncate(p, s) => write!(f, "truncate {p} {s}"),
            Op::Link(a, b) => write!(f, "link {a} {b}"),
            Op::Unlink(p) => write!(f, "unlink {p}"),
            Op::Rmdir(p) => write!(f, "rmdir {p}"),
            Op::Rename(a, b) => write!(f, "rename {a} {b}"),
            Op::Fsync(p) => write!(f, "fsync {p}"),
            Op::Sync => write!(f, "sync"),
            Op::Sleep(us) => write!(f, "sleep {us}"),
        }
    }
}

impl Op {
    /// Runs the operation on `fs` (on machine `m`, for [`Op::Sleep`]).
    pub async fn run<F: PmFs>(&self, fs: &F, m: &Machine) -> Result<(), F::Error> {
        match self {
            Op::Mkdir(p) => fs.mkdir_path(CTX, p).await.map(drop),
            Op::Create(p) => fs.create_path(CTX, p).await.map(drop),
            Op::Write(p, off, d) => fs.write_path(CTX, p, *off, d).await.map(drop),
            Op::Truncate(p, s) => fs.truncate_path(CTX, p, *s).await,
            Op::Link(a, b) => fs.link_path(CTX, a, b).await.map(drop),
            Op::Unlink(p) => fs.unlink_path(CTX, p).await,
            Op::Rmdir(p) => fs.rmdir_path(CTX, p).await,
            Op::Rename(a, b) => fs.rename_path(CTX, a, b).await,
            Op::Fsync(p) => fs.fsync_path(CTX, p).await,
            Op::Sync => fs.sync_all(CTX).await,
            Op::Sleep(us) => {
                m.sim().sleep(SimDuration::from_us(*us)).await;
                Ok(())
            }
        }
    }
}

/// What a mount found to repair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Space allocated that nothing reached, freed by the mount (SoupFS:
    /// cache lines); 0 for a file system that never leaks.
    pub leaked: u64,
    /// Space reachable after the mount, in the same unit.
    pub reachable: u64,
}

/// One mechanism a file system can switch off ([`PmFs::fault_switches`]).
#[derive(Clone, Debug)]
pub struct FaultSwitch<M> {
    /// The switch's name, the field of the file system's `Faults`, in
    /// kebab case (`skip-clwb`).
    pub name: &'static str,
    /// The mount options with that switch (only) on.
    pub mount: M,
}

/// How a file system on persistent memory is formatted and mounted on a
/// machine's [`Pmem`], with its fault switches: what the crash harness
/// needs of it.
#[allow(async_fn_in_trait)] // one single-threaded executor: no `Send` bound wanted
pub trait PmFs: FileSystem + Sized + 'static {
    /// What a mount takes (fault switches, options); the default is the
    /// correct file system.
    type Mount: Clone + Default + fmt::Debug + 'static;
    /// The file system's name (`wofs`).
    const NAME: &'static str;
    /// What it promises about a crash.
    const PROMISE: Promise;
    /// The size of the persistent memory it is recorded on (bytes).
    const SIZE: u64;
    /// Formats `pm` (on core 0).
    async fn format(m: &Machine, pm: &Pmem) -> Result<(), Self::Error>;
    /// Mounts `pm` with `how`, recovery included (on core 0).
    async fn recover(m: &Machine, pm: &Pmem, how: Self::Mount) -> Result<(Self, Recovered), Self::Error>;
    /// Starts its background work after a mount, if it has any (SoupFS's
    /// persister, on core 1).
    fn start(&self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Ends the run: lets the background work finish what is pending and
    /// stops it.
    async fn finish(&self, m: &Machine) -> Result<(), Self::Error> {
        let _ = m;
        Ok(())
    }
    /// `sync`: everything done so far durable (nothing to do for a
    /// synchronous file system).
    async fn sync_all(&self, ctx: Ctx) -> Result<(), Self::Error>;
    /// Every fault switch, by name, in the order of its `Faults` fields.
    fn fault_switches() -> Vec<FaultSwitch<Self::Mount>>;
}

/// Why a recording, a check or a replay could not be made (a crash state
/// that breaks the promise is not one: it is a [`Violation`]).
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// The simulated persistent memory refused an access or a choice.
    #[error("persistent memory: {0}")]
    Pmem(#[from] pcie_sim::PcieError),
    /// The simulation could not finish.
    #[error("simulation: {0}")]
    Run(#[from] pcie_sim::RunError),
    /// The file system failed where it must not (its format, the mount of
    /// the recorded run, an operation failing with other than a POSIX
    /// refusal, the tree of the live run unreadable).
    #[error("{fs}: {what}: {why}")]
    Fs {
        /// The file system.
        fs: &'static str,
        /// What it was doing.
        what: String,
        /// Its error.
        why: String,
    },
    /// A replay named a crash point past the trace.
    #[error("crash point {point} is past the trace ({len} entries)")]
    NoSuchPoint {
        /// The point asked for.
        point: usize,
        /// Trace entries.
        len: usize,
    },
}

fn fs_err<F: PmFs>(what: impl Into<String>) -> impl FnOnce(F::Error) -> CrashError {
    let what = what.into();
    move |e| CrashError::Fs {
        fs: F::NAME,
        what,
        why: e.to_string(),
    }
}

/// A file fsynced during the run, and from when to when the promise
/// holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synced {
    /// The trace length when its fsync returned.
    pub at: usize,
    /// The trace length when an operation that changed it (or removed
    /// it) began; `usize::MAX` if none did.
    pub until: usize,
    /// Its path at the fsync.
    pub path: String,
    /// The names renames gave it since (the old name or a new one must
    /// hold it).
    pub alts: Vec<String>,
    /// Its content at the fsync.
    pub data: Vec<u8>,
}

/// A recorded run: the image it began from, its PM trace, the trace
/// length when each operation returned, the tree before the first
/// operation and after each, the files fsynced, and the operations the
/// file system refused.
pub struct Recording<F: PmFs> {
    /// The persistent image before the first operation (formatted, the
    /// setup done).
    pub base: PageStore,
    /// The run's persistent-memory trace.
    pub trace: PmTrace,
    /// The trace length when each operation returned.
    pub marks: Vec<usize>,
    /// The tree before the first operation and after each (shared: every
    /// crash state's check takes the ones it allows without a copy).
    pub trees: Vec<Rc<Tree>>,
    /// The files fsynced ([`Promise::Fsync`]'s oracle).
    pub synced: Vec<Synced>,
    /// The operations refused with a POSIX error (changing nothing): the
    /// operation's index (`None`: in the setup) and `OP: ERROR`.
    pub refused: Vec<(Option<usize>, String)>,
    /// How the run mounted (and how each crash state is mounted).
    pub how: F::Mount,
    /// The persistent memory of the run.
    pub profile: PmemProfile,
    /// The persistence domain of the run.
    pub domain: PersistenceDomain,
}

impl<F: PmFs> fmt::Debug for Recording<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recording")
            .field("fs", &F::NAME)
            .field("marks", &self.marks)
            .field("trees", &self.trees.len())
            .field("synced", &self.synced.len())
            .field("refused", &self.refused)
            .field("domain", &self.domain)
            .finish()
    }
}

impl<F: PmFs> Recording<F> {
    /// Operations that had returned when the crash came after trace entry
    /// `k`.
    pub fn returned(&self, k: usize) -> usize {
        self.marks.iter().filter(|&&mk| mk <= k + 1).count()
    }

    /// The fsynced files the promise holds after trace entry `k`.
    pub fn synced_at(&self, k: usize) -> Vec<&Synced> {
        self.synced
            .iter()
            .filter(|s| s.at <= k + 1 && k < s.until)
            .collect()
    }
}

/// The persistent memory of `F`'s runs in `domain`.
pub fn pm_profile<F: PmFs>(domain: PersistenceDomain) -> PmemProfile {
    PmemProfile {
        size: F::SIZE,
        domain,
        ..PmemProfile::default()
    }
}

/// Runs `ops` on a freshly formatted `F` (after `setup`, whose end is
/// synced and is the base image), mounted with `how`, in `domain`, on an
/// executor seeded with `seed`, and records it. An operation refused with
/// a POSIX error is kept in [`Recording::refused`]; any other error of
/// the file system fails the recording.
pub fn record<F: PmFs>(
    setup: &[Op],
    ops: &[Op],
    how: F::Mount,
    domain: PersistenceDomain,
    seed: u64,
) -> Result<Recording<F>, CrashError> {
    let profile = pm_profile::<F>(domain);
    let mut refused = Vec::new();
    // The base: format, mount, set up, sync, stop.
    let base = {
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
        let pm = Pmem::attach(&m, profile.clone())?;
        let (m2, pm2, setup) = (m.clone(), pm.clone(), setup.to_vec());
        let setup_refused = ex.block_on(async move {
            F::format(&m2, &pm2).await.map_err(fs_err::<F>("mkfs"))?;
            let (fs, _) = F::recover(&m2, &pm2, F::Mount::default())
                .await
                .map_err(fs_err::<F>("mount after mkfs"))?;
            fs.start().map_err(fs_err::<F>("start"))?;
            let mut refused = Vec::new();
            for op in &setup {
                if let Err(e) = op.run(&fs, &m2).await {
                    if e.kind() == ErrorKind::Io {
                        return Err(fs_err::<F>(format!("setup {op}"))(e));
                    }
                    refused.push((None, format!("setup {op}: {e}")));
                }
            }
            fs.sync_all(CTX)
                .await
                .map_err(fs_err::<F>("sync after the setup"))?;
            fs.finish(&m2).await.map_err(fs_err::<F>("finish the setup"))?;
            Ok::<_, CrashError>(refused)
        })??;
        refused.extend(setup_refused);
        pm.persistent_image()
    };
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach_with_image(&m, profile.clone(), base.clone())?;
    let (m2, pm2, how2, ops2) = (m.clone(), pm.clone(), how.clone(), ops.to_vec());
    let (marks, trees, synced, run_refused) = ex.block_on(async move {
        let (fs, _) = F::recover(&m2, &pm2, how2)
            .await
            .map_err(fs_err::<F>("mount the base image"))?;
        fs.start().map_err(fs_err::<F>("start"))?;
        let mut trees = vec![Rc::new(fs.snapshot(CTX).await.map_err(fs_err::<F>("snapshot"))?)];
        let mut marks = Vec::new();
        let mut synced: Vec<Synced> = Vec::new();
        // Where each fsynced file is now.
        let mut now: Vec<String> = Vec::new();
        let mut refused = Vec::new();
        for (i, op) in ops2.iter().enumerate() {
            let before = pm2.trace().entries().len();
            if let Err(e) = op.run(&fs, &m2).await {
                if e.kind() == ErrorKind::Io {
                    return Err(fs_err::<F>(format!("operation {i} ({op})"))(e));
                }
                refused.push((Some(i), format!("{op}: {e}")));
            }
            let end = pm2.trace().entries().len();
            marks.push(end);
            let tree = fs.snapshot(CTX).await.map_err(fs_err::<F>("snapshot"))?;
            for (s, path) in synced.iter_mut().zip(now.iter_mut()) {
                if s.until != usize::MAX {
                    continue;
                }
                if let Op::Rename(from, to) = op {
                    if let Some(rest) = moved(path, from) {
                        *path = format!("{to}{rest}");
                        s.alts.push(path.clone());
                    }
                }
                if tree.get(path.as_str()).map(|n| &n.data) != Some(&s.data) {
                    s.until = before;
                }
            }
            if let Op::Fsync(p) = op {
                if let Some(n) = tree.get(p.as_str()).filter(|n| n.ftype == FileType::File) {
                    synced.push(Synced {
                        at: end,
                        until: usize::MAX,
                        path: p.clone(),
                        alts: Vec::new(),
                        data: n.data.clone(),
                    });
                    now.push(p.clone());
                }
            }
            trees.push(Rc::new(tree));
        }
        fs.finish(&m2).await.map_err(fs_err::<F>("finish the run"))?;
        Ok::<_, CrashError>((marks, trees, synced, refused))
    })??;
    refused.extend(run_refused);
    let trace = pm.trace().clone();
    Ok(Recording {
        base,
        trace,
        marks,
        trees,
        synced,
        refused,
        how,
        profile,
        domain,
    })
}

/// The rest of `path` after `from` if a rename of `from` moves it (`from`
/// itself or below it).
fn moved<'p>(path: &'p str, from: &str) -> Option<&'p str> {
    let rest = path.strip_prefix(from)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// How a check enumerates the crash states after each trace entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enumeration {
    /// Every state the envelope allows, judged by what the checks read
    /// ([`explore_read_sets`]): states whose checks read the same lines
    /// share one verdict, at most `budget` checks per crash point. Within
    /// the budget no state is left unvisited; past it, each class of
    /// states not yet split counts as at least one left out
    /// ([`Report::left_out`]).
    ReadSets {
        /// Most checks per crash point.
        budget: usize,
    },
    /// Every subset of the pending items up to 2^`bound` states per crash
    /// point, sampled past it ([`pcie_sim::pmem::explore()`]; the states
    /// left out are counted in [`Report::left_out`]).
    Bounded {
        /// Pending items enumerated exhaustively per crash point.
        bound: u32,
    },
}

/// How to check a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// How the crash states of each point are enumerated.
    pub enumeration: Enumeration,
    /// Stop at the first violation.
    pub first_only: bool,
    /// The promise the states are judged by.
    pub promise: Promise,
}

/// A crash state that broke the promise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The crash came just after this trace entry.
    pub point: usize,
    /// The pending items that landed ([`PmChoice::landed`]).
    pub landed: Vec<usize>,
    /// How many items were pending.
    pub pending: usize,
    /// Operations that had returned.
    pub returned: usize,
    /// What was wrong.
    pub why: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        explore::write_state(f, self.point, &self.landed, self.pending)?;
        write!(f, ": {} ({} ops returned)", self.why, self.returned)
    }
}

/// What a check did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Crash points (trace entries).
    pub points: usize,
    /// Crash states checked (each a materialized image).
    pub states: u64,
    /// States judged (mounted); the others reused the verdict of an equal
    /// image under an equal promise.
    pub judged: u64,
    /// Crash points with states left out: more pending items than the
    /// bound ([`Enumeration::Bounded`], sampled), or a read-set tree cut
    /// at its budget ([`Enumeration::ReadSets`]).
    pub sampled_points: usize,
    /// States left out, summed over the points (by read sets: at least
    /// that many).
    pub left_out: u64,
    /// States the envelope allows (by read sets; saturating).
    pub allowed: u64,
    /// States given their leaf's verdict without a check of their own (by
    /// read sets).
    pub by_read_set: u64,
    /// Passing states whose mount collected leaks.
    pub leaked_states: u64,
    /// The violations, in the order found.
    pub violations: Vec<Violation>,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
}

impl Report {
    /// Crash states checked per second.
    pub fn per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// What the judge of a state after trace entry `k` takes besides the
/// image ([`judge`]): the operations returned ([`Promise::Synchronous`]),
/// or the fsynced files in force, by their fsync's position and renames,
/// and whether the state is used after the crash ([`Promise::Fsync`]). A
/// verdict is reused only under an equal key.
fn promised<F: PmFs>(rec: &Recording<F>, promise: Promise, k: usize) -> Vec<(usize, usize)> {
    match promise {
        Promise::Synchronous => vec![(rec.returned(k), 0)],
        Promise::Fsync => rec
            .synced_at(k)
            .iter()
            .map(|s| (s.at, s.alts.len()))
            .chain(used_after(promise, k).then_some((usize::MAX, 0)))
            .collect(),
    }
}

/// True if the judge of a state after trace entry `k` also uses the file
/// system after the crash (every eighth point, under [`Promise::Fsync`]).
fn used_after(promise: Promise, k: usize) -> bool {
    promise == Promise::Fsync && k % 8 == 0
}

/// A machine to mount crash states on.
struct Checker {
    ex: Executor,
    m: Machine,
}

impl Checker {
    fn new() -> Checker {
        let ex = Executor::new(7);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
        Checker { ex, m }
    }
}

/// Every crash state after every trace entry, materialized, mounted with
/// the run's mount options and judged by `opts.promise`, verdicts reused
/// per content and promise, enumerated as `opts.enumeration` says: by
/// what the checks read ([`Enumeration::ReadSets`]: every state the
/// envelope allows gets a verdict within the budget) or all subsets of
/// the pending items up to a bound, sampled past it
/// ([`Enumeration::Bounded`]).
pub fn check<F: PmFs>(rec: &Recording<F>, opts: &CheckOptions) -> Result<Report, CrashError> {
    let start = Instant::now();
    let ck = Checker::new();
    let wc = ck.m.profile().cpu.wc_buffers;
    let mut cur = PmemCursor::new(&rec.trace, rec.base.clone(), rec.domain, wc)?;
    let mut leaked_states = 0u64;
    let points = 0..cur.len();
    let promised = |k| promised(rec, opts.promise, k);
    let tally = |leaked: &u64| leaked_states += u64::from(*leaked > 0);
    let out = match opts.enumeration {
        Enumeration::ReadSets { budget } => explore_read_sets(
            &mut cur,
            points,
            budget,
            opts.first_only,
            promised,
            |k, img| {
                let (v, reads) = judge(&ck, rec, opts.promise, k, img, false);
                (v.map(|j| j.recovered.leaked), reads)
            },
            tally,
        )?,
        Enumeration::Bounded { bound } => explore(
            &mut cur,
            points,
            bound,
            opts.first_only,
            promised,
            |k, img| {
                judge(&ck, rec, opts.promise, k, img, false)
                    .0
                    .map(|j| j.recovered.leaked)
            },
            tally,
        )?,
    };
    Ok(Report {
        points: out.points,
        states: out.states,
        judged: out.judged,
        sampled_points: out.sampled_points,
        left_out: out.left_out,
        allowed: out.allowed,
        by_read_set: out.by_read_set,
        leaked_states,
        violations: out
            .violations
            .into_iter()
            .map(|v| Violation {
                returned: rec.returned(v.point),
                point: v.point,
                landed: v.landed,
                pending: v.pending,
                why: v.why,
            })
            .collect(),
        elapsed: start.elapsed(),
    })
}

/// Judges the crash state `img` after trace entry `k` as [`check`] does,
/// on a machine of its own: the verdict (`Ok` with what the mount
/// repaired, or why the state breaks `promise`) and the lines (offset /
/// 64) the check read of the image before writing them (for tests that
/// compare the read-set enumeration with brute force).
pub fn judge_state<F: PmFs>(
    rec: &Recording<F>,
    promise: Promise,
    k: usize,
    img: PageStore,
) -> (Result<Recovered, String>, Vec<u64>) {
    let (v, reads) = judge(&Checker::new(), rec, promise, k, img, false);
    (v.map(|j| j.recovered), reads)
}

/// What one crash state recovered to.
#[derive(Clone, Debug, Default)]
pub struct Judged {
    /// What the mount repaired.
    pub recovered: Recovered,
    /// The recovered tree (when asked for and readable).
    pub tree: Option<Tree>,
}

/// Mounts `img` (the state after trace entry `k`) and judges it by
/// `promise`: `Ok` with what it recovered, or why it breaks the promise;
/// with the lines (offset / 64) the check read of the image before writing
/// them. Under [`Promise::Fsync`], at every eighth crash point the mounted
/// file system also takes new work that a second mount must find whole.
///
/// Everything the check does to the image goes through one [`Pmem`],
/// logging from before the mount to the end: the recovery, the tree walk,
/// the reads of fsynced files, the use after the crash and the second
/// mount all read it through [`Pmem::load`], the only way to read it
/// (a file system holds no copy of the image from one mount to the next,
/// and nothing here reads [`Pmem::persistent_image`]). So the lines
/// returned are every input the verdict took from the image
/// ([`pcie_sim::readset`]).
fn judge<F: PmFs>(
    ck: &Checker,
    rec: &Recording<F>,
    promise: Promise,
    k: usize,
    img: PageStore,
    want_tree: bool,
) -> (Result<Judged, String>, Vec<u64>) {
    let pm = match Pmem::attach_with_image(&ck.m, rec.profile.clone(), img) {
        Ok(pm) => pm,
        // Refused before reading anything: the same for every image.
        Err(e) => return (Err(e.to_string()), Vec::new()),
    };
    pm.log_access();
    let logged = pm.clone();
    let verdict = judge_on(ck, rec, promise, k, pm, want_tree);
    let reads = logged
        .take_access()
        .map(|l| l.reads().to_vec())
        .unwrap_or_default();
    (verdict, reads)
}

/// [`judge`] on `pm`, the image attached.
fn judge_on<F: PmFs>(
    ck: &Checker,
    rec: &Recording<F>,
    promise: Promise,
    k: usize,
    pm: Pmem,
    want_tree: bool,
) -> Result<Judged, String> {
    let m = ck.m.clone();
    let how = rec.how.clone();
    let returned = rec.returned(k);
    let allowed: Vec<Rc<Tree>> = match promise {
        Promise::Synchronous => rec.trees[returned..(returned + 2).min(rec.trees.len())].to_vec(),
        Promise::Fsync => Vec::new(),
    };
    let synced: Vec<Synced> = match promise {
        Promise::Synchronous => Vec::new(),
        Promise::Fsync => rec.synced_at(k).into_iter().cloned().collect(),
    };
    let use_after = used_after(promise, k);
    ck.ex
        .block_on(async move {
            let (fs, recovered) = F::recover(&m, &pm, how.clone())
                .await
                .map_err(|e| format!("mount failed: {e}"))?;
            let tree = if want_tree || promise == Promise::Synchronous {
                Some(
                    fs.snapshot(CTX)
                        .await
                        .map_err(|e| format!("the recovered tree is unreadable: {e}"))?,
                )
            } else {
                None
            };
            if let Some(t) = tree.as_ref().filter(|_| promise == Promise::Synchronous) {
                if !allowed.iter().any(|a| **a == *t) {
                    return Err(format!(
                        "recovered tree {:?} is none of the allowed {:?}",
                        summary(t),
                        allowed.iter().map(|a| summary(a)).collect::<Vec<_>>()
                    ));
                }
            }
            for s in &synced {
                let mut found = false;
                for p in std::iter::once(&s.path).chain(&s.alts) {
                    found |= fs.read_path(CTX, p).await.ok().as_ref() == Some(&s.data);
                }
                if !found {
                    return Err(format!("fsynced {} lost (also looked at {:?})", s.path, s.alts));
                }
            }
            if use_after {
                let e = |e: F::Error| format!("after the crash: {e}");
                fs.mkdir_path(CTX, "/after").await.map_err(e)?;
                fs.create_path(CTX, "/after/x").await.map_err(e)?;
                fs.write_path(CTX, "/after/x", 0, &[0xaf; 4500])
                    .await
                    .map_err(e)?;
                fs.sync_all(CTX).await.map_err(e)?;
                let (fs2, again) = F::recover(&m, &pm, how)
                    .await
                    .map_err(|e| format!("remount after use: {e}"))?;
                let data = fs2.read_path(CTX, "/after/x").await;
                if again.leaked != 0 || data.as_deref().ok() != Some(&[0xaf; 4500][..]) {
                    return Err(format!("use after the crash: the remount recovered {again:?}"));
                }
            } else if recovered.leaked > 0 {
                // What the first mount collected is persistent: a second
                // mount finds nothing left to collect.
                let (_, again) = F::recover(&m, &pm, how)
                    .await
                    .map_err(|e| format!("remount: {e}"))?;
                if again.leaked != 0 || again.reachable != recovered.reachable {
                    return Err(format!("the collector left {again:?} after {recovered:?}"));
                }
            }
            Ok(Judged { recovered, tree })
        })
        .map_err(|e| e.to_string())?
}

/// A tree in one line: path, type, links and a digest of the content.
pub fn summary(t: &Tree) -> Vec<String> {
    t.iter()
        .map(|(p, n)| {
            let nonzero = n.data.iter().filter(|&&b| b != 0).count();
            format!(
                "{p}:{:?}/{}/{}B({nonzero} nonzero)",
                n.ftype,
                n.links,
                n.data.len()
            )
        })
        .collect()
}

/// One crash state rebuilt and judged again.
#[derive(Clone, Debug)]
pub struct Replayed {
    /// Pending items at the crash point.
    pub pending: usize,
    /// Operations that had returned.
    pub returned: usize,
    /// The recovered tree, or why there is none (the mount or the walk
    /// failed).
    pub tree: Result<Tree, String>,
    /// The verdict: `Ok` with what the mount repaired, or why the state
    /// breaks the promise.
    pub verdict: Result<Recovered, String>,
}

/// Rebuilds the crash state after trace entry `point` where the pending
/// items `landed` persisted, and judges it by `promise` as [`check`] did.
pub fn replay<F: PmFs>(
    rec: &Recording<F>,
    promise: Promise,
    point: usize,
    landed: &[usize],
) -> Result<Replayed, CrashError> {
    let ck = Checker::new();
    let wc = ck.m.profile().cpu.wc_buffers;
    let mut cur = PmemCursor::new(&rec.trace, rec.base.clone(), rec.domain, wc)?;
    if point >= cur.len() {
        return Err(CrashError::NoSuchPoint {
            point,
            len: cur.len(),
        });
    }
    cur.advance_past(point)?;
    let pending = cur.pending().items.len();
    let img = cur.materialize(&PmChoice {
        landed: landed.to_vec(),
    })?;
    let verdict = judge(&ck, rec, promise, point, img.clone(), true).0;
    let tree = match &verdict {
        Ok(Judged { tree: Some(t), .. }) => Ok(t.clone()),
        _ => {
            // The verdict's walk failed or was not made: mount once more
            // for the tree alone.
            let pm = Pmem::attach_with_image(&ck.m, rec.profile.clone(), img)?;
            let (m, how) = (ck.m.clone(), rec.how.clone());
            ck.ex.block_on(async move {
                let (fs, _) = F::recover(&m, &pm, how)
                    .await
                    .map_err(|e| format!("mount failed: {e}"))?;
                fs.snapshot(CTX)
                    .await
                    .map_err(|e| format!("the recovered tree is unreadable: {e}"))
            })?
        }
    };
    Ok(Replayed {
        pending,
        returned: rec.returned(point),
        tree,
        verdict: verdict.map(|j| j.recovered),
    })
}
