//! A transfer takes exactly the time the link model says.

use std::rc::Rc;

use pcie_sim::testing::RegisterFile;
use pcie_sim::{
    BarKind, Executor, LinkProfile, Machine, MachineProfile, Purpose, SimDuration, SimTime, TraceMode,
};

fn setup() -> (Executor, Machine, Rc<RegisterFile>) {
    let ex = Executor::new(0);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
    let dev = RegisterFile::attach(&m, Some(1 << 20), None);
    (ex, m, dev)
}

fn ser(link: &LinkProfile, wire: u64) -> SimDuration {
    link.serialization(wire as u32)
}

#[test]
fn dma_write_of_4k_arrives_after_16_tlps_and_one_latency() {
    let (ex, m, dev) = setup();
    let link = LinkProfile::gen3_x4();
    let buf = m.memory().alloc(4096).unwrap();
    let data = vec![0xabu8; 4096];
    let arrival = dev.port.dma_write(buf.bus(), &data, Purpose::new(2), 0).unwrap();
    // 16 TLPs of 256 B payload, 12 B header, 8 B framing.
    let expected = SimTime::ZERO + ser(&link, 276) * 16 + link.one_way_latency;
    assert_eq!(arrival, expected);
    // One picosecond before, the last TLP has not landed; at arrival it has.
    ex.run_until(SimTime(expected.0 - 1));
    let mut last = [0u8; 1];
    m.memory().read(buf + 4095, &mut last).unwrap();
    assert_eq!(last, [0]);
    ex.run_until(expected);
    m.memory().read(buf + 4095, &mut last).unwrap();
    assert_eq!(last, [0xab]);
    let c = m.counters().get(pcie_sim::EventKind::DmaWrite, Purpose::new(2));
    assert_eq!(
        (c.ops, c.tlps, c.wire_bytes, c.payload_bytes),
        (1, 16, 16 * 276, 4096)
    );
}

#[test]
fn dma_read_of_4k_takes_requests_latency_dram_and_completions() {
    let (ex, m, dev) = setup();
    let link = LinkProfile::gen3_x4();
    let profile = MachineProfile::default();
    let buf = m.memory().alloc(4096).unwrap();
    m.memory().write(buf, &[7u8; 4096]).unwrap();
    let port = dev.port.clone();
    let sim = m.sim();
    let done = ex
        .block_on(async move {
            let mut out = vec![0u8; 4096];
            port.dma_read(buf.bus(), &mut out, Purpose::new(2), 0)
                .await
                .unwrap();
            assert!(out.iter().all(|b| *b == 7));
            sim.now()
        })
        .unwrap();
    // 8 read requests (MRRS 512) leave back to back; the last one arrives,
    // the root complex reads DRAM, then its 2 completions (MPS 256) follow
    // the 14 completions of the earlier requests on the downstream link.
    let req = ser(&link, 20);
    let cpl = ser(&link, 276);
    let first_served = SimTime::ZERO + req + link.one_way_latency + profile.host.dma_read_latency;
    // Each request is served `req` after the previous; completions are
    // longer than requests, so the downstream link is the bottleneck and
    // the completions go back to back from the first service.
    let expected = first_served + cpl * 16 + link.one_way_latency;
    assert_eq!(done, expected);
    // The requester takes each request's completions as one action when
    // its last CplD arrives, but every CplD is on the wire and in the
    // trace, each ending where the link puts it.
    let c = m
        .counters()
        .get(pcie_sim::EventKind::DmaReadCompletion, Purpose::new(2));
    assert_eq!((c.tlps, c.payload_bytes), (16, 4096));
    let cpls: Vec<SimTime> = m
        .trace()
        .entries()
        .iter()
        .filter(|e| e.kind == pcie_sim::EventKind::DmaReadCompletion)
        .map(|e| e.effect)
        .collect();
    assert_eq!(cpls.len(), 16);
    assert!(
        cpls.windows(2).all(|w| w[1] == w[0] + cpl),
        "back to back: {cpls:?}"
    );
    assert_eq!(cpls.last().copied(), Some(expected));
}

/// `dma_read_page` is `dma_read` of a page into a page of its own: the same
/// bytes, the same TLPs in the trace and the same completion time.
#[test]
fn a_page_read_is_a_dma_read_of_the_page() {
    let run = |page: bool| {
        let (ex, m, dev) = setup();
        let buf = m.memory().alloc(8192).unwrap();
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 1) as u8).collect();
        m.memory().write(buf + 4096, &bytes).unwrap();
        let port = dev.port.clone();
        let sim = m.sim();
        let (got, at) = ex
            .block_on(async move {
                let addr = (buf + 4096).bus();
                let got = if page {
                    port.dma_read_page(addr, Purpose::new(2), 0)
                        .await
                        .unwrap()
                        .to_vec()
                } else {
                    let mut out = vec![0u8; 4096];
                    port.dma_read(addr, &mut out, Purpose::new(2), 0).await.unwrap();
                    out
                };
                (got, sim.now())
            })
            .unwrap();
        assert_eq!(got, bytes, "page read: {page}");
        let t = m.trace();
        (at, t.entries().to_vec(), t.hash())
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn uncached_doorbell_write_lands_after_serialization_latency_and_service() {
    let (ex, m, dev) = setup();
    let link = LinkProfile::gen3_x4();
    let core = m.core(0).unwrap();
    let db = m.bar(0, BarKind::Registers).unwrap() + pcie_sim::testing::DOORBELL;
    let sim = m.sim();
    ex.block_on(async move {
        core.mmio_write(db, &5u32.to_le_bytes(), Purpose::new(3), 0)
            .await
            .unwrap();
    })
    .unwrap();
    // The store retires before the write lands: posted writes do not wait.
    assert!(sim.now() < SimTime::ZERO + link.one_way_latency);
    ex.run();
    let e = m.trace().entries()[0];
    let landed = SimTime::ZERO + ser(&link, 24) + link.one_way_latency + SimDuration::from_ns(50);
    assert_eq!(e.effect, landed);
    assert_eq!(dev.last_doorbell(), 5);
    assert_eq!(dev.doorbell_writes(), 1);
}
