//! Hardware profiles of the host: CPU, root complex and DRAM. Every number
//! is a named field with its source beside it.

use crate::link::LinkProfile;
use crate::time::{Cycles, Frequency, SimDuration};

/// The host CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuProfile {
    /// Simulated cores. The paper's server has 2 x 12 cores (ccNVMe 7.1).
    pub cores: usize,
    /// Core clock: Intel E5-2680 v3 at 2.5 GHz (ccNVMe 7.1).
    pub clock: Frequency,
    /// Write-combining line buffers per core: 10 fill buffers double as WC
    /// buffers on Haswell (Intel Optimization Manual 3.6.10; `docs/decisions.md` P1).
    pub wc_buffers: usize,
    /// Cycles for one store instruction of up to 8 bytes into a WC buffer.
    pub wc_store_cycles: Cycles,
    /// Cycles for an uncached MMIO store to be accepted by the uncore.
    /// Estimate: UC stores are serialized and take ~100 ns on Xeon parts.
    pub uc_store_cycles: Cycles,
    /// Cycles of an `mfence`/`sfence` with nothing to drain (Agner Fog's
    /// instruction tables, Haswell: mfence ~33 cycles).
    pub fence_cycles: Cycles,
    /// Cycles of a `clflush` instruction (Agner Fog, Haswell: ~40 cycles).
    pub clflush_cycles: Cycles,
    /// Time a write-combining line takes from the core through the uncore
    /// to the root port; a fence that drained lines waits for the last one
    /// to get there (globally visible at the root complex), and the line
    /// then still crosses the link. Calibrated so that
    /// a non-persistent 64-byte PMR write (stores + fence) costs 0.62 us,
    /// which with the 0.94 us flush read (queued behind the write on the
    /// link) gives ccNVMe Figure 5's 2.5x ratio
    /// (`docs/decisions.md` T2).
    pub wc_drain_latency: SimDuration,
    /// Interval between two write-combining lines leaving one core for the
    /// uncore. ccNVMe Figure 5 has persistent and plain PMR writes converge
    /// from 512-byte bursts: with a 0.9 us flush read that needs ~0.45 us
    /// per 64-byte line out of one core (about 140 MB/s of WC MMIO per
    /// thread for that PMR); other cores proceed in parallel.
    pub wc_line_interval: SimDuration,
    /// Bytes fetched by one uncached load in an MMIO read. 32 bytes (one
    /// AVX load) reproduces Horae 5.2: 4096 / 32 = 128 serialized reads of
    /// ~0.88 us each is the measured 113 us, and 8 bytes costs 0.9 us.
    pub mmio_read_chunk: u32,
    /// Cycles to issue an uncached load and retire it after its data returns.
    pub uc_load_cycles: Cycles,
    /// Bytes a core copies per cycle in DRAM (memcpy of cached data; ~16
    /// B/cycle on Haswell with AVX, Intel Optimization Manual 14.3).
    pub memcpy_bytes_per_cycle: u32,
    /// A write-combining line nobody fences leaves on its own after the
    /// core stored nothing for this long. The Intel SDM (Vol. 3, 11.3.1)
    /// leaves eviction timing unspecified ("may be delayed until the next
    /// serializing event"); real parts evict idle buffers within
    /// microseconds. 10 us: longer than any store-to-fence gap of a
    /// correct driver here, so it only matters when a fence is missing
    /// (without it such a driver would hang, which hardware does not).
    pub wc_idle_evict: SimDuration,
}

impl Default for CpuProfile {
    fn default() -> Self {
        CpuProfile {
            cores: 4,
            clock: Frequency::from_mhz(2_500),
            wc_buffers: 10,
            wc_store_cycles: Cycles(1),
            uc_store_cycles: Cycles(250),
            fence_cycles: Cycles(33),
            clflush_cycles: Cycles(40),
            wc_drain_latency: SimDuration::from_ns(620),
            wc_line_interval: SimDuration::from_ns(450),
            mmio_read_chunk: 32,
            uc_load_cycles: Cycles(20),
            memcpy_bytes_per_cycle: 16,
            wc_idle_evict: SimDuration::from_us(10),
        }
    }
}

/// The root complex and host DRAM.
#[derive(Clone, Debug, PartialEq)]
pub struct HostProfile {
    /// DRAM size in bytes.
    pub dram_bytes: u64,
    /// Time the root complex takes to read DRAM for a DMA read request
    /// before its first completion leaves (~100 ns DRAM access, typical
    /// loaded latency on Xeon E5 v3).
    pub dma_read_latency: SimDuration,
    /// Posted writes the root port buffers per device before a store has
    /// to wait (beyond those already on the link). A store retires, and a
    /// fence sees a line globally visible, once the root port accepted it.
    pub rc_posted_buffer: usize,
}

impl Default for HostProfile {
    fn default() -> Self {
        HostProfile {
            dram_bytes: 256 << 20,
            dma_read_latency: SimDuration::from_ns(100),
            rc_posted_buffer: 32,
        }
    }
}

/// Everything needed to build a [`crate::Machine`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineProfile {
    /// The CPU.
    pub cpu: CpuProfile,
    /// Root complex and DRAM.
    pub host: HostProfile,
    /// The link to each attached device.
    pub link: LinkProfile,
}
