//! SSD profiles: the drives of the ccNVMe paper's Table 3 and a flash drive
//! with a volatile write cache and no power-loss protection (for crash
//! tests of FLUSH and FUA).
//!
//! Each profile holds the drive's published figures (`DriveFigures`, the
//! targets) and the internal model that produces them: parallel media units
//! (channels x dies) that each take `program_time` per 4 KiB block,
//! a pipelined per-command firmware latency, and an optional write cache.
//! Random-write IOPS at high queue depth is `units / program_time`, the
//! queue-depth-1 latency is the host-visible path (doorbell, command fetch,
//! data DMA, firmware, media, completion), and sequential bandwidth is the
//! lesser of `units * 4 KiB / program_time` and the link. The tests in
//! `tests/profiles.rs` measure all three against the figures.

use pcie_sim::{PmrTiming, SimDuration};

/// A drive's published performance (ccNVMe Table 3).
#[derive(Clone, Debug, PartialEq)]
pub struct DriveFigures {
    /// Sequential read bandwidth, bytes/s.
    pub seq_read_bps: u64,
    /// Sequential write bandwidth, bytes/s.
    pub seq_write_bps: u64,
    /// 4 KiB random read IOPS at high queue depth.
    pub rand_read_iops: u64,
    /// 4 KiB random write IOPS at high queue depth.
    pub rand_write_iops: u64,
    /// 4 KiB read latency at queue depth 1.
    pub read_latency: SimDuration,
    /// 4 KiB write latency at queue depth 1.
    pub write_latency: SimDuration,
}

/// A volatile write cache.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteCache {
    /// Capacity in logical blocks.
    pub blocks: u64,
    /// Power-loss protection: capacitors destage the cache at power failure,
    /// so the cache is as durable as the media (and FLUSH has nothing to
    /// do; the paper's Optane drives behave so, ccNVMe Fig. 14 caption).
    pub power_loss_protected: bool,
    /// When the drive programs what its cache holds.
    pub destage: Destage,
}

/// When a drive's write cache programs the blocks it holds
/// ([`crate::backend`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Destage {
    /// From the moment a block arrives, as fast as the media units allow
    /// (the drives of ccNVMe Table 3 and `flash-vwc`).
    #[default]
    Eager,
    /// Only when asked: a FLUSH, a FUA write, or a write that finds the
    /// cache full. The cache is a write-back buffer the drive programs
    /// when it must, so a FLUSH pays the flash programming of everything
    /// written since the last one: HoRAE 6.3, "the FLUSH of SATA SSD
    /// exposes raw flash programming delay (1 ms)", and 5.3, devices
    /// without PLP "expose extremely long flash programming latency, so
    /// async flushings on them exploit the potential parallelism" (the
    /// joint FLUSH's gain over a serialized one, HoRAE Figure 10(c), needs
    /// the second drive's data still unprogrammed when its FLUSH comes).
    OnDemand,
}

/// Everything that describes one drive.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdProfile {
    /// Short name used on command lines.
    pub name: &'static str,
    /// Human-readable model name (also Identify Controller's MN).
    pub model: &'static str,
    /// Published figures the model is calibrated to.
    pub figures: DriveFigures,
    /// Parallel media units (channels x dies).
    pub units: u32,
    /// Time a unit takes to program one 4 KiB block.
    pub program_time: SimDuration,
    /// Time a unit takes to read one 4 KiB block.
    pub read_time: SimDuration,
    /// Firmware latency added to every write before its data is taken
    /// (pipelined: it delays a command but does not limit throughput).
    pub write_overhead: SimDuration,
    /// Firmware latency added to every read before media access.
    pub read_overhead: SimDuration,
    /// Firmware latency of commands that do not touch media (Flush with
    /// nothing to destage, admin commands).
    pub admin_latency: SimDuration,
    /// Time to read a command from a submission queue in the PMR (an
    /// internal SRAM/DRAM access, no PCIe traffic; `docs/decisions.md` D17).
    pub pmr_fetch_latency: SimDuration,
    /// Commands the controller works on at once (its internal contexts).
    pub max_inflight: u32,
    /// The write cache, if any.
    pub write_cache: Option<WriteCache>,
    /// Maximum data transfer size as a power of two of 4 KiB pages
    /// (Identify MDTS): 5 = 128 KiB, Linux's usual limit for these drives.
    pub mdts: u8,
    /// Maximum queue entries supported (CAP.MQES + 1).
    pub max_queue_entries: u32,
    /// I/O queue pairs the controller offers.
    pub max_io_queues: u16,
    /// PMR size in bytes (0: no PMR). 2 MiB in the paper (ccNVMe 7.1).
    pub pmr_bytes: u64,
    /// PMR timing (see `pcie_sim::PmrTiming` for sources).
    pub pmr_timing: PmrTiming,
    /// Time from CC.EN=1 to CSTS.RDY=1, and from CC.EN=0 to CSTS.RDY=0.
    pub enable_latency: SimDuration,
    /// Device time to apply a register write or answer a register read.
    pub register_latency: SimDuration,
}

const GB: u64 = 1_000_000_000;

impl SsdProfile {
    /// Intel 750 (flash, 2015): Table 3 row 1. It has a capacitor-protected
    /// write cache (Intel 750 product brief: "power loss imminent"
    /// protection), so writes complete from cache.
    pub fn intel_750() -> Self {
        SsdProfile {
            name: "intel-750",
            model: "INTEL SSDPEDMW400G4",
            figures: DriveFigures {
                seq_read_bps: 2_200_000_000,
                seq_write_bps: 950_000_000,
                rand_read_iops: 430_000,
                rand_write_iops: 230_000,
                read_latency: SimDuration::from_us(20),
                write_latency: SimDuration::from_us(20),
            },
            // 230K IOPS = 8 units / 34.8 us; 8 x 4 KiB / 34.8 us = 0.94 GB/s.
            units: 8,
            program_time: SimDuration::from_ns(34_800),
            read_time: SimDuration::from_ns(17_000),
            write_overhead: SimDuration::from_ns(17_300),
            read_overhead: SimDuration::from_ns(700),
            admin_latency: SimDuration::from_us(2),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 1024,
            // A 1 MiB write buffer: sustained writes are destage-bound, as
            // the figures (measured over long runs) are.
            write_cache: Some(WriteCache {
                blocks: 256,
                power_loss_protected: true,
                destage: Destage::Eager,
            }),
            ..Self::base()
        }
    }

    /// Intel Optane 905P: Table 3 row 2. No write cache: writes complete
    /// when on 3D XPoint.
    pub fn optane_905p() -> Self {
        SsdProfile {
            name: "optane-905p",
            model: "INTEL SSDPED1D960GAY",
            figures: DriveFigures {
                seq_read_bps: 2_600_000_000,
                seq_write_bps: 2_200_000_000,
                rand_read_iops: 575_000,
                rand_write_iops: 550_000,
                read_latency: SimDuration::from_us(10),
                write_latency: SimDuration::from_us(10),
            },
            // 550K IOPS = 4 units / 7.27 us; 4 x 4 KiB / 7.27 us = 2.25 GB/s.
            units: 4,
            program_time: SimDuration::from_ns(7_270),
            read_time: SimDuration::from_ns(6_950),
            write_overhead: SimDuration::from_ns(200),
            read_overhead: SimDuration::from_ns(300),
            admin_latency: SimDuration::from_us(2),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 1024,
            write_cache: None,
            ..Self::base()
        }
    }

    /// Intel Optane DC P5800X as measured on the paper's PCIe 3.0 host
    /// (Table 3 footnote: 3.3 GB/s, 850K/820K IOPS, 8/9 us). No write cache.
    pub fn optane_p5800x() -> Self {
        SsdProfile {
            name: "optane-p5800x",
            model: "INTEL SSDPF21Q400GB",
            figures: DriveFigures {
                seq_read_bps: 3_300_000_000,
                seq_write_bps: 3_300_000_000,
                rand_read_iops: 850_000,
                rand_write_iops: 820_000,
                read_latency: SimDuration::from_us(8),
                write_latency: SimDuration::from_us(9),
            },
            // 820K IOPS = 5 units / 6.1 us; the PCIe 3.0 x4 link allows
            // ~890K 4 KiB writes, so the media, not the link, binds here.
            units: 5,
            program_time: SimDuration::from_ns(6_100),
            read_time: SimDuration::from_ns(5_000),
            write_overhead: SimDuration::from_ns(200),
            read_overhead: SimDuration::from_ns(200),
            admin_latency: SimDuration::from_us(1),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 1024,
            write_cache: None,
            ..Self::base()
        }
    }

    /// A consumer flash drive with a volatile write cache and no power-loss
    /// protection: completed writes are lost at power failure unless FLUSH
    /// or FUA made them durable. Figures are typical of a 2019 TLC drive.
    pub fn flash_vwc() -> Self {
        SsdProfile {
            name: "flash-vwc",
            model: "SIM FLASH VWC",
            figures: DriveFigures {
                seq_read_bps: 3 * GB,
                seq_write_bps: 1_600_000_000,
                rand_read_iops: 400_000,
                rand_write_iops: 400_000,
                read_latency: SimDuration::from_us(80),
                write_latency: SimDuration::from_us(20),
            },
            units: 16,
            program_time: SimDuration::from_us(40),
            read_time: SimDuration::from_us(75),
            write_overhead: SimDuration::from_ns(17_300),
            read_overhead: SimDuration::from_us(1),
            admin_latency: SimDuration::from_us(2),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 1024,
            write_cache: Some(WriteCache {
                blocks: 256,
                power_loss_protected: false,
                destage: Destage::Eager,
            }),
            ..Self::base()
        }
    }

    /// Samsung 860 PRO, the SATA SSD of HoRAE (its Table 2, drive A: 560 /
    /// 530 MB/s sequential read / write, 100K / 90K random 4 KiB IOPS over
    /// an 8 GB span), behind the modelled NVMe controller and PCIe link
    /// (deviation: SATA's link and AHCI are not modelled; NCQ's 32 command
    /// tags bound the commands in flight). Its write cache has no
    /// power-loss protection and programs only when it must
    /// ([`Destage::OnDemand`]); a program takes 1 ms (HoRAE 6.3: "the
    /// FLUSH of SATA SSD exposes raw flash programming delay (1 ms)"), and
    /// the 90 units give the rated 90K random writes per second once the
    /// cache is full (90 x 1 / 1 ms). Not reproduced: the sequential write
    /// figure (the units, sized for 4 KiB programs, give 369 MB/s) and the
    /// read figures (a unit reads in 100 us; HoRAE gives no latencies). The
    /// write latency from the cache is the Intel 750's (ccNVMe Table 3),
    /// for want of a figure of the drive's own.
    pub fn samsung_860_pro() -> Self {
        SsdProfile {
            name: "samsung-860-pro",
            model: "Samsung SSD 860 PRO",
            figures: DriveFigures {
                seq_read_bps: 560_000_000,
                seq_write_bps: 530_000_000,
                rand_read_iops: 100_000,
                rand_write_iops: 90_000,
                read_latency: SimDuration::from_us(100),
                write_latency: SimDuration::from_us(20),
            },
            units: 90,
            program_time: SimDuration::from_ms(1),
            read_time: SimDuration::from_us(100),
            write_overhead: SimDuration::from_ns(17_300),
            read_overhead: SimDuration::from_us(1),
            admin_latency: SimDuration::from_us(2),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 32,
            write_cache: Some(WriteCache {
                blocks: 256,
                power_loss_protected: false,
                destage: Destage::OnDemand,
            }),
            ..Self::base()
        }
    }

    fn base() -> Self {
        SsdProfile {
            name: "base",
            model: "SIM",
            figures: DriveFigures {
                seq_read_bps: GB,
                seq_write_bps: GB,
                rand_read_iops: 100_000,
                rand_write_iops: 100_000,
                read_latency: SimDuration::from_us(10),
                write_latency: SimDuration::from_us(10),
            },
            units: 4,
            program_time: SimDuration::from_us(10),
            read_time: SimDuration::from_us(10),
            write_overhead: SimDuration::ZERO,
            read_overhead: SimDuration::ZERO,
            admin_latency: SimDuration::from_us(1),
            pmr_fetch_latency: SimDuration::from_ns(100),
            max_inflight: 1024,
            write_cache: None,
            mdts: 5,
            max_queue_entries: 4096,
            max_io_queues: 64,
            pmr_bytes: 2 << 20,
            pmr_timing: PmrTiming::default(),
            enable_latency: SimDuration::from_us(10),
            register_latency: SimDuration::from_ns(50),
        }
    }

    /// Every built-in profile.
    pub fn all() -> Vec<SsdProfile> {
        vec![
            Self::intel_750(),
            Self::optane_905p(),
            Self::optane_p5800x(),
            Self::flash_vwc(),
            Self::samsung_860_pro(),
        ]
    }

    /// The built-in profile called `name`.
    pub fn by_name(name: &str) -> Option<SsdProfile> {
        Self::all().into_iter().find(|p| p.name == name)
    }

    /// True if completed writes may be lost at power failure.
    pub fn volatile_cache(&self) -> bool {
        self.write_cache.as_ref().is_some_and(|c| !c.power_loss_protected)
    }
}
