//! Shared setup for the integration tests.
#![allow(dead_code)]

use std::rc::Rc;

use nvme_ctrl::testing::TestHost;
use nvme_ctrl::{Controller, ControllerConfig, Media, SsdProfile};
use pcie_sim::{Executor, Machine, MachineProfile, TraceMode};

/// A machine with one controller of `profile` over `blocks` of memory
/// media, and a test driver on core 0.
pub fn setup(
    profile: SsdProfile,
    blocks: u64,
    mode: TraceMode,
) -> (Executor, Machine, Rc<Controller>, TestHost) {
    let ex = Executor::new(1);
    let m = Machine::new(&ex, MachineProfile::default(), mode);
    let ctrl = Controller::attach(&m, ControllerConfig::new(profile), Media::memory(blocks), None).unwrap();
    let host = TestHost::new(&m, 0, 0).unwrap();
    (ex, m, ctrl, host)
}

/// A 4 KiB buffer pattern for block `lba` of generation `g`.
pub fn pattern(lba: u64, g: u8) -> Vec<u8> {
    (0..4096)
        .map(|i| (i as u64 ^ lba.wrapping_mul(31) ^ g as u64) as u8)
        .collect()
}
