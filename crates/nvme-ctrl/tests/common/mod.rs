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

// --- Helpers for the malformed-input, random-command and power-failure tests ---

/// Enables the controller with a 32-entry admin queue pair and creates I/O
/// queue pair 1 with `entries` entries, asserting that every step succeeds.
pub async fn bring_up(host: &TestHost, entries: u32) {
    host.enable(32).await.unwrap();
    let (cq, sq) = host.create_io_pair(1, entries).await.unwrap();
    assert!(cq.status.is_success(), "create I/O CQ 1: {}", cq.status);
    assert!(sq.status.is_success(), "create I/O SQ 1: {}", sq.status);
}

/// Every block of the controller's media store (bypassing timing and cache).
pub fn media_blocks(ctrl: &Controller) -> Vec<Vec<u8>> {
    let media = ctrl.backend().media();
    (0..media.blocks())
        .map(|b| {
            let mut buf = [0u8; nvme_ctrl::BLOCK];
            media.read(b, &mut buf);
            buf.to_vec()
        })
        .collect()
}

/// Allocates `pages` pages of host memory holding `pattern(first_lba + i, g)`
/// in page `i`; returns its address.
pub fn pattern_buffer(m: &Machine, pages: u64, first_lba: u64, g: u8) -> pcie_sim::HostAddr {
    let buf = m.memory().alloc(pages * 4096).unwrap();
    for i in 0..pages {
        m.memory()
            .write(buf + i * 4096, &pattern(first_lba + i, g))
            .unwrap();
    }
    buf
}

/// Allocates a PRP list page holding `entries`; returns its address.
pub fn prp_list(m: &Machine, entries: &[u64]) -> pcie_sim::HostAddr {
    assert!(entries.len() <= 512);
    let list = m.memory().alloc(4096).unwrap();
    for (i, e) in entries.iter().enumerate() {
        m.memory().write(list + i as u64 * 8, &e.to_le_bytes()).unwrap();
    }
    list
}

/// `len` bytes of host memory at `addr`.
pub fn host_bytes(m: &Machine, addr: pcie_sim::HostAddr, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    m.memory().read(addr, &mut v).unwrap();
    v
}
