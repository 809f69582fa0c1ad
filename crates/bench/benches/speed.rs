//! The simulator's own speed, in wall time (criterion):
//!
//! - `fsync_4k/{mq,classic}`: simulated 4 KiB append + fsync operations
//!   per wall-second, on a file system of that mode on the Optane 905P
//!   profile (one core, one thread; the file system is built outside the
//!   timed part);
//! - `bus_events/*`: trace events (TLPs, write-combining stores, device
//!   events) simulated per wall-second, both for the synthetic PCIe stream
//!   of `pcie-sim`'s `bus_events` bench and for the whole stack running
//!   the mq fsync loop above;
//! - `crash_states/generic_035_classic`: crash states explored and checked
//!   (recovery, fsck, oracle) per wall-second by `crashfuzz::explore`, the
//!   recording included, on every core of the machine.
//!
//! Each element count is measured once before timing; the runs are
//! deterministic, so every iteration does the same work.

use std::time::Duration;

use crashfuzz::{ExploreOptions, ModeName, RunConfig};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mqfs::testing::{new_fs, TestFs};
use mqfs::{Ctx, Mode};
use nvme_ctrl::SsdProfile;
use pcie_sim::{BarKind, Executor, Machine, MachineProfile, Purpose, SimDuration, TraceMode};

/// Appends + fsyncs per timed iteration.
const FSYNCS: u64 = 200;
/// Rounds of the synthetic bus stream per timed iteration.
const STREAM_ROUNDS: u64 = 20_000;

/// A fresh file system of `mode` with an empty `/f`; returns it and the
/// file's inode.
fn fresh(mode: Mode) -> (TestFs, mqfs::Ino) {
    let t = new_fs(mode, SsdProfile::optane_905p(), 65536, 1).expect("mkfs and mount");
    let fs = t.fs.clone();
    let ino =
        t.ex.block_on(async move { fs.create_path(Ctx::on(0), "/f").await })
            .expect("the simulation finishes")
            .expect("create /f")
            .ino;
    (t, ino)
}

/// Appends `FSYNCS` 4 KiB blocks to the file, each followed by fsync.
/// Returns the file system (dropped outside the timed part) and the bus
/// events simulated.
fn fsync_loop((t, ino): (TestFs, mqfs::Ino)) -> (TestFs, u64) {
    let events = t.machine.trace().len();
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let block = [0x5au8; 4096];
        for i in 0..FSYNCS {
            fs.write(c, ino, i * 4096, &block).await.expect("append");
            fs.fsync(c, ino).await.expect("fsync");
        }
    })
    .expect("the simulation finishes");
    let events = t.machine.trace().len() - events;
    (t, events)
}

/// The synthetic stream of `pcie-sim`'s `bus_events` bench: a device
/// streaming 256-byte DMA writes with an MSI-X every 8, and a core storing
/// 64-byte entries to the PMR with a fence every 4. Returns the number of
/// trace events.
fn bus_stream(mode: TraceMode, rounds: u64) -> u64 {
    let ex = Executor::new(1);
    let m = Machine::new(&ex, MachineProfile::default(), mode);
    let dev = pcie_sim::testing::RegisterFile::attach(&m, Some(2 << 20), None);
    let pmr = m.bar(0, BarKind::Pmr).expect("the device has a PMR");
    let buf = m.memory().alloc(1 << 20).expect("1 MiB of host memory");
    let port = dev.port.clone();
    let sim = m.sim();
    let s2 = sim.clone();
    sim.spawn(async move {
        let data = [0x11u8; 256];
        for i in 0..rounds {
            port.dma_write(buf.bus() + (i % 4096) * 256, &data, Purpose::DataBlock, 0)
                .expect("DMA into host memory");
            if i % 8 == 7 {
                port.msix(0, 0);
            }
            s2.sleep(SimDuration::from_ns(70)).await;
        }
    });
    let core = m.core(0).expect("core 0");
    sim.spawn(async move {
        let entry = [0x22u8; 64];
        for i in 0..rounds {
            core.wc_store(pmr + (i % 32768) * 64, &entry, Purpose::QueueEntry, 0)
                .await
                .expect("store to the PMR");
            if i % 4 == 3 {
                core.mfence().await.expect("fence");
            }
        }
    });
    ex.run();
    let n = m.trace().len();
    n
}

fn fsyncs(c: &mut Criterion) {
    let mut g = c.benchmark_group("fsync_4k");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(FSYNCS));
    for mode in [Mode::Mq, Mode::Classic] {
        g.bench_function(mode.name(), |b| {
            b.iter_batched(|| fresh(mode), fsync_loop, BatchSize::PerIteration)
        });
    }
    g.finish();
}

fn bus_events(c: &mut Criterion) {
    let mut g = c.benchmark_group("bus_events");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let stream = bus_stream(TraceMode::Off, STREAM_ROUNDS);
    g.throughput(Throughput::Elements(stream));
    g.bench_function("pcie_stream_no_trace", |b| {
        b.iter(|| bus_stream(TraceMode::Off, STREAM_ROUNDS))
    });
    g.bench_function("pcie_stream_full_trace", |b| {
        b.iter(|| bus_stream(TraceMode::Full, STREAM_ROUNDS))
    });
    let (_, stack) = fsync_loop(fresh(Mode::Mq));
    g.throughput(Throughput::Elements(stack));
    g.bench_function("mq_fsync_stack", |b| {
        b.iter_batched(|| fresh(Mode::Mq), fsync_loop, BatchSize::PerIteration)
    });
    g.finish();
}

fn crash_states(c: &mut Criterion) {
    let w = crashfuzz::builtin::by_name("generic_035")
        .and_then(|v| v.into_iter().next())
        .expect("generic_035 is a built-in workload");
    let cfg = RunConfig::new(ModeName::Classic, SsdProfile::optane_905p(), 1);
    let opts = ExploreOptions::default();
    let explore = || crashfuzz::explore(&w, &cfg, &opts, "generic_035").expect("exploration runs");
    let first = explore();
    assert!(
        first.violations.is_empty(),
        "classic holds on generic_035: {first:?}"
    );
    eprintln!(
        "crash_states: generic_035 on classic: {} crash points, {} states allowed, {} checked, \
         {} deduplicated, {} jobs (one element = one state checked)",
        first.crash_points, first.states_total, first.states_checked, first.states_deduplicated, opts.jobs
    );
    let mut g = c.benchmark_group("crash_states");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(first.states_checked));
    g.bench_function("generic_035_classic", |b| b.iter(|| explore().states_checked));
    g.finish();
}

criterion_group!(benches, fsyncs, bus_events, crash_states);
criterion_main!(benches);
