//! Ext4-NJ's fsync writes what Linux's does (the data, then the inode's
//! table block; a new name's directory too), and the flusher writes the
//! rest home once it expired (`vm.dirty_expire_centisecs`), in every mode.

mod common;

use std::rc::Rc;

use common::{setup, ROOT};
use mqfs::testing::TestFs;
use mqfs::{Ctx, FindingKind, Fs, FsProfile, Mode};
use pcie_sim::{EventKind, SimDuration, SimTime};

const BLOCKS: u64 = 1 << 14;

fn fs(t: &TestFs) -> Rc<Fs> {
    t.fs.clone()
}

/// Runs `f` to completion on the test's executor.
fn run<T: 'static>(t: &TestFs, f: impl std::future::Future<Output = T> + 'static) -> T {
    t.ex.block_on(f).expect("finishes")
}

/// Data blocks the drive fetched from host memory (blocks written) while
/// `f` ran.
fn blocks_written<T: 'static>(t: &TestFs, f: impl std::future::Future<Output = T> + 'static) -> (T, u64) {
    let before = t.machine.counters();
    let v = run(t, f);
    let c = t.machine.counters().since(&before);
    (v, c.get(EventKind::DmaRead, nvme_spec::traffic::DATA_BLOCK).ops)
}

/// Block `b` as the drive holds it.
fn on_drive(t: &TestFs, b: u64) -> Box<[u8; 4096]> {
    let mut buf = Box::new([0u8; 4096]);
    t.ctrl.backend().peek(b, &mut buf);
    buf
}

/// Makes everything durable and returns the blocks `blocks` as the drive
/// then holds them (the file system's current view).
fn after_sync(t: &TestFs, blocks: &[u64]) -> Vec<Box<[u8; 4096]>> {
    let f = fs(t);
    run(t, async move { f.sync(Ctx::on(0)).await.expect("sync") });
    blocks.iter().map(|b| on_drive(t, *b)).collect()
}

/// Creates `/f` with one block and makes everything durable; returns its
/// inode number.
fn file_synced(t: &TestFs) -> u32 {
    let f = fs(t);
    run(t, async move {
        let c = Ctx::on(0);
        let a = f.create(c, ROOT, "f", 0o644).await.expect("create");
        f.write(c, a.ino, 0, &[1u8; 4096]).await.expect("write");
        f.sync(c).await.expect("sync");
        a.ino
    })
}

/// Appends block `block` to `ino` and fsyncs it.
fn append_and_fsync(t: &TestFs, ino: u32, block: u64) {
    let f = fs(t);
    run(t, async move {
        let c = Ctx::on(0);
        f.write(c, ino, block * 4096, &[2u8; 4096]).await.expect("append");
        f.fsync(c, ino).await.expect("fsync");
    });
}

fn now(t: &TestFs) -> SimTime {
    t.machine.sim().now()
}

fn later(t: &TestFs, d: SimDuration) -> SimTime {
    SimTime(now(t).0 + d.0)
}

#[test]
fn an_ext4_nj_fsync_of_an_append_writes_the_data_and_the_inode_block_only() {
    let t = setup(Mode::None, BLOCKS, 1).expect("mode none");
    let ino = file_synced(&t);
    let f = fs(&t);
    let ((), n) = blocks_written(&t, async move {
        let c = Ctx::on(0);
        f.write(c, ino, 4096, &[2u8; 4096]).await.expect("append");
        f.fsync(c, ino).await.expect("fsync");
    });
    assert_eq!(n, 2, "the data and the inode block");
    let sb = t.fs.superblock();
    let (iblk, _) = sb.inode_location(ino).expect("inode");
    let bitmap = sb.block_bitmap(0);
    let now = [on_drive(&t, iblk), on_drive(&t, bitmap)];
    let synced = after_sync(&t, &[iblk, bitmap]);
    assert!(now[0] == synced[0], "the inode block is home");
    assert!(now[1] != synced[1], "the bitmap is not");
}

#[test]
fn an_ext4_nj_fsync_of_a_new_file_writes_its_directory_but_no_bitmap() {
    let t = setup(Mode::None, BLOCKS, 1).expect("mode none");
    let f = fs(&t);
    run(&t, async move { f.sync(Ctx::on(0)).await.expect("sync") });
    let f = fs(&t);
    let (ino, n) = blocks_written(&t, async move {
        let c = Ctx::on(0);
        let a = f.create(c, ROOT, "new", 0o644).await.expect("create");
        f.write(c, a.ino, 0, &[3u8; 4096]).await.expect("write");
        f.fsync(c, a.ino).await.expect("fsync");
        a.ino
    });
    let sb = t.fs.superblock();
    let (iblk, _) = sb.inode_location(ino).expect("inode");
    let (root_iblk, _) = sb.inode_location(ROOT).expect("root");
    let root_dir_block = {
        let f = fs(&t);
        run(&t, async move {
            let root = f.iget(Ctx::on(0), ROOT).await.expect("root");
            let e = root.inode.borrow().tree.first().expect("root has a block");
            e.physical
        })
    };
    // The data, the inode block, the directory block, and the
    // directory's inode block when it is another one.
    assert_eq!(n, if root_iblk == iblk { 3 } else { 4 });
    let look = [
        iblk,
        root_dir_block,
        root_iblk,
        sb.block_bitmap(0),
        sb.inode_bitmap(0),
    ];
    let now: Vec<_> = look.iter().map(|b| on_drive(&t, *b)).collect();
    let synced = after_sync(&t, &look);
    assert!(now[0] == synced[0], "the inode block is home");
    assert!(now[1] == synced[1], "the new name's directory block is home");
    assert!(now[2] == synced[2], "the directory's inode is home");
    assert!(now[3] != synced[3], "the block bitmap is not");
    assert!(now[4] != synced[4], "the inode bitmap is not");
}

#[test]
fn the_flusher_writes_the_bitmap_home_once_it_expired() {
    let t = setup(Mode::None, BLOCKS, 1).expect("mode none");
    let ino = file_synced(&t);
    let start = now(&t);
    let bitmap = t.fs.superblock().block_bitmap(0);
    let old = on_drive(&t, bitmap);
    append_and_fsync(&t, ino, 1);
    // A crash now leaves the appended block free in the bitmap (as
    // e2fsck's "block bitmap differences" after a crash of a no-journal
    // ext4).
    let report = mqfs::fsck(&**t.ctrl.backend()).expect("fsck");
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::BlockUsedButFree),
        "{:?}",
        report.findings
    );
    t.ex.run_until(SimTime(start.0 + SimDuration::from_ms(29_000).0));
    assert!(on_drive(&t, bitmap) == old, "not before 30 s");
    assert_eq!(t.fs.flusher_writes(), 0);
    t.ex.run_until(SimTime(start.0 + SimDuration::from_ms(36_000).0));
    assert!(on_drive(&t, bitmap) != old, "written within 30 + 5 s");
    assert!(t.fs.flusher_writes() > 0);
    let report = mqfs::fsck(&**t.ctrl.backend()).expect("fsck");
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn with_periodic_writeback_off_the_bitmap_stays_dirty() {
    // vm.dirty_writeback_centisecs = 0: no periodic writeback.
    let (ex, machine, ctrl) = mqfs::testing::machine(
        nvme_ctrl::SsdProfile::optane_905p(),
        BLOCKS,
        1,
        pcie_sim::TraceMode::Off,
        1,
    );
    let m2 = machine.clone();
    let profile = FsProfile {
        dirty_writeback_interval: None,
        ..FsProfile::default()
    };
    let (dev, fs) = ex
        .block_on(
            async move { mqfs::testing::format_and_mount(&m2, Mode::None, BLOCKS, |_| {}, profile).await },
        )
        .expect("finishes")
        .expect("mount");
    let t = TestFs {
        ex,
        machine,
        ctrl,
        dev,
        fs,
    };
    let ino = file_synced(&t);
    let bitmap = t.fs.superblock().block_bitmap(0);
    let old = on_drive(&t, bitmap);
    append_and_fsync(&t, ino, 1);
    t.ex.run_until(later(&t, SimDuration::from_ms(100_000)));
    assert!(on_drive(&t, bitmap) == old);
    assert_eq!(t.fs.flusher_writes(), 0);
}

#[test]
fn the_flusher_writes_expired_data_in_every_mode_then_sleeps() {
    for mode in common::modes() {
        let Some(t) = setup(mode, BLOCKS, 1) else { continue };
        let ino = file_synced(&t);
        let f = fs(&t);
        run(&t, async move {
            f.write(Ctx::on(0), ino, 0, &[7u8; 4096])
                .await
                .expect("overwrite");
        });
        let home = {
            let f = fs(&t);
            run(&t, async move {
                let st = f.iget(Ctx::on(0), ino).await.expect("iget");
                let e = st.inode.borrow().tree.first().expect("mapped");
                e.physical
            })
        };
        let mut buf = [0u8; 4096];
        t.ctrl.backend().peek(home, &mut buf);
        assert_eq!(buf[0], 1, "{mode:?}: not written before the expiry");
        t.ex.run_until(later(&t, SimDuration::from_ms(36_000)));
        t.ctrl.backend().peek(home, &mut buf);
        assert_eq!(buf[0], 7, "{mode:?}: the flusher wrote the page home");
        assert!(t.fs.flusher_writes() >= 1, "{mode:?}");
        // Nothing left for it: it schedules no more wake-ups.
        let polls = t.ex.polls();
        t.ex.run_until(later(&t, SimDuration::from_ms(60_000)));
        assert_eq!(t.ex.polls(), polls, "{mode:?}: the flusher sleeps when idle");
    }
}

#[test]
fn concurrent_ext4_nj_fsyncs_of_one_inode_table_block_share_its_write() {
    // Two files whose inodes share a table block, each appended to, then
    // fsynced by two threads at once: the first write of the table block
    // carries both inodes, and the second fsync, waiting on the block's
    // write lock (Linux's buffer lock in sync_dirty_buffer), finds it
    // clean. Two data blocks and one table block reach the drive.
    let t = setup(Mode::None, BLOCKS, 2).expect("mode none");
    let f = fs(&t);
    let (a, b) = run(&t, async move {
        let c = Ctx::on(0);
        let a = f.create(c, ROOT, "a", 0o644).await.expect("create a").ino;
        let b = f.create(c, ROOT, "b", 0o644).await.expect("create b").ino;
        f.sync(c).await.expect("sync");
        f.write(c, a, 0, &[4u8; 4096]).await.expect("write a");
        f.write(c, b, 0, &[5u8; 4096]).await.expect("write b");
        (a, b)
    });
    let sb = t.fs.superblock();
    assert_eq!(
        sb.inode_location(a).expect("a").0,
        sb.inode_location(b).expect("b").0,
        "one table block"
    );
    let (f, sim) = (fs(&t), t.machine.sim());
    let ((), n) = blocks_written(&t, async move {
        let handles: Vec<_> = [(a, 0), (b, 1)]
            .into_iter()
            .map(|(ino, core)| {
                let f = f.clone();
                sim.spawn(async move { f.fsync(Ctx::on(core), ino).await.expect("fsync") })
            })
            .collect();
        pcie_sim::join_all(handles).await;
    });
    assert_eq!(n, 3, "two data blocks and one shared table block");
}
