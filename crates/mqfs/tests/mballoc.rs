//! The block allocator as ext4's mballoc (`mqfs::mballoc`): concurrent
//! appenders stay contiguous with one bitmap search per window; windows
//! go at close, truncate and `NoSpace`; and a window never reaches the
//! on-disk bitmap, so a crash with windows outstanding leaves an image
//! fsck finds clean (with the fault-injection switch that marks windows on
//! disk, fsck finds the leak).

mod common;

use std::rc::Rc;
use std::sync::Arc;

use ccnvme::BlockDevice;
use common::{modes, setup_profile};
use mqfs::fsck::fsck;
use mqfs::testing::{machine_over, TestFs};
use mqfs::{mount, probe_options, Ctx, FindingKind, Fs, FsError, FsProfile, Ino, Mode};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::{join_all, TraceMode};

const B: usize = 4096;

fn with(f: impl FnOnce(&mut FsProfile)) -> FsProfile {
    let mut p = FsProfile::default();
    f(&mut p);
    p
}

/// Extents of file `ino`.
async fn extents(fs: &Fs, ino: Ino) -> usize {
    let st = fs.iget(Ctx::on(0), ino).await.unwrap();
    let n = st.inode.borrow().tree.extents().len();
    n
}

/// `files` tasks, one per core, each appending `blocks` 4 KiB writes to
/// its own file; returns the files.
async fn append_concurrently(fs: &Rc<Fs>, files: usize, blocks: usize) -> Vec<Ino> {
    let c = Ctx::on(0);
    let mut inos = Vec::new();
    for f in 0..files {
        let ino = fs.create_path(c, &format!("/a{f}")).await.unwrap().ino;
        fs.open(c, ino).await.unwrap();
        inos.push(ino);
    }
    let sim = fs.machine().sim().clone();
    let handles: Vec<_> = inos
        .iter()
        .enumerate()
        .map(|(f, &ino)| {
            let fs = fs.clone();
            sim.spawn(async move {
                let c = Ctx::on(f);
                for k in 0..blocks {
                    let n = fs.write(c, ino, (k * B) as u64, &[f as u8 + 1; B]).await;
                    assert_eq!(n, Ok(B), "file {f} block {k}");
                }
                fs.fsync(c, ino).await.unwrap();
            })
        })
        .collect();
    join_all(handles).await;
    inos
}

/// Four appenders on four cores, 1 MiB each in 4 KiB writes: with windows
/// each file is a handful of extents (its locality-group start and its
/// doubling windows, ext4_mb_normalize_request), every window costs one
/// bitmap search and the blocks after a window's first come from it
/// without one; the on-disk bitmap is marked once per block used, never
/// for a window's unused blocks. Without windows the same run interleaves
/// the files block by block.
#[test]
fn concurrent_appenders_stay_contiguous_with_one_search_per_window() {
    const FILES: usize = 4;
    const BLOCKS: usize = 256;
    for mode in modes() {
        let mut counts = Vec::new();
        for prealloc in [true, false] {
            let profile = with(|p| p.mb_prealloc = prealloc);
            let Some(t) = setup_profile(mode, 1 << 14, FILES, 16384, profile) else {
                return;
            };
            let fs = t.fs.clone();
            let (per_file, before, after) =
                t.ex.block_on(async move {
                    let before = fs.mb_stats();
                    let inos = append_concurrently(&fs, FILES, BLOCKS).await;
                    let after = fs.mb_stats();
                    let mut per_file = Vec::new();
                    for &ino in &inos {
                        per_file.push(extents(&fs, ino).await);
                        fs.release(Ctx::on(0), ino).await.unwrap();
                    }
                    assert_eq!(
                        fs.preallocated_blocks(Some(inos[0])),
                        0,
                        "{mode:?}: released at close"
                    );
                    fs.unmount(Ctx::on(0)).await.unwrap();
                    (per_file, before, after)
                })
                .unwrap();
            let r = fsck(&**t.ctrl.backend()).unwrap();
            assert!(r.is_spotless(), "{mode:?} prealloc {prealloc}: {r}");
            let used = (FILES * BLOCKS) as u64;
            let searches = after.searches - before.searches;
            let windows = after.windows - before.windows;
            let from_window = after.from_window - before.from_window;
            let marks = after.bitmap_marks - before.bitmap_marks;
            eprintln!(
                "{mode:?} prealloc {prealloc}: extents {per_file:?}, {searches} searches, \
                 {windows} windows, {from_window} blocks from windows, {marks} bitmap marks"
            );
            if prealloc {
                // A window per doubling of the file (16 KiB .. 1 MiB) and
                // the locality group's: about 8 per file.
                assert!(windows <= (FILES * 10) as u64, "{mode:?}: {windows} windows");
                // Every data block but a window's first came from a window.
                assert!(
                    from_window + windows >= used,
                    "{mode:?}: {from_window} + {windows}"
                );
                // Searches: the windows' and the exact requests of
                // directory and tree blocks, none per data block.
                assert!(
                    searches <= windows + 8,
                    "{mode:?}: {searches} searches for {windows} windows"
                );
                for (f, n) in per_file.iter().enumerate() {
                    assert!(*n <= 10, "{mode:?} file {f}: {n} extents");
                }
            } else {
                assert_eq!(windows, 0);
                assert!(searches >= used, "{mode:?}: a search per block without windows");
            }
            // The on-disk bitmap: one mark per block used (data and the
            // few metadata blocks), never a window's unused block.
            assert!(
                marks >= used && marks <= used + 16,
                "{mode:?}: {marks} marks for {used} blocks"
            );
            counts.push(per_file.iter().sum::<usize>());
        }
        // Without windows the interleaved appenders fragment.
        assert!(
            counts[1] > 10 * counts[0],
            "{mode:?}: extents with and without windows {counts:?}"
        );
    }
}

/// A window goes at the last close (ext4_release_file) and at truncate
/// (ext4_truncate): its blocks are free for a search again. The on-disk
/// free count never included them.
#[test]
fn windows_are_released_at_close_and_truncate() {
    for mode in modes() {
        let Some(t) = setup_profile(mode, 1 << 14, 2, 16384, FsProfile::default()) else {
            return;
        };
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let ino = fs.create_path(c, "/f").await.unwrap().ino;
            fs.open(c, ino).await.unwrap();
            let free0 = fs.statfs(c).await.unwrap().free_blocks;
            // 20 blocks: past the stream threshold (16), an inode window.
            for k in 0..20 {
                fs.write(c, ino, (k * B) as u64, &[7; B]).await.unwrap();
            }
            let held = fs.preallocated_blocks(Some(ino));
            assert!(held > 0, "{mode:?}: no window");
            let free1 = fs.statfs(c).await.unwrap().free_blocks;
            // The window is not on disk: the free count lost only the used
            // blocks (20 data blocks, maybe a tree block).
            assert!(
                free0 - free1 >= 20 && free0 - free1 <= 21,
                "{mode:?}: {free0} -> {free1}"
            );
            fs.release(c, ino).await.unwrap();
            assert_eq!(fs.preallocated_blocks(Some(ino)), 0, "{mode:?}: kept at close");
            // Again, then truncate.
            fs.open(c, ino).await.unwrap();
            for k in 20..40 {
                fs.write(c, ino, (k * B) as u64, &[8; B]).await.unwrap();
            }
            assert!(
                fs.preallocated_blocks(Some(ino)) > 0,
                "{mode:?}: no second window"
            );
            fs.truncate(c, ino, 10 * B as u64).await.unwrap();
            assert_eq!(fs.preallocated_blocks(Some(ino)), 0, "{mode:?}: kept at truncate");
            let free2 = fs.statfs(c).await.unwrap().free_blocks;
            assert_eq!(free0 - free2, 10, "{mode:?}: the truncated file holds 10 blocks");
            fs.release(c, ino).await.unwrap();
            fs.unmount(c).await.unwrap();
        })
        .unwrap();
        let r = fsck(&**t.ctrl.backend()).unwrap();
        assert!(r.is_spotless(), "{mode:?}: {r}");
    }
}

/// With windows outstanding (an open file's, a core's locality group's),
/// a writer that runs out of room discards them and goes on
/// (ext4_mb_discard_preallocations): it stops only when the disk is full.
#[test]
fn no_space_discards_every_window_and_retries() {
    for mode in modes() {
        let Some(t) = setup_profile(mode, 4096, 2, 16384, FsProfile::default()) else {
            return;
        };
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let (c0, c1) = (Ctx::on(0), Ctx::on(1));
            let a = fs.create_path(c0, "/a").await.unwrap().ino;
            fs.open(c0, a).await.unwrap();
            for k in 0..20 {
                fs.write(c0, a, (k * B) as u64, &[1; B]).await.unwrap();
            }
            let held = fs.preallocated_blocks(None);
            assert!(held > 100, "{mode:?}: {held} blocks preallocated");
            let b = fs.create_path(c1, "/b").await.unwrap().ino;
            let mut k = 0u64;
            loop {
                match fs.write(c1, b, k * B as u64, &[2; B]).await {
                    Ok(n) => assert_eq!(n, B),
                    Err(FsError::NoSpace) => break,
                    Err(e) => panic!("{mode:?}: {e}"),
                }
                k += 1;
            }
            assert!(fs.mb_stats().enospc_discards > 0, "{mode:?}: no discard");
            assert_eq!(fs.preallocated_blocks(None), 0, "{mode:?}");
            // The writer got the windows' blocks: nothing is left but at
            // most a block a tree split could not use.
            let free = fs.statfs(c1).await.unwrap().free_blocks;
            assert!(free <= 1, "{mode:?}: {free} blocks free at NoSpace");
            fs.release(c0, a).await.unwrap();
            fs.unmount(c0).await.unwrap();
        })
        .unwrap();
        let r = fsck(&**t.ctrl.backend()).unwrap();
        assert!(r.is_spotless(), "{mode:?}: {r}");
    }
}

/// Stops the machine of `t` with windows outstanding after a sync (on a
/// drive without a volatile cache: the media holds what a power cut
/// leaves), mounts that image on a new machine (recovery) and unmounts it;
/// returns fsck's report.
fn crash_with_windows_outstanding(mode: Mode, profile: FsProfile) -> Option<mqfs::Report> {
    let t: TestFs = setup_profile(mode, 1 << 14, 2, 16384, profile)?;
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        for f in 0..3u8 {
            let ino = fs.create_path(c, &format!("/f{f}")).await.unwrap().ino;
            fs.open(c, ino).await.unwrap();
            // 40 blocks: a locality-group start and an inode window.
            for k in 0..40 {
                fs.write(c, ino, (k * B) as u64, &[f + 1; B]).await.unwrap();
            }
            fs.fsync(c, ino).await.unwrap();
        }
        // Everything durable, Ext4-NJ's bitmaps too.
        fs.sync(c).await.unwrap();
        assert!(fs.preallocated_blocks(None) > 0);
    })
    .unwrap();
    let image = t.ctrl.backend().media().freeze();
    let (ex, m, ctrl) = machine_over(
        SsdProfile::optane_905p(),
        Media::cow(Arc::new(image), Default::default()),
        2,
        TraceMode::Off,
        1,
    );
    ex.block_on(async move {
        let c = Ctx::on(0);
        let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
        let fs = mount(&dev, c, FsProfile::default()).await.unwrap();
        for f in 0..3 {
            let ino = fs.resolve(c, &format!("/f{f}")).await.unwrap();
            assert_eq!(fs.getattr(c, ino).await.unwrap().size, 40 * B as u64, "{mode:?}");
        }
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    Some(fsck(&**ctrl.backend()).unwrap())
}

/// The on-disk bitmap holds only used blocks (ext4_mb_mark_diskspace_used):
/// a crash with windows outstanding leaves a clean image in every mode.
/// With windows marked on disk when made (`mb_mark_window_on_disk`, the
/// mechanism switched off), fsck finds their unused blocks leaked.
#[test]
fn a_crash_with_windows_outstanding_leaks_nothing() {
    for mode in modes() {
        let Some(r) = crash_with_windows_outstanding(mode, FsProfile::default()) else {
            continue;
        };
        assert!(r.is_spotless(), "{mode:?}: {r}");
        let broken = with(|p| p.mb_mark_window_on_disk = true);
        let Some(r) = crash_with_windows_outstanding(mode, broken) else {
            continue;
        };
        assert!(
            r.has(FindingKind::BlockMarkedButUnused),
            "{mode:?}: the leak not caught: {r}"
        );
    }
}
