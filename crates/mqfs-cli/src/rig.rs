//! The simulated machine under an image: one core per hardware queue, and
//! the drive over the image's media and PMR (the driver and MQFS on it),
//! or persistent memory holding the image's bytes; and running operations
//! on it to completion.

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use ccnvme::BlockDevice;
use mqfs::{Ctx, Fs, FsError, FsProfile, Mode};
use nvme_ctrl::{Controller, ControllerConfig, Image, Media};
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, Pmem, PmemProfile, RunError, SimDuration, TraceMode,
};

use crate::error::CliError;
use crate::header::Header;
use crate::image::{LockedImage, WriteThrough};

/// Simulated time one operation may take before it counts as hung (a
/// recovery, an unmount that writes back everything, one FUSE request).
pub const OP_LIMIT: SimDuration = SimDuration::from_ms(600_000);

/// Seed of the executor (the run is deterministic for a given sequence of
/// requests).
pub const SEED: u64 = 1;

/// Simulated host DRAM: the driver's queues and the file system's I/O
/// pages live there (sparse, so only what is touched costs memory).
pub const DRAM_BYTES: u64 = 512 << 20;

/// What holds the image's file system.
pub enum Medium {
    /// The NVMe drive, with MQFS's consistency mode (how the driver
    /// probes).
    Drive {
        /// The drive.
        ctrl: Rc<Controller>,
        /// The image's consistency mode.
        mode: Mode,
    },
    /// Persistent memory on the memory bus.
    Pmem(Pmem),
}

/// The host's time in ns since 1970: the base of the mounted file
/// system's clock, and what makes each image's UUID its own at mkfs (the
/// only wall-clock readings; the simulation never reads it,
/// `docs/decisions.md` M17). A clock before 1970 counts as 0: the image's
/// newest time then sets the base.
pub fn host_time_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A booted machine with the image's medium attached.
pub struct Rig {
    /// The executor (single-threaded; drop it last).
    pub ex: Executor,
    /// The machine.
    pub machine: Machine,
    /// The drive or the persistent memory.
    pub medium: Medium,
}

impl std::fmt::Debug for Medium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Medium::Drive { mode, .. } => write!(f, "drive ({} mode)", mode.name()),
            Medium::Pmem(pm) => write!(f, "{pm:?}"),
        }
    }
}

impl std::fmt::Debug for Rig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rig").field("medium", &self.medium).finish()
    }
}

impl Rig {
    /// The machine under an image: the default profile with one core per
    /// hardware queue and [`DRAM_BYTES`] of host memory. It is the machine
    /// crashfuzz boots for a saved run of these cores and DRAM
    /// (`crashfuzz::SavedConfig::machine`), so a recorded mount runs on
    /// the machine it is explored on.
    pub fn machine_profile(header: &Header) -> MachineProfile {
        crashfuzz::machine_profile(header.queues as usize, DRAM_BYTES)
    }

    /// Boots a machine shaped by `header` over `media` and `pmr`.
    pub fn boot(header: &Header, media: Media, pmr: PageStore, trace: TraceMode) -> Result<Rig, CliError> {
        Rig::boot_on(header, Rig::machine_profile(header), media, pmr, trace)
    }

    /// Boots `machine` with the drive `header` names over `media` and
    /// `pmr`.
    fn boot_on(
        header: &Header,
        machine: MachineProfile,
        media: Media,
        pmr: PageStore,
        trace: TraceMode,
    ) -> Result<Rig, CliError> {
        let profile = header.ssd_profile().map_err(CliError::Usage)?;
        let ex = Executor::new(SEED);
        let machine = Machine::new(&ex, machine, trace);
        let ctrl = Controller::attach(&machine, ControllerConfig::new(profile), media, Some(pmr))?;
        // A power-loss-protected cache's blocks are durable on arrival: put
        // them in the media file then, so a killed process keeps them.
        ctrl.backend().set_plp_write_through(true);
        Ok(Rig {
            ex,
            machine,
            medium: Medium::Drive {
                ctrl,
                mode: header.mqfs_mode().map_err(CliError::Usage)?,
            },
        })
    }

    /// Boots over a persistent-memory image for real: persistent memory of
    /// the image's size in the header's persistence domain (the other
    /// fields as `PmemProfile::default`), holding `bytes` (what `IMAGE`
    /// holds: [`LockedImage::pm_store`], or zeros for a new image), every
    /// write into the persistence domain going to `IMAGE` as it happens
    /// (so a killed process leaves what a power failure would).
    pub fn on_pm_image(image: &LockedImage, bytes: PageStore) -> Result<(Rig, Rc<WriteThrough>), CliError> {
        let rig = Rig::pm_sandbox(image, bytes)?;
        let file = image.pm_file()?;
        rig.pmem()?.set_persist_hook(Some(file.hook()));
        Ok((rig, file))
    }

    /// Boots over a persistent-memory image as [`Rig::on_pm_image`] does,
    /// but nothing reaches the file.
    pub fn pm_sandbox(image: &LockedImage, bytes: PageStore) -> Result<Rig, CliError> {
        let header = &image.header;
        let profile = PmemProfile {
            size: header.blocks * nvme_ctrl::BLOCK as u64,
            domain: header.domain().map_err(CliError::Usage)?,
            ..PmemProfile::default()
        };
        let ex = Executor::new(SEED);
        let machine = Machine::new(&ex, Rig::machine_profile(header), TraceMode::Off);
        let pm = Pmem::attach_with_image(&machine, profile, bytes).map_err(FsError::Bus)?;
        Ok(Rig {
            ex,
            machine,
            medium: Medium::Pmem(pm),
        })
    }

    /// The drive (an error for a persistent-memory image).
    pub fn ctrl(&self) -> Result<&Rc<Controller>, CliError> {
        match &self.medium {
            Medium::Drive { ctrl, .. } => Ok(ctrl),
            Medium::Pmem(_) => Err(CliError::Usage(
                "the image is on persistent memory, not a drive".into(),
            )),
        }
    }

    /// The persistent memory (an error for a drive image).
    pub fn pmem(&self) -> Result<&Pmem, CliError> {
        match &self.medium {
            Medium::Pmem(pm) => Ok(pm),
            Medium::Drive { .. } => Err(CliError::Usage(
                "the image is on a drive, not persistent memory".into(),
            )),
        }
    }

    /// MQFS's consistency mode (an error for a persistent-memory image).
    fn mode(&self) -> Result<Mode, CliError> {
        match &self.medium {
            Medium::Drive { mode, .. } => Ok(*mode),
            Medium::Pmem(_) => Err(CliError::Usage(
                "the image is on persistent memory, not MQFS".into(),
            )),
        }
    }

    /// Makes the medium's files durable on the host (the drive's media
    /// file; persistent memory writes through on its own).
    pub fn sync_files(&self) -> Result<(), CliError> {
        match &self.medium {
            Medium::Drive { ctrl, .. } => Ok(ctrl.backend().sync()?),
            Medium::Pmem(_) => Ok(()),
        }
    }

    /// Boots over the image's files for real: media writes go to `IMAGE`,
    /// PMR writes to `IMAGE.pmr` as they land.
    pub fn on_image(image: &LockedImage) -> Result<(Rig, Rc<WriteThrough>), CliError> {
        let rig = Rig::boot(
            &image.header,
            image.media_rw()?,
            image.pmr_store()?,
            TraceMode::Off,
        )?;
        let pmr = image.pmr_file()?;
        rig.machine.set_pmr_write_hook(0, Some(pmr.hook()));
        Ok((rig, pmr))
    }

    /// Boots `machine` over the image's files, as [`Rig::on_image`] does,
    /// keeping the full bus trace (payloads included) from power-on; also
    /// returns the PMR and media content at power-on, the base a saved
    /// run's crash states are rebuilt from.
    pub fn recording(
        image: &LockedImage,
        machine: MachineProfile,
    ) -> Result<(Rig, Rc<WriteThrough>, PageStore, Arc<Image>), CliError> {
        let media = image.media_rw()?;
        let base_media = Arc::new(media.freeze());
        let pmr_store = image.pmr_store()?;
        let base_pmr = pmr_store.clone();
        let rig = Rig::boot_on(&image.header, machine, media, pmr_store, TraceMode::Full)?;
        let pmr = image.pmr_file()?;
        rig.machine.set_pmr_write_hook(0, Some(pmr.hook()));
        Ok((rig, pmr, base_pmr, base_media))
    }

    /// Boots over a copy-on-write view of the image: nothing reaches the
    /// files.
    pub fn sandbox(image: &LockedImage) -> Result<Rig, CliError> {
        let media = Media::cow(image.media_snapshot()?, Default::default());
        Rig::boot(&image.header, media, image.pmr_store()?, TraceMode::Off)
    }

    /// Runs `fut` to completion (at most [`OP_LIMIT`] of simulated time).
    pub fn run<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> Result<T, RunError> {
        let limit = self.ex.sim().now() + OP_LIMIT;
        self.ex.block_on_until(fut, Some(limit))
    }

    /// Runs a file-system operation.
    pub fn run_fs<T: 'static>(
        &self,
        fut: impl Future<Output = Result<T, FsError>> + 'static,
    ) -> Result<T, CliError> {
        Ok(self.run(fut)??)
    }

    /// Probes the drive the way the image's mode needs.
    pub fn probe(&self) -> Result<Rc<BlockDevice>, CliError> {
        let (m, opts) = (self.machine.clone(), mqfs::probe_options(self.mode()?));
        Ok(self.run(async move { BlockDevice::probe(&m, 0, opts).await })??)
    }

    /// Probes and mounts (running the mode's recovery) with the file
    /// system's clock starting at `clock_base_ns` (ns since 1970, raised to
    /// the image's newest time + 1 if older; [`FsProfile::clock_base_ns`]).
    /// Each damaged journal transaction the recovery dropped is one line on
    /// stderr (as the kernel logs JBD2's "Invalid checksum recovering ...").
    pub fn mount(&self, clock_base_ns: u64) -> Result<(Rc<BlockDevice>, Rc<Fs>), CliError> {
        self.mount_with(FsProfile {
            clock_base_ns,
            ..FsProfile::default()
        })
    }

    /// [`Rig::mount`] with the file system's profile `profile` (a mount
    /// option's field set, its clock base).
    pub fn mount_with(&self, profile: FsProfile) -> Result<(Rc<BlockDevice>, Rc<Fs>), CliError> {
        let dev = self.probe()?;
        let d = dev.clone();
        let fs = self.run_fs(async move { mqfs::mount(&d, Ctx::on(0), profile).await })?;
        for damage in fs.journal_damage() {
            eprintln!("mqfs: journal recovery: {damage}");
        }
        let mode = self.mode()?;
        if fs.mode() != mode {
            return Err(CliError::Fs(FsError::Corrupt(format!(
                "the header says {} but the file system is {}",
                mode.name(),
                fs.mode().name()
            ))));
        }
        Ok((dev, fs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_is_the_one_a_saved_run_describes() {
        let header = Header {
            fs: crate::header::ImageFs::Mqfs(Mode::Mq),
            profile: "flash-vwc".into(),
            queues: 3,
            blocks: 4096,
            pmr_bytes: 2 << 20,
        };
        let config = crashfuzz::SavedConfig {
            dram_bytes: DRAM_BYTES,
            ..crashfuzz::SavedConfig::new(
                "t",
                crashfuzz::ModeName::Mq,
                nvme_ctrl::SsdProfile::by_name("flash-vwc").expect("a built-in profile"),
                3,
            )
        };
        assert_eq!(Rig::machine_profile(&header), config.machine());
        assert_eq!(config.machine().cpu.cores, 3);
    }
}
