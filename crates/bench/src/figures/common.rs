//! What every figure shares: the compared systems, building a machine with a
//! mounted file system, running simulated threads for a window of simulated
//! time, and latency statistics.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use ccnvme::horae::Submitters;
use mqfs::testing::{format_and_mount, format_and_mount_striped, machine, machine_with_drives, TestFs};
use mqfs::{probe_options_for, StripeOptions};
use mqfs::{Ctx, Fs, FsError, FsProfile, Ino, MkfsOptions, Mode};
use nvme_ctrl::Drive;
use nvme_ctrl::SsdProfile;
use nvme_spec::traffic;
use pcie_sim::{Counters, CpuStats, EventKind, SimDuration, SimTime, TraceMode};

/// An error of a figure run: the crate's one error type.
pub use crate::Error as BenchError;

/// Result of a figure run.
pub type BenchResult<T> = Result<T, BenchError>;

/// A compared system: a file-system mode and the sync primitive its
/// benchmark calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// Ext4 with JBD2 (`classic`), fsync.
    Ext4,
    /// HoraeFS (`horae`), fsync.
    HoraeFs,
    /// Ext4 without a journal (`none`), fsync.
    Ext4Nj,
    /// MQFS on ccNVMe (`mq`), fsync.
    Mqfs,
    /// MQFS on ccNVMe (`mq`), fdataatomic: atomicity without waiting for
    /// durability.
    MqfsA,
    /// Ext4 mounted `nobarrier` (`classic`, [`FsProfile::barrier`] off),
    /// fsync: HoRAE 6.1's ext4-OD, ordering without durability.
    Ext4Od,
    /// HoraeFS (`horae`), fbarrier: HoRAE 6.3's HFS ordering.
    HoraeFsOd,
}

impl System {
    /// The systems of Figure 11, in the paper's legend order.
    pub const ALL: [System; 5] = [
        System::Ext4,
        System::HoraeFs,
        System::Ext4Nj,
        System::Mqfs,
        System::MqfsA,
    ];

    /// The four file systems of Figure 12 (durable sync only).
    pub const DURABLE: [System; 4] = [System::Ext4, System::HoraeFs, System::Ext4Nj, System::Mqfs];

    /// The paper's name.
    pub fn label(self) -> &'static str {
        match self {
            System::Ext4 => "Ext4",
            System::HoraeFs => "HoraeFS",
            System::Ext4Nj => "Ext4-NJ",
            System::Mqfs => "MQFS",
            System::MqfsA => "MQFS-A",
            System::Ext4Od => "Ext4-OD",
            System::HoraeFsOd => "HFS-OD",
        }
    }

    /// The file-system mode it runs.
    pub fn mode(self) -> Mode {
        match self {
            System::Ext4 | System::Ext4Od => Mode::Classic,
            System::HoraeFs | System::HoraeFsOd => Mode::Horae,
            System::Ext4Nj => Mode::None,
            System::Mqfs | System::MqfsA => Mode::Mq,
        }
    }

    /// The file-system profile it runs with, from `base`: Ext4-OD's
    /// `nobarrier` mount.
    pub fn profile(self, base: &FsProfile) -> FsProfile {
        FsProfile {
            barrier: base.barrier && self != System::Ext4Od,
            ..base.clone()
        }
    }

    /// The sync after an append: fsync, fdataatomic for MQFS-A, fbarrier
    /// for HFS-OD.
    pub async fn sync(self, fs: &Fs, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        match self {
            System::MqfsA => fs.fdataatomic(ctx, ino).await,
            System::HoraeFsOd => fs.fbarrier(ctx, ino).await,
            _ => fs.fsync(ctx, ino).await,
        }
    }
}

/// What machine and file system to build.
#[derive(Clone, Debug)]
pub struct Rig {
    /// File-system mode.
    pub mode: Mode,
    /// The drive.
    pub ssd: SsdProfile,
    /// File-system costs and `mq` switches.
    pub fs: FsProfile,
    /// Benchmark threads; the machine gets one more core (see [`Rig::cores`]).
    pub threads: usize,
    /// Device size in 4 KiB blocks.
    pub blocks: u64,
    /// Executor seed.
    pub seed: u64,
    /// HoraeFS's p-area in 4 KiB blocks, where the ordering layer
    /// redirects in-place writes (HoRAE 5.4; 6.4 varies its size): `None`
    /// for mkfs's default ([`mqfs::mount::DEFAULT_P_AREA_BLOCKS`], capped at a
    /// sixteenth of the device), `Some(0)` for none (in-place writes go
    /// home). Ignored by the other modes.
    pub p_area_blocks: Option<u64>,
    /// Drives, each of `ssd` and `blocks`: one, or a volume striped over
    /// several (`mqfs::volume`, md's default chunk; HoRAE 6.2 "soft-RAID
    /// 0", Figure 10(c)) for HoraeFS, Ext4 and Ext4-NJ (MQFS runs on one).
    pub drives: u8,
}

/// Default device size: 1 GiB of sparse memory media.
pub const DEVICE_BLOCKS: u64 = 1 << 18;

impl Rig {
    /// A rig of `mode` on `ssd` for `threads` threads with default costs.
    pub fn new(mode: Mode, ssd: SsdProfile, threads: usize) -> Rig {
        Rig {
            mode,
            ssd,
            fs: FsProfile::default(),
            threads,
            blocks: DEVICE_BLOCKS,
            seed: 1,
            p_area_blocks: None,
            drives: 1,
        }
    }

    /// Cores of the machine: one per benchmark thread plus a spare one for
    /// the journal commit thread of `classic` and `horae` (JBD2's
    /// kjournald2), and for `horae` one more for its flush thread
    /// (BarrierFS's, a kernel thread of its own) and one per benchmark
    /// thread for the ordering layer's per-CPU background submitters
    /// (Horae 6.2). The paper's server has 24 cores, so below 24 threads
    /// these threads always found an idle core there too.
    pub fn cores(&self) -> usize {
        let threads = self.threads.max(1);
        threads + 1 + usize::from(self.mode == Mode::Horae) * (1 + threads)
    }

    /// The spare core of the journal commit thread (the first after the
    /// benchmark threads').
    pub fn commit_core(&self) -> usize {
        self.threads.max(1)
    }

    /// Builds the machine, makes the file system and mounts it, as
    /// [`mqfs::testing::new_fs`] does but with this rig's profile; with
    /// several [`Rig::drives`], the file system striped over them (the returned
    /// `ctrl` and `dev` are member 0's; the bench reads the machine's
    /// counters, which cover every drive).
    pub fn build(&self) -> BenchResult<TestFs> {
        let mut profile = self.fs.clone();
        profile.commit_core = self.commit_core();
        if self.mode == Mode::Horae {
            profile.flush_core = Some(profile.commit_core + 1);
            profile.submitters = Some(Submitters {
                first: profile.commit_core + 2,
                count: self.threads.max(1),
            });
        }
        let p_area = self.p_area_blocks;
        let tune = move |o: &mut MkfsOptions| {
            if p_area.is_some() {
                o.p_area_blocks = p_area;
            }
        };
        if self.drives > 1 {
            return self.build_striped(tune, profile);
        }
        let cores = self.cores();
        let (ex, m, ctrl) = machine(self.ssd.clone(), self.blocks, cores, TraceMode::Off, self.seed);
        let mode = self.mode;
        let blocks = self.blocks;
        let m2 = m.clone();
        let (dev, fs) =
            ex.block_on(async move { format_and_mount(&m2, mode, blocks, tune, profile).await })??;
        Ok(TestFs {
            ex,
            machine: m,
            ctrl,
            dev,
            fs,
        })
    }

    /// [`Rig::build`] for the file system striped over [`Rig::drives`] drives (the
    /// `ctrl` and `dev` of the result are member 0's).
    fn build_striped(
        &self,
        tune: impl FnOnce(&mut MkfsOptions) + 'static,
        profile: FsProfile,
    ) -> BenchResult<TestFs> {
        let ds = (0..self.drives)
            .map(|_| Drive::fresh(self.ssd.clone(), self.blocks))
            .collect();
        let (ex, m, mut ctrls) = machine_with_drives(ds, self.cores(), TraceMode::Off, self.seed);
        // The driver as `profile.driver` says (its joint FLUSH at once, or
        // HoRAE 6.3's serialized HFS-SF).
        let probe = probe_options_for(self.mode, &profile);
        let (members, m2, mode) = (self.drives, m.clone(), self.mode);
        let (mut devs, fs) = ex.block_on(async move {
            format_and_mount_striped(&m2, mode, members, probe, StripeOptions::default(), tune, profile).await
        })??;
        let (ctrl, dev) = (ctrls.swap_remove(0), devs.swap_remove(0));
        Ok(TestFs {
            ex,
            machine: m,
            ctrl,
            dev,
            fs,
        })
    }
}

/// Runs `f` to completion in the rig's simulation (set-up steps).
pub fn block_on<T: 'static>(t: &TestFs, f: impl Future<Output = BenchResult<T>> + 'static) -> BenchResult<T> {
    t.ex.block_on(f)?
}

/// Operations one thread completed inside the measured window.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Completed operations (loop iterations).
    pub ops: u64,
    /// Latency of each recorded call, in picoseconds.
    pub lat: Vec<u64>,
    /// Bytes the workload wrote (for bandwidth).
    pub bytes: u64,
}

/// Shared per-run tally that threads add to.
pub type SharedTally = Rc<RefCell<Tally>>;

/// The measured window of simulated time: operations that complete inside
/// it count.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Where measuring starts.
    pub start: SimTime,
    /// Where it ends.
    pub end: SimTime,
}

impl Window {
    /// Its length in seconds.
    pub fn secs(&self) -> f64 {
        (self.end - self.start).as_secs_f64()
    }

    /// Whether an operation that ended at `t` counts.
    pub fn contains(&self, t: SimTime) -> bool {
        t > self.start && t <= self.end
    }
}

/// How long a measured run lasts in simulated time: threads start, run
/// `warmup` unmeasured (queues fill, the journal wraps into its steady
/// state), then `length` measured.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// Unmeasured lead-in.
    pub warmup: SimDuration,
    /// Measured window.
    pub length: SimDuration,
}

impl Span {
    /// A span of `warmup_ms` then `length_ms` milliseconds.
    pub fn ms(warmup_ms: u64, length_ms: u64) -> Span {
        Span {
            warmup: SimDuration::from_ms(warmup_ms),
            length: SimDuration::from_ms(length_ms),
        }
    }
}

/// Spawns one simulated thread per index in `0..threads`, each running
/// `body(index, window)`, runs the simulation through the warm-up and the
/// window, and returns the window with the bus counters and the CPU time
/// over it ([`Measured`]). A thread
/// loops while `now < window.end` and records only what completed inside
/// the window ([`Window::contains`]). The first error of any thread is
/// returned.
pub fn run_window<F, Fut>(t: &TestFs, threads: usize, span: Span, body: F) -> BenchResult<Measured>
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Result<(), FsError>> + 'static,
{
    run_window_with(t, threads, span, || (), body).map(|(m, ..)| m)
}

/// [`run_window`], also reading `snap` (a model counter the bus counters
/// do not hold) at the window's start and at its end.
pub fn run_window_with<F, Fut, S, T>(
    t: &TestFs,
    threads: usize,
    span: Span,
    snap: S,
    body: F,
) -> BenchResult<(Measured, T, T)>
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Result<(), FsError>> + 'static,
    S: Fn() -> T,
{
    let sim = t.machine.sim();
    let start = sim.now() + span.warmup;
    let window = Window {
        start,
        end: start + span.length,
    };
    let error: Rc<RefCell<Option<FsError>>> = Rc::new(RefCell::new(None));
    for i in 0..threads {
        let fut = body(i, window);
        let error = error.clone();
        sim.spawn(async move {
            if let Err(e) = fut.await {
                error.borrow_mut().get_or_insert(e);
            }
        });
    }
    t.ex.run_until(window.start);
    let (before, cpu_before) = (t.machine.counters(), t.machine.cpu_stats());
    let first = snap();
    t.ex.run_until(window.end);
    let last = snap();
    if let Some(e) = error.borrow_mut().take() {
        return Err(BenchError::Fs(e));
    }
    let m = Measured {
        window,
        counters: t.machine.counters().since(&before),
        cpu: t.machine.cpu_stats().since(cpu_before),
        cores: t.machine.core_count(),
    };
    Ok((m, first, last))
}

/// What [`run_window`] measured over its window.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The window.
    pub window: Window,
    /// Bus counters over the window.
    pub counters: Counters,
    /// CPU time of all cores over the window (the machine's accounting,
    /// [`pcie_sim::CpuStats`]).
    pub cpu: CpuStats,
    /// The machine's cores.
    pub cores: usize,
}

impl Measured {
    /// Kernel and user CPU utilization over the window, each a fraction of
    /// all cores' time.
    pub fn cpu_utilization(&self) -> (f64, f64) {
        self.cpu
            .utilization(self.window.end - self.window.start, self.cores)
    }
}

/// Summary of a latency sample (microseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatStats {
    /// Samples.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl LatStats {
    /// Statistics of latencies given in picoseconds.
    pub fn of(ps: &[u64]) -> LatStats {
        if ps.is_empty() {
            return LatStats::default();
        }
        let mut us: Vec<f64> = ps.iter().map(|p| *p as f64 / 1e6).collect();
        us.sort_by(|a, b| a.total_cmp(b));
        let n = us.len();
        let mean = us.iter().sum::<f64>() / n as f64;
        let var = us.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        let pct = |p: f64| us[((n as f64 - 1.0) * p).round() as usize];
        LatStats {
            n,
            mean,
            std: var.sqrt(),
            min: us[0],
            p50: pct(0.5),
            p99: pct(0.99),
            max: us[n - 1],
        }
    }
}

/// Mean of a list (0 for an empty one).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Data-block bytes the device fetched by DMA (what it was asked to write).
pub fn device_write_bytes(c: &Counters) -> u64 {
    c.get(EventKind::DmaReadCompletion, traffic::DATA_BLOCK)
        .payload_bytes
}

/// A small deterministic generator (SplitMix64) for workload choices, one
/// per simulated thread, so a thread's choices do not depend on how the
/// others interleave.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_statistics() {
        let ps: Vec<u64> = (1..=100).map(|us| us * 1_000_000).collect();
        let s = LatStats::of(&ps);
        assert_eq!(s.n, 100);
        assert!((s.mean - 50.5).abs() < 1e-9);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        assert_eq!(s.p50, 51.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(LatStats::of(&[]), LatStats::default());
    }

    #[test]
    fn rng_is_deterministic_per_stream() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut r = Rng::new(7);
        let mut q = Rng::new(8);
        assert_ne!(r.next_u64(), q.next_u64());
        assert_eq!(r.below(0), 0);
        assert!((0..100).all(|_| r.below(10) < 10));
    }
}
