//! Bad input gets a typed error or the PCIe behaviour, never a panic.

use pcie_sim::testing::{RegisterFile, DOORBELL};
use pcie_sim::{
    BarKind, BusAddr, Executor, HostAddr, Machine, MachineProfile, PcieError, Purpose, TraceMode,
};

fn setup() -> (Executor, Machine, std::rc::Rc<RegisterFile>) {
    let ex = Executor::new(0);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let dev = RegisterFile::attach(&m, Some(1 << 20), None);
    (ex, m, dev)
}

#[test]
fn access_outside_any_bar_is_unmapped() {
    let (ex, m, _dev) = setup();
    let core = m.core(0).unwrap();
    let regs = m.bar(0, BarKind::Registers).unwrap();
    let r = ex
        .block_on(async move {
            let w = core
                .mmio_write(BusAddr(0x10), &[0; 4], Purpose::UNTAGGED, 0)
                .await;
            // Straddling the end of BAR0.
            let s = core
                .mmio_write(regs + (0x4000 - 4), &[0; 8], Purpose::UNTAGGED, 0)
                .await;
            let mut b = [0u8; 4];
            let r = core
                .mmio_read(BusAddr(0xFFFF_0000), &mut b, Purpose::UNTAGGED, 0)
                .await;
            (w, s, r)
        })
        .unwrap();
    assert!(matches!(r.0, Err(PcieError::Unmapped { addr: 0x10, len: 4 })));
    assert!(matches!(r.1, Err(PcieError::Unmapped { .. })));
    assert!(matches!(r.2, Err(PcieError::Unmapped { .. })));
    assert_eq!(m.trace().len(), 0, "nothing reached the bus");
}

#[test]
fn misaligned_register_access_is_an_unsupported_request() {
    let (ex, m, dev) = setup();
    let core = m.core(0).unwrap();
    let db = m.bar(0, BarKind::Registers).unwrap() + DOORBELL;
    let read = ex
        .block_on(async move {
            // Doorbell-sized but misaligned, and aligned but 2 bytes wide.
            core.mmio_write(db + 2, &7u32.to_le_bytes(), Purpose::new(3), 0)
                .await
                .unwrap();
            core.mmio_write(db, &[1, 2], Purpose::new(3), 0).await.unwrap();
            let mut b = [0u8; 4];
            core.mmio_read(db + 1, &mut b, Purpose::new(5), 0).await
        })
        .unwrap();
    ex.run();
    assert!(matches!(read, Err(PcieError::UnsupportedRequest { .. })));
    assert_eq!(dev.doorbell_writes(), 0, "the device never saw them");
    assert_eq!(m.counters().unsupported_requests, 3);
}

#[test]
fn dma_outside_host_memory_fails_and_changes_nothing() {
    let (ex, m, dev) = setup();
    let size = m.memory().size();
    let port = dev.port.clone();
    let w = port.dma_write(BusAddr(size - 2), &[1, 2, 3, 4], Purpose::new(2), 0);
    assert!(matches!(w, Err(PcieError::OutsideHostMemory { .. })));
    let r = ex
        .block_on(async move {
            let mut b = [0u8; 64];
            port.dma_read(BusAddr(size + 4096), &mut b, Purpose::new(2), 0)
                .await
        })
        .unwrap();
    assert!(matches!(r, Err(PcieError::OutsideHostMemory { .. })));
    let mut last = [9u8; 2];
    m.memory().read(HostAddr(size - 2), &mut last).unwrap();
    assert_eq!(last, [0, 0]);
    assert_eq!(m.counters().unsupported_requests, 2);
}

#[test]
fn a_dma_read_whose_last_requests_fall_outside_host_memory_fails_whole() {
    // Split by Max_Read_Request_Size, the read's first requests are served
    // and its last are refused: the read fails (its one completion carries
    // the refusal of any request), and the next read, inside memory, gets
    // its bytes.
    let (ex, m, dev) = setup();
    let size = m.memory().size();
    let inside: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8).collect();
    m.memory().write(HostAddr(size - 4096), &inside).unwrap();
    let port = dev.port.clone();
    let (straddling, next) = ex
        .block_on(async move {
            let mut b = vec![0u8; 2048];
            let straddling = port
                .dma_read(BusAddr(size - 1024), &mut b, Purpose::new(2), 0)
                .await;
            let mut c = vec![0u8; 2048];
            let next = port
                .dma_read(BusAddr(size - 4096), &mut c, Purpose::new(2), 0)
                .await
                .map(|_| c);
            (straddling, next)
        })
        .unwrap();
    assert!(
        matches!(straddling, Err(PcieError::OutsideHostMemory { .. })),
        "{straddling:?}"
    );
    assert_eq!(next.expect("a read inside host memory"), inside);
    assert!(m.counters().unsupported_requests >= 1);
}

#[test]
fn wc_store_to_registers_and_writes_to_a_disabled_pmr_are_refused() {
    let (ex, m, dev) = setup();
    let core = m.core(0).unwrap();
    let regs = m.bar(0, BarKind::Registers).unwrap();
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    dev.set_pmr_enabled(false);
    let r = ex
        .block_on(async move {
            let a = core.wc_store(regs, &[1; 8], Purpose::UNTAGGED, 0).await;
            core.wc_store(pmr, &[1; 64], Purpose::UNTAGGED, 0).await.unwrap();
            core.mfence().await.unwrap();
            let mut b = [0u8; 8];
            let rd = core.mmio_read(pmr, &mut b, Purpose::UNTAGGED, 0).await;
            (a, rd)
        })
        .unwrap();
    ex.run();
    assert!(matches!(r.0, Err(PcieError::NotWriteCombining { .. })));
    assert!(matches!(r.1, Err(PcieError::UnsupportedRequest { .. })));
    assert_eq!(dev.pmr_writes(), 0);
    assert!(m.pmr_image(0).unwrap().to_vec().iter().all(|b| *b == 0));
}

#[test]
fn unknown_core_and_oversized_read_are_errors() {
    let (ex, m, _dev) = setup();
    assert!(matches!(m.core(99), Err(PcieError::NoSuchCore(99))));
    let core = m.core(0).unwrap();
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let r = ex
        .block_on(async move {
            let mut big = vec![0u8; (1 << 20) + 1];
            core.mmio_read(pmr, &mut big, Purpose::UNTAGGED, 0).await
        })
        .unwrap();
    assert!(matches!(r, Err(PcieError::TooLarge { .. })));
}
