//! A Varmail-like workload (Filebench's `varmail.f` personality, default
//! configuration): threads over one shared directory, each loop
//! deletefile; createfile, appendfilerand, fsync, closefile; openfile,
//! readwholefile, appendfilerand, fsync, closefile; openfile,
//! readwholefile, closefile (13 flowops).
//!
//! Deviations, to keep it deterministic and race-free: each file slot of
//! the fileset belongs to one thread (Filebench picks from the whole set and
//! locks the entry), initial sizes are uniform in 1..=32 KiB (mean 16 KiB;
//! Filebench draws from a gamma distribution of mean 16 KiB), appends are
//! uniform in 1..=16 KiB (`meanappendsize`).

use std::cell::RefCell;
use std::rc::Rc;

use mqfs::testing::TestFs;
use mqfs::{Ctx, Fs, FsError, Ino};
use nvme_ctrl::SsdProfile;

use super::common::{
    block_on, device_write_bytes, run_window, BenchResult, LatStats, Measured, Rig, Rng, Span, System,
};

/// Flowops in one loop of the personality.
pub const FLOWOPS_PER_LOOP: u64 = 13;

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Threads (`nthreads`, default 16).
    pub threads: usize,
    /// Files in the fileset (`nfiles`, default 1000).
    pub nfiles: usize,
    /// Percent of the files created before the run (`prealloc=80`).
    pub prealloc_pct: u64,
    /// Largest initial file (sizes uniform up to it).
    pub max_file: u64,
    /// Largest append (`meanappendsize` = 16 KiB; uniform up to it).
    pub max_append: u64,
    /// Simulated time.
    pub span: Span,
    /// The first of the loop's two fsyncs is an fbarrier (HoRAE 6.5's
    /// recovery run); off in Filebench's personality.
    pub barrier_first: bool,
    /// Device size in 4 KiB blocks.
    pub blocks: u64,
}

impl Params {
    /// Filebench's defaults.
    pub fn full() -> Params {
        Params {
            threads: 16,
            nfiles: 1000,
            prealloc_pct: 80,
            max_file: 32768,
            max_append: 16384,
            span: Span::ms(5, 20),
            barrier_first: false,
            blocks: super::common::DEVICE_BLOCKS,
        }
    }

    /// A smoke test.
    pub fn quick() -> Params {
        Params {
            threads: 4,
            nfiles: 100,
            span: Span::ms(1, 2),
            ..Params::full()
        }
    }
}

/// Result of one run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Flowops per second (what Filebench reports).
    pub ops_per_sec: f64,
    /// fsync latency.
    pub fsync: LatStats,
    /// Device write traffic, MB/s.
    pub device_mbps: f64,
}

fn name(slot: usize) -> String {
    format!("f{slot}")
}

/// One thread's view of its slots.
struct Slots {
    mine: Vec<usize>,
    exists: Vec<bool>,
}

impl Slots {
    fn pick(&self, rng: &mut Rng, present: bool) -> Option<usize> {
        let c: Vec<usize> = self
            .mine
            .iter()
            .copied()
            .filter(|s| self.exists[*s] == present)
            .collect();
        (!c.is_empty()).then(|| c[rng.below(c.len() as u64) as usize])
    }
}

async fn setup(fs: Rc<Fs>, p: Params) -> Result<(Ino, Vec<bool>), FsError> {
    let ctx = Ctx::on(0);
    let dir = fs.mkdir_path(ctx, "/varmail").await?.ino;
    let mut rng = Rng::new(0xFEED);
    let mut exists = vec![false; p.nfiles];
    for (slot, e) in exists.iter_mut().enumerate() {
        if rng.below(100) < p.prealloc_pct {
            let ino = fs.create(ctx, dir, &name(slot), 0o644).await?.ino;
            let size = 1 + rng.below(p.max_file);
            fs.write(ctx, ino, 0, &vec![7u8; size as usize]).await?;
            *e = true;
        }
    }
    fs.sync(ctx).await?;
    Ok((dir, exists))
}

/// Runs the workload with `system` on `ssd`.
pub fn measure(system: System, ssd: &SsdProfile, p: &Params) -> BenchResult<Outcome> {
    Ok(run(system, ssd, p)?.1)
}

/// The machine and file system the workload runs `system` on, on `ssd`.
pub fn rig(system: System, ssd: &SsdProfile, p: &Params) -> Rig {
    Rig {
        blocks: p.blocks,
        ..Rig::new(system.mode(), ssd.clone(), p.threads)
    }
}

/// Runs the workload with `system` on `ssd` and returns the machine as the
/// window's end left it (threads stopped wherever they were) with the
/// outcome.
pub fn run(system: System, ssd: &SsdProfile, p: &Params) -> BenchResult<(TestFs, Outcome)> {
    run_on(&rig(system, ssd, p), p)
}

/// [`run`] on `rig` (a side experiment changes its profile).
pub fn run_on(rig: &Rig, p: &Params) -> BenchResult<(TestFs, Outcome)> {
    let t = rig.build()?;
    let (dir, exists) = block_on(&t, {
        let (fs, p) = (t.fs.clone(), p.clone());
        async move { Ok(setup(fs, p).await?) }
    })?;
    let exists = Rc::new(RefCell::new(exists));
    let loops = Rc::new(RefCell::new(0u64));
    let lat = Rc::new(RefCell::new(Vec::new()));
    let threads = p.threads;
    let Measured { window, counters, .. } = run_window(&t, threads, p.span, |i, w| {
        let fs = t.fs.clone();
        let sim = t.machine.sim();
        let (exists, loops, lat) = (exists.clone(), loops.clone(), lat.clone());
        let p = p.clone();
        async move {
            let ctx = Ctx::on(i);
            let mut rng = Rng::new(1 + i as u64);
            let mine: Vec<usize> = (i..p.nfiles).step_by(threads).collect();
            let mut slots = Slots {
                mine,
                exists: exists.borrow().clone(),
            };
            let append = |rng: &mut Rng| vec![1u8; 1 + rng.below(p.max_append) as usize];
            while sim.now() < w.end {
                let mut synced = Vec::new();
                if let Some(s) = slots.pick(&mut rng, true) {
                    fs.unlink(ctx, dir, &name(s)).await?;
                    slots.exists[s] = false;
                }
                if let Some(s) = slots.pick(&mut rng, false) {
                    let ino = fs.create(ctx, dir, &name(s), 0o644).await?.ino;
                    fs.write(ctx, ino, 0, &append(&mut rng)).await?;
                    let t0 = sim.now();
                    if p.barrier_first {
                        fs.fbarrier(ctx, ino).await?;
                    } else {
                        fs.fsync(ctx, ino).await?;
                    }
                    synced.push((sim.now() - t0).as_ps());
                    slots.exists[s] = true;
                }
                if let Some(s) = slots.pick(&mut rng, true) {
                    let a = fs.lookup(ctx, dir, &name(s)).await?;
                    fs.read(ctx, a.ino, 0, a.size as usize).await?;
                    fs.write(ctx, a.ino, a.size, &append(&mut rng)).await?;
                    let t0 = sim.now();
                    fs.fsync(ctx, a.ino).await?;
                    synced.push((sim.now() - t0).as_ps());
                }
                if let Some(s) = slots.pick(&mut rng, true) {
                    let a = fs.lookup(ctx, dir, &name(s)).await?;
                    fs.read(ctx, a.ino, 0, a.size as usize).await?;
                }
                if w.contains(sim.now()) {
                    *loops.borrow_mut() += 1;
                    lat.borrow_mut().extend(synced);
                }
            }
            Ok(())
        }
    })?;
    let secs = window.secs();
    let n = *loops.borrow();
    let fsync = LatStats::of(&lat.borrow());
    let out = Outcome {
        ops_per_sec: (n * FLOWOPS_PER_LOOP) as f64 / secs,
        fsync,
        device_mbps: device_write_bytes(&counters) as f64 / secs / 1e6,
    };
    Ok((t, out))
}
