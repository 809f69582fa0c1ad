//! The persistent memory's profile: size, persistence domain, the modelled
//! cache and the timing of an Intel Optane DC Persistent Memory Module.
//! Every number is a named field with its source beside it.

use crate::time::{Bandwidth, Cycles, SimDuration};

/// Which parts of the machine a power failure does not reach (the
/// *persistence domain*; Intel, "Persistent Memory Programming", ADR and
/// eADR; SNIA NVM Programming Model 1.2, 10.2 "flush").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PersistenceDomain {
    /// Asynchronous DRAM Refresh: the memory controller's write pending
    /// queue (WPQ) is flushed to the media at a power failure, the CPU
    /// caches are not. A store is persistent once its line reached the
    /// WPQ: a write-back (eviction, `clflush`, `clflushopt`, `clwb`) or a
    /// non-temporal write completed, which only a later fence guarantees
    /// for the weakly ordered ones.
    #[default]
    Adr,
    /// Extended ADR: the CPU caches are flushed too, so every store that
    /// is globally visible is persistent without any flush. Write-combining
    /// buffers (non-temporal stores) are still outside: an `sfence` is
    /// needed for them (Intel, "eADR: New Opportunities for Persistent
    /// Memory Applications", 2021).
    Eadr,
}

/// Timing of the persistent memory DIMM (media and memory controller).
#[derive(Clone, Debug, PartialEq)]
pub struct PmemTiming {
    /// Idle latency of a random 64-byte read from the media (a cache miss
    /// to a line not next to the previous miss): 305 ns (Izraelevitz et
    /// al. 2019, "Basic Performance Measurements of the Intel Optane DC
    /// Persistent Memory Module", arXiv:1903.05714, idle latency of a
    /// random load).
    pub read_latency_random: SimDuration,
    /// Idle latency of a sequential read (the line after the previous
    /// miss): 169 ns (Izraelevitz et al. 2019, idle latency of a
    /// sequential load).
    pub read_latency_sequential: SimDuration,
    /// Latency of a line write from the core to the memory controller's
    /// write pending queue, where (ADR) it is persistent: 94 ns
    /// (Izraelevitz et al. 2019, idle write latency of a store followed by
    /// `clwb` and a fence, which completes at the memory controller).
    pub write_latency: SimDuration,
    /// Media read bandwidth of one DIMM: 6.6 GB/s (Izraelevitz et al.
    /// 2019, maximal read bandwidth of one DIMM).
    pub read_bandwidth: Bandwidth,
    /// Media write bandwidth of one DIMM: 2.3 GB/s (Izraelevitz et al.
    /// 2019, maximal write bandwidth of one DIMM). Charged per media
    /// write of [`PmemTiming::xpline`] bytes.
    pub write_bandwidth: Bandwidth,
    /// The media access granularity (an XPLine): 256 bytes. A write of a
    /// 64-byte line that the XPBuffer cannot combine costs a whole
    /// read-modify-write of 256 bytes (Izraelevitz et al. 2019: the
    /// 3D XPoint media is accessed in 256-byte units, so smaller writes
    /// are amplified).
    pub xpline: u64,
    /// XPLines the DIMM's write-combining buffer (XPBuffer) holds: 64
    /// (16 KiB; Yang et al., "An Empirical Guide to the Behavior and Use
    /// of Scalable Persistent Memory", FAST '20, which measures the
    /// XPBuffer at about 16 KiB per DIMM). A line written to an
    /// XPLine still in the buffer costs no new media write.
    pub xpbuffer_xplines: usize,
}

impl Default for PmemTiming {
    fn default() -> Self {
        PmemTiming {
            read_latency_random: SimDuration::from_ns(305),
            read_latency_sequential: SimDuration::from_ns(169),
            write_latency: SimDuration::from_ns(94),
            read_bandwidth: Bandwidth::from_mb_per_sec(6_600),
            write_bandwidth: Bandwidth::from_mb_per_sec(2_300),
            xpline: 256,
            xpbuffer_xplines: 64,
        }
    }
}

/// Everything needed to put persistent memory on a machine's memory bus
/// ([`crate::pmem::Pmem::attach`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PmemProfile {
    /// Bytes of persistent memory (a whole number of 64-byte lines).
    pub size: u64,
    /// ADR or eADR.
    pub domain: PersistenceDomain,
    /// Lines of persistent memory the modelled CPU cache holds before it
    /// evicts one (a victim chosen by the machine's seeded RNG): 16384
    /// lines, the 1 MiB L2 of one Cascade Lake core (Intel 64 and IA-32
    /// Architectures Optimization Reference Manual, Skylake Server
    /// microarchitecture). The last-level cache is not modelled apart.
    pub cache_lines: usize,
    /// Chance, per store, that the cache writes back one dirty line chosen
    /// by the seeded RNG on its own (it stays valid). The SDM lets a dirty
    /// line be written back at any time (Intel SDM vol. 3A 11.2, 11.3: the
    /// write-back memory type); 1/64 makes the hazard show in short runs.
    /// The crash envelope does not depend on it: it allows every write-back
    /// whether this run did it or not.
    pub writeback_per_store: f64,
    /// Cycles of a load that hits the cache: 14, an L2 hit on Skylake
    /// Server (Intel Optimization Reference Manual, Skylake Server cache
    /// parameters; an estimate for a cache the model does not split into
    /// levels).
    pub load_hit_cycles: Cycles,
    /// Cycles of one store of up to 8 bytes into the cache (a store that
    /// misses also waits for the line to be read: write-allocate).
    pub store_cycles: Cycles,
    /// Media and memory controller timing.
    pub timing: PmemTiming,
}

impl Default for PmemProfile {
    fn default() -> Self {
        PmemProfile {
            size: 16 << 20,
            domain: PersistenceDomain::Adr,
            cache_lines: 16_384,
            writeback_per_store: 1.0 / 64.0,
            load_hit_cycles: Cycles(14),
            store_cycles: Cycles(1),
            timing: PmemTiming::default(),
        }
    }
}
