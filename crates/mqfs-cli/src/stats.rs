//! Live figures of a mounted image: simulated time, requests served, and
//! the bus traffic since the mount, as `name value` lines.
//!
//! ```text
//! simulated_time_ns 48210332
//! fuse_requests 1210
//! mmio 2210
//! dma_q 4402
//! block_io 5120
//! irq 2201
//! ordering_mmio 0
//! flush_reads 120
//! tlps 30211
//! wire_bytes 24101223
//! payload_bytes 21034112
//! pm_stores 0
//! pm_flushes 0
//! pm_fences 0
//! pm_wpq_lines 0
//! pm_media_writes 0
//! pm_media_reads 0
//! ```
//!
//! `mmio`, `dma_q`, `block_io` and `irq` are the columns of ccNVMe Table 1
//! (`ccnvme::Traffic`): host MMIO write operations (the Horae ordering
//! queue's apart, in `ordering_mmio`), device DMA transfers of queue
//! entries, 4 KiB data blocks moved by DMA, and MSI-X messages.
//! `flush_reads` counts zero-length reads that make PMR writes persistent;
//! `tlps`, `wire_bytes` and `payload_bytes` are totals over both link
//! directions. The `pm_` lines are the persistent memory's memory-bus
//! counters (`pcie_sim::PmCounters`; all 0 on a drive image): stores
//! (cached and non-temporal), cache-line flushes (clwb, clflushopt,
//! clflush), fences (sfence, mfence), 64-byte lines that reached the
//! write pending queue, and media writes and reads in 256-byte XPLines.

use ccnvme::Traffic;
use pcie_sim::pmem::PmEventKind as K;
use pcie_sim::{Counters, Machine, PmCounters, SimTime};

use crate::rig::{Medium, Rig};

/// The counters at one instant, what later figures count from.
#[derive(Clone, Copy, Debug)]
pub struct Since {
    bus: Counters,
    pm: PmCounters,
}

impl Since {
    /// The counters of `rig` now.
    pub fn now(rig: &Rig) -> Since {
        Since {
            bus: rig.machine.counters(),
            pm: pm_counters(rig),
        }
    }
}

fn pm_counters(rig: &Rig) -> PmCounters {
    match &rig.medium {
        Medium::Pmem(pm) => pm.counters(),
        Medium::Drive { .. } => PmCounters::default(),
    }
}

/// One reading of the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Simulated time now.
    pub time: SimTime,
    /// FUSE requests served since the mount.
    pub requests: u64,
    /// Table 1 columns, TLPs and wire bytes since the mount.
    pub traffic: Traffic,
    /// Payload bytes over the link since the mount.
    pub payload_bytes: u64,
    /// The persistent memory's counters since the mount.
    pub pm: PmCounters,
}

impl Stats {
    /// Reads `rig`'s counters against the snapshot `since`.
    pub fn read(rig: &Rig, since: &Since, requests: u64) -> Stats {
        let machine: &Machine = &rig.machine;
        let c = machine.counters().since(&since.bus);
        Stats {
            time: machine.sim().now(),
            requests,
            traffic: Traffic::from_counters(&c),
            payload_bytes: c.link_total().payload_bytes,
            pm: pm_counters(rig).since(&since.pm),
        }
    }

    /// The `name value` pairs, in order.
    pub fn fields(&self) -> [(&'static str, u64); 17] {
        let t = &self.traffic;
        let pm = |kinds: &[K]| kinds.iter().map(|&k| self.pm.kind(k).ops).sum::<u64>();
        [
            ("simulated_time_ns", self.time.as_ps() / 1000),
            ("fuse_requests", self.requests),
            ("mmio", t.mmio),
            ("dma_q", t.dma_q),
            ("block_io", t.block_io),
            ("irq", t.irq),
            ("ordering_mmio", t.ordering_mmio),
            ("flush_reads", t.flush_reads),
            ("tlps", t.tlps),
            ("wire_bytes", t.wire_bytes),
            ("payload_bytes", self.payload_bytes),
            ("pm_stores", pm(&[K::Store, K::NtStore])),
            ("pm_flushes", pm(&[K::Clwb, K::Clflushopt, K::Clflush])),
            ("pm_fences", pm(&[K::Sfence, K::Mfence])),
            ("pm_wpq_lines", self.pm.wpq_lines),
            ("pm_media_writes", self.pm.media_writes),
            ("pm_media_reads", self.pm.media_reads),
        ]
    }

    /// The text of the stats file.
    pub fn render(&self) -> String {
        self.fields().iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcie_sim::{Executor, MachineProfile, TraceMode};

    #[test]
    fn renders_one_line_per_field() {
        let ex = Executor::new(1);
        let machine = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
        let pm = pcie_sim::Pmem::attach(&machine, pcie_sim::PmemProfile::default()).unwrap();
        let rig = Rig {
            ex,
            machine,
            medium: Medium::Pmem(pm),
        };
        let s = Stats::read(&rig, &Since::now(&rig), 7);
        let text = s.render();
        assert_eq!(text.lines().count(), 17);
        assert!(text.contains("pm_stores 0\n"));
        assert!(text.contains("fuse_requests 7\n"));
        assert!(text.starts_with("simulated_time_ns 0\n"));
    }
}
