//! A whole machine with a file system on it, for tests, benches and tools.

use std::rc::Rc;

use ccnvme::BlockDevice;
use nvme_ctrl::{Controller, ControllerConfig, Media, SsdProfile};
use pcie_sim::{CpuProfile, Executor, HostProfile, Machine, MachineProfile, TraceMode};

use crate::error::FsError;
use crate::fs::{Ctx, Fs};
use crate::layout::Mode;
use crate::mount::{mkfs, mount, probe_options, MkfsOptions};
use crate::profile::FsProfile;

/// Everything a test needs.
pub struct TestFs {
    /// The executor (drop it last).
    pub ex: Executor,
    /// The machine.
    pub machine: Machine,
    /// The controller.
    pub ctrl: Rc<Controller>,
    /// The block device.
    pub dev: Rc<BlockDevice>,
    /// The mounted file system.
    pub fs: Rc<Fs>,
}

impl std::fmt::Debug for TestFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestFs").field("mode", &self.fs.mode()).finish()
    }
}

/// A machine with `cores` cores and a drive of `profile` over `blocks` of
/// memory media.
pub fn machine(
    profile: SsdProfile,
    blocks: u64,
    cores: usize,
    mode: TraceMode,
    seed: u64,
) -> (Executor, Machine, Rc<Controller>) {
    let ex = Executor::new(seed);
    let m = Machine::new(
        &ex,
        MachineProfile {
            cpu: CpuProfile {
                cores,
                ..CpuProfile::default()
            },
            host: HostProfile {
                dram_bytes: 512 << 20,
                ..HostProfile::default()
            },
            ..MachineProfile::default()
        },
        mode,
    );
    let ctrl = Controller::attach(&m, ControllerConfig::new(profile), Media::memory(blocks), None)
        .expect("a fresh machine takes a controller");
    (ex, m, ctrl)
}

/// Makes and mounts a file system of `mode` on a fresh machine.
pub fn new_fs(mode: Mode, profile: SsdProfile, blocks: u64, cores: usize) -> Result<TestFs, FsError> {
    let (ex, machine, ctrl) = machine(profile, blocks, cores, TraceMode::Off, 1);
    let m2 = machine.clone();
    let r = ex
        .block_on(async move {
            let dev = BlockDevice::probe(&m2, 0, probe_options(mode)).await?;
            let ctx = Ctx::on(0);
            let mut opts = MkfsOptions::new(mode);
            opts.journal_areas = dev.queue_count() as u32;
            opts.journal_blocks = Some((blocks / 8).max(256));
            mkfs(&dev, ctx, &opts).await?;
            let fs = mount(&dev, ctx, FsProfile::default()).await?;
            Ok::<_, FsError>((dev, fs))
        })
        .map_err(|e| FsError::Io(e.to_string()))?;
    let (dev, fs) = r?;
    Ok(TestFs {
        ex,
        machine,
        ctrl,
        dev,
        fs,
    })
}
