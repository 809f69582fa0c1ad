//! Shared setup for the driver's integration tests.
#![allow(dead_code)]

use std::rc::Rc;

use ccnvme::{BlockDevice, DriverFaults, ProbeOptions, RegionLoad};
use nvme_ctrl::{Controller, ControllerConfig, Media, SsdProfile};
use pcie_sim::{Executor, HostAddr, Machine, MachineProfile, PageStore, TraceMode};

/// A machine with one controller of `profile` over `media` and the PMR
/// `pmr`; returns the executor, machine and controller.
pub fn machine(
    profile: SsdProfile,
    media: Media,
    pmr: Option<PageStore>,
    mode: TraceMode,
) -> (Executor, Machine, Rc<Controller>) {
    machine_seeded(5, profile, media, pmr, mode)
}

/// [`machine`] with the executor's seed `seed`.
pub fn machine_seeded(
    seed: u64,
    profile: SsdProfile,
    media: Media,
    pmr: Option<PageStore>,
    mode: TraceMode,
) -> (Executor, Machine, Rc<Controller>) {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), mode);
    let ctrl = Controller::attach(&m, ControllerConfig::new(profile), media, pmr).unwrap();
    (ex, m, ctrl)
}

/// Horae on the default driver with `faults`, except that recovery reads
/// only the live slots of the ordering queue: these tests recover many
/// crash states, and that load decides the same as the whole region's
/// (`RegionLoad`, `tests/horae_recovery_load.rs`).
pub fn horae_options(faults: DriverFaults) -> ProbeOptions {
    let mut o = ProbeOptions {
        ccnvme: false,
        horae: true,
        ..Default::default()
    };
    o.profile.faults = faults;
    o.profile.horae_recovery_load = RegionLoad::Live;
    o
}

/// Probes the device with default options (ccNVMe on).
pub fn probe(ex: &Executor, m: &Machine, opts: ProbeOptions) -> Rc<BlockDevice> {
    let m2 = m.clone();
    ex.block_on(async move { BlockDevice::probe(&m2, 0, opts).await })
        .unwrap()
        .unwrap()
}

/// A machine with one Optane 905P of 4096 blocks in memory (trace off),
/// probed with `opts`.
pub fn optane_device(opts: ProbeOptions) -> (Executor, Machine, Rc<BlockDevice>) {
    let (ex, m, _) = machine(
        SsdProfile::optane_905p(),
        Media::memory(4096),
        None,
        TraceMode::Off,
    );
    let dev = probe(&ex, &m, opts);
    (ex, m, dev)
}

/// `n` zeroed host pages filled with a pattern of `seed`.
pub fn pages(m: &Machine, n: usize, seed: u8) -> Vec<HostAddr> {
    (0..n)
        .map(|i| {
            let p = m.memory().alloc(4096).unwrap();
            m.memory().write(p, &[seed.wrapping_add(i as u8); 4096]).unwrap();
            p
        })
        .collect()
}

/// A machine (default profile, executor seeded with `seed`) with `drives`,
/// drive `i` on port `i` (the shared `nvme_ctrl::attach_drives`).
pub fn machine_with_drives(
    seed: u64,
    drives: Vec<nvme_ctrl::Drive>,
    mode: TraceMode,
) -> (Executor, Machine, Vec<Rc<Controller>>) {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), mode);
    let ctrls = nvme_ctrl::attach_drives(&m, drives).unwrap();
    (ex, m, ctrls)
}

/// Probes the drives on ports `0..n` with `opts`.
pub fn probe_all(ex: &Executor, m: &Machine, n: u8, opts: ProbeOptions) -> Vec<Rc<BlockDevice>> {
    (0..n)
        .map(|port| {
            let (m2, o) = (m.clone(), opts.clone());
            ex.block_on(async move { BlockDevice::probe(&m2, port, o).await })
                .unwrap()
                .unwrap()
        })
        .collect()
}
