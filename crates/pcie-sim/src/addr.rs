//! Address newtypes: one per address space, so that mixing them up does not
//! compile.

use std::fmt;
use std::ops::Add;

/// An address on the PCIe bus as the CPU and devices see it. Host DRAM is
/// identity-mapped at bus address 0 (no IOMMU), device BARs sit above it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BusAddr(pub u64);

/// An address in host DRAM (a host physical address).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostAddr(pub u64);

/// A byte offset inside a device's Persistent Memory Region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PmrOffset(pub u64);

impl HostAddr {
    /// The bus address devices use to reach this host address by DMA.
    pub fn bus(self) -> BusAddr {
        BusAddr(self.0)
    }
}

impl BusAddr {
    /// The 64-byte cache line (and write-combining line) holding this address.
    pub fn line(self) -> BusAddr {
        BusAddr(self.0 & !63)
    }
}

macro_rules! addr_ops {
    ($t:ident) => {
        impl Add<u64> for $t {
            type Output = $t;
            fn add(self, rhs: u64) -> $t {
                $t(self.0 + rhs)
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}
addr_ops!(BusAddr);
addr_ops!(HostAddr);
addr_ops!(PmrOffset);
