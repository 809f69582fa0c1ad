//! The block layer strips FUA on a drive without a volatile write cache
//! (Linux 4.18 `generic_make_request_checks`, `BlockDevice::submit`): a
//! FUA write there costs what a plain write costs and reaches the drive as
//! a plain write, while on a drive with a volatile cache FUA still reaches
//! the drive and makes the write durable at its completion.

mod common;

use ccnvme::{Bio, BioFlags, ProbeOptions};
use nvme_ctrl::{events, Media, SsdProfile};
use pcie_sim::{EventKind, SimDuration, TraceMode};

/// Latency of one 4 KiB write with `flags` on `profile`, the number of
/// completions the drive posted as durable (`WRITE_DONE_DURABLE`), and the
/// number of Write commands the drive fetched with FUA set (CDW12 bit 30,
/// NVMe 1.4 6.15).
fn one_write(profile: SsdProfile, flags: BioFlags) -> (SimDuration, usize, usize) {
    let (ex, m, _c) = common::machine(profile, Media::memory(4096), None, TraceMode::Full);
    let dev = common::probe(
        &ex,
        &m,
        ProbeOptions {
            ccnvme: false,
            ..Default::default()
        },
    );
    let page = common::pages(&m, 1, 7);
    let m2 = m.clone();
    let took = ex
        .block_on(async move {
            let start = m2.sim().now();
            dev.submit_wait(0, &Bio::write(100, page).with(flags))
                .await
                .unwrap();
            m2.sim().now().since(start)
        })
        .unwrap();
    let durable = m
        .trace()
        .entries()
        .iter()
        .filter(|e| e.kind == EventKind::Device && e.code == events::WRITE_DONE_DURABLE)
        .count();
    let trace = m.trace();
    let fua_writes = trace
        .entries()
        .iter()
        .filter(|e| e.kind == EventKind::DmaReadCompletion && e.purpose == nvme_spec::traffic::QUEUE_ENTRY)
        .map(|e| trace.payload(e))
        .filter(|sqe| sqe.len() == 64 && sqe[0] == 0x01 && sqe[48 + 3] & 0x40 != 0)
        .count();
    (took, durable, fua_writes)
}

#[test]
fn fua_costs_nothing_on_a_drive_without_a_volatile_cache() {
    let profile = SsdProfile::intel_750();
    assert!(!profile.volatile_cache(), "the Intel 750 is power-loss protected");
    let (plain, plain_durable, _) = one_write(profile.clone(), BioFlags::NONE);
    let (fua, fua_durable, fua_sent) = one_write(profile, BioFlags::FUA);
    assert_eq!(plain, fua, "a FUA write must cost what a plain write costs");
    assert_eq!(fua_sent, 0, "FUA must not reach the drive");
    // A power-loss protected drive makes every completed write durable,
    // FUA or not.
    assert_eq!((plain_durable, fua_durable), (1, 1));
}

#[test]
fn fua_reaches_a_drive_with_a_volatile_cache() {
    let profile = SsdProfile::flash_vwc();
    assert!(profile.volatile_cache());
    let (plain, plain_durable, plain_sent) = one_write(profile.clone(), BioFlags::NONE);
    let (fua, fua_durable, fua_sent) = one_write(profile, BioFlags::FUA);
    assert_eq!((plain_durable, fua_durable), (0, 1));
    assert_eq!((plain_sent, fua_sent), (0, 1), "the FUA bit reaches the drive");
    assert!(fua > plain, "FUA writes through the cache: {fua:?} vs {plain:?}");
}
