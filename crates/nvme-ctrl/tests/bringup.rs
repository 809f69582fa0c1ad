//! The controller comes up exactly as a driver brings it up, through MMIO
//! and DMA only: admin queue, Identify, I/O queues, write, read back,
//! flush, shutdown.

mod common;

use nvme_ctrl::SsdProfile;
use nvme_spec::command::SubmissionEntry;
use nvme_spec::identify::{self, IdentifyController, IdentifyNamespace};
use nvme_spec::regs::{self, Cap};
use nvme_spec::traffic;
use pcie_sim::{EventKind, TraceMode};

#[test]
fn bring_up_identify_write_read_flush_shutdown() {
    let (ex, m, ctrl, host) = common::setup(SsdProfile::flash_vwc(), 1024, TraceMode::Events);
    let h = host.clone();
    let mem = m.memory();
    let buf = mem.alloc(8 * 4096).unwrap();
    let out = mem.alloc(8 * 4096).unwrap();
    for i in 0..8u64 {
        mem.write(buf + i * 4096, &common::pattern(100 + i, 1)).unwrap();
    }
    let idbuf = mem.alloc(4096).unwrap();
    let m2 = m.clone();
    let result = ex.block_on(async move {
        let cap = Cap(h.read64(regs::CAP).await.unwrap());
        assert!(cap.pmrs(), "CAP.PMRS advertises the PMR");
        assert_eq!(cap.mqes(), 4095);
        assert_eq!(h.read32(regs::VS).await.unwrap(), regs::VS_1_4);
        h.enable(32).await.unwrap();

        let c = h
            .admin(SubmissionEntry::identify(0, identify::CNS_CONTROLLER, 0, idbuf.0))
            .await
            .unwrap();
        assert!(c.status.is_success());
        let mut raw = vec![0u8; 4096];
        m2.memory().read(idbuf, &mut raw).unwrap();
        let id = IdentifyController::from_bytes(&raw).unwrap();
        assert_eq!(identify::trim_ascii(&id.mn), "SIM FLASH VWC");
        assert_eq!(id.vwc & 1, 1, "volatile write cache reported");
        assert_eq!(id.mdts, 5);

        let c = h
            .admin(SubmissionEntry::identify(0, identify::CNS_NAMESPACE, 1, idbuf.0))
            .await
            .unwrap();
        assert!(c.status.is_success());
        m2.memory().read(idbuf, &mut raw).unwrap();
        let ns = IdentifyNamespace::from_bytes(&raw).unwrap();
        assert_eq!(ns.nsze, 1024);
        assert_eq!(ns.lba_size(), Some(4096));

        let (c1, c2) = h.create_io_pair(1, 64).await.unwrap();
        assert!(c1.status.is_success() && c2.status.is_success());

        // Write 8 blocks with a PRP list (more than two pages), read back.
        let list = m2.memory().alloc(4096).unwrap();
        for i in 1..8u64 {
            m2.memory()
                .write(list + (i - 1) * 8, &(buf.0 + i * 4096).to_le_bytes())
                .unwrap();
        }
        let c = h
            .io(1, SubmissionEntry::write(0, 1, 100, 8, buf.0, list.0, false))
            .await
            .unwrap();
        assert!(c.status.is_success(), "{}", c.status);
        let olist = m2.memory().alloc(4096).unwrap();
        for i in 1..8u64 {
            m2.memory()
                .write(olist + (i - 1) * 8, &(out.0 + i * 4096).to_le_bytes())
                .unwrap();
        }
        let c = h
            .io(1, SubmissionEntry::read(0, 1, 100, 8, out.0, olist.0))
            .await
            .unwrap();
        assert!(c.status.is_success());
        let c = h.io(1, SubmissionEntry::flush(0, 1)).await.unwrap();
        assert!(c.status.is_success());
        h.shutdown().await.unwrap();
    });
    result.unwrap();
    ex.run();
    let mut got = vec![0u8; 8 * 4096];
    mem.read(out, &mut got).unwrap();
    for i in 0..8u64 {
        assert_eq!(
            &got[(i * 4096) as usize..((i + 1) * 4096) as usize],
            &common::pattern(100 + i, 1)[..]
        );
    }
    // The flush and the shutdown put everything on the media.
    assert_eq!(ctrl.backend().dirty_blocks(), 0);
    let mut blk = [0u8; 4096];
    ctrl.backend().media().read(103, &mut blk);
    assert_eq!(&blk[..], &common::pattern(103, 1)[..]);
    // Only MMIO and DMA crossed the bus.
    let c = m.counters();
    assert!(c.kind(EventKind::MmioWrite).ops > 0);
    assert!(
        c.get(EventKind::DmaRead, traffic::QUEUE_ENTRY).ops >= 7,
        "SQ entries fetched by DMA"
    );
    assert!(
        c.get(EventKind::DmaRead, traffic::PRP_LIST).ops >= 2,
        "PRP lists fetched by DMA"
    );
    assert_eq!(c.get(EventKind::DmaRead, traffic::DATA_BLOCK).ops, 8);
    assert_eq!(c.get(EventKind::DmaWrite, traffic::DATA_BLOCK).ops, 8);
}
