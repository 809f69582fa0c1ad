//! A profiling aid: the speed bench's one-thread 4 KiB append + fsync loop
//! (`ccnvme_bench::fsync_loop`, the bench's `fsync_4k`), `ROUNDS` times
//! over (first argument, default 20; second, `mq` or `classic`), each round
//! of 200 fsyncs (or the third argument's number) on a fresh file system as
//! the bench's iterations are. Prints the loop's simulated and wall time
//! (mkfs and mount excluded), its bus events and task polls, and the last
//! round's bus trace hash (a change to the simulator's speed must leave it
//! and the simulated time as they were). Every round's file system is
//! made first, so that a profiler can leave the setup out
//! (`perf record --delay`, past the `setup:` line).

use std::time::Instant;

use ccnvme_bench::fsync_loop::{fresh, run, FSYNCS};
use mqfs::Mode;

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let rounds: u64 = arg(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let mode = match arg(2).as_deref() {
        Some("classic") => Mode::Classic,
        _ => Mode::Mq,
    };
    let fsyncs: u64 = arg(3).and_then(|a| a.parse().ok()).unwrap_or(FSYNCS);
    let setup = Instant::now();
    let machines: Vec<_> = (0..rounds)
        .map(|_| fresh(mode).expect("mkfs, mount and create /f"))
        .collect();
    eprintln!("setup: {:.0} ms", setup.elapsed().as_secs_f64() * 1e3);
    let (mut sim, mut wall, mut events, mut polls, mut hash) = (0.0, 0.0, 0, 0, 0);
    for (t, ino) in &machines {
        let w = Instant::now();
        let r = run(t, *ino, fsyncs).expect("the loop runs");
        wall += w.elapsed().as_secs_f64();
        sim += r.simulated_secs;
        events += r.bus_events;
        polls += r.polls;
        hash = r.trace_hash;
    }
    println!(
        "{} fsyncs ({}): {events} bus events, {polls} task polls, {:.3} ms simulated, {:.3} ms wall, \
         {:.3} simulated s per wall-s; bus trace hash {hash:016x}",
        rounds * fsyncs,
        mode.name(),
        sim * 1e3,
        wall * 1e3,
        sim / wall
    );
}

/// The allocator the speed bench and the `crashfuzz` binary run with.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
