//! A machine with several drives: one constructor for every test, bench
//! and crash explorer that plugs more than one controller in.
//!
//! Each drive is its own [`Controller`] on its own port of the machine:
//! its own link (the machine's per-port serializers and credits), its own
//! back end with its volatile cache (if its profile has one) and its own
//! PMR. Drive `i` of the list gets port `i` when the machine had no device
//! before, so the host probes it as `BlockDevice::probe(machine, i, ..)`.

use std::rc::Rc;

use pcie_sim::{Machine, PageStore};

use crate::controller::{Controller, ControllerConfig};
use crate::error::CtrlError;
use crate::media::Media;
use crate::profile::SsdProfile;

/// One drive to plug in: how to build it, its media, and what its PMR
/// holds at power-on (`None`: zeroed).
#[derive(Debug)]
pub struct Drive {
    /// The controller's configuration.
    pub config: ControllerConfig,
    /// The media (fresh, or an image an earlier run or a crash left).
    pub media: Media,
    /// The PMR content at power-on.
    pub pmr: Option<PageStore>,
}

impl Drive {
    /// A fresh drive of `profile` over `blocks` of memory media.
    pub fn fresh(profile: SsdProfile, blocks: u64) -> Drive {
        Drive {
            config: ControllerConfig::new(profile),
            media: Media::memory(blocks),
            pmr: None,
        }
    }
}

/// Plugs `drives` into `machine` in order (drive `i` on the `i`-th port
/// added) and returns their controllers in the same order.
pub fn attach_drives(machine: &Machine, drives: Vec<Drive>) -> Result<Vec<Rc<Controller>>, CtrlError> {
    drives
        .into_iter()
        .map(|d| Controller::attach(machine, d.config, d.media, d.pmr))
        .collect()
}
