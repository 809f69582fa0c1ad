//! The file system's clock (`docs/decisions.md` M17): timestamps are the
//! base given at mount plus the simulated time since, as of the clock's
//! last tick; the superblock keeps the newest time the clock gave, and a
//! later mount never starts below it. A write within the tick of the
//! file's times dirties no inode (Linux `file_update_time`).

mod common;

use std::rc::Rc;

use ccnvme::BlockDevice;
use common::{overwrite_fsync_blocks, setup, ROOT};
use mqfs::{mount, probe_options, Ctx, Fs, FsError, FsProfile, Mode};
use pcie_sim::{Machine, SimDuration};

/// A host time of 2026 in ns since 1970.
const HOST_2026: u64 = 1_780_000_000_000_000_000;

/// Unmounts `fs`, probes again and mounts with the clock base `base`.
async fn remount_at(fs: Rc<Fs>, machine: &Machine, base: u64) -> Result<Rc<Fs>, FsError> {
    let c = Ctx::on(0);
    let mode = fs.mode();
    fs.unmount(c).await?;
    drop(fs);
    let dev = BlockDevice::probe(machine, 0, probe_options(mode)).await?;
    let profile = FsProfile {
        clock_base_ns: base,
        ..FsProfile::default()
    };
    mount(&dev, c, profile).await
}

#[test]
fn timestamps_are_the_base_plus_simulated_time_since_mount() {
    for mode in [Mode::None, Mode::Mq] {
        let Some(t) = setup(mode, 16384, 2) else { continue };
        let m = t.machine.clone();
        let (before, after, sim_elapsed, mtime, base_fs_now) =
            t.ex.block_on(async move {
                let fs = remount_at(t.fs, &m, HOST_2026).await?;
                let c = Ctx::on(0);
                let sim0 = m.sim().now().as_ps() / 1000;
                let before = fs.now_ns();
                let a = fs.create(c, ROOT, "f", 0o644).await?;
                fs.write(c, a.ino, 0, b"hello").await?;
                let after = fs.now_ns();
                let sim1 = m.sim().now().as_ps() / 1000;
                let mtime = fs.getattr(c, a.ino).await?.mtime;
                Ok::<_, FsError>((before, after, sim1 - sim0, mtime, fs.now_ns()))
            })
            .unwrap()
            .unwrap();
        assert!(
            before >= HOST_2026,
            "{mode:?}: the clock starts at the base: {before}"
        );
        assert!(
            before < HOST_2026 + 1_000_000_000,
            "{mode:?}: the clock is the base plus the mount's simulated time, not more: {before}"
        );
        assert_eq!(
            after - before,
            sim_elapsed,
            "{mode:?}: the clock advances with simulated time"
        );
        // Stamped with the clock as of its last tick (Linux
        // `current_time`), ticks counted from the mount.
        let tick = FsProfile::default().timestamp_tick.as_ps() / 1000;
        assert!(
            mtime <= after && mtime + tick > before,
            "{mode:?}: mtime {mtime} is the clock's at its last tick ({before}..={after})"
        );
        assert_eq!(
            (mtime - HOST_2026) % tick,
            0,
            "{mode:?}: mtime {mtime} falls on a tick"
        );
        assert!(base_fs_now >= mtime);
    }
}

#[test]
fn the_clock_never_goes_back_across_a_remount_with_an_older_host_time() {
    for mode in Mode::ALL {
        let Some(t) = setup(mode, 16384, 2) else { continue };
        let m = t.machine.clone();
        let (old_mtime, sb_newest, new_now, new_mtime) =
            t.ex.block_on(async move {
                let c = Ctx::on(0);
                let fs = remount_at(t.fs, &m, HOST_2026).await?;
                let a = fs.create(c, ROOT, "old", 0o644).await?;
                fs.write(c, a.ino, 0, b"x").await?;
                let old_mtime = fs.getattr(c, a.ino).await?.mtime;
                // The host's clock went back a year between the mounts.
                let fs = remount_at(fs, &m, HOST_2026 - 365 * 86_400 * 1_000_000_000).await?;
                let sb_newest = fs.superblock().newest_time;
                let new_now = fs.now_ns();
                let b = fs.create(c, ROOT, "new", 0o644).await?;
                fs.write(c, b.ino, 0, b"y").await?;
                let new_mtime = fs.getattr(c, b.ino).await?.mtime;
                Ok::<_, FsError>((old_mtime, sb_newest, new_now, new_mtime))
            })
            .unwrap()
            .unwrap();
        assert!(
            sb_newest >= old_mtime,
            "{mode:?}: the superblock keeps the newest time ({sb_newest} < {old_mtime})"
        );
        assert!(
            new_now > sb_newest,
            "{mode:?}: the clock starts past the recorded newest time"
        );
        assert!(
            new_mtime > old_mtime,
            "{mode:?}: a file written after the remount is newer ({new_mtime} <= {old_mtime})"
        );
    }
}

#[test]
fn the_superblock_records_the_newest_time_at_mount_and_unmount() {
    let Some(t) = setup(Mode::Classic, 16384, 1) else {
        return;
    };
    let m = t.machine.clone();
    let (at_mount, base, at_unmount, clock_at_unmount) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let fs = remount_at(t.fs, &m, HOST_2026).await?;
            let at_mount = fs.superblock().newest_time;
            let a = fs.create(c, ROOT, "f", 0o644).await?;
            fs.write(c, a.ino, 0, &[7u8; 8192]).await?;
            let clock_at_unmount = fs.now_ns();
            // Base 0: the image's newest time decides.
            let fs = remount_at(fs, &m, 0).await?;
            let sb = fs.superblock();
            Ok::<_, FsError>((at_mount, HOST_2026, sb.newest_time, clock_at_unmount))
        })
        .unwrap()
        .unwrap();
    assert!(at_mount >= base, "mount records the clock's base");
    assert!(
        at_unmount > clock_at_unmount,
        "the next mount starts past what unmount recorded ({at_unmount} <= {clock_at_unmount})"
    );
}

/// Blocks written by three overwrite + fsync pairs (the first two within
/// the tick of the file's last change, the third a tick later) with
/// timestamp tick `tick`.
fn three_pairs(mode: Mode, tick: SimDuration) -> Vec<u64> {
    let profile = FsProfile {
        timestamp_tick: tick,
        ..FsProfile::default()
    };
    let (now, later) = (SimDuration::ZERO, SimDuration::from_ms(4));
    overwrite_fsync_blocks(mode, profile, &[now, now, later])
}

#[test]
fn an_overwrite_within_the_tick_of_the_files_times_dirties_no_inode() {
    // Ext4/JBD2: within the tick only the data block goes out (the fsync
    // finds no transaction of the inode to commit); after a tick the
    // mtime changed, and the commit writes descriptor, inode block and
    // commit record too. Ext4-NJ: data, or data and inode block.
    for (mode, within, after) in [(Mode::Classic, 1, 4), (Mode::None, 1, 2)] {
        let coarse = three_pairs(mode, SimDuration::from_ms(4));
        assert_eq!(coarse, vec![within, within, after], "{mode:?} with a 4 ms tick");
        // A clock of ns resolution: every overwrite changes the mtime.
        let fine = three_pairs(mode, SimDuration::ZERO);
        assert_eq!(fine, vec![after, after, after], "{mode:?} with a ns clock");
    }
}
