//! Mount options: the CPU costs of the DRAM work, and the fault switches.

use fsapi::CpuCosts;

use crate::faults::Faults;

/// Everything [`crate::Pmfs::mount_with`] takes besides the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Mechanisms switched off (tests).
    pub faults: Faults,
    /// What the DRAM work of a call costs on its core.
    pub cpu: CpuCosts,
}

impl From<Faults> for Options {
    /// The default options with `faults`.
    fn from(faults: Faults) -> Options {
        Options {
            faults,
            ..Options::default()
        }
    }
}
