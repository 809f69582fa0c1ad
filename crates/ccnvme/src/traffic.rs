//! PCIe traffic of a transaction in the columns of ccNVMe Table 1, counted
//! from the machine's own counters (never written in).

use nvme_spec::traffic;
use pcie_sim::{Counters, EventKind, Purpose};

use crate::horae::ORDERING_QUEUE;

/// The name of a traffic tag, asked of the layer that owns it: the Horae
/// ordering queue's here, the NVMe tags' in `nvme_spec::traffic`, the
/// machine's own in [`Purpose::pcie_name`]; `"unnamed"` for a value no
/// layer uses.
pub fn purpose_name(p: Purpose) -> &'static str {
    if p == ORDERING_QUEUE {
        return "ordering-queue";
    }
    traffic::name(p).or(p.pcie_name()).unwrap_or("unnamed")
}

/// Traffic between two counter snapshots, by Table 1 column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Host MMIO write operations (doorbells, P-SQ bursts, P-SQ-head), the
    /// Horae ordering queue excluded.
    pub mmio: u64,
    /// Device DMA transfers of queue entries (SQ entry fetches from host
    /// memory, CQ entry posts).
    pub dma_q: u64,
    /// 4 KiB data blocks moved by DMA (one DMA per block with merging off).
    pub block_io: u64,
    /// MSI-X messages.
    pub irq: u64,
    /// Horae ordering-queue MMIO writes (reported apart, as Table 1 leaves
    /// them out).
    pub ordering_mmio: u64,
    /// Zero-length flush reads (part of their persistent MMIO writes).
    pub flush_reads: u64,
    /// TLPs in both directions.
    pub tlps: u64,
    /// Bytes on the wire, headers and framing included.
    pub wire_bytes: u64,
}

impl Traffic {
    /// The part of this traffic that the host itself initiated: MMIO
    /// writes and flush reads. This is the critical path of a primitive
    /// that returns without waiting for any device completion (ccNVMe's
    /// atomic wait): by the phase-attribution convention of `docs/architecture.md` 5,
    /// device DMA and interrupts that overlap it belong to the execute and
    /// complete phases, which it does not wait for. Callers should check
    /// that nothing it waited for was device-initiated (no completion
    /// entry, no interrupt in the window), as the tests do.
    pub fn submit_phase(&self) -> Traffic {
        Traffic {
            mmio: self.mmio,
            ordering_mmio: self.ordering_mmio,
            flush_reads: self.flush_reads,
            ..Traffic::default()
        }
    }

    /// The traffic counted in `c` (a difference of two snapshots).
    pub fn from_counters(c: &Counters) -> Traffic {
        let mmio_all = c.kind(EventKind::MmioWrite).ops;
        let ordering = c.get(EventKind::MmioWrite, ORDERING_QUEUE).ops;
        let link = c.link_total();
        Traffic {
            mmio: mmio_all - ordering,
            dma_q: c.get(EventKind::DmaRead, traffic::QUEUE_ENTRY).ops
                + c.get(EventKind::DmaWrite, traffic::QUEUE_ENTRY).ops,
            block_io: c.get(EventKind::DmaRead, traffic::DATA_BLOCK).ops
                + c.get(EventKind::DmaWrite, traffic::DATA_BLOCK).ops,
            irq: c.kind(EventKind::Msix).ops,
            ordering_mmio: ordering,
            flush_reads: c.get(EventKind::MmioRead, Purpose::FLUSH_READ).ops,
            tlps: link.tlps,
            wire_bytes: link.wire_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each layer picks its tag values apart from the others': a tag that
    /// two layers claimed would merge their counter cells (the Horae
    /// ordering writes would count in Table 1's MMIO column, say).
    #[test]
    fn every_named_tag_has_one_owner() {
        let mut owners = [0u32; Purpose::COUNT];
        for p in Purpose::all() {
            owners[p.index()] += u32::from(p == ORDERING_QUEUE)
                + u32::from(traffic::name(p).is_some())
                + u32::from(p.pcie_name().is_some());
        }
        assert!(owners.iter().all(|&n| n <= 1), "{owners:?}");
        assert_eq!(purpose_name(ORDERING_QUEUE), "ordering-queue");
        assert_eq!(purpose_name(traffic::DATA_BLOCK), "data");
        assert_eq!(purpose_name(Purpose::INTERRUPT), "interrupt");
        assert_eq!(purpose_name(Purpose::new(15)), "unnamed");
    }
}
