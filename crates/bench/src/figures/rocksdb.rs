//! A RocksDB-like `db_bench fillsync`: writer threads put 16-byte keys with
//! 1 KiB values into one database whose write-ahead log is appended and
//! synced (fdatasync, RocksDB's default `use_fsync = false`) for every
//! write. Writers that arrive while a log write is in progress join the
//! next write group, whose leader appends the group's records in one write
//! and syncs once (RocksDB's group commit); the group's writers then insert
//! into the memtable in parallel, each on its own core, and the last to
//! finish hands the log to the next group's leader and completes the others
//! (RocksDB's default `allow_concurrent_memtable_write` without
//! `enable_pipelined_write`: `WriteThread::LaunchParallelMemTableWriters`,
//! `CompleteParallelMemTableWriter`, `ExitAsBatchGroupLeader`). A writer
//! waits as RocksDB's write thread does ([`WriteThreadWait`]): it spins,
//! then yields the core in a loop for up to 100 us, then sleeps on a
//! condition variable. When the memtable is full the log is
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
    block_on, device_write_bytes, mean, run_window, BenchResult, LatStats, Rig, Rng, Span, System,
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
    /// CPU time of one put outside the file system and the write thread's
    /// waits ([`WriteThreadWait`]): write-batch encoding and the skiplist
    /// insert of a 1 KiB value.
    /// 2 us, the order of db_bench fillrandom per put with the log disabled
    /// on a Haswell-era core (an assumption of this model, not a paper
    /// number).
    pub put_cpu: SimDuration,
    /// Memtable size (RocksDB's default is 64 MiB).
    pub memtable_bytes: u64,
    /// How a writer waits for its group ([`WriteThreadWait`]).
    pub wait: WriteThreadWait,
    /// RocksDB's `use_direct_io_for_flush_and_compaction` (default false):
    /// the flush writes its SST with O_DIRECT, so the SST leaves no dirty
    /// pages in the page cache.
    pub direct_flush: bool,
    /// Simulated time.
    pub span: Span,
}

/// How a RocksDB writer waits for the write thread to change its state
/// (`WriteThread::AwaitState`, db/write_thread.cc), with `DBOptions`'
/// defaults:
///
/// 1. a busy loop of `spin_iterations` `pause` instructions (user time);
/// 2. unless the wait's adaptation context has lost its credit, a loop of
///    `sched_yield` calls for up to `max_yield` (`enable_write_thread_adaptive_yield`,
///    on by default), each a system call that finds nothing else to run on
///    the writer's core and returns (kernel time: the file system's
///    [`fsapi::CpuCosts::syscall`]) followed by a clock read in user
///    space (`clock_read`); three yields slower than `slow_yield`
///    end it early. A wait sampled one time in 256, or ended by slow yields,
///    moves the context's credit up if the yields reached the state and
///    down if they timed out (RocksDB's `yield_credit`, decayed by 1/1024
///    per update);
/// 3. else it sleeps on the writer's condition variable: the writer that
///    changes its state pays a `FUTEX_WAKE` system call, and the sleeper is
///    woken and switched in on its core (the driver's wake-up cost,
///    `ccnvme::DriverProfile::wakeup`).
///
/// So a writer whose group is short-lived burns its core yielding, and one
/// whose waits outlast `max_yield` sleeps (and pays the wake-up on the
/// group's critical path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteThreadWait {
    /// Iterations of the first busy loop (200).
    pub spin_iterations: u32,
    /// One iteration: "about 7 nanoseconds" on a Xeon (write_thread.cc).
    pub pause: SimDuration,
    /// `write_thread_max_yield_usec`: 100 us; zero turns the yield loop
    /// off (`enable_write_thread_adaptive_yield = false`).
    pub max_yield: SimDuration,
    /// `write_thread_slow_yield_usec`: 3 us.
    pub slow_yield: SimDuration,
    /// The user-space part of one yield iteration: a
    /// `std::chrono::steady_clock::now()`, which Linux answers in the vDSO
    /// without entering the kernel (a TSC read and its scaling; about 20 ns
    /// on a Haswell core, an estimate).
    pub clock_read: SimDuration,
}

impl Default for WriteThreadWait {
    fn default() -> Self {
        WriteThreadWait {
            spin_iterations: 200,
            pause: SimDuration::from_ns(7),
            max_yield: SimDuration::from_us(100),
            slow_yield: SimDuration::from_us(3),
            clock_read: SimDuration::from_ns(20),
        }
    }
}

/// Slow yields that end the yield loop (`kMaxSlowYieldsWhileSpinning`).
const MAX_SLOW_YIELDS: u32 = 3;
/// One in this many waits updates the yield credit (`sampling_base`).
const CREDIT_SAMPLING: u64 = 256;
/// A credit update's step (RocksDB's 131072).
const CREDIT_STEP: i64 = 131_072;
/// Pause iterations between two looks at the state in the simulation (the
/// busy loop looks after each; the model looks every 20, 0.14 us).
const SPIN_CHUNK: u32 = 20;

impl Params {
    /// The full run.
    pub fn full() -> Params {
        Params {
            threads: 24,
            put_cpu: SimDuration::from_us(2),
            memtable_bytes: 1 << 20,
            wait: WriteThreadWait::default(),
            direct_flush: false,
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

/// A writer's state in the write thread (db/write_thread.h `Writer::state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Linked to the write queue, waiting.
    Init,
    /// Leads the next group (`STATE_GROUP_LEADER`).
    GroupLeader,
    /// Its group's log is durable: insert into the memtable
    /// (`STATE_PARALLEL_MEMTABLE_WRITER`).
    MemtableWriter,
    /// Its put is done (`STATE_COMPLETED`).
    Completed,
}

/// One writer of the write thread.
struct Writer {
    state: Cell<State>,
    /// Sleeping on its condition variable (`STATE_LOCKED_WAITING`).
    asleep: Cell<bool>,
    changed: Notify,
}

impl Writer {
    fn new(state: State) -> Rc<Writer> {
        Rc::new(Writer {
            state: Cell::new(state),
            asleep: Cell::new(false),
            changed: Notify::new(),
        })
    }
}

/// What a writer's wait costs, from the rig's profiles.
#[derive(Clone, Copy)]
struct WaitCosts {
    params: WriteThreadWait,
    /// A system call (`sched_yield`, `FUTEX_WAKE`).
    syscall: SimDuration,
    /// A sleeping writer woken and switched in.
    wakeup: SimDuration,
}

impl WaitCosts {
    /// `params`, with the system call and wake-up of the file system's
    /// profile `fs` (its CPU table and its driver's).
    fn new(params: WriteThreadWait, fs: &mqfs::FsProfile) -> WaitCosts {
        WaitCosts {
            params,
            syscall: fs.cpu.syscall,
            wakeup: fs.driver.wakeup,
        }
    }
}

/// One writer thread's side of the wait: its core, its costs and its
/// random source (RocksDB's thread-local `Random` that samples the credit
/// updates).
struct Waiter {
    core: pcie_sim::Core,
    costs: WaitCosts,
    rng: RefCell<Rng>,
}

impl Waiter {
    /// `WriteThread::AwaitState`: waits until `goal` holds of `w`'s state
    /// (see [`WriteThreadWait`]); `credit` is the call site's adaptation
    /// context.
    async fn await_state(&self, w: &Writer, goal: impl Fn(State) -> bool, credit: &Cell<i64>) -> State {
        let p = self.costs.params;
        let mut spun = 0;
        while spun < p.spin_iterations {
            if goal(w.state.get()) {
                return w.state.get();
            }
            let n = SPIN_CHUNK.min(p.spin_iterations - spun);
            self.core.user(p.pause * u64::from(n)).await;
            spun += n;
        }
        if goal(w.state.get()) {
            return w.state.get();
        }
        if p.max_yield > SimDuration::ZERO {
            let mut update = self.rng.borrow_mut().below(CREDIT_SAMPLING) == 0;
            if update || credit.get() >= 0 {
                let begin = self.core.now();
                let mut iter = begin;
                let mut slow = 0;
                let mut reached = false;
                while iter - begin <= p.max_yield {
                    self.core.busy(self.costs.syscall).await;
                    if goal(w.state.get()) {
                        reached = true;
                        break;
                    }
                    self.core.user(p.clock_read).await;
                    let now = self.core.now();
                    if now - iter >= p.slow_yield {
                        slow += 1;
                        if slow >= MAX_SLOW_YIELDS {
                            update = true;
                            break;
                        }
                    }
                    iter = now;
                }
                if update {
                    let c = credit.get();
                    credit.set(c - c / 1024 + if reached { CREDIT_STEP } else { -CREDIT_STEP });
                }
                if reached {
                    return w.state.get();
                }
            }
        }
        w.asleep.set(true);
        while !goal(w.state.get()) {
            w.changed.notified().await;
        }
        w.asleep.set(false);
        self.core.wake_up(self.costs.wakeup).await;
        w.state.get()
    }

    /// `WriteThread::SetState`: a sleeping writer costs the setter a
    /// `FUTEX_WAKE`.
    async fn set_state(&self, w: &Writer, s: State) {
        if w.asleep.get() {
            self.core.busy(self.costs.syscall).await;
        }
        w.state.set(s);
        w.changed.notify_one();
    }
}

/// The log and its write thread.
struct Wal {
    ino: Cell<Ino>,
    off: Cell<u64>,
    number: Cell<u64>,
    /// Writers linked to the write queue and not in a group yet, oldest
    /// first.
    queue: RefCell<Vec<Rc<Writer>>>,
    /// A group holds the log (from its leader's election until it exits).
    active: Cell<bool>,
    /// The group holding the log, its leader first.
    group: RefCell<Vec<Rc<Writer>>>,
    /// Of that group, the writers still inserting into the memtable.
    inserting: Cell<usize>,
    /// Yield credit of the wait to join a group (`jbg_ctx`).
    join_credit: Cell<i64>,
    /// Yield credit of the wait for the group's other inserts (`cpmtw_ctx`).
    complete_credit: Cell<i64>,
    /// Bytes in the current memtable.
    memtable: Cell<u64>,
    /// When each group's sync returned, and how long it took.
    syncs: RefCell<Vec<(SimTime, SimDuration)>>,
    /// When each memtable flush started.
    flushes: RefCell<Vec<SimTime>>,
}

/// The background flush: SST, its sync, a MANIFEST record, the old log.
async fn flush(fs: Rc<Fs>, env: Env, old_log: u64, bytes: u64) -> Result<(), FsError> {
    let (ctx, dir, manifest) = (Ctx::on(env.flush_core), env.dir, env.manifest);
    let sst = fs
        .create(ctx, dir, &format!("{old_log:06}.sst"), 0o644)
        .await?
        .ino;
    let chunk = vec![0x33u8; 1 << 20];
    let mut off = 0u64;
    while off < bytes {
        let n = (bytes - off).min(chunk.len() as u64) as usize;
        if env.direct_flush {
            fs.write_direct(ctx, sst, off, &chunk[..n]).await?;
        } else {
            fs.write(ctx, sst, off, &chunk[..n]).await?;
        }
        off += n as u64;
    }
    fs.fsync(ctx, sst).await?;
    let size = fs.getattr(ctx, manifest).await?.size;
    fs.write(ctx, manifest, size, &[0x4du8; 128]).await?;
    fs.fsync(ctx, manifest).await?;
    fs.unlink(ctx, dir, &format!("{old_log:06}.log")).await
}

impl Wal {
    fn new(log: Ino) -> Wal {
        Wal {
            ino: Cell::new(log),
            off: Cell::new(0),
            number: Cell::new(1),
            queue: RefCell::new(Vec::new()),
            active: Cell::new(false),
            group: RefCell::new(Vec::new()),
            inserting: Cell::new(0),
            join_credit: Cell::new(0),
            complete_credit: Cell::new(0),
            memtable: Cell::new(0),
            syncs: RefCell::new(Vec::new()),
            flushes: RefCell::new(Vec::new()),
        }
    }

    /// Leads one group: takes every queued writer into it, appends their
    /// records, syncs, switches the memtable when full, and launches the
    /// group's memtable writers (itself included).
    async fn lead(
        &self,
        fs: &Rc<Fs>,
        ctx: Ctx,
        env: &Env,
        me: &Rc<Writer>,
        w: &Waiter,
    ) -> Result<(), FsError> {
        let group: Vec<Rc<Writer>> = std::iter::once(me.clone())
            .chain(std::mem::take(&mut *self.queue.borrow_mut()))
            .collect();
        let bytes = group.len() * RECORD_BYTES;
        *self.group.borrow_mut() = group.clone();
        let r = async {
            fs.write(ctx, self.ino.get(), self.off.get(), &vec![0x6cu8; bytes])
                .await?;
            self.off.set(self.off.get() + bytes as u64);
            let t0 = fs.machine().sim().now();
            fs.fdatasync(ctx, self.ino.get()).await?;
            Ok::<_, FsError>(fs.machine().sim().now() - t0)
        }
        .await;
        let took = match r {
            Ok(took) => took,
            Err(e) => {
                // The group's puts fail with the log; the next group goes on.
                self.exit(me, w).await;
                return Err(e);
            }
        };
        self.syncs.borrow_mut().push((fs.machine().sim().now(), took));
        self.memtable.set(self.memtable.get() + bytes as u64);
        if self.memtable.get() >= env.memtable_bytes {
            self.switch_memtable(fs, ctx, env).await?;
        }
        self.inserting.set(group.len());
        for g in &group[1..] {
            w.set_state(g, State::MemtableWriter).await;
        }
        Ok(())
    }

    /// A new log for the next memtable, and the full one flushed in the
    /// background.
    async fn switch_memtable(&self, fs: &Rc<Fs>, ctx: Ctx, env: &Env) -> Result<(), FsError> {
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
        let (fs2, env) = (fs.clone(), *env);
        fs.machine().sim().spawn(async move {
            // A failed flush only loses the flush; the puts are durable.
            let _ = flush(fs2, env, old, full).await;
        });
        Ok(())
    }

    /// `CompleteParallelMemTableWriter`: `me` has inserted; the last of the
    /// group to finish exits it, the others wait for that.
    async fn complete_insert(&self, me: &Rc<Writer>, w: &Waiter) {
        let left = self.inserting.get() - 1;
        self.inserting.set(left);
        if left > 0 {
            w.await_state(me, |s| s == State::Completed, &self.complete_credit)
                .await;
        } else {
            self.exit(me, w).await;
        }
    }

    /// `ExitAsBatchGroupLeader`: the first writer queued since the group
    /// formed leads the next one, then every other writer of the group is
    /// completed.
    async fn exit(&self, me: &Rc<Writer>, w: &Waiter) {
        let group = std::mem::take(&mut *self.group.borrow_mut());
        let next = {
            let mut q = self.queue.borrow_mut();
            (!q.is_empty()).then(|| q.remove(0))
        };
        match next {
            Some(n) => w.set_state(&n, State::GroupLeader).await,
            None => self.active.set(false),
        }
        for g in group.iter().rev().filter(|g| !Rc::ptr_eq(g, me)) {
            w.set_state(g, State::Completed).await;
        }
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
    direct_flush: bool,
}

/// One put: join the write queue (leading a group at once if none holds
/// the log), wait for a state, and as leader or memtable writer insert
/// and complete.
async fn put(
    fs: &Rc<Fs>,
    ctx: Ctx,
    wal: &Wal,
    env: &Env,
    cpu: SimDuration,
    w: &Waiter,
) -> Result<(), FsError> {
    let me = if wal.active.replace(true) {
        let me = Writer::new(State::Init);
        wal.queue.borrow_mut().push(me.clone());
        w.await_state(&me, |s| s != State::Init, &wal.join_credit).await;
        me
    } else {
        Writer::new(State::GroupLeader)
    };
    match me.state.get() {
        State::GroupLeader => wal.lead(fs, ctx, env, &me, w).await?,
        State::MemtableWriter => {}
        State::Completed => return Ok(()),
        State::Init => unreachable!("await_state returns once the state left Init"),
    }
    w.core.user(cpu).await;
    wal.complete_insert(&me, w).await;
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
    let wal = Rc::new(Wal::new(log));
    let env = Env {
        dir,
        manifest,
        flush_core,
        memtable_bytes: p.memtable_bytes,
        direct_flush: p.direct_flush,
    };
    let lat = Rc::new(RefCell::new(Vec::new()));
    let cpu = p.put_cpu;
    let costs = WaitCosts::new(p.wait, &rig.fs);
    let measured = run_window(&t, p.threads, p.span, |i, w| {
        let (fs, sim, wal, lat) = (t.fs.clone(), t.machine.sim(), wal.clone(), lat.clone());
        let core = t.machine.core(i);
        async move {
            let ctx = Ctx::on(i);
            let waiter = Waiter {
                core: core.map_err(FsError::from)?,
                costs,
                rng: RefCell::new(Rng::new(i as u64)),
            };
            while sim.now() < w.end {
                let t0 = sim.now();
                put(&fs, ctx, &wal, &env, cpu, &waiter).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_ctrl::SsdProfile;
    use pcie_sim::{CpuStats, TraceMode};

    fn costs(params: WriteThreadWait) -> WaitCosts {
        WaitCosts::new(params, &mqfs::FsProfile::default())
    }

    /// Waits of `waits_us` each, one after another on core 0 with one
    /// credit, the state set from core 1; what core 0 spent on each.
    fn waits(params: WriteThreadWait, waits_us: &[u64]) -> (Vec<CpuStats>, i64) {
        let (ex, m, _ctrl) = mqfs::testing::machine(SsdProfile::optane_905p(), 1024, 2, TraceMode::Off, 1);
        let waits_us = waits_us.to_vec();
        ex.block_on(async move {
            let sim = m.sim();
            let w = Waiter {
                core: m.core(0).unwrap(),
                costs: costs(params),
                rng: RefCell::new(Rng::new(7)),
            };
            let setter = Rc::new(Waiter {
                core: m.core(1).unwrap(),
                costs: costs(params),
                rng: RefCell::new(Rng::new(8)),
            });
            let credit = Cell::new(0);
            let mut spent = Vec::new();
            for us in waits_us {
                let writer = Writer::new(State::Init);
                let (wr, s2, setter) = (writer.clone(), sim.clone(), setter.clone());
                let set = async move {
                    s2.sleep(SimDuration::from_us(us)).await;
                    setter.set_state(&wr, State::Completed).await;
                };
                let before = w.core.stats();
                let t0 = sim.now();
                let h = sim.spawn(set);
                let s = w.await_state(&writer, |s| s == State::Completed, &credit).await;
                assert_eq!(s, State::Completed);
                assert!(
                    sim.now() - t0 >= SimDuration::from_us(us),
                    "returned before the state changed"
                );
                spent.push(w.core.stats().since(before));
                h.await;
            }
            (spent, credit.get())
        })
        .unwrap()
    }

    #[test]
    fn a_short_wait_yields_its_core_and_a_long_one_sleeps() {
        let (spent, _) = waits(WriteThreadWait::default(), &[30, 300]);
        let short = spent[0];
        assert_eq!(short.wakeups, 0, "a 30 us wait ends in the yield loop");
        assert!(
            short.kernel >= SimDuration::from_us(25),
            "its core yields: {:?}",
            short.kernel
        );
        assert!(
            short.user >= SimDuration::from_ns(1_400),
            "it spins first: {:?}",
            short.user
        );
        let long = spent[1];
        assert_eq!(
            long.wakeups, 1,
            "a 300 us wait outlasts the yield loop and sleeps"
        );
        assert!(
            long.kernel >= SimDuration::from_us(95) && long.kernel <= SimDuration::from_us(110),
            "100 us of yields, then the wake-up: {:?}",
            long.kernel
        );
    }

    #[test]
    fn without_the_yield_loop_every_wait_sleeps() {
        let off = WriteThreadWait {
            max_yield: SimDuration::ZERO,
            ..WriteThreadWait::default()
        };
        let (spent, _) = waits(off, &[30]);
        assert_eq!(spent[0].wakeups, 1);
        assert_eq!(spent[0].kernel, costs(off).wakeup, "only the wake-up, no yields");
    }

    #[test]
    fn waits_that_outlast_the_yield_loop_take_its_credit_away() {
        let (spent, credit) = waits(WriteThreadWait::default(), &[300; 1200]);
        assert!(credit < 0, "sampled timed-out waits lower the credit: {credit}");
        let yielded = |s: &&CpuStats| s.kernel > SimDuration::from_us(50);
        let late = spent[600..].iter().filter(yielded).count();
        assert!(
            spent[..1].iter().filter(yielded).count() == 1,
            "the first wait yields"
        );
        assert!(
            late < 20,
            "once the credit is negative only sampled waits yield: {late} of 600"
        );
    }

    #[test]
    fn writers_share_log_syncs_and_hand_the_log_on() {
        let p = Params {
            threads: 8,
            ..Params::quick()
        };
        for system in [System::Mqfs, System::Ext4] {
            let o = measure(system, &SsdProfile::optane_905p(), &p).unwrap();
            assert!(o.ops_per_sec > 0.0, "{system:?}: puts complete");
            assert!(
                o.syncs_per_sec * 2.0 < o.ops_per_sec,
                "{system:?}: groups of several puts share a sync: {} syncs, {} puts",
                o.syncs_per_sec,
                o.ops_per_sec
            );
        }
    }
}
