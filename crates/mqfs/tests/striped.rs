//! HoraeFS on a striped volume of two and four drives (RAID 0,
//! `mqfs::volume`): POSIX behaviour across a remount, blocks on every
//! drive, one ordering stream whose joint FLUSH reaches each drive of the
//! range once and concurrently, fsck over the members, and the typed
//! errors of a volume that does not assemble.

use std::rc::Rc;

use ccnvme::BlockDevice;
use mqfs::testing::{machine_with_drives, new_striped, StripedFs};
use mqfs::volume::{VolumeSource, DATA_OFFSET};
use mqfs::BlockSource;
use mqfs::{
    fsck, mkfs, mkfs_volume, mount, mount_volume, probe_options, Ctx, FsError, FsProfile, MkfsOptions, Mode,
    StripeOptions,
};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::{Drive, SsdProfile};
use pcie_sim::{BarKind, EventKind, Machine, TraceMode};

/// Blocks of each drive (32 MiB).
const BLOCKS: u64 = 8192;

/// File `i`'s content: `len` bytes of a pattern of its own.
fn content(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (j / 4096 * 7 + j + i * 131) as u8).collect()
}

/// Files and their sizes: small ones and one of 1 MiB (two md chunks).
const FILES: [usize; 4] = [5000, 64 << 10, 300 << 10, 1 << 20];

/// Probes the drives on ports `0..n` of `m` for HoraeFS, in `order`.
async fn probe(m: &Machine, order: &[u8]) -> Result<Vec<Rc<BlockDevice>>, FsError> {
    let mut devs = Vec::new();
    for &p in order {
        devs.push(BlockDevice::probe(m, p, probe_options(Mode::Horae)).await?);
    }
    Ok(devs)
}

#[test]
fn files_survive_a_remount_on_two_and_four_drives_with_blocks_on_every_drive() {
    for members in [2u8, 4] {
        let t = new_striped(SsdProfile::flash_vwc(), members, BLOCKS, 2, TraceMode::Off).unwrap();
        let StripedFs {
            ex,
            machine,
            ctrls,
            fs,
            ..
        } = t;
        let stripe = fs.volume().stripe().expect("a striped volume");
        assert_eq!(stripe.members, members);
        assert_eq!(fs.superblock().blocks, stripe.blocks());
        let m = machine.clone();
        // Reassembled from the devices in reverse order: the labels give
        // the roles.
        let order: Vec<u8> = (0..members).rev().collect();
        let read = ex
            .block_on(async move {
                let c = Ctx::on(0);
                fs.mkdir_path(c, "/d").await?;
                for (i, len) in FILES.iter().enumerate() {
                    let p = format!("/d/f{i}");
                    fs.create_path(c, &p).await?;
                    fs.write_path(c, &p, 0, &content(i, *len)).await?;
                    fs.fsync_path(c, &p).await?;
                }
                fs.unmount(c).await?;
                drop(fs);
                let devs = probe(&m, &order).await?;
                let fs = mount_volume(&devs, c, FsProfile::default()).await?;
                assert_eq!(fs.volume().devices().len(), members as usize);
                let mut read = Vec::new();
                for i in 0..FILES.len() {
                    read.push(fs.read_path(c, &format!("/d/f{i}")).await?);
                }
                fs.unmount(c).await?;
                Ok::<_, FsError>(read)
            })
            .unwrap()
            .unwrap();
        for (i, len) in FILES.iter().enumerate() {
            assert!(
                read[i] == content(i, *len),
                "{members} drives: /d/f{i} reads back"
            );
        }
        // Every drive took writes past its label, and the volume's blocks
        // are spread over them (the 1 MiB file alone spans two chunks).
        let per_drive: Vec<usize> = ctrls
            .iter()
            .map(|c| {
                c.backend()
                    .written()
                    .iter()
                    .filter(|&&b| b >= DATA_OFFSET)
                    .count()
            })
            .collect();
        eprintln!("{members} drives: blocks written per drive {per_drive:?}");
        assert!(
            per_drive.iter().all(|&n| n >= 32),
            "{members} drives: {per_drive:?}"
        );
        // fsck reads the volume through its members, in any order.
        let backends: Vec<_> = ctrls.iter().rev().map(|c| c.backend().clone()).collect();
        let sources: Vec<&dyn BlockSource> = backends.iter().map(|b| &**b as &dyn BlockSource).collect();
        let vol = VolumeSource::assemble(&sources).unwrap();
        let report = fsck(&vol).unwrap();
        assert!(report.is_spotless(), "{members} drives: {report:?}");
        // One member alone is not a file system fsck can check.
        assert!(fsck(&*backends[0]).is_err());
    }
}

/// Trace positions of the `FLUSH_DONE` events of each of `ports` ports in
/// `from..`.
fn flush_dones(m: &Machine, from: usize, ports: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); ports];
    for (i, e) in m.trace().entries().iter().enumerate().skip(from) {
        if e.kind == EventKind::Device && e.code == FLUSH_DONE {
            out[e.source as usize].push(i);
        }
    }
    out
}

/// Trace position of the last host write to port `port`'s register BAR (a
/// doorbell) in `from..to`.
fn last_doorbell(m: &Machine, from: usize, to: usize, port: u8) -> Option<usize> {
    let bar = m.bar(port, BarKind::Registers).unwrap().0;
    let size = m.layout().ports[port as usize].regs_size;
    let t = m.trace();
    t.entries()[..to]
        .iter()
        .enumerate()
        .skip(from)
        .rev()
        .find(|(_, e)| e.kind == EventKind::MmioWrite && (bar..bar + size).contains(&e.addr))
        .map(|(i, _)| i)
}

/// Writes a file whose blocks span both members and fsyncs it on a
/// 2-drive volume of drives with a volatile cache, HoraeFS with the
/// driver's `faults`; returns each port's `FLUSH_DONE` positions during
/// the fsync and the last doorbell of each port before its first flush
/// completed.
fn fsync_flushes(faults: ccnvme::DriverFaults) -> (Vec<Vec<usize>>, Vec<Option<usize>>) {
    let mut o = probe_options(Mode::Horae);
    o.profile.faults = faults;
    let (m, from) = fsync_on_two_drives(Mode::Horae, o, FsProfile::default());
    let done = flush_dones(&m, from, 2);
    let rung = (0..2u8)
        .map(|p| last_doorbell(&m, from, *done[p as usize].first()?, p))
        .collect();
    (done, rung)
}

/// The machine and the trace position before the fsync of a file whose
/// blocks span both members of a 2-drive volume of drives with a volatile
/// cache, in `mode`, the drives probed with `probe`, mounted with
/// `profile`.
fn fsync_on_two_drives(mode: Mode, probe: ccnvme::ProbeOptions, profile: FsProfile) -> (Machine, usize) {
    let drives = (0..2)
        .map(|_| Drive::fresh(SsdProfile::flash_vwc(), BLOCKS))
        .collect();
    let (ex, m, _ctrls) = machine_with_drives(drives, 2, TraceMode::Events, 1);
    let m2 = m.clone();
    let from = ex
        .block_on(async move {
            let c = Ctx::on(0);
            let mut devs = Vec::new();
            for port in 0..2 {
                devs.push(BlockDevice::probe(&m2, port, probe.clone()).await?);
            }
            let mut opts = MkfsOptions::new(mode);
            opts.journal_blocks = Some(2048);
            mkfs_volume(&devs, c, &opts, StripeOptions::default()).await?;
            let fs = mount_volume(&devs, c, profile).await?;
            fs.create_path(c, "/f").await?;
            fs.sync(c).await?;
            let from = m2.trace().entries().len();
            fs.write_path(c, "/f", 0, &content(0, 1 << 20)).await?;
            fs.fsync_path(c, "/f").await?;
            Ok::<_, FsError>(from)
        })
        .unwrap()
        .unwrap();
    (m, from)
}

#[test]
fn an_fsync_sends_one_flush_to_each_drive_at_once() {
    let (done, rung) = fsync_flushes(ccnvme::DriverFaults::default());
    let counts: Vec<usize> = done.iter().map(Vec::len).collect();
    assert_eq!(counts, vec![1, 1], "one Flush reached each drive");
    // The joint FLUSH of the transaction: both drives' Flush commands were
    // rung before either completed.
    let (d0, d1) = (rung[0].unwrap(), rung[1].unwrap());
    assert!(
        d0 < done[1][0] && d1 < done[0][0],
        "doorbells {rung:?}, done {done:?}"
    );
    eprintln!("fsync of a 1 MiB file on 2 drives: Flush commands per drive {counts:?}");
}

#[test]
fn a_volume_that_does_not_assemble_is_a_typed_error() {
    let drives = (0..3)
        .map(|_| Drive::fresh(SsdProfile::flash_vwc(), BLOCKS))
        .collect();
    let (ex, m, _ctrls) = machine_with_drives(drives, 1, TraceMode::Off, 1);
    let errors = ex
        .block_on(async move {
            let c = Ctx::on(0);
            let devs = probe(&m, &[0, 1, 2]).await?;
            let opts = MkfsOptions::new(Mode::Horae);
            // MQFS's ccNVMe transactions are per device: it does not stripe.
            let mq = mkfs_volume(
                &devs[..2],
                c,
                &MkfsOptions::new(Mode::Mq),
                StripeOptions::default(),
            )
            .await;
            // A volume of one drive, and a chunk of nothing.
            let one = mkfs_volume(&devs[..1], c, &opts, StripeOptions::default()).await;
            let zero = mkfs_volume(&devs[..2], c, &opts, StripeOptions { chunk_blocks: 0 }).await;
            mkfs_volume(&devs[..2], c, &opts, StripeOptions::default()).await?;
            // Drive 2 holds a plain file system of its own.
            mkfs(&devs[2], c, &opts).await?;
            let missing = mount_volume(&devs[..1], c, FsProfile::default())
                .await
                .map(|_| ());
            let foreign = mount_volume(&[devs[0].clone(), devs[2].clone()], c, FsProfile::default())
                .await
                .map(|_| ());
            let twice = mount_volume(&[devs[0].clone(), devs[0].clone()], c, FsProfile::default())
                .await
                .map(|_| ());
            let alone = mount(&devs[1], c, FsProfile::default()).await.map(|_| ());
            Ok::<_, FsError>([
                mq.map(|_| ()),
                one.map(|_| ()),
                zero.map(|_| ()),
                missing,
                foreign,
                twice,
                alone,
            ])
        })
        .unwrap()
        .unwrap();
    let want = [
        "an MQFS (its ccNVMe transactions are per device) does not run on a striped volume",
        "2 to 4 members",
        "chunk of 0",
        "missing member 1",
        "device 1 is not a member",
        "both claim member 0",
        "member 1 of a striped volume of 2",
    ];
    for (e, w) in errors.iter().zip(want) {
        let e = e.as_ref().expect_err(w);
        assert!(matches!(e, FsError::Volume(_)), "{e:?}");
        let line = e.to_string();
        assert!(
            line.contains(w) && !line.contains('\n'),
            "{line:?} should say {w:?}"
        );
    }
}

#[test]
fn without_the_joint_flush_a_drive_of_the_range_is_not_flushed() {
    // The fault switch flushes only the drive of the last entry before the
    // flush point, as a per-device FLUSH would: the other drive's part of
    // the transaction stays in its volatile cache.
    let faults = ccnvme::DriverFaults {
        horae_no_joint_flush: true,
        ..Default::default()
    };
    let (done, _) = fsync_flushes(faults);
    let (fine, _) = fsync_flushes(ccnvme::DriverFaults::default());
    let counts = |d: &Vec<Vec<usize>>| d.iter().map(Vec::len).collect::<Vec<_>>();
    eprintln!(
        "Flush commands per drive: joint {:?}, fault {:?}",
        counts(&fine),
        counts(&done)
    );
    assert!(
        counts(&done).iter().sum::<usize>() < counts(&fine).iter().sum::<usize>(),
        "fault {:?}, joint {:?}",
        counts(&done),
        counts(&fine)
    );
}

/// Overwrites of synced blocks on both members are redirected to each
/// member's p-area (the same LBAs on both, in the volume's tail range,
/// `mqfs::volume`), and after a power failure right after the fsync,
/// recovery over both drives commits the prepare writes home: the
/// remount reads the new content, and fsck finds the volume spotless.
#[test]
fn overwrites_on_both_members_go_to_their_p_areas_and_survive_a_crash() {
    use mqfs::layout::BLOCK;
    use nvme_ctrl::{ControllerConfig, Media};

    let ssd = SsdProfile::optane_905p();
    let t = new_striped(ssd.clone(), 2, BLOCKS, 1, TraceMode::Off).unwrap();
    let StripedFs {
        ex,
        machine,
        ctrls,
        fs,
        ..
    } = t;
    // Two chunks: the file has blocks on both members.
    let len = 2 * 128 * 4096;
    let fs2 = fs.clone();
    let (s0, s1) = ex
        .block_on(async move {
            let c = Ctx::on(0);
            fs2.create_path(c, "/a").await?;
            fs2.write_path(c, "/a", 0, &vec![0x11; len]).await?;
            fs2.fsync_path(c, "/a").await?;
            let s0 = fs2.pipeline_stats().expect("a jbd journal");
            fs2.write_path(c, "/a", 0, &vec![0x22; len]).await?;
            fs2.fsync_path(c, "/a").await?;
            let s1 = fs2.pipeline_stats().expect("a jbd journal");
            Ok::<_, FsError>((s0, s1))
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        s1.redirected - s0.redirected,
        256,
        "every overwrite is redirected"
    );
    let sb = fs.superblock();
    let p_lba = fs.volume().tail_lba(sb.p_area_start(), sb.p_area_blocks).unwrap();
    // Power fails now: each drive's media and PMR as they are.
    let mut drives = Vec::new();
    let mut in_p_area = Vec::new();
    for (port, ctrl) in ctrls.iter().enumerate() {
        let mut media = Media::memory(BLOCKS);
        let mut n = 0;
        for b in 0..BLOCKS {
            let mut buf = Box::new([0u8; BLOCK]);
            ctrl.backend().peek(b, &mut buf);
            if (p_lba..p_lba + sb.p_area_blocks).contains(&b) && buf.iter().all(|x| *x == 0x22) {
                n += 1;
            }
            media.write(b, &std::sync::Arc::new(*buf));
        }
        in_p_area.push(n);
        drives.push(nvme_ctrl::Drive {
            config: ControllerConfig::new(ssd.clone()),
            media,
            pmr: machine.pmr_image(port as u8),
        });
    }
    assert!(
        in_p_area.iter().all(|&n| n > 0),
        "each member's p-area holds prepare writes: {in_p_area:?}"
    );
    drop((fs, ctrls, ex));
    let (ex, m, ctrls) = mqfs::testing::machine_with_drives(drives, 1, TraceMode::Off, 2);
    let got = ex
        .block_on(async move {
            let devs = probe(&m, &[1, 0]).await?;
            let fs = mount_volume(&devs, Ctx::on(0), FsProfile::default()).await?;
            let got = fs.read_path(Ctx::on(0), "/a").await?;
            fs.unmount(Ctx::on(0)).await?;
            Ok::<_, FsError>(got)
        })
        .unwrap()
        .unwrap();
    assert!(got == vec![0x22; len], "the fsynced overwrites survived");
    let backends: Vec<_> = ctrls.iter().map(|c| c.backend().clone()).collect();
    let sources: Vec<&dyn BlockSource> = backends.iter().map(|b| &**b as &dyn BlockSource).collect();
    let report = fsck(&VolumeSource::assemble(&sources).unwrap()).unwrap();
    assert!(report.is_spotless(), "{report:?}");
}

/// Ext4 (`classic`) on a 2-drive volume of drives with a volatile cache,
/// mounted with `profile`: each port's `FLUSH_DONE` count during an fsync
/// of a file whose blocks span both members.
fn classic_fsync_flushes(profile: FsProfile) -> Vec<usize> {
    let (m, from) = fsync_on_two_drives(Mode::Classic, probe_options(Mode::Classic), profile);
    flush_dones(&m, from, 2).iter().map(Vec::len).collect()
}

/// md's flush of a PREFLUSH write (`md_flush_request`): the commit record
/// of ext4 on a striped volume flushes both members, so the log blocks on
/// the other member are durable before the record; with the fault the
/// PREFLUSH reaches the record's member alone.
#[test]
fn ext4s_commit_record_on_a_striped_volume_flushes_every_member() {
    let counts = classic_fsync_flushes(FsProfile::default());
    assert!(counts.iter().all(|&n| n >= 1), "every member flushed: {counts:?}");
    let faulty = classic_fsync_flushes(FsProfile {
        md_flush_members: false,
        ..FsProfile::default()
    });
    assert!(
        faulty.contains(&0),
        "without md's flush one member is never flushed: {faulty:?}"
    );
}

/// Ext4 and Ext4-NJ run striped and keep their files across a remount;
/// fsck checks the volume clean.
#[test]
fn ext4_and_ext4_nj_run_on_a_striped_volume() {
    for mode in [Mode::Classic, Mode::None] {
        let drives = (0..2)
            .map(|_| Drive::fresh(SsdProfile::flash_vwc(), BLOCKS))
            .collect();
        let (ex, m, ctrls) = machine_with_drives(drives, 2, TraceMode::Off, 1);
        let read = ex
            .block_on(async move {
                let c = Ctx::on(0);
                let probe_all = || async {
                    let mut devs = Vec::new();
                    for port in 0..2 {
                        devs.push(BlockDevice::probe(&m, port, probe_options(mode)).await?);
                    }
                    Ok::<_, FsError>(devs)
                };
                let devs = probe_all().await?;
                let mut opts = MkfsOptions::new(mode);
                opts.journal_blocks = Some(2048);
                mkfs_volume(&devs, c, &opts, StripeOptions::default()).await?;
                let fs = mount_volume(&devs, c, FsProfile::default()).await?;
                for (i, len) in FILES.iter().enumerate() {
                    fs.create_path(c, &format!("/f{i}")).await?;
                    fs.write_path(c, &format!("/f{i}"), 0, &content(i, *len)).await?;
                }
                // Unmount shuts the drives down: probe them again.
                fs.unmount(c).await?;
                drop(fs);
                let fs = mount_volume(&probe_all().await?, c, FsProfile::default()).await?;
                let mut read = Vec::new();
                for i in 0..FILES.len() {
                    read.push(fs.read_path(c, &format!("/f{i}")).await?);
                }
                fs.unmount(c).await?;
                Ok::<_, FsError>(read)
            })
            .unwrap()
            .unwrap();
        for (i, (got, len)) in read.iter().zip(FILES).enumerate() {
            assert_eq!(got, &content(i, len), "{mode:?}: file {i}");
        }
        let backends: Vec<_> = ctrls.iter().map(|c| c.backend().clone()).collect();
        let sources: Vec<&dyn BlockSource> = backends.iter().map(|b| &**b as &dyn BlockSource).collect();
        let vol = VolumeSource::assemble(&sources).unwrap();
        let report = fsck(&vol).unwrap();
        assert!(report.is_spotless(), "{mode:?}: {report:?}");
    }
}
