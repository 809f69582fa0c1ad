//! A whole machine with a file system on it, for tests, benches and tools.
//!
//! Only with the `testing` feature: it attaches the controller emulator
//! (`nvme-ctrl`), which the file system itself never names.

use std::rc::Rc;

use ccnvme::{BlockDevice, ProbeOptions};
use nvme_ctrl::{attach_drives, Controller, ControllerConfig, Drive, Media, SsdProfile};
use pcie_sim::{CpuProfile, Executor, HostProfile, Machine, MachineProfile, PageStore, TraceMode};

use crate::error::FsError;
use crate::fs::{Ctx, Fs};
use crate::layout::Mode;
use crate::mount::{mkfs, mkfs_volume, mount, probe_options, probe_options_for, MkfsOptions, StripeOptions};
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
    machine_over(profile, Media::memory(blocks), cores, mode, seed)
}

/// A machine with `cores` cores and a drive of `profile` over `media` (a
/// fresh one, or an image a crash or an earlier run left).
pub fn machine_over(
    profile: SsdProfile,
    media: Media,
    cores: usize,
    mode: TraceMode,
    seed: u64,
) -> (Executor, Machine, Rc<Controller>) {
    machine_after(profile, media, None, cores, mode, seed)
}

/// Like [`machine_over`], with the drive's PMR holding `pmr` (what an
/// earlier machine's [`Machine::pmr_image`] gave; `None`: zeroed), as after
/// a power failure of that machine.
pub fn machine_after(
    profile: SsdProfile,
    media: Media,
    pmr: Option<PageStore>,
    cores: usize,
    mode: TraceMode,
    seed: u64,
) -> (Executor, Machine, Rc<Controller>) {
    let drive = Drive {
        config: ControllerConfig::new(profile),
        media,
        pmr,
    };
    let (ex, m, mut ctrls) = machine_with_drives(vec![drive], cores, mode, seed);
    let ctrl = ctrls.pop().expect("one drive was plugged in");
    (ex, m, ctrl)
}

/// A machine with `cores` cores (512 MiB of host DRAM) and `drives`, each
/// on its own port in order ([`nvme_ctrl::attach_drives`]): drive `i` is
/// probed as `BlockDevice::probe(&machine, i, ..)`.
pub fn machine_with_drives(
    drives: Vec<Drive>,
    cores: usize,
    mode: TraceMode,
    seed: u64,
) -> (Executor, Machine, Vec<Rc<Controller>>) {
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
    let ctrls = attach_drives(&m, drives).expect("a fresh machine takes its drives");
    (ex, m, ctrls)
}

/// Probes the drive on port 0 of `machine`, makes a file system of `mode`
/// on its `blocks` (one journal area per hardware queue, an eighth of the
/// drive for the journals, then `tune` may change the options) and mounts
/// it with `profile` (the driver probed as [`probe_options_for`] says),
/// on core 0.
pub async fn format_and_mount(
    machine: &Machine,
    mode: Mode,
    blocks: u64,
    tune: impl FnOnce(&mut MkfsOptions),
    profile: FsProfile,
) -> Result<(Rc<BlockDevice>, Rc<Fs>), FsError> {
    let dev = BlockDevice::probe(machine, 0, probe_options_for(mode, &profile)).await?;
    let ctx = Ctx::on(0);
    let mut opts = MkfsOptions::new(mode);
    opts.journal_areas = dev.queue_count() as u32;
    opts.journal_blocks = Some((blocks / 8).max(256));
    tune(&mut opts);
    mkfs(&dev, ctx, &opts).await?;
    let fs = mount(&dev, ctx, profile).await?;
    Ok((dev, fs))
}

/// Makes and mounts a file system of `mode` on a fresh machine.
pub fn new_fs(mode: Mode, profile: SsdProfile, blocks: u64, cores: usize) -> Result<TestFs, FsError> {
    new_fs_with(mode, profile, blocks, cores, FsProfile::default())
}

/// [`new_fs`] with the file system's profile `fs_profile`.
pub fn new_fs_with(
    mode: Mode,
    profile: SsdProfile,
    blocks: u64,
    cores: usize,
    fs_profile: FsProfile,
) -> Result<TestFs, FsError> {
    let (ex, machine, ctrl) = machine(profile, blocks, cores, TraceMode::Off, 1);
    let m2 = machine.clone();
    let (dev, fs) =
        ex.block_on(async move { format_and_mount(&m2, mode, blocks, |_| {}, fs_profile).await })??;
    Ok(TestFs {
        ex,
        machine,
        ctrl,
        dev,
        fs,
    })
}

/// A machine with a HoraeFS striped over several drives.
pub struct StripedFs {
    /// The executor (drop it last).
    pub ex: Executor,
    /// The machine.
    pub machine: Machine,
    /// The controllers, by port (member `i` of the volume on port `i`).
    pub ctrls: Vec<Rc<Controller>>,
    /// The block devices, by member.
    pub devs: Vec<Rc<BlockDevice>>,
    /// The mounted file system.
    pub fs: Rc<Fs>,
}

impl std::fmt::Debug for StripedFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripedFs")
            .field("members", &self.devs.len())
            .finish()
    }
}

/// Probes the drives on ports `0..members` of `machine` with `probe`
/// ([`probe_options`] of `mode`, the driver's profile as the caller wants
/// it), makes a file system of `mode` striped over them with `stripe`
/// (journal: an eighth of the volume, then `tune` may change the options)
/// and mounts it with `profile`, on core 0.
pub async fn format_and_mount_striped(
    machine: &Machine,
    mode: Mode,
    members: u8,
    probe: ProbeOptions,
    stripe: StripeOptions,
    tune: impl FnOnce(&mut MkfsOptions),
    profile: FsProfile,
) -> Result<(Vec<Rc<BlockDevice>>, Rc<Fs>), FsError> {
    let mut devs = Vec::new();
    for port in 0..members {
        devs.push(BlockDevice::probe(machine, port, probe.clone()).await?);
    }
    let ctx = Ctx::on(0);
    let blocks: u64 = devs.iter().map(|d| d.info().blocks).sum();
    let mut opts = MkfsOptions::new(mode);
    opts.journal_blocks = Some((blocks / 8).max(256));
    tune(&mut opts);
    mkfs_volume(&devs, ctx, &opts, stripe).await?;
    let fs = crate::mount::mount_volume(&devs, ctx, profile).await?;
    Ok((devs, fs))
}

/// A fresh machine with `members` drives of `profile` and `blocks` each
/// and a HoraeFS striped over them (md's default chunk), mounted.
pub fn new_striped(
    profile: SsdProfile,
    members: u8,
    blocks: u64,
    cores: usize,
    mode: TraceMode,
) -> Result<StripedFs, FsError> {
    let drives = (0..members)
        .map(|_| Drive::fresh(profile.clone(), blocks))
        .collect();
    let (ex, machine, ctrls) = machine_with_drives(drives, cores, mode, 1);
    let m2 = machine.clone();
    let (devs, fs) = ex.block_on(async move {
        format_and_mount_striped(
            &m2,
            Mode::Horae,
            members,
            probe_options(Mode::Horae),
            StripeOptions::default(),
            |_| {},
            FsProfile::default(),
        )
        .await
    })??;
    Ok(StripedFs {
        ex,
        machine,
        ctrls,
        devs,
        fs,
    })
}
