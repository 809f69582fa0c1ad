//! A transaction's durability bookkeeping is its completion callback (a
//! bio's `end_io` in Linux, run by the interrupt handler): it wakes no
//! thread. A caller of fatomic, which never sleeps, causes no wake-up on
//! its core; a caller of fsync, which sleeps until durable, one each.

use mqfs::testing::new_fs;
use mqfs::{Ctx, Mode};
use nvme_ctrl::SsdProfile;
use pcie_sim::SimDuration;

const CALLS: u64 = 20;

#[test]
fn fatomic_wakes_no_thread_and_fsync_one_per_call() {
    let t = new_fs(Mode::Mq, SsdProfile::optane_905p(), 65536, 1).expect("mkfs and mount");
    let fs = t.fs.clone();
    let core = t.machine.core(0).expect("core 0");
    let sim = t.ex.sim().clone();
    let (atomic, durable) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let ino = fs.create_path(c, "/f").await.expect("create").ino;
            let block = [0x5au8; 4096];
            // The first append reads metadata from the drive and sleeps
            // for it (one wake-up); the loops below start after it.
            fs.write(c, ino, 0, &block).await.expect("append");
            fs.fsync(c, ino).await.expect("fsync");
            let before = core.stats();
            for i in 1..=CALLS {
                fs.write(c, ino, i * 4096, &block).await.expect("append");
                fs.fatomic(c, ino).await.expect("fatomic");
            }
            // Every transaction becomes durable meanwhile.
            sim.sleep(SimDuration::from_us(500)).await;
            let atomic = core.stats().since(before);
            let before = core.stats();
            for i in CALLS + 1..=2 * CALLS {
                fs.write(c, ino, i * 4096, &block).await.expect("append");
                fs.fsync(c, ino).await.expect("fsync");
            }
            sim.sleep(SimDuration::from_us(500)).await;
            (atomic, core.stats().since(before))
        })
        .expect("the simulation finishes");
    assert_eq!(atomic.wakeups, 0, "fatomic: {atomic:?}");
    assert_eq!(durable.wakeups, CALLS, "fsync: {durable:?}");
}
