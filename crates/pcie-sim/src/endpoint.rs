//! The seam between the machine and a device: what a PCIe function exposes
//! (its BARs) and the callbacks through which requests reach it.
//!
//! A device implements [`Endpoint`]. The machine calls it when a request
//! takes effect at the device, in bus order, at the simulated time the link
//! and the device's ingress say. The device reaches back through the
//! [`crate::DevicePort`] it was given: DMA, MSI-X, its PMR and the trace.

use crate::pmr::PmrTiming;
use crate::time::SimDuration;

/// Why the completer rejected a request: it is answered with an
/// Unsupported Request completion (reads) or dropped and logged (posted
/// writes), as PCIe 3.0 2.3.1 specifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported(pub &'static str);

/// Which accesses the register BAR accepts. NVMe 1.4 3.1: registers are
/// accessed as naturally aligned 32-bit (or, for 64-bit registers, 64-bit)
/// quantities; anything else is rejected before it reaches the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RegisterAccess {
    /// Only naturally aligned 4- and 8-byte accesses.
    #[default]
    Aligned32Or64,
    /// Any size and alignment (for test devices).
    Any,
}

impl RegisterAccess {
    /// True if an access of `len` bytes at `offset` is allowed.
    pub fn allows(self, offset: u64, len: usize) -> bool {
        match self {
            RegisterAccess::Any => true,
            RegisterAccess::Aligned32Or64 => (len == 4 || len == 8) && offset % len as u64 == 0,
        }
    }
}

/// A Persistent Memory Region BAR: prefetchable, mapped write-combining by
/// the host (ccNVMe 6: `ioremap_wc`), backed by storage that survives power
/// failure.
#[derive(Clone, Debug, PartialEq)]
pub struct PmrBar {
    /// Size in bytes (2 MiB in the paper, ccNVMe 7.1).
    pub size: u64,
    /// Timing of the device-side PMR path.
    pub timing: PmrTiming,
}

/// The BARs a device exposes.
#[derive(Clone, Debug, PartialEq)]
pub struct BarLayout {
    /// Size of BAR0 (registers and doorbells), mapped uncached.
    pub regs_size: u64,
    /// Which register accesses are legal.
    pub register_access: RegisterAccess,
    /// Device time to apply a register write or answer a register read.
    pub register_latency: SimDuration,
    /// The PMR BAR, if the device has one.
    pub pmr: Option<PmrBar>,
}

/// Which BAR a bus address decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    /// BAR0: registers and doorbells.
    Registers,
    /// The PMR BAR.
    Pmr,
}

/// A PCIe function as the machine sees it.
pub trait Endpoint {
    /// A posted write to the register BAR took effect. An error means the
    /// device rejected it (the write is dropped and counted).
    fn reg_write(&self, offset: u64, data: &[u8]) -> Result<(), Unsupported>;

    /// A read of the register BAR; fill `out`.
    fn reg_read(&self, offset: u64, out: &mut [u8]) -> Result<(), Unsupported>;

    /// Whether the PMR accepts host accesses now (NVMe PMRCTL.EN). While it
    /// does not, writes are dropped and reads fail (NVMe 1.4 3.1.25).
    fn pmr_enabled(&self) -> bool {
        true
    }

    /// A posted write landed in the PMR; it is already persistent.
    fn pmr_written(&self, _offset: u64, _len: u64) {}
}
