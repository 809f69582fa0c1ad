//! The simulator's own speed, in wall time (criterion):
//!
//! - `fsync_4k/{mq,classic}`: simulated 4 KiB append + fsync operations
//!   per wall-second, on a file system of that mode on the Optane 905P
//!   profile (one core, one thread; the file system is built outside the
//!   timed part); before timing, each mode also prints its speed against
//!   real time: simulated seconds the loop advances per wall-second (the
//!   median of 21 untimed runs, and the best; 1.0 is real time);
//! - `bus_events/mq_fsync_stack`: trace events (TLPs, write-combining
//!   stores, device events) simulated per wall-second by the whole stack
//!   running the mq fsync loop above (the bus alone is `pcie-sim`'s
//!   `bus_events` bench);
//! - `crash_states/generic_035_classic`: crash states explored and checked
//!   (recovery, fsck, oracle) per wall-second by `crashfuzz::explore`, the
//!   recording included, on every core of the machine (the setup before
//!   the workload, mkfs and the setup operations, is cached per process
//!   after the first iteration, as a campaign caches it across its runs).
//!
//! Each element count is measured once before timing; the runs are
//! deterministic, so every iteration does the same work.

use std::time::{Duration, Instant};

use ccnvme_bench::fsync_loop::{self, FSYNCS};
use crashfuzz::explore::DEFAULT_DRIVE_BOUND;
use crashfuzz::{DriveEnumeration, ExploreOptions, ModeName, RunConfig};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mqfs::testing::TestFs;
use mqfs::Mode;
use nvme_ctrl::SsdProfile;

/// A fresh file system of `mode` with an empty `/f`
/// (`ccnvme_bench::fsync_loop::fresh`).
fn fresh(mode: Mode) -> (TestFs, mqfs::Ino) {
    fsync_loop::fresh(mode).expect("mkfs, mount and create /f")
}

/// Appends `FSYNCS` 4 KiB blocks to the file, each followed by fsync
/// (`ccnvme_bench::fsync_loop::run`). Returns the file system (dropped
/// outside the timed part) and the bus events simulated.
fn fsync_loop((t, ino): (TestFs, mqfs::Ino)) -> (TestFs, u64) {
    let run = fsync_loop::run(&t, ino, FSYNCS).expect("the loop runs");
    (t, run.bus_events)
}

/// Runs of the loop the real-time ratio is taken over.
const RATIO_RUNS: usize = 21;

/// Prints how fast `mode`'s fsync loop runs against real time: the
/// simulated time it advances divided by the wall time it takes, the
/// median of `RATIO_RUNS` runs (and the best), and the simulated fsyncs per
/// wall-second the median gives.
fn print_real_time_ratio(mode: Mode) {
    let mut runs: Vec<(f64, f64)> = (0..RATIO_RUNS)
        .map(|_| {
            let (t, ino) = fresh(mode);
            let wall = Instant::now();
            let run = fsync_loop::run(&t, ino, FSYNCS).expect("the loop runs");
            let wall = wall.elapsed().as_secs_f64();
            drop(t);
            (run.simulated_secs, wall)
        })
        .collect();
    // Every run simulates the same time (the runs are deterministic); they
    // differ in wall time only.
    runs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (sim, median) = runs[RATIO_RUNS / 2];
    let best = runs[0].1;
    eprintln!(
        "fsync_4k/{}: {FSYNCS} fsyncs in {:.3} ms simulated, {:.3} ms wall (median of {RATIO_RUNS}; \
         best {:.3}): {:.3} simulated s per wall-s (best {:.3}), {:.0} simulated fsyncs per wall-s, \
         {:.0} fsyncs per simulated s",
        mode.name(),
        sim * 1e3,
        median * 1e3,
        best * 1e3,
        sim / median,
        sim / best,
        FSYNCS as f64 / median,
        FSYNCS as f64 / sim
    );
}

fn fsyncs(c: &mut Criterion) {
    for mode in [Mode::Mq, Mode::Classic] {
        print_real_time_ratio(mode);
    }
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
    // The bus alone (a synthetic DMA and PMR stream) is pcie-sim's own
    // bench, `cargo bench -p pcie-sim --bench bus_events`; this one is the
    // whole stack: every bus event of mq fsyncs through MQFS and ccNVMe.
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
    // Every state up to the bounds is built and checked: this measures
    // checking, which the read-set enumeration (the default) does for far
    // fewer states.
    let opts = ExploreOptions {
        enumeration: DriveEnumeration::Bounded {
            lines: DEFAULT_DRIVE_BOUND,
            blocks: DEFAULT_DRIVE_BOUND,
        },
        ..ExploreOptions::default()
    };
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

/// The allocator the `crashfuzz` binary runs with (its doc says why), so
/// the speeds here are the ones a user sees.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
