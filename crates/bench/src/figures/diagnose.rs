//! Side experiments that locate where simulated time goes when a figure
//! disagrees with the paper. Each isolates one mechanism of the model by
//! changing one thing: the kind of write, the file rotation, the
//! drive's number of media units, whether the threads' inodes share
//! inode-table blocks, or whether FIO preallocated the files.

use mqfs::Ctx;
use nvme_ctrl::SsdProfile;

use super::append::{measure, Job, Layout, Point};
use super::common::{block_on, device_write_bytes, mean, BenchResult, Rig, Span, System};

/// One thread writing 4 KiB and syncing, over and over.
#[derive(Clone, Copy, Debug, Default)]
pub struct Loop {
    /// Mean sync latency (us).
    pub sync_us: f64,
    /// Write + sync loops per second.
    pub ops_per_sec: f64,
    /// 4 KiB blocks the drive was asked to write per loop.
    pub blocks_per_op: f64,
}

/// Everything the diagnostics measured.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// One thread, 4 KiB appends (allocating) per system.
    pub append: Vec<(System, Loop)>,
    /// One thread, 4 KiB overwrites of one block (no allocation, so no
    /// bitmap) per system.
    pub overwrite: Vec<(System, Loop)>,
    /// Threads of the file-rotation experiment.
    pub leaf_threads: usize,
    /// (system, one file per thread, files of 6 appends: no extent leaf).
    pub leaf: Vec<(System, Point, Point)>,
    /// Threads of the media-unit experiment.
    pub units_threads: usize,
    /// (system, the 905P, the 905P with 64 media units).
    pub units: Vec<(System, Point, Point)>,
    /// Threads of the preallocation experiment (Figure 11's most).
    pub allocating_threads: usize,
    /// (system, Figure 11's 4 KiB workload at `allocating_threads` with
    /// allocating appends, FIO's `fallocate=none`: the one change from
    /// Figure 11's own point, whose files FIO preallocated).
    pub allocating: Vec<(System, Point)>,
    /// (system, Figure 11's 4 KiB point at `allocating_threads` without
    /// JBD2's BH_Shadow wait, `FsProfile::jbd_shadow` off).
    pub unshadowed: Vec<(System, Point)>,
    /// (system, threads, Figure 11's 4 KiB point with each thread's inodes
    /// in table blocks of its own ([`Layout::PerThread`]); Figure 11's own
    /// point, [`Layout::RoundRobin`], is the shared case).
    pub table: Vec<(System, usize, Point)>,
}

impl Diagnostics {
    /// The one-thread loop of `s` (`overwrite` or append).
    pub fn single(&self, s: System, overwrite: bool) -> Option<Loop> {
        let v = if overwrite { &self.overwrite } else { &self.append };
        v.iter().find(|(x, _)| *x == s).map(|(_, l)| *l)
    }
}

/// Runs `loops` 4 KiB writes, each followed by `system`'s sync, in one
/// thread on the 905P: appends, or overwrites of the file's first block.
pub fn one_thread(system: System, overwrite: bool, loops: usize) -> BenchResult<Loop> {
    let t = Rig::new(system.mode(), SsdProfile::optane_905p(), 1).build()?;
    let (fs, m) = (t.fs.clone(), t.machine.clone());
    let warm = loops / 8 + 1;
    let lat = block_on(&t, async move {
        let ctx = Ctx::on(0);
        let sim = m.sim();
        let ino = fs.create_path(ctx, "/one").await?.ino;
        let data = vec![0x11u8; 4096];
        fs.write(ctx, ino, 0, &data).await?;
        fs.sync(ctx).await?;
        let mut lat = Vec::new();
        let mut start = sim.now();
        let mut before = m.counters();
        for i in 0..warm + loops {
            if i == warm {
                start = sim.now();
                before = m.counters();
            }
            let off = if overwrite { 0 } else { (i as u64 + 1) * 4096 };
            fs.write(ctx, ino, off, &data).await?;
            let t0 = sim.now();
            system.sync(&fs, ctx, ino).await?;
            if i >= warm {
                lat.push((sim.now() - t0).as_ps() as f64 / 1e6);
            }
        }
        let secs = (sim.now() - start).as_secs_f64();
        let bytes = device_write_bytes(&m.counters().since(&before));
        Ok((lat, secs, bytes))
    })?;
    let (l, secs, bytes) = lat;
    Ok(Loop {
        sync_us: mean(&l),
        ops_per_sec: l.len() as f64 / secs.max(1e-12),
        blocks_per_op: bytes as f64 / 4096.0 / l.len().max(1) as f64,
    })
}

/// Runs every diagnostic (smaller in `quick` mode); `fig11` is Figure
/// 11's sweep, whose window and thread counts the table-block experiment
/// repeats.
pub fn run(quick: bool, fig11: &super::fig11::Params) -> BenchResult<Diagnostics> {
    let mut d = Diagnostics::default();
    let loops = if quick { 32 } else { 256 };
    for s in [System::Ext4Nj, System::Mqfs, System::Ext4, System::HoraeFs] {
        d.append.push((s, one_thread(s, false, loops)?));
        d.overwrite.push((s, one_thread(s, true, loops)?));
    }
    let ssd = SsdProfile::optane_905p();
    let span = if quick { Span::ms(1, 2) } else { Span::ms(5, 10) };
    d.leaf_threads = 4;
    let base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
    for s in [System::Ext4, System::Ext4Nj, System::Mqfs] {
        let long = measure(s, &ssd, &base, d.leaf_threads, Job::allocating(4096), span)?;
        let short = Job {
            appends_per_file: Some(6),
            ..Job::allocating(4096)
        };
        let short = measure(s, &ssd, &base, d.leaf_threads, short, span)?;
        d.leaf.push((s, long, short));
    }
    d.units_threads = if quick { 4 } else { 24 };
    let wide = SsdProfile {
        units: 64,
        ..SsdProfile::optane_905p()
    };
    for s in [System::Ext4Nj, System::HoraeFs, System::Mqfs] {
        let a = measure(s, &ssd, &base, d.units_threads, Job::new(4096), span)?;
        let b = measure(s, &wide, &base, d.units_threads, Job::new(4096), span)?;
        d.units.push((s, a, b));
    }
    // The shared inode-table block: Linux's no-journal fsync writes the
    // inode's table block under its buffer lock (`sync_dirty_buffer`), so
    // threads whose inodes share one queue on it. Figure 11's own points
    // (same threads, same window) are the shared case.
    let mut table_threads: Vec<usize> = fig11
        .threads
        .iter()
        .copied()
        .filter(|t| [8, 16].contains(t))
        .collect();
    if table_threads.is_empty() {
        table_threads.extend(fig11.threads.iter().max());
    }
    for &threads in &table_threads {
        for s in [System::Ext4Nj, System::Mqfs] {
            let own = Job {
                layout: Layout::PerThread,
                ..Job::new(4096)
            };
            d.table
                .push((s, threads, measure(s, &ssd, &base, threads, own, fig11.span)?));
        }
    }
    // Figure 11's 4 KiB point at its most threads with one change, for
    // each of `systems`: `job` on the 905P as `rig` builds it.
    d.allocating_threads = fig11.threads.iter().copied().max().unwrap_or(1);
    let most_threads = |systems: &[System], rig: &Rig, job: Job| -> BenchResult<Vec<(System, Point)>> {
        systems
            .iter()
            .map(|&s| Ok((s, measure(s, &ssd, rig, d.allocating_threads, job, fig11.span)?)))
            .collect()
    };
    // FIO's layout: Figure 11's files are preallocated (FIO lays the
    // paper's jobs out with fallocate), so an append converts an unwritten
    // extent and allocates nothing; the same points with allocating appends.
    let all = [System::Ext4, System::HoraeFs, System::Ext4Nj, System::Mqfs];
    d.allocating = most_threads(&all, &base, Job::allocating(4096))?;
    // JBD2's BH_Shadow, the paper's "block-level lock" on the shared
    // metadata blocks: the wait off (`FsProfile::jbd_shadow`).
    let mut unshadowed = base.clone();
    unshadowed.fs.jbd_shadow = false;
    d.unshadowed = most_threads(&[System::Ext4, System::HoraeFs], &unshadowed, Job::new(4096))?;
    eprintln!("diagnostics done");
    Ok(d)
}
