//! A RocksDB-like `db_bench fillsync`: writer threads put 16-byte keys with
//! 1 KiB values into one database whose write-ahead log is appended and
//! synced (fdatasync, RocksDB's default `use_fsync = false`) for every
//! write. Writers that arrive while a log write is in progress join the
//! next write group, whose leader appends the group's records in one write
//! and syncs once (RocksDB's group commit); every writer then inserts into
//! the memtable on its own core. When the memtable is full the log is
//! switched to a new file and a background thread (on the spare core)
//! writes the memtable as an SST file, syncs it, appends a MANIFEST record
//! and syncs it, and deletes the old log. Compaction is not modelled.
//!
//! A log file is preallocated when created, as RocksDB's `allow_fallocate`
//! does ([`preallocate_wal`]): appends convert unwritten blocks and grow
//! the size.
//!
//! Model inputs (not results): the CPU cost of one put outside the file
//! system ([`Params::put_cpu`]), and the memtable size, scaled down from
//! RocksDB's 64 MiB so that flushes happen within a run of milliseconds.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use mqfs::{Ctx, Fs, FsError, Ino};
use nvme_ctrl::SsdProfile;
use pcie_sim::{SimDuration, SimTime};
use tokio::sync::Notify;

use super::common::{
    block_on, device_write_bytes, mean, run_window, BenchResult, LatStats, Rig, Span, System,
};

/// Bytes a put adds to the log: record header (checksum, length, type: 7),
/// write-batch header (sequence, count: 12), value type (1), varint key
/// length (1), key (16), varint value length (2), value (1024).
pub const RECORD_BYTES: usize = 7 + 12 + 1 + 1 + 16 + 2 + 1024;

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Writer threads (the paper's 24).
    pub threads: usize,
    /// CPU time of one put outside the file system: write-batch encoding,
    /// the write-group protocol and the skiplist insert of a 1 KiB value.
    /// 2 us, the order of db_bench fillrandom per put with the log disabled
    /// on a Haswell-era core (an assumption of this model, not a paper
    /// number).
    pub put_cpu: SimDuration,
    /// Memtable size (RocksDB's default is 64 MiB).
    pub memtable_bytes: u64,
    /// Simulated time.
    pub span: Span,
}

impl Params {
    /// The full run.
    pub fn full() -> Params {
        Params {
            threads: 24,
            put_cpu: SimDuration::from_us(2),
            memtable_bytes: 1 << 20,
            span: Span::ms(5, 20),
        }
    }

    /// A smoke test.
    pub fn quick() -> Params {
        Params {
            threads: 4,
            span: Span::ms(1, 2),
            ..Params::full()
        }
    }
}

/// Result of one run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Puts per second.
    pub ops_per_sec: f64,
    /// Latency of a put (queueing for the group included).
    pub put: LatStats,
    /// Log syncs per second (write groups).
    pub syncs_per_sec: f64,
    /// A write group's log sync (the leader's fdatasync), us.
    pub sync_us: f64,
    /// Memtable flushes started in the window.
    pub flushes: u64,
    /// Device write traffic, MB/s.
    pub device_mbps: f64,
    /// Kernel CPU utilization: the file system and the driver, their
    /// stores, fences and uncached reads, and wake-ups, as a fraction of
    /// all cores' time (the machine's accounting, not a model input).
    pub kernel_cpu: f64,
    /// User CPU utilization: the puts' own work ([`Params::put_cpu`]).
    pub user_cpu: f64,
}

/// The log and its group commit.
struct Wal {
    ino: Cell<Ino>,
    off: Cell<u64>,
    number: Cell<u64>,
    /// Writers waiting for the next group: their done flags.
    queue: RefCell<Vec<Rc<Cell<bool>>>>,
    leader: Cell<bool>,
    done: Notify,
    /// Bytes in the current memtable.
    memtable: Cell<u64>,
    /// When each group's sync returned, and how long it took.
    syncs: RefCell<Vec<(SimTime, SimDuration)>>,
    /// When each memtable flush started.
    flushes: RefCell<Vec<SimTime>>,
}

/// The background flush: SST, its sync, a MANIFEST record, the old log.
async fn flush(
    fs: Rc<Fs>,
    ctx: Ctx,
    dir: Ino,
    manifest: Ino,
    old_log: u64,
    bytes: u64,
) -> Result<(), FsError> {
    let sst = fs
        .create(ctx, dir, &format!("{old_log:06}.sst"), 0o644)
        .await?
        .ino;
    let chunk = vec![0x33u8; 1 << 20];
    let mut off = 0u64;
    while off < bytes {
        let n = (bytes - off).min(chunk.len() as u64) as usize;
        fs.write(ctx, sst, off, &chunk[..n]).await?;
        off += n as u64;
    }
    fs.fsync(ctx, sst).await?;
    let size = fs.getattr(ctx, manifest).await?.size;
    fs.write(ctx, manifest, size, &[0x4du8; 128]).await?;
    fs.fsync(ctx, manifest).await?;
    fs.unlink(ctx, dir, &format!("{old_log:06}.log")).await
}

impl Wal {
    /// Leads one group: appends the queued records, syncs, marks them
    /// done, and switches the memtable when full.
    async fn lead(&self, fs: &Rc<Fs>, ctx: Ctx, env: &Env) -> Result<(), FsError> {
        self.leader.set(true);
        let group = std::mem::take(&mut *self.queue.borrow_mut());
        let bytes = group.len() * RECORD_BYTES;
        let r = async {
            fs.write(ctx, self.ino.get(), self.off.get(), &vec![0x6cu8; bytes])
                .await?;
            self.off.set(self.off.get() + bytes as u64);
            let t0 = fs.machine().sim().now();
            fs.fdatasync(ctx, self.ino.get()).await?;
            Ok::<_, FsError>(fs.machine().sim().now() - t0)
        }
        .await;
        for g in &group {
            g.set(true);
        }
        if let Ok(took) = r {
            self.syncs.borrow_mut().push((fs.machine().sim().now(), took));
        }
        self.memtable.set(self.memtable.get() + bytes as u64);
        if r.is_ok() && self.memtable.get() >= env.memtable_bytes {
            let old = self.number.get();
            let next = old + 1;
            let ino = fs
                .create(ctx, env.dir, &format!("{next:06}.log"), 0o644)
                .await?
                .ino;
            preallocate_wal(fs, ctx, ino, env.memtable_bytes).await?;
            self.ino.set(ino);
            self.off.set(0);
            self.number.set(next);
            let full = self.memtable.replace(0);
            self.flushes.borrow_mut().push(fs.machine().sim().now());
            let (fs2, dir, manifest, core) = (fs.clone(), env.dir, env.manifest, env.flush_core);
            fs.machine().sim().spawn(async move {
                // A failed flush only loses the flush; the puts are durable.
                let _ = flush(fs2, Ctx::on(core), dir, manifest, old, full).await;
            });
        }
        self.leader.set(false);
        self.done.notify_waiters();
        r.map(|_| ())
    }
}

/// RocksDB preallocates a log file's space before appending to it
/// (`allow_fallocate`, default true: `PosixWritableFile::Allocate` calls
/// fallocate(2) with `FALLOC_FL_KEEP_SIZE`, in blocks of
/// `DBImpl::GetWalPreallocateBlockSize`, 1.1 times the write buffer):
/// the log's appends then write into unwritten extents and change its
/// size, not its allocation.
async fn preallocate_wal(fs: &Fs, ctx: Ctx, ino: Ino, memtable_bytes: u64) -> Result<(), FsError> {
    let block = memtable_bytes + memtable_bytes / 10;
    fs.fallocate(ctx, ino, mqfs::FallocMode::KeepSize, 0, block).await
}

/// What the writers share besides the log.
#[derive(Clone, Copy)]
struct Env {
    dir: Ino,
    manifest: Ino,
    flush_core: usize,
    memtable_bytes: u64,
}

/// One put: join a group (leading it if no group is being written), wait
/// for it to be durable, then insert into the memtable.
async fn put(fs: &Rc<Fs>, ctx: Ctx, wal: &Wal, env: &Env, cpu: SimDuration) -> Result<(), FsError> {
    let me = Rc::new(Cell::new(false));
    wal.queue.borrow_mut().push(me.clone());
    while !me.get() {
        if wal.leader.get() {
            wal.done.notified().await;
        } else {
            wal.lead(fs, ctx, env).await?;
        }
    }
    let core = fs.machine().core(ctx.core).map_err(FsError::from)?;
    core.user(cpu).await;
    Ok(())
}

/// Runs the workload with `system` on `ssd`.
pub fn measure(system: System, ssd: &SsdProfile, p: &Params) -> BenchResult<Outcome> {
    measure_with(system, ssd, p, |_| {})
}

/// [`measure`] with the file system's profile changed by `tune` (side
/// experiments).
pub fn measure_with(
    system: System,
    ssd: &SsdProfile,
    p: &Params,
    tune: impl FnOnce(&mut mqfs::FsProfile),
) -> BenchResult<Outcome> {
    let mut rig = Rig::new(system.mode(), ssd.clone(), p.threads);
    tune(&mut rig.fs);
    let flush_core = rig.commit_core();
    let t = rig.build()?;
    let fs = t.fs.clone();
    let memtable = p.memtable_bytes;
    let (dir, manifest, log) = block_on(&t, async move {
        let ctx = Ctx::on(0);
        let dir = fs.mkdir_path(ctx, "/db").await?.ino;
        let manifest = fs.create(ctx, dir, "MANIFEST-000001", 0o644).await?.ino;
        let log = fs.create(ctx, dir, "000001.log", 0o644).await?.ino;
        preallocate_wal(&fs, ctx, log, memtable).await?;
        fs.sync(ctx).await?;
        Ok((dir, manifest, log))
    })?;
    let wal = Rc::new(Wal {
        ino: Cell::new(log),
        off: Cell::new(0),
        number: Cell::new(1),
        queue: RefCell::new(Vec::new()),
        leader: Cell::new(false),
        done: Notify::new(),
        memtable: Cell::new(0),
        syncs: RefCell::new(Vec::new()),
        flushes: RefCell::new(Vec::new()),
    });
    let env = Env {
        dir,
        manifest,
        flush_core,
        memtable_bytes: p.memtable_bytes,
    };
    let lat = Rc::new(RefCell::new(Vec::new()));
    let cpu = p.put_cpu;
    let measured = run_window(&t, p.threads, p.span, |i, w| {
        let (fs, sim, wal, lat) = (t.fs.clone(), t.machine.sim(), wal.clone(), lat.clone());
        async move {
            let ctx = Ctx::on(i);
            while sim.now() < w.end {
                let t0 = sim.now();
                put(&fs, ctx, &wal, &env, cpu).await?;
                let t1 = sim.now();
                if w.contains(t1) {
                    lat.borrow_mut().push((t1 - t0).as_ps());
                }
            }
            Ok(())
        }
    })?;
    let (kernel_cpu, user_cpu) = measured.cpu_utilization();
    let (window, counters) = (measured.window, measured.counters);
    let secs = window.secs();
    let put = LatStats::of(&lat.borrow());
    let n = put.n as u64;
    let within =
        |v: &RefCell<Vec<SimTime>>| v.borrow().iter().filter(|t| window.contains(**t)).count() as u64;
    // The log syncs that returned in the window, each's duration in us.
    let syncs: Vec<f64> = wal
        .syncs
        .borrow()
        .iter()
        .filter(|(t, _)| window.contains(*t))
        .map(|(_, d)| d.as_us_f64())
        .collect();
    Ok(Outcome {
        ops_per_sec: n as f64 / secs,
        put,
        syncs_per_sec: syncs.len() as f64 / secs,
        sync_us: mean(&syncs),
        flushes: within(&wal.flushes),
        device_mbps: device_write_bytes(&counters) as f64 / secs / 1e6,
        kernel_cpu,
        user_cpu,
    })
}
