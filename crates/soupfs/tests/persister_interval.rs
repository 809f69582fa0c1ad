//! A small persister-interval experiment (the SoupFS claims S3, S4,
//! S9 in direction only: there is no NOVA here, and the DRAM work of a
//! call costs no simulated CPU time). 200 files are created and written
//! (100 bytes) in one directory, 5 µs apart, with the persister waking
//! every 100 µs, 1 ms or 10 ms, on an Optane write latency of 94 ns (the
//! profile's) or 894 ns (S9's largest added delay after each flush,
//! 800 ns). Printed as a Markdown table with `--nocapture`.

mod common;

use fsapi::{Ctx, FileSystem as _};
use pcie_sim::{Executor, Machine, MachineProfile, PmEventKind, Pmem, PmemProfile, SimDuration, TraceMode};
use soupfs::{Faults, FsError, SoupFs, SoupProfile};

const FILES: u64 = 200;

#[derive(Debug, Clone, Copy)]
struct Row {
    interval_us: u64,
    write_ns: u64,
    /// Mean and largest simulated latency of create + write, ns.
    fg_mean_ns: f64,
    fg_max_ns: f64,
    /// Most operations waiting for the persister after any call.
    max_pending: usize,
    clwb_per_file: f64,
    sfence_per_file: f64,
    media_writes_per_file: f64,
}

fn run(interval_us: u64, write_ns: u64) -> Row {
    let ex = Executor::new(7);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
    let mut p = PmemProfile {
        size: 4 << 20,
        ..PmemProfile::default()
    };
    p.timing.write_latency = SimDuration::from_ns(write_ns);
    let pm = Pmem::attach(&m, p).expect("attach");
    let core = Ctx::on(0);
    let pcore = Ctx::on(1);
    let sim = m.sim();
    let profile = SoupProfile {
        persister_interval: SimDuration::from_us(interval_us),
        ..SoupProfile::default()
    };
    ex.block_on(async move {
        let fs = SoupFs::mkfs(&m, pm.clone(), core, profile, Faults::default()).await?;
        let d = fs.mkdir_path(core, "/d").await?.ino;
        fs.sync(core).await?;
        fs.start_persister(pcore)?;
        let before = pm.counters();
        let (mut total, mut max, mut max_pending) = (0.0, 0.0f64, 0);
        for i in 0..FILES {
            let t0 = sim.now();
            let f = fs.create(core, d, &format!("f{i}"), 0o644).await?;
            fs.write(core, f.ino, 0, &[i as u8; 100]).await?;
            let dt = (sim.now() - t0).as_ns_f64();
            total += dt;
            max = max.max(dt);
            max_pending = max_pending.max(fs.pending_ops().await);
            sim.sleep(SimDuration::from_us(5)).await;
        }
        fs.stop_persister();
        fs.sync(core).await?;
        let c = pm.counters().since(&before);
        let n = FILES as f64;
        Ok::<_, FsError>(Row {
            interval_us,
            write_ns,
            fg_mean_ns: total / n,
            fg_max_ns: max,
            max_pending,
            clwb_per_file: c.kind(PmEventKind::Clwb).ops as f64 / n,
            sfence_per_file: c.kind(PmEventKind::Sfence).ops as f64 / n,
            media_writes_per_file: c.media_writes as f64 / n,
        })
    })
    .expect("simulation")
    .expect("run")
}

#[test]
fn the_persister_interval_bounds_pending_work_and_flush_latency_stays_off_the_call_path() {
    let mut rows = Vec::new();
    println!("| interval | PM write latency | create+write mean (ns) | max (ns) | max pending ops | clwb/file | sfence/file | media writes/file |");
    println!("|---|---|---|---|---|---|---|---|");
    for interval in [100, 1_000, 10_000] {
        for write in [94, 894] {
            let r = run(interval, write);
            println!(
                "| {} µs | {} ns | {:.0} | {:.0} | {} | {:.1} | {:.1} | {:.1} |",
                r.interval_us,
                r.write_ns,
                r.fg_mean_ns,
                r.fg_max_ns,
                r.max_pending,
                r.clwb_per_file,
                r.sfence_per_file,
                r.media_writes_per_file
            );
            rows.push(r);
        }
    }
    for pair in rows.chunks(2) {
        let (fast, slow) = (pair[0], pair[1]);
        // The same persistence work per file whatever the latency.
        assert_eq!(fast.clwb_per_file, slow.clwb_per_file);
        assert_eq!(fast.sfence_per_file, slow.sfence_per_file);
    }
    // S9's direction: with the persister idle during the calls (10 ms),
    // the calls take the same time whatever the flush latency: no flush
    // is on their path.
    assert_eq!(rows[4].fg_mean_ns, rows[5].fg_mean_ns);
    // A longer interval leaves more work pending (the persistence bound).
    assert!(rows[0].max_pending < rows[2].max_pending && rows[2].max_pending < rows[4].max_pending);
}
