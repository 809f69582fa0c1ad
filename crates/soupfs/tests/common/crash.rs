//! Crash checking with the PM envelope: record a workload's trace, then
//! after every entry past `mkfs` enumerate the crash states
//! ([`pcie_sim::PmemCursor`], exhaustive up to a bound, sampled past it),
//! mount each and check it.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use fsapi::{Ctx, FileSystem as _};
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, Pmem, PmemCursor, Sim, SimDuration,
    TraceMode,
};
use soupfs::{Faults, FsError, SoupFs, SoupProfile};

use super::model::{step, Model};
use super::{pm_profile, PM_SIZE};

/// A file fsynced at trace length `at`, untouched until trace length
/// `until` (when a call that changes it or its path began).
#[derive(Clone, Debug)]
pub struct Synced {
    pub at: usize,
    pub until: usize,
    pub path: String,
    /// Paths a rename may have moved it to (old or new name must hold it).
    pub alts: Vec<String>,
    pub data: Vec<u8>,
}

/// A recorded run.
pub struct Recording {
    pub pm: Pmem,
    /// Trace length when `mkfs` returned.
    pub mkfs_end: usize,
    pub synced: Vec<Synced>,
}

/// What a crash campaign found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub points: usize,
    pub states: u64,
    /// Crash points with more pending items than the bound (sampled).
    pub sampled_points: usize,
    pub leaked_states: u64,
    /// Distinct (image, fsynced files) pairs mounted; a state whose
    /// image and oracle were seen before reuses that verdict.
    pub mounted: u64,
    pub violations: Vec<String>,
    pub secs: f64,
}

pub type Log = Rc<RefCell<Vec<Synced>>>;

async fn fsync_logged(fs: &SoupFs, c: Ctx, log: &Log, path: &str) -> Result<(), FsError> {
    fs.fsync_path(c, path).await?;
    let data = fs.read_path(c, path).await?;
    let at = fs.pmem().trace().len() as usize;
    log.borrow_mut().push(Synced {
        at,
        until: usize::MAX,
        path: path.to_string(),
        alts: Vec::new(),
        data,
    });
    Ok(())
}

/// The workload: creates, writes, fsyncs, links, renames (over an
/// existing name too), truncates, removes, with the persister running
/// between some of them.
async fn workload(fs: SoupFs, c: Ctx, log: Log, sim: Sim) -> Result<(), FsError> {
    let sim_sleep = |d: u64| sim.sleep(SimDuration::from_us(d));
    fs.mkdir_path(c, "/d").await?;
    fs.create_path(c, "/d/a").await?;
    fs.write_path(c, "/d/a", 0, b"alpha, fsynced first").await?;
    fsync_logged(&fs, c, &log, "/d/a").await?;
    fs.create_path(c, "/b").await?;
    fs.write_path(c, "/b", 0, b"bee").await?;
    fs.link_path(c, "/b", "/d/b2").await?;
    sim_sleep(1_500).await;
    fs.mkdir_path(c, "/e").await?;
    fs.create_path(c, "/e/f").await?;
    fs.write_path(c, "/e/f", 0, b"eff, fsynced second, in a new directory")
        .await?;
    fsync_logged(&fs, c, &log, "/e/f").await?;
    fs.unlink_path(c, "/b").await?;
    fs.create_path(c, "/e/old").await?;
    fs.rename_path(c, "/d/b2", "/e/old").await?;
    fs.truncate_path(c, "/e/old", 1).await?;
    fs.chmod(c, fs.resolve(c, "/e").await?, 0o700).await?;
    fs.create_path(c, "/big").await?;
    fs.write_path(c, "/big", 100, &[0xb1; 5000]).await?;
    fs.write_path(c, "/big", 4000, b"overwritten across a block edge")
        .await?;
    fsync_logged(&fs, c, &log, "/big").await?;
    sim_sleep(1_500).await;
    fs.mkdir_path(c, "/e/sub").await?;
    fs.rename_path(c, "/e/sub", "/d/sub2").await?;
    fs.rmdir_path(c, "/d/sub2").await?;
    fs.create_path(
        c,
        "/long-name-that-needs-two-name-lines-because-it-is-over-56-bytes",
    )
    .await?;
    fs.unlink_path(c, "/e/old").await?;
    // A rename of a file fsynced before: after any crash the old name or
    // the new one holds it (rule C3). After a sync, /d's older diradd
    // puts /d first in the persister's next round, so only the rename's
    // edge orders /e's diradd before /d's dirrem.
    fs.sync(c).await?;
    fs.create_path(c, "/d/tmp").await?;
    for s in log.borrow_mut().iter_mut().filter(|s| s.path == "/d/a") {
        s.alts.push("/e/a2".into());
    }
    fs.rename_path(c, "/d/a", "/e/a2").await?;
    fs.create_path(c, "/z").await?;
    fs.write_path(c, "/z", 0, b"zz").await?;
    fs.truncate_path(c, "/z", 0).await?;
    sim_sleep(1_500).await;
    Ok(())
}

/// Random calls checked against the model (`super::model`), an fsync of
/// a random file before some of them; an fsynced file stops being checked
/// from the call that changes its content or path.
pub async fn random_workload(
    fs: SoupFs,
    c: Ctx,
    log: Log,
    sim: Sim,
    seed: u64,
    steps: usize,
) -> Result<(), FsError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut m = Model::default();
    m.dirs.insert("/".into());
    for _ in 0..steps {
        if rng.gen_bool(0.25) {
            if let Some(f) = Model::pick(&mut rng, m.files.keys()) {
                fsync_logged(&fs, c, &log, &f).await?;
            }
        }
        let before = fs.pmem().trace().len() as usize;
        step(&fs, c, &mut m, &mut rng).await?;
        for s in log.borrow_mut().iter_mut().filter(|s| s.until == usize::MAX) {
            if m.files.get(&s.path).map(|id| &m.data[*id]) != Some(&s.data) {
                s.until = before;
            }
        }
        if rng.gen_bool(0.15) {
            sim.sleep(SimDuration::from_us(rng.gen_range(200..1500))).await;
        }
    }
    sim.sleep(SimDuration::from_us(1_500)).await;
    Ok(())
}

/// Records the fixed workload on a fresh machine.
pub fn record(seed: u64, faults: Faults) -> Recording {
    record_with(seed, faults, workload)
}

/// Records the fixed workload with persistent memory in `domain`.
pub fn record_in(domain: PersistenceDomain, faults: Faults) -> Recording {
    record_on(domain, 1, faults, workload)
}

/// Records `wl` on a fresh machine.
pub fn record_with<W, Fut>(seed: u64, faults: Faults, wl: W) -> Recording
where
    W: FnOnce(SoupFs, Ctx, Log, Sim) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<(), FsError>> + 'static,
{
    record_on(PersistenceDomain::Adr, seed, faults, wl)
}

fn record_on<W, Fut>(domain: PersistenceDomain, seed: u64, faults: Faults, wl: W) -> Recording
where
    W: FnOnce(SoupFs, Ctx, Log, Sim) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<(), FsError>> + 'static,
{
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let profile = pcie_sim::PmemProfile {
        domain,
        ..pm_profile()
    };
    let pm = Pmem::attach(&m, profile).expect("attach");
    let core = Ctx::on(0);
    let pcore = Ctx::on(1);
    let sim2 = m.sim();
    let pmc = pm.clone();
    let log: Log = Rc::default();
    let l2 = log.clone();
    let mkfs_end = ex
        .block_on(async move {
            let fs = SoupFs::mkfs(&m, pmc, core, SoupProfile::default(), faults).await?;
            let end = fs.pmem().trace().len() as usize;
            fs.start_persister(pcore)?;
            wl(fs.clone(), core, l2, sim2).await?;
            fs.stop_persister();
            Ok::<_, FsError>(end)
        })
        .expect("simulation")
        .expect("workload");
    let synced = log.borrow().clone();
    Recording { pm, mkfs_end, synced }
}

/// Mounts one crash image and checks it: `Ok(leaked lines)` or what is
/// wrong.
/// After the checks, with `use_after`: the mounted file system takes new
/// work (the latest view built at mount agrees with PM), which a second
/// mount finds whole.
fn check_state(
    ex: &Executor,
    m: &Machine,
    img: PageStore,
    synced: Vec<Synced>,
    use_after: bool,
) -> Result<u64, String> {
    let pm = Pmem::attach_with_image(m, pm_profile(), img).map_err(|e| e.to_string())?;
    let core = Ctx::on(0);
    let m = m.clone();
    ex.block_on(async move {
        let (fs, rep) = SoupFs::mount(&m, pm.clone(), core, SoupProfile::default(), Faults::default())
            .await
            .map_err(|e| format!("mount: {e}"))?;
        for s in &synced {
            let mut found = false;
            for p in std::iter::once(&s.path).chain(&s.alts) {
                found |= fs.read_path(core, p).await.as_ref() == Ok(&s.data);
            }
            if !found {
                return Err(format!("fsynced {} lost (also looked at {:?})", s.path, s.alts));
            }
        }
        if use_after {
            let e = |e: FsError| format!("after the crash: {e}");
            fs.mkdir_path(core, "/after").await.map_err(e)?;
            fs.create_path(core, "/after/x").await.map_err(e)?;
            fs.write_path(core, "/after/x", 0, &[0xaf; 4500])
                .await
                .map_err(e)?;
            fs.sync(core).await.map_err(e)?;
            let (fs2, again) = SoupFs::mount(&m, pm.clone(), core, SoupProfile::default(), Faults::default())
                .await
                .map_err(|e| format!("remount after use: {e}"))?;
            if again.leaked_lines != 0 || fs2.read_path(core, "/after/x").await != Ok(vec![0xaf; 4500]) {
                return Err(format!("use after the crash: {again:?}"));
            }
            return Ok(rep.leaked_lines);
        }
        if rep.leaked_lines > 0 {
            // The collector's bitmap is persistent: a second mount finds
            // nothing left to collect.
            let (_, again) = SoupFs::mount(&m, pm, core, SoupProfile::default(), Faults::default())
                .await
                .map_err(|e| format!("remount: {e}"))?;
            if again.leaked_lines != 0 || again.reachable_lines != rep.reachable_lines {
                return Err(format!("collector left {again:?} after {rep:?}"));
            }
        }
        Ok(rep.leaked_lines)
    })
    .map_err(|e| e.to_string())?
}

/// Checks every crash state after every entry past `mkfs`, exhaustive up
/// to `bound` pending items and sampled past it
/// ([`pcie_sim::pmem::explore`]; verdicts reused by image content and the
/// fsynced files checked, named by their fsync's trace position); stops
/// at the first violation if `first_only`.
pub fn explore(rec: &Recording, bound: u32, first_only: bool) -> Outcome {
    let start = Instant::now();
    let trace = rec.pm.trace();
    let wc = MachineProfile::default().cpu.wc_buffers;
    let mut cur =
        PmemCursor::new(&trace, PageStore::zeroed(PM_SIZE), rec.pm.profile().domain, wc).expect("cursor");
    let ex = Executor::new(0);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
    let synced_at = |k: usize| -> Vec<Synced> {
        rec.synced
            .iter()
            .filter(|s| s.at <= k + 1 && k < s.until)
            .cloned()
            .collect()
    };
    let mut judged = 0u64;
    let mut leaked_states = 0u64;
    let points = rec.mkfs_end.saturating_sub(1)..cur.len();
    let report = pcie_sim::pmem::explore(
        &mut cur,
        points,
        bound,
        first_only,
        |k| {
            synced_at(k)
                .iter()
                .map(|s| (s.at, s.alts.len()))
                .collect::<Vec<_>>()
        },
        |k, img| {
            judged += 1;
            check_state(&ex, &m, img, synced_at(k), judged % 8 == 0)
        },
        |leaked| leaked_states += u64::from(*leaked > 0),
    )
    .expect("explore");
    Outcome {
        points: report.points,
        states: report.states,
        mounted: report.judged,
        leaked_states,
        sampled_points: report.sampled_points,
        violations: report.violations.iter().map(|v| v.to_string()).collect(),
        secs: start.elapsed().as_secs_f64(),
    }
}
