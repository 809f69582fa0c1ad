//! Shared test setup: a machine with persistent memory, a formatted WOFS,
//! remounts, and the crash checker over the PM envelope.

#![allow(dead_code)]

use fsapi::FileSystem as _;
use std::future::Future;
use std::time::{Duration, Instant};

use pcie_sim::pmem::explore;
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, PmTrace, Pmem, PmemCursor, PmemProfile,
    TraceMode,
};
use wofs::{Ctx, Faults, Options, Tree, Wofs, WofsError};

/// Persistent memory of the tests: 512 KiB.
pub const SIZE: u64 = 512 << 10;
/// Package slots of the tests.
pub const SLOTS: u32 = 64;
/// The thread every test runs on.
pub const CTX: Ctx = Ctx { core: 0 };

pub fn profile() -> PmemProfile {
    profile_in(PersistenceDomain::Adr)
}

pub fn profile_in(domain: PersistenceDomain) -> PmemProfile {
    PmemProfile {
        size: SIZE,
        domain,
        ..PmemProfile::default()
    }
}

/// A machine with formatted persistent memory.
pub struct Env {
    pub ex: Executor,
    pub m: Machine,
    pub pm: Pmem,
}

impl Env {
    pub fn formatted(seed: u64) -> Env {
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let pm = Pmem::attach(&m, profile()).unwrap();
        let (m2, pm2) = (m.clone(), pm.clone());
        ex.block_on(async move { Wofs::mkfs(&m2, &pm2, CTX, SLOTS).await })
            .unwrap()
            .unwrap();
        Env { ex, m, pm }
    }

    /// Runs `program` on a fresh mount with `faults`.
    pub fn run<T: 'static, F, Fut>(&self, faults: Faults, program: F) -> Result<T, WofsError>
    where
        F: FnOnce(Wofs) -> Fut + 'static,
        Fut: Future<Output = Result<T, WofsError>> + 'static,
    {
        let (m, pm) = (self.m.clone(), self.pm.clone());
        self.ex
            .block_on(async move { program(Wofs::mount(&m, &pm, CTX, faults).await?).await })
            .unwrap()
    }

    /// A power failure now, in this run: the persistent memory becomes its
    /// persistent image (what this run's flushes and write-backs left).
    pub fn power_cycle(&mut self) {
        let image = self.pm.persistent_image();
        self.pm = Pmem::attach_with_image(&self.m, profile(), image).unwrap();
    }
}

/// One step of a crash workload.
#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(&'static str),
    Create(&'static str),
    Write(&'static str, u64, usize, u8),
    Truncate(&'static str, u64),
    Link(&'static str, &'static str),
    Unlink(&'static str),
    Rmdir(&'static str),
    Rename(&'static str, &'static str),
}

impl Op {
    async fn run(&self, fs: &Wofs) -> Result<(), WofsError> {
        match *self {
            Op::Mkdir(p) => fs.mkdir_path(CTX, p).await.map(drop),
            Op::Create(p) => fs.create_path(CTX, p).await.map(drop),
            Op::Write(p, off, len, b) => fs.write_path(CTX, p, off, &vec![b; len]).await.map(drop),
            Op::Truncate(p, s) => fs.truncate_path(CTX, p, s).await,
            Op::Link(a, b) => fs.link_path(CTX, a, b).await.map(drop),
            Op::Unlink(p) => fs.unlink_path(CTX, p).await,
            Op::Rmdir(p) => fs.rmdir_path(CTX, p).await,
            Op::Rename(a, b) => fs.rename_path(CTX, a, b).await,
        }
    }
}

/// A workload that uses every operation, reuses slots and pages, and
/// replaces a file by rename.
pub fn workload() -> Vec<Op> {
    use Op::*;
    vec![
        Mkdir("/d"),
        Create("/d/a"),
        Write("/d/a", 0, 5000, 1),
        Create("/b"),
        Link("/d/a", "/c"),
        Write("/b", 100, 100, 2),
        Rename("/d/a", "/b"),
        Unlink("/c"),
        Create("/e"),
        Truncate("/b", 10),
        Write("/b", 4090, 20, 3),
        Truncate("/b", 9000),
        Mkdir("/d/x"),
        Mkdir("/h"),
        Rename("/h", "/d/x"),
        Rmdir("/d/x"),
        Rename("/d", "/f"),
        Unlink("/b"),
        Create("/f/g"),
        Write("/f/g", 0, 64, 4),
    ]
}

/// Namespace churn: every package's slot is reused soon after it is
/// freed, so cancelled packages are overwritten while their cancellers
/// wait (the causal rule under crashes).
pub fn churn() -> Vec<Op> {
    use Op::*;
    let mut ops = vec![Mkdir("/d")];
    for _ in 0..4 {
        ops.extend([
            Create("/t"),
            Link("/t", "/d/u"),
            Unlink("/t"),
            Rename("/d/u", "/t"),
            Create("/d/v"),
            Rename("/d/v", "/t"),
            Unlink("/t"),
        ]);
    }
    ops
}

/// A recorded run: the image it began from, its PM trace, the trace
/// length when each operation returned, and the tree before the first
/// operation and after each.
pub struct Recording {
    pub base: PageStore,
    pub trace: PmTrace,
    pub marks: Vec<usize>,
    pub trees: Vec<Tree>,
    pub faults: Faults,
    pub domain: PersistenceDomain,
}

pub fn record(ops: &[Op], faults: Faults, seed: u64) -> Recording {
    record_in(PersistenceDomain::Adr, ops, faults, seed)
}

pub fn record_in(domain: PersistenceDomain, ops: &[Op], faults: Faults, seed: u64) -> Recording {
    let options = Options {
        faults,
        ..Options::default()
    };
    record_with(domain, ops, options, seed)
}

pub fn record_with(domain: PersistenceDomain, ops: &[Op], options: Options, seed: u64) -> Recording {
    let faults = options.faults;
    let base = Env::formatted(seed).pm.persistent_image();
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach_with_image(&m, profile_in(domain), base.clone()).unwrap();
    let ops = ops.to_vec();
    let (m2, pm2) = (m.clone(), pm.clone());
    let (marks, trees) = ex
        .block_on(async move {
            let fs = Wofs::mount_with(&m2, &pm2, CTX, options).await?;
            let mut trees = vec![fs.snapshot(CTX).await?];
            let mut marks = Vec::new();
            for op in &ops {
                op.run(&fs).await?;
                marks.push(pm2.trace().entries().len());
                trees.push(fs.snapshot(CTX).await?);
            }
            Ok::<_, WofsError>((marks, trees))
        })
        .unwrap()
        .unwrap();
    let trace = pm.trace().clone();
    Recording {
        base,
        trace,
        marks,
        trees,
        faults,
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
    pub elapsed: Duration,
    /// The first violation: where, and what was wrong.
    pub violation: Option<String>,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Every crash state after every trace entry (all subsets of the pending
/// items up to `bound`, sampled past it; [`pcie_sim::pmem::explore`]):
/// materialize, mount (recovery), and compare the tree with the one after
/// the last returned operation or after the one in flight. A state's
/// verdict is reused for equal content only where the same number of
/// operations had returned. Stops at the first violation.
pub fn check(rec: &Recording, bound: u32) -> Report {
    let start = Instant::now();
    let ex = Executor::new(7);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
    let wc = m.profile().cpu.wc_buffers;
    let mut cur = PmemCursor::new(&rec.trace, rec.base.clone(), rec.domain, wc).unwrap();
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
            judge(&ex, &m, img, rec.faults, allowed).map_or(Ok(()), Err)
        },
        |_| {},
    )
    .unwrap();
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
fn judge(ex: &Executor, m: &Machine, img: PageStore, faults: Faults, allowed: &[Tree]) -> Option<String> {
    let pm = Pmem::attach_with_image(m, profile(), img).unwrap();
    let m2 = m.clone();
    let got = ex
        .block_on(async move {
            let fs = Wofs::mount(&m2, &pm, CTX, faults).await?;
            fs.snapshot(CTX).await
        })
        .unwrap();
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
