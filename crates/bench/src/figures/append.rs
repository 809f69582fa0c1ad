//! The FIO-style workload of Figures 11 and 13: each thread, on its own
//! core, appends to its own file and syncs after every append; and its
//! in-place variant of HoRAE 6.4 ([`Pattern::Overwrite`]): each thread
//! overwrites random blocks of its own preallocated file in place and syncs
//! after every write.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ccnvme::horae::ORDERING_QUEUE;
use mqfs::journal::jbd::PipelineStats;
use mqfs::{Ctx, Fs, FsError, Ino};
use nvme_ctrl::SsdProfile;
use pcie_sim::{Counters, EventKind, Sim, SimDuration};

use super::common::{
    block_on, device_write_bytes, run_window_with, BenchResult, LatStats, Measured, Rig, Rng, Span, System,
    Tally, Window,
};

/// Where the threads' files sit in the inode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Created round-robin: the threads' current files are neighbours in
    /// the inode table, as FIO's jobs' files are (they share table blocks).
    RoundRobin,
    /// Each thread's files created together, a whole inode-table block per
    /// thread (a diagnostic: no table block shared between threads).
    PerThread,
}

/// Where each thread's writes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Appends, each thread to its own file for the whole run, or moving
    /// to a new file every [`Job::appends_per_file`] (Figures 11, 13;
    /// HoRAE 6.3).
    Append,
    /// In-place updates (HoRAE 6.4: "we issue 10 GB overwrites to a 10 GB
    /// file"): before the run each thread writes its own file of
    /// `file_blocks` 4 KiB blocks once and the file system is synced, so
    /// every block is allocated and committed; then each write overwrites
    /// a `write_size`-aligned piece of it chosen by the thread's seeded
    /// generator ([`Rng`]), followed by the sync, as the appends are.
    Overwrite {
        /// The file's size in 4 KiB blocks.
        file_blocks: u64,
    },
}

/// How each file is laid out before the run: FIO's `fallocate=` option
/// (`filesetup.c` `extend_file`: for a write job on a new file, with
/// `file_append` as the paper's jobs or without, FIO creates the file and
/// preallocates its whole size, then starts writing at offset 0 without
/// writing the file first; `docs/decisions.md` B1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallocate {
    /// `fallocate=none`: files start empty and each append allocates its
    /// blocks (HoRAE 6.3's "allocating write workload").
    None,
    /// `fallocate=native`, FIO's default on Linux (`posix` before FIO 3.0;
    /// both call fallocate(2) with mode 0): each file is preallocated to
    /// the size the thread writes into it, so its blocks are *unwritten*
    /// extents and the size is already final. Each write then converts the
    /// blocks it writes to written (`ext4_ext_convert_to_initialized`):
    /// the sync journals the inode, not the bitmaps, which the layout
    /// marked once.
    Native,
}

/// What each thread does.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// Bytes per write.
    pub write_size: usize,
    /// Appends to a file before moving on to the next one; `None`: one
    /// file per thread for the whole run, as each FIO job writes one file.
    pub appends_per_file: Option<usize>,
    /// Inode placement.
    pub layout: Layout,
    /// Appends or in-place overwrites.
    pub pattern: Pattern,
    /// How the appends' files are laid out before the run (ignored by
    /// [`Pattern::Overwrite`], whose file is written whole first).
    pub fallocate: Fallocate,
}

impl Job {
    /// Appends of `write_size` as the ccNVMe paper's FIO jobs run them
    /// (Figures 2, 11 and 13; `docs/decisions.md` B1): one file per
    /// thread for the whole run, the threads' files neighbours in the
    /// inode table, each preallocated ([`Fallocate::Native`]).
    pub fn new(write_size: usize) -> Job {
        Job {
            write_size,
            appends_per_file: None,
            layout: Layout::RoundRobin,
            pattern: Pattern::Append,
            fallocate: Fallocate::Native,
        }
    }

    /// Appends of `write_size` that allocate their blocks
    /// ([`Fallocate::None`]; HoRAE's Figure 10, "FIO Allocating Write
    /// Workload").
    pub fn allocating(write_size: usize) -> Job {
        Job {
            fallocate: Fallocate::None,
            ..Job::new(write_size)
        }
    }

    /// In-place overwrites of `write_size` at random aligned offsets of a
    /// preallocated file of `file_blocks` blocks per thread
    /// ([`Pattern::Overwrite`]).
    pub fn overwrite(write_size: usize, file_blocks: u64) -> Job {
        Job {
            pattern: Pattern::Overwrite { file_blocks },
            ..Job::new(write_size)
        }
    }
}

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    /// The system.
    pub system: System,
    /// Threads (and cores).
    pub threads: usize,
    /// Bytes per append.
    pub write_size: usize,
    /// Appends (each with its sync) per second.
    pub ops_per_sec: f64,
    /// Application bytes appended per second, in MB/s.
    pub mbps: f64,
    /// Latency of the sync call.
    pub sync: LatStats,
    /// Bytes the device fetched by DMA for writes per second, in MB/s
    /// (data, journal and metadata blocks: what iostat counts).
    pub device_mbps: f64,
    /// 4 KiB blocks the device fetched per append.
    pub blocks_per_op: f64,
    /// Host MMIO writes per append (doorbells, P-SQ entries, ordering
    /// queue entries and pointers).
    pub mmio_per_op: f64,
    /// Of those, writes to the Horae ordering queue.
    pub ordering_mmio_per_op: f64,
    /// MSI-X interrupts per append.
    pub irqs_per_op: f64,
    /// Files the loop had to create because the pre-created ones ran out
    /// (0 unless a system beat the bounds of the pool).
    pub extra_files: u64,
    /// HoraeFS: in-place writes the ordering layer redirected to the
    /// p-area (prepare writes, HoRAE 5.4) per write, from the journal's
    /// pipeline counters (`Fs::pipeline_stats`, `redirected`); 0 in the
    /// other modes.
    pub redirected_per_op: f64,
    /// Home blocks HoraeFS's ordering layer wrote by commit writes per
    /// write (`OrderingQueue::committed_blocks`; HoRAE 5.4: each prepare
    /// write read back from its p-area slot, then written home); 0 in the
    /// other modes.
    pub committed_per_op: f64,
    /// The p-area mkfs reserved, in blocks (0 outside HoraeFS or without
    /// one).
    pub p_area_blocks: u64,
    /// Buffers Ext4's and HoraeFS's commits wrote to the log from the live
    /// buffer per append (BH_Shadow: a modifier would wait for that log
    /// write), from the journal's counter `shadowed`; 0 in the other modes.
    pub shadowed_per_op: f64,
    /// Buffers those commits wrote from a frozen copy per append (changed
    /// after the transaction was locked, so no modifier waits), from the
    /// journal's counter `frozen`.
    pub frozen_per_op: f64,
}

/// A bound on the appends one thread completes in `span`, the lesser of
/// two: one append and sync per 8 us (faster than any system here), and
/// the whole run's appends crossing the link at 4 GB/s (more than PCIe 3.0
/// x4 carries), shared by the threads with 50% to spare for unfairness.
fn appends_bound(span: Span, job: &Job, threads: usize) -> usize {
    let ps = (span.warmup + span.length).as_ps();
    let by_latency = ps / SimDuration::from_us(8).as_ps();
    // 4 GB/s is 250 ps per byte.
    let by_link = ps / (job.write_size.max(1) as u64 * 250) * 3 / 2 / threads.max(1) as u64;
    by_latency.min(by_link).max(1) as usize
}

/// How a run's files are laid out, from the job and the bound on a
/// thread's appends ([`appends_bound`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FilePlan {
    /// Appends to a file before moving to the next: the job's own
    /// rotation, or, for one file per thread, the bound (so the file never
    /// runs out). Also the size each file is preallocated to under
    /// [`Fallocate::Native`]: FIO lays out the whole 12000 MiB of the
    /// paper's jobs, of which a run writes the first part only.
    per_file: usize,
    /// Files a thread can write: enough for the bound (one, for one file
    /// per thread). Should that fail, the loop creates what it needs and
    /// the CSV says how many.
    used: usize,
    /// Files created per thread before the run: the `used` ones, and
    /// under [`Layout::PerThread`] empty ones up to a whole number of
    /// inode-table blocks.
    pool: usize,
}

impl FilePlan {
    fn new(span: Span, job: &Job, threads: usize) -> FilePlan {
        let bound = appends_bound(span, job, threads);
        let per_file = job.appends_per_file.unwrap_or(bound).max(1);
        let used = bound.div_ceil(per_file);
        let pool = match job.layout {
            Layout::RoundRobin => used,
            Layout::PerThread => used.next_multiple_of(mqfs::layout::INODES_PER_BLOCK as usize),
        };
        FilePlan { per_file, used, pool }
    }
}

/// Creates thread `i`'s file `k` on its core, preallocated to `bytes`
/// when `job.fallocate` says so (none for 0).
async fn make_file(fs: &Fs, i: usize, k: usize, job: &Job, bytes: u64) -> Result<Ino, FsError> {
    let ctx = Ctx::on(i);
    let ino = fs.create_path(ctx, &format!("/fio{i}.{k}")).await?.ino;
    if job.fallocate == Fallocate::Native && bytes > 0 {
        fs.fallocate(ctx, ino, mqfs::FallocMode::Allocate, 0, bytes)
            .await?;
    }
    Ok(ino)
}

/// Creates `plan.pool` files per thread in `layout` order, the first
/// `plan.used` of each thread's preallocated to `plan.per_file` appends
/// when `job.fallocate` says so, syncing every 64 creates (an `mq`
/// transaction holds at most one descriptor of metadata blocks, and one
/// sync would otherwise take every unsynced create).
async fn make_files(fs: Rc<Fs>, threads: usize, plan: FilePlan, job: Job) -> Result<Vec<Vec<Ino>>, FsError> {
    let layout = job.layout;
    let FilePlan { per_file, used, pool } = plan;
    let bytes = (per_file * job.write_size) as u64;
    let mut files = vec![Vec::new(); threads];
    let order: Vec<(usize, usize)> = match layout {
        Layout::RoundRobin => (0..pool)
            .flat_map(|k| (0..threads).map(move |i| (i, k)))
            .collect(),
        Layout::PerThread => (0..threads)
            .flat_map(|i| (0..pool).map(move |k| (i, k)))
            .collect(),
    };
    for (n, (i, k)) in order.into_iter().enumerate() {
        let ino = make_file(&fs, i, k, &job, if k < used { bytes } else { 0 }).await?;
        files[i].push(ino);
        if n % 64 == 63 {
            fs.sync(Ctx::on(0)).await?;
        }
    }
    fs.sync(Ctx::on(0)).await?;
    Ok(files)
}

/// Runs `threads` threads of `job` with `system`'s sync on `ssd` (the rest
/// of the machine as `base`) for `span`.
pub fn measure(
    system: System,
    ssd: &SsdProfile,
    base: &Rig,
    threads: usize,
    job: Job,
    span: Span,
) -> BenchResult<Point> {
    let rig = Rig {
        mode: system.mode(),
        ssd: ssd.clone(),
        fs: system.profile(&base.fs),
        threads,
        ..base.clone()
    };
    let t = rig.build()?;
    if let Pattern::Overwrite { file_blocks } = job.pattern {
        return overwrite(system, &t, threads, job.write_size, file_blocks, span);
    }
    let plan = FilePlan::new(span, &job, threads);
    let FilePlan { per_file, used, pool } = plan;
    let files = block_on(&t, {
        let fs = t.fs.clone();
        async move { Ok(make_files(fs, threads, plan, job).await?) }
    })?;
    let tally = Rc::new(RefCell::new(Tally::default()));
    let extra = Rc::new(Cell::new(0u64));
    let size = job.write_size;
    let (Measured { window, counters, .. }, s0, s1) =
        run_window_with(&t, threads, span, journal_counts(&t), |i, w| {
            let fs = t.fs.clone();
            let sim = t.machine.sim();
            let (tally, extra) = (tally.clone(), extra.clone());
            let mut files = files[i].clone();
            files.truncate(used);
            let mut files = files.into_iter();
            async move {
                let ctx = Ctx::on(i);
                let buf = vec![(i as u8).wrapping_add(1); size];
                let (mut ino, mut off, mut n) = (0, 0u64, per_file);
                while sim.now() < w.end {
                    if n == per_file {
                        ino = match files.next() {
                            Some(ino) => ino,
                            None => {
                                extra.set(extra.get() + 1);
                                let k = pool + extra.get() as usize;
                                make_file(&fs, i, k, &job, (per_file * size) as u64).await?
                            }
                        };
                        (off, n) = (0, 0);
                    }
                    fs.write(ctx, ino, off, &buf).await?;
                    off += size as u64;
                    n += 1;
                    timed_sync(system, &fs, ctx, ino, &sim, &w, &tally, size).await?;
                }
                Ok(())
            }
        })?;
    let r = tally.borrow();
    let pt = point(system, threads, size, &r, window.secs(), &counters, extra.get());
    Ok(with_journal_counts(pt, &t, s0, s1, r.ops))
}

/// The journal's pipeline counters (`Fs::pipeline_stats`) and the
/// ordering layer's count of blocks its commit writes wrote home, read at
/// a window's edge.
#[derive(Clone, Copy, Debug, Default)]
struct JournalCounts {
    pipeline: PipelineStats,
    committed_blocks: u64,
}

/// Reads [`JournalCounts`] of `t`'s file system.
fn journal_counts(t: &mqfs::testing::TestFs) -> impl Fn() -> JournalCounts {
    let fs = t.fs.clone();
    move || JournalCounts {
        pipeline: fs.pipeline_stats().unwrap_or_default(),
        committed_blocks: fs.ordering_queue().map_or(0, |q| q.committed_blocks()),
    }
}

/// `pt` with the journal's counts between the window's edges `s0` and
/// `s1` ([`journal_counts`]) over its `ops` operations, and `t`'s p-area.
fn with_journal_counts(
    mut pt: Point,
    t: &mqfs::testing::TestFs,
    s0: JournalCounts,
    s1: JournalCounts,
    ops: u64,
) -> Point {
    let ops = ops.max(1) as f64;
    let (p0, p1) = (s0.pipeline, s1.pipeline);
    pt.redirected_per_op = (p1.redirected - p0.redirected) as f64 / ops;
    pt.committed_per_op = (s1.committed_blocks - s0.committed_blocks) as f64 / ops;
    pt.shadowed_per_op = (p1.shadowed - p0.shadowed) as f64 / ops;
    pt.frozen_per_op = (p1.frozen - p0.frozen) as f64 / ops;
    pt.p_area_blocks = t.fs.superblock().p_area_blocks;
    pt
}

/// Bytes per preallocating write of [`overwrite`]'s set-up.
const FILL_CHUNK: usize = 64 * 4096;

/// [`Pattern::Overwrite`] on the built rig `t`: each thread's file
/// `/ipu{i}` written whole and the file system synced (so every block is
/// allocated and committed: HoraeFS sees each later write as an in-place
/// update, HoRAE 5.6.2's `BH_New` test), then the threads overwrite
/// random aligned pieces of their file, each followed by `system`'s sync.
fn overwrite(
    system: System,
    t: &mqfs::testing::TestFs,
    threads: usize,
    size: usize,
    file_blocks: u64,
    span: Span,
) -> BenchResult<Point> {
    let bytes = file_blocks * 4096;
    let slots = (bytes / size.max(1) as u64).max(1);
    let files = block_on(t, {
        let fs = t.fs.clone();
        async move {
            let mut files = Vec::with_capacity(threads);
            let chunk = vec![0x5au8; FILL_CHUNK];
            for i in 0..threads {
                let ctx = Ctx::on(i);
                let ino = fs.create_path(ctx, &format!("/ipu{i}")).await?.ino;
                let mut off = 0u64;
                while off < bytes {
                    let n = (bytes - off).min(FILL_CHUNK as u64) as usize;
                    fs.write(ctx, ino, off, &chunk[..n]).await?;
                    off += n as u64;
                }
                files.push(ino);
            }
            fs.sync(Ctx::on(0)).await?;
            Ok(files)
        }
    })?;
    let tally = Rc::new(RefCell::new(Tally::default()));
    let (Measured { window, counters, .. }, s0, s1) =
        run_window_with(t, threads, span, journal_counts(t), |i, w| {
            let fs = t.fs.clone();
            let sim = t.machine.sim();
            let tally = tally.clone();
            let ino = files[i];
            async move {
                let ctx = Ctx::on(i);
                let buf = vec![(i as u8).wrapping_add(1); size];
                let mut rng = Rng::new(0x1b0 + i as u64);
                while sim.now() < w.end {
                    let off = rng.below(slots) * size as u64;
                    fs.write(ctx, ino, off, &buf).await?;
                    timed_sync(system, &fs, ctx, ino, &sim, &w, &tally, size).await?;
                }
                Ok(())
            }
        })?;
    let r = tally.borrow();
    let pt = point(system, threads, size, &r, window.secs(), &counters, 0);
    Ok(with_journal_counts(pt, t, s0, s1, r.ops))
}

/// `system`'s sync of `ino` after a write of `bytes`; counted in `tally`
/// (the operation, its bytes, the sync's latency) when it returns inside
/// the window `w`.
#[allow(clippy::too_many_arguments)]
async fn timed_sync(
    system: System,
    fs: &Fs,
    ctx: Ctx,
    ino: Ino,
    sim: &Sim,
    w: &Window,
    tally: &RefCell<Tally>,
    bytes: usize,
) -> Result<(), FsError> {
    let t0 = sim.now();
    system.sync(fs, ctx, ino).await?;
    let t1 = sim.now();
    if w.contains(t1) {
        let mut r = tally.borrow_mut();
        r.ops += 1;
        r.bytes += bytes as u64;
        r.lat.push((t1 - t0).as_ps());
    }
    Ok(())
}

fn point(
    system: System,
    threads: usize,
    write_size: usize,
    r: &Tally,
    secs: f64,
    c: &Counters,
    extra_files: u64,
) -> Point {
    let ops = r.ops.max(1) as f64;
    let written = device_write_bytes(c) as f64;
    Point {
        system,
        threads,
        write_size,
        ops_per_sec: r.ops as f64 / secs,
        mbps: r.bytes as f64 / secs / 1e6,
        sync: LatStats::of(&r.lat),
        device_mbps: written / secs / 1e6,
        blocks_per_op: written / 4096.0 / ops,
        mmio_per_op: c.kind(EventKind::MmioWrite).ops as f64 / ops,
        ordering_mmio_per_op: c.get(EventKind::MmioWrite, ORDERING_QUEUE).ops as f64 / ops,
        irqs_per_op: c.kind(EventKind::Msix).ops as f64 / ops,
        extra_files,
        redirected_per_op: 0.0,
        committed_per_op: 0.0,
        shadowed_per_op: 0.0,
        frozen_per_op: 0.0,
        p_area_blocks: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same inputs, same simulated result.
    #[test]
    fn a_point_is_deterministic() {
        let ssd = SsdProfile::optane_905p();
        let base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
        let span = Span {
            warmup: SimDuration::from_us(100),
            length: SimDuration::from_us(400),
        };
        let run = || measure(System::Mqfs, &ssd, &base, 2, Job::new(4096), span).unwrap();
        let (a, b) = (run(), run());
        assert!(a.ops_per_sec > 0.0);
        assert_eq!(a.sync, b.sync);
        assert_eq!(a.ops_per_sec, b.ops_per_sec);
        assert_eq!(a.blocks_per_op, b.blocks_per_op);
    }

    /// The paper's FIO jobs: one file per thread, preallocated past what
    /// the run can write; a diagnostic layout pads each thread's files to
    /// whole inode-table blocks, but only the file it writes is
    /// preallocated; a rotation writes as many files as its bound needs.
    #[test]
    fn each_thread_appends_to_one_file_that_never_runs_out() {
        let span = Span::ms(5, 10);
        for threads in [1, 24] {
            let job = Job::new(4096);
            let bound = appends_bound(span, &job, threads);
            let plan = FilePlan::new(span, &job, threads);
            assert_eq!((plan.used, plan.pool), (1, 1));
            assert!(plan.per_file >= bound);
            let padded = Job {
                layout: Layout::PerThread,
                ..job
            };
            let plan = FilePlan::new(span, &padded, threads);
            let table = mqfs::layout::INODES_PER_BLOCK as usize;
            assert_eq!((plan.used, plan.pool), (1, table));
            let rotating = Job {
                appends_per_file: Some(6),
                ..job
            };
            let plan = FilePlan::new(span, &rotating, threads);
            assert_eq!((plan.per_file, plan.used), (6, bound.div_ceil(6)));
        }
    }

    /// FIO's layout: in a preallocated file an append converts an
    /// unwritten extent, so MQFS's transaction holds the data, the inode
    /// table's copy and JH; an allocating append adds the block bitmap.
    #[test]
    fn a_preallocated_append_journals_no_bitmap() {
        let ssd = SsdProfile::optane_905p();
        let base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
        let span = Span {
            warmup: SimDuration::from_us(100),
            length: SimDuration::from_ms(3),
        };
        let pre = measure(System::Mqfs, &ssd, &base, 1, Job::new(4096), span).unwrap();
        let alloc = measure(System::Mqfs, &ssd, &base, 1, Job::allocating(4096), span).unwrap();
        // The window's edges cut at most one transaction's 3 blocks from
        // the blocks of its operations.
        let ops = pre.ops_per_sec * span.length.as_secs_f64();
        assert!(ops > 60.0, "{ops} operations in the window");
        // (1e-9: a window that cuts exactly one transaction lands on the
        // bound, up to rounding.)
        assert!(
            (pre.blocks_per_op - 3.0).abs() <= 3.0 / ops + 1e-9,
            "{} over {ops}",
            pre.blocks_per_op
        );
        assert!(alloc.blocks_per_op > 3.5, "{}", alloc.blocks_per_op);
        assert_eq!(pre.extra_files, 0);
    }
}
