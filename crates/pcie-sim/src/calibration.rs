//! Measurements that tie the model to the papers' numbers: the PMR write
//! latency of ccNVMe Figure 5 and the MMIO read latencies of Horae 5.2.
//! Each runs on a fresh machine with a [`crate::testing::RegisterFile`]
//! device and reports simulated time.

use std::rc::Rc;

use crate::addr::BusAddr;
use crate::endpoint::BarKind;
use crate::executor::Executor;
use crate::machine::Machine;
use crate::profile::MachineProfile;
use crate::testing::RegisterFile;
use crate::time::SimDuration;
use crate::trace::{Purpose, TraceMode};
use crate::PcieError;

/// PMR size used by the calibration (the paper's 2 MiB, ccNVMe 7.1).
pub const PMR_BYTES: u64 = 2 << 20;

/// Operations averaged per measurement (sequential, as in Figure 5).
pub const OPS: u64 = 32;

/// One row of the Figure 5 comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WriteRow {
    /// Bytes per write.
    pub size: u64,
    /// Mean latency of stores + clflush + mfence.
    pub write: SimDuration,
    /// Mean latency of stores + clflush + mfence + zero-length read.
    pub persistent: SimDuration,
}

impl WriteRow {
    /// persistent / write.
    pub fn ratio(&self) -> f64 {
        self.persistent.as_ps() as f64 / self.write.as_ps() as f64
    }
}

fn machine(profile: &MachineProfile) -> (Executor, Machine, Rc<RegisterFile>) {
    let ex = Executor::new(0);
    let m = Machine::new(&ex, profile.clone(), TraceMode::Off);
    let dev = RegisterFile::attach(&m, Some(PMR_BYTES), None);
    (ex, m, dev)
}

/// Mean latency of a PMR write of `size` bytes, with or without the
/// zero-length read that makes it persistent, over [`OPS`] sequential
/// writes.
pub fn pmr_write(profile: &MachineProfile, size: u64, persistent: bool) -> Result<SimDuration, PcieError> {
    let (ex, m, _dev) = machine(profile);
    let base = m.bar(0, BarKind::Pmr).ok_or(PcieError::BadChoice("no PMR"))?;
    let core = m.core(0)?;
    let sim = m.sim();
    let run = async move {
        let data = vec![0x5a_u8; size as usize];
        let mut total = SimDuration::ZERO;
        for i in 0..OPS {
            let addr = BusAddr(base.0 + (i * size) % PMR_BYTES);
            let t0 = sim.now();
            for chunk in 0..size.div_ceil(8) {
                let off = chunk * 8;
                let n = 8.min(size - off) as usize;
                core.wc_store(addr + off, &data[..n], Purpose::UNTAGGED, 0)
                    .await?;
            }
            for line in (0..size).step_by(64) {
                core.clflush(addr + line).await?;
            }
            core.mfence().await?;
            if persistent {
                core.mmio_read(addr, &mut [], Purpose::FLUSH_READ, 0).await?;
            }
            total += sim.now() - t0;
        }
        Ok::<_, PcieError>(SimDuration(total.as_ps() / OPS))
    };
    ex.block_on(run)
        .map_err(|_| PcieError::BadChoice("calibration deadlocked"))?
}

/// Mean latency of an uncached read of `size` bytes from the PMR.
pub fn mmio_read(profile: &MachineProfile, size: u64) -> Result<SimDuration, PcieError> {
    let (ex, m, _dev) = machine(profile);
    let base = m.bar(0, BarKind::Pmr).ok_or(PcieError::BadChoice("no PMR"))?;
    let core = m.core(0)?;
    let sim = m.sim();
    let run = async move {
        let mut buf = vec![0u8; size as usize];
        let mut total = SimDuration::ZERO;
        for i in 0..OPS {
            let t0 = sim.now();
            core.mmio_read(base + (i * size) % PMR_BYTES, &mut buf, Purpose::UNTAGGED, 0)
                .await?;
            total += sim.now() - t0;
        }
        Ok::<_, PcieError>(SimDuration(total.as_ps() / OPS))
    };
    ex.block_on(run)
        .map_err(|_| PcieError::BadChoice("calibration deadlocked"))?
}

/// The Figure 5 sweep: sizes 8 B to 64 KiB as in the paper's artifact.
pub fn figure5(profile: &MachineProfile) -> Result<Vec<WriteRow>, PcieError> {
    [8u64, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536]
        .iter()
        .map(|&size| {
            Ok(WriteRow {
                size,
                write: pmr_write(profile, size, false)?,
                persistent: pmr_write(profile, size, true)?,
            })
        })
        .collect()
}
