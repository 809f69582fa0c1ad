//! HoraeFS's commit pipeline (Horae 5.6.2 on BarrierFS's split of JBD2):
//! fsync callers dispatch their own data as ordered writes, the commit
//! thread dispatches the next transaction while the previous one is in
//! flight, and the flush stage sends one joint FLUSH per transaction and
//! none on a drive without a volatile write cache.
//!
//! Seen through the journal's pipeline counters ([`mqfs::Fs::pipeline_stats`])
//! and the bus trace: the controller records a `FLUSH_DONE` device event
//! for every Flush command it executes (the block layer drops a Flush
//! before it reaches a drive without a volatile cache).

use std::rc::Rc;

use mqfs::testing::{format_and_mount, machine};
use mqfs::{Ctx, Fs, FsProfile, Mode};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::SsdProfile;
use pcie_sim::{join_all, EventKind, Machine, SimDuration, TraceMode};

const BLOCKS: u64 = 16384;
/// Two application cores and the journal threads' core.
const CORES: usize = 3;

/// A HoraeFS on `ssd` with the journal threads on the last core, the bus
/// trace on (events, no payloads), and `/a` and `/b` created and synced.
fn horae_on(ssd: SsdProfile) -> (pcie_sim::Executor, Machine, Rc<Fs>) {
    let (ex, m, _ctrl) = machine(ssd, BLOCKS, CORES, TraceMode::Events, 1);
    let m2 = m.clone();
    let fs = ex
        .block_on(async move {
            let profile = FsProfile {
                commit_core: CORES - 1,
                ..FsProfile::default()
            };
            let (_, fs) = format_and_mount(&m2, Mode::Horae, BLOCKS, |_| {}, profile).await?;
            for p in ["/a", "/b"] {
                fs.create_path(Ctx::on(0), p).await?;
            }
            fs.sync(Ctx::on(0)).await?;
            Ok::<_, mqfs::FsError>(fs)
        })
        .expect("setup finishes")
        .expect("setup succeeds");
    (ex, m, fs)
}

/// Flush commands the drive executed since trace entry `from`.
fn flushes_since(m: &Machine, from: usize) -> usize {
    m.trace().entries()[from..]
        .iter()
        .filter(|e| e.kind == EventKind::Device && e.code == FLUSH_DONE)
        .count()
}

/// Thread A appends to `/a` and fsyncs; thread B waits until A's
/// transaction is dispatched (the pipeline's commit counter moves), then
/// appends to `/b` and fsyncs. Returns the trace position before them.
fn two_fsyncs_one_after_dispatch(ex: &pcie_sim::Executor, m: &Machine, fs: &Rc<Fs>) -> usize {
    let from = m.trace().entries().len();
    let before = fs.pipeline_stats().expect("a jbd journal").commits;
    let (fs2, m2) = (fs.clone(), m.clone());
    ex.block_on(async move {
        let a = {
            let fs = fs2.clone();
            m2.sim().spawn(async move {
                let c = Ctx::on(0);
                fs.write_path(c, "/a", 0, &[0xA1; 4096]).await?;
                fs.fsync_path(c, "/a").await
            })
        };
        let b = {
            let (fs, m) = (fs2.clone(), m2.clone());
            m2.sim().spawn(async move {
                let c = Ctx::on(1);
                while fs.pipeline_stats().is_some_and(|s| s.commits == before) {
                    m.sim().sleep(SimDuration::from_ns(500)).await;
                }
                fs.write_path(c, "/b", 0, &[0xB2; 4096]).await?;
                fs.fsync_path(c, "/b").await
            })
        };
        for r in join_all(vec![a, b]).await {
            r.expect("fsync succeeds");
        }
    })
    .expect("the fsyncs finish");
    from
}

#[test]
fn the_next_transaction_is_dispatched_while_the_previous_is_in_flight() {
    let (ex, m, fs) = horae_on(SsdProfile::flash_vwc());
    let s0 = fs.pipeline_stats().expect("a jbd journal");
    let from = two_fsyncs_one_after_dispatch(&ex, &m, &fs);
    let s = fs.pipeline_stats().expect("a jbd journal");
    assert_eq!(s.commits - s0.commits, 2, "one transaction per fsync: {s:?}");
    assert!(
        s.max_in_flight >= 2 && s.overlapped > s0.overlapped,
        "B's transaction must be dispatched before A's is durable: {s:?}"
    );
    // Each fsync dispatched its own data from its own context.
    assert_eq!(s.caller_data_epochs - s0.caller_data_epochs, 2, "{s:?}");
    // One joint FLUSH per transaction, none between data and journal.
    assert_eq!(flushes_since(&m, from), 2);
}

#[test]
fn one_flush_per_fsync_with_a_volatile_cache_and_none_without() {
    for (ssd, per_fsync) in [(SsdProfile::flash_vwc(), 1), (SsdProfile::optane_905p(), 0)] {
        let name = ssd.name;
        let (ex, m, fs) = horae_on(ssd);
        let from = m.trace().entries().len();
        let fs2 = fs.clone();
        ex.block_on(async move {
            let c = Ctx::on(0);
            for k in 0..4u64 {
                fs2.write_path(c, "/a", k * 4096, &[k as u8 + 1; 4096]).await?;
                fs2.fsync_path(c, "/a").await?;
            }
            Ok::<_, mqfs::FsError>(())
        })
        .expect("the fsyncs finish")
        .expect("the fsyncs succeed");
        assert_eq!(flushes_since(&m, from), 4 * per_fsync, "{name}");
    }
}

#[test]
fn fdatasync_of_data_alone_still_flushes_once() {
    // An overwrite of a block already on disk dirties no metadata that
    // fdatasync needs: no transaction carries the data, so the caller's
    // own joint FLUSH makes it durable.
    let (ex, m, fs) = horae_on(SsdProfile::flash_vwc());
    let fs2 = fs.clone();
    let from = ex
        .block_on({
            let m = m.clone();
            async move {
                let c = Ctx::on(0);
                fs2.write_path(c, "/a", 0, &[1; 4096]).await?;
                fs2.fsync_path(c, "/a").await?;
                let ino = fs2.lookup(c, 2, "a").await?.ino;
                let from = m.trace().entries().len();
                fs2.write(c, ino, 0, &[2; 4096]).await?;
                fs2.fdatasync(c, ino).await?;
                Ok::<_, mqfs::FsError>(from)
            }
        })
        .expect("finishes")
        .expect("succeeds");
    assert_eq!(flushes_since(&m, from), 1);
}

/// Overwrites `n` synced blocks of `/a` and fsyncs, on a HoraeFS whose
/// p-area has `p_area` blocks, then cuts the power: returns the pipeline
/// counters' redirected writes, the p-area blocks holding the new content
/// at the crash, and `/a` as the remount reads it.
fn overwrite_then_crash(p_area: Option<u64>, n: usize) -> (u64, usize, Vec<u8>) {
    use ccnvme::BlockDevice;
    use mqfs::layout::BLOCK;
    use mqfs::testing::machine_after;
    use mqfs::{mount, probe_options};
    use nvme_ctrl::Media;

    let ssd = SsdProfile::optane_905p();
    let (ex, m, ctrl) = machine(ssd.clone(), BLOCKS, 1, TraceMode::Off, 1);
    let m2 = m.clone();
    let len = n * 4096;
    let (fs, s0, s1) = ex
        .block_on(async move {
            let tune = |o: &mut mqfs::MkfsOptions| {
                if let Some(p) = p_area {
                    o.p_area_blocks = Some(p);
                }
            };
            let (_, fs) = format_and_mount(&m2, Mode::Horae, BLOCKS, tune, FsProfile::default()).await?;
            let c = Ctx::on(0);
            fs.create_path(c, "/a").await?;
            fs.write_path(c, "/a", 0, &vec![0x11; len]).await?;
            fs.fsync_path(c, "/a").await?;
            let s0 = fs.pipeline_stats().expect("a jbd journal");
            fs.write_path(c, "/a", 0, &vec![0x22; len]).await?;
            fs.fsync_path(c, "/a").await?;
            let s1 = fs.pipeline_stats().expect("a jbd journal");
            Ok::<_, mqfs::FsError>((fs, s0, s1))
        })
        .expect("the fsyncs finish")
        .expect("the fsyncs succeed");
    let sb = fs.superblock();
    if let Some(p) = p_area {
        assert_eq!(sb.p_area_blocks, p, "mkfs reserves the p-area asked for");
    }
    // Power fails now: the media and the PMR as they are.
    let mut media = Media::memory(BLOCKS);
    let mut in_p_area = 0;
    for b in 0..BLOCKS {
        let mut buf = Box::new([0u8; BLOCK]);
        ctrl.backend().peek(b, &mut buf);
        if b >= sb.p_area_start() && buf.iter().all(|x| *x == 0x22) {
            in_p_area += 1;
        }
        media.write(b, &std::sync::Arc::new(*buf));
    }
    let pmr = m.pmr_image(0);
    drop((fs, ex));
    let (ex, m, _ctrl) = machine_after(ssd, media, pmr, 1, TraceMode::Off, 2);
    let got = ex
        .block_on(async move {
            let dev = BlockDevice::probe(&m, 0, probe_options(Mode::Horae)).await?;
            let fs = mount(&dev, Ctx::on(0), FsProfile::default()).await?;
            fs.read_path(Ctx::on(0), "/a").await
        })
        .expect("the remount finishes")
        .expect("the remount reads /a");
    (s1.redirected - s0.redirected, in_p_area, got)
}

/// An overwrite of a synced block is an in-place write (HoraeFS detects
/// it from `BH_New`, Horae 5.6.2): the ordering layer redirects it to the
/// p-area mkfs reserved at the end of the device (Horae 5.4), and after a
/// power failure right after the fsync, recovery (which commits the
/// durable prepare write) and the remount read the new content.
#[test]
fn an_overwrite_in_place_goes_to_the_p_area_and_survives_a_crash() {
    let (redirected, in_p_area, got) = overwrite_then_crash(None, 1);
    assert_eq!(redirected, 1, "the overwrite is redirected");
    assert_eq!(in_p_area, 1, "the prepare write is in the p-area");
    assert_eq!(got, vec![0x22; 4096], "the fsynced overwrite survived");
}

/// More overwritten blocks in one fsync than the p-area holds: HoraeFS
/// appends them as several epochs, each waiting for the eager commit of
/// the earlier ones, and everything survives the crash.
#[test]
fn more_overwrites_than_the_p_area_holds_commit_eagerly() {
    let (redirected, _, got) = overwrite_then_crash(Some(4), 10);
    assert_eq!(redirected, 10);
    assert_eq!(got, vec![0x22; 10 * 4096]);
}
