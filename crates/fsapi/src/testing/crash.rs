//! The crash harness: record a workload's persistent-memory trace with the
//! trace length and the tree after each operation, then mount every crash
//! state ([`pcie_sim::pmem::explore()`]) and compare its tree with the ones
//! the run allows.

use std::time::{Duration, Instant};

use pcie_sim::pmem::explore;
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, PmTrace, Pmem, PmemCursor, TraceMode,
};

use super::{profile, profile_in, Adapter, Env, Error, Op, CTX};
use crate::{FileSystem, Tree};

/// A recorded run: the image it began from, its PM trace, the trace
/// length when each operation returned, and the tree before the first
/// operation and after each.
pub struct Recording<A: Adapter> {
    /// The persistent image before the first operation.
    pub base: PageStore,
    /// The run's persistent-memory trace.
    pub trace: PmTrace,
    /// The trace length when each operation returned.
    pub marks: Vec<usize>,
    /// The tree before the first operation and after each.
    pub trees: Vec<Tree>,
    /// How the run mounted (and how each crash state is mounted).
    pub how: A::Mount,
    /// The persistence domain of the run.
    pub domain: PersistenceDomain,
}

impl<A: Adapter> std::fmt::Debug for Recording<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("marks", &self.marks)
            .field("trees", &self.trees.len())
            .field("domain", &self.domain)
            .finish()
    }
}

/// Runs `ops` on a freshly formatted file system mounted with `how`, in
/// `domain`, and records it.
pub fn record<A: Adapter<Medium = Pmem>>(
    domain: PersistenceDomain,
    ops: &[Op],
    how: A::Mount,
    seed: u64,
) -> Recording<A> {
    let base = Env::<A>::formatted(seed).medium.persistent_image();
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach_with_image(&m, profile_in(domain), base.clone()).expect("attach the base image");
    let ops = ops.to_vec();
    let (m2, pm2, how2) = (m.clone(), pm.clone(), how.clone());
    let (marks, trees) = ex
        .block_on(async move {
            let fs = A::mount(&m2, &pm2, how2).await?;
            let mut trees = vec![fs.snapshot(CTX).await?];
            let mut marks = Vec::new();
            for op in &ops {
                op.run(&fs).await?;
                marks.push(pm2.trace().entries().len());
                trees.push(fs.snapshot(CTX).await?);
            }
            Ok::<_, Error<A>>((marks, trees))
        })
        .expect("the executor runs the workload")
        .expect("the workload runs");
    let trace = pm.trace().clone();
    Recording {
        base,
        trace,
        marks,
        trees,
        how,
        domain,
    }
}

/// What the checker did.
#[derive(Debug, Default)]
pub struct Report {
    /// Crash points (trace entries).
    pub points: usize,
    /// Crash states checked (each a materialized image).
    pub states: u64,
    /// Distinct images mounted (the others reuse a verdict).
    pub mounts: u64,
    /// Crash points with more pending items than the bound (sampled).
    pub sampled_points: usize,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
    /// The first violation: where, and what was wrong.
    pub violation: Option<String>,
}

impl Report {
    /// Crash states checked per second.
    pub fn per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Every crash state after every trace entry (all subsets of the pending
/// items up to `bound`, sampled past it; [`pcie_sim::pmem::explore()`]):
/// materialize, mount (recovery), and compare the tree with the one after
/// the last returned operation or after the one in flight. A state's
/// verdict is reused for equal content only where the same number of
/// operations had returned. Stops at the first violation.
pub fn check<A: Adapter<Medium = Pmem>>(rec: &Recording<A>, bound: u32) -> Report {
    let start = Instant::now();
    let ex = Executor::new(7);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
    let wc = m.profile().cpu.wc_buffers;
    let mut cur =
        PmemCursor::new(&rec.trace, rec.base.clone(), rec.domain, wc).expect("a cursor over the trace");
    let returned = |k: usize| rec.marks.iter().filter(|&&mk| mk <= k + 1).count();
    let points = 0..cur.len();
    let out = explore(
        &mut cur,
        points,
        bound,
        true,
        returned,
        |k, img| {
            let done = returned(k);
            let allowed = &rec.trees[done..(done + 2).min(rec.trees.len())];
            judge::<A>(&ex, &m, img, &rec.how, allowed).map_or(Ok(()), Err)
        },
        |_| {},
    )
    .expect("the crash states are explored");
    Report {
        points: out.points,
        states: out.states,
        mounts: out.judged,
        sampled_points: out.sampled_points,
        elapsed: start.elapsed(),
        violation: out.violations.first().map(|v| {
            let done = returned(v.point);
            format!("{v} ({done} ops returned)")
        }),
    }
}

/// Mounts `img` and compares its tree with the allowed ones; `None` if
/// it is one of them.
fn judge<A: Adapter<Medium = Pmem>>(
    ex: &Executor,
    m: &Machine,
    img: PageStore,
    how: &A::Mount,
    allowed: &[Tree],
) -> Option<String> {
    let pm = Pmem::attach_with_image(m, profile(), img).expect("attach the crash image");
    let (m2, how) = (m.clone(), how.clone());
    let got = ex
        .block_on(async move {
            let fs = A::mount(&m2, &pm, how).await?;
            fs.snapshot(CTX).await
        })
        .expect("the executor runs the mount");
    match got {
        Err(e) => Some(format!("mount failed: {e}")),
        Ok(t) if allowed.contains(&t) => None,
        Ok(t) => Some(format!(
            "recovered tree {:?} is none of the allowed {:?}",
            summary(&t),
            allowed.iter().map(summary).collect::<Vec<_>>()
        )),
    }
}

/// A tree in one line: path, type, links and a digest of the content.
fn summary(t: &Tree) -> Vec<String> {
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

/// All crash states up to 2^8 per crash point, sampled past it (2^6 in a
/// debug build, which checks about ten times fewer states per second).
pub const BOUND: u32 = if cfg!(debug_assertions) { 6 } else { 8 };

/// The canaries stop at their first violation; a smaller bound finds it.
pub const CANARY_BOUND: u32 = 6;

/// [`BOUND`], or the bound environment variable `var` sets (10: about
/// 20 s in a release build).
pub fn bound_from_env(var: &str) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(BOUND)
}

/// Checks `rec` up to `bound`, prints what was checked under `label`, and
/// asserts that no crash state broke the contract.
pub fn must_pass<A: Adapter<Medium = Pmem>>(label: &str, rec: &Recording<A>, bound: u32) -> Report {
    let r = check(rec, bound);
    eprintln!(
        "{label}, bound {bound}: {} points, {} states ({} distinct mounts, {} points sampled past the bound) in {:.2?}: {:.0} states/s",
        r.points,
        r.states,
        r.mounts,
        r.sampled_points,
        r.elapsed,
        r.per_second()
    );
    assert_eq!(r.violation, None);
    r
}

/// Records [`super::workload`] mounted with `how` and checks it; the
/// check must find a violation (the canary: the switched-off mechanism is
/// what the contract depends on). Returns the violation.
pub fn must_fail<A: Adapter<Medium = Pmem>>(how: impl Into<A::Mount>) -> String {
    let how = how.into();
    let rec = record::<A>(PersistenceDomain::Adr, &super::workload(), how.clone(), 1);
    let r = check(&rec, CANARY_BOUND);
    eprintln!("{how:?}: {} states in {:.2?}", r.states, r.elapsed);
    let v = r
        .violation
        .expect("the crash check finds the switched-off mechanism");
    eprintln!("  {v}");
    v
}

/// Two recordings of [`super::workload`] with the same seed are the same
/// trace, marks and trees.
pub fn recording_is_deterministic<A: Adapter<Medium = Pmem>>() {
    let rec = || record::<A>(PersistenceDomain::Adr, &super::workload(), A::Mount::default(), 9);
    let (a, b) = (rec(), rec());
    assert_eq!(a.trace.hash(), b.trace.hash());
    assert_eq!(a.marks, b.marks);
    assert_eq!(a.trees, b.trees);
}
