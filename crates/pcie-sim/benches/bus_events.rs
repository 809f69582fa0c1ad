//! Simulator speed: bus events simulated per wall-second, and the cost of
//! recording one trace entry.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcie_sim::testing::RegisterFile;
use pcie_sim::trace::NO_PAYLOAD;
use pcie_sim::{
    BarKind, BusTrace, EventKind, Executor, Machine, MachineProfile, Purpose, SimTime, TraceEntry, TraceMode,
};

/// A device streaming 256-byte DMA writes with an MSI-X every 8, and a core
/// storing 64-byte entries to the PMR with a fence every 4. Returns the
/// number of trace events.
fn workload(mode: TraceMode, rounds: u64) -> u64 {
    let ex = Executor::new(1);
    let m = Machine::new(&ex, MachineProfile::default(), mode);
    let dev = RegisterFile::attach(&m, Some(2 << 20), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let buf = m.memory().alloc(1 << 20).unwrap();
    let port = dev.port.clone();
    let sim = m.sim();
    let s2 = sim.clone();
    sim.spawn(async move {
        let data = [0x11u8; 256];
        for i in 0..rounds {
            port.dma_write(buf.bus() + (i % 4096) * 256, &data, Purpose::new(2), 0)
                .unwrap();
            if i % 8 == 7 {
                port.msix(0, 0);
            }
            s2.sleep(pcie_sim::SimDuration::from_ns(70)).await;
        }
    });
    let core = m.core(0).unwrap();
    sim.spawn(async move {
        let entry = [0x22u8; 64];
        for i in 0..rounds {
            core.wc_store(pmr + (i % 32768) * 64, &entry, Purpose::new(1), 0)
                .await
                .unwrap();
            if i % 4 == 3 {
                core.mfence().await.unwrap();
            }
        }
    });
    ex.run();
    let n = m.trace().len();
    n
}

fn bench(c: &mut Criterion) {
    let events = workload(TraceMode::Full, 20_000);
    let mut g = c.benchmark_group("simulate");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events));
    g.bench_function("bus_events_full_trace", |b| {
        b.iter(|| workload(TraceMode::Full, 20_000))
    });
    g.bench_function("bus_events_no_trace", |b| {
        b.iter(|| workload(TraceMode::Off, 20_000))
    });
    g.finish();

    let mut g = c.benchmark_group("record");
    const N: u64 = 100_000;
    g.throughput(Throughput::Elements(N));
    let payload = [0x33u8; 64];
    let mut t = BusTrace::new(TraceMode::Full);
    g.bench_function("trace_entry_with_64B_payload", |b| {
        b.iter(|| {
            // Steady state: the trace's buffers are reused, as a long run
            // reuses its grown buffers.
            t.clear();
            for i in 0..N {
                t.record(
                    TraceEntry {
                        time: SimTime(i),
                        effect: SimTime(i + 5),
                        addr: i * 64,
                        payload: NO_PAYLOAD,
                        len: 64,
                        attr: 0,
                        kind: EventKind::MmioWrite,
                        purpose: Purpose::new(1),
                        source: 0,
                        flags: 0,
                        code: 0,
                        wire_bytes: 84,
                    },
                    &payload,
                );
            }
            t.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
