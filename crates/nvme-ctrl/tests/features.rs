//! Features and extensions: interrupt coalescing, Number of Queues, the
//! volatile write cache switch, the PMR registers, and a submission queue
//! in the PMR rung through a PMR doorbell word (the vendor-specific
//! extension that models ccNVMe's ideal device, Figure 9(a)).

mod common;

use nvme_ctrl::SsdProfile;
use nvme_spec::command::SubmissionEntry;
use nvme_spec::features::{FeatureId, NumberOfQueues};
use nvme_spec::regs::{self, PmrCap};
use nvme_spec::traffic;
use pcie_sim::{BarKind, BusAddr, EventKind, Purpose, TraceMode};

#[test]
fn interrupt_coalescing_aggregates_completions() {
    let (ex, m, _ctrl, host) = common::setup(SsdProfile::optane_905p(), 256, TraceMode::Off);
    let h = host.clone();
    let buf = m.memory().alloc(4096).unwrap();
    let m2 = m.clone();
    ex.block_on(async move {
        h.enable(16).await.unwrap();
        // Threshold 4 entries (0-based 3), time 200 us.
        let c = h
            .admin(SubmissionEntry::set_features(
                0,
                FeatureId::InterruptCoalescing as u8,
                0x0203,
            ))
            .await
            .unwrap();
        assert!(c.status.is_success());
        h.create_io_pair(1, 64).await.unwrap();
        let before = m2.interrupts().delivered(1);
        let mut cids = Vec::new();
        for i in 0..8u64 {
            cids.push(
                h.submit(1, SubmissionEntry::write(0, 1, i, 1, buf.0, 0, false))
                    .await
                    .unwrap(),
            );
        }
        for cid in cids {
            assert!(h.wait(1, cid).await.unwrap().status.is_success());
        }
        assert_eq!(
            m2.interrupts().delivered(1) - before,
            2,
            "8 completions, 2 interrupts"
        );
        // A lone completion is signalled when the aggregation time runs out.
        let t0 = m2.sim().now();
        h.io(1, SubmissionEntry::write(0, 1, 9, 1, buf.0, 0, false))
            .await
            .unwrap();
        assert!((m2.sim().now() - t0).as_us_f64() >= 200.0);
    })
    .unwrap();
}

#[test]
fn number_of_queues_and_write_cache_switch() {
    let (ex, _m, ctrl, host) = common::setup(SsdProfile::flash_vwc(), 256, TraceMode::Off);
    let h = host.clone();
    ex.block_on(async move {
        h.enable(16).await.unwrap();
        let c = h
            .admin(SubmissionEntry::set_features(
                0,
                FeatureId::NumberOfQueues as u8,
                NumberOfQueues { sq: 200, cq: 2 }.to_dw(),
            ))
            .await
            .unwrap();
        let got = NumberOfQueues::from_dw(c.dw0).unwrap();
        assert_eq!((got.sq, got.cq), (64, 2), "capped at the controller's 64");
        // Queue 3 is beyond the 2 granted completion queues... and 64 SQs:
        // a CQ with id 65 is refused.
        let (c1, _) = h.create_io_pair(65, 8).await.unwrap();
        assert!(!c1.status.is_success());
        let c = h
            .admin(SubmissionEntry::set_features(
                0,
                FeatureId::VolatileWriteCache as u8,
                0,
            ))
            .await
            .unwrap();
        assert!(c.status.is_success());
        let c = h
            .admin(SubmissionEntry::get_features(
                0,
                FeatureId::VolatileWriteCache as u8,
            ))
            .await
            .unwrap();
        assert_eq!(c.dw0 & 1, 0);
    })
    .unwrap();
    assert!(!ctrl.backend().cache_enabled());
    // A drive without a volatile cache refuses to switch it.
    let (ex, _m, _ctrl, host) = common::setup(SsdProfile::optane_905p(), 256, TraceMode::Off);
    let h = host.clone();
    ex.block_on(async move {
        h.enable(16).await.unwrap();
        let c = h
            .admin(SubmissionEntry::set_features(
                0,
                FeatureId::VolatileWriteCache as u8,
                1,
            ))
            .await
            .unwrap();
        assert_eq!(c.status, nvme_spec::completion::Status::INVALID_FIELD);
    })
    .unwrap();
}

#[test]
fn pmr_submission_queue_rung_through_a_pmr_doorbell_word() {
    let (ex, m, ctrl, host) = common::setup(SsdProfile::optane_905p(), 256, TraceMode::Events);
    let h = host.clone();
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let data = m.memory().alloc(4096).unwrap();
    m.memory().write(data, &common::pattern(7, 3)).unwrap();
    let m2 = m.clone();
    ex.block_on(async move {
        let cap = PmrCap(h.read32(regs::PMRCAP).await.unwrap());
        assert!(cap.rds() && cap.wds());
        assert_eq!(cap.pmrwbm() & 1, 1, "a PMR read orders earlier writes");
        // Disabled at reset: writes are dropped.
        assert_eq!(
            h.read32(regs::PMRSTS).await.unwrap() >> 8 & 1,
            1,
            "NRDY while disabled"
        );
        h.write32(regs::PMRCTL, 1).await.unwrap();
        assert_eq!(h.read32(regs::PMRSTS).await.unwrap() >> 8 & 1, 0);
        h.enable(16).await.unwrap();
        // CQ 1 in host memory; SQ 1 in the PMR at offset 4096, doorbell word at 0.
        let cq = m2.memory().alloc(4096).unwrap();
        let c = h
            .admin(SubmissionEntry::create_io_cq(0, 1, 16, cq.0, 1, true))
            .await
            .unwrap();
        assert!(c.status.is_success());
        let mut sq = SubmissionEntry::create_io_sq(0, 1, 16, 4096, 1, 0);
        sq.set_sq_in_pmr(true);
        sq.set_pmr_doorbell(Some(0));
        let c = h.admin(sq).await.unwrap();
        assert!(c.status.is_success(), "{}", c.status);
        // The host stores the entry with WC stores, flushes, then writes
        // the doorbell word, flushes; no BAR0 doorbell is written.
        let core = h.core.clone();
        let mut w = SubmissionEntry::write(9, 1, 7, 1, data.0, 0, false);
        w.set_txid(42);
        core.wc_store(pmr + 4096, &w.to_bytes(), traffic::QUEUE_ENTRY, 0)
            .await
            .unwrap();
        core.mfence().await.unwrap();
        core.mmio_read(pmr, &mut [], Purpose::FLUSH_READ, 0)
            .await
            .unwrap();
        core.wc_store(pmr, &1u32.to_le_bytes(), traffic::DOORBELL, 0)
            .await
            .unwrap();
        core.mfence().await.unwrap();
        core.mmio_read(pmr, &mut [], Purpose::FLUSH_READ, 0)
            .await
            .unwrap();
        m2.interrupts().wait(1).await.unwrap();
        let mut raw = [0u8; 16];
        m2.memory().read(cq, &mut raw).unwrap();
        let e = nvme_spec::completion::CompletionEntry::from_bytes(&raw);
        assert!(e.status.is_success());
        assert_eq!((e.cid, e.sq_head, e.phase), (9, 1, true));
        let _ = BusAddr(0);
    })
    .unwrap();
    ex.run();
    let mut blk = [0u8; 4096];
    ctrl.backend().media().read(7, &mut blk);
    assert_eq!(&blk[..], &common::pattern(7, 3)[..]);
    // The entry was read inside the device: the only queue-entry DMA reads
    // are the admin queue's.
    let t = m.trace();
    let io_fetches = t
        .entries()
        .iter()
        .filter(|e| e.kind == EventKind::DmaRead && e.purpose == traffic::QUEUE_ENTRY && e.attr >> 16 == 1)
        .count();
    assert_eq!(io_fetches, 0);
}
