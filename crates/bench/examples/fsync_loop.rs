//! A profiling aid: the speed bench's one-thread 4 KiB append + fsync loop
//! (`cargo bench -p ccnvme-bench --bench speed`, `fsync_4k`), `ROUNDS`
//! times over (first argument, default 20; second, `mq` or `classic`), each
//! round (of 200 fsyncs, or the third argument's number) on a fresh file system of the Optane 905P profile as the bench's
//! iterations are, printing the loop's simulated and wall time (mkfs and
//! mount excluded), its bus events and task polls, and the last round's
//! bus trace hash (a change to the simulator's speed must leave it and
//! the simulated time as they were). Run it under
//! `perf record` or `valgrind --tool=callgrind` to see where the
//! simulator's time goes.

use std::time::Instant;

use mqfs::testing::new_fs;
use mqfs::{Ctx, Mode};
use nvme_ctrl::SsdProfile;

/// Appends + fsyncs per round, as the bench's (third argument).
const FSYNCS: u64 = 200;

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let mode = match std::env::args().nth(2).as_deref() {
        Some("classic") => Mode::Classic,
        _ => Mode::Mq,
    };
    let fsyncs: u64 = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(FSYNCS);
    let (mut sim, mut wall, mut events, mut polls, mut hash) = (0.0, 0.0, 0, 0, 0);
    // Every round's file system is made first, so that a profiler can
    // leave the setup out (`perf record --delay`, after the line below).
    let setup = Instant::now();
    let machines: Vec<_> = (0..rounds)
        .map(|_| {
            let t = new_fs(mode, SsdProfile::optane_905p(), 65536, 1).expect("mkfs and mount");
            let fs = t.fs.clone();
            let ino =
                t.ex.block_on(async move { fs.create_path(Ctx::on(0), "/f").await })
                    .expect("the simulation finishes")
                    .expect("create /f")
                    .ino;
            (t, ino)
        })
        .collect();
    eprintln!("setup: {:.0} ms", setup.elapsed().as_secs_f64() * 1e3);
    for (t, ino) in machines {
        let fs = t.fs.clone();
        let (start, e0, p0) = (t.ex.sim().now(), t.machine.trace().len(), t.ex.polls());
        let w = Instant::now();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let block = [0x5au8; 4096];
            for i in 0..fsyncs {
                fs.write(c, ino, i * 4096, &block).await.expect("append");
                fs.fsync(c, ino).await.expect("fsync");
            }
        })
        .expect("the simulation finishes");
        wall += w.elapsed().as_secs_f64();
        sim += t.ex.sim().now().since(start).as_secs_f64();
        events += t.machine.trace().len() - e0;
        polls += t.ex.polls() - p0;
        hash = t.machine.trace().hash();
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
