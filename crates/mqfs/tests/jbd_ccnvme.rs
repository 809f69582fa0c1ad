//! The classic journal committing through ccNVMe
//! (`JbdCommit::CcNvmeTransaction`, ccNVMe 7.5.1's "+ccNVMe"): JBD2's
//! commit thread and group commit, each commit one ccNVMe transaction
//! with no commit record and no FLUSH, recovered with the driver's report
//! of unfinished transactions. Crash states are crashfuzz's (`classic-cc`).

use ccnvme::BlockDevice;
use mqfs::layout::BLOCK;
use mqfs::testing::{format_and_mount, machine, machine_after};
use mqfs::{mount, probe_options, probe_options_for, Ctx, FsError, FsProfile, JbdCommit, Mode};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::{EventKind, TraceMode};

const BLOCKS: u64 = 16384;

fn cc_profile() -> FsProfile {
    FsProfile {
        jbd_commit: JbdCommit::CcNvmeTransaction,
        ..FsProfile::default()
    }
}

#[test]
fn the_option_asks_for_the_ccnvme_driver_only_in_classic_mode() {
    let p = cc_profile();
    assert!(probe_options_for(Mode::Classic, &p).ccnvme);
    assert!(!probe_options(Mode::Classic).ccnvme);
    assert!(!probe_options_for(Mode::Horae, &p).ccnvme);
    assert!(probe_options_for(Mode::Mq, &p).ccnvme);
    assert_eq!(FsProfile::default().jbd_commit, JbdCommit::CommitRecord);
}

/// fsync commits through a ccNVMe transaction on the commit thread's
/// queue (no FLUSH on the drive); after a power cut right after it, the
/// driver reports nothing unfinished and recovery replays the log, so the
/// file is back; mounting the image without ccNVMe is refused.
#[test]
fn an_fsynced_file_survives_a_power_cut_and_no_flush_is_sent() {
    let ssd = SsdProfile::optane_905p();
    let (ex, m, ctrl) = machine(ssd.clone(), BLOCKS, 2, TraceMode::Events, 1);
    let m2 = m.clone();
    let data = vec![0x5a; 3 * BLOCK];
    let d2 = data.clone();
    let (fs, flushes, commits) = ex
        .block_on(async move {
            let mut p = cc_profile();
            p.commit_core = 1;
            let (dev, fs) = format_and_mount(&m2, Mode::Classic, BLOCKS, |_| {}, p).await?;
            assert!(dev.recovery().is_some(), "probed with ccNVMe");
            let c = Ctx::on(0);
            fs.mkdir_path(c, "/d").await?;
            let from = m2.trace().entries().len();
            fs.mkdir_path(c, "/d/e").await?;
            fs.create_path(c, "/d/e/f").await?;
            fs.write_path(c, "/d/e/f", 0, &d2).await?;
            fs.fsync_path(c, "/d/e/f").await?;
            let flushes = m2.trace().entries()[from..]
                .iter()
                .filter(|e| e.kind == EventKind::Device && e.code == FLUSH_DONE)
                .count();
            let commits = fs.pipeline_stats().map_or(0, |s| s.commits);
            Ok::<_, FsError>((fs, flushes, commits))
        })
        .expect("finishes")
        .expect("succeeds");
    assert_eq!(flushes, 0, "no FLUSH: the ccNVMe transaction is the commit");
    assert!(commits >= 1);
    // Power fails now: the media and the PMR as they are.
    let image = || {
        let mut media = Media::memory(BLOCKS);
        for b in 0..BLOCKS {
            let mut buf = Box::new([0u8; BLOCK]);
            ctrl.backend().peek(b, &mut buf);
            media.write(b, &std::sync::Arc::new(*buf));
        }
        media
    };
    let media = image();
    let pmr = m.pmr_image(0);
    let (ex, m, _ctrl) = machine_after(ssd.clone(), media, pmr.clone(), 1, TraceMode::Off, 2);
    let got = ex
        .block_on(async move {
            let dev = BlockDevice::probe(&m, 0, probe_options_for(Mode::Classic, &cc_profile())).await?;
            let unfinished = dev.recovery().map(|r| r.unfinished.len());
            let fs = mount(&dev, Ctx::on(0), cc_profile()).await?;
            let got = fs.read_path(Ctx::on(0), "/d/e/f").await?;
            let damage = fs.journal_damage();
            Ok::<_, FsError>((got, unfinished, damage))
        })
        .expect("the remount finishes")
        .expect("the remount reads the file");
    assert_eq!(got.0, data);
    assert_eq!(got.1, Some(0));
    assert!(got.2.is_empty());
    // The same image mounted with the option on a driver without ccNVMe.
    let (ex, m, _ctrl) = machine_after(ssd, image(), pmr, 1, TraceMode::Off, 3);
    let r = ex
        .block_on(async move {
            let dev = BlockDevice::probe(&m, 0, probe_options(Mode::Classic)).await?;
            mount(&dev, Ctx::on(0), cc_profile()).await.map(|_| ())
        })
        .expect("the mount finishes");
    assert!(matches!(r, Err(FsError::Unsupported(_))), "{r:?}");
    drop(fs);
}
