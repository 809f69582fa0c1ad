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
//! ```
//!
//! `mmio`, `dma_q`, `block_io` and `irq` are the columns of ccNVMe Table 1
//! (`ccnvme::Traffic`): host MMIO write operations (the Horae ordering
//! queue's apart, in `ordering_mmio`), device DMA transfers of queue
//! entries, 4 KiB data blocks moved by DMA, and MSI-X messages.
//! `flush_reads` counts zero-length reads that make PMR writes persistent;
//! `tlps`, `wire_bytes` and `payload_bytes` are totals over both link
//! directions.

use ccnvme::Traffic;
use pcie_sim::{Counters, Machine, SimTime};

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
}

impl Stats {
    /// Reads the machine's counters against the snapshot `since`.
    pub fn read(machine: &Machine, since: &Counters, requests: u64) -> Stats {
        let c = machine.counters().since(since);
        Stats {
            time: machine.sim().now(),
            requests,
            traffic: Traffic::from_counters(&c),
            payload_bytes: c.link_total().payload_bytes,
        }
    }

    /// The `name value` pairs, in order.
    pub fn fields(&self) -> [(&'static str, u64); 11] {
        let t = &self.traffic;
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
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
        let s = Stats::read(&m, &m.counters(), 7);
        let text = s.render();
        assert_eq!(text.lines().count(), 11);
        assert!(text.contains("fuse_requests 7\n"));
        assert!(text.starts_with("simulated_time_ns 0\n"));
    }
}
