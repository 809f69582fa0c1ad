//! Mount options: how packages are written, and the fault switches.

use fsapi::CpuCosts;

use crate::faults::Faults;

/// How a package's lines reach the persistent memory (both idioms end in
/// the one `sfence` that is the package's ordering point).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PackageWrite {
    /// Cached stores, then `clwb` of each line.
    #[default]
    Cached,
    /// Non-temporal stores through the write-combining buffers (no flush
    /// needed; [`Faults::skip_clwb`] has nothing to skip).
    NonTemporal,
}

/// Everything [`crate::Wofs::mount_with`] takes besides the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// How packages are written.
    pub package_write: PackageWrite,
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
