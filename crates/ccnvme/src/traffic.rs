//! PCIe traffic of a transaction in the columns of ccNVMe Table 1, counted
//! from the machine's own counters (never written in).

use pcie_sim::{Counters, EventKind, Purpose};

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
    /// atomic wait): by the phase-attribution convention of checklist 3.3,
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
        let ordering = c.get(EventKind::MmioWrite, Purpose::OrderingQueue).ops;
        let link = c.link_total();
        Traffic {
            mmio: mmio_all - ordering,
            dma_q: c.get(EventKind::DmaRead, Purpose::QueueEntry).ops
                + c.get(EventKind::DmaWrite, Purpose::QueueEntry).ops,
            block_io: c.get(EventKind::DmaRead, Purpose::DataBlock).ops
                + c.get(EventKind::DmaWrite, Purpose::DataBlock).ops,
            irq: c.kind(EventKind::Msix).ops,
            ordering_mmio: ordering,
            flush_reads: c.get(EventKind::MmioRead, Purpose::FlushRead).ops,
            tlps: link.tlps,
            wire_bytes: link.wire_bytes,
        }
    }
}
