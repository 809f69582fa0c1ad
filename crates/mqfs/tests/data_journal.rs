//! ext4's `data=journal` (`FsProfile::data_journal`): file data go to the
//! journal with the metadata and home only by the checkpoint, so an fsync
//! of an overwrite commits a transaction even when the inode did not
//! change; files survive a remount (the checkpoint writes them home) and
//! fsck is clean; the modes without a JBD2 commit record refuse it.

mod common;

use ccnvme::BlockDevice;
use common::{overwrite_fsync_blocks, setup_profile};
use mqfs::testing::new_fs_with;
use mqfs::{fsck, mount, probe_options, Ctx, FsError, FsProfile, Mode, SetAttr};
use nvme_ctrl::SsdProfile;
use pcie_sim::SimDuration;

fn dj() -> FsProfile {
    FsProfile {
        data_journal: true,
        ..FsProfile::default()
    }
}

/// Blocks written by an overwrite + fsync of a synced file, within the
/// timestamp tick of its last change (so its inode does not change).
fn one_pair(mode: Mode, profile: FsProfile) -> u64 {
    overwrite_fsync_blocks(mode, profile, &[SimDuration::ZERO])[0]
}

#[test]
fn an_overwrites_fsync_journals_the_data() {
    // Ordered mode: the data block goes home and nothing commits. Data
    // journaling: descriptor, the data's copy and the commit record.
    assert_eq!(one_pair(Mode::Classic, FsProfile::default()), 1);
    assert_eq!(one_pair(Mode::Classic, dj()), 3);
    // HoraeFS: the same three blocks through the ordering layer.
    assert_eq!(one_pair(Mode::Horae, dj()), 3);
}

#[test]
fn files_survive_a_remount_and_fsck_is_clean() {
    for mode in [Mode::Classic, Mode::Horae] {
        let t = setup_profile(mode, 1 << 14, 2, 16384, dj()).expect("mounts");
        let (fs, m) = (t.fs.clone(), t.machine.clone());
        let files: Vec<(String, Vec<u8>)> = (0..4)
            .map(|i| {
                (
                    format!("/f{i}"),
                    (0..20_000 + i * 9000).map(|j| (j * 7 + i) as u8).collect(),
                )
            })
            .collect();
        let want = files.clone();
        let read =
            t.ex.block_on(async move {
                let c = Ctx::on(0);
                for (p, data) in &files {
                    fs.create_path(c, p).await?;
                    fs.write_path(c, p, 0, data).await?;
                    fs.fsync_path(c, p).await?;
                    // Overwrite the first block; then truncate the file
                    // and write it again, so freed data blocks with copies
                    // in the log are revoked and reused.
                    fs.write_path(c, p, 0, &data[..4096]).await?;
                    fs.fsync_path(c, p).await?;
                    let ino = fs.resolve(c, p).await?;
                    let cut = SetAttr {
                        size: Some(0),
                        ..SetAttr::default()
                    };
                    fs.setattr(c, ino, &cut).await?;
                    fs.write_path(c, p, 0, data).await?;
                    fs.fsync_path(c, p).await?;
                }
                fs.unmount(c).await?;
                drop(fs);
                let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await?;
                let fs = mount(&dev, c, dj()).await?;
                let mut read = Vec::new();
                for (p, _) in &files {
                    read.push(fs.read_path(c, p).await?);
                }
                fs.unmount(c).await?;
                Ok::<_, FsError>(read)
            })
            .unwrap()
            .unwrap();
        for ((p, data), got) in want.iter().zip(&read) {
            assert!(got == data, "{mode:?}: {p} reads back");
        }
        let report = fsck(&*t.ctrl.backend().clone()).unwrap();
        assert!(report.is_spotless(), "{mode:?}: {report:?}");
    }
}

#[test]
fn modes_without_a_jbd2_commit_record_refuse_data_journal() {
    for mode in [Mode::Mq, Mode::None] {
        let r = new_fs_with(mode, SsdProfile::optane_905p(), 65536, 1, dj());
        let Err(e) = r else {
            panic!("{mode:?} mounted with data=journal");
        };
        assert!(matches!(e, FsError::Unsupported(_)), "{mode:?}: {e:?}");
        assert!(e.to_string().contains("data=journal"), "{e}");
    }
}

/// A write larger than the log: its pages join the running transaction
/// as they are written, each transaction takes at most a quarter of the
/// log (JBD2's `j_max_transaction_buffers`) and the writer waits for a
/// full one's commit to start, so the file commits in several
/// transactions, each holding the data its allocations expose, and reads
/// back after a remount. Without the wait one transaction would carry the
/// whole write and could never fit the log.
#[test]
fn a_write_larger_than_the_log_commits_in_quarter_log_transactions() {
    for mode in [Mode::Classic, Mode::Horae] {
        let t = setup_profile(mode, 1 << 15, 1, 16384, dj()).expect("mounts");
        let (fs, m) = (t.fs.clone(), t.machine.clone());
        let log = fs.superblock().area_blocks;
        let data: Vec<u8> = (0..(2 * log as usize + 5) * 4096)
            .map(|j| (j / 4096 * 13 + j) as u8)
            .collect();
        let want = data.clone();
        let (stats, got) =
            t.ex.block_on(async move {
                let c = Ctx::on(0);
                fs.create_path(c, "/big").await?;
                let n = fs.write_path(c, "/big", 0, &data).await?;
                assert_eq!(n, data.len(), "{mode:?}: the whole write");
                fs.fsync_path(c, "/big").await?;
                let stats = fs.pipeline_stats().expect("a jbd journal");
                fs.unmount(c).await?;
                drop(fs);
                let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await?;
                let fs = mount(&dev, c, dj()).await?;
                let got = fs.read_path(c, "/big").await?;
                fs.unmount(c).await?;
                Ok::<_, FsError>((stats, got))
            })
            .unwrap()
            .unwrap();
        assert!(got == want, "{mode:?}: /big reads back");
        assert!(
            stats.handle_waits >= 8,
            "{mode:?}: the writer waited for room: {stats:?}"
        );
        assert!(
            stats.largest_transaction <= log / 4,
            "{mode:?}: a transaction took more than a quarter of the {log}-block log: {stats:?}"
        );
        let report = fsck(&*t.ctrl.backend().clone()).unwrap();
        assert!(report.is_spotless(), "{mode:?}: {report:?}");
    }
}
