//! `fbarrier` and `fdatabarrier` (HoRAE Table 1, 5.6.1; BarrierFS) and
//! ext4's `nobarrier` mount (`FsProfile::barrier`, the ordering variant
//! HoRAE 6.1 compares against).
//!
//! In HoraeFS an fbarrier returns once its transaction is dispatched
//! through the ordering layer (the pipeline's commit counter moved, the
//! ordering queue's tail past its commit record), before any FLUSH, and
//! sooner than an fsync; an fdatabarrier dispatches the data and commits
//! nothing. A `nobarrier` ext4 sends no FLUSH from fsync and writes its
//! commit record without PREFLUSH/FUA. Seen through the journal's
//! pipeline counters and the bus trace (`FLUSH_DONE`: a Flush command the
//! drive executed).

use std::rc::Rc;

use mqfs::testing::{format_and_mount, machine, TestFs};
use mqfs::{Ctx, Fs, FsProfile, Mode};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::SsdProfile;
use pcie_sim::{EventKind, Machine, TraceMode};

const BLOCKS: u64 = 16384;

/// A sync primitive's call, boxed.
type SyncFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), mqfs::FsError>>>>;
/// A sync primitive: fsync, fbarrier or fdatabarrier.
type SyncCall = fn(Rc<Fs>, mqfs::Ino) -> SyncFuture;
/// One application core and the journal threads' cores.
const CORES: usize = 3;

/// A file system of `mode` on a drive with a volatile cache, `/a` created
/// and synced, the bus trace on.
fn fs_on(mode: Mode, profile: FsProfile) -> TestFs {
    let (ex, m, ctrl) = machine(SsdProfile::flash_vwc(), BLOCKS, CORES, TraceMode::Events, 1);
    let m2 = m.clone();
    let profile = FsProfile {
        commit_core: 1,
        flush_core: Some(2),
        ..profile
    };
    let (dev, fs) = ex
        .block_on(async move {
            let (dev, fs) = format_and_mount(&m2, mode, BLOCKS, |_| {}, profile).await?;
            fs.create_path(Ctx::on(0), "/a").await?;
            fs.sync(Ctx::on(0)).await?;
            Ok::<_, mqfs::FsError>((dev, fs))
        })
        .expect("setup finishes")
        .expect("setup succeeds");
    TestFs {
        ex,
        machine: m,
        ctrl,
        dev,
        fs,
    }
}

fn flushes_since(m: &Machine, from: usize) -> usize {
    m.trace().entries()[from..]
        .iter()
        .filter(|e| e.kind == EventKind::Device && e.code == FLUSH_DONE)
        .count()
}

/// What one call saw: its latency (us), the Flush commands executed while
/// it ran, and the pipeline's commits before and after it.
#[derive(Debug)]
struct Call {
    us: f64,
    flushes: usize,
    commits: (u64, u64),
}

/// Appends 4 KiB to `/a` at block `k` and times `sync` on it.
fn append_then(t: &TestFs, k: u64, sync: SyncCall) -> Call {
    let (fs2, m2) = (t.fs.clone(), t.machine.clone());
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let ino = fs2.lookup(c, 2, "a").await?.ino;
        fs2.write(c, ino, k * 4096, &[k as u8 + 1; 4096]).await?;
        let commits = fs2.pipeline_stats().map_or(0, |s| s.commits);
        let from = m2.trace().entries().len();
        let t0 = m2.sim().now();
        sync(fs2.clone(), ino).await?;
        let us = m2.sim().now().since(t0).as_us_f64();
        Ok::<_, mqfs::FsError>(Call {
            us,
            flushes: flushes_since(&m2, from),
            commits: (commits, fs2.pipeline_stats().map_or(0, |s| s.commits)),
        })
    })
    .expect("finishes")
    .expect("succeeds")
}

fn fsync(fs: Rc<Fs>, ino: mqfs::Ino) -> SyncFuture {
    Box::pin(async move { fs.fsync(Ctx::on(0), ino).await })
}

fn fbarrier(fs: Rc<Fs>, ino: mqfs::Ino) -> SyncFuture {
    Box::pin(async move { fs.fbarrier(Ctx::on(0), ino).await })
}

fn fdatabarrier(fs: Rc<Fs>, ino: mqfs::Ino) -> SyncFuture {
    Box::pin(async move { fs.fdatabarrier(Ctx::on(0), ino).await })
}

/// Unmounts and checks the image: clean, and `/a` holds `blocks` blocks
/// of the pattern `append_then` wrote.
fn unmount_and_check(t: &TestFs, blocks: u64) {
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let ino = fs.lookup(c, 2, "a").await?.ino;
        for k in 0..blocks {
            let buf = fs.read(c, ino, k * 4096, 4096).await?;
            assert!(buf.iter().all(|b| *b == k as u8 + 1), "block {k}");
        }
        fs.unmount(c).await
    })
    .expect("finishes")
    .expect("unmounts");
    let report = mqfs::fsck(&**t.ctrl.backend()).expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn horae_fbarrier_returns_once_dispatched_before_any_flush() {
    let t = fs_on(Mode::Horae, FsProfile::default());
    let b = append_then(&t, 0, fbarrier);
    // Its transaction was dispatched (the commit counter counts a
    // dispatch) and no FLUSH ran while the caller waited.
    assert_eq!(b.commits.1, b.commits.0 + 1, "{b:?}");
    assert_eq!(b.flushes, 0, "{b:?}");
    let s = append_then(&t, 1, fsync);
    assert!(s.flushes >= 1, "fsync waits for the joint FLUSH: {s:?}");
    assert!(b.us < s.us, "fbarrier {b:?} must be faster than fsync {s:?}");
    unmount_and_check(&t, 2);
}

#[test]
fn horae_fdatabarrier_dispatches_the_data_and_commits_nothing() {
    let t = fs_on(Mode::Horae, FsProfile::default());
    let epochs = t.fs.pipeline_stats().expect("jbd").caller_data_epochs;
    let mut calls = Vec::new();
    for k in 0..4 {
        calls.push(append_then(&t, k, fdatabarrier));
    }
    for c in &calls {
        assert_eq!(c.commits.0, c.commits.1, "no transaction: {c:?}");
        assert_eq!(c.flushes, 0, "{c:?}");
    }
    assert_eq!(t.fs.pipeline_stats().expect("jbd").caller_data_epochs, epochs + 4);
    // The size and the extents reach the disk with the next commit.
    let s = append_then(&t, 4, fsync);
    assert_eq!(s.commits.1, s.commits.0 + 1, "{s:?}");
    unmount_and_check(&t, 5);
}

#[test]
fn classic_fbarrier_is_fsync_and_nobarrier_drops_its_flushes() {
    let t = fs_on(Mode::Classic, FsProfile::default());
    let b = append_then(&t, 0, fbarrier);
    let s = append_then(&t, 1, fsync);
    // With barriers: the commit record's PREFLUSH (and FUA) reach the
    // drive, for fbarrier as for fsync.
    assert!(b.flushes >= 1 && s.flushes >= 1, "{b:?} {s:?}");
    unmount_and_check(&t, 2);
    let nobarrier = FsProfile {
        barrier: false,
        ..FsProfile::default()
    };
    let t = fs_on(Mode::Classic, nobarrier);
    let n = append_then(&t, 0, fsync);
    assert_eq!(n.flushes, 0, "nobarrier: no FLUSH from fsync: {n:?}");
    assert!(n.us < s.us, "nobarrier fsync {n:?} vs fsync {s:?}");
    unmount_and_check(&t, 1);
}

#[test]
fn nobarrier_is_ignored_by_horaefs() {
    let nobarrier = FsProfile {
        barrier: false,
        ..FsProfile::default()
    };
    let t = fs_on(Mode::Horae, nobarrier);
    let s = append_then(&t, 0, fsync);
    assert!(s.flushes >= 1, "HoraeFS's fsync keeps its joint FLUSH: {s:?}");
    unmount_and_check(&t, 1);
}

/// Appends of 4 KiB to `/a`, each followed by an fbarrier, on HoraeFS with
/// a checkpoint region of `checkpoint` blocks, then an fsync, an unmount,
/// and a fresh probe and mount of the drive: returns the queue's entries
/// and its swaps, after checking that the remount reads every block and
/// that fsck finds the image clean.
fn fbarriers_then_remount(checkpoint: u64, appends: u64) -> (u32, u64) {
    let (ex, m, ctrl) = machine(SsdProfile::flash_vwc(), BLOCKS, CORES, TraceMode::Off, 1);
    let m2 = m.clone();
    // Every buffer of a committing transaction gets a frozen copy: with
    // BH_Shadow each append waits for the last transaction's log writes of
    // the inode and the bitmap, and one thread's fbarriers no longer
    // outrun the flush stage, which then keeps the queue short.
    let profile = FsProfile {
        commit_core: 1,
        flush_core: Some(2),
        jbd_shadow: false,
        ..FsProfile::default()
    };
    let tune = move |o: &mut mqfs::MkfsOptions| o.checkpoint_blocks = Some(checkpoint);
    let (capacity, swaps) = ex
        .block_on(async move {
            let (_, fs) = format_and_mount(&m2, Mode::Horae, BLOCKS, tune, profile.clone()).await?;
            let c = Ctx::on(0);
            let ino = fs.create_path(c, "/a").await?.ino;
            for k in 0..appends {
                fs.write(c, ino, k * 4096, &[k as u8 + 1; 4096]).await?;
                fs.fbarrier(c, ino).await?;
            }
            fs.fsync(c, ino).await?;
            let q = fs.ordering_queue().expect("HoraeFS has an ordering queue");
            let seen = (q.capacity(), q.swaps());
            fs.unmount(c).await?;
            // A fresh driver and mount over the same drive.
            let dev = ccnvme::BlockDevice::probe(&m2, 0, mqfs::probe_options(Mode::Horae)).await?;
            let fs = mqfs::mount(&dev, c, profile).await?;
            let ino = fs.lookup(c, 2, "a").await?.ino;
            for k in 0..appends {
                let buf = fs.read(c, ino, k * 4096, 4096).await?;
                assert!(
                    buf.iter().all(|b| *b == k as u8 + 1),
                    "block {k} after the remount"
                );
            }
            fs.unmount(c).await?;
            Ok::<_, mqfs::FsError>(seen)
        })
        .expect("finishes")
        .expect("succeeds");
    let report = mqfs::fsck(&**ctrl.backend()).expect("fsck");
    assert!(report.is_clean(), "{report:?}");
    (capacity, swaps)
}

/// HoraeFS's fbarriers fill its ordering queue faster than the queue
/// dequeues (no FLUSH moves `flushed` until the fsync), and a full queue
/// swaps to the checkpoint region mkfs reserved instead of waiting
/// (Horae 5.2 "Swap"; `docs/decisions.md` H6): with a region of 3 blocks
/// the ring holds what 3 blocks take, so 200 fbarriers swap; with no
/// region the queue never swaps. Either way the file is whole after a
/// remount and fsck is clean.
#[test]
fn fbarriers_fill_the_ordering_queue_and_it_swaps_to_the_checkpoint_region() {
    let (capacity, swaps) = fbarriers_then_remount(3, 200);
    assert!(capacity < 300, "a 3-block region limits the ring: {capacity}");
    assert!(
        swaps >= 1,
        "the full queue swapped ({capacity} entries): {swaps} swaps"
    );
    let (_, swaps) = fbarriers_then_remount(0, 200);
    assert_eq!(swaps, 0, "no checkpoint region: no swap");
}
